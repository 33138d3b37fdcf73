import BatonCore
import BatonStore
import Synchronization

/// Group commit for new activities: the Advertise calls that arrive while a commit is
/// under way share the next transaction, so a burst costs a few commits instead of one
/// each. Every caller resumes only after the transaction holding its activity committed.
///
/// The calls at hand are gathered until the bus thread has dispatched everything it read
/// (`Connection.afterDispatch`), then handed to the store's writer thread, which commits
/// while the bus thread reads the next calls and takes whatever arrived meanwhile into its
/// next transaction. The bus thread never commits and never waits for a lock.
final class CommitQueue: Sendable {
    private struct Waiting {
        let activity: Activity
        let request: Request?
        /// When the call queued it (`Store.now`): its wait for a lock is counted from here.
        let queuedAt: UInt64
        let continuation: CheckedContinuation<Store.Inserted, any Error>
    }

    private struct State {
        /// Gathered from the calls being dispatched; a flush is scheduled while it is not empty.
        var gathered: [Waiting] = []
        /// Handed to the writer thread.
        var queued: [Waiting] = []
        var writing = false
    }

    typealias Schedule = @Sendable (@escaping @Sendable () -> Void) -> Void

    private let store: Store
    private let state = Mutex(State())
    private let schedule: Schedule

    /// `schedule` runs `flush` once the calls at hand have queued their activities.
    init(store: Store, schedule: @escaping Schedule) {
        self.store = store
        self.schedule = schedule
    }

    /// Stores `activity` (unless `request` was made before): what `Store.insert(batch:requests:)` says.
    func insert(_ activity: Activity, request: Request?) async throws -> Store.Inserted {
        let queuedAt = Store.now
        return try await withCheckedThrowingContinuation { continuation in
            let first = state.withLock { state -> Bool in
                state.gathered.append(Waiting(activity: activity, request: request, queuedAt: queuedAt, continuation: continuation))
                return state.gathered.count == 1
            }
            if first { schedule { self.flush() } }
        }
    }

    /// Hands the gathered calls to the writer thread, starting it unless it is writing.
    private func flush() {
        let start = state.withLock { state -> Bool in
            state.queued += state.gathered
            state.gathered = []
            if state.writing || state.queued.isEmpty { return false }
            state.writing = true
            return true
        }
        if start { store.startWriting { self.drain() } }
    }

    /// On the writer thread: commits batches until none is queued.
    private func drain() {
        while true {
            let batch = state.withLock { state -> [Waiting] in
                let batch = state.queued
                state.queued = []
                if batch.isEmpty { state.writing = false }
                return batch
            }
            guard let oldest = batch.map(\.queuedAt).min() else { return }
            let results = store.withLockDeadline(queuedAt: oldest) {
                store.insert(batch: batch.map(\.activity), requests: batch.map(\.request))
            }
            for (waiting, result) in zip(batch, results) { waiting.continuation.resume(with: result) }
        }
    }
}
