import BatonCore
import CSQLite
import Glibc

/// Keeps batond from serving, or writing into, a database it cannot trust.
///
/// Before the store opens a file, `inspect` decides whether it is trustworthy: it is an
/// SQLite file, was not found damaged while in use (the `.damaged` marker), its schema
/// reads, and it is as long as its header says. That much reads a few pages whatever the
/// file's size, so start-up does not grow with the store; the full `quick_check` runs once
/// batond is idle (`Store.checkIntegrity`), and what it finds is quarantined at the next
/// start, as damage found while serving is. A file that fails is moved aside with its
/// `-wal` and `-shm`, and batond starts on a fresh one; it never restarts in a loop on a bad file.
public enum Quarantine {
    /// A database moved aside: where it went and why.
    public struct Moved: Sendable, Equatable {
        public let path: String
        public let reason: String

        /// What to tell the user, once: where the old data is and how to try to get it back.
        public var advice: String {
            "the database could not be trusted (\(reason)); it was moved to \(path) and batond started a fresh one. "
                + "To try to recover what it held: sqlite3 \(path) .recover | sqlite3 recovered.sqlite"
        }
    }

    /// Opens the store at `path`, first moving the file aside when it cannot be trusted,
    /// and again when opening it reports damage.
    public static func openStore(path: String, limits: Limits, clock: any DaemonClock = SystemClock()) throws -> (Store, Moved?) {
        var moved = try inspect(path).map { try moveAside(path, reason: $0) }
        do {
            return (try Store(path: path, limits: limits, clock: clock), moved)
        } catch let error as BatonError where error.code == .storageCorrupt && moved == nil {
            moved = try moveAside(path, reason: "SQLite reported damage while opening it")
            return (try Store(path: path, limits: limits, clock: clock), moved)
        }
    }

    /// Why the file at `path` cannot be trusted, or nil when it can (or does not exist yet).
    static func inspect(_ path: String) throws -> String? {
        if access(StorageFailure.marker(for: path), F_OK) == 0 {
            return "SQLite reported it damaged while batond was using it"
        }
        var info = stat()
        guard stat(path, &info) == 0, info.st_size > 0 else { return nil }
        guard info.st_size >= 100, hasSQLiteHeader(path) else { return "it is not an SQLite database" }
        do {
            // Another program holding the file's lock is not damage: wait for it as a write would.
            let db = try SQLiteConnection(path: path, readOnly: true, busy: .timeout(Store.lockTimeout))
            defer { db.close() }
            // The schema, every table's and index's definition, read whole.
            _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE sql IS NOT NULL")
            // A file cut short: its header counts more pages than it holds. (Pages only in the
            // WAL are counted too, so the WAL's length is part of what the file holds.)
            let pages = try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let pageSize = try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
            var wal = stat()
            let walBytes = stat(path + "-wal", &wal) == 0 ? Int64(wal.st_size) : 0
            guard pages * pageSize <= Int64(info.st_size) + walBytes else {
                return "it holds \(info.st_size) bytes where its header counts \(pages) pages of \(pageSize)"
            }
            return nil
        } catch where [SQLITE_CORRUPT, SQLITE_NOTADB].contains(error.code) {
            return "SQLite could not read it: \(error.message)"
        } catch {
            throw StorageFailure.named(error, path: path)
        }
    }

    /// True when the file begins with SQLite's 16-byte magic string.
    private static func hasSQLiteHeader(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: 16)
        guard read(fd, &header, 16) == 16 else { return false }
        return header == Array("SQLite format 3\0".utf8)
    }

    /// Renames the database, its `-wal` and `-shm` to `<path>.corrupt-<UTC time>…` and
    /// removes the damage marker.
    static func moveAside(_ path: String, reason: String) throws -> Moved {
        var destination = path + ".corrupt-" + utcStamp()
        var attempt = 1
        while access(destination, F_OK) == 0 {
            attempt += 1
            destination = path + ".corrupt-" + utcStamp() + "-\(attempt)"
        }
        for suffix in ["", "-wal", "-shm"] where access(path + suffix, F_OK) == 0 {
            guard rename(path + suffix, destination + suffix) == 0 else {
                throw StoreError.cannotOpen(path + suffix, errno: errno)
            }
        }
        unlink(StorageFailure.marker(for: path))
        return Moved(path: destination, reason: reason)
    }

    /// Now as `20261124T042233Z`.
    private static func utcStamp() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y%m%dT%H%M%SZ", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
