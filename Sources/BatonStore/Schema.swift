
/// The database schema, one migration per version; never edit a shipped migration.
enum Schema {
    static var migrator: Migrator {
        var migrator = Migrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE activity_type (
                    type TEXT PRIMARY KEY NOT NULL,
                    app_id TEXT NOT NULL,
                    title TEXT NOT NULL,
                    handler TEXT,
                    handler_path TEXT NOT NULL,
                    required_keys TEXT NOT NULL,       -- unit-separator (U+001F) joined
                    payload_type TEXT
                );

                CREATE TABLE scene (
                    id TEXT PRIMARY KEY NOT NULL,
                    app_id TEXT NOT NULL,
                    title TEXT NOT NULL,
                    activity_id TEXT,
                    created_at INTEGER NOT NULL,
                    last_active_at INTEGER NOT NULL
                );
                CREATE INDEX scene_app ON scene(app_id, created_at);

                -- seq keeps insertion order and is the stable rowid the search index refers to.
                CREATE TABLE activity (
                    seq INTEGER PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    type TEXT NOT NULL REFERENCES activity_type(type) ON DELETE CASCADE,
                    app_id TEXT NOT NULL,
                    title TEXT NOT NULL,
                    payload TEXT NOT NULL,
                    payload_type TEXT,
                    target_content_id TEXT,
                    persistent_id TEXT,
                    keywords TEXT NOT NULL,            -- unit-separator (U+001F) joined
                    webpage_url TEXT,
                    eligible_for_handoff INTEGER NOT NULL,
                    eligible_for_search INTEGER NOT NULL,
                    scene_id TEXT REFERENCES scene(id) ON DELETE SET NULL,
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL,
                    expires_at INTEGER
                );
                CREATE INDEX activity_app ON activity(app_id, seq);
                CREATE INDEX activity_type_index ON activity(type);
                CREATE INDEX activity_scene ON activity(scene_id) WHERE scene_id IS NOT NULL;
                CREATE INDEX activity_persistent ON activity(persistent_id) WHERE persistent_id IS NOT NULL;
                CREATE INDEX activity_expiry ON activity(expires_at) WHERE expires_at IS NOT NULL;

                CREATE VIRTUAL TABLE activity_search USING fts5(
                    title, keywords, content='activity', content_rowid='seq', tokenize='unicode61 remove_diacritics 2'
                );
                CREATE TRIGGER activity_search_insert AFTER INSERT ON activity BEGIN
                    INSERT INTO activity_search(rowid, title, keywords) VALUES (new.seq, new.title, new.keywords);
                END;
                CREATE TRIGGER activity_search_delete AFTER DELETE ON activity BEGIN
                    INSERT INTO activity_search(activity_search, rowid, title, keywords) VALUES ('delete', old.seq, old.title, old.keywords);
                END;
                CREATE TRIGGER activity_search_update AFTER UPDATE OF title, keywords ON activity BEGIN
                    INSERT INTO activity_search(activity_search, rowid, title, keywords) VALUES ('delete', old.seq, old.title, old.keywords);
                    INSERT INTO activity_search(rowid, title, keywords) VALUES (new.seq, new.title, new.keywords);
                END;

                -- Live activities per app, kept by triggers so the quota check is one lookup.
                CREATE TABLE app_activity_count (
                    app_id TEXT PRIMARY KEY NOT NULL,
                    count INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE TRIGGER activity_count_insert AFTER INSERT ON activity BEGIN
                    INSERT INTO app_activity_count (app_id, count) VALUES (new.app_id, 1)
                        ON CONFLICT(app_id) DO UPDATE SET count = count + 1;
                END;
                CREATE TRIGGER activity_count_delete AFTER DELETE ON activity BEGIN
                    UPDATE app_activity_count SET count = count - 1 WHERE app_id = old.app_id;
                END;
                CREATE TRIGGER activity_count_move AFTER UPDATE OF app_id ON activity BEGIN
                    UPDATE app_activity_count SET count = count - 1 WHERE app_id = old.app_id;
                    INSERT INTO app_activity_count (app_id, count) VALUES (new.app_id, 1)
                        ON CONFLICT(app_id) DO UPDATE SET count = count + 1;
                END;

                -- A scene's current activity goes when the activity does, however it is removed.
                CREATE TRIGGER activity_clear_scene AFTER DELETE ON activity BEGIN
                    UPDATE scene SET activity_id = NULL WHERE activity_id = old.id;
                END;

                CREATE TABLE scene_storage (
                    scene_id TEXT NOT NULL REFERENCES scene(id) ON DELETE CASCADE,
                    key TEXT NOT NULL,
                    kind INTEGER NOT NULL,             -- StorageKind
                    value,                             -- no declared type: no affinity, so "42" stays text
                    size INTEGER NOT NULL,             -- bytes of key and value, for the per-scene limit
                    PRIMARY KEY (scene_id, key)
                ) WITHOUT ROWID;
                """)
        }
        // v2: the search index holds only search-eligible activities. In v1 it held every
        // activity and Search dropped the ineligible ones afterwards, so a query matching
        // 10 000 private titles ranked all of them to return one (5.7 ms a call).
        // With external content, FTS5 must be told to delete exactly what it indexed:
        // each trigger acts only on rows that were (or become) eligible.
        migrator.registerMigration("v2") { db in
            try db.execute(sql: """
                DROP TRIGGER activity_search_insert;
                DROP TRIGGER activity_search_delete;
                DROP TRIGGER activity_search_update;
                INSERT INTO activity_search(activity_search) VALUES ('delete-all');
                INSERT INTO activity_search(rowid, title, keywords)
                    SELECT seq, title, keywords FROM activity WHERE eligible_for_search = 1;
                CREATE TRIGGER activity_search_insert AFTER INSERT ON activity WHEN new.eligible_for_search = 1 BEGIN
                    INSERT INTO activity_search(rowid, title, keywords) VALUES (new.seq, new.title, new.keywords);
                END;
                CREATE TRIGGER activity_search_delete AFTER DELETE ON activity WHEN old.eligible_for_search = 1 BEGIN
                    INSERT INTO activity_search(activity_search, rowid, title, keywords) VALUES ('delete', old.seq, old.title, old.keywords);
                END;
                -- One trigger, so the old entry is deleted before the new one is added.
                CREATE TRIGGER activity_search_update AFTER UPDATE OF title, keywords, eligible_for_search ON activity BEGIN
                    INSERT INTO activity_search(activity_search, rowid, title, keywords)
                        SELECT 'delete', old.seq, old.title, old.keywords WHERE old.eligible_for_search = 1;
                    INSERT INTO activity_search(rowid, title, keywords)
                        SELECT new.seq, new.title, new.keywords WHERE new.eligible_for_search = 1;
                END;
                """)
        }
        migrator.registerMigration("v3") { db in
            // Search, made cheap for broad queries (issue #6):
            // - Prefix indexes for every length from 2 to 8. FTS5 answers `word*` from a
            //   prefix index only when the word is exactly an indexed length; otherwise it
            //   gathers every matching term's entries first, 0.4 ms for a word matching
            //   10 000 activities, however few results were asked for.
            // - A second index of titles alone, so "title matches first" is a query of its
            //   own. A column filter on the shared index read every match's positions:
            //   0.2–0.3 ms when nothing matched in titles.
            try db.execute(sql: """
                DROP TRIGGER activity_search_insert;
                DROP TRIGGER activity_search_delete;
                DROP TRIGGER activity_search_update;
                DROP TABLE activity_search;
                CREATE VIRTUAL TABLE activity_search USING fts5(
                    title, keywords, content='activity', content_rowid='seq', tokenize='unicode61 remove_diacritics 2',
                    prefix='2 3 4 5 6 7 8'
                );
                CREATE VIRTUAL TABLE activity_title_search USING fts5(
                    title, content='activity', content_rowid='seq', tokenize='unicode61 remove_diacritics 2',
                    prefix='2 3 4 5 6 7 8'
                );
                INSERT INTO activity_search(rowid, title, keywords)
                    SELECT seq, title, keywords FROM activity WHERE eligible_for_search = 1;
                INSERT INTO activity_title_search(rowid, title)
                    SELECT seq, title FROM activity WHERE eligible_for_search = 1;
                CREATE TRIGGER activity_search_insert AFTER INSERT ON activity WHEN new.eligible_for_search = 1 BEGIN
                    INSERT INTO activity_search(rowid, title, keywords) VALUES (new.seq, new.title, new.keywords);
                    INSERT INTO activity_title_search(rowid, title) VALUES (new.seq, new.title);
                END;
                CREATE TRIGGER activity_search_delete AFTER DELETE ON activity WHEN old.eligible_for_search = 1 BEGIN
                    INSERT INTO activity_search(activity_search, rowid, title, keywords) VALUES ('delete', old.seq, old.title, old.keywords);
                    INSERT INTO activity_title_search(activity_title_search, rowid, title) VALUES ('delete', old.seq, old.title);
                END;
                CREATE TRIGGER activity_search_update AFTER UPDATE OF title, keywords, eligible_for_search ON activity BEGIN
                    INSERT INTO activity_search(activity_search, rowid, title, keywords)
                        SELECT 'delete', old.seq, old.title, old.keywords WHERE old.eligible_for_search = 1;
                    INSERT INTO activity_title_search(activity_title_search, rowid, title)
                        SELECT 'delete', old.seq, old.title WHERE old.eligible_for_search = 1;
                    INSERT INTO activity_search(rowid, title, keywords)
                        SELECT new.seq, new.title, new.keywords WHERE new.eligible_for_search = 1;
                    INSERT INTO activity_title_search(rowid, title)
                        SELECT new.seq, new.title WHERE new.eligible_for_search = 1;
                END;
                """)
        }
        // v4: scenes indexed by their current activity. `activity_clear_scene` looks them
        // up on every activity delete (each quota trim); without it, each delete scanned
        // every scene: Advertise at the quota fell from about 5 000/s to 1 600/s with
        // 7 000 scenes stored. For a while the index was created inside v2, an edit made
        // after v2 had shipped, so databases migrated to v2 before that edit lack it and
        // databases migrated after it have it: hence IF NOT EXISTS.
        migrator.registerMigration("v4") { db in
            try db.execute(sql: "CREATE INDEX IF NOT EXISTS scene_activity ON scene(activity_id) WHERE activity_id IS NOT NULL")
        }
        // v5: `activity_clear_scene` runs its UPDATE only when a scene refers to the
        // activity. The UPDATE changes the column it looks scenes up by, so SQLite
        // collects their rowids in a temporary table first: 87 KB of page cache
        // allocated and freed on every activity delete (each quota trim), even when no
        // scene matched, and glibc handed that memory back to the kernel each time.
        // Advertise at the quota, 64 in flight: 5 to 6 page faults per call before, none
        // after; batond's CPU per call 140-170 µs before, 115-120 µs after.
        migrator.registerMigration("v5") { db in
            try db.execute(sql: """
                DROP TRIGGER activity_clear_scene;
                CREATE TRIGGER activity_clear_scene AFTER DELETE ON activity
                WHEN EXISTS (SELECT 1 FROM scene WHERE activity_id = old.id) BEGIN
                    UPDATE scene SET activity_id = NULL WHERE activity_id = old.id;
                END;
                """)
        }
        // v6: idempotent writes. A write given a request_id records its result here, in its
        // own transaction; a repeat within a day returns it and writes nothing.
        migrator.registerMigration("v6") { db in
            try db.execute(sql: """
                CREATE TABLE request (
                    request_id TEXT PRIMARY KEY NOT NULL,
                    method TEXT NOT NULL,
                    result TEXT NOT NULL,              -- the first call's reply: an id, or empty
                    created_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE INDEX request_age ON request(created_at);
                """)
        }
        // Routing a continuation to the scene that already shows its content: the content
        // ids a scene says it handles, and the activities by content id.
        migrator.registerMigration("v7") { db in
            try db.execute(sql: """
                CREATE TABLE scene_content (
                    scene_id TEXT NOT NULL REFERENCES scene(id) ON DELETE CASCADE,
                    content_id TEXT NOT NULL,
                    PRIMARY KEY (scene_id, content_id)
                ) WITHOUT ROWID;
                CREATE INDEX scene_content_by_content ON scene_content(content_id);
                CREATE INDEX activity_content ON activity(target_content_id) WHERE target_content_id IS NOT NULL;
                """)
        }
        // Durable continuations: a scene's state, and the continuation waiting for its app.
        migrator.registerMigration("v8") { db in
            try db.execute(sql: """
                ALTER TABLE scene ADD COLUMN state TEXT NOT NULL DEFAULT 'ready';
                CREATE TABLE continuation (
                    scene_id TEXT PRIMARY KEY NOT NULL REFERENCES scene(id) ON DELETE CASCADE,
                    activity_id TEXT NOT NULL,
                    created_scene INTEGER NOT NULL,    -- 1: the scene was opened for it
                    requested_at INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    last_error TEXT
                ) WITHOUT ROWID;
                CREATE INDEX continuation_age ON continuation(requested_at);
                """)
        }
        // Restoring an app's scenes: why each comes back, how often in a row as `recover`
        // without the app acknowledging it, and how each app's last run ended.
        migrator.registerMigration("v9") { db in
            try db.execute(sql: """
                ALTER TABLE scene ADD COLUMN restore_reason TEXT NOT NULL DEFAULT 'launch';
                ALTER TABLE scene ADD COLUMN handed_out INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE scene ADD COLUMN recover_count INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE app_session (
                    app_id TEXT PRIMARY KEY NOT NULL,
                    instance TEXT NOT NULL,        -- the unique bus name of its last RestoreScenes
                    state TEXT NOT NULL            -- attached, detached (clean exit), vanished
                ) WITHOUT ROWID;
                """)
        }
        // Explain: what batond remembers of activities that ended, and of each activity's
        // last continuation, for at least a week.
        migrator.registerMigration("v10") { db in
            try db.execute(sql: """
                CREATE TABLE tombstone (
                    activity_id TEXT PRIMARY KEY NOT NULL,
                    app_id TEXT NOT NULL,
                    type TEXT NOT NULL,
                    state TEXT NOT NULL,           -- expired, invalidated, evicted
                    reason TEXT NOT NULL,          -- a sentence
                    ended_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE INDEX tombstone_age ON tombstone(ended_at);
                CREATE TABLE continuation_outcome (
                    activity_id TEXT PRIMARY KEY NOT NULL,
                    scene_id TEXT NOT NULL,
                    state TEXT NOT NULL,           -- pending, ready, refused, failed, discarded
                    error TEXT,
                    at INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE INDEX continuation_outcome_age ON continuation_outcome(at);
                """)
        }
        // Sync across machines. Activities gain the device that advertised them
        // (empty: this machine), and the table is rebuilt without the foreign key to
        // `activity_type`: another device's activity may be of a type no app here registered.
        // A trigger removes this machine's activities with their type, as the key's cascade
        // did; quotas count this machine's activities only. The sync tables: the device's own
        // identity (a row only while sync is on), the outbox, a cursor per other device's
        // log, and what the other devices said about themselves and their types.
        migrator.registerMigration("v11") { db in
            let columns = "seq, id, type, app_id, title, payload, payload_type, target_content_id, persistent_id, keywords, "
                + "webpage_url, eligible_for_handoff, eligible_for_search, scene_id, created_at, updated_at, expires_at"
            try db.execute(sql: """
                CREATE TABLE activity_v11 (
                    seq INTEGER PRIMARY KEY,
                    id TEXT NOT NULL UNIQUE,
                    type TEXT NOT NULL,
                    app_id TEXT NOT NULL,
                    title TEXT NOT NULL,
                    payload TEXT NOT NULL,
                    payload_type TEXT,
                    target_content_id TEXT,
                    persistent_id TEXT,
                    keywords TEXT NOT NULL,            -- unit-separator (U+001F) joined
                    webpage_url TEXT,
                    eligible_for_handoff INTEGER NOT NULL,
                    eligible_for_search INTEGER NOT NULL,
                    scene_id TEXT REFERENCES scene(id) ON DELETE SET NULL,
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL,
                    expires_at INTEGER,
                    device_id TEXT NOT NULL DEFAULT '' -- '' for this machine's; else the sync id of the device that advertised it
                );
                INSERT INTO activity_v11 (\(columns)) SELECT \(columns) FROM activity;
                DROP TABLE activity;
                ALTER TABLE activity_v11 RENAME TO activity;

                CREATE INDEX activity_app ON activity(app_id, seq);
                CREATE INDEX activity_type_index ON activity(type);
                CREATE INDEX activity_scene ON activity(scene_id) WHERE scene_id IS NOT NULL;
                CREATE INDEX activity_persistent ON activity(persistent_id) WHERE persistent_id IS NOT NULL;
                CREATE INDEX activity_expiry ON activity(expires_at) WHERE expires_at IS NOT NULL;
                CREATE INDEX activity_content ON activity(target_content_id) WHERE target_content_id IS NOT NULL;
                CREATE INDEX activity_device ON activity(device_id) WHERE device_id <> '';

                CREATE TRIGGER activity_search_insert AFTER INSERT ON activity WHEN new.eligible_for_search = 1 BEGIN
                    INSERT INTO activity_search(rowid, title, keywords) VALUES (new.seq, new.title, new.keywords);
                    INSERT INTO activity_title_search(rowid, title) VALUES (new.seq, new.title);
                END;
                CREATE TRIGGER activity_search_delete AFTER DELETE ON activity WHEN old.eligible_for_search = 1 BEGIN
                    INSERT INTO activity_search(activity_search, rowid, title, keywords) VALUES ('delete', old.seq, old.title, old.keywords);
                    INSERT INTO activity_title_search(activity_title_search, rowid, title) VALUES ('delete', old.seq, old.title);
                END;
                CREATE TRIGGER activity_search_update AFTER UPDATE OF title, keywords, eligible_for_search ON activity BEGIN
                    INSERT INTO activity_search(activity_search, rowid, title, keywords)
                        SELECT 'delete', old.seq, old.title, old.keywords WHERE old.eligible_for_search = 1;
                    INSERT INTO activity_title_search(activity_title_search, rowid, title)
                        SELECT 'delete', old.seq, old.title WHERE old.eligible_for_search = 1;
                    INSERT INTO activity_search(rowid, title, keywords)
                        SELECT new.seq, new.title, new.keywords WHERE new.eligible_for_search = 1;
                    INSERT INTO activity_title_search(rowid, title)
                        SELECT new.seq, new.title WHERE new.eligible_for_search = 1;
                END;

                DELETE FROM app_activity_count;
                INSERT INTO app_activity_count (app_id, count) SELECT app_id, count(*) FROM activity GROUP BY app_id;
                CREATE TRIGGER activity_count_insert AFTER INSERT ON activity WHEN new.device_id = '' BEGIN
                    INSERT INTO app_activity_count (app_id, count) VALUES (new.app_id, 1)
                        ON CONFLICT(app_id) DO UPDATE SET count = count + 1;
                END;
                CREATE TRIGGER activity_count_delete AFTER DELETE ON activity WHEN old.device_id = '' BEGIN
                    UPDATE app_activity_count SET count = count - 1 WHERE app_id = old.app_id;
                END;
                CREATE TRIGGER activity_count_move AFTER UPDATE OF app_id ON activity WHEN new.device_id = '' BEGIN
                    UPDATE app_activity_count SET count = count - 1 WHERE app_id = old.app_id;
                    INSERT INTO app_activity_count (app_id, count) VALUES (new.app_id, 1)
                        ON CONFLICT(app_id) DO UPDATE SET count = count + 1;
                END;

                CREATE TRIGGER activity_clear_scene AFTER DELETE ON activity
                WHEN EXISTS (SELECT 1 FROM scene WHERE activity_id = old.id) BEGIN
                    UPDATE scene SET activity_id = NULL WHERE activity_id = old.id;
                END;
                CREATE TRIGGER activity_type_gone AFTER DELETE ON activity_type BEGIN
                    DELETE FROM activity WHERE type = old.type AND device_id = '';
                END;

                CREATE TABLE sync_state (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    device_id TEXT NOT NULL,
                    user_name TEXT NOT NULL,
                    last_log_seq INTEGER NOT NULL DEFAULT 0   -- the last seq given to a record of this device's log
                );
                -- What changed since the server last had it: the kind and key of each change.
                -- A batch is staged (log_seq and record set) before it is sent, and sent again
                -- as staged until the server has it, so a retry never sends different content.
                CREATE TABLE outbox (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    kind TEXT NOT NULL,                      -- activity, type
                    key TEXT NOT NULL,                       -- the activity's id, the type's name
                    at INTEGER NOT NULL,
                    log_seq INTEGER,
                    record BLOB
                );
                CREATE TABLE sync_cursor (
                    device_id TEXT PRIMARY KEY NOT NULL,
                    seq INTEGER NOT NULL                     -- the last record of its log applied here
                ) WITHOUT ROWID;
                CREATE TABLE remote_device (
                    device_id TEXT PRIMARY KEY NOT NULL,
                    name TEXT NOT NULL,
                    last_seen INTEGER NOT NULL,
                    revoked INTEGER NOT NULL DEFAULT 0
                ) WITHOUT ROWID;
                CREATE TABLE remote_type (
                    device_id TEXT NOT NULL,
                    type TEXT NOT NULL,
                    app_id TEXT NOT NULL,
                    PRIMARY KEY (device_id, type)
                ) WITHOUT ROWID;
                """)
        }
        // Requests between devices: an outbox row may carry a record of its own
        // (a continuation asked of another machine, or told to the activity's origin) rather
        // than name an activity or type to send as it is now.
        migrator.registerMigration("v12") { db in
            try db.execute(sql: "ALTER TABLE outbox ADD COLUMN body BLOB")
        }
        // Hybrid-logical-clock times, which settle races between machines: of each change in
        // the outbox (stamped when it commits), of the last change of each of this machine's
        // activities that was sent, and of this machine's request to end another machine's
        // activity, which a later change by its writer overrides (NULL: the end is final).
        migrator.registerMigration("v13") { db in
            try db.execute(sql: """
                ALTER TABLE outbox ADD COLUMN hlc INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE activity ADD COLUMN hlc INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE tombstone ADD COLUMN requested_hlc INTEGER;
                """)
        }
        // The history: activities that ended, kept to be found and continued (Store+History).
        // `size` is what a row counts against the history's size limit; `history_size` sums it.
        migrator.registerMigration("v14") { db in
            try db.execute(sql: """
                ALTER TABLE activity ADD COLUMN eligible_for_history INTEGER NOT NULL DEFAULT 1;
                CREATE TABLE history (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    id TEXT NOT NULL UNIQUE,
                    type TEXT NOT NULL,
                    app_id TEXT NOT NULL,
                    title TEXT NOT NULL,
                    payload TEXT NOT NULL,
                    payload_type TEXT,
                    target_content_id TEXT,
                    persistent_id TEXT,
                    keywords TEXT NOT NULL,
                    webpage_url TEXT,
                    eligible_for_handoff INTEGER NOT NULL,
                    eligible_for_search INTEGER NOT NULL,
                    scene_id TEXT,                     -- always NULL: scenes stay with the live activity
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL,
                    expires_at INTEGER,
                    device_id TEXT NOT NULL,
                    eligible_for_history INTEGER NOT NULL,
                    ended_at INTEGER NOT NULL,
                    end_state TEXT NOT NULL,           -- invalidated, expired, evicted
                    end_reason TEXT NOT NULL,          -- a sentence
                    size INTEGER NOT NULL
                );
                CREATE INDEX history_ended ON history(ended_at);
                CREATE INDEX history_app ON history(app_id, seq);
                CREATE TABLE history_size (id INTEGER PRIMARY KEY CHECK (id = 1), bytes INTEGER NOT NULL);
                INSERT INTO history_size VALUES (1, 0);
                CREATE TRIGGER history_size_insert AFTER INSERT ON history BEGIN
                    UPDATE history_size SET bytes = bytes + new.size;
                END;
                CREATE TRIGGER history_size_delete AFTER DELETE ON history BEGIN
                    UPDATE history_size SET bytes = bytes - old.size;
                END;
                CREATE VIRTUAL TABLE history_search USING fts5(
                    title, keywords, content='history', content_rowid='seq', tokenize='unicode61 remove_diacritics 2',
                    prefix='2 3 4 5 6 7 8'
                );
                CREATE TRIGGER history_search_insert AFTER INSERT ON history WHEN new.eligible_for_search = 1 BEGIN
                    INSERT INTO history_search(rowid, title, keywords) VALUES (new.seq, new.title, new.keywords);
                END;
                CREATE TRIGGER history_search_delete AFTER DELETE ON history WHEN old.eligible_for_search = 1 BEGIN
                    INSERT INTO history_search(history_search, rowid, title, keywords) VALUES ('delete', old.seq, old.title, old.keywords);
                END;
                """)
        }
        // Apps the user blocked: their Advertise is refused (Store+Privacy).
        migrator.registerMigration("v15") { db in
            try db.execute(sql: """
                CREATE TABLE blocked_app (
                    app_id TEXT PRIMARY KEY NOT NULL,
                    blocked_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                """)
        }
        // Whether the user paused recording, and until when (0: until Resume); one row while paused.
        migrator.registerMigration("v16") { db in
            try db.execute(sql: "CREATE TABLE pause (id INTEGER PRIMARY KEY CHECK (id = 1), until INTEGER NOT NULL)")
        }
        // The newest hybrid-logical-clock time this device sent, for its clock at the next start.
        migrator.registerMigration("v17") { db in
            try db.execute(sql: "ALTER TABLE sync_state ADD COLUMN last_hlc INTEGER NOT NULL DEFAULT 0")
        }
        // The user turned notifications of other machines' activities off (one row); on without it.
        migrator.registerMigration("v18") { db in
            try db.execute(sql: "CREATE TABLE notifications_off (id INTEGER PRIMARY KEY CHECK (id = 1))")
        }
        // The sources the user turned on (a row each), with the time up to which each has read.
        migrator.registerMigration("v19") { db in
            try db.execute(sql: "CREATE TABLE source_on (name TEXT PRIMARY KEY, read_until INTEGER NOT NULL)")
        }
        // This machine's requests that another machine end its activity, kept after they were
        // sent so that a snapshot of the log (compaction) sends them again (`enqueueSnapshot`).
        migrator.registerMigration("v20") { db in
            try db.execute(sql: "CREATE TABLE sync_lasting_request (hlc INTEGER PRIMARY KEY, at INTEGER NOT NULL, body BLOB NOT NULL)")
        }
        // The settings the user gave a source (`Status.SetSourceSetting`); a setting not here has
        // its declared default.
        // A copy of the clipboard waiting in the outbox (sealed before it is written: its row
        // holds no content in the clear) is sent only until it expires: its outbox row's seq
        // and that time. A table beside the outbox, so that the outbox's rows stay as they were.
        migrator.registerMigration("v21") { db in
            try db.execute(sql: "CREATE TABLE source_setting (source TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (source, name))")
            try db.execute(sql: "CREATE TABLE outbox_expiry (seq INTEGER PRIMARY KEY, expires_at INTEGER NOT NULL)")
            // A copy of the clipboard in this device's log, until its record is removed from the
            // log once its time is over: where it is (its seq and time) and when that is.
            try db.execute(sql: "CREATE TABLE clipboard_sent (log_seq INTEGER PRIMARY KEY, hlc INTEGER NOT NULL, expires_at INTEGER NOT NULL)")
        }
        // The record an outbox row carries (a request, a copy of the clipboard), beside the row
        // rather than in it: staging sets the row's log_seq, and SQLite rewrites a whole row to
        // change one column — a 300 KB copy's overflow pages written again, and the old ones
        // zeroed (secure_delete). Rows written before keep theirs in outbox.body.
        migrator.registerMigration("v22") { db in
            try db.execute(sql: "CREATE TABLE outbox_body (seq INTEGER PRIMARY KEY REFERENCES outbox(seq) ON DELETE CASCADE, body BLOB NOT NULL)")
        }
        return migrator
    }
}
