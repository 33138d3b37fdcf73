import BatonCore

/// The history: this machine's and other machines' activities that ended (invalidated,
/// expired, evicted by the quota), kept so that the user can find and continue them later.
///
/// An activity that ends for good (`end(_:_:history:in:)`, with `history`) is copied into
/// `history` when it was advertised eligible for history. Before such a write commits, the
/// history is trimmed to its age and size limits (`trimHistory`), so it never grows past
/// them; housekeeping trims by age too, as time passes.
extension Store {
    /// Which past activities: every field given must match; `query` matches titles and
    /// keywords of search-eligible ones as `Search` does.
    public struct HistoryFilter: Sendable, Equatable {
        public var appID: String?
        public var type: String?
        public var query: String?
        /// The beginning of their id (`Identifier.normalizePrefix`).
        public var idPrefix: String?
        /// Ended at or after this time.
        public var since: UInt64?
        public var limit: Int?
        public init(appID: String? = nil, type: String? = nil, query: String? = nil, since: UInt64? = nil, limit: Int? = nil) {
            self.appID = appID
            self.type = type
            self.query = query
            self.since = since
            self.limit = limit
        }
    }

    /// The share of its size limit a history over it is trimmed to.
    static let trimmedTo = 0.9

    /// What a history row counts against the size limit, in SQL over the activity's columns:
    /// every text of the field declaration (a field declared later counts at once), and 256
    /// bytes for the rest.
    static let historyRowSize = ActivityField.declarations.filter { [.text, .optionalText, .list].contains($0.kind) }
        .map { "coalesce(length(CAST(\($0.column) AS BLOB)), 0)" }
        .joined(separator: " + ") + " + 256"

    /// Removes what is older than the history's age limit, then the oldest until it is
    /// within its size limit; returns how many went.
    @discardableResult
    static func trimHistory(_ db: SQLiteConnection, now: UInt64, limits: Limits) throws -> Int {
        let oldest = now > limits.historySeconds * 1_000_000 ? now - limits.historySeconds * 1_000_000 : 0
        try db.cachedStatement(sql: "DELETE FROM history WHERE ended_at < ?").execute(arguments: [Time.encode(oldest)])
        var removed = db.changesCount
        let total = try Int.fetchOne(db.cachedStatement(sql: "SELECT bytes FROM history_size")) ?? 0
        guard total > limits.historyBytes else { return removed }
        // Down to `trimmedTo` of the limit, so that a full history is not summed again at every
        // end: the oldest rows whose sizes add up to what is too much, in one statement.
        try db.cachedStatement(sql: """
            DELETE FROM history WHERE seq <= (
                SELECT seq FROM (SELECT seq, sum(size) OVER (ORDER BY seq) AS freed FROM history) WHERE freed >= ? ORDER BY seq LIMIT 1)
            """).execute(arguments: [total - Int(Double(limits.historyBytes) * trimmedTo)])
        removed += db.changesCount
        return removed
    }

    /// When the oldest past activity becomes too old to keep, to schedule its trim.
    public func historyAgesOut() throws -> UInt64? {
        try read { db in try Int64.fetchOne(db.cachedStatement(sql: "SELECT min(ended_at) FROM history")) }
            .map { Time.decode($0) + limits.historySeconds * 1_000_000 + 1 }
    }

    /// Trims the history to its age as time passes (housekeeping); returns how many went.
    /// Reads first: a round with nothing too old writes nothing.
    @discardableResult
    public func trimHistory(now: UInt64) throws -> Int {
        guard let due = try historyAgesOut(), due <= now else { return 0 }
        return try inTransaction { db in try Self.trimHistory(db, now: now, limits: limits) }
    }

    /// Past activities matching `filter`, the most recently ended first.
    public func history(_ filter: HistoryFilter) throws -> [PastActivity] {
        guard let query = Self.historyQuery(filter, select: Self.pastSelect) else { return [] }
        return try read { db in try db.cachedStatement(sql: query.sql).rows(query.arguments, Self.decodePast) }
    }

    /// `select` (from `history`) of the past activities matching `filter`, the most recently
    /// ended first; nil when none can match.
    static func historyQuery(_ filter: HistoryFilter, select: String) -> (sql: String, arguments: StatementArguments)? {
        var conditions: [String] = []
        var arguments: StatementArguments = []
        for (column, value) in [("app_id", filter.appID), ("type", filter.type)] {
            if let value {
                conditions.append("\(column) = ?")
                arguments += [value]
            }
        }
        if let prefix = filter.idPrefix {
            conditions.append(Self.idPrefixCondition)
            arguments += Self.idPrefixArguments(prefix)
        }
        if let since = filter.since {
            conditions.append("ended_at >= ?")
            arguments += [Time.encode(since)]
        }
        if let query = filter.query {
            guard let match = Self.ftsQuery(query) else { return nil }
            conditions.append("seq IN (SELECT rowid FROM history_search WHERE history_search MATCH ?)")
            arguments += [match]
        }
        var sql = select + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")) + " ORDER BY ended_at DESC, seq DESC"
        if let limit = filter.limit {
            sql += " LIMIT ?"
            arguments += [limit]
        }
        return (sql, arguments)
    }

    /// What a continuation asked for at `askedAt` continues from: the live activity `id`, or
    /// the history's copy of it if it had ended by then; nil when there is neither (an
    /// activity that ends while its continuation is under way is not continued).
    public func continuable(id: String, now: UInt64, askedAt: UInt64) throws -> Activity? {
        if let live = try storedActivity(id: id) { return live.isExpired(at: now) ? nil : live }
        guard let past = try pastActivity(id: id), past.endedAt <= askedAt else { return nil }
        return past.activity
    }

    /// The history's copy of activity `id`, if it has one.
    public func pastActivity(id: String) throws -> PastActivity? {
        try read { db in try db.cachedStatement(sql: Self.pastSelect + " WHERE id = ?").row([id], Self.decodePast) }
    }

    /// How much the history holds: activities and bytes (as counted against its limit).
    public func historySize() throws -> (activities: Int, bytes: Int) {
        try read { db in
            (try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM history")) ?? 0,
             try Int.fetchOne(db.cachedStatement(sql: "SELECT bytes FROM history_size")) ?? 0)
        }
    }

    static let pastSelect = "SELECT \(ActivityRow.list), ended_at, end_state, end_reason FROM history"

    static func decodePast(_ row: Columns) -> PastActivity {
        let after = ActivityRow.count
        return PastActivity(activity: ActivityRow.decode(row), endedAt: row.time(after), endState: row.string(after + 1),
                            endReason: row.string(after + 2))
    }
}

extension WriteTransaction {
    /// Removes past activities matching `filter` (all of them for an empty one); returns how many.
    public func clearHistory(_ filter: Store.HistoryFilter) throws -> Int {
        guard let query = Store.historyQuery(filter, select: "SELECT seq FROM history") else { return 0 }
        try db.execute(sql: "DELETE FROM history WHERE seq IN (\(query.sql))", arguments: query.arguments)
        return db.changesCount
    }
}
