import BatonCore
import BatonStore
import Crypto
import Foundation
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// Sync across machines for one batond: sends this device's outbox to its log on the
/// PostgreSQL server and applies the other devices' logs to the store.
///
/// One loop (`run`) owns one connection at a time. While connected it `LISTEN`s on the user's
/// channel, sends, then catches up on every other device's log by seq; it does so again when
/// woken — by a NOTIFY, by a commit that filled the outbox, by `Init`/`Join`/`Leave` — and every
/// `catchUpPeriod` regardless. A failure drops the connection; the loop waits (longer each time,
/// at most `maximumBackoff`) and starts over, catching up first. With the server away batond works as
/// without sync, and the outbox keeps what is to be sent.
public final class SyncEngine: Sendable {
    /// `off` (not set up), `connecting`, `online`, `offline` (set up, server unreachable).
    public enum State: String, Sendable { case off, connecting, online, offline }

    public struct Device: Sendable, Equatable {
        public var id: String
        public var name: String
        public var lastSeen: UInt64
        public var revoked: Bool
        public var isThisDevice: Bool
        /// Its X25519 public key, for wrapping epoch keys to it (empty when not read).
        var publicKey: [UInt8] = []
        /// The key epoch its name is sealed with on the server.
        var nameEpoch: Int32 = 0
    }

    /// A device's name this device has no key for (sealed with an epoch it never learned).
    static let unreadableName = "(unknown)"

    let store: Store
    let configPath: String
    let log: Logger
    /// Called with what other devices' records changed here, after each applied batch.
    let onApplied: @Sendable (Store.Applied) -> Void
    /// Called when a property of `Sync` changed.
    let onChange: @Sendable () -> Void
    let catchUpPeriod: Duration
    /// How long one exchange with the server may take before the connection is given up.
    let answerTimeout: Duration

    private let config: Mutex<SyncConfig?>
    /// The key epoch this device's name is sealed with on the server, as last read or written.
    private let nameEpoch = Mutex<Int32?>(nil)
    private let stateValue = Mutex(State.off)
    private let lastSync = Atomic<UInt64>(0)
    private let bell = Wakeup()
    /// Rung by Init, Join and Leave only: what ends a wait before connecting again.
    private let deviceChanged = Wakeup()
    /// Rounds of sending and catching up so far (for tests: an idle engine makes none).
    let rounds = Atomic(0)

    public init(store: Store, configPath: String, log: Logger, catchUpPeriod: Duration = .seconds(30), answerTimeout: Duration = .seconds(20),
                onApplied: @escaping @Sendable (Store.Applied) -> Void, onChange: @escaping @Sendable () -> Void) throws(SyncError) {
        self.answerTimeout = answerTimeout
        self.store = store
        self.configPath = configPath
        self.log = log
        self.catchUpPeriod = catchUpPeriod
        self.onApplied = onApplied
        self.onChange = onChange
        config = Mutex(try SyncConfig.load(from: configPath))
        store.onOutbox { [bell] in bell.ring() }
    }

    public var state: State { stateValue.withLock { $0 } }
    public var settings: SyncConfig? { config.withLock { $0 } }
    /// When the last round of sending and catching up finished (µs since the epoch); 0 before.
    public var lastSyncAt: UInt64 { lastSync.load(ordering: .relaxed) }

    private func set(_ state: State) {
        // Without settings sync is off, whatever a loop still ending with the old ones says.
        let state = settings == nil ? State.off : state
        let changed = stateValue.withLock { current in
            defer { current = state }
            return current != state
        }
        if changed { onChange() }
    }

    // MARK: The loop

    /// Syncs until the task is cancelled.
    public func run() async {
        var failures = 0
        while !Task.isCancelled {
            guard let config = settings else {
                set(.off)
                await bell.wait(timeout: .seconds(3600))
                continue
            }
            set(failures == 0 ? .connecting : .offline)
            do {
                try await session(config)
                failures = 0
            } catch is CancellationError {
                return
            } catch {
                failures += 1
                set(.offline)
                if failures == 1 { log.warning("sync: \(Self.describe(error)); retrying until the server answers") }
                log.debug("sync: attempt \(failures) failed: \(Self.describe(error))")
                await pause(afterFailures: failures, settings: config)
            }
        }
    }

    /// Waits before connecting again: 0.25 s, 0.5 s, 1 s … at most `maximumBackoff`. Only a
    /// change of device (Init, Join, Leave) cuts it short, with a bell of its own: outbox
    /// commits ring the sync bell, and waking for each while offline cost every commit a
    /// thread switch; their ring is kept for the session that follows.
    private func pause(afterFailures failures: Int, settings before: SyncConfig) async {
        let clock = ContinuousClock()
        let deadline = clock.now + min(Self.maximumBackoff, .milliseconds(250 << min(failures - 1, 10)))
        while !Task.isCancelled, clock.now < deadline, settings?.isSameDevice(as: before) == true {
            await deviceChanged.wait(timeout: deadline - clock.now)
        }
    }

    /// The longest wait between attempts to reach the server: how late a device may notice that it is back.
    static let maximumBackoff: Duration = .seconds(8)

    /// One connection's life: returns when the settings change, throws when the connection fails.
    private func session(_ config: SyncConfig) async throws {
        let server = try ServerAddress(config.url)
        let connection = try await Self.connect(server, log: log)
        defer { Task { try? await connection.close() } }
        try await connection.listen(on: Self.channel(user: config.user)) { notifications in
            let listener = Task { [bell] in
                do {
                    for try await _ in notifications { bell.ring() }
                } catch {}
                bell.ring()  // the connection ended: let the loop find out
            }
            defer { listener.cancel() }
            set(.online)
            var firstRound = true
            // A new epoch key leaves the session as it is.
            while !Task.isCancelled, let current = settings, current.isSameDevice(as: config) {
                rounds.add(1, ordering: .relaxed)
                log.trace("sync: sending")
                try await send(on: connection, current)
                log.trace("sync: catching up")
                try await catchUp(on: connection, current, refreshDevices: firstRound)
                try await resealName(on: connection, settings ?? current)
                firstRound = false
                log.trace("sync: waiting")
                lastSync.store(store.wallClock.now(), ordering: .relaxed)
                onChange()
                if connection.isClosed { throw SyncError.server("the connection to the server closed") }
                await bell.wait(timeout: catchUpPeriod)
            }
        }
    }

    static func connect(_ server: ServerAddress, log: Logger) async throws -> PostgresConnection {
        var configuration = PostgresConnection.Configuration(
            host: server.host, port: server.port, username: server.role, password: server.password, database: server.database,
            tls: try tls(server.tls))
        configuration.options.connectTimeout = .seconds(10)
        return try await PostgresConnection.connect(configuration: configuration, id: 1, logger: log)
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

    /// The user's NOTIFY channel; a hash, so the channel's name does not spell the user's.
    static func channel(user: String) -> String {
        "baton_" + Insecure.MD5.hash(data: Array(user.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    // MARK: Sending

    /// How long a change waits for others to leave with it (see `send`): long enough that a
    /// burst leaves in rounds of a few dozen, whose fixed cost (two commits, two server round
    /// trips, the other devices' wake-ups) then stops competing with the calls being made;
    /// short enough that a change still reaches the other machines before a person could notice.
    static let coalescing: Duration = .milliseconds(10)

    /// Sends the outbox, a staged batch at a time, each in one server transaction; a batch
    /// leaves the outbox only after the server committed it.
    private func send(on connection: PostgresConnection, _ config: SyncConfig) async throws {
        let epoch = config.currentEpoch
        guard let key = config.key(epoch: epoch) else { throw SyncError.state("the user's key in \(configPath) is damaged") }
        while true {
            // Read first: a round with nothing to send (most wake-ups) takes no write transaction.
            guard let oldest = try store.oldestOutboxChange() else { return }
            // Changes made within `coalescing` of each other leave in one batch: a burst of
            // Advertise calls costs one staging, one server round trip and one NOTIFY, not one each.
            let age = Duration.microseconds(Int64(store.wallClock.now()) - Int64(oldest))
            // (A wall clock set back makes the age negative: no wait then, rather than a long one.)
            if age >= .zero && age < Self.coalescing { try await Task.sleep(for: Self.coalescing - age) }
            let batch = try await store.writing { store in
                try store.stageOutbox(limit: 500) { change in
                    if case .request(let body) = change { return body }
                    return try SyncRecord(change).encoded()
                }
            }
            guard let last = batch.last else { return }
            var seqs: [Int64] = [], hlcs: [Int64] = [], sealed: [ByteBuffer] = []
            for record in batch {
                let context = Seal.recordContext(user: config.user, device: config.deviceID, seq: record.logSeq, epoch: epoch)
                seqs.append(record.logSeq)
                hlcs.append(record.hlc)
                sealed.append(ByteBuffer(bytes: try Seal.seal(record.body, key: key, context: context)))
            }
            // A batch the server committed before the reply was lost is sent again: its rows are there already.
            _ = try await answered(connection) { [log, seqs, hlcs, sealed] in
                _ = try await connection.query("""
                    INSERT INTO baton.record (user_name, device_id, seq, epoch, hlc, sealed)
                    SELECT \(config.user), \(config.deviceID), s, \(epoch), h, b FROM unnest(\(seqs)::bigint[], \(hlcs)::bigint[], \(sealed)::bytea[]) AS t(s, h, b)
                    ON CONFLICT DO NOTHING
                    """, logger: log)
            }
            try await store.writing { try $0.sent(upTo: last.logSeq) }
            onChange()
        }
    }

    // MARK: Catching up

    /// Applies every other device's log from where this device left it, in seq order. Asks the
    /// server first which logs moved (`log_head`, one small read), so that a wake-up for this
    /// device's own records, or for nothing new, costs one query; the devices' names are read
    /// again at the first round of a connection and when a log of an unknown device appears.
    private func catchUp(on connection: PostgresConnection, _ config: SyncConfig, refreshDevices: Bool) async throws {
        let heads = try await answered(connection) { [log] in
            var heads: [String: Int64] = [:]
            let rows = try await connection.query("SELECT device_id, seq FROM baton.log_head WHERE user_name = \(config.user)", logger: log)
            for try await (device, seq) in rows.decode((String, Int64).self) { heads[device] = seq }
            return heads
        }
        var names = try store.remoteDeviceNames()
        if refreshDevices || heads.keys.contains(where: { $0 != config.deviceID && names[$0] == nil }) {
            // What the others see as this device's last_seen: when it last connected.
            if refreshDevices {
                _ = try await answered(connection) { [log] in
                    try await connection.query(
                        "UPDATE baton.device SET last_seen = now() WHERE user_name = \(config.user) AND device_id = \(config.deviceID)",
                        logger: log)
                }
            }
            let devices = try await answered(connection) { [log] in try await Self.devices(on: connection, config, log: log) }
            for device in devices where !device.isThisDevice {
                // A name sealed with a key this device does not have yet keeps the one it knew.
                let name = device.name == Self.unreadableName ? names[device.id] ?? device.name : device.name
                try await store.writing { try $0.noteRemoteDevice(id: device.id, name: name, lastSeen: device.lastSeen, revoked: device.revoked) }
                names[device.id] = name
            }
            if let me = devices.first(where: \.isThisDevice) { nameEpoch.withLock { $0 = me.nameEpoch } }
            // A revocation made elsewhere begins an epoch this device seals with from now on.
            let newest = try await answered(connection) { [log] in try await Self.newestEpoch(on: connection, user: config.user, log: log) }
            if newest > config.currentEpoch { _ = try await epochKey(newest, on: connection) }
            try await shareCurrentKey(on: connection, with: devices, settings: settings ?? config)
        }
        let cursors = try store.syncCursors()
        // Each epoch's key once per round, not once per record (epoch 0's is an HKDF derivation).
        var keys: [Int32: SymmetricKey] = [:]
        for (deviceID, head) in heads.sorted(by: { $0.key < $1.key }) where deviceID != config.deviceID && head > cursors[deviceID] ?? 0 {
            let device = (id: deviceID, name: names[deviceID] ?? deviceID)
            var cursor = cursors[deviceID] ?? 0
            while cursor < head {
                let fetched = try await answered(connection) { [log, cursor] in
                    var fetched: [(Int64, Int32, Int64, ByteBuffer)] = []
                    let rows = try await connection.query("""
                        SELECT seq, epoch, hlc, sealed FROM baton.record
                        WHERE user_name = \(config.user) AND device_id = \(device.id) AND seq > \(cursor) ORDER BY seq LIMIT 1000
                        """, logger: log)
                    for try await row in rows.decode((Int64, Int32, Int64, ByteBuffer).self) { fetched.append(row) }
                    return fetched
                }
                var records: [Store.RemoteRecord] = []
                for (seq, epoch, hlc, sealed) in fetched {
                    let context = Seal.recordContext(user: config.user, device: device.id, seq: seq, epoch: epoch)
                    if keys[epoch] == nil { keys[epoch] = try await epochKey(epoch, on: connection) }
                    guard let key = keys[epoch],
                          let body = Seal.open(Array(sealed.readableBytesView), key: key, context: context) else {
                        // Not skipped: the key may still come (a device that joined after a revocation
                        // gets it from another); a revoked device never gets it.
                        throw SyncError.crypto("""
                            record \(seq) of device \(device.name) is sealed with the key of epoch \(epoch), which this device does not \
                            have: it was revoked, or no other device has given it the key yet
                            """)
                    }
                    var change = SyncRecord.decode(body)?.change(for: config.deviceID)
                    if let checked = change {
                        do {
                            try RemoteCheck.check(checked, limits: store.limits)
                        } catch {
                            log.warning("sync: skipped record \(seq) of device \(device.name): \(error.message)")
                            change = nil
                        }
                    }
                    records.append(Store.RemoteRecord(seq: seq, hlc: hlc, change: change))
                }
                guard let last = records.last else { break }
                let applied = try await store.writing { [records] in try $0.applyRemote(device: device.id, records: records) }
                for request in applied.overruled {
                    log.info("sync: kept activity \(request.activityID): it changed here after device \(device.name) asked to invalidate it")
                }
                onApplied(applied)
                cursor = last.seq
            }
        }
    }


    /// Runs one exchange with the server, or closes the connection and throws when it takes
    /// longer than `answerTimeout` or the connection closed under it: postgres-nio can leave a
    /// query waiting for good when the connection ends under it, and the engine with it.
    private func answered<T: Sendable>(_ connection: PostgresConnection, _ exchange: @escaping @Sendable () async throws -> T) async throws -> T {
        do {
            return try await Deadline.run(answerTimeout, giveUpWhen: { connection.isClosed }, exchange)
        } catch let error as Deadline.Expired {
            try? await connection.close()
            throw SyncError.server(error.timeout.map { "the sync server did not answer within \($0)" } ?? "the connection to the sync server closed")
        }
    }

    /// The user's devices on the server, their names opened with the key of the epoch each
    /// was sealed with (`unreadableName` when this device does not have that key).
    static func devices(on connection: PostgresConnection, _ config: SyncConfig, log: Logger) async throws -> [Device] {
        let rows = try await connection.query("""
            SELECT device_id, sealed_name, name_epoch, (extract(epoch FROM last_seen) * 1000000)::bigint, revoked_at IS NOT NULL, public_key
            FROM baton.device WHERE user_name = \(config.user) ORDER BY joined_at
            """, logger: log)
        var devices: [Device] = []
        for try await (id, sealedName, nameEpoch, lastSeen, revoked, publicKey) in rows.decode((String, ByteBuffer, Int32, Int64, Bool, ByteBuffer).self) {
            let name = config.key(epoch: nameEpoch).flatMap { key in
                Seal.open(Array(sealedName.readableBytesView), key: key, context: Seal.nameContext(user: config.user, device: id))
            }.map { String(decoding: $0, as: UTF8.self) } ?? Self.unreadableName
            devices.append(Device(id: id, name: name, lastSeen: UInt64(max(0, lastSeen)), revoked: revoked, isThisDevice: id == config.deviceID,
                                  publicKey: Array(publicKey.readableBytesView), nameEpoch: nameEpoch))
        }
        return devices
    }

    /// Seals this device's name again with the current epoch's key once it has that key, so
    /// that a device revoked since (which keeps epoch 0's) cannot read it. A device that joins
    /// after a revocation seals its name with epoch 0's key until another device gives it the
    /// current one, and reseals it then.
    private func resealName(on connection: PostgresConnection, _ config: SyncConfig) async throws {
        guard let sealedWith = nameEpoch.withLock({ $0 }), sealedWith < config.currentEpoch,
              let key = config.key(epoch: config.currentEpoch) else { return }
        let sealed = try Self.sealName(config, with: key)
        _ = try await answered(connection) { [log] in try await Self.storeName(config, sealed: sealed, epoch: config.currentEpoch, on: connection, log: log) }
        nameEpoch.withLock { $0 = config.currentEpoch }
        log.info("sync: this device's name is sealed with the key of epoch \(config.currentEpoch) now")
    }

    private static func sealName(_ config: SyncConfig, with key: SymmetricKey) throws -> [UInt8] {
        try Seal.seal(Array(config.deviceName.utf8), key: key, context: Seal.nameContext(user: config.user, device: config.deviceID))
    }

    private static func storeName(
        _ config: SyncConfig, sealedWith key: SymmetricKey, epoch: Int32, on connection: PostgresConnection, log: Logger
    ) async throws {
        try await storeName(config, sealed: try sealName(config, with: key), epoch: epoch, on: connection, log: log)
    }

    private static func storeName(_ config: SyncConfig, sealed: [UInt8], epoch: Int32, on connection: PostgresConnection, log: Logger) async throws {
        try await connection.query("""
            UPDATE baton.device SET sealed_name = \(ByteBuffer(bytes: sealed)), name_epoch = \(epoch)
            WHERE user_name = \(config.user) AND device_id = \(config.deviceID)
            """, logger: log)
    }

    // MARK: Key epochs

    /// The key of `epoch`: from the settings, else the one another device wrapped to this
    /// device on the server (kept in the settings from then on); nil when there is none.
    private func epochKey(_ epoch: Int32, on connection: PostgresConnection) async throws -> SymmetricKey? {
        guard let config = settings else { return nil }
        if let key = config.key(epoch: epoch) { return key }
        let wrapped = try await answered(connection) { [log] in
            var found: ByteBuffer?
            let rows = try await connection.query("""
                SELECT wrapped FROM baton.epoch_key WHERE user_name = \(config.user) AND epoch = \(epoch) AND device_id = \(config.deviceID)
                """, logger: log)
            for try await value in rows.decode(ByteBuffer.self) { found = value }
            return found
        }
        guard let wrapped, let deviceKey = config.deviceKeyValue,
              let key = deviceKey.unwrap(Array(wrapped.readableBytesView), user: config.user, device: config.deviceID, epoch: epoch) else {
            return nil
        }
        try remember(key, epoch: epoch)
        log.info("sync: this device has the key of epoch \(epoch) now")
        return key
    }

    /// Keeps an epoch's key in the settings (file first, then memory).
    private func remember(_ key: SymmetricKey, epoch: Int32) throws {
        guard var config = settings else { return }
        var keys = config.epochKeys ?? [:]
        keys[String(epoch)] = Hex.encode(key.withUnsafeBytes { Array($0) })
        config.epochKeys = keys
        try config.save(to: configPath)
        self.config.withLock { $0 = config }
    }

    /// Wraps the current epoch's key to every device of the user that is not revoked and does
    /// not have it yet (one that joined after the revocation that began the epoch).
    private func shareCurrentKey(on connection: PostgresConnection, with devices: [Device], settings config: SyncConfig) async throws {
        let epoch = config.currentEpoch
        guard epoch > 0, let key = config.key(epoch: epoch) else { return }
        let holders = try await answered(connection) { [log] in
            var holders: Set<String> = []
            let rows = try await connection.query(
                "SELECT device_id FROM baton.epoch_key WHERE user_name = \(config.user) AND epoch = \(epoch)", logger: log)
            for try await id in rows.decode(String.self) { holders.insert(id) }
            return holders
        }
        for device in devices where !device.revoked && !holders.contains(device.id) && !device.publicKey.isEmpty {
            let wrapped = try DeviceKey.wrap(key, to: device.publicKey, user: config.user, device: device.id, epoch: epoch)
            try await answered(connection) { [log] in
                try await Self.storeWrappedKey(wrapped, epoch: epoch, for: device.id, user: config.user, on: connection, log: log)
            }
            log.info("sync: gave \(device.name) the key of epoch \(epoch)")
        }
    }

    /// The user's newest key epoch on the server (0 before any revocation).
    private static func newestEpoch(on connection: PostgresConnection, user: String, log: Logger) async throws -> Int32 {
        let rows = try await connection.query("SELECT coalesce(max(epoch), 0) FROM baton.user_key WHERE user_name = \(user)", logger: log)
        var newest: Int32 = 0
        for try await value in rows.decode(Int32.self) { newest = value }
        return newest
    }

    /// Stores an epoch's key, wrapped to `device` (`DeviceKey.wrap`), for that device on the server.
    private static func storeWrappedKey(
        _ wrapped: [UInt8], epoch: Int32, for device: String, user: String, on connection: PostgresConnection, log: Logger
    ) async throws {
        try await connection.query("""
            INSERT INTO baton.epoch_key (user_name, epoch, device_id, wrapped)
            VALUES (\(user), \(epoch), \(device), \(ByteBuffer(bytes: wrapped))) ON CONFLICT DO NOTHING
            """, logger: log)
    }

    /// Revokes one of the user's devices: a new key epoch begins, its key wrapped to every
    /// other device that is not revoked, and the device is marked revoked on the server (it
    /// can append no more). What is written from now on is sealed with the new key, which the
    /// revoked device never receives. Its login should also be removed on the server
    /// (`scripts/sync-server-setup remove-device ROLE`).
    public func revoke(deviceID target: String) async throws {
        guard let config = settings else { throw SyncError.state("sync is off on this machine") }
        guard target != config.deviceID else { throw SyncError.state("a device cannot revoke itself; revoke it from another, or `baton sync leave`") }
        let connection = try await Self.connectForSetup(try ServerAddress(config.url), log: log)
        defer { Task { try? await connection.close() } }
        let devices = try await answered(connection) { [log] in try await Self.devices(on: connection, config, log: log) }
        guard let revoked = devices.first(where: { $0.id == target || $0.name == target }) else {
            throw SyncError.state("no device '\(target)' among \(config.user)'s (baton devices lists them)")
        }
        let newKey = SymmetricKey(size: .bits256)
        let epoch = try await connection.withTransaction(logger: log) { connection in
            let epoch = try await Self.newestEpoch(on: connection, user: config.user, log: log) + 1
            let check = try Seal.seal(Seal.checkText, key: newKey, context: Seal.checkContext(user: config.user, epoch: epoch))
            try await connection.query(
                "INSERT INTO baton.user_key (user_name, epoch, check_value) VALUES (\(config.user), \(epoch), \(ByteBuffer(bytes: check)))",
                logger: log)
            for device in devices where !device.revoked && device.id != revoked.id {
                let wrapped = try DeviceKey.wrap(newKey, to: device.publicKey, user: config.user, device: device.id, epoch: epoch)
                try await Self.storeWrappedKey(wrapped, epoch: epoch, for: device.id, user: config.user, on: connection, log: log)
            }
            try await connection.query(
                "UPDATE baton.device SET revoked_at = now() WHERE user_name = \(config.user) AND device_id = \(revoked.id)", logger: log)
            try await Self.storeName(config, sealedWith: newKey, epoch: epoch, on: connection, log: log)
            return epoch
        }
        nameEpoch.withLock { $0 = epoch }
        try remember(newKey, epoch: epoch)
        try await store.writing { try $0.noteRemoteDevice(id: revoked.id, name: revoked.name, lastSeen: revoked.lastSeen, revoked: true) }
        log.info("sync: revoked \(revoked.name); records are sealed with the key of epoch \(epoch) from now on")
        onChange()
        bell.ring()
    }

    // MARK: Requests to other devices

    /// Asks `device` to continue `activityID` there: a record in this device's log that the
    /// device applies by opening a pending scene for its app. Sent when the server can be reached.
    public func requestContinuation(of activityID: String, on device: String, request: Request? = nil) async throws {
        guard settings != nil else { throw SyncError.state("sync is off on this machine") }
        let body = try SyncRecord(request: "continue_on", activityID: activityID, target: device).encoded()
        try await store.writing { try $0.enqueueRequest(body, request: request) }
    }

    /// Invalidates another device's activity: here at once, and there (and so everywhere)
    /// when the request reaches its device. False when it was not here.
    public func invalidate(_ activity: Activity) async throws -> Bool {
        guard settings != nil, activity.isRemote else { return false }
        let body = try SyncRecord(request: "invalidate", activityID: activity.id, target: activity.deviceID).encoded()
        return try await store.writing { try $0.invalidateRemote(id: activity.id, request: body) }
    }

    /// Tells the device that advertised `activity` that it was continued here.
    public func tellContinued(_ activity: Activity) async throws {
        guard settings != nil, activity.isRemote else { return }
        let body = try SyncRecord(request: "continued", activityID: activity.id, target: activity.deviceID).encoded()
        try await store.writing { try $0.enqueueRequest(body) }
    }

    // MARK: Setting up

    /// The first device of a user: makes the user's key, joins this device, returns the recovery words.
    public func initialize(url: String, deviceName: String) async throws -> String {
        guard settings == nil else { throw SyncError.state("sync is on already (\(settings?.user ?? "")); `baton sync leave` first") }
        let server = try ServerAddress(url)
        let connection = try await Self.connectForSetup(server, log: log)
        defer { Task { try? await connection.close() } }
        let user = try await answered(connection) { [log] in try await Self.member(on: connection, role: server.role, log: log) }
        let key = UserKey.generate()
        let check = try Seal.seal(Seal.checkText, key: key.epochZeroKey, context: Seal.checkContext(user: user, epoch: 0))
        do {
            _ = try await answered(connection) { [log] in
                try await connection.query(
                    "INSERT INTO baton.user_key (user_name, epoch, check_value) VALUES (\(user), 0, \(ByteBuffer(bytes: check)))", logger: log)
            }
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
            throw SyncError.state("\(user) has a key already: join this device with its recovery words (`baton sync join URL`)")
        }
        try await join(connection, url: url, user: user, key: key, deviceName: deviceName)
        return key.recoveryWords
    }

    /// Another device of the user: checks the recovery words against the server, then joins.
    /// Wrong words change nothing, here or on the server.
    public func join(url: String, recoveryWords: String, deviceName: String) async throws {
        guard settings == nil else { throw SyncError.state("sync is on already (\(settings?.user ?? "")); `baton sync leave` first") }
        let key = try UserKey(recoveryWords: recoveryWords)
        let server = try ServerAddress(url)
        let connection = try await Self.connectForSetup(server, log: log)
        defer { Task { try? await connection.close() } }
        let user = try await answered(connection) { [log] in try await Self.member(on: connection, role: server.role, log: log) }
        let check = try await answered(connection) { [log] () async throws -> ByteBuffer? in
            let rows = try await connection.query("SELECT check_value FROM baton.user_key WHERE user_name = \(user) AND epoch = 0", logger: log)
            var check: ByteBuffer?
            for try await value in rows.decode(ByteBuffer.self) { check = value }
            return check
        }
        guard let check else {
            throw SyncError.state("\(user) has no key on this server yet: set up the first device with `baton sync init URL`")
        }
        guard Seal.open(Array(check.readableBytesView), key: key.epochZeroKey, context: Seal.checkContext(user: user, epoch: 0)) != nil else {
            throw SyncError.wrongWords("these recovery words are not \(user)'s key; nothing was changed")
        }
        try await join(connection, url: url, user: user, key: key, deviceName: deviceName)
    }

    private func join(_ connection: PostgresConnection, url: String, user: String, key: UserKey, deviceName: String) async throws {
        let deviceID = Identifier.make()
        let deviceKey = DeviceKey()
        let name = try Seal.seal(Array(deviceName.utf8), key: key.epochZeroKey, context: Seal.nameContext(user: user, device: deviceID))
        let publicKey = deviceKey.publicKey
        _ = try await answered(connection) { [log] in
            try await connection.query("""
                INSERT INTO baton.device (user_name, device_id, public_key, sealed_name)
                VALUES (\(user), \(deviceID), \(ByteBuffer(bytes: publicKey)), \(ByteBuffer(bytes: name)))
                """, logger: log)
        }
        let config = SyncConfig(url: url, user: user, deviceID: deviceID, deviceName: deviceName,
                                userKey: Hex.encode(key.bytes), deviceKey: Hex.encode(deviceKey.rawRepresentation))
        try config.save(to: configPath)
        let hello = try SyncRecord.hello.encoded()
        try await store.writing { store in
            try store.startSync(as: .init(deviceID: deviceID, userName: user))
            try store.enqueueRequest(hello)
        }
        self.config.withLock { $0 = config }
        log.info("sync: this device (\(deviceName), \(deviceID)) joined \(user)'s devices")
        onChange()
        bell.ring()
        deviceChanged.ring()
    }

    /// Stops syncing this device: forgets the settings, the outbox and the other devices' activities
    /// (returned, to announce). The server keeps this device's log for the others.
    public func leave() async throws -> [String] {
        guard settings != nil else { throw SyncError.state("sync is off") }
        config.withLock { $0 = nil }
        if unlink(configPath) != 0 && errno != ENOENT { throw SyncError.state("cannot remove \(configPath): errno \(errno)") }
        let removed = try await store.writing { try $0.stopSync() }
        set(.off)
        onChange()
        bell.ring()
        deviceChanged.ring()
        return removed
    }

    /// The user's devices as this device last saw them, itself first.
    public func knownDevices() throws -> [Device] {
        guard let config = settings else { return [] }
        return [Device(id: config.deviceID, name: config.deviceName, lastSeen: store.wallClock.now(), revoked: false, isThisDevice: true)]
            + (try store.remoteDevices()).map { Device(id: $0.id, name: $0.name, lastSeen: $0.lastSeen, revoked: $0.revoked, isThisDevice: false) }
    }

    private static func connectForSetup(_ server: ServerAddress, log: Logger) async throws -> PostgresConnection {
        do {
            return try await connect(server, log: log)
        } catch {
            throw SyncError.server("cannot reach the sync server at \(server.host):\(server.port) as \(server.role): \(describe(error))")
        }
    }

    private static func member(on connection: PostgresConnection, role: String, log: Logger) async throws -> String {
        let rows = try await connection.query("SELECT baton.current_member()", logger: log)
        for try await user in rows.decode(String?.self) {
            if let user { return user }
        }
        throw SyncError.server("\(role) is no device of any user on this server: run `scripts/sync-server-setup add-device USER` there")
    }

    /// A sentence for a failure, with the server's own message when it sent one.
    public static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            return "\(error.code)"
        }
        return "\(error)"
    }
}

/// Wakes one waiting loop: a ring while nobody waits is kept for the next wait.
final class Wakeup: Sendable {
    private struct State {
        var rung = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func ring() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.rung = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns at a ring, after `timeout`, or when the task is cancelled.
    func wait(timeout: Duration) async {
        let timer = Task { [self] in
            // A timer cancelled because the wait ended must not ring: that ring would end the
            // next wait at once, and the sync loop would spin.
            do { try await Task.sleep(for: timeout) } catch { return }
            ring()
        }
        defer { timer.cancel() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.rung {
                        state.rung = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            ring()
        }
    }
}

/// Runs work that may never finish (a query on a connection that died under it) with a time
/// limit: past it the caller goes on with `Expired`, and the work is left behind to end when it can.
enum Deadline {
    /// How often `run` asks `giveUpWhen`.
    static let pollInterval: Duration = .milliseconds(100)

    /// The time ran out (`timeout`), or `giveUpWhen` said so (nil).
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

    /// `giveUpWhen` is asked every `pollInterval`; true ends the wait early.
    static func run<T: Sendable>(
        _ timeout: Duration, giveUpWhen giveUp: @escaping @Sendable () -> Bool = { false }, _ work: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let outcome = Outcome<T>()
        return try await withCheckedThrowingContinuation { continuation in
            outcome.continuation.withLock { $0 = continuation }
            let timer = Task {
                let clock = ContinuousClock()
                let deadline = clock.now + timeout
                while !Task.isCancelled, clock.now < deadline {
                    try? await Task.sleep(for: pollInterval)
                    if giveUp() {
                        // A last moment for the work to finish with its own error, which says more.
                        try? await Task.sleep(for: .milliseconds(200))
                        if !Task.isCancelled { outcome.finish(.failure(Expired(timeout: nil))) }
                        return
                    }
                }
                if !Task.isCancelled { outcome.finish(.failure(Expired(timeout: timeout))) }
            }
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await work()) } catch { result = .failure(error) }
                timer.cancel()
                outcome.finish(result)
            }
        }
    }
}
