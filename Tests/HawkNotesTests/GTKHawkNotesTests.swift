import Foundation
import Testing
import TestSupport

/// The GTK 4 Hawk Notes (`apps/hawk-notes-gtk`, Python) on a display of its own (Xvfb) with
/// the real batond: its test drives it through Baton and its Windows interface, restarts it,
/// and compares photographs of its window before and after (`test_hawk_notes_gtk.py`).
@Suite(.serialized)
struct GTKHawkNotesTests {
    @Test func theGTKAppRestoresAndContinues() async throws {
        _ = try Executables.require("Xvfb", package: "xvfb")
        let world = try await BatonWorld.started()
        defer { world.close() }
        let python = try Executables.require("/usr/bin/python3", package: "python3-gi")
        let result = try await world.run(python, ["-m", "unittest", "-v", "test_hawk_notes_gtk"], environment: [
            "PYTHONPATH": [Repository.root.appendingPathComponent("apps/hawk-notes-gtk").path,
                           Repository.root.appendingPathComponent("python").path].joined(separator: ":"),
            "PYTHONDONTWRITEBYTECODE": "1",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("Ran 1 test") && result.stderr.hasSuffix("OK\n"), "\(result.stderr)")
        #expect(!world.daemonLog.contains("failed to handle"), "\(world.daemonLog)")
    }
}
