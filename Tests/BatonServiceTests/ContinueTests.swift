import BatonCore
import DBus
import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

/// `Continue` with the real daemon and an app's handler on the same private bus.
@Suite(.serialized)
struct ContinueTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let scenes = "org.baton.Handoff1.Scenes"
    static let scene = "org.baton.Handoff1.Scene"
    static let appName = "org.baton.TestApp"

    /// A handler app: the activity's payload `mode` says how it answers.
    static func startApp(_ world: BatonWorld) async throws -> Connection {
        let app = try world.bus.connect()
        try await app.export("/", [Interface("org.baton.Handoff1.Handler", methods: [
            Method("ContinueActivity", in: [Argument("scene", "o"), Argument("activity", "a{sv}")],
                   out: [Argument("storage", "a{sv}")], ordering: .concurrent) { call in
                let activity: [String: DBusValue] = try call.argument(1)
                let payload = activity["payload"]?.unwrapped.stringValue ?? ""
                if payload.contains("\"fail\"") { throw DBusError(name: "org.baton.TestApp.Error.NoSuchCharacter", message: "no such character") }
                if payload.contains("\"hold\"") {
                    try await Task.sleep(for: .seconds(30))
                }
                if payload.contains("\"badtype\"") { return [.record(["nested": .record(["a": .int32(1)])])] }
                let scene = try call.argument(0, as: ObjectPath.self)
                return [.record([
                    "ContentView.CurrentTab": .string("b1"),
                    "BookView.SelectedCharacter": .string("b|b1::c|\(activity["target_content_id"]?.unwrapped.stringValue ?? "")"),
                    "SceneSeen": .string(scene.text),
                ])]
            },
        ])])
        try await app.requestName(appName)
        return app
    }

    func sceneCount(_ world: BatonWorld) async throws -> Int {
        try await world.call(Self.scenes, "ListScenes", [.string("")]).first?.arrayValue?.count ?? -1
    }

    @Test func theHandlersStorageOpensTheSceneAndFailuresLeaveNone() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        _ = try await InProcessBatond(on: world) { $0.handlerTimeout = .milliseconds(500) }
        let app = try await Self.startApp(world)
        defer { app.close() }
        try await world.register(handler: Self.appName)
        let continued = try await world.client.signals(matching: MatchRule(interface: Self.activities, member: "Continued"))

        let agatha = try await world.advertise("Agatha", payload: #"{"id":"agatha","mode":"ok"}"#, options: ["target_content_id": "agatha"])
        let scene = try #require(try await world.call(Self.activities, "Continue", [.string(agatha), .stringMap([:])]).first?.objectPathValue)
        let storage = try #require(try await world.call(Self.scene, "GetAll", path: scene).first?.stringKeyedValue)
        #expect(storage["ContentView.CurrentTab"] == .variant(.string("b1")))
        #expect(storage["BookView.SelectedCharacter"] == .variant(.string("b|b1::c|agatha")))
        #expect(storage["SceneSeen"] == .variant(.string(scene.text)), "the handler was told the new scene's path")
        let properties = "org.freedesktop.DBus.Properties"
        #expect(try await world.call(properties, "Get", [.string(Self.scene), .string("ActivityId")], path: scene) == [.variant(.string(agatha))])
        #expect(try await first(of: continued).body == [.string(agatha), .objectPath(scene), .boolean(true)])

        // Continuing into an existing scene changes that scene and opens no other.
        let window = try #require(try await world.call(Self.scenes, "OpenScene", [.string(BatonWorld.app), .stringMap([:])]).first?.objectPathValue)
        let count = try await sceneCount(world)
        #expect(try await world.call(Self.activities, "Continue", [.string(agatha), .stringMap(["scene": window.text])]) == [.objectPath(window)])
        #expect(try await sceneCount(world) == count)
        #expect(try await world.call(Self.scene, "Get", [.string("ContentView.CurrentTab")], path: window) == [.variant(.string("b1"))])

        // Failing and nonsense handlers: HandlerFailed with the reason, and no scene. A handler
        // that does not answer in time: HandlerFailed, and the scene waits, pending.
        for (mode, reason, kept) in [("fail", "org.baton.TestApp.Error.NoSuchCharacter: no such character", 0),
                                     ("badtype", "a{sv}", 0), ("hold", DBusError.Name.noReply, 1)] {
            let id = try await world.advertise(mode, payload: "{\"id\":\"x\",\"mode\":\"\(mode)\"}")
            do {
                _ = try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])])
                Issue.record("\(mode) continued")
            } catch let error as DBusError {
                #expect(error.name == "org.baton.Handoff1.Error.HandlerFailed", "\(mode): \(error)")
                #expect(error.message.contains(reason), "\(mode): \(error.message)")
                #expect(error.message.contains("waits in scene") == (kept == 1), "\(mode): \(error.message)")
            }
            #expect(try await sceneCount(world) == count + kept, "\(mode)")
        }
    }

    @Test func theDaemonKeepsServingWhileAHandlerThinks() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        // Far longer than the calls below take on a loaded machine; the app's end stops the wait.
        world.extraArguments = ["--handler-timeout", "60"]
        try await world.startDaemon()
        let app = try await Self.startApp(world)
        defer { app.close() }
        try await world.register(handler: Self.appName)
        let slow = try await world.advertise("slow", payload: #"{"id":"x","mode":"hold"}"#)
        // The handler holds until batond gives up on it: a batond that waited for it would
        // answer the calls below only after answering the Continue.
        let answered = Atomic(false)
        let pending = Task {
            defer { answered.store(true, ordering: .sequentiallyConsistent) }
            return try await world.call(Self.activities, "Continue", [.string(slow), .stringMap([:])])
        }
        for index in 0..<20 {
            _ = try await world.advertise("meanwhile \(index)")
        }
        let continueWasAnswered = answered.load(ordering: .sequentiallyConsistent)
        #expect(!continueWasAnswered, "other calls waited for the handler")
        app.close()  // the bus answers batond's call to it: the app went without replying
        await #expect(throws: DBusError.self) { try await pending.value }
    }

    @Test func withoutAHandlerTheSceneCarriesTheActivity() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        _ = try await InProcessBatond(on: world)
        try await world.register()
        let id = try await world.advertise("Agatha")
        let scene = try #require(try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])]).first?.objectPathValue)
        #expect(try await world.call("org.freedesktop.DBus.Properties", "Get", [.string(Self.scene), .string("ActivityId")], path: scene)
            == [.variant(.string(id))])
        #expect(try await world.call(Self.scene, "GetAll", path: scene) == [.record([:])])
        #expect(await errorName { try await world.call(Self.activities, "Continue", [.string(id), .stringMap(["colour": "red"])]) }
            == "org.baton.Handoff1.Error.InvalidArgument")
    }

    @Test func theBusStartsAHandlerThatIsNotRunning() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let python = try Executables.require("/usr/bin/python3", package: "python3-dbus python3-gi")
        let script = world.bus.directory.appendingPathComponent("handler.py")
        try """
            import dbus, dbus.service, dbus.mainloop.glib
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            class Handler(dbus.service.Object):
                @dbus.service.method("org.baton.Handoff1.Handler", in_signature="oa{sv}", out_signature="a{sv}")
                def ContinueActivity(self, scene, activity):
                    return dbus.Dictionary({"ContentView.CurrentTab": dbus.String("from python"),
                                            "title": dbus.String(activity["title"])}, signature="sv")
            bus = dbus.SessionBus()
            name = dbus.service.BusName("org.baton.PyApp", bus)
            Handler(bus, "/")
            GLib.timeout_add_seconds(20, GLib.MainLoop.quit, GLib.MainLoop())
            GLib.MainLoop().run()
            """.write(to: script, atomically: true, encoding: .utf8)
        try world.bus.installService(name: "org.baton.PyApp", exec: "\(python) \(script.path)")
        _ = try await InProcessBatond(on: world)
        try await world.register(handler: "org.baton.PyApp")
        #expect(try await world.client.nameOwner("org.baton.PyApp") == nil)

        let id = try await world.advertise("Jamie")
        let scene = try #require(try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])]).first?.objectPathValue)
        #expect(try await world.call(Self.scene, "GetAll", path: scene)
            == [.record(["ContentView.CurrentTab": .string("from python"), "title": .string("Jamie")])])
        #expect(try await world.client.nameOwner("org.baton.PyApp") != nil)
    }
}
