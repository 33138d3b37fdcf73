import Synchronization

/// The tasks batond starts that outlive the call that started them: continuations delivered
/// in the background, notices to the apps that advertised, deliveries when an app appears.
/// Each is kept until it ends; `finish()` refuses new ones, cancels those still running and
/// waits for them, so that none writes after the store closes (the bus service calls it
/// once the calls in flight are answered, before the connection closes).
final class BackgroundTasks: Sendable {
    /// What `finish` needs of a task, whatever its result type.
    private struct Handle: Sendable {
        let cancel: @Sendable () -> Void
        let wait: @Sendable () async -> Void
    }

    private struct State {
        var next = 0
        var running: [Int: Handle] = [:]
        var finished = false
    }

    private let state = Mutex(State())

    /// Starts `work` and returns its task; nil, without starting it, once `finish` was called.
    @discardableResult
    func start<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) -> Task<T, any Error>? {
        state.withLock { state -> Task<T, any Error>? in
            guard !state.finished else { return nil }
            let id = state.next
            state.next += 1
            // Its removal waits for this lock, so it always comes after the insertion below.
            let task = Task<T, any Error> {
                defer { _ = self.state.withLock { $0.running.removeValue(forKey: id) } }
                return try await work()
            }
            state.running[id] = Handle(cancel: { task.cancel() }, wait: { _ = await task.result })
            return task
        }
    }

    /// How many are running (for tests and status).
    var count: Int { state.withLock { $0.running.count } }

    /// Refuses new tasks, cancels the running ones and returns once every one has ended.
    func finish() async {
        let running = state.withLock { state -> [Handle] in
            state.finished = true
            return Array(state.running.values)
        }
        for task in running { task.cancel() }
        for task in running { await task.wait() }
    }
}
