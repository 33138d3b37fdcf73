import Foundation
import Testing
import TestSupport

/// Whether this machine has no baton package of its own.
private let noBatonPackageInstalled =
    !((try? String(contentsOfFile: "/var/lib/dpkg/status", encoding: .utf8))?.contains("\nPackage: baton\nStatus: install ok installed") ?? false)

/// The Debian package (scripts/package) as a user meets it: installed with apt-get on this
/// machine, batond started from the installed user unit under a real `systemd --user` and by
/// D-Bus activation, the contract check against it, then purged without a file of it left
/// (Tests/Scripts/package-test.sh). It installs into /usr: CI runs it as root on a machine of
/// its own; on a machine where a baton package is installed already, it does not run. It runs
/// alone, after every other suite (scripts/test): their buses and batonds would find it in /usr.
///
/// The package is `$BATON_DEB` (scripts/test and .ci/run make it first with scripts/package:
/// made from inside `swift test`, its release build waited for the test run's lock on .build).
@Suite(.serialized, .enabled(if: noBatonPackageInstalled, "a baton package is installed on this machine: the test would replace and purge it"))
struct PackageTests {
    @Test func theInstalledPackageServesAndPurgesClean() async throws {
        let deb = try #require(ProcessInfo.processInfo.environment["BATON_DEB"].flatMap { $0.isEmpty ? nil : $0 },
                               "set BATON_DEB to a package made by scripts/package (scripts/test does)")
        let work = try TemporaryDirectory.make(prefix: "baton-package")
        defer { try? FileManager.default.removeItem(at: work) }
        let result = try await Executables.run(try Executables.require("unshare", package: "util-linux"), [
            "-m", Repository.root.appendingPathComponent("Tests/Scripts/package-test.sh").path, work.path, deb, Repository.root.path,
        ], timeout: .seconds(300))
        var seen: [String: String] = [:]
        for line in result.stdout.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            seen[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        let report = "\(result)\ninstall log: \((try? String(contentsOf: work.appendingPathComponent("install.log"), encoding: .utf8)) ?? "")"
        try #require(seen["installed"] == "install ok installed", "\(report)")
        #expect((Int(seen["files"] ?? "") ?? 0) > 30, "\(report)")
        #expect(seen["on_path"] == "/usr/bin/batond /usr/bin/baton /usr/bin/baton-browser-host ", "\(report)")
        // Without Foundation's ICU data (34 MB) the CLI and Hawk Notes are about 15 MB each:
        // an `import Foundation` where FoundationEssentials would do shows here.
        #expect((Int(seen["size_baton"] ?? "") ?? .max) < 20_000_000 && (Int(seen["size_hawk_notes"] ?? "") ?? .max) < 20_000_000, "\(report)")
        try #require(seen["manager"] == "running" || seen["manager"] == "degraded", "\(report)")
        #expect(seen["unit"] == "/usr/lib/systemd/user/batond.service", "\(report)")
        #expect(seen["started"] == "active" && seen["exec"] == "/usr/bin/batond", "\(report)")
        #expect(seen["contract_check"] == "30 ok, 0 failed", "\(report)")
        #expect(seen["stopped"] == "inactive" && seen["activated_call"] == "ok" && seen["activated"] == "active", "\(report)")
        #expect(seen["data"] == "1", "\(report)")
        #expect(seen["purged"] == "gone" || seen["purged"]?.hasPrefix("unknown") == true, "\(report)")
        #expect(seen["left"] == "none" && seen["left_dirs"] == "none", "\(report)")
        #expect(seen["data_kept"] == "1", "the user's data stays: \(report)")
    }
}
