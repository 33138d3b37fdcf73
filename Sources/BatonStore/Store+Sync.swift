import FoundationEssentials
import BatonCore

/// What the store does for sync across machines (DESIGN, "Across machines").
///
/// Sending: while sync is on (a `sync_state` row exists), every change to this machine's
/// activities and types adds an outbox row in the same transaction: an activity's end by
/// `end`, every other change by temporary triggers on the writer connection, whatever method
/// made it. The sync service stages a batch
/// (`stageOutbox`: each change resolved to what it is now, numbered with this device's log
/// seqs), sends it, and deletes it once the server has committed it (`sent`). A staged batch
/// is sent again as it is until then, so a retry never sends other content under a seq.
///
/// Receiving: `applyRemote` applies another device's records in its log's order and moves
/// that log's cursor in the same transaction. An activity that ended here is never brought
/// back by a late record: its tombstone refuses it.
extension Store {
    /// This device's place in sync, while sync is on.
    public struct SyncIdentity: Sendable, Equatable {
        public var deviceID: String
        public var userName: String
        public init(deviceID: String, userName: String) {
            self.deviceID = deviceID
            self.userName = userName
        }
    }

    /// A change of this machine's, as it is when it is staged.
    public enum SyncChange: Sendable, Equatable {
        case activity(Activity)
        case activityEnded(id: String, state: String, reason: String)
        case type(ActivityType)
        case typeRemoved(String)
    }

    /// One record of this device's log, ready to seal and send.
    public struct StagedRecord: Sendable, Equatable {
        public let logSeq: Int64
        /// When the change was made (microseconds since the epoch).
        public let at: UInt64
        /// When the change was made, by the store's `HybridClock`.
        public let hlc: Int64
        public let body: [UInt8]
    }

    /// One record of another device's log, as the sync service read it.
    public struct RemoteRecord: Sendable, Equatable {
        public var seq: Int64
        /// When the other device made the change, by its hybrid logical clock.
        public var hlc: Int64
        /// Nil for a record this version cannot read, or one meant for another device: skipped.
        public var change: RemoteChange?
        public init(seq: Int64, hlc: Int64, change: RemoteChange?) {
            self.seq = seq
            self.hlc = hlc
            self.change = change
        }
    }

    /// A change another device made, as its record says.
    public enum RemoteChange: Sendable, Equatable {
        case activity(Activity)
        case activityEnded(id: String, state: String, reason: String)
        case type(name: String, appID: String)
        case typeRemoved(String)
        /// Another machine asks this one to continue one of its activities here: a scene
        /// opens `pending`, and the continuation waits in it for the app, as `Continue` does.
        case continueHere(activityID: String)
        /// An activity of this machine's was continued on the device that sent the record.
        case continuedThere(activityID: String)
        /// Another machine's activity was continued on the device that sent the record.
        case continuedElsewhere(activityID: String)
        /// The device that sent the record invalidated one of this machine's activities: it
        /// ends here too, and its end travels to every device as this machine's record.
        case invalidateHere(activityID: String)
        /// A copy of the sending device's clipboard, opened: nothing of it is stored; it is
        /// handed on (`Applied.clipboard`) for the clipboard source to offer.
        case clipboard(ClipboardCopy)
        /// The device's log before this point is gone (compacted): what it had then came again
        /// just before, and `activities` and `types` are all it has now; any other of its
        /// activities here ended while this machine was not reading (`WriteTransaction.enqueueSnapshot`).
        case complete(activities: [String], types: [String])
    }

    /// What applying another device's records changed here, for the signals.
    public struct Applied: Sendable, Equatable {
        public var advertised: [String] = []
        public var updated: [String] = []
        public var ended: [Ended] = []
        /// Scenes opened `pending` for continuations other machines asked for here.
        public var pendingScenes: [String] = []
        /// This machine's activities that were continued on the device that sent them.
        public var continuedThere: [ContinuedThere] = []
        /// Other machines' activities continued on the device that sent the record.
        public var continuedElsewhere: [String] = []
        /// Requests to end one of this machine's activities that came too late: it changed here
        /// after they were made, and the later change wins.
        public var overruled: [Overruled] = []
        /// Copies of the sending device's clipboard, in the order it made them (held in memory only).
        public var clipboard: [ClipboardCopy] = []

        public struct ContinuedThere: Sendable, Equatable {
            public var activityID: String
            public var device: String
        }

        public struct Overruled: Sendable, Equatable {
            public var activityID: String
            /// The device that asked.
            public var device: String
        }
    }

    /// The outbox triggers, on the writer connection: every new or changed activity of this
    /// machine (but its scene) and every change of its types, while sync is on. An activity's
    /// end writes its own outbox row (`end`).
    static func keepOutbox(on db: SQLiteConnection, bell: OutboxBell, clock: HybridClock, wallClock: any DaemonClock) throws {
        let synced = ActivityRow.syncedColumns
        try db.addFunction("baton_outbox_added") {
            bell.raise()
            return .null
        }
        try db.addFunction("baton_now") { .integer(Time.encode(wallClock.now())) }
        try db.addFunction("baton_hlc") { .integer(clock.stamp(wallMicroseconds: wallClock.now())) }
        // Never behind a time this machine stamped before it restarted: those waiting in the
        // outbox, and the newest sent (kept in one row, so opening reads no whole table).
        clock.observe(try Int64.fetchOne(db, sql: """
            SELECT max(coalesce((SELECT max(hlc) FROM outbox), 0), coalesce((SELECT last_hlc FROM sync_state), 0))
            """) ?? 0)
        let on = "EXISTS (SELECT 1 FROM main.sync_state)"
        for (name, event, row, kind, key) in [
            ("outbox_activity_insert", "INSERT ON main.activity", "new", "activity", "id"),
            ("outbox_activity_update", "UPDATE OF \(synced) ON main.activity", "new", "activity", "id"),
            ("outbox_type_insert", "INSERT ON main.activity_type", "new", "type", "type"),
            ("outbox_type_update", "UPDATE ON main.activity_type", "new", "type", "type"),
            ("outbox_type_delete", "DELETE ON main.activity_type", "old", "type", "type"),
        ] {
            let local = kind == "activity" ? "\(row).device_id = '' AND " : ""
            try db.execute(sql: """
                CREATE TEMP TRIGGER \(name) AFTER \(event) WHEN \(local)\(on) BEGIN
                    INSERT INTO outbox (kind, key, at, hlc) VALUES ('\(kind)', \(row).\(key), baton_now(), baton_hlc());
                    SELECT baton_outbox_added();
                END
                """)
        }
    }

    /// Calls `body` after each commit that added outbox rows (the sync service wakes to send them).
    public func onOutbox(_ body: @escaping @Sendable () -> Void) {
        let listener = OutboxBell.Listener(body)
        outbox.listener.withLock { $0 = listener }
    }

    // MARK: Turning sync on and off

    /// This device's identity while sync is on; nil while it is off.
    public func syncIdentity() throws -> SyncIdentity? {
        try read { db in
            try db.cachedStatement(sql: "SELECT device_id, user_name FROM sync_state").row([]) { row in
                SyncIdentity(deviceID: row.string(0), userName: row.string(1))
            }
        }
    }

    /// How long a request to end another machine's activity is sent again with each snapshot of
    /// this machine's log: a machine shut for longer misses it (and keeps its activity).
    public static let lastingRequestLifetime: UInt64 = 90 * 24 * 3600 * 1_000_000

    static func forgetSync(in db: SQLiteConnection) throws {
        try db.execute(sql: """
            DELETE FROM sync_state; DELETE FROM outbox; DELETE FROM outbox_expiry; DELETE FROM clipboard_sent;
            DELETE FROM sqlite_sequence WHERE name = 'outbox';
            DELETE FROM sync_cursor; DELETE FROM remote_device; DELETE FROM remote_type; DELETE FROM sync_lasting_request;
            """)
    }

    // MARK: Sending

    /// When the oldest change not yet on the server was made (µs since the epoch); nil when there is none.
    public func oldestOutboxChange() throws -> UInt64? {
        try read { db in
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT at FROM outbox ORDER BY seq LIMIT 1")).map(Time.decode)
        }
    }

    /// This device's copies of the clipboard in its log whose time is over at `now`: their seq
    /// and time, for the sync engine to remove them from the log.
    public func expiredClipboardRecords(now: UInt64) throws -> [(logSeq: Int64, hlc: Int64)] {
        try read { db in
            try db.cachedStatement(sql: "SELECT log_seq, hlc FROM clipboard_sent WHERE expires_at <= ? ORDER BY log_seq")
                .rows([Time.encode(now)]) { (logSeq: $0.int64(0), hlc: $0.int64(1)) }
        }
    }

    /// Changes not yet on the server.
    public func outboxCount() throws -> Int {
        try read { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM outbox")) ?? 0 }
    }

    /// What an outbox row's change is now: the activity or type as stored, or how it ended.
    static func change(kind: String, key: String, in db: SQLiteConnection) throws -> SyncChange {
        if kind == "type" {
            let type = try db.cachedStatement(sql: ActivityTypeRow.selectSQL + " WHERE type = ?").row([key], ActivityTypeRow.decode)
            return type.map(SyncChange.type) ?? .typeRemoved(key)
        }
        if let activity = try db.cachedStatement(sql: ActivityRow.selectSQL + " WHERE id = ?").row([key], ActivityRow.decode) {
            return .activity(activity)
        }
        let ending = try db.cachedStatement(sql: "SELECT state, reason FROM tombstone WHERE activity_id = ?")
            .row([key]) { (state: $0.string(0), reason: $0.string(1)) }
        return .activityEnded(id: key, state: ending?.state ?? "invalidated", reason: ending?.reason ?? "invalidated")
    }

    // MARK: Receiving

    /// The last seq applied of each other device's log.
    public func syncCursors() throws -> [String: Int64] {
        try read { db in
            Dictionary(try db.cachedStatement(sql: "SELECT device_id, seq FROM sync_cursor")
                .rows([]) { ($0.string(0), $0.int64(1)) }, uniquingKeysWith: { $1 })
        }
    }

    /// When this machine last changed its activity `id`: the time of the change waiting in
    /// the outbox, else of the last one it sent (0 when sync never sent it).
    static func lastChange(of id: String, in db: SQLiteConnection) throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: """
            SELECT max(coalesce((SELECT max(hlc) FROM outbox WHERE kind = 'activity' AND key = ?1), 0),
                       coalesce((SELECT hlc FROM activity WHERE id = ?1 AND device_id = ''), 0))
            """), arguments: [id]) ?? 0
    }

    /// What this device knows of the others: id, name, when last seen, revoked; by name.
    public func remoteDevices() throws -> [(id: String, name: String, lastSeen: UInt64, revoked: Bool)] {
        try read { db in
            try db.cachedStatement(sql: "SELECT device_id, name, last_seen, revoked FROM remote_device ORDER BY name, device_id")
                .rows([]) { (id: $0.string(0), name: $0.string(1), lastSeen: $0.time(2), revoked: $0.bool(3)) }
        }
    }

    /// The other devices' names by id.
    public func remoteDeviceNames() throws -> [String: String] {
        Dictionary(try remoteDevices().map { ($0.id, $0.name) }, uniquingKeysWith: { $1 })
    }

    /// The devices whose apps registered `type`.
    public func devicesWithType(_ type: String) throws -> [String] {
        try read { db in
            try String.fetchAll(db.cachedStatement(sql: "SELECT device_id FROM remote_type WHERE type = ? ORDER BY device_id"),
                                arguments: [type])
        }
    }
}

/// Where another machine's record meets what this machine has, what happens: sync's rules
/// (BatonSync's `ConflictRules`, docs/guide.md, "The rules when machines disagree"). The store gives
/// the facts, in the transaction that applies the record, and does what the rules say.
public protocol SyncRules: Sendable {
    /// What another machine's version of an activity does here: it came from `device`,
    /// stamped `hlc`; `endedHere` is its tombstone (nil when it never ended here);
    /// `storedFrom` is the device of the copy stored here (nil: none; "": this machine's).
    func record(from device: String, at hlc: Int64, endedHere: EndedHere?, storedFrom: String?) -> RecordVerdict
    /// Whether this machine's activity ends at another machine's request made at `hlc`, given
    /// when this machine last changed it.
    func endsAtRequest(madeAt hlc: Int64, lastChangedHereAt: Int64) -> Bool
}

/// How an activity ended here, as its tombstone says: for good, or at this machine's request
/// to its writer, made at a time (which the writer may still overrule by a later change).
public enum EndedHere: Sendable, Equatable {
    case final
    case requested(Int64)
}

/// What a record of another machine's activity does here.
public enum RecordVerdict: Sendable, Equatable {
    /// Nothing.
    case ignore
    /// Stored as a new activity; with `reviving`, its tombstone goes first.
    case insert(reviving: Bool)
    /// Replaces the copy stored here; with `reviving`, its tombstone goes first.
    case update(reviving: Bool)

    var revives: Bool {
        switch self {
        case .ignore: false
        case .insert(let reviving), .update(let reviving): reviving
        }
    }
}

extension WriteTransaction {
    /// Turns sync on as `identity`: every type and activity of this machine goes into the
    /// outbox, so the other devices learn what was there before.
    public func startSync(as identity: Store.SyncIdentity) throws {
        try Store.forgetSync(in: db)
        try db.execute(sql: "INSERT INTO sync_state (id, device_id, user_name) VALUES (1, ?, ?)",
                       arguments: [identity.deviceID, identity.userName])
        let now = Time.encode(wallClock.now())
        try db.execute(sql: "INSERT INTO outbox (kind, key, at, hlc) SELECT 'type', type, ?, baton_hlc() FROM activity_type ORDER BY type",
                       arguments: [now])
        try db.execute(sql: """
            INSERT INTO outbox (kind, key, at, hlc) SELECT 'activity', id, ?, baton_hlc() FROM activity WHERE device_id = '' ORDER BY seq
            """, arguments: [now])
    }

    /// Turns sync off: the outbox, the cursors and everything other devices sent are forgotten.
    /// Returns the other devices' activities that ended with it.
    public func stopSync() throws -> [Ended] {
        activitiesChange()
        try Store.forgetSync(in: db)
        return try end(.everyRemote, .invalidated("sync was turned off on this machine"))
    }

    /// The next batch to send, in log order: the batch staged before if the server may not
    /// have it yet, else up to `limit` outbox rows staged now. Several changes of one
    /// activity or type become one record of how it is now, whose body `encode` makes; a
    /// record made when it was queued (a request, a copy of the clipboard) is sent as it is.
    public func stageOutbox(limit: Int, encode: @escaping (Store.SyncChange) throws -> [UInt8]) throws -> [Store.StagedRecord] {
        // A staged record made when it was queued stays where it was written (`outbox_body`, or
        // `body` for a row from before v22).
        let staged = try db.cachedStatement(sql: """
            SELECT log_seq, at, hlc, coalesce(o.record, b.body, o.body) FROM outbox o LEFT JOIN outbox_body b ON b.seq = o.seq
            WHERE log_seq IS NOT NULL ORDER BY log_seq
            """)
            .rows([]) { Store.StagedRecord(logSeq: $0.int64(0), at: $0.time(1), hlc: $0.int64(2), body: $0.bytes(3)) }
        if !staged.isEmpty { return staged }

        let rows = try db.cachedStatement(sql: """
            SELECT o.seq, kind, key, at, hlc, coalesce(b.body, o.body), e.expires_at FROM outbox o
            LEFT JOIN outbox_body b ON b.seq = o.seq LEFT JOIN outbox_expiry e ON e.seq = o.seq ORDER BY o.seq LIMIT ?
            """)
            .rows([limit]) { (seq: $0.int64(0), kind: $0.string(1), key: $0.string(2), at: $0.time(3), hlc: $0.int64(4), body: $0.bytes(5),
                              expiresAt: $0.optionalTime(6)) }
        guard let lastRow = rows.last else { return [] }
        // The last change of each key stands for all of them, with its time.
        var last: [String: Int64] = [:]
        for row in rows { last[row.kind + "\u{1F}" + row.key] = row.seq }
        var logSeq = try Int64.fetchOne(db.cachedStatement(sql: "SELECT last_log_seq FROM sync_state")) ?? 0
        var batch: [Store.StagedRecord] = []
        let now = wallClock.now()
        for row in rows where last[row.kind + "\u{1F}" + row.key] == row.seq {
            // A copy of the clipboard whose time is over is not sent at all.
            if row.kind == "clipboard", let expiresAt = row.expiresAt, expiresAt <= now { continue }
            logSeq += 1
            let body: [UInt8]
            if row.kind == "request" || row.kind == "clipboard" {
                // Its record as it was queued, left in place (`outbox_body`): a copy of the
                // clipboard (up to 8 MiB) is written into the database once.
                body = row.body
                try db.cachedStatement(sql: "UPDATE outbox SET log_seq = ? WHERE seq = ?").execute(arguments: [logSeq, row.seq])
            } else {
                body = try encode(try Store.change(kind: row.kind, key: row.key, in: db))
                try db.cachedStatement(sql: "UPDATE outbox SET log_seq = ?, record = ? WHERE seq = ?").execute(arguments: [logSeq, body, row.seq])
            }
            if row.kind == "clipboard", let expiresAt = row.expiresAt {
                // Removed from the log once its time is over (`expiredClipboardRecords`).
                try db.cachedStatement(sql: "INSERT OR REPLACE INTO clipboard_sent (log_seq, hlc, expires_at) VALUES (?, ?, ?)")
                    .execute(arguments: [logSeq, row.hlc, Time.encode(expiresAt)])
            }
            if row.kind == "activity" {
                // What a request of another device's to end it races against (`lastChange`).
                try db.cachedStatement(sql: "UPDATE activity SET hlc = ? WHERE id = ? AND device_id = ''").execute(arguments: [row.hlc, row.key])
            }
            batch.append(Store.StagedRecord(logSeq: logSeq, at: row.at, hlc: row.hlc, body: body))
        }
        try db.cachedStatement(sql: "DELETE FROM outbox WHERE seq <= ? AND log_seq IS NULL").execute(arguments: [lastRow.seq])
        try db.cachedStatement(sql: "DELETE FROM outbox_expiry WHERE seq <= ?").execute(arguments: [lastRow.seq])
        try db.cachedStatement(sql: "UPDATE sync_state SET last_log_seq = ?, last_hlc = max(last_hlc, ?)")
            .execute(arguments: [logSeq, batch.map(\.hlc).max() ?? 0])
        return batch
    }

    /// Puts this machine's whole state into the outbox again, for a log that drops what came
    /// before (compaction): each type, each activity as it is now — stamped with the time of
    /// its last change, so that a request made since still wins over it — then this machine's
    /// requests to end another machine's activity (`sync_lasting_request`), then the record
    /// `complete(ids, types)` makes of what it lists. Returns the last seq staged before it: the
    /// records up to it are all superseded once the snapshot has been sent.
    public func enqueueSnapshot(complete: (_ activities: [String], _ types: [String]) throws -> [UInt8]) throws -> Int64 {
        let now = Time.encode(wallClock.now())
        try db.execute(sql: "INSERT INTO outbox (kind, key, at, hlc) SELECT 'type', type, ?, baton_hlc() FROM activity_type ORDER BY type",
                       arguments: [now])
        // Its last change: sent (the activity's hlc) or still waiting here (the outbox's).
        try db.execute(sql: """
            INSERT INTO outbox (kind, key, at, hlc)
            SELECT 'activity', id, ?, CASE WHEN last > 0 THEN last ELSE baton_hlc() END FROM (
                SELECT id, seq, max(hlc, coalesce((SELECT max(o.hlc) FROM outbox o WHERE o.kind = 'activity' AND o.key = activity.id), 0)) AS last
                FROM activity WHERE device_id = '') ORDER BY seq
            """, arguments: [now])
        // This machine's requests to end another's activity, at the time they were made (which a
        // later change by the activity's writer still overrides): a machine away past the log the
        // snapshot replaces hears them too. Applied twice, a request ends nothing more.
        let today = wallClock.now()
        try db.execute(sql: "DELETE FROM sync_lasting_request WHERE at < ?",
                       arguments: [Time.encode(today > Store.lastingRequestLifetime ? today - Store.lastingRequestLifetime : 0)])
        for request in try db.cachedStatement(sql: "SELECT hlc, body FROM sync_lasting_request ORDER BY hlc").rows([], { ($0.int64(0), $0.bytes(1)) }) {
            try insertRecord(kind: "request", key: "lasting-\(request.0)", at: now, hlc: request.0, body: request.1)
        }
        let activities = try String.fetchAll(db.cachedStatement(sql: "SELECT id FROM activity WHERE device_id = '' ORDER BY seq"))
        let types = try String.fetchAll(db.cachedStatement(sql: "SELECT type FROM activity_type ORDER BY type"))
        try insertRequest(try complete(activities, types))
        return try Int64.fetchOne(db.cachedStatement(sql: "SELECT last_log_seq FROM sync_state")) ?? 0
    }

    /// Puts a record made now into the outbox (a request to another device), to send as it is.
    /// With a `request` made before, writes nothing (a client's retry asks once).
    public func enqueueRequest(_ body: [UInt8], request: Request? = nil) throws {
        _ = try once(request) {
            guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM sync_state")) ?? false else {
                throw BatonError(.syncUnavailable, "sync is off on this machine")
            }
            try insertRequest(body)
            return ""
        }
    }

    /// A copy of this machine's clipboard for the user's other machines: `body`, its record as
    /// sync made it (the content in it already sealed), sent as it is unless `expiresAt` has
    /// passed first. `SyncUnavailable` while sync is off.
    public func enqueueClipboard(_ body: [UInt8], id: String, expiresAt: UInt64) throws {
        guard try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM sync_state")) ?? false else {
            throw BatonError(.syncUnavailable, "sync is off on this machine")
        }
        let seq = try insertRecord(kind: "clipboard", key: id, at: Time.encode(wallClock.now()), body: body).seq
        try db.cachedStatement(sql: "INSERT INTO outbox_expiry (seq, expires_at) VALUES (?, ?)").execute(arguments: [seq, Time.encode(expiresAt)])
    }

    /// An outbox row carrying a request's record, sent as it is; returns its time.
    @discardableResult
    private func insertRequest(_ body: [UInt8]) throws -> Int64 {
        let now = wallClock.now()
        return try insertRecord(kind: "request", key: Identifier.make(at: now), at: Time.encode(now), body: body).hlc
    }

    /// An outbox row carrying `body`, a record made now and sent as it is, stamped with `hlc`
    /// (nil: the clock's next time); returns the row's seq and time.
    @discardableResult
    private func insertRecord(kind: String, key: String, at: Int64, hlc: Int64? = nil, body: [UInt8]) throws -> (seq: Int64, hlc: Int64) {
        store.outbox.raise()
        let row = try db.cachedStatement(sql: "INSERT INTO outbox (kind, key, at, hlc) VALUES (?, ?, ?, coalesce(?, baton_hlc())) RETURNING seq, hlc")
            .rows([kind, key, at, hlc]) { (seq: $0.int64(0), hlc: $0.int64(1)) }.first ?? (0, 0)
        try db.cachedStatement(sql: "INSERT INTO outbox_body (seq, body) VALUES (?, ?)").execute(arguments: [row.seq, body])
        return row
    }

    /// Invalidates another device's activity here and, in the same transaction, puts the
    /// request that its device invalidate it too (`body`) into the outbox. Returns what
    /// ended: nothing when it is not here (any more).
    public func invalidateRemote(id: String, request body: [UInt8]) throws -> [Ended] {
        activitiesChange()
        let removed = try end(.remote(id, from: nil), .invalidated("invalidated on this machine"), history: true)
        guard !removed.isEmpty else { return [] }
        // Until its writer says otherwise: a change it made later than this request wins.
        let hlc = try insertRequest(body)
        try db.cachedStatement(sql: "UPDATE tombstone SET requested_hlc = ? WHERE activity_id = ?").execute(arguments: [hlc, id])
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO sync_lasting_request (hlc, at, body) VALUES (?, ?, ?)")
            .execute(arguments: [hlc, Time.encode(wallClock.now()), body])
        return removed
    }

    /// The copy of the clipboard at `logSeq` is out of this device's log (or cannot be taken out).
    public func clipboardRecordRemoved(logSeq: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM clipboard_sent WHERE log_seq = ?").execute(arguments: [logSeq])
    }

    /// The server has committed the staged records up to `logSeq`: they leave the outbox.
    public func sent(upTo logSeq: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM outbox WHERE log_seq IS NOT NULL AND log_seq <= ?").execute(arguments: [logSeq])
    }

    /// Applies records of `device`'s log in order and moves its cursor to the last one's seq,
    /// in one transaction. Where a record meets what this machine has, `rules` decide.
    public func applyRemote(device: String, records: [Store.RemoteRecord], rules: some SyncRules) throws -> Store.Applied {
        guard let lastSeq = records.last?.seq else { return Store.Applied() }
        activitiesChange()
        var applied = Store.Applied()
        for record in records {
            clock.observe(record.hlc)
            if let change = record.change { try apply(change, at: record.hlc, from: device, rules: rules, into: &applied) }
        }
        try db.cachedStatement(sql: """
            INSERT INTO sync_cursor (device_id, seq) VALUES (?1, ?2) ON CONFLICT(device_id) DO UPDATE SET seq = ?2
            """).execute(arguments: [device, lastSeq])
        // When it last wrote: its newest record's time (an HLC's milliseconds; 0 for a record skipped).
        if let newest = records.map(\.hlc).max(), newest > 0 {
            try db.cachedStatement(sql: "UPDATE remote_device SET last_seen = max(last_seen, ?) WHERE device_id = ?")
                .execute(arguments: [Time.encode(UInt64(newest >> 16) * 1000), device])
        }
        return applied
    }

    /// Another device as a person knows it: its name, else its id.
    private func deviceName(_ device: String) throws -> String {
        try String.fetchOne(db.cachedStatement(sql: "SELECT name FROM remote_device WHERE device_id = ?"), arguments: [device]) ?? device
    }

    private func apply(_ change: Store.RemoteChange, at hlc: Int64, from device: String, rules: some SyncRules,
                       into applied: inout Store.Applied) throws {
        switch change {
        case .activity(var activity):
            activity.deviceID = device
            activity.sceneID = nil  // scenes stay on their machine
            let ended = try db.cachedStatement(sql: "SELECT requested_hlc FROM tombstone WHERE activity_id = ?")
                .row([activity.id]) { row in row.optionalInt64(0).map(EndedHere.requested) ?? .final }
            let owner = try String.fetchOne(db.cachedStatement(sql: "SELECT device_id FROM activity WHERE id = ?"), arguments: [activity.id])
            let verdict = rules.record(from: device, at: hlc, endedHere: ended, storedFrom: owner)
            if verdict.revives {
                try db.cachedStatement(sql: "DELETE FROM tombstone WHERE activity_id = ?").execute(arguments: [activity.id])
            }
            switch verdict {
            case .ignore:
                return
            case .insert:
                try db.cachedStatement(sql: ActivityRow.insertSQL).execute(arguments: ActivityRow.arguments(activity))
                applied.advertised.append(activity.id)
            case .update:
                try db.cachedStatement(sql: ActivityRow.updateSQL).execute(arguments: ActivityRow.arguments(activity))
                applied.updated.append(activity.id)
            }
        case .complete(let activities, let types):
            let kept = String(decoding: try JSONEncoder().encode(activities), as: UTF8.self)
            applied.ended += try end(.remote(of: device, except: kept), .invalidated("it ended on device \(device) while this machine was not reading its log"),
                                     history: true)
            try db.cachedStatement(sql: "DELETE FROM remote_type WHERE device_id = ?1 AND type NOT IN (SELECT value FROM json_each(?2))")
                .execute(arguments: [device, String(decoding: try JSONEncoder().encode(types), as: UTF8.self)])
        case .activityEnded(let id, let state, let reason):
            let how: Ending = switch state {
            case "expired": .expired(reason)
            case "evicted": .evicted(reason)
            default: .invalidated(reason)
            }
            applied.ended += try end(.remote(id, from: device), how, history: true)
            // Its writer ended it: final now, whatever this machine asked (`EndedHere.final`).
            try db.cachedStatement(sql: "UPDATE tombstone SET requested_hlc = NULL WHERE activity_id = ?").execute(arguments: [id])
        case .type(let name, let appID):
            try db.cachedStatement(sql: """
                INSERT INTO remote_type (device_id, type, app_id) VALUES (?1, ?2, ?3)
                ON CONFLICT(device_id, type) DO UPDATE SET app_id = ?3
                """).execute(arguments: [device, name, appID])
        case .typeRemoved(let name):
            try db.cachedStatement(sql: "DELETE FROM remote_type WHERE device_id = ? AND type = ?").execute(arguments: [device, name])
        case .continueHere(let activityID):
            // The requester's activity came before its request in its log; one of a third
            // machine's that has not arrived yet is refused, with a reason Explain gives.
            guard let activity = try db.cachedStatement(sql: ActivityRow.selectSQL + " WHERE id = ?").row([activityID], ActivityRow.decode) else {
                try noteOutcome(activityID, scene: "", state: "refused",
                                     error: "asked by device \(device) to continue it here before this machine had it")
                return
            }
            let now = wallClock.now()
            let scene = Scene(id: Identifier.make(at: now), appID: activity.appID, title: activity.title, activityID: activity.id,
                              createdAt: now, lastActiveAt: now, state: .pending)
            try db.cachedStatement(sql: SceneRow.insertSQL).execute(arguments: SceneRow.arguments(scene))
            try db.cachedStatement(sql: ContinuationRow.upsertSQL).execute(arguments: ContinuationRow.arguments(
                PendingContinuation(sceneID: scene.id, activityID: activityID, createdScene: true, requestedAt: now)))
            try noteOutcome(activityID, scene: scene.id, state: "pending")
            applied.pendingScenes.append(scene.id)
        case .invalidateHere(let activityID):
            guard rules.endsAtRequest(madeAt: hlc, lastChangedHereAt: try Store.lastChange(of: activityID, in: db)) else {
                applied.overruled.append(.init(activityID: activityID, device: device))
                return
            }
            // Final then: no later record of the activity brings it back.
            applied.ended += try end(.local(activityID), .invalidated("invalidated on device \(try deviceName(device))"), history: true)
        case .continuedThere(let activityID):
            try noteOutcome(activityID, scene: "", state: "ready", error: "continued on device \(device)")
            applied.continuedThere.append(.init(activityID: activityID, device: device))
        case .continuedElsewhere(let activityID):
            applied.continuedElsewhere.append(activityID)
        case .clipboard(var copy):
            copy.device = device
            applied.clipboard.append(copy)
        }
    }

    /// Remembers what another device says of itself (its name, when it was last seen).
    public func noteRemoteDevice(id: String, name: String, lastSeen: UInt64, revoked: Bool) throws {
        try db.cachedStatement(sql: """
            INSERT INTO remote_device (device_id, name, last_seen, revoked) VALUES (?1, ?2, ?3, ?4)
            ON CONFLICT(device_id) DO UPDATE SET name = ?2, last_seen = ?3, revoked = ?4
            """).execute(arguments: [id, name, Time.encode(lastSeen), revoked])
    }
}
