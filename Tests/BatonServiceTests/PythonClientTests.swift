import Foundation
import Testing
import TestSupport

/// The Python client (`python/baton.py`, PyGObject's Gio only) against the real batond:
/// its own unittest suite, `python/test_baton.py`, run on a private bus.
@Suite(.serialized)
struct PythonClientTests {
    @Test func thePythonClientsSuitePasses() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let python = try Executables.require("/usr/bin/python3", package: "python3-gi")
        let result = try await world.run(python, ["-m", "unittest", "-v", "test_baton"], environment: [
            "PYTHONPATH": Repository.root.appendingPathComponent("python").path, "PYTHONDONTWRITEBYTECODE": "1",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("Ran 6 tests") && result.stderr.hasSuffix("OK\n"), "\(result.stderr)")
        #expect(!world.daemonLog.contains("failed to handle"), "\(world.daemonLog)")
    }
}
