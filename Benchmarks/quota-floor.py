#!/usr/bin/python3
"""The floor under Benchmarks/quota-cost: SQLite alone (the same library batond uses, no bus,
no Swift), doing only the writes of an Advertise below an app's quota and at it.

Each database holds one app's 10 000 live activities (200 B payloads, time-ordered ids, as batond's
`activity` table is indexed: by id, by app, by type). Below the quota, a call inserts one row;
at it, the call also deletes the app's oldest row (the eviction at its barest), then adds what
batond keeps of it: a tombstone (by id, with an age index), a history row (by id, with an index
by end time), and the history as batond keeps it (its index by app, its running size row, and
AUTOINCREMENT). WAL, synchronous=NORMAL, secure_delete on, statement journals in memory, as
batond's writer. One call per transaction (as sequential calls commit) and 32 per transaction
(as group commit takes a burst). Prints CPU per call (user + kernel) and the ratio to an insert
alone, median of 5 interleaved rounds.

Usage: Benchmarks/quota-floor.py   (about a minute here)
"""
import os
import resource
import sqlite3
import statistics
import tempfile
import time
import uuid

PAYLOAD = "x" * 200
LIVE = 10_000

# name: (what happens beside the insert, the history table's extra parts)
VARIANTS = {
    "insert (below the quota)": ([], ""),
    "+ delete the oldest": (["evict"], ""),
    "+ tombstone": (["evict", "tombstone"], ""),
    "+ history row": (["evict", "tombstone", "history"], ""),
    "+ history as batond keeps it": (["evict", "tombstone", "history"], "batond"),
}


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def database(directory, history_shape):
    path = os.path.join(tempfile.mkdtemp(dir=directory), "floor.sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    for pragma in ["journal_mode = WAL", "synchronous = NORMAL", "secure_delete = ON", "temp_store = MEMORY"]:
        db.execute("PRAGMA " + pragma)
    autoincrement = "AUTOINCREMENT" if history_shape == "batond" else ""
    db.executescript(f"""
        CREATE TABLE activity (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, app_id TEXT NOT NULL,
                               type TEXT NOT NULL, payload TEXT NOT NULL);
        CREATE INDEX activity_app ON activity(app_id, seq);
        CREATE INDEX activity_type ON activity(type);
        CREATE TABLE tombstone (id TEXT PRIMARY KEY, ended_at INTEGER NOT NULL) WITHOUT ROWID;
        CREATE INDEX tombstone_age ON tombstone(ended_at);
        CREATE TABLE history (seq INTEGER PRIMARY KEY {autoincrement}, id TEXT NOT NULL UNIQUE, app_id TEXT NOT NULL,
                              payload TEXT NOT NULL, ended_at INTEGER NOT NULL, size INTEGER NOT NULL);
        CREATE INDEX history_ended ON history(ended_at);
        """)
    if history_shape == "batond":
        # As Sources/BatonStore/Schema.swift's migration v14 makes them (a copy on purpose: the floor
        # must write what batond writes).
        db.executescript("""
            CREATE INDEX history_app ON history(app_id, seq);
            CREATE TABLE history_size (id INTEGER PRIMARY KEY CHECK (id = 1), bytes INTEGER NOT NULL);
            INSERT INTO history_size VALUES (1, 0);
            CREATE TRIGGER history_size_insert AFTER INSERT ON history BEGIN
                UPDATE history_size SET bytes = bytes + new.size;
            END;
            """)
    db.execute("BEGIN")
    for _ in range(LIVE):
        insert(db)
    db.execute("COMMIT")
    return db


def new_id():
    """A time-ordered id as batond makes them (Identifier.make, RFC 9562 version 7): 48 bits of
    milliseconds, 12 bits of the sub-millisecond time, random bits; in order of creation."""
    microseconds = time.time_ns() // 1_000
    high = (microseconds // 1_000 & 0xFFFF_FFFF_FFFF) << 16 | 0x7000 | microseconds % 1_000 * 4_096 // 1_000
    low = int.from_bytes(os.urandom(8), "big") & ~(0xC0 << 56) | (0x80 << 56)
    return str(uuid.UUID(int=high << 64 | low))


def insert(db):
    db.execute("INSERT INTO activity (id, app_id, type, payload) VALUES (?, 'app', 'app.type', ?)", (new_id(), PAYLOAD))


def call(db, steps, n):
    insert(db)
    if "evict" not in steps:
        return
    seq, id, payload = db.execute("SELECT seq, id, payload FROM activity WHERE app_id = 'app' ORDER BY seq LIMIT 1").fetchone()
    db.execute("DELETE FROM activity WHERE seq = ?", (seq,))
    if "tombstone" in steps:
        db.execute("INSERT OR REPLACE INTO tombstone VALUES (?, ?)", (id, n))
    if "history" in steps:
        db.execute("INSERT INTO history (id, app_id, payload, ended_at, size) VALUES (?, 'app', ?, ?, 456)", (id, payload, n))


def round_of(db, steps, per_transaction, calls=1_600):
    started = cpu_seconds()
    for first in range(0, calls, per_transaction):
        db.execute("BEGIN IMMEDIATE")
        for n in range(first, first + per_transaction):
            call(db, steps, n)
        db.execute("COMMIT")
    return (cpu_seconds() - started) / calls * 1e6


def main():
    # The databases (a few MB each) go with the directory when the run ends.
    with tempfile.TemporaryDirectory(prefix="quota-floor-") as directory:
        for per_transaction in (1, 32):
            measure(directory, per_transaction)


def measure(directory, per_transaction):
    """Prints CPU per call for each variant, `per_transaction` calls in each transaction."""
    databases = {name: database(directory, shape) for name, (_, shape) in VARIANTS.items()}
    times = {name: [] for name in VARIANTS}
    for _ in range(5):
        for name, (steps, _) in VARIANTS.items():
            times[name].append(round_of(databases[name], steps, per_transaction))
    base = statistics.median(times["insert (below the quota)"])
    print(f"{per_transaction} call(s) per transaction, CPU per call (median of 5, range):")
    for name, each in times.items():
        median = statistics.median(each)
        print(f"  {name:30} {median:6.1f} µs ({min(each):.1f}-{max(each):.1f})  {median / base:.2f}×")


if __name__ == "__main__":
    main()
