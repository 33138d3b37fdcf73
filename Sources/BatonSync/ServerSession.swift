import BatonCore
import Crypto
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// One connection to the sync server, and every statement Baton sends on it.
///
/// Each statement runs within `timeout`: past it, or when the connection closes under it, the
/// connection is closed and the call throws `SyncError.server` (postgres-nio can leave a query
/// waiting for good when the connection ends under it, and the engine with it). Statements are
/// written here and nowhere else, so none can be sent without that deadline.
struct ServerSession: SyncTransport {
    let connection: PostgresConnection
    let timeout: Duration
    let log: Logger
    /// Ends the wait of every statement under way when the connection closes.
    private let closed: ClosedWatch

    init(connection: PostgresConnection, timeout: Duration, log: Logger) {
        self.connection = connection
        self.timeout = timeout
        self.log = log
        closed = ClosedWatch(connection.closeFuture)
    }

    /// Connects, runs `body`, and closes the connection however `body` ends.
    static func with<T: Sendable>(
        _ server: ServerAddress, timeout: Duration, log: Logger, _ body: (ServerSession) async throws -> T
    ) async throws -> T {
        try await ServerSession(connection: try await connect(server, timeout: timeout, log: log), timeout: timeout, log: log).closing(body)
    }

    /// Runs `body`, then closes the connection however `body` ended.
    func closing<T: Sendable>(_ body: (ServerSession) async throws -> T) async throws -> T {
        do {
            let result = try await body(self)
            await close()
            return result
        } catch {
            await close()
            throw error
        }
    }

    /// A connection, authenticated within `timeout` (a server that accepts but never answers
    /// would keep postgres-nio's connect waiting); one that comes after it is closed.
    static func connect(_ server: ServerAddress, timeout: Duration, log: Logger) async throws -> PostgresConnection {
        var configuration = PostgresConnection.Configuration(
            host: server.host, port: server.port, username: server.role, password: server.password, database: server.database,
            tls: try tls(server.tls))
        configuration.options.connectTimeout = .seconds(10)
        let late = LateConnection()
        do {
            return try await Deadline.run(timeout) { [configuration, log] in
                let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: log)
                if late.arrived(connection) { try? await connection.close() }
                return connection
            }
        } catch let error as Deadline.Expired {
            if let connection = late.abandon() { try? await connection.close() }
            throw SyncError.server("the sync server did not answer within \(error.timeout ?? timeout)")
        }
    }

    /// Who closes a connection that arrives after its deadline: the connect, when the caller
    /// gave up first; the caller, when it arrived first.
    private final class LateConnection: Sendable {
        private enum State { case waiting, arrived(PostgresConnection), abandoned }
        private let state = Mutex(State.waiting)

        /// True when the caller gave up on it already.
        func arrived(_ connection: PostgresConnection) -> Bool {
            state.withLock { state in
                if case .abandoned = state { return true }
                state = .arrived(connection)
                return false
            }
        }

        /// The connection that arrived, if one did.
        func abandon() -> PostgresConnection? {
            state.withLock { state in
                defer { state = .abandoned }
                if case .arrived(let connection) = state { return connection }
                return nil
            }
        }
    }

    static func tls(_ mode: ServerAddress.TLSMode) throws -> PostgresConnection.Configuration.TLS {
        var client = TLSConfiguration.makeClientConfiguration()
        switch mode {
        case .disable:
            return .disable
        case .prefer, .require:
            client.certificateVerification = .none
            let context = try NIOSSLContext(configuration: client)
            return mode == .prefer ? .prefer(context) : .require(context)
        case .verifyFull(let roots):
            client.certificateVerification = .fullVerification
            if let roots { client.trustRoots = .file(roots) }
            return .require(try NIOSSLContext(configuration: client))
        }
    }

    var isClosed: Bool { connection.isClosed }
    var closedReason: String { "the connection to the server closed" }

    /// Closes the connection, waiting at most `timeout` for it.
    func close() async {
        _ = try? await Deadline.run(timeout) { [connection] in try await connection.close() }
    }

    /// Runs one exchange with the server within the deadline (see the type's comment).
    private func answered<T: Sendable>(_ exchange: @escaping @Sendable (PostgresConnection, Logger) async throws -> T) async throws -> T {
        do {
            return try await Deadline.run(timeout, givingUpWhen: closed) { [connection, log] in
                try await exchange(connection, log)
            }
        } catch let error as Deadline.Expired {
            await close()
            throw SyncError.server(error.timeout.map { "the sync server did not answer within \($0)" } ?? "the connection to the sync server closed")
        }
    }

    // MARK: Notifications

    /// `LISTEN`s on `channel` while `body` runs; `notified` is called at each notification and
    /// once when they end (the connection closed). The `LISTEN` must be answered within the
    /// deadline, or the connection is closed and this throws.
    func listening<T: Sendable>(
        on channel: String, notified: @escaping @Sendable () -> Void, _ body: () async throws -> T
    ) async throws -> T {
        let answered = Atomic(false)
        let watch = Task { [connection, timeout] in
            try? await Task.sleep(for: timeout)
            if !answered.load(ordering: .acquiring) { try? await connection.close() }
        }
        defer { watch.cancel() }
        return try await connection.listen(on: channel) { notifications in
            answered.store(true, ordering: .releasing)
            let listener = Task {
                do {
                    for try await _ in notifications { notified() }
                } catch {}
                notified()
            }
            defer { listener.cancel() }
            return try await body()
        }
    }

    // MARK: Logs

    /// Appends sealed records to `device`'s log; records already there (a batch whose reply was lost) are kept as they are.
    func append(user: String, device: String, epoch: Int32, seqs: [Int64], hlcs: [Int64], sealed: [ByteBuffer]) async throws {
        _ = try await answered { connection, log in
            try await connection.query("""
                INSERT INTO baton.record (user_name, device_id, seq, epoch, hlc, sealed)
                SELECT \(user), \(device), s, \(epoch), h, b FROM unnest(\(seqs)::bigint[], \(hlcs)::bigint[], \(sealed)::bytea[]) AS t(s, h, b)
                ON CONFLICT DO NOTHING
                """, logger: log)
        }
    }

    /// Each of the user's logs' last seq, by device.
    func logHeads(user: String) async throws -> [String: Int64] {
        try await answered { connection, log in
            var heads: [String: Int64] = [:]
            let rows = try await connection.query("SELECT device_id, seq FROM baton.log_head WHERE user_name = \(user)", logger: log)
            for try await (device, seq) in rows.decode((String, Int64).self) { heads[device] = seq }
            return heads
        }
    }

    /// Up to `limit` records of `device`'s log after `seq`, in order: seq, epoch, hlc, sealed.
    func records(user: String, device: String, after seq: Int64, limit: Int) async throws -> [(Int64, Int32, Int64, ByteBuffer)] {
        try await answered { connection, log in
            var fetched: [(Int64, Int32, Int64, ByteBuffer)] = []
            let rows = try await connection.query("""
                SELECT seq, epoch, hlc, sealed FROM baton.record
                WHERE user_name = \(user) AND device_id = \(device) AND seq > \(seq) ORDER BY seq LIMIT \(limit)
                """, logger: log)
            for try await row in rows.decode((Int64, Int32, Int64, ByteBuffer).self) { fetched.append(row) }
            return fetched
        }
    }

    /// The server keeps every log whole: a device's log is read from the seq its reader left.
    func wantsCompaction(user: String, device: String) async throws -> Bool { false }

    func dropLog(user: String, device: String, through seq: Int64) async throws {}

    // MARK: Devices

    /// The user this login is a device of; throws when it is none.
    func member(role: String) async throws -> String {
        let user = try await answered { connection, log -> String? in
            let rows = try await connection.query("SELECT baton.current_member()", logger: log)
            var user: String?
            for try await value in rows.decode(String?.self) { user = value }
            return user
        }
        guard let user else {
            throw SyncError.server("\(role) is no device of any user on this server: run `scripts/sync-server-setup add-device USER` there")
        }
        return user
    }

    func addDevice(user: String, id: String, publicKey: [UInt8], sealedName: [UInt8]) async throws {
        _ = try await answered { connection, log in
            try await connection.query("""
                INSERT INTO baton.device (user_name, device_id, public_key, sealed_name)
                VALUES (\(user), \(id), \(ByteBuffer(bytes: publicKey)), \(ByteBuffer(bytes: sealedName)))
                """, logger: log)
        }
    }

    /// What the others see as this device's `last_seen`: now.
    func touch(user: String, device: String) async throws {
        _ = try await answered { connection, log in
            try await connection.query(
                "UPDATE baton.device SET last_seen = now() WHERE user_name = \(user) AND device_id = \(device)", logger: log)
        }
    }

    /// The user's devices, their names opened with the key of the epoch each was sealed with
    /// (`SyncEngine.unreadableName` when `config` has not that key).
    func devices(_ config: SyncConfig) async throws -> [SyncEngine.Device] {
        try await answered { connection, log in
            let rows = try await connection.query("""
                SELECT device_id, sealed_name, name_epoch, (extract(epoch FROM last_seen) * 1000000)::bigint, revoked_at IS NOT NULL, public_key
                FROM baton.device WHERE user_name = \(config.user) ORDER BY joined_at
                """, logger: log)
            var devices: [SyncEngine.Device] = []
            for try await (id, sealedName, nameEpoch, lastSeen, revoked, publicKey)
            in rows.decode((String, ByteBuffer, Int32, Int64, Bool, ByteBuffer).self) {
                let name = config.key(epoch: nameEpoch).flatMap { key in
                    Seal.open(Array(sealedName.readableBytesView), key: key, context: Seal.nameContext(user: config.user, device: id))
                }.map { String(decoding: $0, as: UTF8.self) } ?? SyncEngine.unreadableName
                devices.append(SyncEngine.Device(
                    id: id, name: name, lastSeen: UInt64(max(0, lastSeen)), revoked: revoked, isThisDevice: id == config.deviceID,
                    publicKey: Array(publicKey.readableBytesView), nameEpoch: nameEpoch))
            }
            return devices
        }
    }

    /// Stores this device's name, sealed with the key of `epoch`.
    func storeName(user: String, device: String, sealed: [UInt8], epoch: Int32) async throws {
        _ = try await answered { connection, log in
            try await Self.storeName(user: user, device: device, sealed: sealed, epoch: epoch, on: connection, log: log)
        }
    }

    private static func storeName(
        user: String, device: String, sealed: [UInt8], epoch: Int32, on connection: PostgresConnection, log: Logger
    ) async throws {
        try await connection.query("""
            UPDATE baton.device SET sealed_name = \(ByteBuffer(bytes: sealed)), name_epoch = \(epoch)
            WHERE user_name = \(user) AND device_id = \(device)
            """, logger: log)
    }

    // MARK: Keys

    func addUserKey(user: String, epoch: Int32, check: [UInt8]) async throws {
        do {
            _ = try await answered { connection, log in
                try await connection.query(
                    "INSERT INTO baton.user_key (user_name, epoch, check_value) VALUES (\(user), \(epoch), \(ByteBuffer(bytes: check)))", logger: log)
            }
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {  // unique_violation
            throw KeyExists()
        }
    }

    /// The check value of the user's key of `epoch`, if the user has one.
    func userKeyCheck(user: String, epoch: Int32) async throws -> ByteBuffer? {
        try await answered { connection, log in
            let rows = try await connection.query(
                "SELECT check_value FROM baton.user_key WHERE user_name = \(user) AND epoch = \(epoch)", logger: log)
            var check: ByteBuffer?
            for try await value in rows.decode(ByteBuffer.self) { check = value }
            return check
        }
    }

    /// The user's newest key epoch (0 before any revocation).
    func newestEpoch(user: String) async throws -> Int32 {
        try await answered { connection, log in try await Self.newestEpoch(user: user, on: connection, log: log) }
    }

    private static func newestEpoch(user: String, on connection: PostgresConnection, log: Logger) async throws -> Int32 {
        let rows = try await connection.query("SELECT coalesce(max(epoch), 0) FROM baton.user_key WHERE user_name = \(user)", logger: log)
        var newest: Int32 = 0
        for try await value in rows.decode(Int32.self) { newest = value }
        return newest
    }

    /// The key of `epoch` wrapped to `device`, if another device stored it.
    func wrappedKey(user: String, epoch: Int32, device: String) async throws -> ByteBuffer? {
        try await answered { connection, log in
            var found: ByteBuffer?
            let rows = try await connection.query("""
                SELECT wrapped FROM baton.epoch_key WHERE user_name = \(user) AND epoch = \(epoch) AND device_id = \(device)
                """, logger: log)
            for try await value in rows.decode(ByteBuffer.self) { found = value }
            return found
        }
    }

    /// The devices that have the key of `epoch`.
    func keyHolders(user: String, epoch: Int32) async throws -> Set<String> {
        try await answered { connection, log in
            var holders: Set<String> = []
            let rows = try await connection.query(
                "SELECT device_id FROM baton.epoch_key WHERE user_name = \(user) AND epoch = \(epoch)", logger: log)
            for try await id in rows.decode(String.self) { holders.insert(id) }
            return holders
        }
    }

    /// Stores the key of `epoch`, wrapped to `device` (`DeviceKey.wrap`).
    func storeWrappedKey(_ wrapped: [UInt8], epoch: Int32, for device: String, user: String) async throws {
        _ = try await answered { connection, log in
            try await Self.storeWrappedKey(wrapped, epoch: epoch, for: device, user: user, on: connection, log: log)
        }
    }

    private static func storeWrappedKey(
        _ wrapped: [UInt8], epoch: Int32, for device: String, user: String, on connection: PostgresConnection, log: Logger
    ) async throws {
        try await connection.query("""
            INSERT INTO baton.epoch_key (user_name, epoch, device_id, wrapped)
            VALUES (\(user), \(epoch), \(device), \(ByteBuffer(bytes: wrapped))) ON CONFLICT DO NOTHING
            """, logger: log)
    }

    /// In one transaction within the deadline: begins the user's next key epoch with `newKey`,
    /// wraps it to `keepers`, marks `revoked` revoked and stores this device's name sealed with
    /// the new key (`sealedName`). Returns the new epoch.
    func revoke(
        _ revoked: String, keepers: [SyncEngine.Device], newKey: SymmetricKey, sealedName: [UInt8], config: SyncConfig
    ) async throws -> Int32 {
        // The key's bytes cross into the exchange's task (SymmetricKey is not Sendable).
        let keyBytes = newKey.withUnsafeBytes { Array($0) }
        return try await answered { connection, log in
            let newKey = SymmetricKey(data: keyBytes)
            return try await connection.withTransaction(logger: log) { connection in
                let epoch = try await Self.newestEpoch(user: config.user, on: connection, log: log) + 1
                let check = try Seal.seal(Seal.checkText, key: newKey, context: Seal.checkContext(user: config.user, epoch: epoch))
                try await connection.query(
                    "INSERT INTO baton.user_key (user_name, epoch, check_value) VALUES (\(config.user), \(epoch), \(ByteBuffer(bytes: check)))",
                    logger: log)
                for device in keepers {
                    let wrapped = try DeviceKey.wrap(newKey, to: device.publicKey, user: config.user, device: device.id, epoch: epoch)
                    try await Self.storeWrappedKey(wrapped, epoch: epoch, for: device.id, user: config.user, on: connection, log: log)
                }
                try await connection.query(
                    "UPDATE baton.device SET revoked_at = now() WHERE user_name = \(config.user) AND device_id = \(revoked)", logger: log)
                try await Self.storeName(user: config.user, device: config.deviceID, sealed: sealedName, epoch: epoch,
                                         on: connection, log: log)
                return epoch
            }
        }
    }
}

/// Runs work that may never finish (a query on a connection that died under it) with a time
/// limit: past it the caller goes on with `Expired`, and the work is left behind to end when it can.
enum Deadline {
    /// The time ran out (`timeout`), or the connection closed (nil).
    struct Expired: Error {
        let timeout: Duration?
    }

    private final class Outcome<T: Sendable>: Sendable {
        let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)
        func finish(_ result: Result<T, any Error>) {
            continuation.withLock { continuation in
                defer { continuation = nil }
                return continuation
            }?.resume(with: result)
        }
    }

    /// With `closed`, the wait also ends when the connection closes (told, not polled).
    static func run<T: Sendable>(
        _ timeout: Duration, givingUpWhen closed: ClosedWatch? = nil, _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let outcome = Outcome<T>()
        return try await withCheckedThrowingContinuation { continuation in
            outcome.continuation.withLock { $0 = continuation }
            let timer = Task {
                try? await Task.sleep(for: timeout)
                if !Task.isCancelled { outcome.finish(.failure(Expired(timeout: timeout))) }
            }
            let waiting = closed?.onClose {
                Task {
                    // A last moment for the work to finish with its own error, which says more.
                    try? await Task.sleep(for: .milliseconds(200))
                    outcome.finish(.failure(Expired(timeout: nil)))
                    timer.cancel()
                }
            }
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await work()) } catch { result = .failure(error) }
                outcome.finish(result)
                timer.cancel()
                if let waiting { closed?.forget(waiting) }
            }
        }
    }
}

/// Tells the statements waiting on a connection that it closed: one callback on its close
/// future, however many statements run on it, each forgotten once its statement ends.
final class ClosedWatch: Sendable {
    /// A statement's wait, called at most once.
    private final class Waiter: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    private struct State {
        var closed = false
        var next = 0
        var waiting: [Int: Waiter] = [:]
    }

    private let state = Mutex(State())

    init(_ closeFuture: EventLoopFuture<Void>) {
        closeFuture.whenComplete { [weak self] _ in self?.close() }
    }

    /// Calls `body` when the connection closes (at once if it has); returns what `forget` takes.
    func onClose(_ body: @escaping @Sendable () -> Void) -> Int? {
        let waiter = Waiter(body)
        let token = state.withLock { state -> Int? in
            guard !state.closed else { return nil }
            state.next += 1
            state.waiting[state.next] = waiter
            return state.next
        }
        if token == nil { body() }
        return token
    }

    func forget(_ token: Int) {
        _ = state.withLock { $0.waiting.removeValue(forKey: token) }
    }

    private func close() {
        let waiting = state.withLock { state in
            state.closed = true
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for waiter in waiting { waiter.body() }
    }
}
