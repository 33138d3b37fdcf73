import BatonCore
@testable import BatonStore
import CSQLite
import Foundation
import Testing
import TestSupport

/// The store's own layer over libsqlite3: what GRDB set for us and this layer must set now
/// (FIELD-NOTES, "Off GRDB and postgres-nio"), and the rules its statements keep.
struct SQLiteLayerTests {
    let directory: URL

    init() throws {
        directory = try TemporaryDirectory.make(prefix: "baton-sqlite")
    }

    func connection(_ name: String = "test.sqlite", wal: Bool = true) throws -> SQLiteConnection {
        try SQLiteConnection(path: directory.appendingPathComponent(name).path, wal: wal, busy: .timeout(1))
    }

    @Test func aConnectionOpensWithWhatTheStoreReliesOn() throws {
        let db = try connection()
        #expect(try Int.fetchOne(db, sql: "PRAGMA foreign_keys") == 1)
        #expect(try String.fetchOne(db, sql: "PRAGMA journal_mode") == "wal")
        // Debian's libsqlite3 makes WAL's default FULL (2): an fsync at every commit.
        #expect(try Int.fetchOne(db, sql: "PRAGMA synchronous") == 1)
        try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE)")
        // A double-quoted word is a column name, never a string when no column has its name.
        #expect(throws: SQLiteError.self) { try String.fetchOne(db, sql: "SELECT \"nothing\" FROM t") }
        // Extended result codes: a broken UNIQUE says which constraint, not just CONSTRAINT.
        try db.execute(sql: "INSERT INTO t (name) VALUES ('a')")
        let error = #expect(throws: SQLiteError.self) { try db.execute(sql: "INSERT INTO t (name) VALUES (?)", arguments: ["a"]) }
        #expect(error?.extendedCode == 2067 /* SQLITE_CONSTRAINT_UNIQUE */)
        #expect(error?.code == SQLITE_CONSTRAINT)
        #expect(error?.message.contains("UNIQUE") == true)
    }

    @Test func aFileThatIsNotADatabaseFailsWhenItOpens() throws {
        let path = directory.appendingPathComponent("notes.txt").path
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: SQLiteError.self) { try SQLiteConnection(path: path, readOnly: true, busy: .timeout(1)) }
        #expect(error?.code == SQLITE_NOTADB)
    }

    /// A statement kept in the cache is checked out while it steps: the same SQL run inside its
    /// rows' decoding gets a statement of its own, and neither disturbs the other.
    @Test func aStatementInUseIsNeverSteppedByAnotherUser() throws {
        let db = try connection()
        try db.execute(sql: "CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1), (2), (3)")
        let sql = "SELECT n FROM t ORDER BY n"
        // At most 10 rows: were the statement shared, the inner use would send the outer back to its first row, forever.
        let pairs = try db.cachedStatement(sql: sql).rows(limit: 10) { row in
            (row.int64(0), (try? Int64.fetchAll(db.cachedStatement(sql: sql))) ?? [])
        }
        #expect(pairs.map(\.0) == [1, 2, 3])
        #expect(pairs.allSatisfy { $0.1 == [1, 2, 3] })
        // Reset and unbound after each use, even one that stopped early or failed.
        #expect(try db.cachedStatement(sql: sql).rows(limit: 1) { $0.int64(0) } == [1])
        #expect(try Int64.fetchAll(db.cachedStatement(sql: sql)) == [1, 2, 3])
        #expect(throws: SQLiteError.self) { try db.cachedStatement(sql: "SELECT n FROM t WHERE n = ?").execute(arguments: []) }
        // One statement each: a second would be ignored silently.
        #expect(throws: SQLiteError.self) { try db.cachedStatement(sql: "SELECT 1; DELETE FROM t") }
        #expect(try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM t; \n "), arguments: []) == 3)
        #expect(try Int64.fetchOne(db.cachedStatement(sql: "SELECT n FROM t WHERE n = ?"), arguments: [2]) == 2)
    }

    @Test func textAndBytesAreBoundWhole() throws {
        let db = try connection()
        try db.execute(sql: "CREATE TABLE t (k TEXT, v)")
        let statement = try db.cachedStatement(sql: "INSERT INTO t VALUES (?, ?)")
        try statement.execute(arguments: ["nul", "a\u{0}b"])
        try statement.execute(arguments: ["empty text", ""])
        try statement.execute(arguments: ["empty bytes", [UInt8]()])
        try statement.execute(arguments: ["nothing", nil])
        try statement.execute(arguments: ["Agnès", [UInt8]([0, 255])])
        let rows = try db.cachedStatement(sql: "SELECT k, typeof(v), length(CAST(v AS BLOB)) FROM t ORDER BY rowid")
            .rows { ($0.string(0), $0.string(1), $0.int64(2)) }
        #expect(rows.map(\.1) == ["text", "text", "blob", "null", "blob"])
        #expect(rows.map(\.2) == [3, 0, 0, 0, 2])
        #expect(try String.fetchOne(db, sql: "SELECT v FROM t WHERE k = 'nul'") == "a\u{0}b")
        #expect(try String.fetchOne(db, sql: "SELECT k FROM t WHERE k LIKE 'agn%'") == "Agnès")
    }

    /// SQLite can roll a transaction back by itself (after FULL, IOERR, BUSY…); a writer that
    /// went on would then write outside any transaction, each statement committing alone.
    @Test func aWriteRunsNothingMoreOnceSQLiteEndedItsTransaction() async throws {
        let store = try Store(path: directory.appendingPathComponent("store.sqlite").path)
        let type = ActivityType(type: "org.example.t", appID: "org.example", title: "T", handler: nil, requiredKeys: [], payloadType: nil)
        let error = #expect(throws: BatonError.self) {
            try store.write { transaction in
                try transaction.db.execute(sql: "ROLLBACK")  // as SQLite does after an error
                try transaction.register(type)
            }
        }
        #expect(error?.code == .storageUnavailable)
        #expect(try store.activityType(type.type) == nil, "nothing was written outside the transaction")
        try store.write { try $0.register(type) }
        #expect(try store.activityType(type.type) == type, "the next write runs as usual")
    }

    @Test func migrationsRunOnceEachAndRecordThemselves() throws {
        let db = try connection()
        var migrator = Migrator()
        migrator.registerMigration("v1") { try $0.execute(sql: "CREATE TABLE parent (id INTEGER PRIMARY KEY)") }
        migrator.registerMigration("v2") { try $0.execute(sql: "CREATE TABLE child (parent INTEGER REFERENCES parent(id))") }
        try migrator.migrate(db, upTo: "v1")
        #expect(try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations") == ["v1"])
        try migrator.migrate(db)
        try migrator.migrate(db)
        #expect(try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier") == ["v1", "v2"])
        // A newer build's migration is left alone; one that breaks a foreign key is rolled back whole.
        try db.execute(sql: "INSERT INTO grdb_migrations VALUES ('v99')")
        migrator.registerMigration("v3") { db in
            try db.execute(sql: "CREATE TABLE kept (x); INSERT INTO child VALUES (42)")
        }
        #expect(throws: SQLiteError.self) { try migrator.migrate(db) }
        #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE name = 'kept'") == 0)
        #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM grdb_migrations WHERE identifier = 'v3'") == 0)
        #expect(try Int.fetchOne(db, sql: "PRAGMA foreign_keys") == 1, "foreign keys are on again")
    }

    /// A long read on a connection of its own stops at its budget. (Unstopped, the query below
    /// counts to 10⁸ and returns, and the test fails instead of waiting.)
    @Test func aLongReadIsInterruptedAtItsBudget() throws {
        let store = try Store(path: directory.appendingPathComponent("store.sqlite").path)
        #expect(throws: ReadInterrupted.self) {
            try store.readAlone(budget: .milliseconds(50)) { db in
                try Int.fetchOne(db, sql: "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) SELECT count(*) FROM n")
            }
        }
        #expect(try store.readAlone(budget: .seconds(5)) { try Int.fetchOne($0, sql: "SELECT 1") } == 1)
    }
}
