import CSQLite
import Dispatch
import Glibc

/// One connection to an SQLite database through Debian's libsqlite3: the store's whole use of SQLite.
///
/// It sets at open what the store relies on and SQLite leaves off (GRDB set these for us until
/// wave 5, FIELD-NOTES "Off GRDB"): extended result codes, foreign keys, no double-quoted string
/// literals, and a first read of the schema, so a file that is not a database or is damaged fails
/// here rather than at the first call. A writer also gets WAL with `synchronous=NORMAL`, read back:
/// Debian builds SQLite with FULL as WAL's default, an fsync at every commit.
///
/// Not `Sendable`, and SQLite is opened without its own mutexes: each connection is used by one
/// thread at a time (the writer on the writer thread, the reader behind the store's lock).
/// Statements are prepared once and kept (`cachedStatement`); see `Statement`.
final class SQLiteConnection {
    let handle: OpaquePointer
    let path: String
    private var statements: [String: Statement] = [:]
    /// What SQLite calls back into (the busy handler, functions, the progress handler), kept
    /// alive as long as the connection.
    private var callbacks: [AnyObject] = []
    private var closed = false
    /// Set by the connection's owner while it holds a transaction open: a statement then refuses
    /// to run once SQLite has rolled the transaction back by itself (after FULL, IOERR, NOMEM,
    /// BUSY or INTERRUPT), where it would otherwise run and commit on its own, outside any
    /// transaction. (`isInsideTransaction` is what SQLite says; this is what the owner expects.)
    var holdsTransaction = false

    /// How a connection waits for a lock another connection holds.
    enum Busy {
        /// SQLite's own wait, up to this many seconds.
        case timeout(Double)
        /// Asked each time the lock is found held: true to try again (after sleeping), false to give up.
        case handler(() -> Bool)
    }

    /// Opens `path` (created if missing, unless `readOnly`). `wal`: put the file in WAL mode with
    /// `synchronous=NORMAL`; only the writer does (a read-only connection cannot).
    init(path: String, readOnly: Bool = false, wal: Bool = false, busy: Busy) throws(SQLiteError) {
        var opened: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let code = sqlite3_open_v2(path, &opened, flags, nil)
        guard code == SQLITE_OK, let opened else {
            let error = SQLiteError(code, connection: opened)
            sqlite3_close_v2(opened)
            throw error
        }
        handle = opened
        self.path = path
        do throws(SQLiteError) {
            sqlite3_extended_result_codes(handle, 1)
            // A double-quoted word is an identifier, never silently a string when no column has its name.
            baton_sqlite3_db_config_flag(handle, SQLITE_DBCONFIG_DQS_DML, 0)
            baton_sqlite3_db_config_flag(handle, SQLITE_DBCONFIG_DQS_DDL, 0)
            switch busy {
            case .timeout(let seconds): sqlite3_busy_timeout(handle, Int32(seconds * 1000))
            case .handler(let retry): setBusyHandler(retry)
            }
            // The schema's cascades (a scene's storage, a type's activities) need it.
            try execute(sql: "PRAGMA foreign_keys = ON")
            if wal {
                guard try String.fetchOne(self, sql: "PRAGMA journal_mode = WAL") == "wal" else {
                    throw SQLiteError(SQLITE_CANTOPEN, message: "could not put \(path) in WAL mode")
                }
                try execute(sql: "PRAGMA synchronous = NORMAL")
                guard try Int.fetchOne(self, sql: "PRAGMA synchronous") == 1 else {
                    throw SQLiteError(SQLITE_MISUSE, message: "PRAGMA synchronous did not take NORMAL on \(path)")
                }
            }
            // The first read of the file: NOTADB or CORRUPT surface here.
            _ = try Int.fetchOne(self, sql: "SELECT count(*) FROM sqlite_master")
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Finalizes every statement and closes the connection. Nothing may use it afterwards.
    func close() {
        guard !closed else { return }
        closed = true
        statements.removeAll()
        sqlite3_close_v2(handle)
        callbacks.removeAll()
    }

    // MARK: Running SQL

    /// Runs `sql`, which may hold several statements, none with parameters (schema scripts, pragmas).
    func execute(sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        guard code == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_free(message)
            throw SQLiteError(sqlite3_extended_errcode(handle), message: text, sql: sql)
        }
    }

    /// Runs one statement with `arguments`, prepared for this call only (SQL built at run time).
    func execute(sql: String, arguments: StatementArguments) throws(SQLiteError) {
        try makeStatement(sql: sql).execute(arguments: arguments)
    }

    /// The statement for `sql`, prepared at its first use and kept. Should the kept one be in use
    /// (a query run while another's rows are read), one is prepared for this use only.
    func cachedStatement(sql: String) throws(SQLiteError) -> Statement {
        if let kept = statements[sql] { return kept.inUse ? try makeStatement(sql: sql) : kept }
        let statement = try Statement(sql: sql, connection: self, persistent: true)
        statements[sql] = statement
        return statement
    }

    /// Throws when a transaction should be open (`holdsTransaction`) and SQLite has ended it.
    func checkTransaction(sql: String) throws(SQLiteError) {
        guard holdsTransaction, sqlite3_get_autocommit(handle) != 0 else { return }
        throw SQLiteError(SQLITE_ABORT, message: "SQLite rolled the transaction back after an earlier error; nothing more runs in it", sql: sql)
    }

    /// A statement prepared for one use (a query whose text changes with its filter).
    func makeStatement(sql: String) throws(SQLiteError) -> Statement {
        try Statement(sql: sql, connection: self, persistent: false)
    }

    /// Rows the last statement changed.
    var changesCount: Int { Int(sqlite3_changes(handle)) }
    /// Rows changed since the connection opened.
    var totalChangesCount: Int { Int(sqlite3_total_changes(handle)) }
    /// True while a transaction is open: false once SQLite has rolled one back by itself.
    var isInsideTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Copies the WAL into the database file and truncates it; fails with BUSY while a reader needs it.
    func checkpointTruncating() throws(SQLiteError) {
        let code = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil)
        guard code == SQLITE_OK else { throw SQLiteError(code, connection: handle) }
    }

    // MARK: Callbacks

    private final class Callback<Body> {
        let body: Body
        init(_ body: Body) { self.body = body }
    }

    private func setBusyHandler(_ retry: @escaping () -> Bool) {
        let callback = Callback(retry)
        callbacks.append(callback)
        sqlite3_busy_handler(handle, { context, _ in
            guard let context else { return 0 }
            return Unmanaged<Callback<() -> Bool>>.fromOpaque(context).takeUnretainedValue().body() ? 1 : 0
        }, Unmanaged.passUnretained(callback).toOpaque())
    }

    /// Adds an SQL function of no arguments, `name()`, that calls `body` each time (not deterministic).
    func addFunction(_ name: String, _ body: @escaping () -> SQLiteValue) throws(SQLiteError) {
        let callback = Callback(body)
        callbacks.append(callback)
        let code = sqlite3_create_function_v2(handle, name, 0, SQLITE_UTF8, Unmanaged.passUnretained(callback).toOpaque(), { context, _, _ in
            guard let context, let data = sqlite3_user_data(context) else { return }
            switch Unmanaged<Callback<() -> SQLiteValue>>.fromOpaque(data).takeUnretainedValue().body() {
            case .null: sqlite3_result_null(context)
            case .integer(let value): sqlite3_result_int64(context, value)
            case .real(let value): sqlite3_result_double(context, value)
            case .text(var value):
                if value.isEmpty { return baton_sqlite3_result_text(context, "", 0) }
                value.withUTF8 { baton_sqlite3_result_text(context, UnsafeRawPointer($0.baseAddress)?.assumingMemoryBound(to: CChar.self), Int32($0.count)) }
            case .blob(let bytes):
                bytes.withUnsafeBytes { sqlite3_result_blob64(context, $0.baseAddress, sqlite3_uint64($0.count), nil) }
            }
        }, nil, nil, nil)
        guard code == SQLITE_OK else { throw SQLiteError(code, connection: handle) }
    }

    /// Interrupts whatever runs on this connection once `deadline` (`Monotonic.now`) has passed:
    /// the statement fails with SQLITE_INTERRUPT. Checked every thousand virtual-machine steps,
    /// on the connection's own thread, so no other thread ever touches the connection.
    func interrupt(after deadline: UInt64) {
        let callback = Callback({ Monotonic.now >= deadline })
        callbacks.append(callback)
        sqlite3_progress_handler(handle, 1_000, { context in
            guard let context else { return 0 }
            return Unmanaged<Callback<() -> Bool>>.fromOpaque(context).takeUnretainedValue().body() ? 1 : 0
        }, Unmanaged.passUnretained(callback).toOpaque())
    }
}

/// A failure SQLite reported: its extended result code, its message (read at once: the next
/// call on the connection replaces it) and the SQL that failed, when one did.
struct SQLiteError: Error, CustomStringConvertible {
    /// The extended result code (`SQLITE_IOERR_WRITE`, …).
    let extendedCode: Int32
    let message: String
    let sql: String?

    /// The primary result code (`SQLITE_IOERR`, …): the extended code's low byte.
    var code: Int32 { extendedCode & 0xFF }

    init(_ code: Int32, message: String, sql: String? = nil) {
        extendedCode = code
        self.message = message
        self.sql = sql
    }

    /// The error `code` (returned by a call on `connection`), with the connection's message.
    init(_ code: Int32, connection: OpaquePointer?, sql: String? = nil) {
        let extended = connection.map { sqlite3_extended_errcode($0) } ?? code
        // The connection's last error is this call's when their primary codes agree.
        let fromConnection = extended & 0xFF == code & 0xFF
        self.init(fromConnection ? extended : code,
                  message: fromConnection ? connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
                      : String(cString: sqlite3_errstr(code)),
                  sql: sql)
    }

    var description: String {
        "SQLite error \(extendedCode): \(message)" + (sql.map { " (in: \($0.prefix(200)))" } ?? "")
    }
}

/// A connection that several threads use, one at a time: each use runs on the connection's own
/// serial queue, as GRDB's `DatabaseQueue` did. (A reentrant use, from inside another, would
/// wait for itself: nothing in the store makes one.)
///
/// `@unchecked Sendable`, like the DBus module's box around libdbus pointers: the connection and
/// its statements are reached only inside `use`, on that queue, never from two threads at once.
final class SerializedConnection: @unchecked Sendable {
    private let connection: SQLiteConnection
    private let queue: DispatchQueue

    init(_ connection: SQLiteConnection, label: String) {
        self.connection = connection
        queue = DispatchQueue(label: label)
    }

    func use<T, E>(_ body: (SQLiteConnection) throws(E) -> T) throws(E) -> T {
        try queue.sync { Result { () throws(E) in try body(connection) } }.get()
    }
}
