import BatonCore

/// How activities end. Every deletion of activities goes through `end(id:_:history:in:)`,
/// which writes, in the caller's transaction, everything an end leaves behind and returns
/// what ended: no trigger of ours fires on a deletion, and nothing is read back afterwards.
extension Store {
    /// Which activities an end removes: a condition over `activity` and its arguments.
    struct Selection {
        let condition: String
        let arguments: StatementArguments

        /// Another machine's activity `id`, from `device` (any other machine when nil).
        static func remote(_ id: String, from device: String?) -> Selection {
            Selection(condition: "id = ?1 AND device_id <> '' AND (?2 IS NULL OR device_id = ?2)", arguments: [id, device])
        }
        /// This machine's activity `id`.
        static func local(_ id: String) -> Selection { Selection(condition: "id = ? AND device_id = ''", arguments: [id]) }
        static func expired(at now: UInt64) -> Selection {
            Selection(condition: "expires_at IS NOT NULL AND expires_at <= ?", arguments: [Time.encode(now)])
        }
        /// This machine's activities with `persistentID`, of `appID` only when given.
        static func persistent(_ persistentID: String, of appID: String?) -> Selection {
            Selection(condition: "persistent_id = ?1 AND device_id = '' AND (?2 IS NULL OR app_id = ?2)", arguments: [persistentID, appID])
        }
        /// The activities of `appID`: this machine's only, or every machine's.
        static func app(_ appID: String, localOnly: Bool) -> Selection {
            Selection(condition: "app_id = ?1 AND (?2 = 0 OR device_id = '')", arguments: [appID, localOnly])
        }
        /// This machine's activities of `type`.
        static func type(_ type: String) -> Selection { Selection(condition: "type = ? AND device_id = ''", arguments: [type]) }
        /// The activities of `device` but those in `kept` (a JSON array of ids).
        static func remote(of device: String, except kept: String) -> Selection {
            Selection(condition: "device_id = ?1 AND id NOT IN (SELECT value FROM json_each(?2))", arguments: [device, kept])
        }
        /// Every other machine's activity.
        static let everyRemote = Selection(condition: "device_id <> ''", arguments: [])
    }

    /// Copies the activity `?4` into the history as it ends (`?1` its state, `?2` why, `?3`
    /// now): an expired one at the time it expired. Scenes stay with the live activity.
    static let copyIntoHistory: String = {
        let columns = ActivityField.declarations.map { $0.origin == .scene ? "NULL" : $0.column }.joined(separator: ", ")
        return """
            INSERT INTO history (\(ActivityRow.list), ended_at, end_state, end_reason, size)
            SELECT \(columns), CASE WHEN ?1 = 'expired' AND expires_at IS NOT NULL THEN expires_at ELSE ?3 END, ?1, ?2, \(historyRowSize)
            FROM activity WHERE id = ?4
            """
    }()
}

/// An activity a write ended: its app (who may be told) and the scenes that showed it.
public struct Ended: Sendable, Equatable {
    public var id: String
    public var appID: String
    /// The scenes whose current activity it was; none shows it now.
    public var scenes: [String]

    public init(id: String, appID: String, scenes: [String] = []) {
        self.id = id
        self.appID = appID
        self.scenes = scenes
    }
}

/// How an activity ended, for its tombstone: `Explain`'s state and sentence.
public enum Ending: Sendable, Equatable {
    case invalidated(String)
    case expired(String)
    case evicted(String)

    var state: String {
        switch self {
        case .invalidated: "invalidated"
        case .expired: "expired"
        case .evicted: "evicted"
        }
    }

    var reason: String {
        switch self {
        case .invalidated(let reason), .expired(let reason), .evicted(let reason): reason
        }
    }
}

extension WriteTransaction {
    /// Ends the activities `selection` picks: for each, a tombstone saying `how` (what
    /// Explain tells), with `history` a copy in the history when it was advertised eligible
    /// (trimmed to the history's limits before the write commits), an outbox row while sync
    /// is on and it is this machine's, and every scene showing it cleared. Returns them in
    /// the order they were advertised.
    func end(_ selection: Store.Selection, _ how: Ending, history: Bool = false) throws -> [Ended] {
        let ids = try String.fetchAll(db.cachedStatement(sql: "SELECT id FROM activity WHERE \(selection.condition) ORDER BY seq"),
                                      arguments: selection.arguments)
        return try ids.compactMap { try end(id: $0, how, history: history) }
    }

    /// Ends the activity `id` as `end(_:_:history:)` does; nil when there is none. What it
    /// needs is read in one statement and only what applies is written: each statement is a
    /// cost of its own around SQLite's work (Benchmarks/README, "Explicit endings").
    func end(id: String, _ how: Ending, history: Bool = false) throws -> Ended? {
        // Everything the end needs to know, in one read: its app and type, whether it goes into
        // the history and the outbox, whether the history has a copy already, the scenes showing
        // it (their ids are UUIDs: a space separates them).
        let facts = try db.cachedStatement(sql: """
            SELECT app_id, type, eligible_for_history, device_id = '' AND EXISTS (SELECT 1 FROM sync_state),
                   EXISTS (SELECT 1 FROM history WHERE id = ?1), (SELECT group_concat(id, ' ') FROM scene WHERE activity_id = ?1)
            FROM activity WHERE id = ?1
            """).row([id]) { row in
                (app: row.string(0), type: row.string(1), eligible: row.bool(2), outbox: row.bool(3), inHistory: row.bool(4),
                 scenes: row.optionalString(5).map { $0.split(separator: " ").map(String.init) } ?? [])
            }
        guard let facts else { return nil }
        let now = wallClock.now()
        try db.cachedStatement(sql: """
            INSERT INTO tombstone (activity_id, app_id, type, state, reason, ended_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
            ON CONFLICT(activity_id) DO UPDATE SET app_id = ?2, type = ?3, state = ?4, reason = ?5, ended_at = ?6, requested_hlc = NULL
            """).execute(arguments: [id, facts.app, facts.type, how.state, how.reason, Time.encode(now)])
        if history && facts.eligible && limits.historySeconds > 0 && limits.historyBytes > 0 {
            if facts.inHistory { try db.cachedStatement(sql: "DELETE FROM history WHERE id = ?").execute(arguments: [id]) }
            try db.cachedStatement(sql: Store.copyIntoHistory).execute(arguments: [how.state, how.reason, Time.encode(now), id])
            store.historyAdded.store(true, ordering: .relaxed)
        }
        if facts.outbox {
            try db.cachedStatement(sql: "INSERT INTO outbox (kind, key, at, hlc) VALUES ('activity', ?, ?, ?)")
                .execute(arguments: [id, Time.encode(now), clock.stamp(wallMicroseconds: now)])
            store.outbox.raise()
        }
        // Only when a scene shows it: an UPDATE of the column it finds scenes by collects their
        // rowids in page cache first, even when none matches (Schema's v5 says what it cost).
        if !facts.scenes.isEmpty {
            try db.cachedStatement(sql: "UPDATE scene SET activity_id = NULL WHERE activity_id = ?").execute(arguments: [id])
        }
        try db.cachedStatement(sql: "DELETE FROM activity WHERE id = ?").execute(arguments: [id])
        return Ended(id: id, appID: facts.app, scenes: facts.scenes)
    }
}
