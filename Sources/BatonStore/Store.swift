import BatonCore
import Glibc
import GRDB
import GRDBSQLite
import Synchronization

/// Baton's persistent state in one SQLite database (WAL): writes and migrations
/// through one GRDB `DatabasePool` for the whole process, reads through one
/// read-only connection with prepared statements (`ReadConnection`).
///
/// Every write method returns only after its transaction has committed, so a
/// caller that replies afterwards never acknowledges a write that `kill -9`
/// could lose, and every read that starts after it sees it. Writes use cached
/// statements: GRDB's record API rebuilds SQL on each call (shared/FIELD-NOTES.md).
/// A store must be the only writer of its file: its reads see another connection's
/// commits only after the store's own next write (`ReadConnection`).
public final class Store: Sendable {
    private let pool: DatabasePool
    private let reader: ReadConnection
    private let checkpointer: Checkpointer
    /// Set by `writeActivities` (every write that may change the search indexes, and so
    /// add FTS5 segments), cleared when `tidySearchIndex` has merged them.
    private let searchIndexChanged = Atomic(true)
    /// The registrations by type, read once and forgotten by `register` and `unregister`
    /// after each commit (only this store writes them); nil until first needed.
    private let types = Mutex<[String: ActivityType]?>(nil)
    public let limits: Limits
    /// The database file.
    public let path: String

    /// Opens (creating if needed) the database at `path`, applying migrations.
    ///
    /// The file is created 0600. Its directory must already be safe; see `prepareDirectory`.
    public init(path: String, limits: Limits = .default) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw StoreError.cannotOpen(path, errno: errno) }
        Glibc.close(fd)
        var configuration = Configuration()
        configuration.label = "baton"
        configuration.busyMode = .timeout(5)
        // Made before the pool, so the pool's writer can hand its checkpoints to it.
        let checkpointer = Checkpointer(path: path)
        configuration.prepareDatabase { db in
            // The data lives on disk, not in memory (issue #6: ≤ 2 MB more resident after
            // 100 000 activities). SQLite's default page cache is 2 MiB per connection.
            try db.execute(sql: "PRAGMA cache_size = -\(Self.cacheKiB)")
            if let handle = db.sqliteConnection { checkpointer.attach(to: handle) }
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        self.checkpointer = checkpointer
        try Schema.migrator.migrate(pool)
        reader = try ReadConnection(path: path)
        self.limits = limits
        self.path = path
    }

    /// Returns once the checkpoints that commits have asked for so far have run (for tests).
    func waitForCheckpoints() {
        checkpointer.waitUntilIdle()
    }

    /// Each connection's SQLite page cache, in KiB. With 512, RSS after advertising 100 000
    /// activities was +2.3–2.8 MiB above idle once the checkpointer had its own connection;
    /// with 256, +2.0, and Get was no slower (scripts/bench conditions, quick runs).
    static let cacheKiB = 256

    /// Checkpoints the WAL into the database file and closes every connection.
    /// Nothing may use the store afterwards.
    public func close() throws {
        forgetTypes()
        reader.close()
        checkpointer.close()
        // The pool's last connection to close is a read-only reader, which cannot
        // checkpoint: do it explicitly so the WAL is merged and emptied.
        _ = try pool.writeWithoutTransaction { try $0.checkpoint(.truncate) }
        try pool.close()
    }

    /// The default database path: `$XDG_STATE_HOME/baton/baton.sqlite`, or
    /// `~/.local/state/baton/baton.sqlite`.
    public static func defaultPath(environment: [String: String]) -> String? {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return state + "/baton/baton.sqlite"
        }
        guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
        return home + "/.local/state/baton/baton.sqlite"
    }

    /// Creates the database's directory 0700 (and missing parents), or checks that an
    /// existing one belongs to this user and is closed to others.
    public static func prepareDirectory(_ directory: String) throws {
        var parents: [String] = []
        var current = directory
        while !current.isEmpty, current != "/", access(current, F_OK) != 0 {
            parents.append(current)
            current = String(current[..<(current.lastIndex(of: "/") ?? current.startIndex)])
        }
        for path in parents.reversed() where mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw StoreError.cannotCreateDirectory(path, errno: errno)
        }
        var info = stat()
        guard lstat(directory, &info) == 0 else { throw StoreError.cannotCreateDirectory(directory, errno: errno) }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw StoreError.unsafeDirectory(directory, "it is not a directory (or is a symbolic link)") }
        guard info.st_uid == getuid() else {
            throw StoreError.unsafeDirectory(directory, "it belongs to user \(info.st_uid), not to you (\(getuid()))")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw StoreError.unsafeDirectory(
                directory, "other users have access (mode \(String(info.st_mode & 0o777, radix: 8))); run: chmod 700 \(directory)")
        }
    }

    /// A write transaction over activities. Every write that inserts, changes or deletes
    /// activities goes through here, so that housekeeping knows the search indexes may
    /// have new segments to merge.
    private func writeActivities<T>(_ updates: (Database) throws -> T) throws -> T {
        searchIndexChanged.store(true, ordering: .relaxed)
        return try write(updates)
    }

    /// One write transaction (`BEGIN IMMEDIATE`, as GRDB's `write` begins one) on the
    /// pool's writer connection: committed before this returns, rolled back if `updates`
    /// or the commit throws.
    ///
    /// GRDB's `write` prepares its BEGIN and COMMIT anew, from SQL text, on every
    /// transaction; these are cached statements stepped directly. One scene insert
    /// (Continue): about 90 000 instructions through `pool.write`, 8 000 of them preparing.
    /// Stepped this way, the commit is not reported to GRDB's transaction observers; this
    /// store registers none (and GRDB resets its commit bookkeeping at its next statement).
    ///
    /// The reads' shared snapshot ends before the transaction (so it cannot keep the WAL
    /// from starting over) and after it (so the next read sees the commit): see `ReadConnection`.
    private func write<T>(_ updates: (Database) throws -> T) throws -> T {
        reader.endSnapshot()
        defer { reader.endSnapshot() }
        return try pool.writeWithoutTransaction { db in
            try Self.prepared(db.cachedStatement(sql: "BEGIN IMMEDIATE"), [], in: db).run()
            do {
                let result = try updates(db)
                try Self.prepared(db.cachedStatement(sql: "COMMIT"), [], in: db).run()
                return result
            } catch {
                // SQLite may have rolled back already (a full disk, for one); then there
                // is no transaction left to end.
                if db.isInsideTransaction {
                    try? Self.prepared(db.cachedStatement(sql: "ROLLBACK"), [], in: db).run()
                }
                throw error
            }
        }
    }

    // MARK: Activity types

    /// Adds or replaces a registration.
    public func register(_ type: ActivityType) throws {
        defer { forgetTypes() }
        try write { db in
            try db.cachedStatement(sql: """
                INSERT INTO activity_type (type, app_id, title, handler, handler_path, required_keys, payload_type)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(type) DO UPDATE SET app_id = excluded.app_id, title = excluded.title, handler = excluded.handler,
                    handler_path = excluded.handler_path, required_keys = excluded.required_keys, payload_type = excluded.payload_type
                """).execute(arguments: [
                    type.type, type.appID, type.title, type.handler, type.handlerPath, Self.join(type.requiredKeys), type.payloadType,
                ])
        }
    }

    /// Removes a registration and, with it, the type's activities. Returns the removed activities' ids.
    public func unregister(type: String) throws -> [String]? {
        defer { forgetTypes() }
        return try writeActivities { db in
            let ids = try String.fetchAll(db.cachedStatement(sql: "SELECT id FROM activity WHERE type = ?"), arguments: [type])
            try db.cachedStatement(sql: "DELETE FROM activity_type WHERE type = ?").execute(arguments: [type])
            return db.changesCount == 0 ? nil : ids
        }
    }

    /// The registration of `type`, from memory: Advertise and Continue look their type up
    /// on every call, and reading it cost about 14 000 instructions of a Continue's 372 000.
    public func activityType(_ type: String) throws -> ActivityType? {
        try types.withLock { types throws in
            if types == nil {
                // Read with the lock held: a registration that commits meanwhile forgets
                // these only after they are stored, never before.
                types = Dictionary(try activityTypes().map { ($0.type, $0) }, uniquingKeysWith: { $1 })
            }
            return types?[type]
        }
    }

    /// Every registration, read again at the next `activityType` (after each change).
    private func forgetTypes() {
        types.withLock { $0 = nil }
    }

    public func activityTypes() throws -> [ActivityType] {
        try reader.fetchAll("SELECT \(Self.typeColumns) FROM activity_type ORDER BY type", [], Self.activityType(from:))
    }

    // MARK: Activities

    /// Stores a new activity. When its app is at the live-activity limit, its oldest
    /// non-persistent activities are removed first (their ids are returned); when
    /// every one is persistent, the insert is refused with `QuotaExceeded`.
    public func insert(_ activity: Activity) throws -> [String] {
        try writeActivities { db in try insert(activity, in: db) }
    }

    /// Stores several activities in one transaction, one commit for all; each succeeds or
    /// fails on its own, and each result is as `insert(_:)` would give.
    public func insert(batch activities: [Activity]) -> [Result<[String], any Error>] {
        do {
            return try writeActivities { db in
                try activities.map { activity in
                    do {
                        return .success(try insert(activity, in: db))
                    } catch let refusal as BatonError {
                        // Refusals (the quota) come before the first write: nothing to undo.
                        return .failure(refusal)
                    }
                }
            }
        } catch {
            // SQLite failed part-way through an activity, so the whole transaction rolled
            // back. Store each on its own, so one bad activity does not fail the others.
            // (A savepoint per activity would do the same at a cost on every batch.)
            return activities.map { activity in Result { try insert(activity) } }
        }
    }

    private func insert(_ activity: Activity, in db: Database) throws -> [String] {
        let live = Int(try Self.firstInteger(
            db.cachedStatement(sql: "SELECT count FROM app_activity_count WHERE app_id = ?"), [.text(activity.appID)], in: db) ?? 0)
        var trimmed: [String] = []
        if live >= limits.liveActivitiesPerApp {
            // At the quota every insert trims: these run on each Advertise there.
            do {
                let oldest = try Self.prepared(db.cachedStatement(sql: """
                    SELECT id FROM activity WHERE app_id = ? AND persistent_id IS NULL ORDER BY seq LIMIT ?
                    """), [.text(activity.appID), .integer(Int64(live - limits.liveActivitiesPerApp + 1))], in: db)
                while let row = try oldest.next() { trimmed.append(row.string(0)) }
            }
            guard live - trimmed.count < limits.liveActivitiesPerApp else {
                throw BatonError.quotaExceeded(
                    "\(activity.appID) has \(live) live activities, all persistent; the limit is \(limits.liveActivitiesPerApp). Delete some with DeleteSaved")
            }
            for id in trimmed {
                try Self.prepared(db.cachedStatement(sql: "DELETE FROM activity WHERE id = ?"), [.text(id)], in: db).run()
            }
        }
        try Self.prepared(db.cachedStatement(sql: """
            INSERT INTO activity (id, type, app_id, title, payload, payload_type, target_content_id, persistent_id,
                keywords, webpage_url, eligible_for_handoff, eligible_for_search, scene_id, created_at, updated_at, expires_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """), Self.arguments(of: activity), in: db).run()
        if let scene = activity.sceneID {
            try Self.prepared(db.cachedStatement(sql: "UPDATE scene SET activity_id = ?, last_active_at = ? WHERE id = ?"),
                              [.text(activity.id), .integer(Int64(bitPattern: activity.updatedAt)), .text(scene)], in: db).run()
        }
        return trimmed
    }

    /// Replaces every field of a stored activity.
    public func update(_ activity: Activity) throws {
        try writeActivities { db in
            // Numbered parameters, so that the arguments are the insert's, in column order.
            try Self.prepared(db.cachedStatement(sql: """
                UPDATE activity SET type = ?2, app_id = ?3, title = ?4, payload = ?5, payload_type = ?6, target_content_id = ?7,
                    persistent_id = ?8, keywords = ?9, webpage_url = ?10, eligible_for_handoff = ?11, eligible_for_search = ?12,
                    scene_id = ?13, created_at = ?14, updated_at = ?15, expires_at = ?16
                WHERE id = ?1
                """), Self.arguments(of: activity), in: db).run()
            if db.changesCount == 0 { throw BatonError.notFound("no activity \(activity.id)") }
        }
    }

    /// The activity with `id`, unless it is missing or expired at `now`.
    public func activity(id: String, now: UInt64) throws -> Activity? {
        try reader.fetchOne("""
            SELECT \(Self.activityColumns) FROM activity WHERE id = ? AND (expires_at IS NULL OR expires_at > ?)
            """, [.text(id), .integer(Int64(bitPattern: now))], Self.activity(from:))
    }

    /// The activity with `id` even if it has expired (to tell "expired" from "unknown").
    public func storedActivity(id: String) throws -> Activity? {
        try reader.fetchOne("SELECT \(Self.activityColumns) FROM activity WHERE id = ?", [.text(id)], Self.activity(from:))
    }

    /// Which activities `List` returns: every field is an exact match when set.
    public struct ActivityFilter: Sendable {
        public var type: String?
        public var appID: String?
        public var sceneID: String?
        public var persistentID: String?
        public var targetContentID: String?
        public var limit: Int?
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

    /// Live activities matching `filter`, newest first.
    public func activities(_ filter: ActivityFilter, now: UInt64) throws -> [Activity] {
        // One statement per combination of filter fields (at most 64), each prepared once.
        var conditions = ["(expires_at IS NULL OR expires_at > ?)"]
        var arguments: [StatementArgument] = [.integer(Int64(bitPattern: now))]
        for (column, value) in [("type", filter.type), ("app_id", filter.appID), ("scene_id", filter.sceneID),
                                ("persistent_id", filter.persistentID), ("target_content_id", filter.targetContentID)] {
            if let value {
                conditions.append("\(column) = ?")
                arguments.append(.text(value))
            }
        }
        var sql = "SELECT \(Self.activityColumns) FROM activity WHERE " + conditions.joined(separator: " AND ") + " ORDER BY seq DESC"
        if let limit = filter.limit {
            sql += " LIMIT ?"
            arguments.append(.integer(Int64(limit)))
        }
        return try reader.fetchAll(sql, arguments, Self.activity(from:))
    }

    /// Search-eligible live activities whose title or keywords match every word of
    /// `query` (as a prefix): those whose title alone matches first, then those matched
    /// through keywords; newest first within each.
    ///
    /// The first read walks the index of titles and keywords newest first (by rowid, which
    /// needs no sort) and stops at `limit`, so a broad query costs what it returns, not
    /// what it matches. FTS5's bm25 is not used: it computes its statistics over every
    /// match, 0.5–1 ms with 10 000 matching rows even when one row was returned.
    /// - Fewer than `limit` found: every match is in hand, and the title index only says
    ///   which come first. It is walked forwards, without the activity table: FTS5 walks
    ///   a doclist backwards at about twice the cost (43 against 21 µs for "note* 4242*"
    ///   over 10 000 titles, python3 and SQLite 3.40).
    /// - `limit` found: older title matches may exist, so the newest `limit` title matches
    ///   are read too, and the keyword matches fill what they leave.
    ///
    /// The reads are separate statements: an activity stored or deleted between them may be
    /// missing from this answer, or still in it.
    public func search(_ query: String, limit: Int, now: UInt64) throws -> [Activity] {
        guard limit > 0, let match = Self.ftsQuery(query) else { return [] }
        let arguments: [StatementArgument] = [.text(match), .integer(Int64(bitPattern: now))]
        var newest: [(seq: Int64, activity: Activity)] = []
        try reader.forEachRow(Self.searchNewest, arguments) { row in
            newest.append((row.int64(Self.searchSeqColumn), Self.activity(from: row)))
            return newest.count < limit
        }
        if newest.isEmpty { return [] }

        if newest.count < limit {
            var titled = Set<Int64>()
            try reader.forEachRow(Self.searchTitledSeqs, [.text(match)]) { row in
                titled.insert(row.int64(0))
                return true
            }
            return newest.filter { titled.contains($0.seq) }.map(\.activity)
                + newest.filter { !titled.contains($0.seq) }.map(\.activity)
        }

        var found: [Activity] = []
        var titled = Set<Int64>()
        try reader.forEachRow(Self.searchNewestTitled, arguments) { row in
            titled.insert(row.int64(Self.searchSeqColumn))
            found.append(Self.activity(from: row))
            return found.count < limit
        }
        for candidate in newest where found.count < limit && !titled.contains(candidate.seq) {
            found.append(candidate.activity)
        }
        return found
    }

    /// Live matches from a search index, newest first.
    private static func searchQuery(_ index: String) -> String {
        """
        SELECT \(activityColumnNames.map { "activity." + $0 }.joined(separator: ", ")), activity.seq
        FROM \(index) JOIN activity ON activity.seq = \(index).rowid
        WHERE \(index) MATCH ? AND (activity.expires_at IS NULL OR activity.expires_at > ?)
        ORDER BY \(index).rowid DESC
        """
    }
    private static let searchNewest = searchQuery("activity_search")
    private static let searchNewestTitled = searchQuery("activity_title_search")
    /// The seqs of every title match, in the index's forward order.
    private static let searchTitledSeqs = "SELECT rowid FROM activity_title_search WHERE activity_title_search MATCH ?"

    /// The column of the search queries that holds the activity's seq, after the activity's own.
    private static let searchSeqColumn = Int32(activityColumnNames.count)

    /// Merges the search indexes' segments, a bounded step at a time, if they changed since
    /// the last call finished. Returns true when work is left for the next call.
    ///
    /// FTS5 adds a segment for every transaction that indexes something, and a query
    /// looks in each: with 10 000 activities indexed one commit each, finding one took
    /// 172 µs, and 33 µs once merged (python3, SQLite 3.40). Each step is its own short
    /// transaction, so Advertise commits slip in between steps.
    @discardableResult
    public func tidySearchIndex(pagesPerStep: Int = 200, budget: Duration = .milliseconds(10)) throws -> Bool {
        guard searchIndexChanged.exchange(false, ordering: .relaxed) else { return false }
        let clock = ContinuousClock()
        let deadline = clock.now + budget
        while clock.now < deadline {
            let merged = try write { db in
                try ["activity_search", "activity_title_search"].reduce(false) { merged, index in
                    let before = db.totalChangesCount
                    // A negative page count merges whatever segments there are, not only full levels.
                    try db.execute(sql: "INSERT INTO \(index)(\(index), rank) VALUES ('merge', ?)", arguments: [-pagesPerStep])
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

    /// Deletes activities; returns the ids that were removed.
    public func deleteActivities(ids: [String]) throws -> [String] {
        try writeActivities { db in
            var removed: [String] = []
            for id in ids {
                try db.cachedStatement(sql: "DELETE FROM activity WHERE id = ?").execute(arguments: [id])
                if db.changesCount > 0 { removed.append(id) }
            }
            return removed
        }
    }

    /// Deletes every activity carrying one of `persistentIDs`; returns their ids.
    public func deleteSaved(persistentIDs: [String]) throws -> [String] {
        try writeActivities { db in
            var removed: [String] = []
            for persistentID in persistentIDs {
                removed += try String.fetchAll(
                    db.cachedStatement(sql: "DELETE FROM activity WHERE persistent_id = ? RETURNING id"), arguments: [persistentID])
            }
            return removed
        }
    }

    /// Deletes every activity of an app; returns their ids.
    public func deleteAll(appID: String) throws -> [String] {
        try writeActivities { db in
            try String.fetchAll(db.cachedStatement(sql: "DELETE FROM activity WHERE app_id = ? RETURNING id"), arguments: [appID])
        }
    }

    /// Deletes activities that expired before `now`; returns their ids.
    public func purgeExpired(now: UInt64) throws -> [String] {
        try writeActivities { db in
            try String.fetchAll(
                db.cachedStatement(sql: "DELETE FROM activity WHERE expires_at IS NOT NULL AND expires_at <= ? RETURNING id"),
                arguments: [now])
        }
    }

    /// The earliest expiry still ahead, to schedule the next purge.
    public func nextExpiry() throws -> UInt64? {
        try reader.fetchOne("SELECT MIN(expires_at) FROM activity WHERE expires_at IS NOT NULL", []) { $0.optionalUInt64(0) } ?? nil
    }

    /// Counts for status reports.
    public func counts() throws -> (types: Int, activities: Int, scenes: Int) {
        try pool.read { db in
            (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM activity_type") ?? 0,
             try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM activity") ?? 0,
             try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM scene") ?? 0)
        }
    }

    // MARK: Scenes

    public func insert(_ scene: Scene) throws {
        try insert(scene, storage: [])
    }

    /// Creates a scene together with its first storage, in one transaction: a
    /// continuation either opens a complete scene or none at all.
    public func insert(_ scene: Scene, storage: [(String, StorageValue)]) throws {
        try checkStorage(storage)
        try write { db in
            try Self.prepared(db.cachedStatement(sql: """
                INSERT INTO scene (id, app_id, title, activity_id, created_at, last_active_at) VALUES (?, ?, ?, ?, ?, ?)
                """), [.text(scene.id), .text(scene.appID), .text(scene.title), .text(scene.activityID),
                       .integer(Int64(bitPattern: scene.createdAt)), .integer(Int64(bitPattern: scene.lastActiveAt))], in: db).run()
            _ = try applyStorage(db, sceneID: scene.id, set: storage, remove: [])
        }
    }

    /// Makes `activityID` the current activity of an existing scene and applies storage, in one transaction.
    public func continueInto(sceneID: String, activityID: String, storage: [(String, StorageValue)], now: UInt64) throws {
        try checkStorage(storage)
        try write { db in
            try Self.prepared(db.cachedStatement(sql: "UPDATE scene SET activity_id = ?, last_active_at = ? WHERE id = ?"),
                              [.text(activityID), .integer(Int64(bitPattern: now)), .text(sceneID)], in: db).run()
            if db.changesCount == 0 { throw BatonError.notFound("no scene \(sceneID)") }
            _ = try applyStorage(db, sceneID: sceneID, set: storage, remove: [])
        }
    }

    /// Updates a scene's title, current activity and last-active time.
    public func update(_ scene: Scene) throws {
        try write { db in
            try db.cachedStatement(sql: "UPDATE scene SET title = ?, activity_id = ?, last_active_at = ? WHERE id = ?")
                .execute(arguments: [scene.title, scene.activityID, scene.lastActiveAt, scene.id])
            if db.changesCount == 0 { throw BatonError.notFound("no scene \(scene.id)") }
        }
    }

    /// Removes a scene with its storage. Returns false when there was none.
    public func deleteScene(id: String) throws -> Bool {
        try write { db in
            try db.cachedStatement(sql: "DELETE FROM scene WHERE id = ?").execute(arguments: [id])
            return db.changesCount > 0
        }
    }

    public func scene(id: String) throws -> Scene? {
        try reader.fetchOne("SELECT \(Self.sceneColumns) FROM scene WHERE id = ?", [.text(id)], Self.scene(from:))
    }

    /// Scenes, oldest first; all apps' when `appID` is nil.
    public func scenes(appID: String? = nil) throws -> [Scene] {
        if let appID {
            return try reader.fetchAll(
                "SELECT \(Self.sceneColumns) FROM scene WHERE app_id = ? ORDER BY created_at, id", [.text(appID)], Self.scene(from:))
        }
        return try reader.fetchAll("SELECT \(Self.sceneColumns) FROM scene ORDER BY created_at, id", [], Self.scene(from:))
    }

    // MARK: Scene storage

    /// Every stored value of a scene, by key.
    public func storage(sceneID: String) throws -> [String: StorageValue] {
        var values: [String: StorageValue] = [:]
        try reader.forEachRow("SELECT key, kind, value FROM scene_storage WHERE scene_id = ?", [.text(sceneID)]) { row in
            if let value = Self.storageValue(kind: row.int64(1), at: 2, of: row) { values[row.string(0)] = value }
            return true
        }
        return values
    }

    /// One stored value, or nil.
    public func storageValue(sceneID: String, key: String) throws -> StorageValue? {
        try reader.fetchOne("SELECT kind, value FROM scene_storage WHERE scene_id = ? AND key = ?", [.text(sceneID), .text(key)]) {
            Self.storageValue(kind: $0.int64(0), at: 1, of: $0)
        } ?? nil
    }

    /// Sets and removes values of a scene in one transaction: all or nothing, and
    /// refused with `QuotaExceeded` if the scene's storage would pass its limit.
    /// Returns the keys that were actually removed.
    @discardableResult
    public func changeStorage(sceneID: String, set values: [(String, StorageValue)], remove keys: [String]) throws -> [String] {
        try checkStorage(values)
        return try write { db in
            guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM scene WHERE id = ?"), arguments: [sceneID]) == true else {
                throw BatonError.notFound("no scene \(sceneID)")
            }
            return try applyStorage(db, sceneID: sceneID, set: values, remove: keys)
        }
    }

    private func checkStorage(_ values: [(String, StorageValue)]) throws {
        for (key, value) in values {
            try Validate.storageKey(key, limits: limits)
            try value.validate(key: key, limits: limits)
        }
    }

    /// Writes storage changes inside the caller's transaction and checks the scene's total.
    private func applyStorage(_ db: Database, sceneID: String, set values: [(String, StorageValue)], remove keys: [String]) throws -> [String] {
        // A scene opened or continued into without storage changes nothing: no total to check.
        if values.isEmpty && keys.isEmpty { return [] }
        var removed: [String] = []
        for key in keys {
            try Self.prepared(db.cachedStatement(sql: "DELETE FROM scene_storage WHERE scene_id = ? AND key = ?"),
                              [.text(sceneID), .text(key)], in: db).run()
            if db.changesCount > 0 { removed.append(key) }
        }
        for (key, value) in values {
            let (kind, stored) = Self.stored(value)
            try Self.prepared(db.cachedStatement(sql: """
                INSERT INTO scene_storage (scene_id, key, kind, value, size) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT(scene_id, key) DO UPDATE SET kind = excluded.kind, value = excluded.value, size = excluded.size
                """), [.text(sceneID), .text(key), .integer(kind), stored, .integer(Int64(key.utf8.count + value.byteSize))], in: db).run()
        }
        let total = try Self.firstInteger(
            db.cachedStatement(sql: "SELECT COALESCE(SUM(size), 0) FROM scene_storage WHERE scene_id = ?"), [.text(sceneID)], in: db) ?? 0
        guard total <= limits.sceneStorageBytes else {
            // Throwing rolls the whole transaction back: nothing of this change is kept.
            throw BatonError.quotaExceeded("the scene's storage would be \(total) bytes; the limit is \(limits.sceneStorageBytes)")
        }
        return removed
    }

    // MARK: Row mapping

    static let separator: Unicode.Scalar = "\u{1F}"

    static func join(_ items: [String]) -> String { items.joined(separator: String(separator)) }
    /// Split on the separator's byte: splitting on a `Character` walks grapheme clusters,
    /// 3 700 instructions for a one-keyword list.
    static func split(_ text: String) -> [String] {
        text.isEmpty ? [] : text.utf8.split(separator: UInt8(ascii: separator)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A statement from GRDB's cache with `arguments` bound directly. For the activity
    /// writes: GRDB's `StatementArguments` boxed each of an activity's 16 values, 23 000 of
    /// the 106 000 instructions an insert took (callgrind).
    private static func prepared(
        _ statement: Statement, _ arguments: [StatementArgument], in db: Database
    ) throws -> PreparedStatement {
        try PreparedStatement(statement.sqliteStatement, of: db.sqliteConnection, arguments)
    }

    /// The first column of a statement's first row, or nil when it has none. The statement is
    /// reset before this returns, so it holds nothing open during the writes that follow.
    private static func firstInteger(_ statement: Statement, _ arguments: [StatementArgument], in db: Database) throws -> Int64? {
        let rows = try prepared(statement, arguments, in: db)
        guard let row = try rows.next() else { return nil }
        return row.int64(0)
    }

    /// An activity's columns, in the order of `activityColumnNames`.
    private static func arguments(of activity: Activity) -> [StatementArgument] {
        [
            .text(activity.id), .text(activity.type), .text(activity.appID), .text(activity.title), .text(activity.payload),
            .text(activity.payloadType), .text(activity.targetContentID), .text(activity.persistentID),
            .text(join(activity.keywords)), .text(activity.webpageURL),
            .integer(activity.eligibleForHandoff ? 1 : 0), .integer(activity.eligibleForSearch ? 1 : 0), .text(activity.sceneID),
            .integer(Int64(bitPattern: activity.createdAt)), .integer(Int64(bitPattern: activity.updatedAt)),
            activity.expiresAt.map { .integer(Int64(bitPattern: $0)) } ?? .null,
        ]
    }

    // Rows are read by column index; the lists below fix the indices.
    static let typeColumns = "type, app_id, title, handler, handler_path, required_keys, payload_type"
    static let activityColumnNames = [
        "id", "type", "app_id", "title", "payload", "payload_type", "target_content_id", "persistent_id", "keywords",
        "webpage_url", "eligible_for_handoff", "eligible_for_search", "scene_id", "created_at", "updated_at", "expires_at",
    ]
    static let activityColumns = activityColumnNames.joined(separator: ", ")
    static let sceneColumns = "id, app_id, title, activity_id, created_at, last_active_at"

    private static func activityType(from row: borrowing Columns) -> ActivityType {
        ActivityType(type: row.string(0), appID: row.string(1), title: row.string(2), handler: row.optionalString(3),
                     handlerPath: row.string(4), requiredKeys: split(row.string(5)), payloadType: row.optionalString(6))
    }

    private static func activity(from row: borrowing Columns) -> Activity {
        Activity(
            id: row.string(0), type: row.string(1), appID: row.string(2), title: row.string(3), payload: row.string(4),
            payloadType: row.optionalString(5), targetContentID: row.optionalString(6), persistentID: row.optionalString(7),
            keywords: split(row.string(8)), webpageURL: row.optionalString(9), eligibleForHandoff: row.bool(10),
            eligibleForSearch: row.bool(11), sceneID: row.optionalString(12), createdAt: row.uint64(13),
            updatedAt: row.uint64(14), expiresAt: row.optionalUInt64(15))
    }

    private static func scene(from row: borrowing Columns) -> Scene {
        Scene(id: row.string(0), appID: row.string(1), title: row.string(2), activityID: row.optionalString(3),
              createdAt: row.uint64(4), lastActiveAt: row.uint64(5))
    }

    /// How a storage value is kept: a kind code and a value SQLite stores natively.
    private static func stored(_ value: StorageValue) -> (Int64, StatementArgument) {
        switch value {
        case .bool(let v): (0, .integer(v ? 1 : 0))
        case .int(let v): (1, .integer(v))
        case .double(let v): (2, .real(v))
        case .string(let v): (3, .text(v))
        case .bytes(let v): (4, .blob(v))
        }
    }

    /// The value `stored(_:)` wrote, from column `index` of `row`; nil for a kind this version does not know.
    private static func storageValue(kind: Int64, at index: Int32, of row: borrowing Columns) -> StorageValue? {
        switch kind {
        case 0: .bool(row.bool(index))
        case 1: .int(row.int64(index))
        case 2: .double(row.double(index))
        case 3: .string(row.string(index))
        case 4: .bytes(row.bytes(index))
        default: nil
        }
    }
}

/// Why the database could not be opened, with what to do about it.
public enum StoreError: Error, CustomStringConvertible {
    case cannotOpen(String, errno: Int32)
    /// SQLite refused a read: its result code and message.
    case sqlite(Int32, String)
    /// The store was closed.
    case closed
    case cannotCreateDirectory(String, errno: Int32)
    case unsafeDirectory(String, String)

    public var description: String {
        switch self {
        case .cannotOpen(let path, let code):
            "cannot open the database \(path): \(String(cString: strerror(code)))"
        case .cannotCreateDirectory(let path, let code):
            "cannot create the state directory \(path): \(String(cString: strerror(code)))"
        case .unsafeDirectory(let path, let reason):
            "refusing to use \(path) for Baton's database: \(reason)"
        case .sqlite(let code, let message):
            "SQLite error \(code): \(message)"
        case .closed:
            "the database is closed"
        }
    }
}
