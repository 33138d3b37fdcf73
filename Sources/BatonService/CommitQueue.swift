import BatonCore
import BatonStore
import Dispatch
import Synchronization

/// Group commit for new activities: the Advertise calls read from the bus together
/// share one transaction, so a burst costs a few commits instead of one each. Every
/// caller resumes only after the transaction holding its activity has committed.
///
/// The calls at hand are gathered until the bus thread has dispatched everything it
/// read (`Connection.afterDispatch`). A lone call with no commit running then commits
/// right there, on the bus thread, with no hop to another thread and back. A burst
/// goes to the writer thread, which commits while the bus thread reads the next calls,
/// and takes whatever arrives meanwhile into its next transaction.
final class CommitQueue: Sendable {
    private struct Waiting {
        let activity: Activity
        let continuation: CheckedContinuation<[String], any Error>
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
    private let writer = DispatchQueue(label: "org.baton.commits")

    /// `schedule` runs `flush` once the calls at hand have queued their activities.
    init(store: Store, schedule: @escaping Schedule) {
        self.store = store
        self.schedule = schedule
    }

    /// Stores `activity`; returns the ids trimmed by quota to make room for it.
    func insert(_ activity: Activity) async throws -> [String] {
        try await withCheckedThrowingContinuation { continuation in
            let first = state.withLock { state -> Bool in
                state.gathered.append(Waiting(activity: activity, continuation: continuation))
                return state.gathered.count == 1
            }
            if first { schedule { self.flush() } }
        }
    }

    /// Commits a lone activity at once, or hands the batch to the writer thread.
    private func flush() {
        enum Next { case nothing, inline([Waiting]), startWriter }
        let next = state.withLock { state -> Next in
            let batch = state.gathered
            state.gathered = []
            if batch.count == 1 && !state.writing { return .inline(batch) }
            state.queued += batch
            if state.writing { return .nothing }
            state.writing = true
            return .startWriter
        }
        switch next {
        case .nothing: break
        case .inline(let batch): commit(batch)
        case .startWriter: writer.async { self.drain() }
        }
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
            guard !batch.isEmpty else { return }
            commit(batch)
        }
    }

    private func commit(_ batch: [Waiting]) {
        let results = store.insert(batch: batch.map(\.activity))
        for (waiting, result) in zip(batch, results) { waiting.continuation.resume(with: result) }
    }
}
