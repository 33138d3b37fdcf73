import BatonCore
import Synchronization
import Testing

/// The clock tests hold: it stands still, and a move returns once what fell due has run. A
/// broken clock would leave a move waiting: each test fails after a minute instead.
@Suite(.timeLimit(.minutes(1))) struct ManualClockTests {
    /// Rounds a `repeating` work has run, and the clock's time at each.
    final class Rounds: Sendable {
        let times = Mutex<[UInt64]>([])
        var count: Int { times.withLock { $0.count } }
        var last: UInt64? { times.withLock { $0.last } }
    }

    /// Starts `repeating(every: period)` on `clock`, noting each round; returns once the first
    /// round (which runs at once) is noted.
    static func start(
        _ clock: ManualClock, every period: Duration, next: @escaping @Sendable () -> UInt64? = { nil },
        round: @escaping @Sendable () async -> Void = {}
    ) async
        -> (Rounds, Task<Void, Never>)
    {
        let rounds = Rounds()
        let (first, started) = AsyncStream<Void>.makeStream()
        let task = Task {
            await clock.repeating(every: period, next: next) {
                rounds.times.withLock { $0.append(clock.now()) }
                started.yield()
                await round()
            }
        }
        var iterator = first.makeAsyncIterator()
        _ = await iterator.next()
        return (rounds, task)
    }

    @Test func itStandsStillUntilMoved() async {
        let clock = ManualClock(startingAt: 1_000_000)
        #expect(clock.now() == 1_000_000)
        await clock.advance(by: .milliseconds(1500))
        #expect(clock.now() == 2_500_000)
        await clock.advance(by: .microseconds(1))
        #expect(clock.now() == 2_500_001)
    }

    @Test func aMoveRunsTheRoundThatFellDueBeforeItReturns() async {
        let clock = ManualClock(startingAt: 0)
        let (rounds, task) = await Self.start(clock, every: .seconds(1))
        #expect(rounds.count == 1, "the first round runs at once")
        await clock.advance(by: .seconds(1) - .microseconds(1))
        #expect(rounds.count == 1, "ran before its period was over")
        await clock.advance(by: .microseconds(1))
        #expect(rounds.count == 2)
        #expect(rounds.last == 1_000_000, "the round saw the new time")
        // The next period counts from that round.
        await clock.advance(by: .milliseconds(999))
        #expect(rounds.count == 2)
        await clock.advance(by: .milliseconds(1))
        #expect(rounds.count == 3)
        task.cancel()
        await task.value
    }

    @Test func aMovePastManyPeriodsRunsOneRound() async {
        let clock = ManualClock(startingAt: 0)
        let (rounds, task) = await Self.start(clock, every: .seconds(1))
        await clock.advance(by: .seconds(3_600))
        #expect(rounds.count == 2)
        #expect(rounds.last == 3_600_000_000)
        task.cancel()
        await task.value
    }

    /// A round under way when the clock moves began before the move: the move waits for the
    /// round after it, which sees the new time.
    @Test func aMoveDuringARoundWaitsForTheNextOne() async {
        let clock = ManualClock(startingAt: 0)
        let (release, gate) = AsyncStream<Void>.makeStream()
        let held = Mutex(true)
        let (rounds, task) = await Self.start(clock, every: .seconds(1), round: {
            // The first round waits for the test to let it finish.
            guard held.withLock({ let was = $0; $0 = false; return was }) else { return }
            var iterator = release.makeAsyncIterator()
            _ = await iterator.next()
        })
        let moved = Task { await clock.advance(by: .seconds(5)) }
        // The time changes in the same step that notes what the move waits for.
        while clock.now() != 5_000_000 { await Task.yield() }
        gate.yield()
        await moved.value
        #expect(rounds.count == 2)
        #expect(rounds.last == 5_000_000)
        task.cancel()
        await task.value
    }

    /// Cancelled during a round a move waits for, the work ends after that round and the
    /// move returns; a move after it finds nothing due.
    @Test func cancellingTheWorkEndsItAndReleasesAMoveWaitingForIt() async {
        let clock = ManualClock(startingAt: 0)
        let (release, gate) = AsyncStream<Void>.makeStream()
        let (rounds, task) = await Self.start(clock, every: .seconds(1), round: {
            var iterator = release.makeAsyncIterator()
            _ = await iterator.next()
        })
        let moved = Task { await clock.advance(by: .seconds(5)) }
        while clock.now() != 5_000_000 { await Task.yield() }
        task.cancel()
        gate.yield()
        await moved.value
        await task.value
        #expect(rounds.count == 1, "a round ran after the work was cancelled")
        await clock.advance(by: .seconds(10))
        #expect(rounds.count == 1)
    }

    @Test func everyWorkDueRunsBeforeTheMoveReturns() async {
        let clock = ManualClock(startingAt: 0)
        let (often, first) = await Self.start(clock, every: .seconds(1))
        let (seldom, second) = await Self.start(clock, every: .seconds(60))
        await clock.advance(by: .seconds(30))
        #expect(often.count == 2 && seldom.count == 1)
        await clock.advance(by: .seconds(30))
        #expect(often.count == 3 && seldom.count == 2)
        first.cancel()
        second.cancel()
        await first.value
        await second.value
    }

    /// The time the work says something falls due runs a round then, inside the period.
    @Test func aRoundRunsAtTheTimeItsWorkGives() async {
        let clock = ManualClock(startingAt: 0)
        let deadline = Atomic<UInt64>(2_500)
        let (rounds, task) = await Self.start(clock, every: .seconds(60), next: { deadline.load(ordering: .relaxed) })
        await clock.advance(by: .microseconds(2_499))
        #expect(rounds.count == 1)
        await clock.advance(by: .microseconds(1))
        #expect(rounds.count == 2 && rounds.last == 2_500)
        // Handled (or not): a time not after the last round's start waits for the period, not
        // round after round.
        await clock.advance(by: .seconds(1))
        #expect(rounds.count == 2)
        deadline.store(10_000_000, ordering: .relaxed)
        await clock.advance(by: .seconds(9))
        #expect(rounds.count == 3 && rounds.last == 10_002_500)
        task.cancel()
        await task.value
    }
}
