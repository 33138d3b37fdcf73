import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// "Continue from your laptop": an activity advertised on the desktop arrives on the laptop
/// through the sync tests' PostgreSQL, and the laptop's batond shows one notification through
/// python3-dbusmock's notification server (a server we did not write, needing no display).
@Suite(.serialized) struct NotificationTests {
    static let type = "org.example.notes.page"
    static let notifications = "org.freedesktop.Notifications"
    static let path: ObjectPath = "/org/freedesktop/Notifications"

    func notified(_ laptop: BatonWorld) async throws -> [BatonWorld.Notified] { try await laptop.notified() }

    func advertise(_ desktop: BatonWorld, _ title: String, _ options: [String: String] = [:]) async throws -> String {
        try #require(try await desktop.call("org.baton.Handoff1.Activities", "Advertise", [
            .string(Self.type), .string(title), .string("{}"), .stringMap(options),
        ]).first?.stringValue)
    }

    /// The `Advertised` signals a machine's batond sends, from before anything arrives.
    func announcements(on world: BatonWorld) async throws -> SignalLog {
        try await SignalLog(world.client, MatchRule(interface: "org.baton.Handoff1.Activities", member: "Advertised"))
    }

    /// Waits until the machine whose announcements `log` holds announced `id`: by then it has
    /// decided whether to offer it, so a pause or a block that follows cannot change that.
    func arrived(_ id: String, _ log: SignalLog) async throws {
        try await log.wait(for: "\(id) arrived", timeout: .seconds(20)) { $0.body.first?.stringValue == id }
    }

    @Test(arguments: MachinesMeet.allCases) func anActivityFromTheOtherMachineIsOfferedAndContinuedFromItsNotification(meeting: MachinesMeet) async throws {
        let desktop = try await BatonWorld.started(["--test-clock"]), laptop = try await BatonWorld.started(["--test-clock"])
        defer { desktop.close(); laptop.close() }
        let mock = try Subprocess("/usr/bin/python3", ["-m", "dbusmock", "--template", "notification_daemon",
                                                        "-p", #"{"capabilities": "body actions"}"#], environment: laptop.bus.environment)
        defer { mock.kill(SIGKILL) }
        try await laptop.client.waitForName(Self.notifications, timeout: .seconds(15))
        let arrivals = try await announcements(on: laptop)
        let (place, _) = try await meeting.join([desktop, laptop], names: ["desktop", "laptop"])
        defer { place.close() }
        for world in [desktop, laptop] {
            _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
                .string(Self.type), .string("org.example.notes"), .stringMap(["title": "Page"]),
            ])
        }

        // Advertised on the desktop: one notification on the laptop, its actions Continue and Dismiss.
        let first = try await advertise(desktop, "Field walk, page 7")
        try await eventually("a notification") { try await notified(laptop).count == 1 }
        let shown = try #require(try await notified(laptop).first)
        #expect(shown.summary == "Field walk, page 7" && shown.body == "Notes on desktop", "an app with no desktop entry here is named in words: \(shown)")
        #expect(shown.actions == ["default", "Continue", "dismiss", "Dismiss"] && shown.replaces == 0)
        #expect(shown.hints["desktop-entry"] == .string("org.baton.Baton"))

        // A second replaces it; the notification's Continue continues that one here.
        let second = try await advertise(desktop, "Field walk, page 8")
        try await eventually("a second notification, replacing the first") {
            try await notified(laptop).last.map { $0.summary == "Field walk, page 8" && $0.replaces != 0 } ?? false
        }
        let notificationID = try #require(try await notified(laptop).last?.replaces)
        _ = try await laptop.client.call(Self.notifications, Self.path, "org.freedesktop.DBus.Mock", "EmitSignal", [
            .string(Self.notifications), .string("ActionInvoked"), .string("us"),
            .array(.variant, [.variant(.uint32(notificationID)), .variant(.string("default"))]),
        ])
        try await eventually("continued on the laptop") { try await laptop.firstScene(of: "org.example.notes", shows: second) }
        // The desktop, where it was advertised, hears where it went (its app is told from there).
        let laptopID = try #require(try await laptop.syncProperty("DeviceId")?.stringValue)
        try await eventually("the desktop knows it was continued on the laptop", timeout: .seconds(10)) {
            let last = try await desktop.call("org.baton.Handoff1.Activities", "Explain", [.string(second)]).first?
                .stringKeyedValue?["last_continuation"]?.unwrapped.stringKeyedValue
            return last?["error"]?.unwrapped.stringValue == "continued on device \(laptopID)"
        }
        _ = first

        // Each of these silences it; what comes after each shows it still works.
        var expected = try await notified(laptop).count
        func offered(_ title: String) async throws {
            try await arrived(try await advertise(desktop, title), arrivals)
            try await eventually("\(title) offered") { try await notified(laptop).last?.summary == title }
            expected += 1
        }
        func silent(_ title: String, _ options: [String: String] = [:]) async throws {
            try await arrived(try await advertise(desktop, title, options), arrivals)
        }
        try await silent("Not for handoff", ["eligible_for_handoff": "false"])
        _ = try await laptop.call("org.baton.Handoff1.Privacy", "Pause", [.uint64(0)])
        try await silent("While paused")
        _ = try await laptop.call("org.baton.Handoff1.Privacy", "Resume")
        _ = try await laptop.call("org.baton.Handoff1.Privacy", "BlockApp", [.string("org.example.notes")])
        try await silent("Blocked")
        _ = try await laptop.call("org.baton.Handoff1.Privacy", "UnblockApp", [.string("org.example.notes")])
        let off = try await laptop.baton(["notifications", "off"])
        #expect(off.status == 0 && off.stdout.contains("off"), "\(off)")
        try await silent("Turned off")
        #expect(try await laptop.baton(["notifications", "on"]).stdout.contains(": on"))
        // From a desktop whose clock runs a minute ahead: still fresh.
        _ = try await desktop.call("org.baton.Handoff1.Testing", "AdvanceClock", [.uint64(60 * 1_000_000)])
        try await offered("After all of them")
        // Ten minutes later on the laptop, what arrives looks as old as a catch-up's: not offered.
        _ = try await laptop.call("org.baton.Handoff1.Testing", "AdvanceClock", [.uint64(10 * 60 * 1_000_000)])
        try await silent("Old news")
        let titles = try await notified(laptop).map(\.summary)
        #expect(titles.count == expected, "\(titles)")
        for title in ["Not for handoff", "While paused", "Blocked", "Turned off", "Old news"] {
            #expect(!titles.contains(title), "\(title): \(titles)")
        }
    }

    /// The same with a real notification server: dunst on a display of its own (Xvfb).
    /// `dunstctl action 0` invokes the newest notification's default action; the
    /// notification goes when its activity ends on the machine it came from, or is continued
    /// on a third.
    @Test func dunstShowsItAndItsDefaultActionContinuesIt() async throws {
        let dunstctl = try Executables.require("dunstctl", package: "dunst")
        let setup = try await SyncServer.fresh()
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started(), tablet = try await BatonWorld.started()
        defer { desktop.close(); laptop.close(); tablet.close() }
        let screen = try await VirtualDisplay()
        defer { screen.close() }
        let display = screen.name
        let environment = laptop.bus.environment.merging(["DISPLAY": display]) { $1 }
        // Notifications stay until closed: one that goes, went because batond withdrew it.
        let config = laptop.bus.directory.appendingPathComponent("dunstrc")
        try "[urgency_low]\ntimeout = 0\n[urgency_normal]\ntimeout = 0\n[urgency_critical]\ntimeout = 0\n"
            .write(to: config, atomically: true, encoding: .utf8)
        let dunst = try Subprocess(try Executables.require("dunst", package: "dunst"), ["-config", config.path], environment: environment)
        defer { dunst.kill(SIGKILL) }
        try await laptop.client.waitForName(Self.notifications, timeout: .seconds(15))
        let tabletArrivals = try await announcements(on: tablet)
        _ = try await setup.join([desktop, laptop, tablet], names: ["desktop", "laptop", "tablet"])
        for world in [desktop, laptop, tablet] {
            _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
                .string(Self.type), .string("org.example.notes"), .stringMap(["title": "Page"]),
            ])
        }
        let displayed: @Sendable () async throws -> String = {
            try await laptop.run(dunstctl, ["count", "displayed"], environment: ["DISPLAY": display]).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }

        // Shown; ended on the desktop, withdrawn on the laptop.
        let ended = try await advertise(desktop, "Field walk, page 7")
        try await eventually("dunst shows it") { try await displayed() == "1" }
        if let directory = ProcessInfo.processInfo.environment["BATON_SCREENSHOTS"] {
            let photographed = try await Executables.run("/usr/bin/python3", [
                Repository.root.appendingPathComponent("Tests/Scripts/photograph-screen.py").path, display, directory + "/notification.png",
            ])
            #expect(photographed.status == 0, "\(photographed)")
        }
        _ = try await desktop.call("org.baton.Handoff1.Activities", "Invalidate", [.string(ended)])
        try await eventually("withdrawn when it ended") { try await displayed() == "0" }

        // Shown again for the next; its default action continues it on the laptop.
        let next = try await advertise(desktop, "Field walk, page 8")
        try await eventually("dunst shows the next") { try await displayed() == "1" }
        let invoked = try await laptop.run(dunstctl, ["action", "0"], environment: ["DISPLAY": display])
        #expect(invoked.status == 0, "\(invoked)")
        try await eventually("continued on the laptop") { try await laptop.firstScene(of: "org.example.notes", shows: next) }

        // Continued on the tablet: the laptop withdraws its offer.
        try await eventually("the acted-on notification gone") { try await displayed() == "0" }
        let third = try await advertise(desktop, "Field walk, page 9")
        try await eventually("dunst shows the third") { try await displayed() == "1" }
        try await arrived(third, tabletArrivals)
        _ = try await tablet.call("org.baton.Handoff1.Activities", "Continue", [.string(third), .stringMap([:])])
        try await eventually("withdrawn when continued on the tablet") { try await displayed() == "0" }
        // The tablet has no notification server: it said so once, for three arrivals.
        #expect(tablet.daemonLog.components(separatedBy: "cannot show notifications").count == 2, "\(tablet.daemonLog)")
    }
}
