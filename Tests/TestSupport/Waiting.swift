import DBus

/// Waits until `condition` holds, checking every few milliseconds, and throws after
/// `timeout`: how tests await a state they cannot subscribe to.
public func eventually(
    _ what: String, timeout: Duration = .seconds(10), _ condition: @Sendable () async throws -> Bool
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    throw TestSupportError("timed out waiting for: \(what)")
}

/// The first message of a signal stream, or a failure after `timeout`.
public func first(of stream: AsyncStream<Message>, timeout: Duration = .seconds(5)) async throws -> Message {
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
