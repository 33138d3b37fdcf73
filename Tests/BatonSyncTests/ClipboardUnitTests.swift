import Foundation
import Testing
import TestSupport

/// The clipboard agent's user unit (systemd/baton-clipboard.service) under a real `systemd
/// --user` in a private mount namespace (shared/FIELD-NOTES.md), enabled as scripts/install
/// enables it, with a graphical session started and stopped as sessions do: a session target
/// bound to graphical-session.target. Tests/Scripts/clipboard-unit-test.sh does the steps and
/// prints what it saw as key=value lines; this test holds them to what DESIGN promises.
@Suite struct ClipboardUnitTests {
    @Test func theAgentComesAndGoesWithTheGraphicalSession() async throws {
        let work = try TemporaryDirectory.make(prefix: "baton-clipboard-unit")
        defer { try? FileManager.default.removeItem(at: work) }
        _ = try Executables.require("Xvfb", package: "xvfb")
        _ = try Executables.require("xclip", package: "xclip")
        _ = try Executables.require("mutter", package: "mutter")
        let root = Repository.root
        let result = try await Executables.run(try Executables.require("unshare", package: "util-linux"), [
            "-m", root.appendingPathComponent("Tests/Scripts/clipboard-unit-test.sh").path, work.path,
            try Executables.built("baton"), try Executables.built("batond"),
            root.appendingPathComponent("systemd/batond.service").path, root.appendingPathComponent("systemd/baton-clipboard.service").path,
        ], timeout: .seconds(120))
        let seen = keyValueLines(result.stdout)
        let report = "\(result)"
        #expect(seen["error"] == nil, "\(report)")
        try #require(seen["manager"] == "running" || seen["manager"] == "degraded", "the user manager did not start: \(report)")
        #expect(seen["enabled"] == "enabled" && seen["source"] == "on", "\(report)")
        // systemd-analyze security: "OK" is 3.5 or less, as batond's unit.
        #expect((Double(seen["score"] ?? "") ?? 10) <= 3.5, "\(report)")
        #expect(seen["before_session"] == "inactive", "no agent before a graphical session: \(report)")
        #expect(seen["no_display"] == "inactive no", "a session that exported no display skips the unit: \(report)")
        #expect(seen["in_session"] == "active" && seen["agent_name"]?.hasPrefix("org.baton.ClipboardAgent.X") == true, "\(report)")
        #expect(seen["nonewprivs"] == "1", "\(report)")
        #expect(seen["copy"] == "a copy of 21 bytes (text/plain;charset=utf-8): no-sync", "a copy in the session is heard: \(report)")
        #expect(seen["after_session"] == "inactive", "the agent stops with the session: \(report)")
        #expect(seen["second_session"] == "active", "\(report)")
        #expect(seen["display_gone"] == "inactive" && seen["display_gone_result"] == "success" && seen["restarts"] == "0",
                "the agent ends cleanly with its display and is not restarted: \(report)")
        #expect(seen["agent_said"]?.contains("the X display went away; stopping") == true, "\(report)")
        #expect(seen["gnome"] == "failed failed 3 0", "under GNOME's Mutter the agent exits with 3 and is not restarted: \(report)")
        #expect(seen["gnome_said"] == "1", "it says why, once: \(report)")
    }
}
