import DBus
import Foundation
import Testing
import TestSupport

/// Random calls from python3-dbus to every method: each one gets a result or a named
/// error, the daemon never crashes, and nothing is answered with a generic Failed.
@Suite(.serialized)
struct FuzzTests {
    static let script = #"""
        import dbus, random, sys, collections
        random.seed(int(sys.argv[1]))
        bus = dbus.SessionBus()
        root = bus.get_object("org.baton.Handoff1", "/org/baton/Handoff1")
        registry = dbus.Interface(root, "org.baton.Handoff1.Registry")
        registry.RegisterActivityType("com.example.fuzz.type", "com.example.fuzz", {"required_keys": "id"})
        scene = dbus.Interface(root, "org.baton.Handoff1.Scenes").OpenScene("com.example.fuzz", {})
        WEIRD = ["", "\u00e9", "🦅", "a" * 70000, "../..", "/org/baton/Handoff1/scene/" + "_" * 36, "{", '{"id":1}',
                 '{"id":1,"id":2}', "null", "NaN", "x\ty", "com.example.fuzz.type", "true", "false", "-1", "1e309",
                 "3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c01", "\\u0000", "[" * 500, '{"a":' + "[" * 70 + "]" * 70 + "}"]
        def text(): return random.choice(WEIRD) if random.random() < 0.6 else "".join(chr(random.randint(1, 0x2FFF)) for _ in range(random.randint(0, 40)))
        def value(depth=0):
            kind = random.randint(0, 8 if depth < 3 else 4)
            if kind == 0: return dbus.Boolean(random.random() < 0.5)
            if kind == 1: return dbus.Int64(random.randint(-2**63, 2**63 - 1))
            if kind == 2: return dbus.Double(random.choice([0.0, -1.5, float("inf"), float("nan"), 1e308]))
            if kind == 3: return dbus.String(text())
            if kind == 4: return dbus.Byte(random.randint(0, 255))
            if kind == 5: return dbus.Array([dbus.Byte(random.randint(0, 255)) for _ in range(random.randint(0, 70000 if random.random() < 0.05 else 10))], signature="y")
            if kind == 6: return dbus.Dictionary({text(): value(depth + 1) for _ in range(random.randint(0, 3))}, signature="sv")
            if kind == 7: return dbus.Struct((value(depth + 1), value(depth + 1)))
            return dbus.ObjectPath(random.choice(["/", "/a/b", scene]))
        def argument(sig):
            if sig == "s": return dbus.String(text())
            if sig == "u": return dbus.UInt32(random.randint(0, 2**32 - 1))
            if sig == "o": return dbus.ObjectPath(random.choice([scene, "/org/baton/Handoff1/scene/x", "/"]))
            if sig == "v": return value()
            if sig == "as": return dbus.Array([text() for _ in range(random.randint(0, 5))], signature="s")
            if sig == "a{ss}":
                keys = ["title", "keywords", "expires_in", "scene", "handler", "required_keys", "limit", "type",
                        "eligible_for_search", "webpage_url", "persistent_id", "app_id", "bogus"]
                return dbus.Dictionary({random.choice(keys): text() for _ in range(random.randint(0, 4))}, signature="ss")
            if sig == "a{sv}": return dbus.Dictionary({text(): value() for _ in range(random.randint(0, 4))}, signature="sv")
            raise Exception(sig)
        methods = [
            (root, "org.baton.Handoff1.Registry", "RegisterActivityType", ["s", "s", "a{ss}"]),
            (root, "org.baton.Handoff1.Registry", "UnregisterActivityType", ["s"]),
            (root, "org.baton.Handoff1.Activities", "Advertise", ["s", "s", "s", "a{ss}"]),
            (root, "org.baton.Handoff1.Activities", "Update", ["s", "s", "a{ss}"]),
            (root, "org.baton.Handoff1.Activities", "Invalidate", ["s"]),
            (root, "org.baton.Handoff1.Activities", "Get", ["s"]),
            (root, "org.baton.Handoff1.Activities", "List", ["a{ss}"]),
            (root, "org.baton.Handoff1.Activities", "Search", ["s", "u"]),
            (root, "org.baton.Handoff1.Activities", "DeleteSaved", ["as"]),
            (root, "org.baton.Handoff1.Activities", "Continue", ["s", "a{ss}"]),
            (root, "org.baton.Handoff1.Scenes", "OpenScene", ["s", "a{ss}"]),
            (root, "org.baton.Handoff1.Scenes", "ListScenes", ["s"]),
            (bus.get_object("org.baton.Handoff1", scene), "org.baton.Handoff1.Scene", "Set", ["s", "v"]),
            (bus.get_object("org.baton.Handoff1", scene), "org.baton.Handoff1.Scene", "Get", ["s"]),
            (bus.get_object("org.baton.Handoff1", scene), "org.baton.Handoff1.Scene", "SetMany", ["a{sv}"]),
            (bus.get_object("org.baton.Handoff1", scene), "org.baton.Handoff1.Scene", "Remove", ["s"]),
        ]
        names = collections.Counter()
        for i in range(int(sys.argv[2])):
            obj, iface, member, sig = random.choice(methods)
            if random.random() < 0.1:  # the wrong number or types of arguments
                sig = random.choice([[], ["u"], sig + ["s"], ["v"] * len(sig)])
            try:
                obj.get_dbus_method(member, iface)(*[argument(s) for s in sig], signature="".join(sig), timeout=20)
                names["ok"] += 1
            except dbus.exceptions.DBusException as e:
                names[e.get_dbus_name()] += 1
        for name, count in sorted(names.items()):
            print(name, count)
        registry.ListActivityTypes()
        print("alive")
        """#

    @Test func randomCallsGetNamedAnswers() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        let python = try Executables.require("/usr/bin/python3", package: "python3-dbus")
        let result = try await Executables.run(python, ["-", "\(Int.random(in: 0..<1_000_000))", "1500"],
                                               environment: world.bus.environment, stdin: Self.script, timeout: .seconds(240))
        #expect(result.status == 0, "\(result)")
        print(result.stdout)
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.last == "alive")
        for line in lines.dropLast() {
            let name = line.split(separator: " ").first.map(String.init) ?? ""
            let expected = name == "ok" || name.hasPrefix("org.baton.Handoff1.Error.")
                || name == DBusError.Name.invalidArgs || name == DBusError.Name.unknownObject
            #expect(expected, "unexpected answer \(line)")
        }
        let check = try await world.run(try Executables.require("sqlite3", package: "sqlite3"), [world.database, "PRAGMA integrity_check;"])
        #expect(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ok")
        #expect(await world.stopDaemon() == 0, "\(world.daemonLog)")
    }
}
