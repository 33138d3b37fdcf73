import BatonCore

/// What batond remembers to explain an activity: a tombstone for each that ended (how, and
/// why, in a sentence) and the outcome of each activity's last continuation, both kept for
/// `Store.explanationLifetime`.
extension Store {
    /// How long tombstones and continuation outcomes are kept.
    public static let explanationLifetime: UInt64 = 7 * 24 * 3600 * 1_000_000

    /// A tombstone: how a forgotten activity ended.
    public struct Tombstone: Sendable, Equatable {
        public var activityID: String
        public var appID: String
        public var type: String
        /// `expired`, `invalidated` or `evicted`.
        public var state: String
        public var reason: String
        public var endedAt: UInt64
    }

    /// The last continuation of an activity.
    public struct ContinuationOutcome: Sendable, Equatable {
        public var sceneID: String
        /// `pending`, `ready`, `refused`, `failed` or `discarded`.
        public var state: String
        public var error: String?
        public var at: UInt64
    }

    /// How `activityID` ended, while its tombstone is kept.
    public func tombstone(activityID: String) throws -> Tombstone? {
        try read { db in
            try db.cachedStatement(sql: "SELECT activity_id, app_id, type, state, reason, ended_at FROM tombstone WHERE activity_id = ?")
                .row([activityID]) { row in
                    Tombstone(activityID: row.string(0), appID: row.string(1), type: row.string(2), state: row.string(3),
                              reason: row.string(4), endedAt: row.time(5))
                }
        }
    }

    /// The outcome of `activityID`'s last continuation, while it is kept.
    public func lastContinuation(activityID: String) throws -> ContinuationOutcome? {
        try read { db in
            try db.cachedStatement(sql: "SELECT scene_id, state, error, at FROM continuation_outcome WHERE activity_id = ?")
                .row([activityID]) { row in
                    ContinuationOutcome(sceneID: row.string(0), state: row.string(1), error: row.optionalString(2), at: row.time(3))
                }
        }
    }

    /// Forgets tombstones and outcomes older than `before`; returns how many went.
    @discardableResult
    public func forgetExplanations(before: UInt64) throws -> Int {
        let oldest = try read { db in
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT MIN(m) FROM (SELECT MIN(ended_at) AS m FROM tombstone UNION ALL SELECT MIN(at) FROM continuation_outcome)"))
        }
        guard let oldest, Time.decode(oldest) < before else { return 0 }
        return try inTransaction { db in
            try db.cachedStatement(sql: "DELETE FROM tombstone WHERE ended_at < ?").execute(arguments: [Time.encode(before)])
            let tombstones = db.changesCount
            try db.cachedStatement(sql: "DELETE FROM continuation_outcome WHERE at < ?").execute(arguments: [Time.encode(before)])
            return tombstones + db.changesCount
        }
    }
}

extension WriteTransaction {
    /// Records the outcome of an activity's continuation, inside the caller's write.
    func noteOutcome(_ activityID: String, scene: String, state: String, error: String? = nil) throws {
        try db.cachedStatement(sql: """
            INSERT OR REPLACE INTO continuation_outcome (activity_id, scene_id, state, error, at) VALUES (?, ?, ?, ?, ?)
            """).execute(arguments: [activityID, scene, state, error, Time.encode(wallClock.now())])
    }
}
