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
        let seen = keyValueLines(result.stdout)
        let report = "\(result)\ninstall log: \((try? String(contentsOf: work.appendingPathComponent("install.log"), encoding: .utf8)) ?? "")"
        try #require(seen["installed"] == "install ok installed", "\(report)")
        #expect((Int(seen["files"] ?? "") ?? 0) > 30, "\(report)")
        #expect(seen["on_path"] == "/usr/bin/batond /usr/bin/baton /usr/bin/baton-browser-host ", "\(report)")
        // One program under four names: the Swift runtime once. Without Foundation's ICU data
        // (34 MB) it is about 23 MB: an `import Foundation` where FoundationEssentials would do
        // shows here, and so does a second program in the package (#57: at most 30 MiB installed).
        #expect((Int(seen["size_baton"] ?? "") ?? .max) < 28_000_000, "\(report)")
        #expect(seen["names"] == "baton baton baton ", "\(report)")
        #expect(seen["hawk_notes"]?.hasPrefix("The Good Hawk") == true, "\(report)")
        #expect((Int(seen["installed_kib"] ?? "") ?? .max) <= 30 * 1024, "Installed-Size: \(report)")
        try #require(seen["manager"] == "running" || seen["manager"] == "degraded", "\(report)")
        #expect(seen["unit"] == "/usr/lib/systemd/user/batond.service", "\(report)")
        #expect(seen["started"] == "active" && seen["exec"] == "/usr/bin/batond /usr/bin/baton", "\(report)")
        #expect(seen["contract_check"] == "30 ok, 0 failed", "\(report)")
        #expect(seen["stopped"] == "inactive" && seen["activated_call"] == "ok" && seen["activated"] == "active", "\(report)")
        #expect(seen["data"] == "1", "\(report)")
        #expect(seen["purged"] == "gone" || seen["purged"]?.hasPrefix("unknown") == true, "\(report)")
        #expect(seen["left"] == "none" && seen["left_dirs"] == "none", "\(report)")
        #expect(seen["data_kept"] == "1", "the user's data stays: \(report)")
    }

    /// The shipped batond uses the distribution's libraries and carries no Foundation or ICU of
    /// its own (#57): it needs libsqlite3 and no library of Foundation's; libpq, which it opens
    /// only to sync through PostgreSQL, is not linked but the package depends on it; its bytes
    /// hold no ICU data (`icudt…`), no FoundationInternationalization, and none of the texts a
    /// copy of SQLite or libpq would bring. (Each of these was found in the batond of f39bfb7,
    /// which linked Foundation: 11 `icudt`, 19 FoundationInternationalization.)
    @Test func theShippedBatondUsesTheDistributionsLibrariesAndNoFoundation() async throws {
        let deb = try #require(ProcessInfo.processInfo.environment["BATON_DEB"].flatMap { $0.isEmpty ? nil : $0 },
                               "set BATON_DEB to a package made by scripts/package (scripts/test does)")
        let work = try TemporaryDirectory.make(prefix: "baton-package-files")
        defer { try? FileManager.default.removeItem(at: work) }
        let unpacked = try await Executables.run(try Executables.require("dpkg-deb", package: "dpkg"), ["-x", deb, work.path])
        try #require(unpacked.status == 0, "\(unpacked)")
        let batond = work.appendingPathComponent("usr/bin/batond").path
        let dynamic = try await Executables.run(try Executables.require("readelf", package: "binutils"), ["-d", batond])
        let needed = dynamic.stdout.split(separator: "\n").compactMap { line -> String? in
            guard line.contains("(NEEDED)"), let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]") else { return nil }
            return String(line[line.index(after: open)..<close])
        }
        #expect(needed.contains("libsqlite3.so.0") && !needed.contains("libpq.so.5"), "\(needed)")
        // No display library: batond runs where no display is (DESIGN, "The clipboard").
        #expect(!needed.contains { $0.hasPrefix("libX") || $0.hasPrefix("libwayland") }, "\(needed)")
        let control = try await Executables.run(try Executables.require("dpkg-deb", package: "dpkg"), ["-f", deb, "Depends"])
        #expect(control.stdout.contains("libpq5"), "\(control)")
        #expect(control.stdout.contains("libx11-6") && control.stdout.contains("libxfixes3") && control.stdout.contains("libwayland-client0"),
                "the clipboard agent opens them: \(control)")
        #expect(!needed.contains { $0.hasPrefix("libFoundation") || $0.hasPrefix("libicu") }, "\(needed)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: batond))
        for marker in ["icudt", "FoundationInternationalization", "_ZN6icu_",
                       "unable to open database file" /* SQLite's own */, "connection pointer is NULL" /* libpq's own */] {
            #expect(bytes.firstRange(of: Data(marker.utf8)) == nil, "batond carries \(marker)")
        }
    }
}
