import DBus
import Testing
import TestSupport

/// A source's settings (`Status.SourceSettings`, `Status.SetSourceSetting`, `baton sources
/// show|set`): declared once with their defaults, checked, kept across restarts; a value out of
/// range changes nothing.
@Suite(.serialized) struct SourceSettingsTests {
    static let status = "org.baton.Handoff1.Status"
    static let defaults = ["direction": "both", "lifetime": "120", "max-text": "262144", "max-image": "8388608"]

    func settings(_ source: String, _ world: BatonWorld) async throws -> [String: String] {
        try #require(try await world.call(Self.status, "SourceSettings", [.string(source)]).first?.stringKeyedValue).compactMapValues(\.stringValue)
    }

    @Test func settingsHaveDefaultsAreCheckedAndSurviveARestart() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        #expect(try await settings("clipboard", world) == Self.defaults)
        #expect(try await settings("recent-documents", world) == [:])

        // Set through busctl, read through gdbus, the change heard by dbus-monitor: clients we did not write.
        let monitor = try await BusMonitor(bus: world.bus, rules: ["type='signal',interface='\(Self.status)',member='SourceSettingChanged'"])
        let set = try await world.run("busctl", ["--user", "call", "org.baton.Handoff1", "/org/baton/Handoff1", Self.status,
                                                 "SetSourceSetting", "sss", "clipboard", "lifetime", "0300"])
        #expect(set.status == 0, "\(set)")
        try await eventually("dbus-monitor heard the change, as stored", context: monitor.text) {
            monitor.text.contains("string \"clipboard\"\n   string \"lifetime\"\n   string \"300\"")
        }
        let read = try await world.run("gdbus", ["call", "--session", "--dest", "org.baton.Handoff1", "--object-path", "/org/baton/Handoff1",
                                                 "--method", "\(Self.status).SourceSettings", "clipboard"])
        #expect(read.stdout.contains("'lifetime': '300'"), "stored as a plain number: \(read)")
        _ = try await world.call(Self.status, "SetSourceSetting", [.string("clipboard"), .string("direction"), .string("receive")])

        // Refused, by name and with what it takes; nothing changes.
        for (source, name, value, says) in [
            ("clipboard", "lifetime", "4", "a whole number from 5 to 3600"), ("clipboard", "lifetime", "-1", "not '-1'"),
            ("clipboard", "direction", "sideways", "one of both, send, receive"), ("clipboard", "colour", "red", "its settings are direction"),
            ("toaster", "lifetime", "5", "no source 'toaster'"), ("media", "lifetime", "5", "the source media has no settings"),
        ] {
            do {
                _ = try await world.call(Self.status, "SetSourceSetting", [.string(source), .string(name), .string(value)])
                Issue.record("\(source) \(name)=\(value) was taken")
            } catch let error as DBusError {
                #expect(error.name == "org.baton.Handoff1.Error.InvalidArgument" && error.message.contains(says), "\(error)")
            }
        }
        var expected = Self.defaults
        expected["lifetime"] = "300"
        expected["direction"] = "receive"
        #expect(try await settings("clipboard", world) == expected)

        await world.stopDaemon()
        try await world.startDaemon()
        #expect(try await settings("clipboard", world) == expected, "kept across a restart")

        // The CLI: show lists each with what it takes; set says what it did, or why not.
        let shown = try await world.baton(["sources", "show", "clipboard"])
        #expect(shown.status == 0 && shown.stdout.contains("lifetime") && shown.stdout.contains("300") && shown.stdout.contains("5 to 3600"), "\(shown)")
        #expect(shown.stdout.contains("both, send or receive") && shown.stdout.contains("(default 120)"), "\(shown)")
        let changed = try await world.baton(["sources", "set", "clipboard", "max-text", "1000"])
        #expect(changed.status == 0 && changed.stdout == "clipboard: max-text is 1000\n", "\(changed)")
        let refused = try await world.baton(["sources", "set", "clipboard", "max-text", "lots"])
        #expect(refused.status != 0 && refused.stderr.contains("max-text is a whole number from 1 to 4194304, not 'lots'"), "\(refused)")
        let json = try await world.baton(["sources", "show", "clipboard", "--json"])
        #expect(json.stdout.contains(#""max-text":"1000""#), "\(json)")
        let incomplete = try await world.baton(["sources", "set", "clipboard", "lifetime"])
        #expect(incomplete.status != 0 && incomplete.stderr.contains("set takes a source, a setting and a value"), "\(incomplete)")
    }

    /// A setting of text: the terminals' blocked paths.
    @Test func theTerminalsBlockedPathsAreTextWithoutControlCharacters() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        #expect(try await settings("terminals", world) == ["blocked-paths": "~/.ssh:~/.gnupg"])
        let set = try await world.baton(["sources", "set", "terminals", "blocked-paths", "~/.ssh:~/.gnupg:~/clients/secr*"])
        #expect(set.status == 0, "\(set)")
        for value in ["~/.ssh\n/etc", String(repeating: "/x", count: 2_049)] {
            let refused = try await world.baton(["sources", "set", "terminals", "blocked-paths", value])
            #expect(refused.status != 0 && refused.stderr.contains("of at most 4096 bytes, without control characters"), "\(refused)")
        }
        #expect(try await settings("terminals", world) == ["blocked-paths": "~/.ssh:~/.gnupg:~/clients/secr*"])
        let shown = try await world.baton(["sources", "show", "terminals"])
        #expect(shown.stdout.contains("separated by ':'") && shown.stdout.contains("(default ~/.ssh:~/.gnupg)"), "\(shown)")
    }
}
