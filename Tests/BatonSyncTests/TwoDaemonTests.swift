@testable import BatonSync
import DBus
import Foundation
import Testing
import TestSupport

/// Two batond daemons on two private buses, each with its own state directory, joined to one
/// user on a real PostgreSQL server; driven as any client would, through the Sync interface.
@Suite(.serialized) struct TwoDaemonTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let sync = "org.baton.Handoff1.Sync"
    static let type = "com.raywenderlich.hawknotes.staterestore.characterDetail"

    @Test func advertisedOnOneMachineSeenOnTheOther() async throws {
        let setup = try await SyncServer.fresh()
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }

        // Off until set up; Init through gdbus, a client we did not write.
        #expect(try await desktop.syncProperty("State")?.stringValue == "off")
        let desktopURL = try await setup.addDevice(user: "ana").url
        let initialized = try await desktop.run("gdbus", [
            "call", "--session", "--dest", "org.baton.Handoff1", "--object-path", "/org/baton/Handoff1",
            "--method", "\(Self.sync).Init", desktopURL, "{'device_name': 'desktop'}",
        ])
        #expect(initialized.status == 0, "\(initialized)")
        let words = try #require(initialized.stdout.split(separator: "'").dropFirst().first.map(String.init))
        #expect(words.split(separator: " ").count == 9)

        // Wrong words on the laptop: InvalidArgument from busctl, and the laptop stays off.
        let laptopURL = try await setup.addDevice(user: "ana").url
        let wrong = try await laptop.run("busctl", [
            "--user", "call", "org.baton.Handoff1", "/org/baton/Handoff1", Self.sync, "Join", "ssa{ss}",
            laptopURL, UserKey.generate().recoveryWords, "0",
        ])
        #expect(wrong.status != 0 && wrong.stderr.contains("these recovery words are not ana's key"), "\(wrong)")
        #expect(try await laptop.syncProperty("DeviceId")?.stringValue == "")
        _ = try await laptop.call(Self.sync, "Join", [.string(laptopURL), .string(words), .stringMap(["device_name": "laptop"])])

        // Advertised on the desktop: Advertised on the laptop's bus, then List and Search there.
        let advertised = try await SignalLog(laptop.client, MatchRule(interface: Self.activities, member: "Advertised"))
        _ = try await desktop.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string(Self.type), .string("com.raywenderlich.hawknotes"), .stringMap(["title": "Character"]),
        ])
        let id = try #require(try await desktop.call(Self.activities, "Advertise", [
            .string(Self.type), .string("Agatha"), .string(#"{"id":"agatha"}"#),
            .stringMap(["keywords": "witch", "eligible_for_search": "true"]),
        ]).first?.stringValue)
        try await advertised.wait(for: "Advertised on the laptop", timeout: .seconds(10)) { $0.body.first?.stringValue == id }
        let listed = try #require(try await laptop.call(Self.activities, "List", [.stringMap([:])]).first?.arrayValue)
        #expect(listed.count == 1)
        let record = try #require(listed.first)
        let deviceID = try await desktop.syncProperty("DeviceId")?.stringValue
        #expect(record.field("device")?.stringValue == deviceID && deviceID?.isEmpty == false)
        #expect(record.field("title")?.stringValue == "Agatha" && record.field("device_name")?.stringValue == "desktop")
        // Filtered by where they came from: by name, by id, other machines', this machine's.
        for filter in ["desktop", deviceID ?? "?", "remote"] {
            #expect(try await laptop.call(Self.activities, "List", [.stringMap(["device": filter])]).first?.arrayValue?.count == 1, "\(filter)")
        }
        #expect(try await laptop.call(Self.activities, "List", [.stringMap(["device": "local"])]).first?.arrayValue?.count == 0)
        await #expect(throws: DBusError.self) { try await laptop.call(Self.activities, "List", [.stringMap(["device": "toaster"])]) }
        let found = try #require(try await laptop.call(Self.activities, "Search", [.string("witch"), .uint32(10)]).first?.arrayValue)
        #expect(found.compactMap { $0.field("id")?.stringValue } == [id])
        // The desktop's own list shows it as this machine's (no device field).
        let own = try #require(try await desktop.call(Self.activities, "List", [.stringMap([:])]).first?.arrayValue)
        #expect(own.first?.field("device") == nil)

        // Only the machine that advertised it changes it.
        await #expect(throws: DBusError.self) {
            try await laptop.call(Self.activities, "Update", [.string(id), .string("{}"), .stringMap(["title": "Hijacked"])])
        }

        // Invalidated there, gone here, announced.
        let invalidated = try await SignalLog(laptop.client, MatchRule(interface: Self.activities, member: "Invalidated"))
        _ = try await desktop.call(Self.activities, "Invalidate", [.string(id)])
        try await invalidated.wait(for: "Invalidated on the laptop", timeout: .seconds(10)) { $0.body.first?.stringValue == id }

        // Invalidated here, of another machine's: gone here at once, and on its own machine
        // when the request arrives; a later copy never brings it back.
        let jamie = try #require(try await desktop.call(Self.activities, "Advertise", [
            .string(Self.type), .string("Jamie"), .string(#"{"id":"jamie"}"#), .stringMap([:]),
        ]).first?.stringValue)
        try await advertised.wait(for: "Jamie on the laptop", timeout: .seconds(10)) { $0.body.first?.stringValue == jamie }
        let gone = try await SignalLog(desktop.client, MatchRule(interface: Self.activities, member: "Invalidated"))
        _ = try await laptop.call(Self.activities, "Invalidate", [.string(jamie)])
        await #expect(throws: DBusError.self) { try await laptop.call(Self.activities, "Get", [.string(jamie)]) }
        try await gone.wait(for: "Jamie invalidated on the desktop", timeout: .seconds(10)) { $0.body.first?.stringValue == jamie }
        let explained = try #require(try await desktop.call(Self.activities, "Explain", [.string(jamie)]).first)
        #expect(explained.field("state")?.stringValue == "invalidated")

        // Devices, and the state, from the laptop.
        let devices = try #require(try await laptop.call(Self.sync, "Devices").first?.arrayValue)
        #expect(devices.compactMap { $0.field("name")?.stringValue } == ["laptop", "desktop"])
        // Each device tells the server when it connected (after joining, so later than that).
        #expect(devices.last?.field("last_seen")?.uint64Value ?? 0 > 0)
        #expect(try await setup.psql("SELECT bool_and(last_seen > joined_at) FROM baton.device") == "t\n")
        #expect(try await laptop.syncProperty("State")?.stringValue == "online")
    }

    /// The same through `baton`, as the guide tells a user to do it.
    @Test func theCommandLineSetsUpSyncAndShowsWhereActivitiesCameFrom() async throws {
        let setup = try await SyncServer.fresh()
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }

        let off = try await laptop.baton(["sync", "status"])
        #expect(off.stdout.hasPrefix("sync is off"), "\(off)")
        let initialized = try await desktop.baton(["sync", "init", try await setup.addDevice(user: "ana").url, "--name", "desktop", "--json"])
        #expect(initialized.status == 0, "\(initialized)")
        let words = try #require(initialized.stdout.split(separator: "\"").dropFirst(3).first.map(String.init))

        let laptopURL = try await setup.addDevice(user: "ana").url
        let mistyped = try await laptop.baton(["sync", "join", laptopURL], stdin: words.replacingOccurrences(of: " ", with: "") + "\n")
        #expect(mistyped.status == 3 && mistyped.stderr.contains("recovery words are 9 words; 1 was given"), "\(mistyped)")
        let joined = try await laptop.baton(["sync", "join", laptopURL, "--name", "laptop"], stdin: words + "\n")
        #expect(joined.status == 0, "\(joined)")

        _ = try await desktop.baton(["types", "register", Self.type, "--app", "com.raywenderlich.hawknotes"])
        _ = try await desktop.baton(["activities", "advertise", Self.type, "Agatha", #"{"id":"agatha"}"#])
        _ = try await laptop.baton(["types", "register", "org.example.local", "--app", "org.example"])
        _ = try await laptop.baton(["activities", "advertise", "org.example.local", "Laptop note", "{}"])
        try await eventually("Agatha reaches the laptop", timeout: .seconds(10)) {
            try await laptop.baton(["activities", "list"]).stdout.contains("Agatha")
        }
        let listed = try await laptop.baton(["activities", "list"])
        let lines = listed.stdout.split(separator: "\n")
        #expect(lines.first?.hasSuffix("FROM") == true, "\(listed)")
        #expect(lines.contains { $0.contains("Agatha") && $0.hasSuffix("desktop") }, "\(listed)")
        #expect(lines.contains { $0.contains("Laptop note") && $0.hasSuffix("this machine") }, "\(listed)")

        let devices = try await laptop.baton(["devices"])
        #expect(devices.stdout.contains("laptop (this machine)") && devices.stdout.contains("desktop"), "\(devices)")
        let status = try await laptop.baton(["sync", "status", "--json"])
        #expect(status.stdout.contains("\"state\":\"online\"") && status.stdout.contains("\"device_name\":\"laptop\""), "\(status)")

        try await eventually("the laptop's note sent") { try await laptop.syncProperty("Outbox")?.uint32Value == 0 }
        let left = try await laptop.baton(["sync", "leave"])
        #expect(left.status == 0, "\(left)")
        let after = try await laptop.baton(["activities", "list"])
        #expect(!after.stdout.contains("Agatha") && after.stdout.contains("Laptop note"), "\(after)")
    }
}

private extension DBusValue {
    /// A field of an `a{sv}` record, its variant unwrapped.
    func field(_ key: String) -> DBusValue? { stringKeyedValue?[key]?.unwrapped }
}

extension TwoDaemonTests {
    /// Each announcement of Sync's properties carries only what changed (most rounds with
    /// the server move LastSyncAt alone), and `baton watch` shows sync's state as
    /// `sync-changed`, never a round by itself nor as a scene.
    @Test func syncAnnouncesWhatChangedAndWatchShowsItsState() async throws {
        let setup = try await SyncServer.fresh()
        let world = try await BatonWorld.started()
        defer { world.close() }
        let announced = try await SignalLog(world.client, MatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))
        let watcher = try await Watcher(world)

        let initialized = try await world.baton(["sync", "init", try await setup.addDevice(user: "ana").url, "--name", "desk"])
        #expect(initialized.status == 0, "\(initialized)")
        _ = try await world.baton(["types", "register", Self.type, "--app", "com.raywenderlich.hawknotes"])
        // Five rounds at least: each advertise sent before the next.
        for index in 0..<5 {
            _ = try await world.baton(["activities", "advertise", Self.type, "Round \(index)", "{}"])
            try await eventually("advertise \(index) sent") { try await world.syncProperty("Outbox")?.uint32Value == 0 }
        }
        let beforeLeaving = announced.count
        let left = try await world.baton(["sync", "leave"])
        #expect(left.status == 0, "\(left)")
        // Both clients hear it, each in its own time: the comparison below waits for both.
        try await announced.wait(for: "sync off announced", after: beforeLeaving) {
            $0.body.first?.stringValue == Self.sync && $0.changedProperties["State"] == .string("off")
        }
        let sync = announced.all.filter { $0.body.first?.stringValue == Self.sync }.map(\.changedProperties)
        let offs = sync.filter { $0["State"] == .string("off") }.count
        try await eventually("watch saw sync off as often") { watcher.output.components(separatedBy: #""State":"off""#).count - 1 >= offs }
        var last: [String: DBusValue] = [:]
        for changed in sync {
            #expect(!changed.isEmpty)
            for (name, value) in changed {
                #expect(last[name] != value, "\(name) announced again unchanged: \(value)")
                last[name] = value
            }
        }
        #expect(sync.filter { Set($0.keys) == ["LastSyncAt"] }.count >= 5, "\(sync)")
        let states = sync.compactMap { $0["State"]?.stringValue }
        // (Init announces the device, then the loop its state: "off" comes first when Init's announcement does.)
        #expect(states.drop { $0 == "off" }.first == "connecting" && states.contains("online") && states.last == "off", "\(states)")

        let events = try watcher.events()
        let syncEvents = events.filter { $0["event"] as? String == "sync-changed" }
        #expect(!events.contains { $0["event"] as? String == "scene-changed" }, "\(events)")
        #expect(syncEvents.count == sync.filter { $0.keys.contains { $0 != "LastSyncAt" } }.count, "\(events)")
        #expect(syncEvents.compactMap { ($0["properties"] as? [String: Any])?["State"] as? String } == states, "\(events)")
        await watcher.stop()
    }
}

/// Sandboxed apps and sync: what a sandboxed app advertises on one machine keeps its app on
/// the other, where only that app's sandbox (and host clients) sees or continues it.
@Suite(.serialized) struct SandboxedSyncTests {
    static let app = "org.example.Sandboxed"
    static let otherApp = "org.example.Other"

    @Test func aSandboxedAppsActivityReachesOnlyThatAppOnTheOtherMachine() async throws {
        let setup = try await SyncServer.fresh()
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }
        let initialized = try await desktop.baton(["sync", "init", try await setup.addDevice(user: "ana").url, "--name", "desktop", "--json"])
        let words = try #require(initialized.stdout.split(separator: "\"").dropFirst(3).first.map(String.init), "\(initialized)")
        let joined = try await laptop.baton(["sync", "join", try await setup.addDevice(user: "ana").url, "--name", "laptop"], stdin: words + "\n")
        #expect(joined.status == 0, "\(joined)")

        // Advertised from inside the app's sandbox on the desktop.
        let id = try #require(try await desktop.runSandboxed(as: Self.app, "advertise", "Chapter 9")["id"] as? String)
        try await eventually("the laptop has it") {
            (try? await laptop.call("org.baton.Handoff1.Activities", "Get", [.string(id)])) != nil
        }
        let record = try #require(try await laptop.call("org.baton.Handoff1.Activities", "Get", [.string(id)]).first?.stringKeyedValue)
        #expect(record["app_id"]?.unwrapped == .string(Self.app), "the record keeps the app that advertised it")

        // On the laptop: the same app's sandbox sees it and continues it; another app's does not know it exists.
        let same = try await laptop.runSandboxed(as: Self.app, "look", id)
        #expect(same["listed"] as? [String] == [id] && same["searched"] as? [String] == [id], "\(same)")
        #expect(same["get"] as? String == "ok" && same["continue"] as? String == "ok", "\(same)")
        let other = try await laptop.runSandboxed(as: Self.otherApp, "look", id)
        #expect(other["listed"] as? [String] == [] && other["searched"] as? [String] == [], "\(other)")
        let notFound = "org.baton.Handoff1.Error.NotFound"
        #expect(other["get"] as? String == notFound && other["continue"] as? String == notFound, "\(other)")
        #expect(other["explained"] as? String == "unknown", "\(other)")
    }
}

/// The desktop's search on the laptop finds the desktop's activities, says where they come
/// from, and KRunner's on-device action opens one on the desktop.
@Suite(.serialized) struct DesktopSearchAcrossMachinesTests {
    static let type = "org.example.notes.page"

    @Test func anotherMachinesActivityIsFoundAndOpenedThere() async throws {
        let setup = try await SyncServer.fresh()
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }
        _ = try await setup.join([desktop, laptop], names: ["desktop", "laptop"])
        for world in [desktop, laptop] {
            _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
                .string(Self.type), .string("org.example.notes"), .stringMap(["title": "Page"]),
            ])
        }
        let id = try #require(try await desktop.call("org.baton.Handoff1.Activities", "Advertise", [
            .string(Self.type), .string("Field walk"), .string("{}"), .stringMap(["eligible_for_search": "true"]),
        ]).first?.stringValue)
        try await eventually("the laptop has it", timeout: .seconds(10)) {
            (try? await laptop.call("org.baton.Handoff1.Activities", "Get", [.string(id)])) != nil
        }

        let provider: ObjectPath = "/org/baton/Handoff1/SearchProvider", runner: ObjectPath = "/org/baton/Handoff1/KRunner"
        let metas = try await laptop.call("org.gnome.Shell.SearchProvider2", "GetResultMetas", [.strings([id])], path: provider)
        let description = metas.first?.arrayValue?.first?.stringKeyedValue?["description"]?.unwrapped.stringValue
        #expect(description?.hasPrefix("Notes · desktop · ") == true, "an app with no desktop entry, in words: \(description ?? "none")")
        let match = try #require(try await laptop.call("org.kde.krunner1", "Match", [.string("field")], path: runner)
            .first?.arrayValue?.first?.structureValue)
        let properties = match.last?.stringKeyedValue
        #expect(properties?["actions"]?.unwrapped == .strings(["continue", "new-scene", "on-device"]), "another machine's: on-device too")
        #expect(properties?["subtext"]?.unwrapped.stringValue?.contains(" · desktop · ") == true)

        // on-device: the desktop opens it.
        _ = try await laptop.call("org.kde.krunner1", "Run", [.string(id), .string("on-device")], path: runner)
        try await eventually("a scene on the desktop shows it", timeout: .seconds(10)) { try await desktop.firstScene(of: "org.example.notes", shows: id) }
        #expect(try await laptop.call("org.baton.Handoff1.Scenes", "ListScenes", [.string("org.example.notes")]).first?.arrayValue?.isEmpty == true,
                "nothing opened on the laptop")

        // The same through the Python client, as the Baton window's "Continue on desktop" does.
        let desktopID = try #require(try await desktop.syncProperty("DeviceId")?.stringValue)
        let asked = try await laptop.run("/usr/bin/python3", ["-c", "import baton; print(baton.Client().continue_activity('\(id)', device='\(desktopID)'))"],
                                         environment: ["PYTHONPATH": Repository.root.appendingPathComponent("python").path, "PYTHONDONTWRITEBYTECODE": "1"])
        #expect(asked.status == 0 && asked.stdout == "None\n", "\(asked)")
        try await eventually("a second scene on the desktop", timeout: .seconds(10)) {
            try await desktop.call("org.baton.Handoff1.Scenes", "ListScenes", [.string("org.example.notes")]).first?.arrayValue?.count == 2
        }
    }
}

/// Runs `body` with a desktop and a laptop that sync through a PostgreSQL database of their own, the
/// laptop's default browser a `TestBrowser` (installed before the laptop's batond starts).
func withBrowsingMachines(_ body: (_ desktop: BatonWorld, _ laptop: BatonWorld, _ browser: TestBrowser) async throws -> Void) async throws {
    let setup = try await SyncServer.fresh()
    let desktop = try await BatonWorld.started(), laptop = try BatonWorld()
    defer { desktop.close(); laptop.close() }
    let browser = try TestBrowser(on: laptop.bus)
    try await laptop.startDaemon()
    _ = try await setup.join([desktop, laptop], names: ["desktop", "laptop"])
    try await body(desktop, laptop, browser)
}

/// Apple's fallback: an activity whose app no one registered on this machine, but which has
/// a web page, opens that page here (Explain says so); without a page it is refused.
@Suite(.serialized) struct WebPageFallbackTests {
    @Test func anActivityOfAnAppNotHereOpensItsWebPage() async throws {
        try await withBrowsingMachines { desktop, laptop, browser in
            let type = "org.example.reader.article"
            _ = try await desktop.call("org.baton.Handoff1.Registry", "RegisterActivityType", [.string(type), .string("org.example.reader"), .stringMap([:])])
            func advertise(_ title: String, _ options: [String: String]) async throws -> String {
                let id = try #require(try await desktop.call("org.baton.Handoff1.Activities", "Advertise", [
                    .string(type), .string(title), .string("{}"), .stringMap(options),
                ]).first?.stringValue)
                try await eventually("the laptop has \(title)", timeout: .seconds(10)) {
                    (try? await laptop.call("org.baton.Handoff1.Activities", "Get", [.string(id)])) != nil
                }
                return id
            }
            let article = try await advertise("An article", ["webpage_url": "https://example.org/article"])
            let explained = try await laptop.call("org.baton.Handoff1.Activities", "Explain", [.string(article)]).first?.stringKeyedValue
            #expect(explained?["continuable"]?.unwrapped == .boolean(true))
            #expect(explained?["reasons"]?.unwrapped.arrayValue?.contains(.string(
                "no app here registered \(type): continuing opens its web page, https://example.org/article, in the default browser")) == true,
                    "\(String(describing: explained))")
            for _ in 0..<2 {  // the same request twice, as a client does when the first reply was lost
                let continued = try await laptop.call("org.baton.Handoff1.Activities", "Continue", [.string(article), .stringMap(["request_id": "open-1"])])
                #expect(continued == [.objectPath("/")], "no scene: the page opened")
            }
            // A second page as a barrier: once it is open, a second opening of the first would have come before it.
            let second = try await advertise("Another article", ["webpage_url": "https://example.org/second"])
            _ = try await laptop.call("org.baton.Handoff1.Activities", "Continue", [.string(second), .stringMap([:])])
            try await eventually("the laptop's browser opened the pages", timeout: .seconds(30)) { browser.opened.contains("https://example.org/second") }
            #expect(browser.opened.filter { $0 == "https://example.org/article" }.count == 1, "\(browser.opened)")

            let pageless = try await advertise("No page", [:])
            let refused = await #expect(throws: DBusError.self) {
                try await laptop.call("org.baton.Handoff1.Activities", "Continue", [.string(pageless), .stringMap([:])])
            }
            #expect(refused?.name == "org.baton.Handoff1.Error.UnknownActivityType")
        }
    }
}

extension TwoDaemonTests {
    /// A pause records nothing the user does meanwhile, updates of activities advertised before
    /// it included: the update lives in memory (read, listed, found), but it is not in the
    /// database file, its WAL or the outbox, and never reaches the server or the other machine;
    /// at Resume the activity is as it was before the pause, and recording goes on.
    @Test func anUpdateWhilePausedStaysInMemoryAndIsUndoneAtResume() async throws {
        let setup = try await SyncServer.fresh()
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }
        let login = try await setup.addDevice(user: "ana")
        let words = try #require(try await desktop.call(Self.sync, "Init", [.string(login.url), .stringMap(["device_name": "desktop"])])
            .first?.stringValue)
        _ = try await laptop.call(Self.sync, "Join", [.string(try await setup.addDevice(user: "ana").url), .string(words), .stringMap([:])])
        _ = try await desktop.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string(Self.type), .string("com.raywenderlich.hawknotes"), .stringMap([:]),
        ])
        let id = try #require(try await desktop.call(Self.activities, "Advertise", [
            .string(Self.type), .string("Agatha"), .string(#"{"id":"agatha","page":1}"#), .stringMap(["eligible_for_search": "true"]),
        ]).first?.stringValue)
        @Sendable func title(on world: BatonWorld) async throws -> String? {
            try await world.call(Self.activities, "Get", [.string(id)]).first?.field("title")?.stringValue
        }
        try await eventually("Agatha reaches the laptop", timeout: .seconds(10)) { (try? await title(on: laptop)) == "Agatha" }
        try await eventually("the desktop's outbox is sent") { try await desktop.syncProperty("Outbox")?.uint32Value == 0 }
        let onServer = "SELECT count(*) FROM baton.record"
        let recordsBefore = try await login.run(onServer)

        // Paused from busctl, updated from dbus-send: clients we did not write.
        let paused = try await desktop.run("busctl", ["--user", "call", "org.baton.Handoff1", "/org/baton/Handoff1", "org.baton.Handoff1.Privacy", "Pause", "t", "0"])
        #expect(paused.status == 0, "\(paused)")
        let marker = "MARKER" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        let updated = try await desktop.run("dbus-send", [
            "--session", "--print-reply", "--dest=org.baton.Handoff1", "/org/baton/Handoff1", "\(Self.activities).Update",
            "string:\(id)", #"string:{"page":2,"note":"\#(marker)"}"#, "dict:string:string:title,Chapter 2 \(marker)",
        ])
        #expect(updated.status == 0, "\(updated)")

        // In memory: read, listed and found as updated.
        #expect(try await title(on: desktop) == "Chapter 2 \(marker)")
        let payload = try await desktop.call(Self.activities, "Get", [.string(id)]).first?.field("payload")?.stringValue
        #expect(payload?.contains(marker) == true, "\(payload ?? "none")")
        let listed = try await desktop.call(Self.activities, "List", [.stringMap([:])]).first?.arrayValue ?? []
        #expect(listed.compactMap { $0.field("title")?.stringValue } == ["Chapter 2 \(marker)"])
        let found = try await desktop.call(Self.activities, "Search", [.string("chapter"), .uint32(5)]).first?.arrayValue ?? []
        #expect(found.compactMap { $0.field("id")?.stringValue } == [id])
        #expect(try await desktop.call(Self.activities, "Search", [.string("agatha"), .uint32(5)]).first?.arrayValue?.isEmpty == true,
                "found by the title it had before the update")
        let explained = try await desktop.call(Self.activities, "Explain", [.string(id)]).first
        #expect("\(explained as Any)".contains("updated while recording was paused"))

        // Not on disk, not in the outbox, not on the server: once batond is idle and checkpointed.
        try await eventually("the WAL is truncated once batond is idle") {
            (try? FileManager.default.attributesOfItem(atPath: desktop.database + "-wal")[.size] as? Int) == 0
        }
        for suffix in ["", "-wal"] {
            let data = FileManager.default.contents(atPath: desktop.database + suffix) ?? Data()
            #expect(data.range(of: Data(marker.utf8)) == nil, "\(suffix.isEmpty ? "the database" : suffix) holds the update made while paused")
        }
        let outbox = try await desktop.run("sqlite3", ["-readonly", desktop.database, "SELECT count(*) FROM outbox"])
        #expect(outbox.stdout == "0\n", "\(outbox)")
        #expect(try await desktop.syncProperty("Outbox")?.uint32Value == 0)
        #expect(try await login.run(onServer) == recordsBefore)
        #expect(try await title(on: laptop) == "Agatha")

        // Resumed: as before the pause, announced; what is updated now is recorded and sent.
        let announced = try await SignalLog(desktop.client, MatchRule(interface: Self.activities, member: "Updated"))
        let resumed = try await desktop.baton(["resume"])
        #expect(resumed.status == 0, "\(resumed)")
        try await announced.wait(for: "Updated at Resume") { $0.body.first?.stringValue == id }
        #expect(try await title(on: desktop) == "Agatha")
        _ = try await desktop.call(Self.activities, "Update", [.string(id), .string(""), .stringMap(["title": "Chapter 3"])])
        try await eventually("the update after the pause reaches the laptop", timeout: .seconds(10)) { (try? await title(on: laptop)) == "Chapter 3" }
        #expect(try await login.run(onServer) != recordsBefore)
    }
}

/// The browser extension's page, through the sync tests' PostgreSQL: recorded on the desktop by
/// its browser's host, continued on the laptop, opened by the laptop's handler at its time.
@Suite(.serialized) struct BrowserPagesAcrossMachinesTests {
    @Test func aPageFromTheDesktopsBrowserOpensOnTheLaptopAtItsTime() async throws {
        try await withBrowsingMachines { desktop, laptop, browser in
            let host = try BrowserHostProcess(on: desktop)
            defer { host.close() }
            let recorded = try await host.request(#"{"kind":"page","tab":4,"url":"https://example.org/talk.webm","title":"The talk","scroll":0,"time":754.2}"#)
            let id = try #require(recorded["id"] as? String, "\(recorded)")
            try await eventually("the laptop has the page", timeout: .seconds(10)) {
                (try? await laptop.call("org.baton.Handoff1.Activities", "Get", [.string(id)])) != nil
            }
            let continued = try await laptop.baton(["continue", id])
            #expect(continued.status == 0, "\(continued)")
            try? await eventually("the laptop's browser opened the page at its time", timeout: .seconds(30)) {
                browser.opened.contains("https://example.org/talk.webm#t=754")
            }
            #expect(browser.opened == ["https://example.org/talk.webm#t=754"], "\(browser.opened); the laptop's log: \(laptop.daemonLog.suffix(3000))")
        }
    }
}
