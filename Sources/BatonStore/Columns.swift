import GRDB
import GRDBSQLite

/// The current row of a GRDB statement, read by column index straight from SQLite.
///
/// GRDB's `Row` maps every column name when a cursor starts: for one activity that was
/// most of a lookup's cost (see Benchmarks/README.md). Only valid while its cursor is on
/// the row.
struct Columns {
    let statement: SQLiteStatement

    func isNull(_ index: Int32) -> Bool { sqlite3_column_type(statement, index) == SQLITE_NULL }

    /// Text as stored; SQLite returns its UTF-8 bytes with their length, so nothing is cut at a NUL.
    func string(_ index: Int32) -> String {
        guard let text = sqlite3_column_text(statement, index) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(statement, index))), as: UTF8.self)
    }

    func optionalString(_ index: Int32) -> String? { isNull(index) ? nil : string(index) }
    func int64(_ index: Int32) -> Int64 { sqlite3_column_int64(statement, index) }
    func optionalInt64(_ index: Int32) -> Int64? { isNull(index) ? nil : int64(index) }
    func bool(_ index: Int32) -> Bool { int64(index) != 0 }
    func double(_ index: Int32) -> Double { sqlite3_column_double(statement, index) }
    func time(_ index: Int32) -> UInt64 { Time.decode(int64(index)) }
    func optionalTime(_ index: Int32) -> UInt64? { isNull(index) ? nil : time(index) }

    func bytes(_ index: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, index))
        guard count > 0, let blob = sqlite3_column_blob(statement, index) else { return [] }
        return Array(UnsafeRawBufferPointer(start: blob, count: count))
    }

    // A table's columns by name: their index is their place in the row type's `Column`.
    func string(_ column: some TableColumns) -> String { string(column.rawValue) }
    func optionalString(_ column: some TableColumns) -> String? { optionalString(column.rawValue) }
    func bool(_ column: some TableColumns) -> Bool { bool(column.rawValue) }
    func int64(_ column: some TableColumns) -> Int64 { int64(column.rawValue) }
    func time(_ column: some TableColumns) -> UInt64 { time(column.rawValue) }
    func optionalTime(_ column: some TableColumns) -> UInt64? { optionalTime(column.rawValue) }
}

/// A GRDB cursor (GRDB steps the statement and reports its errors) whose elements are
/// decoded from `Columns` rather than from a `Row`.
final class ColumnCursor<Element>: DatabaseCursor {
    var _isDone = false
    let _statement: Statement
    private let decode: (Columns) -> Element

    init(_ statement: Statement, arguments: StatementArguments, decode: @escaping (Columns) -> Element) throws {
        _statement = statement
        // Resets the statement and binds the arguments, as GRDB's own cursors begin.
        try statement.setArguments(arguments)
        self.decode = decode
    }

    func _element(sqliteStatement: SQLiteStatement) throws -> Element {
        decode(Columns(statement: sqliteStatement))
    }

    deinit {
        // As GRDB's cursors do when they go: a statement left mid-step would keep the read
        // transaction from ending. (GRDB resets a statement again before its next use.)
        sqlite3_reset(_statement.sqliteStatement)
    }
}

extension Statement {
    /// Every row, decoded.
    func rows<T>(_ arguments: StatementArguments, _ decode: @escaping (Columns) -> T) throws -> [T] {
        try Array(ColumnCursor(self, arguments: arguments, decode: decode))
    }

    /// The first row, decoded, or nil.
    func row<T>(_ arguments: StatementArguments, _ decode: @escaping (Columns) -> T) throws -> T? {
        try ColumnCursor(self, arguments: arguments, decode: decode).next()
    }
}
