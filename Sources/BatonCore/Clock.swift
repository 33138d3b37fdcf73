import Synchronization

/// batond's one source of time: every time the daemon stamps or compares (expiry and its
/// purge, pause, the day-old continuation, tombstones, history's age, request ids, sync's
/// records) is read from it, and its periodic work (housekeeping) is paced by it. It is
/// passed in when the daemon is built: `SystemClock` for users, `ManualClock` in tests, which
/// move time instead of sleeping and get back once what fell due has run.
///
/// Time spent waiting for a peer (a handler's reply, a lock, a server) is not on this clock:
/// those are real durations, whatever the calendar says.
public protocol DaemonClock: Sendable {
    /// Microseconds since the Unix epoch.
    func now() -> UInt64

    /// Runs `work` at once, then again when `period` has passed after a round ended, or — on a
    /// clock that keeps exact time, `ManualClock` — sooner when the time `next` gives (something
    /// the work will handle, such as an expiry) has come; until the calling task is cancelled,
    /// after the round under way then.
    ///
    /// A time `next` gives that is not after the last round began is left to the period: the
    /// round could not handle it (a failed write), and trying again at once would spin.
    func repeating(every period: Duration, next: @escaping @Sendable () -> UInt64?, _ work: @escaping @Sendable () async -> Void) async
}

/// The system's wall clock, and real sleeps.
///
/// Its rounds keep to the period and do not ask `next`: what falls due is handled within a
/// period (a second for housekeeping), which users cannot tell from on time, and asking would
/// add reads to every round.
public struct SystemClock: DaemonClock {
    public init() {}

    public func now() -> UInt64 { WallClock.nowMicroseconds() }

    public func repeating(every period: Duration, next: @escaping @Sendable () -> UInt64?, _ work: @escaping @Sendable () async -> Void) async {
        while !Task.isCancelled {
            await work()
            try? await Task.sleep(for: period)
        }
    }
}

/// A clock that stands still until a test moves it. `advance(by:)` moves it and returns once
/// every `repeating` work that fell due — its period passed, or the time its `next` gives came —
/// has run a round begun after the move, so a test checks what follows (an expiry purged, a
/// pause ended) right after, to the microsecond, without polling.
///
/// A move past several periods runs one round, as a machine waking from suspend does: each
/// round looks at the time, not at how many rounds were missed.
public final class ManualClock: DaemonClock {
    /// One `repeating` caller.
    private struct Timer {
        let period: UInt64
        let next: @Sendable () -> UInt64?
        /// When the period after the last round ends.
        var due: UInt64
        /// When the last round began, on this clock.
        var began: UInt64
        /// Rounds begun and ended.
        var begun = 1
        var ended = 0
        /// Set while the caller waits for its next round; resumed with false when cancelled.
        var sleeping: CheckedContinuation<Bool, Never>?
        /// Moves waiting for round `round` to end, or for the caller to go to sleep.
        var waiting: [(round: Int, resume: CheckedContinuation<Void, Never>)] = []

        func isDue(at now: UInt64, soon: UInt64?) -> Bool {
            due <= now || soon.map { $0 > began && $0 <= now } == true
        }

        mutating func beginRound(at now: UInt64) {
            due = now + period
            began = now
            begun += 1
        }

        /// Releases the moves waiting for rounds up to `ended`, or all when it goes to sleep.
        mutating func release(all: Bool) {
            let done = waiting.filter { all || $0.round <= ended }
            waiting.removeAll { all || $0.round <= ended }
            done.forEach { $0.resume.resume() }
        }
    }

    private struct State {
        var now: UInt64
        var nextTimer = 0
        var timers: [Int: Timer] = [:]
    }

    private let state: Mutex<State>

    /// A clock showing `microseconds` since the Unix epoch (the system's time by default).
    public init(startingAt microseconds: UInt64 = WallClock.nowMicroseconds()) {
        state = Mutex(State(now: microseconds))
    }

    public func now() -> UInt64 { state.withLock { $0.now } }

    public func repeating(every period: Duration, next: @escaping @Sendable () -> UInt64?, _ work: @escaping @Sendable () async -> Void) async {
        let id = state.withLock { state in
            let id = state.nextTimer
            state.nextTimer += 1
            state.timers[id] = Timer(period: Self.microseconds(period), next: next, due: state.now + Self.microseconds(period), began: state.now)
            return id
        }
        defer { end(id) }
        while !Task.isCancelled {
            await work()
            // Read before taking the lock: `next` may read this clock.
            let soon = next()
            let again = await withTaskCancellationHandler {
                await withCheckedContinuation { (wake: CheckedContinuation<Bool, Never>) in
                    state.withLock { state in
                        guard var timer = state.timers[id] else { return wake.resume(returning: false) }
                        timer.ended = timer.begun
                        if Task.isCancelled {
                            wake.resume(returning: false)
                        } else if timer.isDue(at: state.now, soon: soon) {
                            timer.beginRound(at: state.now)
                            wake.resume(returning: true)
                        } else {
                            timer.sleeping = wake
                        }
                        timer.release(all: timer.sleeping != nil)
                        state.timers[id] = timer
                    }
                }
            } onCancel: {
                let sleeping = state.withLock { state in
                    defer { state.timers[id]?.sleeping = nil }
                    return state.timers[id]?.sleeping
                }
                sleeping?.resume(returning: false)
            }
            if !again { return }
        }
    }

    /// Moves the clock ahead by `duration` and returns once every repeating work that fell due
    /// has run a round begun after the move (or was cancelled).
    public func advance(by duration: Duration) async {
        // What each timer was doing when the time changed.
        let before = state.withLock { state -> [Int: (begun: Int, asleep: Bool, next: @Sendable () -> UInt64?)] in
            state.now += Self.microseconds(duration)
            return state.timers.mapValues { ($0.begun, $0.sleeping != nil, $0.next) }
        }
        // Read outside the lock: `next` may read this clock.
        let soon = before.compactMapValues { $0.asleep ? $0.next() : nil }
        let rounds = state.withLock { state -> [(timer: Int, round: Int)] in
            var rounds: [(Int, Int)] = []
            for (id, seen) in before {
                guard var timer = state.timers[id] else { continue }
                if let sleeping = timer.sleeping {
                    // Asleep since before the move: wake it if its time came. (Gone to sleep
                    // during the move, it decided so at the new time.)
                    guard seen.asleep, timer.isDue(at: state.now, soon: soon[id]) else { continue }
                    timer.sleeping = nil
                    timer.beginRound(at: state.now)
                    sleeping.resume(returning: true)
                    rounds.append((id, timer.begun))
                } else if timer.begun > seen.begun {
                    // A round begun since the move: it sees the new time.
                    rounds.append((id, timer.begun))
                } else {
                    // In a round begun before the move: when it ends, the caller decides at the new time.
                    rounds.append((id, timer.begun + 1))
                }
                state.timers[id] = timer
            }
            return rounds
        }
        for (id, round) in rounds {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                state.withLock { state in
                    guard let timer = state.timers[id], timer.ended < round, timer.sleeping == nil else { return done.resume() }
                    state.timers[id]?.waiting.append((round, done))
                }
            }
        }
    }

    /// A `repeating` caller returned: nothing waits for its rounds any more.
    private func end(_ id: Int) {
        let waiting = state.withLock { $0.timers.removeValue(forKey: id)?.waiting ?? [] }
        waiting.forEach { $0.resume.resume() }
    }

    private static func microseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000 + UInt64(max(0, attoseconds)) / 1_000_000_000_000
    }
}
