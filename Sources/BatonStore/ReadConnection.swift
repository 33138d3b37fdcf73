import GRDBSQLite
import Synchronization

/// One read-only SQLite connection with its statements prepared once, for the lookups
/// the hot calls make (an activity, a scene, a type by key; search).
///
/// Through `DatabasePool`, a one-row lookup spent most of its time outside SQLite: the
/// pool's checkout, locks, schema check and a `DispatchQueue.sync` (the profile of `Get`,
/// issue #6). Here a lookup is bind, step, read, reset under one uncontended mutex.
///
/// Reads share one read transaction: the first read begins it, and it stays open until
/// the store's next write ends it (`endSnapshot()`, before the write and after its
/// commit). A statement in a transaction of its own took and released a WAL read lock,
/// two `fcntl` calls, 7.8% of batond's CPU time under `Get` (perf, issue #6). A read
/// therefore sees everything committed through this store before it started, but not a
/// change another connection makes to the file: the store must be its file's only writer.
/// Ending the snapshot before each write as well keeps it from holding the WAL at a
/// frame a checkpoint has passed, which would stop the WAL from starting over.
final class ReadConnection: Sendable {
    private struct State: ~Copyable {
        var database: OpaquePointer?
        /// Prepared statements by their SQL, as GRDB's `cachedStatement` keeps them.
        var statements: [String: OpaquePointer] = [:]

        deinit { Self.close(database, statements) }

        static func close(_ database: OpaquePointer?, _ statements: [String: OpaquePointer]) {
            for statement in statements.values { sqlite3_finalize(statement) }
            sqlite3_close_v2(database)
        }
    }

    private let state: Mutex<State>

    /// Opens `path` read-only; the database must exist (the pool created and migrated it).
    init(path: String) throws(StoreError) {
        var database: OpaquePointer?
        let flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &database, flags, nil)
        guard code == SQLITE_OK, let database else {
            defer { sqlite3_close_v2(database) }
            throw Self.error(code, database)
        }
        sqlite3_busy_timeout(database, 5_000)
        sqlite3_exec(database, "PRAGMA cache_size = -\(Store.cacheKiB)", nil, nil, nil)
        state = Mutex(State(database: database))
    }

    /// Finalizes the statements and closes the connection; later reads throw.
    func close() {
        state.withLock { state in
            State.close(state.database, state.statements)
            state.database = nil
            state.statements = [:]
        }
    }

    /// Runs `sql` with `arguments` and hands each result row to `row`, until it returns false.
    /// The statement is prepared on first use and kept: `sql` should come from a fixed set.
    func forEachRow(_ sql: String, _ arguments: [StatementArgument], _ row: (borrowing Columns) throws -> Bool) throws {
        try state.withLock { state throws in
            try Self.beginSnapshot(in: &state)
            let statement = try PreparedStatement(try Self.prepared(sql, in: &state), of: state.database, arguments)
            while let columns = try statement.next() {
                guard try row(columns) else { return }
            }
        }
    }

    /// The first result row of `sql`, decoded, or nil when there is none.
    func fetchOne<T>(_ sql: String, _ arguments: [StatementArgument], _ decode: (borrowing Columns) throws -> T) throws -> T? {
        var result: T?
        try forEachRow(sql, arguments) { columns in
            result = try decode(columns)
            return false
        }
        return result
    }

    /// Every result row of `sql`, decoded.
    func fetchAll<T>(_ sql: String, _ arguments: [StatementArgument], _ decode: (borrowing Columns) throws -> T) throws -> [T] {
        var results: [T] = []
        try forEachRow(sql, arguments) { columns in
            results.append(try decode(columns))
            return true
        }
        return results
    }

    /// Ends the read transaction the reads share, if one is open: the next read sees every
    /// commit made before it. The store calls this around each write, outside its transaction.
    func endSnapshot() {
        state.withLock { state in
            guard let database = state.database, sqlite3_get_autocommit(database) == 0 else { return }
            // Every statement was reset when its read ended, so COMMIT has nothing to wait for.
            _ = try? PreparedStatement(Self.prepared("COMMIT", in: &state), of: database, []).run()
            // Should it fail all the same, ROLLBACK ends a read transaction as well.
            if sqlite3_get_autocommit(database) == 0 { sqlite3_exec(database, "ROLLBACK", nil, nil, nil) }
        }
    }

    /// Begins the shared read transaction unless it is open. SQLite takes the snapshot at
    /// the transaction's first read, so it holds everything committed before that read.
    private static func beginSnapshot(in state: inout State) throws {
        guard let database = state.database else { throw StoreError.closed }
        guard sqlite3_get_autocommit(database) != 0 else { return }
        try PreparedStatement(try prepared("BEGIN", in: &state), of: database, []).run()
    }

    private static func prepared(_ sql: String, in state: inout State) throws -> OpaquePointer {
        if let statement = state.statements[sql] { return statement }
        guard let database = state.database else { throw StoreError.closed }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(database, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw error(code, database) }
        state.statements[sql] = statement
        return statement
    }

    fileprivate static func error(_ code: Int32, _ database: OpaquePointer?) -> StoreError {
        .sqlite(code, database.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code)))
    }
}

/// A value bound to a statement's parameter, by the read connection and the store's writes alike.
enum StatementArgument {
    case text(String)
    case integer(Int64)
    case real(Double)
    case blob([UInt8])
    case null

    /// Text, or NULL when absent.
    static func text(_ value: String?) -> StatementArgument { value.map { .text($0) } ?? .null }
}

/// A prepared statement of a connection with its arguments bound, stepped row by row and
/// reset when it goes away: the read connection's statements, and the store writer's hot
/// ones (GRDB's cached statements).
struct PreparedStatement: ~Copyable {
    private let statement: OpaquePointer
    private let database: OpaquePointer?

    init(_ statement: OpaquePointer, of database: OpaquePointer?, _ arguments: [StatementArgument]) throws {
        self.statement = statement
        self.database = database
        for (index, argument) in arguments.enumerated() {
            let position = Int32(index + 1)
            let code = switch argument {
            case .integer(let value): sqlite3_bind_int64(statement, position, value)
            case .real(let value): sqlite3_bind_double(statement, position, value)
            case .text(let value): Self.bind(value, at: position, to: statement)
            case .blob(let bytes): Self.bind(bytes, at: position, to: statement)
            case .null: sqlite3_bind_null(statement, position)
            }
            guard code == SQLITE_OK else { throw ReadConnection.error(code, database) }
        }
    }

    deinit {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
    }

    /// The next result row, or nil once the statement is done.
    func next() throws -> Columns? {
        let code = sqlite3_step(statement)
        if code == SQLITE_DONE { return nil }
        guard code == SQLITE_ROW else { throw ReadConnection.error(code, database) }
        return Columns(statement: statement)
    }

    /// Steps the statement to its end, for statements that return no rows.
    func run() throws {
        while try next() != nil {}
    }

    /// SQLITE_TRANSIENT: SQLite copies the bytes, which live only for the binding call.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    private static func bind(_ text: String, at position: Int32, to statement: OpaquePointer) -> Int32 {
        var text = text
        return text.withUTF8 { bytes in
            sqlite3_bind_text(statement, position, bytes.baseAddress, Int32(bytes.count), transient)
        }
    }

    private static func bind(_ bytes: [UInt8], at position: Int32, to statement: OpaquePointer) -> Int32 {
        // An empty array may have no address, and a blob bound from none would be NULL.
        guard !bytes.isEmpty else { return sqlite3_bind_zeroblob(statement, position, 0) }
        return bytes.withUnsafeBytes { buffer in
            sqlite3_bind_blob(statement, position, buffer.baseAddress, Int32(buffer.count), transient)
        }
    }
}

/// The current row of a statement, read by column index (the indices the queries' column lists fix).
struct Columns: ~Copyable {
    let statement: OpaquePointer

    func isNull(_ index: Int32) -> Bool { sqlite3_column_type(statement, index) == SQLITE_NULL }

    /// Text as stored; SQLite returns its UTF-8 bytes with their length, so an embedded NUL is kept.
    func string(_ index: Int32) -> String {
        guard let text = sqlite3_column_text(statement, index) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, index))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func optionalString(_ index: Int32) -> String? { isNull(index) ? nil : string(index) }
    func int64(_ index: Int32) -> Int64 { sqlite3_column_int64(statement, index) }
    func bool(_ index: Int32) -> Bool { int64(index) != 0 }
    func uint64(_ index: Int32) -> UInt64 { UInt64(bitPattern: int64(index)) }
    func optionalUInt64(_ index: Int32) -> UInt64? { isNull(index) ? nil : uint64(index) }
    func double(_ index: Int32) -> Double { sqlite3_column_double(statement, index) }

    func bytes(_ index: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, index))
        guard count > 0, let blob = sqlite3_column_blob(statement, index) else { return [] }
        return Array(UnsafeRawBufferPointer(start: blob, count: count))
    }
}
