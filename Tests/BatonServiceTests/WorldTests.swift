import Foundation
import Testing
import TestSupport

/// TestSupport's world ends with its test, also when the test fails by throwing.
@Suite(.serialized)
struct WorldTests {
    struct Failure: Error {}

    /// What a test saw of its world before it failed.
    final class Seen: @unchecked Sendable {
        var batond: Subprocess?
        var directory = ""
    }

    func aTestThatFails(_ seen: Seen) async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        seen.batond = world.daemon?.process
        seen.directory = world.bus.directory.path
        throw Failure()
    }

    @Test(.timeLimit(.minutes(1)))
    func batondAndTheBusAreGoneWhenATestThrows() async throws {
        let seen = Seen()
        await #expect(throws: Failure.self) { try await aTestThatFails(seen) }
        let batond = try #require(seen.batond)
        #expect(await batond.wait() == 128 + SIGKILL, "killed, not left running")
        #expect(!seen.directory.isEmpty && !FileManager.default.fileExists(atPath: seen.directory), "the bus's directory is removed")
    }
}
