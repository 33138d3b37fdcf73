import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// Sandboxed apps see and change only their own: a python3-dbus client inside bubblewrap,
/// its root holding a `/.flatpak-info` as Flatpak's does, against the real batond on a
/// private bus (Tests/Scripts/sandboxed-client.py makes the calls, one per rule).
@Suite(.serialized)
struct SandboxTests {
    static let own = "org.example.Sandboxed"
    static let other = "org.example.Other"
    static let activities = "org.baton.Handoff1.Activities"
    static let error = "org.baton.Handoff1.Error."

    /// Runs the client script in a sandbox whose `/.flatpak-info` names `app`.
    func runSandboxed(_ world: BatonWorld, as app: String, _ given: [String: String]) async throws -> [String: Any] {
        let bwrap = try Executables.require("bwrap", package: "bubblewrap")
        let directory = try TemporaryDirectory.make(prefix: "baton-sandbox")
        defer { try? FileManager.default.removeItem(at: directory) }
        let info = directory.appendingPathComponent("flatpak-info")
        try "[Application]\nname=\(app)\nruntime=runtime/org.freedesktop.Platform/x86_64/23.08\n".write(to: info, atomically: true, encoding: .utf8)
        let script = Repository.root.appendingPathComponent("Tests/Scripts/sandboxed-client.py").path
        let bus = world.bus.directory.path
        let arguments = [
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "--ro-bind", info.path, "/.flatpak-info", "--bind", bus, bus, "--ro-bind", script, "/client.py",
            "--unshare-pid", "--die-with-parent", "--", "/usr/bin/python3", "/client.py", app,
            String(decoding: try JSONSerialization.data(withJSONObject: given), as: UTF8.self),
        ]
        let result = try await world.run(bwrap, arguments)
        try #require(result.status == 0, "\(result)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result)")
    }

    func advertise(_ world: BatonWorld, _ type: String, _ title: String, _ options: [String: String]) async throws -> String {
        try #require(try await world.call(Self.activities, "Advertise", [
            .string(type), .string(title), .string(#"{"id":"x"}"#), .stringMap(options),
        ]).first?.stringValue)
    }

    func openScene(_ world: BatonWorld, for app: String) async throws -> ObjectPath {
        try #require(try await world.call("org.baton.Handoff1.Scenes", "OpenScene", [.string(app), .stringMap([:])]).first?.objectPathValue)
    }

    @Test func aSandboxedAppSeesAndChangesOnlyItsOwn() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        // The host sets up two apps: the other one with a live activity, a past one and a scene with storage.
        for app in [Self.own, Self.other] {
            _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
                .string(app + ".note"), .string(app), .stringMap(["title": "Note"]),
            ])
        }
        let theirs = try await advertise(world, Self.other + ".note", "shared theirs", [
            "eligible_for_search": "true", "persistent_id": "p-theirs", "keywords": "shared",
        ])
        let ended = try await advertise(world, Self.other + ".note", "shared ended", ["eligible_for_search": "true"])
        _ = try await world.call(Self.activities, "Invalidate", [.string(ended)])
        let mine = try await advertise(world, Self.own + ".note", "shared mine", ["eligible_for_search": "true"])
        let theirScene = try await openScene(world, for: Self.other)
        _ = try await world.call("org.baton.Handoff1.Scene", "Set", [.string("secret"), .variant(.string("theirs"))], path: theirScene)
        let myScene = try await openScene(world, for: Self.own)
        let export: @Sendable () async throws -> String = {
            try #require(try await world.call("org.baton.Handoff1.Archive", "Export", [.stringMap(["app_id": Self.other])]).first?.stringValue)
        }
        let before = try await export()

        let results = try await runSandboxed(world, as: Self.own, [
            "app": Self.other, "type": Self.other + ".note", "activity": theirs, "persistent_id": "p-theirs",
            "scene": theirScene.text, "own_activity": mine, "own_scene": myScene.text,
        ])
        func outcome(_ check: String) -> String { results[check] as? String ?? "missing" }

        // What it may do.
        for check in ["register own type", "advertise own", "get own", "list", "search", "list types", "list scenes",
                      "open own scene", "own scene storage"] {
            #expect(outcome(check) == "ok", "\(check): \(outcome(check))")
        }
        let ownAdvertised = try #require(results["own_id"] as? String)
        #expect(results["listed"] as? [String] == [mine, ownAdvertised].sorted(), "List shows its app's only")
        #expect(results["searched"] as? [String] == [mine], "Search finds its app's only (its own \"Mine\" does not match)")
        #expect(results["types"] as? [String] == [Self.own + ".note"])
        #expect(results["scenes of all"] as? [String] == [myScene.text], "ListScenes(\"\") lists its app's only")
        #expect((results["managed"] as? [String])?.contains(theirScene.text) == false, "GetManagedObjects leaves the other app's scene out")
        #expect((results["managed"] as? [String])?.contains(myScene.text) == true)

        // What it may not: the other app's things do not exist for it; the whole store is the user's.
        let refused: [(String, String)] = [
            ("register for another app", "AccessDenied"), ("register outside its namespace", "AccessDenied"),
            ("take another app's type", "AccessDenied"), ("unregister another app's type", "UnknownActivityType"),
            ("advertise under another app's type", "UnknownActivityType"), ("get another app's", "NotFound"),
            ("update another app's", "NotFound"), ("continue another app's", "NotFound"), ("invalidate another app's", "NotFound"),
            ("delete all of another app", "AccessDenied"), ("close another app's scene", "NotFound"),
            ("open a scene for another app", "AccessDenied"), ("restore another app's scenes", "AccessDenied"),
            ("export", "AccessDenied"), ("pause", "AccessDenied"), ("forget another app", "AccessDenied"),
            ("sync devices", "AccessDenied"),
        ]
        for (check, error) in refused {
            #expect(outcome(check) == Self.error + error, "\(check): \(outcome(check))")
        }
        for check in ["read another app's scene", "write another app's scene", "scene properties of another app"] {
            #expect(outcome(check) == DBusError.Name.unknownObject, "\(check): \(outcome(check))")
        }
        #expect(results["explained"] as? String == "unknown", "Explain does not say the other app's activity exists")
        #expect(results["listed other"] as? Int == 0 && results["history other"] as? Int == 0)
        #expect(outcome("delete another app's saved") == "ok", "DeleteSaved of another app's persistent id deletes nothing of it")

        // Every byte of the other app's is as it was, and the host still sees and does everything.
        #expect(try await export() == before)
        let listed = try await world.call(Self.activities, "List", [.stringMap([:])]).first?.arrayValue?.count
        #expect(listed == 3, "the host lists both apps' activities")
        #expect(try await world.call(Self.activities, "Get", [.string(theirs)]).first != nil)
        _ = try await world.call("org.baton.Handoff1.Scene", "Get", [.string("secret")], path: theirScene)
    }
}
