import BatonContract
import BatonCore
import BatonStore
import DBus
import FoundationEssentials
import Synchronization

/// What the user does while recording is paused: kept in memory only, so that it can be
/// listed, found and continued, but never reaches the disk, the history or the user's other
/// machines; it is gone at `Resume` (or when the pause ends by itself) and when batond stops.
/// That is what is advertised during the pause, and the updates of activities advertised
/// before it: those go back to what they were when the pause began. The pause itself is
/// stored (`Store.setPaused`), so a restart does not end it.
final class PausedActivities: Sendable {
    private struct State {
        /// nil: not paused; 0: until resumed; else until that time (µs since the epoch).
        var until: UInt64?
        /// Advertised during the pause.
        var activities: [String: Activity] = [:]
        /// Advertised before the pause and updated during it: the latest version (the stored
        /// one is as it was when the pause began).
        var updates: [String: Activity] = [:]
        /// Advertise's `request_id`s, so that a client's retry gets the first id (in memory too).
        var requests: [String: String] = [:]
    }
    private let state = Mutex(State())

    init(until: UInt64?) {
        state.withLock { $0.until = until }
    }

    var until: UInt64? { state.withLock { $0.until } }
    var isPaused: Bool { until != nil }

    /// Starts (or changes) the pause; returns false when it was already so.
    func pause(until: UInt64) -> Bool {
        state.withLock { state in
            defer { state.until = until }
            return state.until != until
        }
    }

    /// Ends the pause; returns the activities it forgets and those whose updates it forgets
    /// (nil: it was not paused).
    func resume() -> (forgotten: [Activity], reverted: [Activity])? {
        state.withLock { state in
            guard state.until != nil else { return nil }
            defer { state = State() }
            return (state.activities.values.sorted { $0.createdAt < $1.createdAt }, state.updates.values.sorted { $0.createdAt < $1.createdAt })
        }
    }

    /// True once a pause with an end has reached it.
    func hasEnded(at now: UInt64) -> Bool {
        guard let until, until != 0 else { return false }
        return until <= now
    }

    func activity(_ id: String) -> Activity? { state.withLock { $0.activities[id] } }

    /// Keeps `activity`, within the app's quota (its oldest go first); returns the id a repeated
    /// `request_id` had, or nil when `activity` was added, with the ids it pushed out.
    func add(_ activity: Activity, requestID: String?, quota: Int) -> (repeated: String?, removed: [String]) {
        state.withLock { state in
            if let requestID, let first = state.requests[requestID] { return (first, []) }
            var removed: [String] = []
            let same = state.activities.values.filter { $0.appID == activity.appID }.sorted { $0.createdAt < $1.createdAt }
            for old in same.prefix(max(0, same.count - quota + 1)) {
                state.activities[old.id] = nil
                removed.append(old.id)
            }
            state.activities[activity.id] = activity
            if let requestID { state.requests[requestID] = activity.id }
            return (nil, removed)
        }
    }

    /// Keeps `activity` as updated during the pause, in memory: one advertised during it, or
    /// one advertised before it. Returns false, keeping nothing, once the pause has ended.
    func keepUpdate(_ activity: Activity) -> Bool {
        state.withLock { state in
            guard state.until != nil else { return false }
            if state.activities[activity.id] != nil {
                state.activities[activity.id] = activity
            } else {
                state.updates[activity.id] = activity
            }
            return true
        }
    }

    /// `stored` as it is now: its update during the pause, if it had one.
    func latest(_ stored: Activity) -> Activity {
        state.withLock { $0.updates.isEmpty ? nil : $0.updates[stored.id] } ?? stored
    }

    /// The ids of activities advertised before the pause and updated during it.
    var updatedIDs: Set<String> { state.withLock { Set($0.updates.keys) } }

    /// Forgets the updates of activities that ended (invalidated, expired, deleted).
    func forgetUpdates(of ids: [String]) {
        state.withLock { state in
            guard !state.updates.isEmpty else { return }
            for id in ids { state.updates[id] = nil }
        }
    }

    /// Forgets the activity with `id`; returns it, or nil when there was none.
    func remove(_ id: String) -> Activity? {
        state.withLock { $0.activities.removeValue(forKey: id) }
    }

    /// Those advertised during the pause that `filter` matches (they are all this machine's),
    /// newest first; with `updated`, those updated during it instead.
    func matching(_ filter: Store.ActivityFilter, now: UInt64, updated: Bool = false) -> [Activity] {
        guard filter.device == nil || filter.device == .local else { return [] }
        return state.withLock { Array(updated ? $0.updates.values : $0.activities.values) }
            .filter { activity in
                !activity.isExpired(at: now)
                    && filter.type.map { $0 == activity.type } ?? true && filter.appID.map { $0 == activity.appID } ?? true
                    && filter.sceneID.map { $0 == activity.sceneID } ?? true
                    && filter.persistentID.map { $0 == activity.persistentID } ?? true
                    && filter.targetContentID.map { $0 == activity.targetContentID } ?? true
                    && filter.idPrefix.map { activity.id.hasPrefix($0) } ?? true
            }
            .sorted { ($0.createdAt, $0.id) > ($1.createdAt, $1.id) }
    }

    /// Search-eligible ones (advertised or updated during the pause) whose title or keywords
    /// have a word starting with each word of `query` (ignoring case and accents), as `Search`
    /// matches: title matches first, newest first.
    func search(_ query: String, now: UInt64) -> [Activity] {
        let words = TextFolding.words
        let wanted = words(query)
        guard !wanted.isEmpty else { return [] }
        func matches(_ text: [String]) -> Bool { wanted.allSatisfy { word in text.contains { $0.hasPrefix(word) } } }
        let found = (matching(.init(), now: now) + matching(.init(), now: now, updated: true)).filter(\.eligibleForSearch).compactMap { activity -> (Activity, Bool)? in
            let title = words(activity.title)
            if matches(title) { return (activity, true) }
            return matches(title + activity.keywords.flatMap(words)) ? (activity, false) : nil
        }
        return found.filter(\.1).map(\.0) + found.filter { !$0.1 }.map(\.0)
    }
}
