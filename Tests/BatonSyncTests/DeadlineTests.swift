@testable import BatonSync
import NIOCore
import NIOPosix
import Testing

/// The wait for a statement: its deadline, and the connection closing under it, which ends
/// the wait when it happens (told by the connection's close, not found by polling).
struct DeadlineTests {
    let loop = MultiThreadedEventLoopGroup.singleton.next()

    /// Work that never finishes, as a query on a connection that died under it.
    @Sendable static func never() async throws -> Int {
        try await Task.sleep(for: .seconds(3600))
        return 0
    }

    @Test(.timeLimit(.minutes(1))) func aClosedConnectionEndsTheWaitBeforeTheDeadline() async throws {
        let closed = loop.makePromise(of: Void.self)
        let watch = ClosedWatch(closed.futureResult)
        let waiting = Task { try await Deadline.run(.seconds(600), givingUpWhen: watch, Self.never) }
        closed.succeed()
        await #expect(throws: Deadline.Expired.self) { _ = try await waiting.value }
        // Already closed: a later statement gives up at once too.
        await #expect(throws: Deadline.Expired.self) { _ = try await Deadline.run(.seconds(600), givingUpWhen: watch, Self.never) }
    }

    @Test(.timeLimit(.minutes(1))) func workThatFinishesIsAnsweredAndTheDeadlineEndsTheRest() async throws {
        let open = loop.makePromise(of: Void.self)
        defer { open.succeed() }
        let watch = ClosedWatch(open.futureResult)
        #expect(try await Deadline.run(.seconds(600), givingUpWhen: watch) { 42 } == 42)
        do {
            _ = try await Deadline.run(.milliseconds(50), givingUpWhen: watch, Self.never)
            Issue.record("the deadline passed and the wait went on")
        } catch let expired as Deadline.Expired {
            #expect(expired.timeout == .milliseconds(50))
        }
    }
}
