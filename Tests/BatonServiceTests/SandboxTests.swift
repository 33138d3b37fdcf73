import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// Sandboxed apps see and change only their own: a python3-dbus client inside bubblewrap,
/// its root holding a `/.flatpak-info` and its bus reached through xdg-dbus-proxy as Flatpak
/// runs an app, against the real batond on a private bus (`BatonWorld.runSandboxed`;
/// Tests/Scripts/sandboxed-client.py makes the calls, one per rule).
@Suite(.serialized)
struct SandboxTests {
    static let own = "org.example.Sandboxed"
    static let other = "org.example.Other"
    static let activities = "org.baton.Handoff1.Activities"
    static let error = "org.baton.Handoff1.Error."

    func advertise(_ world: BatonWorld, _ type: String, _ title: String, _ options: [String: String]) async throws -> String {
        try #require(try await world.call(Self.activities, "Advertise", [
            .string(type), .string(title), .string(#"{"id":"x"}"#), .stringMap(options),
        ]).first?.stringValue)
    }

    func openScene(_ world: BatonWorld, for app: String) async throws -> ObjectPath {
        try #require(try await world.call("org.baton.Handoff1.Scenes", "OpenScene", [.string(app), .stringMap([:])]).first?.objectPathValue)
    }

    @Test func aSandboxedAppSeesAndChangesOnlyItsOwn() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        // The host sets up two apps: the other one with a live activity, a past one and a scene with storage.
        for app in [Self.own, Self.other] {
            _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
                .string(app + ".note"), .string(app), .stringMap(["title": "Note"]),
            ])
        }
        // A type inside the sandboxed app's namespace that the user gave the other app.
        _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string(Self.own + ".borrowed"), .string(Self.other), .stringMap([:]),
        ])
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

        let given = [
            "app": Self.other, "type": Self.other + ".note", "activity": theirs, "persistent_id": "p-theirs",
            "scene": theirScene.text, "own_activity": mine, "own_scene": myScene.text, "borrowed_type": Self.own + ".borrowed",
        ]
        let results = try await world.runSandboxed(
            as: Self.own, "checks", String(decoding: try JSONSerialization.data(withJSONObject: given), as: UTF8.self))
        func outcome(_ check: String) -> String { results[check] as? String ?? "missing" }

        // What it may do.
        for check in ["register own type", "advertise own", "get own", "list", "search", "list types", "list scenes",
                      "open own scene", "own scene storage", "status properties"] {
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
            ("take another app's type", "AccessDenied"), ("take a type of its namespace that is another app's", "AccessDenied"),
            ("name another app as handler", "AccessDenied"), ("unregister another app's type", "UnknownActivityType"),
            ("advertise under another app's type", "UnknownActivityType"), ("get another app's", "NotFound"),
            ("update another app's", "NotFound"), ("continue another app's", "NotFound"), ("invalidate another app's", "NotFound"),
            ("delete all of another app", "AccessDenied"), ("close another app's scene", "NotFound"),
            ("open a scene for another app", "AccessDenied"), ("restore another app's scenes", "AccessDenied"),
            ("export", "AccessDenied"), ("pause", "AccessDenied"), ("forget another app", "AccessDenied"),
            ("sync devices", "AccessDenied"), ("privacy properties", "AccessDenied"), ("sync properties", "AccessDenied"),
            ("the desktop's search", "AccessDenied"), ("KRunner", "AccessDenied"),
        ]
        for (check, error) in refused {
            #expect(outcome(check) == Self.error + error, "\(check): \(outcome(check))")
        }
        for check in ["read another app's scene", "write another app's scene", "scene properties of another app"] {
            #expect(outcome(check) == DBusError.Name.unknownObject, "\(check): \(outcome(check))")
        }
        #expect(results["explained"] as? String == "unknown", "Explain does not say the other app's activity exists")
        let borrowed = (results["messages"] as? [String: String])?["take a type of its namespace that is another app's"]
        #expect(borrowed?.contains(Self.other) == false, "the refusal does not say whose the type is: \(borrowed ?? "none")")
        #expect(results["listed other"] as? Int == 0 && results["history other"] as? Int == 0)
        #expect(outcome("delete another app's saved") == "ok", "DeleteSaved of another app's persistent id deletes nothing of it")

        // Every byte of the other app's is as it was, and the host still sees and does everything.
        #expect(try await export() == before)
        let listed = try await world.call(Self.activities, "List", [.stringMap([:])]).first?.arrayValue?.count
        #expect(listed == 3, "the host lists both apps' activities")
        #expect(try await world.call(Self.activities, "Get", [.string(theirs)]).first != nil)
        _ = try await world.call("org.baton.Handoff1.Scene", "Get", [.string("secret")], path: theirScene)
    }

    /// Two sandboxed apps side by side, each with a match rule for every signal of batond,
    /// while the host advertises, updates, continues and invalidates each app's activity and
    /// opens, writes and closes a scene of each: each app hears all of its own and nothing of
    /// the other's, nor the user's privacy settings.
    @Test func twoSandboxedAppsHearOnlyTheirOwnSignals() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        let apps = [Self.own, Self.other]
        for app in apps {
            _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
                .string(app + ".note"), .string(app), .stringMap(["title": "Note"]),
            ])
        }
        let shared = try TemporaryDirectory.make(prefix: "baton-listen")
        defer { try? FileManager.default.removeItem(at: shared) }
        // Each signal it heard as one line: member, path, arguments.
        let listeners = apps.map { app in
            Task { () throws -> (heard: [String], timedOut: Bool) in
                let result = try await world.runSandboxed(as: app, "listen", shared.appendingPathComponent(app).path, sharing: shared)
                let heard = (result["heard"] as? [[String: Any]] ?? []).map { signal in
                    ([signal["member"] as? String ?? "", signal["path"] as? String ?? ""] + (signal["arguments"] as? [String] ?? []))
                        .joined(separator: " ")
                }
                return (heard, result["timed_out"] as? Bool ?? true)
            }
        }
        try await eventually("both sandboxed apps listen") {
            apps.allSatisfy { FileManager.default.fileExists(atPath: shared.appendingPathComponent($0).path) }
        }

        // What the signals of each app's things carry: its activity's id and title, its scene's path.
        var carried: [String: (activity: String, title: String, scene: String)] = [:]
        for app in apps {
            let title = "secret of \(app)"
            let id = try await advertise(world, app + ".note", title, ["eligible_for_search": "true"])
            _ = try await world.call(Self.activities, "Update", [.string(id), .string(#"{"id":"y"}"#), .stringMap([:])])
            let scene = try await openScene(world, for: app)
            _ = try await world.call("org.baton.Handoff1.Scene", "Set", [.string("key"), .variant(.string("value"))], path: scene)
            let continued = try #require(try await world.call(Self.activities, "Continue", [.string(id), .stringMap(["wait": "false"])])
                .first?.objectPathValue)
            _ = try await world.call(Self.activities, "Invalidate", [.string(id)])
            _ = try await world.call("org.baton.Handoff1.Scenes", "CloseScene", [.objectPath(scene)])
            carried[app] = (id, title, scene.text)
            #expect(continued != scene)
        }
        _ = try await world.call("org.baton.Handoff1.Privacy", "BlockApp", [.string("org.example.Third")])
        for app in apps { _ = try await advertise(world, app + ".note", "end of test", [:]) }

        for (app, listener) in zip(apps, listeners) {
            let (heard, timedOut) = try await listener.value
            #expect(!timedOut, "\(app) heard its own \"end of test\"")
            let mine = try #require(carried[app])
            for (member, needle) in [("Advertised", mine.title), ("Updated", mine.activity), ("Continued", mine.activity),
                                     ("Invalidated", mine.activity), ("InterfacesAdded", mine.scene),
                                     ("StorageChanged", mine.scene), ("InterfacesRemoved", mine.scene)] {
                #expect(heard.contains { $0.hasPrefix(member + " ") && $0.contains(needle) }, "\(app) hears \(member) of its own: \(heard)")
            }
            let theirs = try #require(carried[apps.first { $0 != app } ?? ""])
            for needle in [theirs.activity, theirs.title, theirs.scene, "org.baton.Handoff1.Privacy", "org.example.Third"] {
                #expect(!heard.contains { $0.contains(needle) }, "\(app) hears nothing of \(needle): \(heard)")
            }
        }
    }

    /// Continuing into a sandboxed app from the host: the bus starts the app through the
    /// `.service` file its sandbox exports (as Flatpak exports one for an app that owns its
    /// id on the bus), the app answers from inside the sandbox, and the scene holds its answer.
    @Test func theHostContinuesIntoASandboxedAppTheBusStarts() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        let advertised = try await world.runSandboxed(as: Self.own, "advertise", "Chapter 9")
        let id = try #require(advertised["id"] as? String)

        // The exported service: the bus runs the app in its sandbox, as `flatpak run` does.
        let shared = try TemporaryDirectory.make(prefix: "baton-activated")
        defer { try? FileManager.default.removeItem(at: shared) }
        let log = shared.appendingPathComponent("continued").path
        let launcher = shared.appendingPathComponent("run-sandboxed.sh")
        let arguments = try world.sandboxArguments(as: Self.own, "handle", log, sharing: shared, in: shared)
        try ("exec " + ([try Executables.require("bwrap", package: "bubblewrap")] + arguments).map { "'\($0)'" }.joined(separator: " ") + "\n")
            .write(to: launcher, atomically: true, encoding: .utf8)
        try world.bus.installService(name: Self.own, exec: "/bin/sh \(launcher.path)")

        let continued = try await world.baton(["continue", id])
        #expect(continued.status == 0, "\(continued)")
        #expect(try String(contentsOfFile: log, encoding: .utf8) == id + "\n", "the sandboxed app's handler was asked once")
        let scene = try ObjectPath(validating: continued.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        let storage = try await world.call("org.baton.Handoff1.Scene", "Get", [.string("continued_in")], path: scene)
        #expect(storage.first?.unwrapped == .string("sandbox of \(Self.own)"))
    }

    /// Signals are broadcast, as ever, while only host clients are on the bus; once a sandboxed
    /// app has been on it, each is addressed to those that may hear it, also after it left.
    @Test func signalsAreAddressedOnceASandboxedAppHasBeenOnTheBus() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        let monitor = try await BusMonitor(bus: world.bus, rules: ["type='signal',member='Advertised'"])
        defer { monitor.stop() }
        _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string(Self.other + ".note"), .string(Self.other), .stringMap([:]),
        ])
        func advertised(_ title: String) async throws -> String {
            _ = try await advertise(world, Self.other + ".note", title, [:])
            let seen: @Sendable () -> String? = {
                monitor.text.components(separatedBy: "\nsignal ").first { $0.contains("member=Advertised") && $0.contains(title) }
            }
            try await eventually("dbus-monitor saw \(title)") { seen() != nil }
            return seen() ?? ""
        }
        // batond identifies each connection as it joins (dbus-monitor's, say) and addresses its
        // signals until it has: under load that can take a moment.
        var broadcast = false
        for round in 1...50 where !broadcast {
            broadcast = try await advertised("before any sandbox \(round)").contains("destination=(null destination)")
        }
        #expect(broadcast, "a broadcast while only hosts are there")
        _ = try await world.runSandboxed(as: Self.own, "advertise", "Chapter 1")
        let after = try await advertised("after a sandbox")
        #expect(after.contains("destination=:") && !after.contains("null destination"), "addressed: \(after)")
        #expect(monitor.text.components(separatedBy: "\nsignal ").filter { $0.contains("after a sandbox") && $0.contains("null destination") }.isEmpty)
    }
}
