import BatonCore

/// The user's controls over what is kept: apps blocked from advertising, and forgetting
/// everything of an app.
extension Store {
    /// What `forget(appID:)` removed.
    public struct Forgotten: Sendable, Equatable {
        public var types = 0, history = 0, values = 0
        /// The live activities removed (this machine's and other machines' copies).
        public var activities: [Ended] = []
        public var scenes: [String] = []
        public init() {}
    }

    /// The apps the user blocked, by id.
    public func blockedApps() throws -> [String] {
        try read { db in try String.fetchAll(db.cachedStatement(sql: "SELECT app_id FROM blocked_app ORDER BY app_id")) }
    }

    /// Whether the user blocked `appID`, from memory: Advertise asks on every call.
    public func isBlocked(_ appID: String) throws -> Bool {
        try blocked.withLock { blocked throws in
            // Read with the lock held, as `activityType` reads the types.
            if blocked == nil { blocked = Set(try blockedApps()) }
            return blocked?.contains(appID) ?? false
        }
    }

    /// While the user has paused recording: until when (0: until resumed); nil when not paused.
    public func pausedUntil() throws -> UInt64? {
        try read { db in try Int64.fetchOne(db.cachedStatement(sql: "SELECT until FROM pause")).map(Time.decode) }
    }

    /// Whether batond notifies of activities that arrive from other machines (on unless turned off).
    public func notificationsEnabled() throws -> Bool {
        try read { db in try Int64.fetchOne(db.cachedStatement(sql: "SELECT id FROM notifications_off")) == nil }
    }

    /// The sources the user turned on (`recent-documents`), each with the time up to which it
    /// has read (µs since the epoch): what was used before that is not advertised again.
    public func sourcesOn() throws -> [String: UInt64] {
        try read { db in
            var sources: [String: UInt64] = [:]
            let rows = try db.cachedStatement(sql: "SELECT name, read_until FROM source_on").rows { ($0.string(0), $0.time(1)) }
            for (name, until) in rows { sources[name] = until }
            return sources
        }
    }

    /// The settings the user gave `source`, by name (those not set are not here).
    public func sourceSettings(_ source: String) throws -> [String: String] {
        try read { db in
            Dictionary(try db.cachedStatement(sql: "SELECT name, value FROM source_setting WHERE source = ?")
                .rows([source]) { ($0.string(0), $0.string(1)) }, uniquingKeysWith: { $1 })
        }
    }
}

extension WriteTransaction {
    /// Blocks or unblocks `appID`; false when it already was as asked.
    public func setBlocked(_ appID: String, _ blocked: Bool) throws -> Bool {
        registrationsChange()
        if blocked {
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO blocked_app (app_id, blocked_at) VALUES (?, ?)")
                .execute(arguments: [appID, Time.encode(wallClock.now())])
        } else {
            try db.cachedStatement(sql: "DELETE FROM blocked_app WHERE app_id = ?").execute(arguments: [appID])
        }
        return db.changesCount > 0
    }

    /// Pauses recording until `until` (0: until resumed), or resumes it (nil). Only the fact
    /// is stored, so that a restart does not resume; what is advertised meanwhile never is.
    public func setPaused(until: UInt64?) throws {
        try db.cachedStatement(sql: "DELETE FROM pause").execute()
        if let until { try db.cachedStatement(sql: "INSERT INTO pause (id, until) VALUES (1, ?)").execute(arguments: [Time.encode(until)]) }
    }

    /// Turns notifications of other machines' activities on or off; false when it was so already.
    @discardableResult
    public func setNotifications(_ enabled: Bool) throws -> Bool {
        try db.cachedStatement(sql: enabled ? "DELETE FROM notifications_off" : "INSERT OR IGNORE INTO notifications_off (id) VALUES (1)")
            .execute()
        return db.changesCount > 0
    }

    /// Sets `source`'s setting `name` to `value` (checked by the caller); false when it was so already.
    @discardableResult
    public func setSourceSetting(_ source: String, _ name: String, to value: String) throws -> Bool {
        try db.cachedStatement(sql: """
            INSERT INTO source_setting (source, name, value) VALUES (?1, ?2, ?3)
            ON CONFLICT (source, name) DO UPDATE SET value = ?3 WHERE value <> ?3
            """).execute(arguments: [source, name, value])
        return db.changesCount > 0
    }

    /// Turns a source on, reading from `from` on, or off; false when it was so already.
    @discardableResult
    public func setSource(_ name: String, on: Bool, from: UInt64) throws -> Bool {
        if on {
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO source_on (name, read_until) VALUES (?, ?)").execute(arguments: [name, Time.encode(from)])
        } else {
            try db.cachedStatement(sql: "DELETE FROM source_on WHERE name = ?").execute(arguments: [name])
        }
        return db.changesCount > 0
    }

    /// A source has read up to `time`; nothing when it is off.
    public func sourceRead(_ name: String, until time: UInt64) throws {
        try db.cachedStatement(sql: "UPDATE source_on SET read_until = max(read_until, ?) WHERE name = ?").execute(arguments: [Time.encode(time), name])
    }

    /// Removes everything of `appID`, in one transaction: its types, its live activities
    /// (ended for the other machines too, as any end is, but not into the history), its
    /// history, its scenes with their storage, and what Explain remembers of its activities.
    public func forget(appID: String) throws -> Store.Forgotten {
        activitiesChange()
        registrationsChange()
        var forgotten = Store.Forgotten()
        let past = try String.fetchAll(db.cachedStatement(sql: "SELECT id FROM history WHERE app_id = ?"), arguments: [appID])
        forgotten.activities = try end(.app(appID, localOnly: false), .invalidated("its app \(appID) was forgotten"))
        try db.cachedStatement(sql: "DELETE FROM activity_type WHERE app_id = ?").execute(arguments: [appID])
        forgotten.types = db.changesCount
        try db.cachedStatement(sql: "DELETE FROM history WHERE app_id = ?").execute(arguments: [appID])
        forgotten.history = db.changesCount
        forgotten.values = try Int.fetchOne(db.cachedStatement(sql: """
            SELECT count(*) FROM scene_storage WHERE scene_id IN (SELECT id FROM scene WHERE app_id = ?)
            """), arguments: [appID]) ?? 0
        forgotten.scenes = try String.fetchAll(db.cachedStatement(sql: "DELETE FROM scene WHERE app_id = ? RETURNING id"), arguments: [appID])
        try db.cachedStatement(sql: "DELETE FROM app_session WHERE app_id = ?").execute(arguments: [appID])
        try db.cachedStatement(sql: "DELETE FROM tombstone WHERE app_id = ?").execute(arguments: [appID])
        for id in forgotten.activities.map(\.id) + past {
            try db.cachedStatement(sql: "DELETE FROM continuation_outcome WHERE activity_id = ?").execute(arguments: [id])
        }
        return forgotten
    }
}
