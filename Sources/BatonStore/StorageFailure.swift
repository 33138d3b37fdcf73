import BatonCore
import CSQLite
import Glibc

/// SQLite's failures that the machine explains rather than a bug, as the named errors
/// callers get (`StorageFull`, `StorageUnavailable`, `StorageCorrupt`). Everything else
/// stays an `SQLiteError`, which the service replies as `Failed`: a bug of ours.
enum StorageFailure {
    static func named(_ error: SQLiteError, path: String) -> any Error {
        // By the primary code, the extended code's low byte (SQLITE_IOERR_WRITE is an IOERR).
        switch error.code {
        case SQLITE_FULL:
            return BatonError.storageFull("the disk holding \(path) is full; free some space and try again")
        case SQLITE_BUSY, SQLITE_LOCKED:
            return BatonError.storageUnavailable(
                "the database \(path) is locked by another program (waited \(Int(Store.lockTimeout)) s; `fuser \(path)` names it); try again")
        case SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_PROTOCOL, SQLITE_NOLFS, SQLITE_AUTH, SQLITE_ABORT:
            return BatonError.storageUnavailable(
                "the database \(path) cannot be written now (\(error.message)); check the disk and its permissions, then try again")
        case SQLITE_CORRUPT, SQLITE_NOTADB:
            return damaged(path: path)
        default:
            return error
        }
    }

    static func damaged(path: String) -> BatonError {
        .storageCorrupt("the database \(path) is damaged; batond stopped writing to it and will set it aside at its next start (baton doctor says more)")
    }

    /// The file next to the database that says it was found damaged while in use, so the
    /// next start sets it aside even if its quick check passes.
    static func marker(for path: String) -> String { path + ".damaged" }

    static func markDamaged(path: String) {
        let fd = open(marker(for: path), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        if fd >= 0 { close(fd) }
    }
}
