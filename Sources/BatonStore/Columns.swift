import CSQLite

/// The current row of a statement, read by column index straight from SQLite (no name is
/// looked up). Only valid while the statement is on the row: `Statement.rows` and `row` hand
/// it to a decoding closure, never further.
struct Columns {
    let statement: OpaquePointer

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
