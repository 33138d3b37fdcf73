import Dispatch
import CSQLite
import Synchronization

/// Copies the write-ahead log back into the database file on a thread of its own, so
/// that commits seldom wait for it.
///
/// SQLite's automatic checkpoint runs inside the commit that crosses 1 000 WAL pages, and
/// that caller waits while pages are copied and the file synced. With large payloads
/// (32 KB Advertise calls filling the WAL) that put 10–17 ms p99 on every kind of write
/// in `scripts/bench`. Here the writer's WAL hook only notes the size; a passive
/// checkpoint on a separate connection runs concurrently with later commits. Only past
/// `pagesBeforeWriterCheckpoints` does the writer checkpoint itself.
final class Checkpointer: Sendable {
    /// WAL pages after a commit that start a checkpoint (SQLite's automatic default).
    static let pagesBeforeCheckpoint: Int32 = 1_000
    /// WAL pages after which the committing writer checkpoints itself, as SQLite would.
    /// The WAL starts over only after a checkpoint that copied every frame, which one
    /// running beside a steady stream of commits never does: advertising 100 000
    /// activities left a 409 MB WAL. By then the background has copied most frames,
    /// so this one is short.
    static let pagesBeforeWriterCheckpoints: Int32 = 4_000

    /// The checkpoint connection, opened on first use; used on `queue` only, the lock is for `close()`.
    private struct Connection: ~Copyable {
        var database: OpaquePointer?
        var closed = false
        deinit { sqlite3_close_v2(database) }
    }

    private let connection: Mutex<Connection>
    /// True from a commit's request until its checkpoint starts. An atomic, not the
    /// connection's lock: the request comes from inside a commit, which must not wait
    /// for a checkpoint in progress.
    private let scheduled = Atomic(false)
    /// The WAL's size in pages when the last checkpoint was asked for. While commits keep
    /// coming, a passive checkpoint cannot let the WAL start over, so its size keeps
    /// rising; without this, every commit past 1 000 pages asked for another checkpoint
    /// (and two fsyncs), back to back.
    private let requestedAt = Atomic<Int32>(0)
    private let queue = DispatchQueue(label: "org.baton.checkpoints", qos: .utility)

    private let path: String

    /// A checkpointer for the database at `path`. Its connection opens at the first
    /// checkpoint: a connection that reads the file before it is in WAL mode keeps
    /// treating it as a rollback-journal database, and its checkpoints do nothing.
    init(path: String) {
        self.path = path
        connection = Mutex(Connection())
    }

    /// Makes `writer` hand its checkpoints to this object instead of running them itself.
    /// The checkpointer must outlive the connection (the store owns both).
    func attach(to writer: OpaquePointer) {
        sqlite3_wal_hook(writer, { context, writer, _, pages in
            if pages >= Checkpointer.pagesBeforeWriterCheckpoints {
                // On the writer, inside its commit, like SQLite's own automatic checkpoint.
                sqlite3_wal_checkpoint_v2(writer, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            } else if let context {
                Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().walGrew(to: pages)
            }
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Called after each commit (on the writer's thread) with the WAL's size in pages.
    private func walGrew(to pages: Int32) {
        var since = requestedAt.load(ordering: .relaxed)
        if pages < since {
            // The WAL started over after a complete checkpoint.
            since = 0
            requestedAt.store(0, ordering: .relaxed)
        }
        guard pages - since >= Self.pagesBeforeCheckpoint else { return }
        requestedAt.store(pages, ordering: .relaxed)
        schedule()
    }

    /// Starts one passive checkpoint unless one is already waiting to run.
    private func schedule() {
        guard scheduled.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        queue.async { self.checkpoint() }
    }

    private func checkpoint() {
        scheduled.store(false, ordering: .releasing)
        connection.withLock { connection in
            guard !connection.closed else { return }
            if connection.database == nil {
                guard sqlite3_open_v2(path, &connection.database, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK else {
                    // Left for the next request to try again; until then the WAL grows.
                    sqlite3_close_v2(connection.database)
                    connection.database = nil
                    return
                }
                // A checkpoint copies frames through a buffer; it needs no cache of its own.
                sqlite3_exec(connection.database, "PRAGMA cache_size = -64", nil, nil, nil)
            }
            guard let database = connection.database else { return }
            // PASSIVE: copies frames no reader still needs, without blocking anyone. A
            // failure (the disk, say) leaves the WAL to grow and the next commit to retry.
            // The pragma, not sqlite3_wal_checkpoint_v2: a connection that has read nothing
            // yet does not know the file is in WAL mode, and the C call then does nothing.
            sqlite3_exec(database, "PRAGMA wal_checkpoint(PASSIVE)", nil, nil, nil)
        }
    }

    /// Returns once every checkpoint requested so far has run.
    func waitUntilIdle() {
        queue.sync {}
    }

    /// Waits for a checkpoint in progress and closes the connection; later requests are ignored.
    func close() {
        waitUntilIdle()
        connection.withLock { connection in
            sqlite3_close_v2(connection.database)
            connection.database = nil
            connection.closed = true
        }
    }
}
