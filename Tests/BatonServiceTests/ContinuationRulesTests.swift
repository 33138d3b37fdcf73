import BatonCore
import DBus
import Foundation
import Synchronization
import Testing
import TestSupport

/// Wave 2's rules around activities and scenes: what is announced, what is refused.
@Suite(.serialized)
struct ContinuationRulesTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let scenes = "org.baton.Handoff1.Scenes"
    static let scene = "org.baton.Handoff1.Scene"
    static let registry = "org.baton.Handoff1.Registry"
    static let notFound = "org.baton.Handoff1.Error.NotFound"

    func openScene(_ world: BatonWorld) async throws -> ObjectPath {
        try #require(try await world.call(Self.scenes, "OpenScene", [.string(BatonWorld.app), .stringMap([:])]).first?.objectPathValue)
    }

    func activityID(of scene: ObjectPath, _ world: BatonWorld) async throws -> String? {
        try await world.call("org.freedesktop.DBus.Properties", "Get", [.string(Self.scene), .string("ActivityId")], path: scene)
            .first?.unwrapped.stringValue
    }

    /// Waits for `PropertiesChanged`, after the `mark`th signal, saying `scene` now shows `activity` ("" for none).
    func announced(
        _ log: SignalLog, after mark: Int, _ scene: ObjectPath, shows activity: String, _ why: String, timeout: Duration = .seconds(10)
    ) async throws {
        try await log.wait(for: "\(scene.text) shows '\(activity)' (\(why))", after: mark, timeout: timeout) { message in
            message.path == scene && message.changedProperties["ActivityId"] == .string(activity)
        }
    }

    // On a clock the test holds: a move that never returned would hang it; the limit fails it.
    @Test(.timeLimit(.minutes(1))) func everyChangeOfAScenesActivityIsAnnounced() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let clock = ManualClock()
        _ = try await InProcessBatond(on: world, clock: clock) { $0.limits.liveActivitiesPerApp = 20 }
        try await world.register()
        let log = try await SignalLog(world.client, MatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))
        let monitor = try await BusMonitor(bus: world.bus, rules: ["type='signal',interface='\(Self.activities)',member='Updated'"])
        var mark = 0
        var scenes: [ObjectPath] = []
        for _ in 0..<6 { scenes.append(try await openScene(world)) }

        // Invalidate.
        mark = log.count
        let invalidated = try await world.advertise("one", options: ["scene": scenes[0].text])
        try await announced(log, after: mark, scenes[0], shows: invalidated, "advertised in it")
        mark = log.count
        _ = try await world.call(Self.activities, "Invalidate", [.string(invalidated)])
        try await announced(log, after: mark, scenes[0], shows: "", "invalidated")

        // DeleteSaved and DeleteAllSaved.
        mark = log.count
        let saved = try await world.advertise("two", options: ["scene": scenes[1].text, "persistent_id": "p2"])
        _ = try await world.call(Self.activities, "DeleteSaved", [.strings(["p2"])])
        try await announced(log, after: mark, scenes[1], shows: "", "deleted by persistent id")
        #expect(try await activityID(of: scenes[1], world) == "" && !saved.isEmpty)
        mark = log.count
        _ = try await world.advertise("three", options: ["scene": scenes[2].text])
        _ = try await world.call(Self.activities, "DeleteAllSaved", [.string(BatonWorld.app)])
        try await announced(log, after: mark, scenes[2], shows: "", "all of the app's deleted")

        // Update moves an activity between scenes, and resigns it.
        mark = log.count
        let moving = try await world.advertise("four", options: ["scene": scenes[3].text])
        mark = log.count
        _ = try await world.call(Self.activities, "Update", [.string(moving), .string(""), .stringMap(["scene": scenes[4].text])])
        try await announced(log, after: mark, scenes[3], shows: "", "moved away")
        try await announced(log, after: mark, scenes[4], shows: moving, "moved here")
        mark = log.count
        _ = try await world.call(Self.activities, "Update", [.string(moving), .string(""), .stringMap(["scene": ""])])
        try await announced(log, after: mark, scenes[4], shows: "", "resigned")
        #expect(try await activityID(of: scenes[3], world) == "")
        #expect(try await activityID(of: scenes[4], world) == "")
        #expect(await errorName { try await world.call(Self.activities, "Update", [.string(moving), .string(""), .stringMap(["scene": "/org/baton/Handoff1/scene/x"])]) }
            == "org.baton.Handoff1.Error.InvalidArgument")
        // Every Update is announced, as dbus-monitor (a client we did not write) sees it.
        try await eventually("dbus-monitor saw two Updated") {
            monitor.text.components(separatedBy: "member=Updated").count - 1 == 2 && monitor.text.contains("string \"\(moving)\"")
        }

        // Trimmed to the app's quota.
        mark = log.count
        let trimmed = try await world.advertise("five", options: ["scene": scenes[5].text])
        for index in 0..<20 { _ = try await world.advertise("filler \(index)") }
        try await announced(log, after: mark, scenes[5], shows: "", "trimmed to the quota")
        #expect(await errorName { try await world.call(Self.activities, "Get", [.string(trimmed)]) } == Self.notFound)

        // Expired and purged.
        mark = log.count
        let expiring = try await world.advertise("six", options: ["scene": scenes[0].text, "expires_in": "1"])
        try await announced(log, after: mark, scenes[0], shows: expiring, "advertised in it")
        // Announced when purged: at the end of its second of life and the grace for late
        // callers (2 s) on batond's clock; the move returns once housekeeping has run.
        await clock.advance(by: .seconds(3))
        try await announced(log, after: mark, scenes[0], shows: "", "expired")

        // The type unregistered.
        mark = log.count
        _ = try await world.advertise("seven", options: ["scene": scenes[1].text])
        _ = try await world.call(Self.registry, "UnregisterActivityType", [.string(BatonWorld.type)])
        try await announced(log, after: mark, scenes[1], shows: "", "its type unregistered")
    }

    @Test func anActivityNotEligibleForHandoffIsNotContinued() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        try await world.register()
        let id = try await world.advertise("private", options: ["eligible_for_handoff": "false"])
        #expect(await errorName { try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])]) }
            == "org.baton.Handoff1.Error.NotEligible")
        #expect(try await world.call(Self.scenes, "ListScenes", [.string("")]).first?.arrayValue?.isEmpty == true)
        // Made eligible by an Update, it continues.
        _ = try await world.call(Self.activities, "Update", [.string(id), .string(""), .stringMap(["eligible_for_handoff": "true"])])
        #expect(try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])]).first?.objectPathValue != nil)
    }

    @Test func anotherAppsTypeIsTakenOnlyWithReplace() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        try await world.register(handler: "com.raywenderlich.hawknotes")
        let takeOver: [DBusValue] = [.string(BatonWorld.type), .string("com.example.thief"), .stringMap(["handler": "com.example.Thief"])]
        let refusal = await errorName { try await world.call(Self.registry, "RegisterActivityType", takeOver) }
        #expect(refusal == "org.baton.Handoff1.Error.AccessDenied")
        let types = try await world.call(Self.registry, "ListActivityTypes").first?.arrayValue ?? []
        #expect(types.compactMap { $0.stringKeyedValue?["app_id"]?.unwrapped.stringValue } == [BatonWorld.app], "unchanged")
        // The same app may register it again; replace=true moves it.
        try await world.register(handler: "com.raywenderlich.hawknotes")
        _ = try await world.call(Self.registry, "RegisterActivityType", [
            .string(BatonWorld.type), .string("com.example.heir"), .stringMap(["replace": "true"]),
        ])
        let moved = try await world.call(Self.registry, "ListActivityTypes").first?.arrayValue ?? []
        #expect(moved.compactMap { $0.stringKeyedValue?["app_id"]?.unwrapped.stringValue } == ["com.example.heir"])
        #expect(await errorName { try await world.call(Self.registry, "RegisterActivityType", [
            .string(BatonWorld.type), .string("com.example.heir"), .stringMap(["replace": "yes"]),
        ]) } == "org.baton.Handoff1.Error.InvalidArgument")
    }

    /// The documented outcome of Continue racing Invalidate: the continuation fails with
    /// NotFound and no scene is opened or changed.
    @Test func anActivityInvalidatedDuringItsContinueIsNotContinued() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        // A handler that invalidates the activity it is asked to continue, then answers.
        let app = try world.bus.connect()
        defer { app.close() }
        let calls = Atomic(0)
        try await app.export("/", [Interface("org.baton.Handoff1.Handler", methods: [
            Method("ContinueActivity", in: [Argument("scene", "o"), Argument("activity", "a{sv}")],
                   out: [Argument("storage", "a{sv}")], ordering: .concurrent) { call in
                calls.add(1, ordering: .relaxed)
                let activity: [String: DBusValue] = try call.argument(1)
                let id = activity["id"]?.unwrapped.stringValue ?? ""
                _ = try await app.call("org.baton.Handoff1", "/org/baton/Handoff1", Self.activities, "Invalidate", [.string(id)])
                return [.record(["written": .boolean(true)])]
            },
        ])])
        try await app.requestName("org.baton.RacingApp")
        try await world.register(handler: "org.baton.RacingApp")

        let first = try await world.advertise("raced")
        #expect(await errorName { try await world.call(Self.activities, "Continue", [.string(first), .stringMap([:])]) } == Self.notFound)
        #expect(try await world.call(Self.scenes, "ListScenes", [.string("")]).first?.arrayValue?.isEmpty == true, "no scene opened")

        let scene = try await openScene(world)
        let second = try await world.advertise("raced into a scene")
        #expect(await errorName { try await world.call(Self.activities, "Continue", [.string(second), .stringMap(["scene": scene.text])]) }
            == Self.notFound)
        #expect(try await world.call(Self.scene, "GetAll", path: scene) == [.record([:])], "the scene is unchanged")
        #expect(try await activityID(of: scene, world) == "")
        #expect(calls.load(ordering: .relaxed) == 2)
    }

    func handles(_ scene: ObjectPath, _ world: BatonWorld) async throws -> [String] {
        let value = try await world.call("org.freedesktop.DBus.Properties", "Get", [.string(Self.scene), .string("HandlesContent")], path: scene)
        return value.first.flatMap { [String](dbusValue: $0.unwrapped) } ?? ["?"]
    }

    func continueActivity(_ id: String, _ world: BatonWorld, _ options: [String: String] = [:]) async throws -> ObjectPath {
        try #require(try await world.call(Self.activities, "Continue", [.string(id), .stringMap(options)]).first?.objectPathValue)
    }

    @Test func aContinuationGoesToTheSceneThatShowsItsContent() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        try await world.register()
        _ = try await world.call(Self.registry, "RegisterActivityType", [.string("com.example.other.doc"), .string("com.example.other"), .stringMap([:])])
        let continued = try await SignalLog(world.client, MatchRule(interface: Self.activities, member: "Continued"))
        let monitor = try await BusMonitor(bus: world.bus, rules: ["type='signal',interface='\(Self.activities)',member='Continued'"])
        let changes = try await SignalLog(world.client, MatchRule(interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged"))

        // A scene that says it handles c7 takes c7's continuation; another app's never does.
        let handler = try await openScene(world)
        let foreign = try #require(try await world.call(Self.scenes, "OpenScene", [.string("com.example.other"), .stringMap([:])]).first?.objectPathValue)
        _ = try await world.call(Self.scene, "SetHandlesContent", [.strings(["c7", "c9", "c7"])], path: foreign)
        _ = try await world.call(Self.scene, "SetHandlesContent", [.strings(["c9", "c7", "c7"])], path: handler)
        #expect(try await handles(handler, world) == ["c7", "c9"])
        try await changes.wait(for: "HandlesContent announced") { $0.path == handler && $0.changedProperties["HandlesContent"] == .strings(["c7", "c9"]) }
        let seven = try await world.advertise("seven", options: ["target_content_id": "c7"])
        #expect(try await continueActivity(seven, world) == handler)
        #expect(try await activityID(of: handler, world) == seven)

        // No scene shows c8: a new one opens; continued again, it goes to that one.
        let eight = try await world.advertise("eight", options: ["target_content_id": "c8"])
        let opened = try await continueActivity(eight, world)
        #expect(opened != handler && opened != foreign)
        #expect(try await continueActivity(eight, world) == opened)
        // new_scene=true always opens one; with scene it contradicts itself.
        let forced = try await continueActivity(eight, world, ["new_scene": "true"])
        #expect(![handler, foreign, opened].contains(forced))
        #expect(await errorName { try await world.call(Self.activities, "Continue", [.string(eight), .stringMap(["new_scene": "true", "scene": opened.text])]) }
            == "org.baton.Handoff1.Error.InvalidArgument")
        // An activity without a target content id always gets a new scene.
        let plain = try await world.advertise("plain")
        let first = try await continueActivity(plain, world)
        #expect(try await continueActivity(plain, world) != first)

        // Continued says whether the scene was created: as we and dbus-monitor see it.
        try await continued.wait(for: "six Continued") { _ in continued.all.count >= 6 }
        let created = continued.all.map { $0.body.count == 3 ? $0.body[2] : .string("?") }
        #expect(created == [.boolean(false), .boolean(true), .boolean(false), .boolean(true), .boolean(true), .boolean(true)])
        #expect(monitor.text.contains("boolean false") && monitor.text.contains("boolean true"))

        // Bad lists are refused, and change nothing.
        #expect(await errorName { try await world.call(Self.scene, "SetHandlesContent", [.strings([""])], path: handler) }
            == "org.baton.Handoff1.Error.InvalidArgument")
        #expect(await errorName { try await world.call(Self.scene, "SetHandlesContent", [.strings((0...64).map { "c\($0)" })], path: handler) }
            == "org.baton.Handoff1.Error.InvalidArgument")
        #expect(try await handles(handler, world) == ["c7", "c9"])

        // Kept across a restart; gone with the scene.
        await world.stopDaemon()
        try await world.startDaemon()
        #expect(try await handles(handler, world) == ["c7", "c9"])
        let nine = try await world.advertise("nine", options: ["target_content_id": "c9"])
        #expect(try await continueActivity(nine, world) == handler)
        _ = try await world.call(Self.scenes, "CloseScene", [.objectPath(handler)])
        let nineAgain = try await world.advertise("nine again", options: ["target_content_id": "c9"])
        #expect(try await continueActivity(nineAgain, world) != handler)
        _ = try await world.call(Self.scene, "SetHandlesContent", [.strings([])], path: foreign)
        #expect(try await handles(foreign, world) == [])
    }
}
