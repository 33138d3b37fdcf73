import BatonCore
import BatonStore
import Crypto
import FoundationEssentials
import Glibc

/// Setting a device up (`Init`, `Join`), taking it out (`Leave`) and revoking another: each on
/// a connection of its own, closed when it is done, every statement within the deadline.
extension SyncEngine {
    /// The first device of a user: makes the user's key, joins this device, returns the recovery words.
    public func initialize(url: String, deviceName: String) async throws -> String {
        guard settings == nil else { throw SyncError.state("sync is on already (\(settings?.user ?? "")); `baton sync leave` first") }
        return try await setupSession(url) { session, role in
            let user = try await session.member(role: role)
            let key = UserKey.generate()
            let check = try Seal.seal(Seal.checkText, key: key.epochZeroKey, context: Seal.checkContext(user: user, epoch: 0))
            do {
                try await session.addUserKey(user: user, epoch: 0, check: check)
            } catch is KeyExists {
                throw SyncError.state("\(user) has a key already: join this device with its recovery words (`baton sync join URL`)")
            }
            try await join(session, url: url, user: user, key: key, deviceName: deviceName)
            return key.recoveryWords
        }
    }

    /// Another device of the user: checks the recovery words against the server, then joins.
    /// Wrong words change nothing, here or on the server.
    public func join(url: String, recoveryWords: String, deviceName: String) async throws {
        guard settings == nil else { throw SyncError.state("sync is on already (\(settings?.user ?? "")); `baton sync leave` first") }
        let key = try UserKey(recoveryWords: recoveryWords)
        try await setupSession(url) { session, role in
            let user = try await session.member(role: role)
            guard let check = try await session.userKeyCheck(user: user, epoch: 0) else {
                throw SyncError.state("\(user) has no key there yet: set up the first device with `baton sync init URL`")
            }
            guard Seal.open(check, key: key.epochZeroKey, context: Seal.checkContext(user: user, epoch: 0)) != nil else {
                throw SyncError.wrongWords("these recovery words are not \(user)'s key; nothing was changed")
            }
            try await join(session, url: url, user: user, key: key, deviceName: deviceName)
        }
    }

    private func join(_ session: some SyncTransport, url: String, user: String, key: UserKey, deviceName: String) async throws {
        let deviceID = Identifier.make(at: store.wallClock.now())
        let deviceKey = DeviceKey()
        let name = try Seal.seal(Array(deviceName.utf8), key: key.epochZeroKey, context: Seal.nameContext(user: user, device: deviceID))
        try await session.addDevice(user: user, id: deviceID, publicKey: deviceKey.publicKey, sealedName: name)
        let config = SyncConfig(url: url, user: user, deviceID: deviceID, deviceName: deviceName,
                                userKey: Hex.encode(key.bytes), deviceKey: Hex.encode(deviceKey.rawRepresentation))
        try config.save(to: configPath)
        let hello = try SyncRecord.hello.encoded()
        // One transaction: sync is on with its hello queued, or neither.
        try await store.writing { transaction in
            try transaction.startSync(as: .init(deviceID: deviceID, userName: user))
            try transaction.enqueueRequest(hello)
        }
        self.config.withLock { $0 = config }
        log.info("sync: this device (\(deviceName), \(deviceID)) joined \(user)'s devices")
        onChange()
        bell.ring()
        deviceChanged.ring()
    }

    /// Stops syncing this device: forgets the settings, the outbox and the other devices' activities
    /// (returned, to announce). The server keeps this device's log for the others.
    public func leave() async throws -> [Ended] {
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

    /// Revokes one of the user's devices: a new key epoch begins, its key wrapped to every
    /// other device that is not revoked, and the device is marked revoked on the server (it
    /// can append no more). What is written from now on is sealed with the new key, which the
    /// revoked device never receives. Its login should also be removed on the server
    /// (`scripts/sync-server-setup remove-device ROLE`).
    public func revoke(deviceID target: String) async throws {
        guard let config = settings else { throw SyncError.state("sync is off on this machine") }
        guard target != config.deviceID else { throw SyncError.state("a device cannot revoke itself; revoke it from another, or `baton sync leave`") }
        let newKey = SymmetricKey(size: .bits256)
        let (revoked, epoch) = try await setupSession(config.url, me: config.deviceID) { session, _ in
            let devices = try await session.devices(config)
            guard let revoked = devices.first(where: { $0.id == target || $0.name == target }) else {
                throw SyncError.state("no device '\(target)' among \(config.user)'s (baton devices lists them)")
            }
            let keepers = devices.filter { !$0.revoked && $0.id != revoked.id }
            let epoch = try await session.revoke(
                revoked.id, keepers: keepers, newKey: newKey, sealedName: try Self.sealName(config, with: newKey), config: config)
            return (revoked, epoch)
        }
        nameEpoch.withLock { $0 = epoch }
        try remember(newKey, epoch: epoch)
        try await store.writing { try $0.noteRemoteDevice(id: revoked.id, name: revoked.name, lastSeen: revoked.lastSeen, revoked: true) }
        log.info("sync: revoked \(revoked.name); records are sealed with the key of epoch \(epoch) from now on")
        onChange()
        bell.ring()
    }

    /// The user's devices as this device last saw them, itself first.
    public func knownDevices() throws -> [Device] {
        guard let config = settings else { return [] }
        return [Device(id: config.deviceID, name: config.deviceName, lastSeen: store.wallClock.now(), revoked: false, isThisDevice: true)]
            + (try store.remoteDevices()).map { Device(id: $0.id, name: $0.name, lastSeen: $0.lastSeen, revoked: $0.revoked, isThisDevice: false) }
    }

    /// Runs `body` on a transport of its own (a server's connection, closed after it), with the
    /// login that asks; says which server could not be reached.
    private func setupSession<T: Sendable>(
        _ url: String, me: String? = nil, _ body: (any SyncTransport, _ role: String) async throws -> T
    ) async throws -> T {
        if let folder = FolderTransport.folder(in: url) { return try await body(folderTransport(folder, me: me), "") }
        let server = try ServerAddress(url)
        let session: PGSession
        do {
            session = try await ServerSession.connect(server, timeout: answerTimeout)
        } catch {
            throw SyncError.server("cannot reach the sync server at \(server.host):\(server.port) as \(server.role): \(Self.describe(error))")
        }
        defer { session.close() }
        return try await body(ServerSession(session: session), server.role)
    }
}
