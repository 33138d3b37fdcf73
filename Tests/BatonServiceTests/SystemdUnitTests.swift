import Foundation
import Testing
import TestSupport

/// The shipped unit under a real `systemd --user` (in a private mount namespace, see
/// shared/FIELD-NOTES.md), with its D-Bus session bus: Tests/Scripts/systemd-user-test.sh
/// does the steps and prints what it saw as key=value lines; this test holds them to the
/// contract. A machine where the user manager cannot start fails here, with the reason.
@Suite(.serialized)
struct SystemdUnitTests {
    static let repository = Repository.root

    /// On both user buses Linux desktops run: Debian's dbus-daemon, and dbus-broker (Fedora's and
    /// Arch's), whose activation goes through systemd units.
    @Test(arguments: ["dbus-daemon", "dbus-broker"])
    func theHardenedUnitRunsBatondUnderARealUserManager(bus: String) async throws {
        if bus == "dbus-broker" { _ = try Executables.require("dbus-broker-launch", package: "dbus-broker") }
        let work = try TemporaryDirectory.make(prefix: "baton-systemd")
        defer { try? FileManager.default.removeItem(at: work) }
        let unshare = try Executables.require("unshare", package: "util-linux")
        let result = try await Executables.run(unshare, [
            "-m", Self.repository.appendingPathComponent("Tests/Scripts/systemd-user-test.sh").path, work.path,
            try Executables.built("batond"), Self.repository.appendingPathComponent("systemd/batond.service").path, bus,
        ], timeout: .seconds(120))
        let seen = keyValueLines(result.stdout)
        let report = "\(result)"
        #expect(seen["error"] == nil, "\(report)")
        try #require(seen["manager"] == "running" || seen["manager"] == "degraded", "the user manager did not start: \(report)")
        // The bus asked for: its program's name as the kernel keeps it (15 characters).
        try #require(seen["bus"] == (bus == "dbus-broker" ? "dbus-broker-lau" : "dbus-daemon"), "the user bus is not \(bus): \(report)")
        // systemd-analyze security: "OK" is 3.5 or less.
        #expect((Double(seen["score"] ?? "") ?? 10) <= 3.5, "\(report)")
        // systemctl --user start, under the unit's sandbox, serving.
        try #require(seen["started"] == "active", "the unit did not start: \(report)")
        #expect(seen["nonewprivs"] == "1" && seen["seccomp"] == "2", "\(report)")
        #expect(seen["status"]?.hasPrefix("serving org.baton.Handoff1") == true, "\(report)")
        #expect(seen["register"] == "ok" && seen["advertised"]?.count == 36 && seen["get"] == "1", "\(report)")
        // The contract's checks (Tests/Scripts/contract-check.py, as ContractCheckTests runs them) pass against this instance.
        #expect(seen["contract_check"] == "30 ok, 0 failed", "\(report)")
        // D-Bus activation through SystemdService=.
        #expect(seen["stopped"] == "inactive" && seen["activated_call"] == "1" && seen["activated"] == "active", "\(report)")
        // A batond that stops answering is killed by the watchdog and restarted.
        #expect(seen["watchdog_restarted"] == "yes" && seen["watchdog_result"] == "watchdog" && seen["restarts"] == "1", "\(report)")
        // systemctl --user stop during a burst: exit 0, every acknowledged write stored, every stored write acknowledged.
        #expect(seen["stop_status"] == "0", "\(report)")
        #expect((Int(seen["burst_stored"] ?? "") ?? 0) >= 100, "\(report)")
        #expect(seen["acked_not_stored"] == "0" && seen["stored_not_acked"] == "0", "\(report)")
        // A batond that cannot start is not retried forever: the unit's start limit stops it (not the
        // manager's, shortened to 1 s to make restarts quick), and its log says why.
        #expect(seen["default_start_limit"] == "1s", "\(report)")
        #expect(seen["start_limit_state"] == "failed" && seen["start_attempts"] == "5", "\(report)")
    }
}
