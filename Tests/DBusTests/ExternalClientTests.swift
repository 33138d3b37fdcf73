import DBus
import Glibc
import Testing
import TestSupport

/// Our exported objects driven by clients we did not write: dbus-send, gdbus,
/// busctl and python3-dbus, each on the fixture's private bus.
@Suite(.serialized)
struct ExternalClientTests {
    func run(_ world: Fixture.World, _ tool: String, _ arguments: [String], stdin: String? = nil) async throws -> CommandResult {
        try await Executables.run(tool, arguments, environment: world.bus.environment, stdin: stdin)
    }

    // MARK: dbus-send

    @Test func dbusSendCallsMethodsAndSeesNamedErrors() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let send = try Executables.require("dbus-send", package: "dbus-bin")
        let target = ["--print-reply", "--dest=\(Fixture.busName)", Fixture.path.text]

        let sum = try await run(world, send, target + ["\(Fixture.interface).Add", "int32:2", "int32:40"])
        #expect(sum.status == 0, "\(sum)")
        #expect(sum.stdout.contains("int64 42"), "\(sum)")

        let failure = try await run(world, send, target + [
            "\(Fixture.interface).Fail", "string:org.baton.Handoff1.Error.NotFound", "string:no activity 42",
        ])
        #expect(failure.status != 0)
        #expect(failure.stderr.contains("Error org.baton.Handoff1.Error.NotFound: no activity 42"), "\(failure)")

        let expectations: [([String], String)] = [
            (target + ["\(Fixture.interface).Nope"], DBusError.Name.unknownMethod),
            (target + ["org.baton.Missing1.Add"], DBusError.Name.unknownInterface),
            (["--print-reply", "--dest=\(Fixture.busName)", "/no/such/object", "\(Fixture.interface).Add"], DBusError.Name.unknownObject),
            (target + ["\(Fixture.interface).Add", "string:2", "string:40"], DBusError.Name.invalidArgs),
            (target + ["\(Fixture.interface).Add", "int32:2"], DBusError.Name.invalidArgs),
            (target + ["\(Fixture.interface).BadReply"], DBusError.Name.failed),
            // What the handler produced could not be sent as it was: the caller still gets an answer.
            (target + ["\(Fixture.interface).NulReply"], DBusError.Name.failed),
            (target + ["\(Fixture.interface).EncodedNul"], DBusError.Name.failed),
            (target + ["\(Fixture.interface).EncodedWrongElement"], DBusError.Name.failed),
            (target + ["\(Fixture.interface).EncodedBadReply"], DBusError.Name.failed),
            (target + ["\(Fixture.interface).Fail", "string:not an error name", "string:boom"], DBusError.Name.failed),
        ]
        for (arguments, errorName) in expectations {
            let result = try await run(world, send, arguments)
            #expect(result.status != 0 && result.stderr.contains(errorName), "\(arguments.last ?? ""): \(result)")
        }

        // An unexpected error is replied as Failed without leaking its detail.
        let crash = try await run(world, send, target + ["\(Fixture.interface).Crash"])
        #expect(crash.stderr.contains(DBusError.Name.failed), "\(crash)")
        #expect(!crash.stderr.contains("secret internal detail"))
    }

    @Test func dbusSendWithoutReplyStillRunsTheHandler() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let send = try Executables.require("dbus-send", package: "dbus-bin")
        // Without --print-reply, dbus-send marks the call no-reply-expected.
        let result = try await run(world, send, [
            "--type=method_call", "--dest=\(Fixture.busName)", Fixture.path.text, "\(Fixture.interface).Notify", "string:hello",
        ])
        #expect(result.status == 0, "\(result)")
        try await eventually("the Notify handler ran") { world.state.notified.withLock { $0 } == ["hello"] }
        // The server carries on serving in order afterwards.
        #expect(try await world.client.fixture("EchoString", [.string("after")]) == [.string("after")])
    }

    // MARK: gdbus

    @Test func gdbusIntrospectsCallsAndUsesProperties() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let gdbus = try Executables.require("gdbus", package: "libglib2.0-bin")
        let target = ["--session", "--dest", Fixture.busName, "--object-path", Fixture.path.text]

        let xml = try await run(world, gdbus, ["introspect"] + target + ["--xml"])
        #expect(xml.status == 0, "\(xml)")
        #expect(xml.stdout == world.server.introspectionXML(for: Fixture.path))
        let shown = try await run(world, gdbus, ["introspect"] + target)
        for expected in [
            "interface org.baton.Test1", "Echo(in  v value,", "Add(in  i a,", "Pinged(s text);",
            "readwrite u Count = 7;", "readonly s Name = 'fixture';", "interface org.freedesktop.DBus.Properties",
        ] {
            #expect(shown.stdout.contains(expected), "gdbus introspect lacks '\(expected)':\n\(shown.stdout)")
        }

        let echoed = try await run(world, gdbus, ["call"] + target + [
            "--method", "\(Fixture.interface).EchoAll", "--",  // so "-2" is not read as an option
            "0x07", "true", "-2", "3", "-4", "5", "-6", "7", "8.5", "'nine'", "'/ten'", "'a{sv}'", "<int32 11>",
            "['twelve']", "{'thirteen': <13>}", "(14, 'fifteen', false)", "[[byte 0x01], []]",
        ])
        #expect(echoed.status == 0, "\(echoed)")
        #expect(echoed.stdout.trimmed == """
            (byte 0x07, true, int16 -2, uint16 3, -4, uint32 5, int64 -6, uint64 7, 8.5, 'nine', objectpath '/ten', \
            signature 'a{sv}', <11>, ['twelve'], {'thirteen': <13>}, (14, 'fifteen', false), [[byte 0x01], []])
            """, "\(echoed)")

        // A reply written straight into the message (EncodedBody), as GLib reads it.
        let records = try await run(world, gdbus, ["call"] + target + ["--method", "\(Fixture.interface).Records", "2"])
        #expect(records.stdout.trimmed == """
            ([{'done': <false>, 'id': <'record 0 “quoted” 🦅'>, 'n': <uint64 18446744073709551615>, \
            'path': <objectpath '/org/baton/Test/r0'>, 'tags': <@as []>}, \
            {'done': <true>, 'id': <'record 1 “quoted” 🦅'>, 'n': <uint64 18446744073709551614>, \
            'path': <objectpath '/org/baton/Test/r1'>, 'tags': <['a', '\(String(repeating: "b", count: 300))']>}],)
            """, "\(records)")

        let ping = try await run(world, gdbus, ["call"] + target + ["--method", "org.freedesktop.DBus.Peer.Ping"])
        #expect(ping.status == 0 && ping.stdout.trimmed == "()", "\(ping)")

        let properties = "org.freedesktop.DBus.Properties"
        let set = try await run(world, gdbus, ["call"] + target + ["--method", "\(properties).Set", Fixture.interface, "Count", "<uint32 42>"])
        #expect(set.status == 0, "\(set)")
        let get = try await run(world, gdbus, ["call"] + target + ["--method", "\(properties).Get", Fixture.interface, "Count"])
        #expect(get.stdout.trimmed == "(<uint32 42>,)", "\(get)")
        #expect(world.state.count.withLock { $0 } == 42)
        let all = try await run(world, gdbus, ["call"] + target + ["--method", "\(properties).GetAll", Fixture.interface])
        #expect(all.stdout.trimmed == "({'Count': <uint32 42>, 'Name': <'fixture'>},)", "\(all)")

        let errors: [([String], String)] = [
            (["\(properties).Set", Fixture.interface, "Name", "<'other'>"], DBusError.Name.propertyReadOnly),
            (["\(properties).Set", Fixture.interface, "Count", "<'text'>"], DBusError.Name.invalidArgs),
            (["\(properties).Get", Fixture.interface, "Nope"], DBusError.Name.unknownProperty),
            (["\(properties).GetAll", "org.baton.Missing1"], DBusError.Name.unknownInterface),
        ]
        for (arguments, errorName) in errors {
            let result = try await run(world, gdbus, ["call"] + target + ["--method"] + arguments)
            #expect(result.status != 0 && result.stderr.contains(errorName), "\(arguments): \(result)")
        }
    }

    @Test func gdbusEmittedSignalReachesOurSubscription() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let gdbus = try Executables.require("gdbus", package: "libglib2.0-bin")
        let signals = try await world.client.signals(matching: MatchRule(interface: Fixture.interface, member: "Pinged"))
        let emitted = try await run(world, gdbus, [
            "emit", "--session", "--object-path", "/from/gdbus", "--signal", "\(Fixture.interface).Pinged", "'from gdbus'",
        ])
        #expect(emitted.status == 0, "\(emitted)")
        let received = try await first(of: signals)
        #expect(received.body == [.string("from gdbus")])
        #expect(received.path == "/from/gdbus")
    }

    // MARK: busctl

    @Test func busctlSeesTheTreeAndCallsEveryType() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let busctl = try Executables.require("busctl", package: "systemd")

        let tree = try await run(world, busctl, ["--user", "tree", "--list", Fixture.busName])
        #expect(tree.status == 0, "\(tree)")
        #expect(tree.stdout.split(separator: "\n").map(String.init) == ["/", "/org", "/org/baton", "/org/baton/Test"], "\(tree)")

        let property = try await run(world, busctl, ["--user", "get-property", Fixture.busName, Fixture.path.text, Fixture.interface, "Name"])
        #expect(property.stdout.trimmed == "s \"fixture\"", "\(property)")

        let echoed = try await run(world, busctl, [
            "--user", "--json=short", "call", "--", Fixture.busName, Fixture.path.text, Fixture.interface, "EchoAll",
            Fixture.allTypes.text, "7", "true", "-2", "3", "-4", "5", "-6", "7", "8.5", "nine", "/ten", "a{sv}",
            "i", "11", "1", "twelve", "1", "thirteen", "i", "13", "14", "fifteen", "false", "2", "1", "1", "0",
        ])
        #expect(echoed.status == 0, "\(echoed)")
        #expect(echoed.stdout.trimmed == """
            {"type":"ybnqiuxtdsogvasa{sv}(isb)aay","data":[7,true,-2,3,-4,5,-6,7,8.500000000000000000000e+00,"nine","/ten","a{sv}",\
            {"type":"i","data":11},["twelve"],{"thirteen":{"type":"i","data":13}},[14,"fifteen",false],[[1],[]]]}
            """, "\(echoed)")

        let wrong = try await run(world, busctl, ["--user", "call", Fixture.busName, Fixture.path.text, Fixture.interface, "Add", "s", "x"])
        #expect(wrong.status != 0 && wrong.stderr.contains("takes arguments of type 'ii', got 's'"), "\(wrong)")
    }

    // MARK: python3-dbus

    @Test func pythonSeesObjectManagerAndSignals() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let python = try Executables.require("/usr/bin/python3", package: "python3-dbus python3-gi")
        let manager: ObjectPath = "/org/baton/Test/items"
        try await world.server.export(manager, [], objectManager: true)
        try await world.server.export("/org/baton/Test/items/first", [Fixture.interface(world.state)])

        // The script prints what it saw; it adds the second item itself through Ping,
        // so signals are awaited, not raced.
        let script = """
            import dbus, dbus.mainloop.glib, sys
            from gi.repository import GLib
            dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
            bus = dbus.SessionBus()
            obj = bus.get_object("\(Fixture.busName)", "\(manager)")
            om = dbus.Interface(obj, "org.freedesktop.DBus.ObjectManager")
            objects = om.GetManagedObjects()
            print("managed", sorted(str(p) for p in objects))
            print("count", int(objects["\(manager)/first"]["\(Fixture.interface)"]["Count"]))
            test = dbus.Interface(bus.get_object("\(Fixture.busName)", "\(Fixture.path)"), "\(Fixture.interface)")
            print("add", int(test.Add(20, 22)))
            print("echo", repr(test.Echo(dbus.Struct((dbus.Int32(1), "two", dbus.Array([], signature="s")), variant_level=1))))
            seen = []
            loop = GLib.MainLoop()
            def pinged(text):
                seen.append(str(text)); loop.quit()
            bus.add_signal_receiver(pinged, "Pinged", "\(Fixture.interface)")
            def changed(iface, props, invalidated):
                print("changed", str(iface), {str(k): int(v) for k, v in props.items()})
                test.Ping("after change")
            bus.add_signal_receiver(changed, "PropertiesChanged", "org.freedesktop.DBus.Properties", path="\(Fixture.path)")
            props = dbus.Interface(bus.get_object("\(Fixture.busName)", "\(Fixture.path)"), "org.freedesktop.DBus.Properties")
            props.Set("\(Fixture.interface)", "Count", dbus.UInt32(5))
            GLib.timeout_add_seconds(10, loop.quit)
            loop.run()
            print("pinged", seen)
            try:
                test.Fail("org.baton.Handoff1.Error.Expired", "too late")
            except dbus.exceptions.DBusException as e:
                print("error", e.get_dbus_name(), e.get_dbus_message())
            # A Unix fd travels: echoed back as a duplicate of the same pipe's write end.
            import os
            read_end, write_end = os.pipe()
            echoed = test.Echo(dbus.types.UnixFd(write_end, variant_level=1))
            os.close(write_end)
            back = echoed.take()
            os.write(back, b"through the bus")
            os.close(back)
            print("fd", os.read(read_end, 100).decode())
            print("after", int(test.Add(1, 1)))
            """
        let result = try await run(world, python, ["-"], stdin: script)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.trimmed == """
            managed ['\(manager)/first']
            count 7
            add 42
            echo dbus.Struct((dbus.Int32(1), dbus.String('two'), dbus.Array([], signature=dbus.Signature('s'))), signature=None, variant_level=1)
            changed \(Fixture.interface) {'Count': 5}
            pinged ['after change']
            error org.baton.Handoff1.Error.Expired too late
            fd through the bus
            after 2
            """, "\(result)")
    }
}

extension String {
    var trimmed: String {
        var text = Substring(self)
        while let last = text.last, last.isWhitespace { text.removeLast() }
        while let first = text.first, first.isWhitespace { text.removeFirst() }
        return String(text)
    }
}

extension ExternalClientTests {
    /// dbus-monitor sees every message on the private bus: a call marked
    /// no-reply-expected gets no reply, and an ordinary call gets exactly one.
    @Test func repliesAreSentExactlyOnceAndNeverToNoReplyCalls() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let monitorPath = world.bus.directory.appendingPathComponent("monitor.log").path
        let output = open(monitorPath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        defer { close(output) }
        let monitor = try Subprocess(
            try Executables.require("dbus-monitor", package: "dbus-bin"), ["--address", world.bus.address],
            stdout: output)
        defer { monitor.kill() }
        // dbus-monitor loses its own name once it has become a monitor.
        try await eventually("dbus-monitor is monitoring") {
            ((try? String(contentsOfFile: monitorPath, encoding: .utf8)) ?? "").contains("member=NameLost")
        }

        try world.client.send(.methodCall(
            destination: Fixture.busName, path: Fixture.path, interface: Fixture.interface, member: "Notify",
            body: [.string("quiet")]
        ).noReply())
        #expect(try await world.client.fixture("EchoString", [.string("loud")]) == [.string("loud")])

        @Sendable func lines() -> [Substring] {
            ((try? String(contentsOfFile: monitorPath, encoding: .utf8)) ?? "").split(separator: "\n")
        }
        @Sendable func serial(ofCallTo member: String) -> Substring? {
            lines().first { $0.hasPrefix("method call") && $0.hasSuffix("member=\(member)") }?
                .split(separator: " ").first { $0.hasPrefix("serial=") }?.dropFirst("serial=".count)
        }
        let sender = " destination=\(world.client.uniqueName) "
        @Sendable func replies(to serial: Substring?) -> Int {
            guard let serial else { return -1 }
            return lines().filter {
                ($0.hasPrefix("method return") || $0.hasPrefix("error")) && $0.contains(sender) && $0.hasSuffix(" reply_serial=\(serial)")
            }.count
        }
        // The server answers in arrival order: once the echo's reply is seen, a reply
        // to the earlier Notify would have been seen too.
        try await eventually("the monitor saw the echo's reply") {
            replies(to: serial(ofCallTo: "EchoString")) >= 1 && world.state.notified.withLock { $0 } == ["quiet"]
        }
        #expect(serial(ofCallTo: "Notify") != nil)
        #expect(replies(to: serial(ofCallTo: "Notify")) == 0)
        #expect(replies(to: serial(ofCallTo: "EchoString")) == 1)
    }
}
