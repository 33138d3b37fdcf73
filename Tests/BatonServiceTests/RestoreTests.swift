import DBus
import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

/// An app's launches: RestoreScenes says why each scene comes back, Detach makes a clean
/// exit, a crash makes `recover`, and a scene that keeps crashing the app is discarded.
@Suite(.serialized)
struct RestoreTests {
    static let scenes = "org.baton.Handoff1.Scenes"
    static let scene = "org.baton.Handoff1.Scene"
    static let app = BatonWorld.app

    /// One run of the app: its own connection, RestoreScenes at launch; `path → reason`.
    func launch(_ world: BatonWorld) async throws -> (Connection, [String: String]) {
        let instance = try world.bus.connect()
        let reply = try await instance.call("org.baton.Handoff1", "/org/baton/Handoff1", Self.scenes, "RestoreScenes", [.string(Self.app)])
        var reasons: [String: String] = [:]
        for entry in reply.first?.arrayValue ?? [] {
            guard case .structure(let fields) = entry, fields.count == 2,
                  let path = fields[0].objectPathValue, let reason = fields[1].stringValue else { continue }
            reasons[path.text] = reason
        }
        return (instance, reasons)
    }

    func openScene(_ world: BatonWorld) async throws -> ObjectPath {
        try #require(try await world.call(Self.scenes, "OpenScene", [.string(Self.app), .stringMap([:])]).first?.objectPathValue)
    }

    @Test func eachSceneSaysWhyItComesBack() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let window = try await openScene(world)

        // First launch: never handed out, so launch.
        var (instance, reasons) = try await launch(world)
        #expect(reasons == [window.text: "launch"])
        let property = try await world.call("org.freedesktop.DBus.Properties", "Get", [.string(Self.scene), .string("RestoreReason")], path: window)
        #expect(property.first?.unwrapped == .string("launch"))

        // A clean exit, then the next launch: restore.
        _ = try await instance.call("org.baton.Handoff1", "/org/baton/Handoff1", Self.scenes, "Detach", [.string(Self.app)])
        instance.close()
        (instance, reasons) = try await launch(world)
        #expect(reasons == [window.text: "restore"])

        // A crash (no Detach), then the next launch: recover; a new scene says launch.
        let before = world.daemonLog.components(separatedBy: "left the bus without Detach").count
        instance.close()
        try await eventually("batond noticed the crash") { world.daemonLog.components(separatedBy: "left the bus without Detach").count > before }
        let second = try await openScene(world)
        (instance, reasons) = try await launch(world)
        #expect(reasons == [window.text: "recover", second.text: "launch"])
        instance.close()

        // busctl (a client we did not write) reads the a(os) reply.
        let busctl = try await world.run(try Executables.require("busctl", package: "systemd"), [
            "--user", "call", "org.baton.Handoff1", "/org/baton/Handoff1", Self.scenes, "RestoreScenes", "s", Self.app,
        ], environment: ["DBUS_SESSION_BUS_ADDRESS": world.bus.address])
        #expect(busctl.status == 0 && busctl.stdout.hasPrefix("a(os) 2 "), "\(busctl)")
    }

    @Test func aSceneThatKeepsCrashingTheAppIsDiscarded() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let poisoned = try await openScene(world)
        let healthy = try await openScene(world)
        try await world.register()
        let shown = try await world.advertise("shown in the poisoned scene", options: ["scene": poisoned.text])
        let removed = try await SignalLog(world.client, MatchRule(interface: "org.freedesktop.DBus.ObjectManager", member: "InterfacesRemoved"))

        // Launch, hand out both; the app acknowledges only the healthy one, then crashes. Three times.
        var seen: [[String: String]] = []
        for round in 0..<4 {
            let before = world.daemonLog.components(separatedBy: "left the bus without Detach").count
            let (instance, reasons) = try await launch(world)
            seen.append(reasons)
            if round == 3 { instance.close(); break }
            _ = try await instance.call("org.baton.Handoff1", healthy, Self.scene, "Acknowledge")
            instance.close()
            try await eventually("batond noticed crash \(round + 1)") {
                world.daemonLog.components(separatedBy: "left the bus without Detach").count > before
            }
        }
        #expect(seen[0] == [poisoned.text: "launch", healthy.text: "launch"])
        #expect(seen[1] == [poisoned.text: "recover", healthy.text: "recover"])
        #expect(seen[2] == seen[1] && seen[3] == [poisoned.text: "recover", healthy.text: "recover"])
        // The fourth launch after three recovers in a row: the poisoned scene is gone.
        let (instance, reasons) = try await launch(world)
        defer { instance.close() }
        #expect(reasons == [healthy.text: "recover"], "\(reasons)")
        try await removed.wait(for: "InterfacesRemoved for the poisoned scene") { $0.body.first == .objectPath(poisoned) }
        #expect(world.daemonLog.contains("discarded scene"))
        let listed = try await world.call(Self.scenes, "ListScenes", [.string(Self.app)]).first?.arrayValue ?? []
        #expect(listed == [.objectPath(healthy)])
        // Explain says why, for the activity the scene showed.
        let explained = try #require(try await world.call("org.baton.Handoff1.Activities", "Explain", [.string(shown)]).first?.stringKeyedValue)
        let last = explained["last_continuation"]?.unwrapped.stringKeyedValue?.mapValues(\.unwrapped)
        #expect(last?["state"] == .string("discarded") && last?["scene"] == .objectPath(poisoned), "\(explained)")
        #expect(last?["error"]?.stringValue?.contains("crash at launch") == true)
    }

    @Test func aStorageWriteClearsTheSuspicionAndAnUnknownSceneIsNotAcknowledged() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let window = try await openScene(world)
        for round in 0..<5 {
            let before = world.daemonLog.components(separatedBy: "left the bus without Detach").count
            let (instance, reasons) = try await launch(world)
            #expect(reasons[window.text] != nil, "round \(round): kept")
            _ = try await instance.call("org.baton.Handoff1", window, Self.scene, "Set", [.string("draft"), .variant(.string("\(round)"))])
            instance.close()
            try await eventually("batond noticed the crash") {
                world.daemonLog.components(separatedBy: "left the bus without Detach").count > before
            }
        }
        #expect(await errorName { try await world.call(Self.scene, "Acknowledge", path: "/org/baton/Handoff1/scene/3c9ad3b5_2f1f_4b0e_9a51_3f1d2a6b8c01") }
            == DBusError.Name.unknownObject)
    }

    @Test func anAppThatVanishedWhileBatondWasDownComesBackAsRecover() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let window = try await openScene(world)
        let (instance, _) = try await launch(world)
        await world.stopDaemon(SIGKILL)
        instance.close()
        try await world.startDaemon()
        try await eventually("batond noticed the instance is gone") { world.daemonLog.contains("left the bus without Detach") }
        let (next, reasons) = try await launch(world)
        defer { next.close() }
        #expect(reasons == [window.text: "recover"])
    }
}
