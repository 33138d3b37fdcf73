import BatonCore

/// One write transaction, open on the writer thread: all a writer may do to the store.
///
/// `Store.writing` (awaited, from any thread) and `Store.write` (waiting) begin one, hand it
/// to the writer's closure, and commit when the closure returns; a closure that throws
/// leaves nothing written. Its methods are the store's writes, each inside this one
/// transaction, so a check and the write it guards (a registration that may not be taken,
/// a request made before) see the same rows, and several writes commit together or not at
/// all. What it reads, it reads inside the transaction; the store's own reads answer from
/// the shared snapshot, which sees this transaction once it has committed.
///
/// It cannot leave the closure's thread: it is not `Sendable`, and nothing holds it after
/// the closure returns.
public struct WriteTransaction {
    let store: Store
    let db: SQLiteConnection

    /// The store's limits, which a write checks what it stores against.
    public var limits: Limits { store.limits }
    var wallClock: any DaemonClock { store.wallClock }
    var clock: HybridClock { store.clock }

    /// The daemon's time now (µs since the epoch), as the store stamps it.
    public var now: UInt64 { store.wallClock.now() }

    /// This write may change the search indexes: housekeeping merges their new segments.
    func activitiesChange() {
        store.searchIndexChanged.store(true, ordering: .relaxed)
    }

    /// This write changes the registrations or the blocked apps: the store reads them again
    /// once the transaction has ended.
    func registrationsChange() {
        store.registrationsChanged.store(true, ordering: .relaxed)
    }

    /// Runs `updates` unless `request` was made before, and records its result with it, in
    /// this transaction. Returns the result and whether this call was a repeat.
    func once(_ request: Request?, _ updates: () throws -> String) throws -> (result: String, repeated: Bool) {
        guard let request else { return (try updates(), false) }
        if let first = try Store.recorded(request, in: db) { return (first, true) }
        let result = try updates()
        try record(request, result: result)
        return (result, false)
    }

    // MARK: What a write checks before it writes, read inside it

    /// The result the first call with `request` gave, if it committed (and is still remembered).
    public func result(of request: Request) throws -> String? {
        try Store.recorded(request, in: db)
    }

    /// The activity with `id`, expired or not.
    public func storedActivity(id: String) throws -> Activity? {
        try db.cachedStatement(sql: Store.activityByID).row([id], ActivityRow.decode)
    }

    /// The registration of `type`.
    public func activityType(_ type: String) throws -> ActivityType? {
        try db.cachedStatement(sql: ActivityTypeRow.selectSQL + " WHERE type = ?").row([type], ActivityTypeRow.decode)
    }

    /// The scene with `id`.
    public func scene(id: String) throws -> Scene? {
        try db.cachedStatement(sql: Store.sceneByID).row([id], SceneRow.decode)
    }

    // MARK: Requests

    /// Remembers `request`'s result, so a repeat is answered without doing it again: inside
    /// the write it names, or on its own for a call that stored nothing else (a web page opened).
    public func record(_ request: Request, result: String) throws {
        try db.cachedStatement(sql: "INSERT INTO request (request_id, method, result, created_at) VALUES (?, ?, ?, ?)")
            .execute(arguments: [request.id, request.method, result, Time.encode(now)])
    }
}

/// What a change to an activity checks against — its type's registration, a scene it names,
/// the limits — read from the store's snapshot (a change kept in memory while paused) or
/// inside the write transaction that stores it.
public protocol ChangeLookups {
    var limits: Limits { get }
    func activityType(_ type: String) throws -> ActivityType?
    func scene(id: String) throws -> Scene?
}

extension Store: ChangeLookups {}
extension WriteTransaction: ChangeLookups {}
