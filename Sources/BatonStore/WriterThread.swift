import Dispatch
import Glibc
import Synchronization

/// Where every write runs, one at a time, in the order the writes were queued.
///
/// Callers on the bus thread queue a write and await it, so reads keep being answered
/// while a write waits for the disk: no commit and no fsync ever runs on a caller's thread
/// (debug builds trap if a thread marked with `DiskWaits.forbidOnCurrentThread` would wait).
/// Each write may wait for a lock another program holds only until `Store.lockTimeout`
/// after it was queued: a line of writes behind a held lock all answer
/// `StorageUnavailable` in time, instead of each waiting in turn.
final class WriterThread: Sendable {
    private let queue = DispatchQueue(label: "org.baton.writer")
    private let key = DispatchSpecificKey<Bool>()
    /// When the write under way stops waiting for locks (`Monotonic.now` nanoseconds);
    /// read by the writer connection's busy handler. 0: do not wait at all.
    let lockDeadline = Atomic<UInt64>(0)
    let lockTimeout: UInt64

    init(lockTimeout: Double) {
        self.lockTimeout = UInt64(lockTimeout * 1e9)
        queue.setSpecific(key: key, value: true)
    }

    /// True on the writer thread.
    var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }

    /// Runs `work` after the writes queued before it and returns its result.
    func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let queuedAt = Monotonic.now
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try self.withDeadline(queuedAt + self.lockTimeout, work) })
            }
        }
    }

    /// Runs `work` here, waiting for it; from this thread, at once.
    func runAndWait<T>(_ work: () throws -> T) throws -> T {
        if isCurrent { return try work() }
        assert(!DiskWaits.forbidden, "a write would wait for the disk on a thread that must never wait (the bus thread)")
        let queuedAt = Monotonic.now
        return try queue.sync { try withDeadline(queuedAt + lockTimeout, work) }
    }

    /// Queues `work` without waiting for it (with a deadline counted from now).
    func start(_ work: @escaping @Sendable () -> Void) {
        let queuedAt = Monotonic.now
        queue.async { self.withDeadline(queuedAt + self.lockTimeout, work) }
    }

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

/// Threads that must never wait for the disk. The daemon marks its bus thread: a commit
/// there (and its fsync, which a busy disk can hold for seconds) would stall every caller
/// and the watchdog's ping. Debug builds trap when a marked thread would wait for a write.
public enum DiskWaits {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Marks the calling thread as one that must never wait for a write.
    public static func forbidOnCurrentThread() {
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))
    }

    /// Whether the calling thread was marked.
    public static var forbidden: Bool { pthread_getspecific(key) != nil }
}

/// Nanoseconds on the monotonic clock.
enum Monotonic {
    static var now: UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
