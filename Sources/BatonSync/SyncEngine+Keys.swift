import BatonCore
import Crypto
import FoundationEssentials

/// The key epochs: finding the key of an epoch, giving the current one to the devices that
/// lack it, and keeping this device's name sealed with it.
extension SyncEngine {
    /// The key of `epoch`: from the settings, else the one another device wrapped to this
    /// device on the server (kept in the settings from then on); nil when there is none.
    func epochKey(_ epoch: Int32, on session: some SyncTransport) async throws -> SymmetricKey? {
        guard let config = settings else { return nil }
        if let key = config.key(epoch: epoch) { return key }
        guard let wrapped = try await session.wrappedKey(user: config.user, epoch: epoch, device: config.deviceID),
              let deviceKey = config.deviceKeyValue,
              let key = deviceKey.unwrap(wrapped, user: config.user, device: config.deviceID, epoch: epoch) else {
            return nil
        }
        try remember(key, epoch: epoch)
        log.info("sync: this device has the key of epoch \(epoch) now")
        return key
    }

    /// Keeps an epoch's key in the settings (file first, then memory).
    func remember(_ key: SymmetricKey, epoch: Int32) throws {
        guard var config = settings else { return }
        var keys = config.epochKeys ?? [:]
        keys[String(epoch)] = Hex.encode(key.withUnsafeBytes { Array($0) })
        config.epochKeys = keys
        try config.save(to: configPath)
        self.config.withLock { $0 = config }
    }

    /// Wraps the current epoch's key to every device of the user that is not revoked and does
    /// not have it yet (one that joined after the revocation that began the epoch).
    func shareCurrentKey(on session: some SyncTransport, with devices: [Device], settings config: SyncConfig) async throws {
        let epoch = config.currentEpoch
        guard epoch > 0, let key = config.key(epoch: epoch) else { return }
        let holders = try await session.keyHolders(user: config.user, epoch: epoch)
        for device in devices where !device.revoked && !holders.contains(device.id) && !device.publicKey.isEmpty {
            let wrapped = try DeviceKey.wrap(key, to: device.publicKey, user: config.user, device: device.id, epoch: epoch)
            try await session.storeWrappedKey(wrapped, epoch: epoch, for: device.id, user: config.user)
            log.info("sync: gave \(device.name) the key of epoch \(epoch)")
        }
    }

    /// Seals this device's name again with the current epoch's key once it has that key, so
    /// that a device revoked since (which keeps epoch 0's) cannot read it. A device that joins
    /// after a revocation seals its name with epoch 0's key until another device gives it the
    /// current one, and reseals it then.
    func resealName(on session: some SyncTransport, _ config: SyncConfig) async throws {
        guard let sealedWith = nameEpoch.withLock({ $0 }), sealedWith < config.currentEpoch,
              let key = config.key(epoch: config.currentEpoch) else { return }
        let sealed = try Self.sealName(config, with: key)
        try await session.storeName(user: config.user, device: config.deviceID, sealed: sealed, epoch: config.currentEpoch)
        nameEpoch.withLock { $0 = config.currentEpoch }
        log.info("sync: this device's name is sealed with the key of epoch \(config.currentEpoch) now")
    }

    static func sealName(_ config: SyncConfig, with key: SymmetricKey) throws -> [UInt8] {
        try Seal.seal(Array(config.deviceName.utf8), key: key, context: Seal.nameContext(user: config.user, device: config.deviceID))
    }
}
