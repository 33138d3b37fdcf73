import BatonCore
import Synchronization
import Testing

/// The clients' retry policy for writes made idempotent by `request_id`.
struct IdempotentWriteTests {
    struct Lost: Error {}
    struct Refused: Error {}

    @Test func aRequestIDIsAddedOnceAndKept() throws {
        let options = IdempotentWrite.options(["title": "t"])
        let id = try #require(options["request_id"])
        #expect(try Identifier.normalize(id) == id)
        #expect(IdempotentWrite.options(options) == options, "a retry keeps the first id")
        #expect(IdempotentWrite.options(["request_id": "mine"])["request_id"] == "mine")
    }

    @Test func lostRepliesAreRetriedUpToTheLimitAndOtherFailuresAreNot() async throws {
        let attempts = Atomic(0)
        let answer = try await IdempotentWrite.run({
            guard attempts.add(1, ordering: .relaxed).newValue == IdempotentWrite.attempts else { throw Lost() }
            return "stored"
        }, retry: { $0 is Lost ? .replyLost : nil })
        #expect(answer == "stored" && attempts.load(ordering: .relaxed) == IdempotentWrite.attempts)

        attempts.store(0, ordering: .relaxed)
        await #expect(throws: Lost.self) {
            try await IdempotentWrite.run({ attempts.add(1, ordering: .relaxed); throw Lost() }, retry: { _ in .replyLost })
        }
        #expect(attempts.load(ordering: .relaxed) == IdempotentWrite.attempts, "no more than the limit")

        attempts.store(0, ordering: .relaxed)
        await #expect(throws: Refused.self) {
            try await IdempotentWrite.run({ attempts.add(1, ordering: .relaxed); throw Refused() }, retry: { $0 is Lost ? .replyLost : nil })
        }
        #expect(attempts.load(ordering: .relaxed) == 1, "a refusal is final")
    }
}
