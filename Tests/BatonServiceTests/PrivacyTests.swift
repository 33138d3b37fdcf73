import BatonCore
import DBus
import Foundation
import Testing
import TestSupport

/// Blocking an app and forgetting one, through the real daemon on a private bus.
@Suite(.serialized)
struct PrivacyTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let privacy = "org.baton.Handoff1.Privacy"

    @Test func aBlockedAppsActivitiesAreRefusedUntilItIsUnblocked() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        try await world.register()
        let before = try await world.advertise("Agatha")
        // busctl, a client we did not write, blocks it; the property says so.
        let blocked = try await world.run("busctl", ["--user", "call", "org.baton.Handoff1", "/org/baton/Handoff1", Self.privacy, "BlockApp", "s", BatonWorld.app])
        #expect(blocked.status == 0, "\(blocked)")
        let property = try await world.call("org.freedesktop.DBus.Properties", "Get", [.string(Self.privacy), .string("BlockedApps")])
        #expect(property.first?.unwrapped == .strings([BatonWorld.app]))

        let refused = try await world.run("dbus-send", [
            "--session", "--print-reply", "--dest=org.baton.Handoff1", "/org/baton/Handoff1", "\(Self.activities).Advertise",
            "string:\(BatonWorld.type)", "string:Jamie", #"string:{"id":"j"}"#, "dict:string:string:",
        ])
        #expect(refused.status != 0 && refused.stderr.contains("org.baton.Handoff1.Error.Blocked"), "\(refused)")
        #expect(await errorName { try await world.call(Self.activities, "Update", [.string(before), .string("{}"), .stringMap(["title": "x"])]) }
                == "org.baton.Handoff1.Error.Blocked")
        #expect(try await world.activityCount() == 1, "what it had stays")
        let status = try await world.baton(["status"])
        #expect(status.stdout.contains("blocked (their activities are refused): \(BatonWorld.app)"), "\(status)")

        let unblocked = try await world.baton(["unblock", BatonWorld.app])
        #expect(unblocked.status == 0, "\(unblocked)")
        _ = try await world.advertise("Jamie")
        #expect(try await world.activityCount() == 2)
    }

    func paused(_ world: BatonWorld) async throws -> Bool? {
        try await world.call("org.freedesktop.DBus.Properties", "Get", [.string(Self.privacy), .string("Paused")]).first?.unwrapped.boolValue
    }

    @Test func whileRecordingIsPausedNothingReachesTheDiskYetEverythingWorks() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        try await world.register(requiredKeys: "")
        let before = try await world.advertise("Before the pause")
        let paused = try await world.run("gdbus", [
            "call", "--session", "--dest", "org.baton.Handoff1", "--object-path", "/org/baton/Handoff1", "--method", "\(Self.privacy).Pause", "@t 0",
        ])
        #expect(paused.status == 0, "\(paused)")
        #expect(try await self.paused(world) == true)

        let marker = "MARKER" + Identifier.make().replacingOccurrences(of: "-", with: "")
        let signals = try await SignalLog(world.client, MatchRule(interface: Self.activities, member: "Invalidated"))
        let secret = try await world.advertise("Reading \(marker)", payload: #"{"note":"\#(marker)"}"#,
                                               options: ["keywords": marker, "eligible_for_search": "true"])
        let other = try await world.advertise("Also \(marker)", payload: #"{"note":"\#(marker)"}"#)
        // Listed (newest first), found, read, updated, explained and continued, as any activity.
        let listed = try #require(try await world.call(Self.activities, "List", [.stringMap([:])]).first?.arrayValue)
        #expect(listed.compactMap { $0.stringKeyedValue?["id"]?.unwrapped.stringValue } == [other, secret, before])
        #expect(try await world.call(Self.activities, "Search", [.string(String(marker.prefix(10)).lowercased()), .uint32(5)]).first?.arrayValue?.count == 1)
        _ = try await world.call(Self.activities, "Update", [.string(secret), .string(#"{"page":2}"#), .stringMap(["title": "Chapter 2 \(marker)"])])
        let record = try #require(try await world.call(Self.activities, "Get", [.string(secret)]).first?.stringKeyedValue)
        #expect(record["title"]?.unwrapped.stringValue == "Chapter 2 \(marker)")
        let explained = try #require(try await world.call(Self.activities, "Explain", [.string(secret)]).first?.stringKeyedValue)
        #expect("\(explained)".contains("kept in memory only"))
        let scene = try #require(try await world.call(Self.activities, "Continue", [.string(secret), .stringMap([:])]).first?.objectPathValue)
        #expect(try await world.call("org.freedesktop.DBus.Properties", "Get", [.string("org.baton.Handoff1.Scene"), .string("Title")], path: scene)
            .first?.unwrapped.stringValue == "")
        _ = try await world.call(Self.activities, "Invalidate", [.string(other)])
        #expect(try await world.call("org.baton.Handoff1.Archive", "History", [.stringMap([:])]).first?.arrayValue?.isEmpty == true)

        // Not a byte of it on disk, once batond has checkpointed.
        try await eventually("the WAL is truncated once batond is idle") {
            (try? FileManager.default.attributesOfItem(atPath: world.database + "-wal")[.size] as? Int) == 0
        }
        for suffix in ["", "-wal"] {
            let data = FileManager.default.contents(atPath: world.database + suffix) ?? Data()
            #expect(data.range(of: Data(marker.utf8)) == nil, "\(suffix.isEmpty ? "the database" : suffix) holds what was advertised while paused")
        }
        // The pause survives a restart; what was advertised meanwhile does not.
        #expect(await world.stopDaemon() == 0)
        try await world.startDaemon()
        #expect(try await self.paused(world) == true)
        #expect(await errorName { try await world.call(Self.activities, "Get", [.string(secret)]) } == "org.baton.Handoff1.Error.NotFound")

        // Resumed: what is advertised while paused is forgotten, announced.
        let again = try await world.advertise("Paused again")
        let resumed = try await world.baton(["resume"])
        #expect(resumed.stdout == "recording again\n", "\(resumed)")
        try await signals.wait(for: "Invalidated for what was paused") { $0.body.first?.stringValue == again }
        #expect(try await self.paused(world) == false)
        #expect(try await world.activityCount() == 1)
        _ = try await world.advertise("Recorded")
        #expect(try await world.activityCount() == 2)
    }

    @Test func aPauseForAWhileEndsByItself() async throws {
        let world = try await BatonWorld.started(["--test-clock"])
        defer { world.close() }
        let paused = try await world.baton(["pause", "--for", "2h"])
        #expect(paused.status == 0 && paused.stdout.contains("paused for 2h"), "\(paused)")
        let status = try await world.baton(["status"])
        #expect(status.stdout.contains("recording paused until"), "\(status)")
        // batond's clock stands still but for the test's moves; the move returns once
        // housekeeping has run at the new time.
        try await world.advanceClock(by: .seconds(7_200) - .microseconds(1))
        #expect(try await self.paused(world) == true, "ended a microsecond early")
        try await world.advanceClock(by: .microseconds(1))
        #expect(try await self.paused(world) == false, "still paused after its 2 h")
        let wrong = try await world.baton(["pause", "--for", "soon"])
        #expect(wrong.status == 3 && wrong.stderr.contains("such as 90s"), "\(wrong)")
    }

    @Test func forgettingAnAppLeavesNothingOfItAndTouchesNoOtherApp() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        try await world.register()
        _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string("com.example.maps.place"), .string("com.example.maps"), .stringMap([:]),
        ])
        let marker = "MARKER-" + Identifier.make()
        let live = try await world.advertise("Agatha \(marker)", payload: #"{"id":"\#(marker)"}"#)
        let ended = try await world.advertise("Jamie \(marker)", payload: #"{"id":"\#(marker)"}"#)
        _ = try await world.call(Self.activities, "Invalidate", [.string(ended)])
        let scene = try #require(try await world.call("org.baton.Handoff1.Scenes", "OpenScene", [
            .string(BatonWorld.app), .stringMap(["title": "The Good Hawk"]),
        ]).first?.objectPathValue)
        for key in ["draft", "tab"] {
            _ = try await world.call("org.baton.Handoff1.Scene", "Set", [.string(key), .variant(.string(marker))], path: scene)
        }
        let place = try #require(try await world.call(Self.activities, "Advertise", [
            .string("com.example.maps.place"), .string("Bergen"), .string("{}"), .stringMap([:]),
        ]).first?.stringValue)

        // Not on a terminal and without --yes: refused, nothing removed.
        let asked = try await world.baton(["forget", BatonWorld.app])
        #expect(asked.status == 3 && asked.stderr.contains("--yes"), "\(asked)")
        let forgot = try await world.baton(["forget", BatonWorld.app, "--yes"])
        #expect(forgot.stdout == "forgot \(BatonWorld.app): 1 activity type, 1 live activity, 1 past activity, 1 scene, 2 stored values\n", "\(forgot)")

        #expect(try await world.call("org.baton.Handoff1.Registry", "ListActivityTypes").first?.arrayValue?.count == 1)
        #expect(await errorName { try await world.advertise("Again") } == "org.baton.Handoff1.Error.UnknownActivityType",
                "its type is gone for Advertise too")
        #expect(try await world.call(Self.activities, "List", [.stringMap([:])]).first?.arrayValue?.count == 1)
        #expect(try await world.call("org.baton.Handoff1.Archive", "History", [.stringMap([:])]).first?.arrayValue?.isEmpty == true)
        #expect(try await world.call("org.baton.Handoff1.Scenes", "ListScenes", [.string("")]).first?.arrayValue?.isEmpty == true)
        for id in [live, ended] {
            let explained = try await world.call(Self.activities, "Explain", [.string(id)]).first?.stringKeyedValue
            #expect(explained?["state"]?.unwrapped.stringValue == "unknown", "Explain remembers nothing of it")
        }
        #expect(await errorName { try await world.call("org.baton.Handoff1.Scene", "GetAll", path: scene) } != nil, "the scene is gone from the bus")
        #expect(try await world.call(Self.activities, "Get", [.string(place)]).first != nil, "another app's activity stays")
        try await eventually("the WAL is truncated once batond is idle") {
            (try? FileManager.default.attributesOfItem(atPath: world.database + "-wal")[.size] as? Int) == 0
        }
        for suffix in ["", "-wal"] {
            let data = FileManager.default.contents(atPath: world.database + suffix) ?? Data()
            #expect(data.range(of: Data(marker.utf8)) == nil, "\(suffix.isEmpty ? "the database" : suffix) still holds the app's data")
        }
    }
}
