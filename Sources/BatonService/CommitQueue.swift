import BatonCore
import BatonStore
import Synchronization

/// Group commit for new activities: the Advertise calls read from the bus together
/// share one transaction, so a burst costs a few commits instead of one each. Every
/// caller resumes only after the transaction holding its activity has committed.
///
/// The commit runs on the bus thread, once the calls already received have been
/// dispatched (`Connection.afterDispatch`): a lone call commits at once, with no hop
/// to another thread and back, and calls that arrive together wait for one another.
final class CommitQueue: Sendable {
    private struct Waiting {
        let activity: Activity
        let continuation: CheckedContinuation<[String], any Error>
    }

    private struct State {
        var waiting: [Waiting] = []
        var scheduled = false
    }

    typealias Schedule = @Sendable (@escaping @Sendable () -> Void) -> Void

    private let store: Store
    private let state = Mutex(State())
    private let schedule: Schedule

    /// `schedule` runs the commit once the calls at hand have queued their activities.
    init(store: Store, schedule: @escaping Schedule) {
        self.store = store
        self.schedule = schedule
    }

    /// Stores `activity`; returns the ids trimmed by quota to make room for it.
    func insert(_ activity: Activity) async throws -> [String] {
        try await withCheckedThrowingContinuation { continuation in
            let first = state.withLock { state -> Bool in
                state.waiting.append(Waiting(activity: activity, continuation: continuation))
                defer { state.scheduled = true }
                return !state.scheduled
            }
            if first { schedule { self.commit() } }
        }
    }

    /// Commits everything waiting in one transaction and resumes its callers.
    private func commit() {
        let batch = state.withLock { state -> [Waiting] in
            state.scheduled = false
            defer { state.waiting.removeAll(keepingCapacity: true) }
            return state.waiting
        }
        guard !batch.isEmpty else { return }
        let results = store.insert(batch: batch.map(\.activity))
        for (waiting, result) in zip(batch, results) { waiting.continuation.resume(with: result) }
    }
}
