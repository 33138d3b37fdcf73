import BatonCore
import Crypto

/// One connection to the sync server, and every statement Baton sends on it.
///
/// The connection is a `PGSession` (libpq on a thread of its own): each statement is answered
/// within `timeout` or the connection ends and the call throws `SyncError.server`; a broken
/// connection does the same. Statements are written here and nowhere else.
struct ServerSession: SyncTransport {
    let session: PGSession

    /// Connects, runs `body`, and closes the connection however `body` ends.
    static func with<T: Sendable>(_ server: ServerAddress, timeout: Duration, _ body: (ServerSession) async throws -> T) async throws -> T {
        let connection = try await connect(server, timeout: timeout)
        defer { connection.close() }
        return try await body(ServerSession(session: connection))
    }

    /// A connection, authenticated within `timeout`.
    static func connect(_ server: ServerAddress, timeout: Duration) async throws -> PGSession {
        do {
            return try await PGSession.connect(parameters(server), timeout: timeout)
        } catch {
            throw SyncError.server(error.message)
        }
    }

    /// Every setting libpq takes, given: libpq reads what is not given from the environment and
    /// the home (`PGSSLMODE`, `~/.pgpass`, `~/.postgresql/root.crt`), which changed connections
    /// here (FIELD-NOTES, "Off GRDB and postgres-nio").
    static func parameters(_ server: ServerAddress) -> [(String, String)] {
        var parameters = [
            ("host", server.host), ("port", String(server.port)), ("user", server.role), ("password", server.password),
            ("dbname", server.database), ("application_name", "batond"), ("passfile", "/dev/null"),
            ("gssencmode", "disable"), ("options", "-c client_min_messages=error"),
        ]
        switch server.tls {
        case .disable: parameters.append(("sslmode", "disable"))
        case .prefer, .require:
            // No certificate check: a root certificate file that exists would make libpq check
            // one (as verify-ca), so the file named is one that cannot exist.
            parameters += [("sslmode", server.tls == .prefer ? "prefer" : "require"), ("sslrootcert", Self.noFile),
                           ("sslcert", Self.noFile), ("sslkey", Self.noFile)]
        case .verifyFull(let roots):
            // PostgreSQL 15's libpq has no sslrootcert=system: Debian's CA bundle is the system's.
            parameters += [("sslmode", "verify-full"), ("sslrootcert", roots ?? "/etc/ssl/certs/ca-certificates.crt"),
                           ("sslcert", Self.noFile), ("sslkey", Self.noFile)]
        }
        return parameters
    }

    /// A path no file is at (libpq's "none" for a certificate file before PostgreSQL 16).
    static let noFile = "/nonexistent/baton/no-such-file"

    var isClosed: Bool { session.isClosed }
    var closedReason: String { session.closedReason }

    /// One statement; the server's refusal or the connection's end as `SyncError.server`.
    @discardableResult
    private func run(_ sql: String, _ parameters: [PGValue] = []) async throws -> [[PGValue]] {
        do {
            return try await session.query(sql, parameters)
        } catch {
            throw SyncError.server(error.message)
        }
    }

    /// The first column of the first row.
    private func value(_ sql: String, _ parameters: [PGValue] = []) async throws -> PGValue? {
        try await run(sql, parameters).first?.first
    }

    // MARK: Notifications

    /// `LISTEN`s on `channel` while `body` runs; `notified` is called at each notification and
    /// once when they end (the connection closed). The `LISTEN` must be answered within the
    /// deadline, or the connection is closed and this throws.
    func listening<T: Sendable>(
        on channel: String, notified: @escaping @Sendable () -> Void, _ body: () async throws -> T
    ) async throws -> T {
        session.onNotification(notified)
        defer { session.onNotification(nil) }
        // The channel is `baton_` and hex digits (SyncEngine.channel): an identifier as it is.
        try await run("LISTEN \(channel)")
        return try await body()
    }

    // MARK: Logs

    /// Appends sealed records to `device`'s log; records already there (a batch whose reply was lost) are kept as they are.
    func append(user: String, device: String, epoch: Int32, seqs: [Int64], hlcs: [Int64], sealed: [[UInt8]]) async throws {
        guard !seqs.isEmpty else { return }
        // One row of parameters a record after the three they share; the engine sends at most 500 at once.
        var parameters: [PGValue] = [.text(user), .text(device), .int32(epoch)]
        var rows: [String] = []
        for index in seqs.indices {
            let first = parameters.count + 1
            rows.append("($1, $2, $\(first), $3, $\(first + 1), $\(first + 2))")
            parameters += [.int64(seqs[index]), .int64(hlcs[index]), .bytea(sealed[index])]
        }
        try await run("""
            INSERT INTO baton.record (user_name, device_id, seq, epoch, hlc, sealed) VALUES \(rows.joined(separator: ", "))
            ON CONFLICT DO NOTHING
            """, parameters)
    }

    /// Each of the user's logs' last seq, by device.
    func logHeads(user: String) async throws -> [String: Int64] {
        var heads: [String: Int64] = [:]
        for row in try await run("SELECT device_id, seq FROM baton.log_head WHERE user_name = $1", [.text(user)]) {
            if let device = row[0].text, let seq = row[1].int64 { heads[device] = seq }
        }
        return heads
    }

    /// Up to `limit` records of `device`'s log after `seq`, in order: seq, epoch, hlc, sealed.
    func records(user: String, device: String, after seq: Int64, limit: Int) async throws -> [(Int64, Int32, Int64, [UInt8])] {
        try await run("""
            SELECT seq, epoch, hlc, sealed FROM baton.record
            WHERE user_name = $1 AND device_id = $2 AND seq > $3 ORDER BY seq LIMIT $4
            """, [.text(user), .text(device), .int64(seq), .int64(Int64(limit))]).compactMap { row in
            guard let seq = row[0].int64, let epoch = row[1].int32, let hlc = row[2].int64, let sealed = row[3].bytes else { return nil }
            return (seq, epoch, hlc, sealed)
        }
    }

    /// The server keeps every log whole: a device's log is read from the seq its reader left.
    func wantsCompaction(user: String, device: String) async throws -> Bool { false }

    func dropLog(user: String, device: String, through seq: Int64) async throws {}

    /// Deleted: readers ask for the records after their cursor, gaps and all. A server set up
    /// before devices were allowed to (sync/server.sql, `own_log_removals`) refuses: false.
    func removeRecord(user: String, device: String, seq: Int64, placeholder: (Int32) throws -> [UInt8]) async throws -> Bool {
        do {
            _ = try await run("DELETE FROM baton.record WHERE user_name = $1 AND device_id = $2 AND seq = $3",
                              [.text(user), .text(device), .int64(seq)])
            return true
        } catch let error as SyncError where error.description.contains("permission denied") {
            return false
        }
    }

    // MARK: Devices

    /// The user this login is a device of; throws when it is none.
    func member(role: String) async throws -> String {
        guard let user = try await value("SELECT baton.current_member()")?.text else {
            throw SyncError.server("\(role) is no device of any user on this server: run `scripts/sync-server-setup add-device USER` there")
        }
        return user
    }

    func addDevice(user: String, id: String, publicKey: [UInt8], sealedName: [UInt8]) async throws {
        try await run("INSERT INTO baton.device (user_name, device_id, public_key, sealed_name) VALUES ($1, $2, $3, $4)",
                      [.text(user), .text(id), .bytea(publicKey), .bytea(sealedName)])
    }

    /// What the others see as this device's `last_seen`: now.
    func touch(user: String, device: String) async throws {
        try await run("UPDATE baton.device SET last_seen = now() WHERE user_name = $1 AND device_id = $2", [.text(user), .text(device)])
    }

    /// The user's devices, their names opened with the key of the epoch each was sealed with
    /// (`SyncEngine.unreadableName` when `config` has not that key).
    func devices(_ config: SyncConfig) async throws -> [SyncEngine.Device] {
        try await run("""
            SELECT device_id, sealed_name, name_epoch, (extract(epoch FROM last_seen) * 1000000)::bigint, revoked_at IS NOT NULL, public_key
            FROM baton.device WHERE user_name = $1 ORDER BY joined_at
            """, [.text(config.user)]).compactMap { row -> SyncEngine.Device? in
            guard let id = row[0].text, let sealedName = row[1].bytes, let nameEpoch = row[2].int32, let lastSeen = row[3].int64,
                  let revoked = row[4].bool, let publicKey = row[5].bytes else { return nil }
            let name = config.key(epoch: nameEpoch).flatMap { key in
                Seal.open(sealedName, key: key, context: Seal.nameContext(user: config.user, device: id))
            }.map { String(decoding: $0, as: UTF8.self) } ?? SyncEngine.unreadableName
            return SyncEngine.Device(
                id: id, name: name, lastSeen: UInt64(max(0, lastSeen)), revoked: revoked, isThisDevice: id == config.deviceID,
                publicKey: publicKey, nameEpoch: nameEpoch)
        }
    }

    /// Stores this device's name, sealed with the key of `epoch`.
    func storeName(user: String, device: String, sealed: [UInt8], epoch: Int32) async throws {
        try await run("UPDATE baton.device SET sealed_name = $3, name_epoch = $4 WHERE user_name = $1 AND device_id = $2",
                      [.text(user), .text(device), .bytea(sealed), .int32(epoch)])
    }

    // MARK: Keys

    func addUserKey(user: String, epoch: Int32, check: [UInt8]) async throws {
        do {
            try await session.query("INSERT INTO baton.user_key (user_name, epoch, check_value) VALUES ($1, $2, $3)",
                                    [.text(user), .int32(epoch), .bytea(check)])
        } catch where error.sqlState == "23505" {  // unique_violation
            throw KeyExists()
        } catch {
            throw SyncError.server(error.message)
        }
    }

    /// The check value of the user's key of `epoch`, if the user has one.
    func userKeyCheck(user: String, epoch: Int32) async throws -> [UInt8]? {
        try await value("SELECT check_value FROM baton.user_key WHERE user_name = $1 AND epoch = $2", [.text(user), .int32(epoch)])?.bytes
    }

    /// The user's newest key epoch (0 before any revocation).
    func newestEpoch(user: String) async throws -> Int32 {
        try await value("SELECT coalesce(max(epoch), 0) FROM baton.user_key WHERE user_name = $1", [.text(user)])?.int32 ?? 0
    }

    /// The key of `epoch` wrapped to `device`, if another device stored it.
    func wrappedKey(user: String, epoch: Int32, device: String) async throws -> [UInt8]? {
        try await value("SELECT wrapped FROM baton.epoch_key WHERE user_name = $1 AND epoch = $2 AND device_id = $3",
                        [.text(user), .int32(epoch), .text(device)])?.bytes
    }

    /// The devices that have the key of `epoch`.
    func keyHolders(user: String, epoch: Int32) async throws -> Set<String> {
        Set(try await run("SELECT device_id FROM baton.epoch_key WHERE user_name = $1 AND epoch = $2", [.text(user), .int32(epoch)])
            .compactMap { $0[0].text })
    }

    /// Stores the key of `epoch`, wrapped to `device` (`DeviceKey.wrap`).
    func storeWrappedKey(_ wrapped: [UInt8], epoch: Int32, for device: String, user: String) async throws {
        try await run("INSERT INTO baton.epoch_key (user_name, epoch, device_id, wrapped) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                      [.text(user), .int32(epoch), .text(device), .bytea(wrapped)])
    }

    /// In one transaction: begins the user's next key epoch with `newKey`, wraps it to
    /// `keepers`, marks `revoked` revoked and stores this device's name sealed with the new key
    /// (`sealedName`). Returns the new epoch.
    func revoke(
        _ revoked: String, keepers: [SyncEngine.Device], newKey: SymmetricKey, sealedName: [UInt8], config: SyncConfig
    ) async throws -> Int32 {
        try await run("BEGIN")
        do {
            let epoch = try await newestEpoch(user: config.user) + 1
            let check = try Seal.seal(Seal.checkText, key: newKey, context: Seal.checkContext(user: config.user, epoch: epoch))
            try await run("INSERT INTO baton.user_key (user_name, epoch, check_value) VALUES ($1, $2, $3)",
                          [.text(config.user), .int32(epoch), .bytea(check)])
            for device in keepers {
                let wrapped = try DeviceKey.wrap(newKey, to: device.publicKey, user: config.user, device: device.id, epoch: epoch)
                try await storeWrappedKey(wrapped, epoch: epoch, for: device.id, user: config.user)
            }
            try await run("UPDATE baton.device SET revoked_at = now() WHERE user_name = $1 AND device_id = $2",
                          [.text(config.user), .text(revoked)])
            try await storeName(user: config.user, device: config.deviceID, sealed: sealedName, epoch: epoch)
            try await run("COMMIT")
            return epoch
        } catch {
            // The server ends the transaction itself if the connection is gone.
            _ = try? await session.query("ROLLBACK")
            throw error
        }
    }
}
