-- Baton's sync server: the schema, the roles and the rules that keep users apart.
-- Run once per database by its owner (scripts/sync-server-setup init); running it again changes nothing.
--
-- What the server holds: for each user, one append-only log per device of records that the device
-- sealed (encrypted and authenticated) before sending them, and the devices' public keys. It sees
-- user names, device ids, sequence numbers, times and ciphertext; never a title, payload, keyword,
-- type, URL or device name.
--
-- Who may do what (row-level security, checked by the tests in Tests/BatonSyncTests):
--   * every device logs in as a role of its own, a member of `baton_device`;
--   * `baton.member` says which user a role belongs to; only the administrator writes it;
--   * a device reads its own user's rows only, in every table;
--   * a device appends to its own log only; nobody can update or delete a record (no grant for it).

CREATE SCHEMA IF NOT EXISTS baton;
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'baton_device') THEN
        CREATE ROLE baton_device NOLOGIN;
    END IF;
END $$;
REVOKE ALL ON SCHEMA baton FROM PUBLIC;
GRANT USAGE ON SCHEMA baton TO baton_device;

-- Which user each device's login role belongs to. Written by the administrator only.
CREATE TABLE IF NOT EXISTS baton.member (
    role name PRIMARY KEY,
    user_name text NOT NULL
);

-- The user whose data the current login may see, or NULL for a role that is no member.
CREATE OR REPLACE FUNCTION baton.current_member() RETURNS text
    LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
    AS $$ SELECT user_name FROM baton.member WHERE role = current_user $$;

-- A user's key: which epoch is current, and a check value sealed with each epoch's key, so a
-- device given the wrong recovery words finds out before it writes anything.
CREATE TABLE IF NOT EXISTS baton.user_key (
    user_name text NOT NULL,
    epoch integer NOT NULL,
    check_value bytea NOT NULL,        -- a known text sealed with this epoch's key
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_name, epoch)
);

-- The devices of each user, as each joined. `sealed_name` is the device's name, encrypted.
CREATE TABLE IF NOT EXISTS baton.device (
    user_name text NOT NULL,
    device_id text NOT NULL,
    role name NOT NULL DEFAULT current_user,
    public_key bytea NOT NULL,         -- X25519: later epochs' keys are wrapped to it
    sealed_name bytea NOT NULL,
    joined_at timestamptz NOT NULL DEFAULT now(),
    last_seen timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    PRIMARY KEY (user_name, device_id)
);

-- The key epoch `sealed_name` is sealed with: each device seals its name again with the
-- newest key once it has it, so a revoked device cannot read the names of later epochs.
ALTER TABLE baton.device ADD COLUMN IF NOT EXISTS name_epoch integer NOT NULL DEFAULT 0;

-- Revocation is final, and only a device itself says when it was last seen, and its name.
CREATE OR REPLACE FUNCTION baton.guard_device() RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp
    AS $$ BEGIN
        IF OLD.revoked_at IS NOT NULL THEN NEW.revoked_at := OLD.revoked_at; END IF;
        IF OLD.role <> current_user THEN
            NEW.last_seen := OLD.last_seen;
            NEW.sealed_name := OLD.sealed_name;
            NEW.name_epoch := OLD.name_epoch;
        END IF;
        RETURN NEW;
    END $$;
DROP TRIGGER IF EXISTS device_guard ON baton.device;
CREATE TRIGGER device_guard BEFORE UPDATE ON baton.device
    FOR EACH ROW EXECUTE FUNCTION baton.guard_device();

-- Each epoch's key after the first, wrapped to each device allowed to read it.
CREATE TABLE IF NOT EXISTS baton.epoch_key (
    user_name text NOT NULL,
    epoch integer NOT NULL,
    device_id text NOT NULL,
    wrapped bytea NOT NULL,
    PRIMARY KEY (user_name, epoch, device_id)
);

-- The logs: (user, device, seq), seq assigned by the device, gapless. Readers follow each
-- device's log by seq; `committed_at` is for people, never a cursor.
CREATE TABLE IF NOT EXISTS baton.record (
    user_name text NOT NULL,
    device_id text NOT NULL,
    seq bigint NOT NULL CHECK (seq > 0),
    epoch integer NOT NULL,
    hlc bigint NOT NULL,               -- hybrid logical clock: milliseconds << 16 | counter
    sealed bytea NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_name, device_id, seq)
);

-- The last seq of each log, so that a device woken up asks one small question ("which logs
-- moved?") before reading any. Kept by the trigger below only: devices may read it, not write it.
CREATE TABLE IF NOT EXISTS baton.log_head (
    user_name text NOT NULL,
    device_id text NOT NULL,
    seq bigint NOT NULL,
    PRIMARY KEY (user_name, device_id)
);
INSERT INTO baton.log_head (user_name, device_id, seq)
    SELECT user_name, device_id, max(seq) FROM baton.record GROUP BY user_name, device_id
    ON CONFLICT (user_name, device_id) DO UPDATE SET seq = GREATEST(baton.log_head.seq, excluded.seq);

-- After each statement that appends records: moves the logs' heads, and wakes the user's
-- devices at commit, once per statement. The NOTIFY carries no content (every role can
-- LISTEN on any channel): its channel is a hash of the user's name, its payload empty.
-- SECURITY DEFINER: it writes log_head, which devices cannot.
CREATE OR REPLACE FUNCTION baton.records_appended() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $$ BEGIN
        INSERT INTO baton.log_head (user_name, device_id, seq)
            SELECT user_name, device_id, max(seq) FROM appended GROUP BY user_name, device_id
            ON CONFLICT (user_name, device_id) DO UPDATE SET seq = GREATEST(baton.log_head.seq, excluded.seq);
        PERFORM pg_notify('baton_' || md5(user_name), '') FROM (SELECT DISTINCT user_name FROM appended) AS users;
        RETURN NULL;
    END $$;
REVOKE ALL ON FUNCTION baton.records_appended() FROM PUBLIC;
DROP TRIGGER IF EXISTS record_notify ON baton.record;
DROP FUNCTION IF EXISTS baton.notify_user();
DROP TRIGGER IF EXISTS records_appended ON baton.record;
CREATE TRIGGER records_appended AFTER INSERT ON baton.record
    REFERENCING NEW TABLE AS appended FOR EACH STATEMENT EXECUTE FUNCTION baton.records_appended();

ALTER TABLE baton.member ENABLE ROW LEVEL SECURITY;
ALTER TABLE baton.user_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE baton.device ENABLE ROW LEVEL SECURITY;
ALTER TABLE baton.epoch_key ENABLE ROW LEVEL SECURITY;
ALTER TABLE baton.record ENABLE ROW LEVEL SECURITY;
ALTER TABLE baton.log_head ENABLE ROW LEVEL SECURITY;

GRANT SELECT ON baton.member TO baton_device;
GRANT SELECT, INSERT ON baton.user_key TO baton_device;
GRANT SELECT, INSERT ON baton.device TO baton_device;
GRANT UPDATE (last_seen, revoked_at, sealed_name, name_epoch) ON baton.device TO baton_device;
GRANT SELECT, INSERT ON baton.epoch_key TO baton_device;
GRANT SELECT, INSERT ON baton.record TO baton_device;
-- A device removes records of its own log: copies of the clipboard once their time is over.
GRANT DELETE ON baton.record TO baton_device;
GRANT SELECT ON baton.log_head TO baton_device;

DROP POLICY IF EXISTS own_membership ON baton.member;
CREATE POLICY own_membership ON baton.member FOR SELECT USING (role = current_user);

DROP POLICY IF EXISTS same_user ON baton.user_key;
CREATE POLICY same_user ON baton.user_key USING (user_name = baton.current_member());

DROP POLICY IF EXISTS same_user_reads ON baton.device;
CREATE POLICY same_user_reads ON baton.device FOR SELECT USING (user_name = baton.current_member());
DROP POLICY IF EXISTS joins_as_itself ON baton.device;
CREATE POLICY joins_as_itself ON baton.device FOR INSERT
    WITH CHECK (user_name = baton.current_member() AND role = current_user);
DROP POLICY IF EXISTS same_user_updates ON baton.device;
CREATE POLICY same_user_updates ON baton.device FOR UPDATE
    USING (user_name = baton.current_member()) WITH CHECK (user_name = baton.current_member());

DROP POLICY IF EXISTS same_user ON baton.epoch_key;
CREATE POLICY same_user ON baton.epoch_key USING (user_name = baton.current_member());

DROP POLICY IF EXISTS same_user_reads ON baton.record;
CREATE POLICY same_user_reads ON baton.record FOR SELECT USING (user_name = baton.current_member());
DROP POLICY IF EXISTS own_log_appends ON baton.record;
CREATE POLICY own_log_appends ON baton.record FOR INSERT WITH CHECK (
    user_name = baton.current_member()
    AND EXISTS (SELECT 1 FROM baton.device d
                WHERE d.user_name = record.user_name AND d.device_id = record.device_id
                  AND d.role = current_user AND d.revoked_at IS NULL));

DROP POLICY IF EXISTS own_log_removals ON baton.record;
CREATE POLICY own_log_removals ON baton.record FOR DELETE USING (
    user_name = baton.current_member()
    AND EXISTS (SELECT 1 FROM baton.device d
                WHERE d.user_name = record.user_name AND d.device_id = record.device_id AND d.role = current_user));

DROP POLICY IF EXISTS same_user_reads ON baton.log_head;
CREATE POLICY same_user_reads ON baton.log_head FOR SELECT USING (user_name = baton.current_member());
