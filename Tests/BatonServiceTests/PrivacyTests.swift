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
        let world = try await BatonWorld.started()
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

    @Test func forgettingAnAppLeavesNothingOfItAndTouchesNoOtherApp() async throws {
        let world = try await BatonWorld.started()
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
