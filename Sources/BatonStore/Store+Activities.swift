import BatonCore

extension Store {
    // MARK: Writing activities

    /// What storing one new activity did.
    public struct Inserted: Sendable, Equatable {
        /// The stored activity's id: the first call's when this one repeated its request.
        public let id: String
        /// Activities ended to keep the app under its quota.
        public let trimmed: [Ended]
        /// True when the request was made before: nothing was written.
        public let repeated: Bool
    }

    /// Stores several activities in one transaction, one commit for all; each succeeds or
    /// fails on its own, and each result is as `insert(_:)` would give. `requests`, when
    /// given, holds each activity's request (or nil), in order.
    public func insert(batch activities: [Activity], requests: [Request?] = []) -> [Result<Inserted, any Error>] {
        let requests = requests.isEmpty ? Array(repeating: nil, count: activities.count) : requests
        do {
            return try write { transaction in
                try zip(activities, requests).map { activity, request in
                    do {
                        return .success(try transaction.insert(activity, request: request))
                    } catch let refusal as BatonError {
                        // Refusals (the quota, a request id of another method) come before the
                        // first write: nothing to undo.
                        return .failure(refusal)
                    }
                }
            }
        } catch {
            // SQLite failed part-way through an activity, so the whole transaction rolled
            // back. Store each on its own, so one bad activity does not fail the others.
            return zip(activities, requests).map { activity, request in
                Result { try write { try $0.insert(activity, request: request) } }
            }
        }
    }

    // MARK: Reading activities

    /// The activity with `id`, unless it is missing or expired at `now`.
    public func activity(id: String, now: UInt64) throws -> Activity? {
        try read { db in
            try db.cachedStatement(sql: Self.liveActivityByID).row([id, Time.encode(now)], ActivityRow.decode)
        }
    }

    /// The activity with `id` even if it has expired (to tell "expired" from "unknown").
    public func storedActivity(id: String) throws -> Activity? {
        try read { db in
            try db.cachedStatement(sql: Self.activityByID).row([id], ActivityRow.decode)
        }
    }

    /// The earliest expiry still ahead, to schedule the next purge.
    public func nextExpiry() throws -> UInt64? {
        try read { db in
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT MIN(expires_at) FROM activity WHERE expires_at IS NOT NULL"))
                .map(Time.decode)
        }
    }

    /// Which activities `List` returns: every field is an exact match when set.
    public struct ActivityFilter: Sendable {
        public var type: String?
        public var appID: String?
        public var sceneID: String?
        public var persistentID: String?
        public var targetContentID: String?
        /// The beginning of their id (`Identifier.normalizePrefix`).
        public var idPrefix: String?
        /// Whose activities: this machine's, other devices', or one device's.
        public var device: Device?
        public var limit: Int?

        public enum Device: Sendable, Equatable {
            case local, remote
            case id(String)
        }
        public init(type: String? = nil, appID: String? = nil, sceneID: String? = nil, persistentID: String? = nil,
                    targetContentID: String? = nil, limit: Int? = nil) {
            self.type = type
            self.appID = appID
            self.sceneID = sceneID
            self.persistentID = persistentID
            self.targetContentID = targetContentID
            self.limit = limit
        }
    }

    /// The ids that begin with a normalized prefix (`Identifier.normalizePrefix`), as a range,
    /// so that the id index is used: every character of an id sorts before "g", so those ids
    /// are exactly the ones from the prefix to the prefix + "g".
    static let idPrefixCondition = "id >= ? AND id < ?"
    static func idPrefixArguments(_ prefix: String) -> StatementArguments { [prefix, prefix + "g"] }

    /// Live activities matching `filter`, newest first.
    public func activities(_ filter: ActivityFilter, now: UInt64) throws -> [Activity] {
        // One statement per combination of filter fields (at most 256), each prepared once.
        var conditions = ["(expires_at IS NULL OR expires_at > ?)"]
        var arguments: StatementArguments = [Time.encode(now)]
        for (field, value) in [(ActivityField.type, filter.type), (.appID, filter.appID), (.sceneID, filter.sceneID),
                               (.persistentID, filter.persistentID), (.targetContentID, filter.targetContentID)] {
            if let value {
                conditions.append("\(field.declared.column) = ?")
                arguments += [value]
            }
        }
        if let prefix = filter.idPrefix {
            conditions.append(Self.idPrefixCondition)
            arguments += Self.idPrefixArguments(prefix)
        }
        switch filter.device {
        case nil: break
        case .local: conditions.append("device_id = ''")
        case .remote: conditions.append("device_id <> ''")
        case .id(let id):
            conditions.append("device_id = ?")
            arguments += [id]
        }
        var sql = ActivityRow.selectSQL + " WHERE " + conditions.joined(separator: " AND ") + " ORDER BY seq DESC"
        if let limit = filter.limit {
            sql += " LIMIT ?"
            arguments += [limit]
        }
        return try read { db in try db.cachedStatement(sql: sql).rows(arguments, ActivityRow.decode) }
    }

    // MARK: Search

    /// Search-eligible live activities whose title or keywords match every word of
    /// `query` (as a prefix): those whose title alone matches first, then those matched
    /// through keywords; newest first within each.
    ///
    /// The first read walks the index of titles and keywords newest first (by rowid, which
    /// needs no sort) and stops at `limit`, so a broad query costs what it returns, not
    /// what it matches. FTS5's bm25 is not used: it computes its statistics over every
    /// match even when one row is returned.
    /// - Fewer than `limit` found: every match is in hand, and the title index only says
    ///   which come first. It is walked forwards, without the activity table: FTS5 walks
    ///   a doclist backwards at about twice the cost.
    /// - `limit` found: older title matches may exist, so the newest `limit` title matches
    ///   are read too, and the keyword matches fill what they leave.
    ///
    /// All reads are in the one snapshot, so they agree with each other.
    /// With `appID`, that app's activities only.
    public func search(_ query: String, limit: Int, now: UInt64, appID: String? = nil) throws -> [Activity] {
        guard limit > 0, let match = Self.ftsQuery(query) else { return [] }
        let arguments: StatementArguments = [match, Time.encode(now), appID]
        return try read { db in
            let newest = try Self.matches(db, Self.searchNewest, arguments, limit: limit)
            if newest.isEmpty { return [] }

            if newest.count < limit {
                let titled = try Set(Int64.fetchAll(db.cachedStatement(sql: Self.searchTitledSeqs), arguments: [match]))
                return newest.filter { titled.contains($0.seq) }.map(\.activity)
                    + newest.filter { !titled.contains($0.seq) }.map(\.activity)
            }

            var found = try Self.matches(db, Self.searchNewestTitled, arguments, limit: limit)
            let titled = Set(found.map(\.seq))
            for candidate in newest where found.count < limit && !titled.contains(candidate.seq) {
                found.append(candidate)
            }
            return found.map(\.activity)
        }
    }

    /// At most `limit` rows of a search query, with the seq each was indexed under.
    private static func matches(
        _ db: SQLiteConnection, _ sql: String, _ arguments: StatementArguments, limit: Int
    ) throws -> [(seq: Int64, activity: Activity)] {
        try db.cachedStatement(sql: sql).rows(arguments, limit: limit) { row in
            (row.int64(searchSeqColumn), ActivityRow.decode(row))
        }
    }

    /// Live matches from a search index, newest first.
    private static func searchQuery(_ index: String) -> String {
        """
        SELECT \(ActivityField.declarations.map { "activity." + $0.column }.joined(separator: ", ")), activity.seq
        FROM \(index) JOIN activity ON activity.seq = \(index).rowid
        WHERE \(index) MATCH ?1 AND (activity.expires_at IS NULL OR activity.expires_at > ?2) AND (?3 IS NULL OR activity.app_id = ?3)
        ORDER BY \(index).rowid DESC
        """
    }
    private static let searchNewest = searchQuery("activity_search")
    private static let searchNewestTitled = searchQuery("activity_title_search")
    /// The seqs of every title match, in the index's forward order.
    private static let searchTitledSeqs = "SELECT rowid FROM activity_title_search WHERE activity_title_search MATCH ?"
    /// The column of the search queries that holds the activity's seq, after the activity's own.
    private static let searchSeqColumn = ActivityRow.count

    static let activityByID = ActivityRow.selectSQL + " WHERE id = ?"
    private static let liveActivityByID = ActivityRow.selectSQL + " WHERE id = ? AND (expires_at IS NULL OR expires_at > ?)"

    /// Merges the search indexes' segments, a bounded step at a time, if they changed since
    /// the last call finished. Returns true when work is left for the next call.
    ///
    /// FTS5 adds a segment for every transaction that indexes something, and a query
    /// looks in each. Each step is its own short transaction, so Advertise commits slip in
    /// between steps.
    @discardableResult
    public func tidySearchIndex(pagesPerStep: Int = 200, budget: Duration = .milliseconds(10)) throws -> Bool {
        guard searchIndexChanged.exchange(false, ordering: .relaxed) else { return false }
        let clock = ContinuousClock()
        let deadline = clock.now + budget
        while clock.now < deadline {
            let merged = try inTransaction { db in
                try ["activity_search", "activity_title_search"].reduce(false) { merged, index in
                    let before = db.totalChangesCount
                    // A negative page count merges whatever segments there are, not only full levels.
                    try db.cachedStatement(sql: "INSERT INTO \(index)(\(index), rank) VALUES ('merge', ?)").execute(arguments: [-pagesPerStep])
                    // SQLite's documentation: a change of two or more (per command) means a merge was done.
                    return db.totalChangesCount - before >= 2 || merged
                }
            }
            if !merged { return false }
        }
        searchIndexChanged.store(true, ordering: .relaxed)
        return true
    }

    /// Each word quoted (so FTS5 syntax in it means nothing) and matched as a prefix.
    static func ftsQuery(_ query: String) -> String? {
        let words = query.split(whereSeparator: { $0.isWhitespace || $0.isPunctuation })
        guard !words.isEmpty else { return nil }
        // A quote is punctuation, so no word holds one: quoting needs no escaping.
        return words.map { "\"\($0)\"*" }.joined(separator: " ")
    }
}

extension WriteTransaction {
    /// Stores a new activity. When its app is at the live-activity limit, its oldest
    /// non-persistent activities end first (and are returned); when every one is
    /// persistent, the insert is refused with `QuotaExceeded`.
    public func insert(_ activity: Activity) throws -> [Ended] {
        try insert(activity, request: nil).trimmed
    }

    /// `insert(_:)`, once per `request`; says whether this call repeated it.
    func insert(_ activity: Activity, request: Request?) throws -> Store.Inserted {
        activitiesChange()
        if let request, let first = try Store.recorded(request, in: db) {
            return Store.Inserted(id: first, trimmed: [], repeated: true)
        }
        let live = try Int.fetchOne(
            db.cachedStatement(sql: "SELECT count FROM app_activity_count WHERE app_id = ?"), arguments: [activity.appID]) ?? 0
        var ended: [Ended] = []
        if live >= limits.liveActivitiesPerApp {
            let oldest = try String.fetchAll(db.cachedStatement(sql: """
                SELECT id FROM activity WHERE app_id = ? AND persistent_id IS NULL AND device_id = '' ORDER BY seq LIMIT ?
                """), arguments: [activity.appID, live - limits.liveActivitiesPerApp + 1])
            guard live - oldest.count < limits.liveActivitiesPerApp else {
                throw BatonError.quotaExceeded(
                    "\(activity.appID) has \(live) live activities, all persistent; the limit is \(limits.liveActivitiesPerApp). Delete some with DeleteSaved")
            }
            let quota = "removed to keep \(activity.appID) under its \(limits.liveActivitiesPerApp)-activity quota"
            ended = try oldest.compactMap { try end(id: $0, .evicted(quota), history: true) }
        }
        try db.cachedStatement(sql: ActivityRow.insertSQL).execute(arguments: ActivityRow.arguments(activity))
        if let scene = activity.sceneID {
            try db.cachedStatement(sql: "UPDATE scene SET activity_id = ?, last_active_at = ? WHERE id = ?")
                .execute(arguments: [activity.id, Time.encode(activity.updatedAt), scene])
        }
        if let request { try record(request, result: activity.id) }
        return Store.Inserted(id: activity.id, trimmed: ended, repeated: false)
    }

    /// Replaces every field of a stored activity. With `moved`, its `sceneID` is where it is
    /// now current: that scene shows it, and every other scene that did shows nothing.
    /// With a request made before, writes nothing. Returns the scenes that no longer show it.
    @discardableResult
    public func update(_ activity: Activity, moved: Bool = false, request: Request? = nil) throws -> [String] {
        activitiesChange()
        var cleared: [String] = []
        _ = try once(request) {
            try db.cachedStatement(sql: ActivityRow.updateSQL).execute(arguments: ActivityRow.arguments(activity))
            if db.changesCount == 0 { throw BatonError.notFound("no activity \(activity.id)") }
            guard moved else { return "" }
            cleared = try String.fetchAll(db.cachedStatement(sql: "UPDATE scene SET activity_id = NULL WHERE activity_id = ?1 AND id IS NOT ?2 RETURNING id"),
                                          arguments: [activity.id, activity.sceneID])
            if let scene = activity.sceneID {
                try db.cachedStatement(sql: "UPDATE scene SET activity_id = ?, last_active_at = ? WHERE id = ?")
                    .execute(arguments: [activity.id, Time.encode(activity.updatedAt), scene])
            }
            return ""
        }
        return cleared
    }

    /// Ends activities (`Invalidate`), into the history; returns those that were there.
    public func deleteActivities(ids: [String], reason: String = "invalidated by its app") throws -> [Ended] {
        activitiesChange()
        return try ids.compactMap { try end(id: $0, .invalidated(reason), history: true) }
    }

    /// Ends every activity of this machine carrying one of `persistentIDs` (with `appID`,
    /// only that app's), not into the history.
    public func deleteSaved(persistentIDs: [String], appID: String? = nil) throws -> [Ended] {
        activitiesChange()
        return try persistentIDs.flatMap { try end(.persistent($0, of: appID), .invalidated("deleted by its persistent id (DeleteSaved)")) }
    }

    /// Ends every activity of an app on this machine, not into the history.
    public func deleteAll(appID: String) throws -> [Ended] {
        activitiesChange()
        return try end(.app(appID, localOnly: true), .invalidated("deleted with every activity of \(appID) (DeleteAllSaved)"))
    }

    /// Ends the activities that expired at or before `now`, into the history.
    public func purgeExpired(now: UInt64) throws -> [Ended] {
        activitiesChange()
        return try end(.expired(at: now), .expired("expired"), history: true)
    }
}
