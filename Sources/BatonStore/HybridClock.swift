import Synchronization

/// A hybrid logical clock (Kulkarni et al.): milliseconds << 16 | a counter, never behind
/// the wall clock, never behind a time seen in another device's record, always increasing.
/// Sync stamps every change of this machine with it when the change commits, and settles
/// races between machines by it (docs/guide.md, "The rules when machines disagree").
public final class HybridClock: Sendable {
    private let last = Mutex<Int64>(0)

    public init() {}

    /// A time for a change made at `wallMicroseconds`.
    public func stamp(wallMicroseconds: UInt64) -> Int64 {
        let physical = Int64(wallMicroseconds / 1000) << 16
        return last.withLock { last in
            last = max(physical, last + 1)
            return last
        }
    }

    /// Moves the clock past a time another device stamped (or this one, before a restart).
    public func observe(_ time: Int64) {
        last.withLock { $0 = max($0, time) }
    }
}
