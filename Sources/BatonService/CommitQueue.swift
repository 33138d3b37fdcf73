import BatonCore
import BatonStore
import Dispatch
import Synchronization

/// Group commit for new activities: calls that arrive while a commit is running wait
/// for the next one and share its transaction, so a burst of Advertise calls costs a
/// few commits instead of one each. Every caller resumes only after the transaction
/// holding its activity has committed.
final class CommitQueue: Sendable {
    private struct Waiting {
        let activity: Activity
        let continuation: CheckedContinuation<[String], any Error>
    }

    private struct State {
        var waiting: [Waiting] = []
        var committing = false
    }

    private let store: Store
    private let state = Mutex(State())
    /// The writer: SQLite commits block, so they run here, off the bus thread.
    private let writer = DispatchQueue(label: "org.baton.commits")

    init(store: Store) {
        self.store = store
    }

    /// Stores `activity`; returns the ids trimmed by quota to make room for it.
    func insert(_ activity: Activity) async throws -> [String] {
        try await withCheckedThrowingContinuation { continuation in
            let start = state.withLock { state -> Bool in
                state.waiting.append(Waiting(activity: activity, continuation: continuation))
                guard !state.committing else { return false }
                state.committing = true
                return true
            }
            if start { writer.async { self.drain() } }
        }
    }

    /// Commits batches until nobody is waiting.
    private func drain() {
        while true {
            let batch = state.withLock { state -> [Waiting] in
                let batch = state.waiting
                state.waiting.removeAll(keepingCapacity: true)
                if batch.isEmpty { state.committing = false }
                return batch
            }
            guard !batch.isEmpty else { return }
            let results = store.insert(batch: batch.map(\.activity))
            for (waiting, result) in zip(batch, results) { waiting.continuation.resume(with: result) }
        }
    }
}
