import BatonCore
import CSQLite
import Glibc
import Synchronization

/// Baton's persistent state in one SQLite database (WAL), through libsqlite3 (`SQLiteConnection`).
///
/// Concurrency (docs/DESIGN.md, "The process"): every write runs on one writer thread, in
/// the order the writes were queued, on the one writer connection (`writer`); reads run on
/// the shared read-only connection (`reader`), which in WAL mode never waits for the
/// writer, and long ones on a connection of their own (`readAlone`). Reads share one read
/// transaction (a snapshot) that each write ends before it begins and after it commits, so
/// a read that starts after a write returned sees it.
///
/// Writes go through a `WriteTransaction` (`writing`, `write`), which returns only after
/// its transaction has committed, so a caller that replies afterwards never acknowledges a
/// write that `kill -9` could lose. A store must be the only writer of its file: its reads
/// see another connection's commits only after the store's own next write. SQLite failures the environment explains (a full
/// disk, a lock, I/O, damage) are thrown as the named `BatonError`s (`StorageFailure`).
public final class Store: Sendable {
    /// Used on the writer thread only.
    private let writer: SerializedConnection
    private let reader: SerializedConnection
    private let writerThread: WriterThread
    private let checkpointer: Checkpointer
    /// Set by every write that may change the search indexes (and so add FTS5 segments),
    /// cleared when `tidySearchIndex` has merged them.
    let searchIndexChanged = Atomic(true)
    /// The registrations by type, read once and forgotten after each transaction that
    /// changed them (only this store writes them); nil until first needed.
    private let types = Mutex<[String: ActivityType]?>(nil)
    /// The apps the user blocked, read once and forgotten after each change (`isBlocked`).
    let blocked = Mutex<Set<String>?>(nil)
    /// Set by a write that changed the registrations or the blocked apps: both are read
    /// again after its transaction ends.
    let registrationsChanged = Atomic(false)
    /// Set when the write under way added to the history (`end`): its size and age are
    /// checked before it commits.
    let historyAdded = Atomic(false)
    /// Raised by the outbox triggers in a write, and told after its commit.
    let outbox = OutboxBell()
    /// Stamps this machine's changes while sync is on; see `HybridClock`.
    public let clock = HybridClock()
    /// The daemon's wall clock (`DaemonClock`): every time the store stamps or compares.
    public let wallClock: any DaemonClock
    /// Set once SQLite has reported the file damaged: no further write goes into it.
    private let damaged = Atomic(false)
    private let closed = Atomic(false)
    /// True while a write transaction is open on the writer thread.
    private let transactionOpen = Atomic(false)
    /// When the last write committed (`Monotonic.now`); 0 once the WAL was emptied after it.
    private let lastCommit = Atomic<UInt64>(0)
    public let limits: Limits
    /// The database file.
    public let path: String

    /// How long a write waits for a lock another process holds before it answers `StorageUnavailable`.
    public static let lockTimeout: Double = 3

    /// Opens (creating if needed) the database at `path`, applying migrations.
    ///
    /// The file and its `-wal` and `-shm` are made 0600 whatever the umask or their earlier
    /// mode. Its directory must already be safe; see `prepareDirectory`.
    public init(path: String, limits: Limits = .default, clock: any DaemonClock = SystemClock()) throws {
        wallClock = clock
        // Before any connection of this process opens them: closing a descriptor of a file
        // drops every POSIX lock the process holds on it, SQLite's lock on the WAL index
        // included, and another program could then truncate the index under our mapping.
        for suffix in ["", "-wal", "-shm"] { try Self.makePrivate(path + suffix) }
        let writerThread = WriterThread(lockTimeout: Self.lockTimeout)
        // Made before the writer, so the writer can hand its checkpoints to it.
        let checkpointer = Checkpointer(path: path)
        // Opening waits for a lock another program holds as a queued write does, then gives up.
        writerThread.lockDeadline.store(Monotonic.now + writerThread.lockTimeout, ordering: .relaxed)
        do {
            let writer = try SQLiteConnection(path: path, wal: true, busy: .handler { writerThread.shouldRetryLock() })
            // Deleted data is overwritten, not left in free pages.
            try writer.execute(sql: "PRAGMA secure_delete = ON")
            // Statement journals in memory: a statement that fires triggers inside a transaction
            // keeps one, and past 64 KiB it went to a temporary file, written page by page: most of
            // what an Advertise at the app's quota wrote (Benchmarks/README, "At the quota").
            try writer.execute(sql: "PRAGMA temp_store = MEMORY")
            try writer.execute(sql: "PRAGMA cache_size = -\(Self.cacheKiB)")
            checkpointer.attach(to: writer.handle)
            try Schema.migrator.migrate(writer)
            try Self.keepOutbox(on: writer, bell: self.outbox, clock: self.clock, wallClock: self.wallClock)
            self.writer = SerializedConnection(writer, label: "baton.writer")

            let reader = try SQLiteConnection(path: path, readOnly: true, busy: .timeout(Self.lockTimeout))
            try reader.execute(sql: "PRAGMA cache_size = -\(Self.cacheKiB)")
            self.reader = SerializedConnection(reader, label: "baton.reader")
        } catch let error as SQLiteError {
            throw StorageFailure.named(error, path: path)
        }
        self.checkpointer = checkpointer
        self.writerThread = writerThread
        self.limits = limits
        self.path = path
    }

    /// Returns once the checkpoints that commits have asked for so far have run (for tests).
    func waitForCheckpoints() {
        checkpointer.waitUntilIdle()
    }

    /// Each connection's SQLite page cache, in KiB: the data lives on disk, not in memory.
    static let cacheKiB = 256

    /// Empties the writer's and the reader's page caches: SQLite reads the pages again, from
    /// the kernel's cache, when a call next needs them. For an idle batond, which need not
    /// keep what its start-up and its last calls read (Benchmarks/README, "Idle memory").
    /// The writer's on the writer thread, after the writes queued before.
    public func releaseCaches() async throws {
        try await writerThread.run { [writer] in writer.use { _ = sqlite3_db_release_memory($0.handle) } }
        reader.use { _ = sqlite3_db_release_memory($0.handle) }
    }

    /// The bytes both connections' page caches hold.
    func cachedBytes() throws -> Int {
        func used(_ db: SQLiteConnection) -> Int {
            var current: Int32 = 0
            var highest: Int32 = 0
            sqlite3_db_status(db.handle, SQLITE_DBSTATUS_CACHE_USED, &current, &highest, 0)
            return Int(current)
        }
        return try writerThread.runAndWait { writer.use { used($0) } } + reader.use { used($0) }
    }

    /// Checkpoints the WAL into the database file and closes every connection.
    /// Nothing may use the store afterwards.
    public func close() throws {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        forgetTypes()
        endSnapshot()
        reader.use { $0.close() }
        checkpointer.close()
        try writerThread.runAndWait {
            try writer.use { writer in
                defer { writer.close() }
                if !damaged.load(ordering: .relaxed) {
                    do throws(SQLiteError) {
                        try writer.checkpointTruncating()
                    } catch {
                        throw StorageFailure.named(error, path: path)
                    }
                }
            }
        }
    }

    /// Creates `path` if needed and makes it 0600, refusing a symbolic link.
    static func makePrivate(_ path: String) throws {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw StoreError.cannotOpen(path, errno: errno) }
        defer { Glibc.close(fd) }
        guard fchmod(fd, 0o600) == 0 else { throw StoreError.cannotOpen(path, errno: errno) }
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
        try checkDirectory(directory)
    }

    /// Checks that `directory` is a real directory of this user that no one else can write to
    /// or read. (Another user who can write there could swap the database for their own.)
    public static func checkDirectory(_ directory: String) throws {
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

    /// Checks that no one but its owner (this user, or root) can write to `directory`, where
    /// someone else could replace the database or its `-wal` with their own.
    public static func checkWritableOnlyByOwner(_ directory: String) throws {
        var info = stat()
        guard stat(directory, &info) == 0 else { throw StoreError.cannotCreateDirectory(directory, errno: errno) }
        guard info.st_uid == getuid() || info.st_uid == 0, info.st_mode & 0o022 == 0 else {
            throw StoreError.unsafeDirectory(directory, """
                other users can write to it (mode \(String(info.st_mode & 0o777, radix: 8)), owner \(info.st_uid)) and could replace \
                the database; use a directory only you can write to (mkdir -m 700 DIR), or: chmod go-w \(directory)
                """)
        }
    }

    // MARK: Reading and writing

    /// One read on the reader connection, inside the shared snapshot (begun here if none is open).
    func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        guard !closed.load(ordering: .relaxed) else { throw StoreError.closed }
        do {
            return try reader.use { db in
                if !db.isInsideTransaction { try db.cachedStatement(sql: "BEGIN").execute() }
                return try body(db)
            }
        } catch let error as SQLiteError {
            throw noteDamage(StorageFailure.named(error, path: path))
        }
    }

    /// One long read on a read-only connection of its own, opened for it and closed after:
    /// its snapshot is its own, so the calls answered meanwhile on the shared reader never
    /// wait for it (an export of a full store reads for hundreds of milliseconds).
    /// With a `budget`, a read still running past it is interrupted: `ReadInterrupted`.
    func readAlone<T>(budget: Duration? = nil, _ body: (SQLiteConnection) throws -> T) throws -> T {
        guard !closed.load(ordering: .relaxed) else { throw StoreError.closed }
        do {
            let connection = try SQLiteConnection(path: path, readOnly: true, busy: .timeout(Self.lockTimeout))
            defer { connection.close() }
            if let budget {
                connection.interrupt(after: Monotonic.now + UInt64(budget.components.seconds) * 1_000_000_000
                                         + UInt64(budget.components.attoseconds / 1_000_000_000))
            }
            try connection.execute(sql: "BEGIN")
            defer { try? connection.execute(sql: "COMMIT") }
            return try body(connection)
        } catch let error as SQLiteError where error.code == SQLITE_INTERRUPT {
            throw ReadInterrupted()
        } catch let error as SQLiteError {
            throw noteDamage(StorageFailure.named(error, path: path))
        }
    }

    /// How long the full check of the file (`checkIntegrity`) may run before it gives up.
    public static let integrityCheckBudget: Duration = .seconds(60)

    /// SQLite's `quick_check` over the whole file, on a connection of its own, for at most
    /// `integrityCheckBudget`: nil when the file is sound (or the budget ran out first), else
    /// what was found. Damage found marks the file damaged: no write goes into it, and the
    /// next start moves it aside. Reads the whole file: run it while batond is idle.
    public func checkIntegrity() throws -> String? {
        let found: String?
        do {
            found = try readAlone(budget: Self.integrityCheckBudget) { db -> String? in
                let rows = try String.fetchAll(db, sql: "PRAGMA quick_check(5)")
                return rows == ["ok"] ? nil : "quick_check found: " + rows.joined(separator: "; ")
            }
        } catch is ReadInterrupted {
            return nil
        } catch let error as BatonError where error.code == .storageCorrupt {
            return error.message
        }
        if found != nil {
            damaged.store(true, ordering: .relaxed)
            StorageFailure.markDamaged(path: path)
        }
        return found
    }

    /// Ends the reads' shared snapshot, if one is open: the next read sees every commit made before it.
    private func endSnapshot() {
        reader.use { db in
            guard db.isInsideTransaction else { return }
            // No statement is left running (each read finishes or resets its own), so COMMIT
            // cannot fail for that; should it fail all the same, ROLLBACK ends it too.
            do {
                try db.cachedStatement(sql: "COMMIT").execute()
            } catch {
                try? db.execute(sql: "ROLLBACK")
            }
        }
    }

    /// Runs `work` in one write transaction on the writer thread, after every write queued
    /// before it, and returns its result once committed: the way to write from a thread that
    /// must not wait for the disk. A `work` that throws leaves nothing written.
    @discardableResult
    public func writing<T: Sendable>(_ work: @escaping @Sendable (WriteTransaction) throws -> T) async throws -> T {
        try await writerThread.run { try self.write(work) }
    }

    /// Runs `work` in one write transaction and waits for its commit (tests, tools): from
    /// the writer thread at once, from any other after the writes queued before it.
    @discardableResult
    public func write<T>(_ work: (WriteTransaction) throws -> T) throws -> T {
        try inTransaction { db in try work(WriteTransaction(store: self, db: db)) }
    }

    /// Housekeeping's round of the store, on the writer thread after the writes queued before
    /// it: merges the search indexes' new segments, forgets request ids, tombstones and
    /// outcomes past their lifetimes, trims the history to its age, and empties the WAL once
    /// no write has committed for `idle`. Each part writes only when something is due.
    /// Returns true when it emptied the WAL: the store has become idle.
    public func tidy(truncatingWALAfter idle: Duration) async throws -> Bool {
        try await writerThread.run { [self] in
            try tidySearchIndex()
            let now = wallClock.now()
            try forgetRequests(before: now - Self.requestLifetime)
            try trimHistory(now: now)
            try forgetExplanations(before: now - Self.explanationLifetime)
            return try truncateWALIfIdle(after: idle)
        }
    }

    /// Queues `work` on the writer thread without waiting for it (the commit queue's batches).
    public func startWriting(_ work: @escaping @Sendable () -> Void) {
        writerThread.start(work)
    }

    /// Runs `work` (on the writer thread) with its locks' deadline counted from `queuedAt`
    /// (`Store.now`) rather than from when it was queued: for a batch gathered over time.
    public func withLockDeadline<T>(queuedAt: UInt64, _ work: () throws -> T) rethrows -> T {
        try writerThread.withDeadline(queuedAt + writerThread.lockTimeout, work)
    }

    /// The clock `withLockDeadline` counts from.
    public static var now: UInt64 { Monotonic.now }

    /// One write transaction (`BEGIN IMMEDIATE`) on the writer connection, on the writer
    /// thread: committed before this returns, rolled back if `updates` or the commit
    /// throws. BEGIN and COMMIT are cached statements, prepared once.
    ///
    /// The reads' snapshot ends before the transaction (so it cannot keep the WAL from
    /// starting over) and after it (so the next read sees the commit).
    func inTransaction<T>(_ updates: (SQLiteConnection) throws -> T) throws -> T {
        guard !closed.load(ordering: .relaxed) else { throw StoreError.closed }
        guard !damaged.load(ordering: .relaxed) else { throw StorageFailure.damaged(path: path) }
        return try writerThread.runAndWait { try transaction(updates) }
    }

    private func transaction<T>(_ updates: (SQLiteConnection) throws -> T) throws -> T {
        endSnapshot()
        defer {
            // After the commit or the rollback: the next read of them finds what is stored.
            if registrationsChanged.exchange(false, ordering: .relaxed) { forgetTypes(); blocked.withLock { $0 = nil } }
        }
        let result = try committed(updates)
        // Only after the snapshot ended: a reader the bell wakes must not find one older than
        // the commit, or the sync service reads the outbox as empty and leaves the change there.
        outbox.ringIfRaised()
        return result
    }

    /// Runs `updates` in one transaction and ends the reads' snapshot after it, committed or not.
    private func committed<T>(_ updates: (SQLiteConnection) throws -> T) throws -> T {
        // A write inside a write would wait for itself on the writer connection's queue.
        precondition(!transactionOpen.load(ordering: .relaxed), "a write began inside another's transaction: use its WriteTransaction")
        transactionOpen.store(true, ordering: .relaxed)
        defer {
            transactionOpen.store(false, ordering: .relaxed)
            endSnapshot()
        }
        do {
            return try writer.use { db in
                try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
                db.holdsTransaction = true
                defer { db.holdsTransaction = false }
                do {
                    let changesBefore = db.totalChangesCount
                    let result = try updates(db)
                    if historyAdded.exchange(false, ordering: .relaxed) {
                        try Self.trimHistory(db, now: wallClock.now(), limits: limits)
                    }
                    try db.cachedStatement(sql: "COMMIT").execute()
                    // One that changed nothing (a check that found nothing due) leaves the store idle.
                    if db.totalChangesCount != changesBefore { lastCommit.store(Monotonic.now, ordering: .relaxed) }
                    return result
                } catch {
                    outbox.lower()
                    historyAdded.store(false, ordering: .relaxed)
                    // SQLite may have rolled back already (a full disk, for one): only autocommit tells.
                    if db.isInsideTransaction { try? db.cachedStatement(sql: "ROLLBACK").execute() }
                    throw error
                }
            }
        } catch let error as SQLiteError {
            throw noteDamage(StorageFailure.named(error, path: path))
        }
    }

    /// Empties the WAL into the database file and truncates it once no write has committed
    /// for `idle`, so that what was deleted (zeroed in the database by `secure_delete`) no
    /// longer lingers in old WAL frames. Returns true when it truncated.
    @discardableResult
    public func truncateWALIfIdle(after idle: Duration) throws -> Bool {
        try writerThread.runAndWait {
            // Nothing committed since the last truncation: nothing to empty.
            guard lastCommit.load(ordering: .relaxed) != 0, hasBeenIdle(for: idle), !damaged.load(ordering: .relaxed) else { return false }
            // A reader's open snapshot would keep the WAL from starting over.
            endSnapshot()
            do throws(SQLiteError) {
                try writer.use { db throws(SQLiteError) in try db.checkpointTruncating() }
            } catch where error.code == SQLITE_BUSY {
                return false  // a read began meanwhile: the next round tries again
            } catch {
                throw noteDamage(StorageFailure.named(error, path: path))
            }
            lastCommit.store(0, ordering: .relaxed)
            return true
        }
    }

    /// True when no write has committed for `idle` (or none since the store opened).
    public func hasBeenIdle(for idle: Duration) -> Bool {
        let last = lastCommit.load(ordering: .relaxed)
        let idleNanoseconds = UInt64(idle.components.seconds) * 1_000_000_000 + UInt64(idle.components.attoseconds / 1_000_000_000)
        return last == 0 || Monotonic.now - last >= idleNanoseconds
    }

    /// Remembers that the file is damaged when `error` says so, and returns it.
    private func noteDamage(_ error: any Error) -> any Error {
        if let named = error as? BatonError, named.code == .storageCorrupt {
            damaged.store(true, ordering: .relaxed)
            StorageFailure.markDamaged(path: path)
        }
        return error
    }

    // MARK: Activity types

    /// The registration of `type`, from memory: Advertise and Continue look their type up on every call.
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
    func forgetTypes() {
        types.withLock { $0 = nil }
    }

    public func activityTypes() throws -> [ActivityType] {
        try read { db in
            try db.cachedStatement(sql: ActivityTypeRow.selectSQL + " ORDER BY type").rows([], ActivityTypeRow.decode)
        }
    }

    /// Counts for status reports.
    public func counts() throws -> (types: Int, activities: Int, scenes: Int) {
        try read { db in
            (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM activity_type") ?? 0,
             try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM activity") ?? 0,
             try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM scene") ?? 0)
        }
    }
}

/// A read on a connection of its own ran past its budget and was interrupted.
struct ReadInterrupted: Error {}

/// Why the database could not be opened, with what to do about it.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    case cannotOpen(String, errno: Int32)
    case cannotCreateDirectory(String, errno: Int32)
    case unsafeDirectory(String, String)
    /// The store was closed.
    case closed

    public var description: String {
        switch self {
        case .cannotOpen(let path, let code) where [EROFS, EACCES, EPERM, ENOSPC, EDQUOT].contains(code):
            "cannot open the database \(path): \(String(cString: strerror(code))). batond writes its state there: "
                + "make the directory writable (or free space on its disk), or start batond with --database on another disk"
        case .cannotOpen(let path, let code):
            "cannot open the database \(path): \(String(cString: strerror(code)))"
        case .cannotCreateDirectory(let path, let code):
            "cannot create the state directory \(path): \(String(cString: strerror(code)))"
        case .unsafeDirectory(let path, let reason):
            "refusing to use \(path) for Baton's database: \(reason)"
        case .closed:
            "the database is closed"
        }
    }
}

/// Tells the sync service, after a commit, that the write added outbox rows.
final class OutboxBell: Sendable {
    private let raised = Atomic(false)
    /// In a class, not as a closure: a function type stored in a Mutex is wrapped in two more
    /// reabstraction thunks at every `withLock` (its inout value is converted in and out), so
    /// each ring would walk a longer chain of them, without bound.
    final class Listener: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let listener = Mutex<Listener?>(nil)

    /// Calls the listener, if there is one.
    func ring() { listener.withLock { $0 }?.body() }

    /// Called by the outbox triggers, inside the transaction.
    func raise() { raised.store(true, ordering: .relaxed) }
    /// After a rollback: nothing was added.
    func lower() { raised.store(false, ordering: .relaxed) }
    /// After a commit.
    func ringIfRaised() {
        if raised.exchange(false, ordering: .relaxed) { ring() }
    }
}

extension WriteTransaction {
    /// Adds or replaces a registration.
    public func register(_ type: ActivityType) throws {
        registrationsChange()
        try db.cachedStatement(sql: ActivityTypeRow.upsertSQL).execute(arguments: ActivityTypeRow.arguments(type))
    }

    /// Removes a registration and, with it, the type's activities on this machine. Returns
    /// what ended; nil when the type was not registered.
    public func unregister(type: String) throws -> [Ended]? {
        activitiesChange()
        registrationsChange()
        let ended = try end(.type(type), .invalidated("its type \(type) was unregistered"))
        try db.cachedStatement(sql: "DELETE FROM activity_type WHERE type = ?").execute(arguments: [type])
        return db.changesCount == 0 ? nil : ended
    }
}
