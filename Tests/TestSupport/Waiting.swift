import DBus
import Synchronization

/// Waits until `condition` holds, checking every few milliseconds, and throws after
/// `timeout`: how tests await a state they cannot subscribe to.
public func eventually(
    _ what: String, timeout: Duration = .seconds(10), context: @autoclosure @Sendable () -> String = "",
    _ condition: @Sendable () async throws -> Bool
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    let said = context()
    throw TestSupportError("timed out waiting for: \(what)" + (said.isEmpty ? "" : "\n\(said)"))
}

/// The first message of a signal stream, or a failure after `timeout`.
public func first(of stream: AsyncStream<Message>, timeout: Duration = .seconds(10)) async throws -> Message {
    try await withThrowingTaskGroup(of: Message?.self) { group in
        group.addTask {
            for await message in stream { return message }
            return nil
        }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        let message = try await group.next() ?? nil
        group.cancelAll()
        guard let message else { throw TestSupportError("no signal within \(timeout)") }
        return message
    }
}

/// `body`'s result, or a failure after `timeout` when it has not finished: for a call that
/// must not wait for good, so that its test fails instead of hanging (`body` is left behind).
public func within<T: Sendable>(
    _ timeout: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let outcome = Outcome<T>()
    return try await withCheckedThrowingContinuation { continuation in
        outcome.set(continuation)
        let timer = Task {
            // Cancelled: the body finished first (its result is the answer, not this failure).
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            outcome.finish(.failure(TestSupportError("\(what) did not finish within \(timeout)")))
        }
        Task {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            outcome.finish(result)
            timer.cancel()
        }
    }
}

/// The first of two results to arrive resumes the caller.
private final class Outcome<T: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)
    func set(_ waiting: CheckedContinuation<T, any Error>) { continuation.withLock { $0 = waiting } }
    func finish(_ result: Result<T, any Error>) {
        continuation.withLock { waiting in
            defer { waiting = nil }
            return waiting
        }?.resume(with: result)
    }
}
