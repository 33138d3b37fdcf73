import Dispatch
import Foundation
import Glibc
import Synchronization

/// Where every write runs, one at a time, in the order the writes were queued.
///
/// Callers on the bus thread queue a write and await it, so reads keep being answered
/// while a write waits for the disk. Each write may wait for a lock another program
/// holds only until `Store.lockTimeout` after it was queued: a line of writes behind a
/// held lock all answer `StorageUnavailable` in time, instead of each waiting in turn.
///
/// A write with nothing queued before it first tries to run on its caller's thread
/// (`runHereIfFree`), taking the database's lock only if it is free at once: it then
/// commits without a hop to the writer thread and back, and otherwise is queued as usual.
final class WriterThread: Sendable {
    /// Thrown by a write's BEGIN when it runs on its caller's thread and the lock is taken.
    struct WouldBlock: Error {}

    private let queue = DispatchQueue(label: "org.baton.writer")
    private let key = DispatchSpecificKey<Bool>()
    /// Held by the write that runs, here or on its caller's thread. (An NSLock: a write's
    /// result need not be Sendable, which Mutex.withLock would ask of it.)
    private let slot = NSLock()
    /// Writes queued here and not yet finished.
    private let queued = Atomic(0)
    /// When the write under way stops waiting for locks (`Monotonic.now` nanoseconds);
    /// read by the writer connection's busy handler. 0: do not wait at all.
    let lockDeadline = Atomic<UInt64>(0)
    /// The thread running a write on its caller's thread (`pthread_self`), 0 when none does.
    private let hereThread = Atomic<UInt>(0)
    /// True while a write on its caller's thread has not taken the lock yet.
    private let tryingLock = Atomic(false)
    let lockTimeout: UInt64

    init(lockTimeout: Double) {
        self.lockTimeout = UInt64(lockTimeout * 1e9)
        queue.setSpecific(key: key, value: true)
    }

    /// True on the writer thread, and on a thread running a write in its place.
    var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true || hereThread.load(ordering: .relaxed) == pthread_self() }

    /// Runs `work` after the writes queued before it and returns its result.
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        if let result = try runHereIfFree(work) { return result }
        let queuedAt = Monotonic.now
        queued.add(1, ordering: .relaxed)
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                defer { self.queued.subtract(1, ordering: .relaxed) }
                continuation.resume(with: Result { try self.slot.withLock { try self.withDeadline(queuedAt + self.lockTimeout, work) } })
            }
        }
    }

    /// Runs `work` here, waiting for it; from this thread, at once.
    func runAndWait<T>(_ work: () throws -> T) throws -> T {
        if isCurrent { return try work() }
        let queuedAt = Monotonic.now
        queued.add(1, ordering: .relaxed)
        defer { queued.subtract(1, ordering: .relaxed) }
        return try queue.sync { try slot.withLock { try withDeadline(queuedAt + lockTimeout, work) } }
    }

    /// Queues `work` without waiting for it (with a deadline counted from now).
    func start(_ work: @escaping @Sendable () -> Void) {
        let queuedAt = Monotonic.now
        queued.add(1, ordering: .relaxed)
        queue.async {
            defer { self.queued.subtract(1, ordering: .relaxed) }
            self.slot.withLock { self.withDeadline(queuedAt + self.lockTimeout, work) }
        }
    }

    /// Runs `work` on the calling thread when no write is queued or running and the
    /// database's lock is free at once; nil (nothing written) when it had to be queued.
    /// A write of several transactions waits as usual for the locks after its first.
    func runHereIfFree<T>(_ work: () throws -> T) throws -> T? {
        guard queued.load(ordering: .relaxed) == 0, slot.try() else { return nil }
        defer { slot.unlock() }
        hereThread.store(pthread_self(), ordering: .relaxed)
        defer { hereThread.store(0, ordering: .relaxed) }
        lockDeadline.store(0, ordering: .relaxed)
        tryingLock.store(true, ordering: .relaxed)
        defer { tryingLock.store(false, ordering: .relaxed) }
        do {
            return try work()
        } catch is WouldBlock {
            return nil
        }
    }

    /// Called by a transaction once its BEGIN took the lock: later ones in the same write
    /// wait for locks as queued writes do.
    func lockTaken() {
        if tryingLock.exchange(false, ordering: .relaxed) {
            lockDeadline.store(Monotonic.now + lockTimeout, ordering: .relaxed)
        }
    }

    /// Whether a BEGIN that found the lock taken should give up with `WouldBlock`.
    var mayNotWait: Bool { tryingLock.load(ordering: .relaxed) }

    /// For a batch of writes queued at different times: the deadline of the oldest.
    func withDeadline<T>(_ deadline: UInt64, _ work: () throws -> T) rethrows -> T {
        lockDeadline.store(deadline, ordering: .relaxed)
        return try work()
    }

    /// The busy handler's answer: keep waiting for the lock (after a short sleep) or give up.
    func shouldRetryLock() -> Bool {
        guard Monotonic.now < lockDeadline.load(ordering: .relaxed) else { return false }
        usleep(2_000)
        return true
    }
}

/// Nanoseconds on the monotonic clock.
enum Monotonic {
    static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
