import BatonCore
import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// Each remaining method of the contract, its success and its errors, and the signals it emits.
@Suite(.serialized)
struct MethodTests {
    static let registry = "org.baton.Handoff1.Registry"
    static let activities = "org.baton.Handoff1.Activities"
    static let scenes = "org.baton.Handoff1.Scenes"
    static let scene = "org.baton.Handoff1.Scene"

    func record(_ world: BatonWorld, _ id: String) async throws -> [String: DBusValue] {
        try #require(try await world.call(Self.activities, "Get", [.string(id)]).first?.stringKeyedValue).mapValues(\.unwrapped)
    }

    /// `id_prefix`, for clients that let people type the beginning of an id: List finds live
    /// activities by it (those kept in memory while paused too), History past ones.
    @Test func listAndHistoryFindIdsByTheirBeginning() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        try await world.register(requiredKeys: "")
        let first = try await world.advertise("first")
        let second = try await world.advertise("second")
        func listed(_ prefix: String, _ method: String = "List", interface: String = Self.activities) async throws -> [String] {
            try await world.call(interface, method, [.stringMap(["id_prefix": prefix])]).first?.arrayValue?
                .compactMap { $0.stringKeyedValue?["id"]?.unwrapped.stringValue } ?? []
        }
        let shared = String(zip(first, second).prefix { $0 == $1 }.map(\.0))
        #expect(try await listed(String(first.prefix(shared.count + 1)).uppercased()) == [first])
        #expect(Set(try await listed(shared)) == [first, second])
        #expect(try await listed(first) == [first])
        #expect(try await listed("ffff").isEmpty)
        for bad in ["", "xyz", first + "0", "0%"] {
            #expect(await errorName { try await listed(bad) } == "org.baton.Handoff1.Error.InvalidArgument", "\(bad)")
        }
        // From a client we did not write.
        let gdbus = try await world.run(try Executables.require("gdbus", package: "libglib2.0-bin"), [
            "call", "--session", "--dest", "org.baton.Handoff1", "--object-path", "/org/baton/Handoff1",
            "--method", "\(Self.activities).List", "{'id_prefix': '\(second.prefix(shared.count + 1))'}",
        ])
        #expect(gdbus.status == 0 && gdbus.stdout.contains(second) && !gdbus.stdout.contains(first), "\(gdbus)")

        _ = try await world.call(Self.activities, "Invalidate", [.string(first)])
        #expect(try await listed(shared, "History", interface: "org.baton.Handoff1.Archive") == [first])
        _ = try await world.call("org.baton.Handoff1.Privacy", "Pause", [.uint64(0)])
        let unrecorded = try await world.advertise("while paused")
        #expect(try await listed(unrecorded) == [unrecorded])
    }

    @Test func updateMergesAndSearchRanks() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        _ = try await InProcessBatond(on: world)
        try await world.register()
        let agatha = try await world.advertise("Agatha", payload: #"{"id":"a","name":"Agatha"}"#,
                                               options: ["keywords": "witch,mentor", "eligible_for_search": "true"])
        _ = try await world.advertise("Jamie", options: ["keywords": "boy", "eligible_for_search": "true"])
        _ = try await world.advertise("Agatha (private)", options: ["eligible_for_search": "false"])

        _ = try await world.call(Self.activities, "Update", [.string(agatha), .string(#"{"name":"Agatha the Wise","book":1}"#),
                                                             .stringMap(["title": "Agatha the Wise", "persistent_id": "p-agatha"])])
        let updated = try await record(world, agatha)
        #expect(updated["payload"] == .string(#"{"id":"a","name":"Agatha the Wise","book":1}"#))
        #expect(updated["title"] == .string("Agatha the Wise") && updated["persistent_id"] == .string("p-agatha"))
        #expect(updated["keywords"] == .strings(["witch", "mentor"]))
        // Every field a record can carry but the scene's, in key order on the wire (busctl and gdbus print them as sent).
        let full = try await world.advertise("Full", options: [
            "target_content_id": "t", "persistent_id": "p", "webpage_url": "https://example.com/a", "expires_in": "600",
            "payload_type": "Character",
        ])
        let wire = try #require(try await world.call(Self.activities, "Get", [.string(full)]).first?.dictionaryEntries)
        #expect(wire.compactMap(\.key.stringValue) == [
            "app_id", "created_at", "eligible_for_handoff", "eligible_for_history", "eligible_for_search", "expires_at", "id", "keywords", "payload",
            "payload_type", "persistent_id", "target_content_id", "title", "type", "updated_at", "webpage_url",
        ])
        let bad = await errorName { try await world.call(Self.activities, "Update", [.string(agatha), .string(#"{"id":null,"id":1}"#), .stringMap([:])]) }
        #expect(bad == "org.baton.Handoff1.Error.InvalidPayload")
        #expect(await errorName { try await world.call(Self.activities, "Update", [.string(Identifier.make()), .string(""), .stringMap([:])]) }
            == "org.baton.Handoff1.Error.NotFound")

        func titles(_ query: String) async throws -> [String] {
            try await world.call(Self.activities, "Search", [.string(query), .uint32(0)]).first?.arrayValue?
                .compactMap { $0.stringKeyedValue?["title"]?.unwrapped.stringValue } ?? []
        }
        #expect(try await titles("wise") == ["Agatha the Wise"])
        #expect(try await titles("agath") == ["Agatha the Wise"], "ineligible activities stay out of search")
        #expect(try await titles("boy") == ["Jamie"])
        #expect(try await titles("") == [])
        let gdbus = try await world.run(try Executables.require("gdbus", package: "libglib2.0-bin"), [
            "call", "--session", "--dest", "org.baton.Handoff1", "--object-path", "/org/baton/Handoff1",
            "--method", "\(Self.activities).Search", "mentor", "5",
        ])
        #expect(gdbus.status == 0 && gdbus.stdout.contains("'title': <'Agatha the Wise'>"), "\(gdbus)")
    }

    @Test func aBurstOfAdvertiseCallsIsStoredBeforeEachReply() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        _ = try await InProcessBatond(on: world)
        try await world.register()
        // Sixty calls in flight at once: the daemon commits them in shared transactions,
        // and each caller reads its activity back the moment its own reply arrives.
        let ids = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<60 {
                group.addTask {
                    let id = try await world.advertise("burst \(index)")
                    let stored = try await world.call(Self.activities, "Get", [.string(id)]).first?.stringKeyedValue
                    #expect(stored?["title"]?.unwrapped == .string("burst \(index)"))
                    return id
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(ids).count == 60)
        let listed = try await world.call(Self.activities, "List", [.stringMap([:])]).first?.arrayValue
        #expect(listed?.count == 60)
    }

    @Test func deletionsAndUnregisteringAnnounceWhatWent() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        _ = try await InProcessBatond(on: world)
        try await world.register()
        let gone = try await world.client.signals(matching: MatchRule(interface: Self.activities, member: "Invalidated"))
        var invalidated = gone.makeAsyncIterator()
        let one = try await world.advertise("one", options: ["persistent_id": "p1"])
        _ = try await world.advertise("two", options: ["persistent_id": "p2"])
        _ = try await world.advertise("three")
        #expect(try await world.call(Self.activities, "DeleteSaved", [.strings(["p1", "nope"])]) == [.uint32(1)])
        #expect(await invalidated.next()?.body == [.string(one)])
        #expect(try await world.call(Self.activities, "DeleteAllSaved", [.string("com.example.other")]) == [.uint32(0)])
        #expect(try await world.call(Self.activities, "DeleteAllSaved", [.string(BatonWorld.app)]) == [.uint32(2)])
        #expect(try await world.activityCount() == 0)

        let kept = try await world.advertise("kept")
        _ = try await world.call(Self.registry, "UnregisterActivityType", [.string(BatonWorld.type)])
        var seen: [DBusValue] = []
        while seen.count < 3, let signal = await invalidated.next() { seen += signal.body }
        #expect(seen.last == .string(kept))
        #expect(try await world.call(Self.registry, "ListActivityTypes") == [.array(.dictionary(key: .string, value: .variant), [])])
        #expect(await errorName { try await world.call(Self.registry, "UnregisterActivityType", [.string(BatonWorld.type)]) }
            == "org.baton.Handoff1.Error.UnknownActivityType")
        #expect(await errorName { try await world.advertise("after") } == "org.baton.Handoff1.Error.UnknownActivityType")
        let badHandler = await errorName {
            try await world.call(Self.registry, "RegisterActivityType", [.string(BatonWorld.type), .string(BatonWorld.app),
                                                                         .stringMap(["handler": "not a bus name"])])
        }
        #expect(badHandler == "org.baton.Handoff1.Error.InvalidArgument")
    }

    // On a clock the test holds: a move that never returned would hang it; the limit fails it.
    @Test(.timeLimit(.minutes(1))) func expiredActivitiesVanishAtOnceAndArePurged() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let clock = ManualClock()
        let batond = try await InProcessBatond(on: world, clock: clock)
        try await world.register()
        let invalidated = try await SignalLog(world.client, MatchRule(interface: Self.activities, member: "Invalidated"))
        let brief = try await world.advertise("brief", options: ["expires_in": "60"])
        #expect(try await record(world, brief)["expires_at"] != nil)
        #expect(await errorName { try await world.call(Self.activities, "Get", [.string(brief)]) } == nil)

        // batond's clock, held by the test, stands still until moved: live until the last microsecond
        // of its 60 s, then hidden from every call at once, answering Expired while the purge
        // waits its grace (2 s).
        await clock.advance(by: .seconds(60) - .microseconds(1))
        #expect(try await world.activityCount() == 1, "expired a microsecond early")
        await clock.advance(by: .microseconds(1))
        #expect(await errorName { try await world.call(Self.activities, "Get", [.string(brief)]) } == "org.baton.Handoff1.Error.Expired")
        #expect(try await world.activityCount() == 0, "expired activities are hidden from List at once")
        #expect(await errorName { try await world.call(Self.activities, "Continue", [.string(brief), .stringMap([:])]) }
            == "org.baton.Handoff1.Error.Expired")
        await clock.advance(by: .seconds(2) - .microseconds(1))
        #expect(await errorName { try await world.call(Self.activities, "Get", [.string(brief)]) } == "org.baton.Handoff1.Error.Expired",
                "purged before its grace ended")

        // At the grace's end: the move returns once housekeeping has purged it and announced it.
        await clock.advance(by: .microseconds(1))
        #expect(await errorName { try await world.call(Self.activities, "Get", [.string(brief)]) } == "org.baton.Handoff1.Error.NotFound")
        _ = try await invalidated.wait(for: "the purge announced") { $0.body == [.string(brief)] }
        try await batond.stop()
    }

    @Test func scenesAnnounceThemselvesAndTheirChanges() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        _ = try await InProcessBatond(on: world)
        try await world.register()
        let managed = try await world.client.signals(matching: MatchRule(interface: "org.freedesktop.DBus.ObjectManager"))
        var objects = managed.makeAsyncIterator()
        let scene = try #require(try await world.call(Self.scenes, "OpenScene", [.string(BatonWorld.app), .stringMap(["title": "One"])]).first?.objectPathValue)
        let added = await objects.next()
        #expect(added?.member == "InterfacesAdded" && added?.body.first == .objectPath(scene))
        let all = try await world.call("org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        #expect(all.first?.dictionaryEntries?.map(\.key) == [.objectPath(scene)])
        // The announcement's properties are the scene's as stored (it is built from the values
        // just written, GetManagedObjects reads them back).
        #expect(added?.body.last == all.first?.dictionaryEntries?.first?.value)

        let changes = try await world.client.signals(matching: MatchRule(path: scene))
        var changed = changes.makeAsyncIterator()
        _ = try await world.call(Self.scene, "Set", [.string("ContentView.CurrentTab"), .variant(.string("b2"))], path: scene)
        #expect(await changed.next()?.body == [.record(["ContentView.CurrentTab": .string("b2")]), .strings([])])
        _ = try await world.call(Self.scene, "Remove", [.string("ContentView.CurrentTab")], path: scene)
        #expect(await changed.next()?.body == [.record([:]), .strings(["ContentView.CurrentTab"])])
        let id = try await world.advertise("Agatha", options: ["scene": scene.text])
        let properties = await changed.next()
        #expect(properties?.member == "PropertiesChanged")
        #expect(properties?.body.dropFirst().first?.stringKeyedValue?["ActivityId"] == .variant(.string(id)))

        // dbus-send sets a value as the field notes say: variant:string:…
        let send = try await world.run(try Executables.require("dbus-send", package: "dbus-bin"), [
            "--session", "--print-reply", "--dest=org.baton.Handoff1", scene.text, "\(Self.scene).Set",
            "string:BookView.newNote", "variant:string:a draft",
        ])
        #expect(send.status == 0, "\(send)")
        #expect(try await world.call(Self.scene, "Get", [.string("BookView.newNote")], path: scene) == [.variant(.string("a draft"))])
        #expect(await errorName { try await world.call(Self.scene, "Get", [.string("absent")], path: scene) } == "org.baton.Handoff1.Error.NotFound")

        _ = try await world.call(Self.scenes, "CloseScene", [.objectPath(scene)])
        var removed: Message?
        while let next = await objects.next() {
            if next.member == "InterfacesRemoved" { removed = next; break }
        }
        #expect(removed?.body.first == .objectPath(scene))

        // A scene that Continue opens (its type has no handler: ready at once) is announced
        // with its stored properties too.
        let continued = try #require(try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])]).first?.objectPathValue)
        let announced = await objects.next()
        #expect(announced?.member == "InterfacesAdded" && announced?.body.first == .objectPath(continued))
        let stored = try await world.call("org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        let now = try #require(stored.first?.dictionaryEntries?.first(where: { $0.key == .objectPath(continued) })?.value)
        func sceneProperties(_ value: DBusValue?) -> [String: DBusValue] {
            value?.stringKeyedValue?["org.baton.Handoff1.Scene"]?.stringKeyedValue?.mapValues(\.unwrapped) ?? [:]
        }
        #expect(sceneProperties(now)["State"] == .string("ready"))
        #expect(sceneProperties(announced?.body.last) == sceneProperties(now))
    }

    @Test func sigtermLetsAContinuationInFlightFinish() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        let app = try world.bus.connect()
        defer { app.close() }
        let entered = AcknowledgedIDs()
        try await app.export("/", [Interface("org.baton.Handoff1.Handler", methods: [
            Method("ContinueActivity", in: [Argument("scene", "o"), Argument("activity", "a{sv}")],
                   out: [Argument("storage", "a{sv}")], ordering: .concurrent) { _ in
                entered.add("in")
                try await Task.sleep(for: .milliseconds(300))
                return [.record(["late": .boolean(true)])]
            },
        ])])
        try await app.requestName("org.baton.SlowApp")
        try await world.register(handler: "org.baton.SlowApp")
        let id = try await world.advertise("slow")
        let pending = Task { try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])]) }
        try await eventually("the handler was called") { entered.count == 1 }
        #expect(await world.stopDaemon(SIGTERM) == 0)
        let scene = try await pending.value
        #expect(scene.first?.objectPathValue != nil, "the continuation in flight was answered before the daemon stopped")
    }
}
