import BatonCore
import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// The real batond on a private bus, driven by clients we did not write and by our own.
@Suite(.serialized)
struct DaemonTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let scenes = "org.baton.Handoff1.Scenes"
    static let scene = "org.baton.Handoff1.Scene"

    @Test func shellClientsRegisterAdvertiseAndRead() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        let signals = try await world.client.signals(matching: MatchRule(interface: Self.activities))
        var received = signals.makeAsyncIterator()

        let send = try Executables.require("dbus-send", package: "dbus-bin")
        let target = ["--session", "--print-reply", "--dest=org.baton.Handoff1", "/org/baton/Handoff1"]
        let registered = try await world.run(send, target + [
            "org.baton.Handoff1.Registry.RegisterActivityType", "string:\(BatonWorld.type)", "string:\(BatonWorld.app)",
            "dict:string:string:title,Character,required_keys,id",
        ])
        #expect(registered.status == 0, "\(registered)")
        let advertised = try await world.run(send, ["--session", "--print-reply=literal", "--dest=org.baton.Handoff1", "/org/baton/Handoff1",
            "org.baton.Handoff1.Activities.Advertise", "string:\(BatonWorld.type)", "string:Agatha",
            #"string:{"id": "3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c01", "name": "Agatha"}"#, "dict:string:string:target_content_id,agatha",
        ])
        #expect(advertised.status == 0, "\(advertised)")
        let id = advertised.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try Identifier.normalize(id) == id)

        let signal = await received.next()
        #expect(signal?.member == "Advertised" && signal?.body == [.string(id), .string(BatonWorld.type), .string("Agatha")])

        let busctl = try Executables.require("busctl", package: "systemd")
        let shown = try await world.run(busctl, ["--user", "--json=short", "call", "org.baton.Handoff1", "/org/baton/Handoff1",
                                                 Self.activities, "Get", "s", id])
        #expect(shown.status == 0, "\(shown)")
        for field in [#""title":{"type":"s","data":"Agatha"}"#, #""app_id":{"type":"s","data":"com.raywenderlich.hawknotes"}"#,
                      #""target_content_id":{"type":"s","data":"agatha"}"#, #""keywords":{"type":"as","data":[]}"#] {
            #expect(shown.stdout.contains(field), "missing \(field) in \(shown.stdout)")
        }

        let gdbus = try Executables.require("gdbus", package: "libglib2.0-bin")
        let invalidated = try await world.run(gdbus, ["call", "--session", "--dest", "org.baton.Handoff1", "--object-path",
                                                      "/org/baton/Handoff1", "--method", "\(Self.activities).Invalidate", id])
        #expect(invalidated.status == 0, "\(invalidated)")
        #expect(await received.next()?.body == [.string(id)])
        let gone = try await world.run(send, target + ["\(Self.activities).Get", "string:\(id)"])
        #expect(gone.stderr.contains("org.baton.Handoff1.Error.NotFound"), "\(gone)")
    }

    @Test func badInputIsRefusedByNameAndChangesNothing() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register()
        let kept = try await world.advertise("kept")
        let nested = { (depth: Int) in "{\"a\":" + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}" }
        let cases: [(String, String, String)] = [
            ("not JSON", "{id: 1}", "InvalidPayload"),
            ("a JSON array", "[1]", "InvalidPayload"),
            ("duplicate keys", #"{"id":1,"id":2}"#, "InvalidPayload"),
            ("NaN", #"{"id":NaN}"#, "InvalidPayload"),
            ("an escaped NUL", #"{"id":"a\u0000b"}"#, "InvalidPayload"),
            ("a lone surrogate", #"{"id":"\ud800"}"#, "InvalidPayload"),
            ("depth 65", nested(65), "InvalidPayload"),
            ("depth 100 000", nested(100_000), "QuotaExceeded"),
            ("70 KB", "{\"id\":\"" + String(repeating: "x", count: 70_000) + "\"}", "QuotaExceeded"),
            ("no required key", #"{"name":"no id"}"#, "InvalidPayload"),
        ]
        for (what, payload, name) in cases {
            let error = await errorName { try await world.advertise("t", payload: payload) }
            #expect(error == "org.baton.Handoff1.Error.\(name)", "\(what)")
        }
        let odd: [(String, () async throws -> Any)] = [
            ("UnknownActivityType", { try await world.call(Self.activities, "Advertise", [.string("com.example.unknown"), .string("t"), .string("{}"), .stringMap([:])]) }),
            ("NotFound", { try await world.call(Self.activities, "Get", [.string(Identifier.make())]) }),
            ("InvalidArgument", { try await world.call(Self.activities, "Get", [.string("../../etc/passwd")]) }),
            ("InvalidArgument", { try await world.call(Self.activities, "Get", [.string("🦅" + String(repeating: "x", count: 10_000))]) }),
            ("InvalidArgument", { try await world.call(Self.activities, "Advertise", [.string("a/b"), .string("t"), .string("{}"), .stringMap([:])]) }),
            ("InvalidArgument", { try await world.advertise("t", options: ["scene": "/org/baton/Handoff1/scene/../x"]) }),
            ("InvalidArgument", { try await world.advertise("t", options: ["unknown_option": "1"]) }),
            ("QuotaExceeded", { try await world.advertise(String(repeating: "🦅", count: 300)) }),
            ("InvalidArgument", { try await world.call(Self.scenes, "OpenScene", [.string("no-dots"), .stringMap([:])]) }),
            ("InvalidArgument", { try await world.call(Self.scenes, "CloseScene", [.objectPath("/org/baton/Handoff1/scene/x")]) }),
            ("NotFound", { try await world.call(Self.scenes, "CloseScene", [.objectPath("/org/baton/Handoff1/scene/3c9ad3b5_2f1f_4b0e_9a51_3f1d2a6b8c01")]) }),
        ]
        for (index, (name, operation)) in odd.enumerated() {
            let actual = await errorName(of: operation)
            #expect(actual == "org.baton.Handoff1.Error.\(name)", "case \(index): \(actual ?? "no error")")
        }
        // Titles with emoji and keys with slashes are fine, not errors.
        let emoji = try await world.advertise("Agatha 🦅 / Jamie")
        let scene = try #require(try await world.call(Self.scenes, "OpenScene", [.string(BatonWorld.app), .stringMap([:])]).first?.objectPathValue)
        _ = try await world.call(Self.scene, "Set", [.string("b|x::c|y/z"), .variant(.string("v"))], path: scene)
        #expect(await errorName { try await world.call(Self.scene, "Set", [.string("k"), .variant(.record([:]))], path: scene) }
            == "org.baton.Handoff1.Error.InvalidArgument")

        #expect(try await world.activityCount() == 2)
        let ids = try await world.call(Self.activities, "List", [.stringMap([:])]).first?.arrayValue?
            .compactMap { $0.stringKeyedValue?["id"]?.unwrapped.stringValue }
        #expect(Set(ids ?? []) == [kept, emoji])
        #expect(await world.stopDaemon() == 0, "\(world.daemonLog)")
    }

    @Test func scenesComeBackAfterARestartWithTheirStorage() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register()
        let scene = try #require(try await world.call(Self.scenes, "OpenScene", [.string(BatonWorld.app), .stringMap(["title": "Window 1"])]).first?.objectPathValue)
        _ = try await world.call(Self.scene, "SetMany", [.record([
            "ContentView.CurrentTab": .string("b3"), "BookView.newNote": .string("draft"), "BookView.ShowingAmazonPage": .boolean(true),
            "count": .int32(3), "ratio": .double(0.5), "blob": .array(.byte, [.byte(1), .byte(2)]),
        ])], path: scene)
        let activity = try await world.advertise("Agatha", options: ["scene": scene.text])
        let properties = "org.freedesktop.DBus.Properties"
        #expect(try await world.call(properties, "Get", [.string(Self.scene), .string("Restored")], path: scene) == [.variant(.boolean(false))])
        let before = try await world.call(Self.scene, "GetAll", path: scene)

        #expect(await world.stopDaemon() == 0)
        try await world.startDaemon()
        #expect(try await world.call(properties, "Get", [.string(Self.scene), .string("Restored")], path: scene) == [.variant(.boolean(true))])
        #expect(try await world.call(properties, "Get", [.string(Self.scene), .string("ActivityId")], path: scene) == [.variant(.string(activity))])
        #expect(try await world.call(Self.scene, "GetAll", path: scene) == before)
        #expect(try await world.call(Self.scene, "Get", [.string("count")], path: scene) == [.variant(.int64(3))])
        #expect(try await world.call(Self.scenes, "ListScenes", [.string("")]) == [.array(.objectPath, [.objectPath(scene)])])

        // Closing discards the scene and its storage, as closing a window does.
        _ = try await world.call(Self.scene, "Close", path: scene)
        #expect(await errorName { try await world.call(Self.scene, "GetAll", path: scene) } == DBusError.Name.unknownObject)
        #expect(try await world.call(Self.scenes, "ListScenes", [.string(BatonWorld.app)]) == [.array(.objectPath, [])])
    }

    @Test func acknowledgedWritesSurviveKill9() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register()
        let acknowledged = AcknowledgedIDs()
        // 4 writers keep advertising until the daemon dies under them.
        let writers = (0..<4).map { writer in
            Task {
                var index = 0
                while true {
                    guard let id = try? await world.advertise("burst \(writer)-\(index)") else { return }
                    acknowledged.add(id)
                    index += 1
                }
            }
        }
        // A liveness check, not a speed one: the whole suite runs beside it on two cores.
        try await eventually("writes are flowing", timeout: .seconds(30)) { acknowledged.count >= 300 }
        #expect(await world.stopDaemon(SIGKILL) == 128 + SIGKILL)
        for writer in writers { await writer.value }
        let ids = acknowledged.all

        let sqlite = try Executables.require("sqlite3", package: "sqlite3")
        let check = try await world.run(sqlite, [world.database, "PRAGMA integrity_check;"])
        #expect(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ok", "\(check)")
        try await world.startDaemon()
        let stored = Set(try await world.call(Self.activities, "List", [.stringMap([:])]).first?.arrayValue?
            .compactMap { $0.stringKeyedValue?["id"]?.unwrapped.stringValue } ?? [])
        let lost = ids.filter { !stored.contains($0) }
        #expect(lost.isEmpty, "\(lost.count) of \(ids.count) acknowledged writes were lost")
        print("kill -9 after \(ids.count) acknowledged advertisements: \(stored.count) stored, \(lost.count) lost")
    }

    @Test func callersOfAnotherUserAreRefused() async throws {
        guard getuid() == 0 else {
            Issue.record("this test switches to user nobody and must run as root (as CI does)")
            return
        }
        let world = try BatonWorld(allowOtherUsers: true)
        defer { world.close() }
        try await world.startDaemon()
        try await world.register()
        let setpriv = try Executables.require("setpriv", package: "util-linux")
        chmod(world.bus.directory.path, 0o755)
        let result = try await world.run(setpriv, [
            "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/dbus-send", "--session", "--print-reply",
            "--dest=org.baton.Handoff1", "/org/baton/Handoff1", "org.baton.Handoff1.Registry.ListActivityTypes",
        ])
        #expect(result.status != 0)
        #expect(result.stderr.contains("org.baton.Handoff1.Error.AccessDenied"), "\(result)")
        // Properties are guarded too, not only methods.
        let property = try await world.run(setpriv, [
            "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/dbus-send", "--session", "--print-reply",
            "--dest=org.baton.Handoff1", "/org/baton/Handoff1", "org.freedesktop.DBus.Introspectable.Introspect",
        ])
        #expect(property.stderr.contains("AccessDenied"), "\(property)")
        #expect(try await world.call("org.baton.Handoff1.Registry", "ListActivityTypes").first?.arrayValue?.count == 1)
    }
}

final class AcknowledgedIDs: @unchecked Sendable {
    private let lock = NSLock()
    private var ids: [String] = []
    func add(_ id: String) { lock.withLock { ids.append(id) } }
    var count: Int { lock.withLock { ids.count } }
    var all: [String] { lock.withLock { ids } }
}

extension DaemonTests {
    @Test func theDefaultStateDirectoryIsCreatedPrivateAndAnOpenOneRefused() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let bus = world.bus
        let state = bus.directory.appendingPathComponent("xdg-state")
        var environment = bus.environment
        environment["XDG_STATE_HOME"] = state.path
        let batond = try Executables.built("batond")

        // First start: batond creates $XDG_STATE_HOME/baton 0700 and its database 0600.
        let first = try Subprocess(batond, [], environment: environment)
        let client = try bus.connect()
        defer { client.close() }
        try await client.waitForName("org.baton.Handoff1")
        first.kill()
        #expect(await first.wait() == 0)
        var info = stat()
        #expect(stat(state.appendingPathComponent("baton").path, &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(stat(state.appendingPathComponent("baton/baton.sqlite").path, &info) == 0 && info.st_mode & 0o777 == 0o600)

        // Opened to others: refused with the fix in the message, nothing served.
        chmod(state.appendingPathComponent("baton").path, 0o755)
        let refused = try await Executables.run(batond, [], environment: environment)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("run: chmod 700 \(state.path)/baton"), "\(refused)")
    }
}

extension DaemonTests {
    /// An idle daemon stays idle. A purge loop that once spun after its first timeout
    /// wrote without pause, growing the WAL and the heap; this would have caught it.
    @Test func anIdleDaemonUsesNoCPU() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register()
        _ = try await world.advertise("expires soon", options: ["expires_in": "1"])
        let pid = try #require(world.daemon?.process.pid)
        func cpuTicks() throws -> Int {
            let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
            // Fields after the parenthesised name: state is 3rd, utime 14th, stime 15th overall.
            let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
            return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
        }
        // Past the expiry and its grace, so the purge has run and the loop has gone round.
        try await Task.sleep(for: .seconds(4))
        let before = try cpuTicks()
        try await Task.sleep(for: .seconds(2))
        let used = try cpuTicks() - before
        #expect(used < 20, "batond used \(used) ticks (1/100 s) of CPU in 2 s with nothing to do")
        #expect(await errorName { try await world.activityCount() } == nil)
    }
}
