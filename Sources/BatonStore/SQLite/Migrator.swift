/// The schema's numbered migrations, each run once per database file, in order.
///
/// Which have run is recorded in the table GRDB kept it in, `grdb_migrations(identifier)`, with the
/// same identifiers (`v1`…): every database made before wave 5 says there what it already has. An
/// identifier this build does not know (a newer batond's) is left alone.
///
/// Each migration runs in one `BEGIN IMMEDIATE` transaction with foreign keys off, as SQLite
/// prescribes for a table rebuilt in place (lang_altertable.html, "other alterations"); before it
/// commits, `PRAGMA foreign_key_check` must find nothing, else it is rolled back.
struct Migrator {
    private var migrations: [(identifier: String, migrate: (SQLiteConnection) throws -> Void)] = []

    mutating func registerMigration(_ identifier: String, migrate: @escaping (SQLiteConnection) throws -> Void) {
        precondition(!migrations.contains { $0.identifier == identifier }, "migration \(identifier) registered twice")
        migrations.append((identifier, migrate))
    }

    /// Runs the migrations `db` has not recorded, all of them or those up to `last` (tests make old databases so).
    func migrate(_ db: SQLiteConnection, upTo last: String? = nil) throws {
        let wanted = last.flatMap { last in migrations.firstIndex { $0.identifier == last } }.map { migrations[...$0] } ?? migrations[...]
        try db.execute(sql: "CREATE TABLE IF NOT EXISTS grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
        let applied = Set(try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations"))
        for migration in wanted where !applied.contains(migration.identifier) {
            try db.execute(sql: "PRAGMA foreign_keys = OFF")
            defer { try? db.execute(sql: "PRAGMA foreign_keys = ON") }
            try db.execute(sql: "BEGIN IMMEDIATE")
            do {
                try migration.migrate(db)
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES (?)", arguments: [migration.identifier])
                if let broken = try String.fetchOne(db, sql: "SELECT \"table\" || ' row ' || rowid || ' → ' || parent FROM pragma_foreign_key_check") {
                    throw SQLiteError(787 /* SQLITE_CONSTRAINT_FOREIGNKEY */, message: "migration \(migration.identifier) broke a foreign key: \(broken)")
                }
                try db.execute(sql: "COMMIT")
            } catch {
                if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK") }
                throw error
            }
        }
    }
}
