import CSQLite

/// A prepared statement of one connection, run whole by each call: `execute`, `rows` or `row`
/// bind the arguments, step, and reset and unbind the statement before they return, even when
/// they throw. So a kept statement is never left mid-step for its next user, and one in use is
/// marked so that the connection prepares another for a second, nested use (the SQLITE_MISUSE
/// of FIELD-NOTES' "Found under load" was a statement stepped by two users).
final class Statement {
    let handle: OpaquePointer
    let sql: String
    /// The connection owns its kept statements, and a statement prepared for one use lives no
    /// longer than the call that uses it on its connection.
    private unowned let connection: SQLiteConnection
    private(set) var inUse = false
    private let parameterCount: Int32

    /// Prepares `sql` on `connection`; `persistent` tells SQLite the statement will be kept.
    init(sql: String, connection: SQLiteConnection, persistent: Bool) throws(SQLiteError) {
        var prepared: OpaquePointer?
        // The text's C copy must outlive the look at what SQLite left unread (`tail` points into it).
        let (code, rest) = sql.withCString { text in
            var tail: UnsafePointer<CChar>?
            let code = sqlite3_prepare_v3(connection.handle, text, -1, persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0, &prepared, &tail)
            return (code, tail.map { String(cString: $0) } ?? "")
        }
        guard code == SQLITE_OK, let prepared else {
            throw SQLiteError(code == SQLITE_OK ? SQLITE_MISUSE : code, connection: connection.handle, sql: sql)
        }
        // One statement per Statement: a second one in the text would be silently ignored.
        if !rest.allSatisfy(\.isWhitespace) {
            sqlite3_finalize(prepared)
            throw SQLiteError(SQLITE_MISUSE, message: "more than one statement in one prepared statement", sql: sql)
        }
        handle = prepared
        self.sql = sql
        self.connection = connection
        parameterCount = sqlite3_bind_parameter_count(prepared)
    }

    deinit { sqlite3_finalize(handle) }

    /// Runs the statement to its end.
    func execute(arguments: StatementArguments = []) throws(SQLiteError) {
        try run(arguments) { () throws(SQLiteError) in
            while try step() {}
        }
    }

    /// Every row, decoded; with a `limit`, the first `limit` rows (the rest are never stepped to).
    func rows<T>(_ arguments: StatementArguments = [], limit: Int = .max, _ decode: (Columns) -> T) throws(SQLiteError) -> [T] {
        try run(arguments) { () throws(SQLiteError) in
            var rows: [T] = []
            while rows.count < limit, try step() { rows.append(decode(Columns(statement: handle))) }
            return rows
        }
    }

    /// The first row, decoded, or nil.
    func row<T>(_ arguments: StatementArguments = [], _ decode: (Columns) -> T) throws(SQLiteError) -> T? {
        try run(arguments) { () throws(SQLiteError) in try step() ? decode(Columns(statement: handle)) : nil }
    }

    private func run<T>(_ arguments: StatementArguments, _ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try connection.checkTransaction(sql: sql)
        inUse = true
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
            inUse = false
        }
        try bind(arguments)
        return try body()
    }

    /// One step: true on a row, false when done.
    private func step() throws(SQLiteError) -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code: throw SQLiteError(code, connection: sqlite3_db_handle(handle), sql: sql)
        }
    }

    private func bind(_ arguments: StatementArguments) throws(SQLiteError) {
        guard arguments.values.count == Int(parameterCount) else {
            throw SQLiteError(SQLITE_MISUSE, message: "\(arguments.values.count) arguments for \(parameterCount) parameters", sql: sql)
        }
        for (offset, value) in arguments.values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32 = switch value {
            case .null: sqlite3_bind_null(handle, index)
            case .integer(let value): sqlite3_bind_int64(handle, index, value)
            case .real(let value): sqlite3_bind_double(handle, index, value)
            case .text(var text):
                // By byte count: a NUL inside the text is kept, not taken for its end. (Empty text
                // is bound from a literal: a NULL pointer would bind NULL.)
                text.isEmpty ? baton_sqlite3_bind_text(handle, index, "", 0)
                    : text.withUTF8 { baton_sqlite3_bind_text(handle, index, UnsafeRawPointer($0.baseAddress)?.assumingMemoryBound(to: CChar.self), Int32($0.count)) }
            case .blob(let bytes):
                // Empty bytes are an empty blob (a NULL pointer would bind NULL).
                bytes.isEmpty ? sqlite3_bind_zeroblob(handle, index, 0)
                    : bytes.withUnsafeBytes { baton_sqlite3_bind_blob(handle, index, $0.baseAddress, Int32($0.count)) }
            }
            guard code == SQLITE_OK else { throw SQLiteError(code, connection: sqlite3_db_handle(handle), sql: sql) }
        }
    }
}

/// A value as SQLite stores it.
enum SQLiteValue: Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// A Swift value a statement can bind.
protocol SQLiteBindable {
    var sqliteValue: SQLiteValue { get }
}

extension String: SQLiteBindable { var sqliteValue: SQLiteValue { .text(self) } }
extension Int: SQLiteBindable { var sqliteValue: SQLiteValue { .integer(Int64(self)) } }
extension Int64: SQLiteBindable { var sqliteValue: SQLiteValue { .integer(self) } }
extension Int32: SQLiteBindable { var sqliteValue: SQLiteValue { .integer(Int64(self)) } }
extension Bool: SQLiteBindable { var sqliteValue: SQLiteValue { .integer(self ? 1 : 0) } }
extension Double: SQLiteBindable { var sqliteValue: SQLiteValue { .real(self) } }
extension [UInt8]: SQLiteBindable { var sqliteValue: SQLiteValue { .blob(self) } }
extension SQLiteValue: SQLiteBindable { var sqliteValue: SQLiteValue { self } }

/// A statement's arguments, bound to its parameters in order (`?`, or `?N` by number).
struct StatementArguments: ExpressibleByArrayLiteral {
    var values: [SQLiteValue]

    init(_ values: [(any SQLiteBindable)?]) {
        self.values = values.map { $0?.sqliteValue ?? .null }
    }

    init(arrayLiteral elements: (any SQLiteBindable)?...) {
        self.init(elements)
    }

    static func + (lhs: StatementArguments, rhs: StatementArguments) -> StatementArguments {
        var sum = lhs
        sum += rhs
        return sum
    }

    static func += (lhs: inout StatementArguments, rhs: StatementArguments) {
        lhs.values += rhs.values
    }
}

/// A type a one-column query reads: `Int.fetchOne(db, sql: "SELECT count(*) …")`.
protocol SQLiteColumnValue {
    /// The value in column `index` of `row` (not NULL).
    static func read(_ row: Columns, _ index: Int32) -> Self
}

extension Int: SQLiteColumnValue { static func read(_ row: Columns, _ index: Int32) -> Int { Int(row.int64(index)) } }
extension Int64: SQLiteColumnValue { static func read(_ row: Columns, _ index: Int32) -> Int64 { row.int64(index) } }
extension Bool: SQLiteColumnValue { static func read(_ row: Columns, _ index: Int32) -> Bool { row.bool(index) } }
extension Double: SQLiteColumnValue { static func read(_ row: Columns, _ index: Int32) -> Double { row.double(index) } }
extension String: SQLiteColumnValue { static func read(_ row: Columns, _ index: Int32) -> String { row.string(index) } }

extension SQLiteColumnValue {
    /// The first column of the first row; nil when there is no row or it holds NULL.
    static func fetchOne(_ statement: Statement, arguments: StatementArguments = []) throws(SQLiteError) -> Self? {
        try statement.row(arguments) { $0.isNull(0) ? nil : read($0, 0) } ?? nil
    }

    static func fetchOne(_ db: SQLiteConnection, sql: String, arguments: StatementArguments = []) throws(SQLiteError) -> Self? {
        try fetchOne(db.makeStatement(sql: sql), arguments: arguments)
    }

    /// The first column of every row (NULLs left out).
    static func fetchAll(_ statement: Statement, arguments: StatementArguments = []) throws(SQLiteError) -> [Self] {
        try statement.rows(arguments) { $0.isNull(0) ? nil : read($0, 0) }.compactMap { $0 }
    }

    static func fetchAll(_ db: SQLiteConnection, sql: String, arguments: StatementArguments = []) throws(SQLiteError) -> [Self] {
        try fetchAll(db.makeStatement(sql: sql), arguments: arguments)
    }
}
