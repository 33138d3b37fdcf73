@testable import BatonStore

/// Another program's connection to a store's file: what a test does to the file from outside
/// the store (making an old schema, editing a row behind the store's back, looking at the WAL).
struct OutsideConnection {
    let db: SQLiteConnection

    init(path: String) throws {
        db = try SQLiteConnection(path: path, busy: .timeout(5))
    }

    /// `body` in one `BEGIN IMMEDIATE` transaction, committed if it returns.
    func write<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try db.execute(sql: "BEGIN IMMEDIATE")
        do {
            let result = try body(db)
            try db.execute(sql: "COMMIT")
            return result
        } catch {
            if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK") }
            throw error
        }
    }

    /// `body` in one read transaction.
    func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try db.execute(sql: "BEGIN")
        defer { try? db.execute(sql: "COMMIT") }
        return try body(db)
    }

    func close() {
        db.close()
    }
}
