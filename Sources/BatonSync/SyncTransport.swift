import Crypto

/// Where a user's devices meet: each device's log of sealed records, the user's key epochs,
/// the devices with their public keys and sealed names. The engine syncs the same way over
/// any of them; what differs is where the bytes lie and how a change is noticed:
/// `ServerSession` (the user's PostgreSQL server, LISTEN/NOTIFY) and `FolderTransport` (a
/// folder a sync tool keeps the same on every machine, inotify).
///
/// Everything a transport holds is sealed with the user's key or public: a transport is not
/// trusted with what the records say, only to keep and hand back bytes.
protocol SyncTransport: Sendable {
    /// True once the transport can no longer be used (the connection closed); the engine
    /// then starts over with a new one.
    var isClosed: Bool { get }
    /// Why, in a sentence, once `isClosed`.
    var closedReason: String { get }

    /// Runs `body` while `notified` is called at each change another device may have made
    /// (and once when the notifications end).
    func listening<T: Sendable>(on channel: String, notified: @escaping @Sendable () -> Void, _ body: () async throws -> T) async throws -> T

    // MARK: Logs

    /// Appends sealed records to `device`'s log; records already there (a batch whose reply
    /// was lost) are kept as they are.
    func append(user: String, device: String, epoch: Int32, seqs: [Int64], hlcs: [Int64], sealed: [[UInt8]]) async throws
    /// Each of the user's logs' last seq, by device.
    func logHeads(user: String) async throws -> [String: Int64]
    /// Up to `limit` records of `device`'s log after `seq`, in order: seq, epoch, hlc, sealed.
    /// When the log before some seq is gone (compacted), the records from there.
    func records(user: String, device: String, after seq: Int64, limit: Int) async throws -> [(Int64, Int32, Int64, [UInt8])]
    /// Whether `device`'s log should be compacted: its state written again, and what came before dropped.
    func wantsCompaction(user: String, device: String) async throws -> Bool
    /// Drops `device`'s records up to `seq`: a snapshot of its state after them has been appended.
    func dropLog(user: String, device: String, through seq: Int64) async throws
    /// Takes `device`'s record `seq` out of its log (a copy of the clipboard whose time is over):
    /// deleted where the readers allow a gap, else replaced by `placeholder(epoch)`, the record
    /// of that epoch that says nothing. False when the transport does not allow it.
    func removeRecord(user: String, device: String, seq: Int64, placeholder: (Int32) throws -> [UInt8]) async throws -> Bool

    // MARK: Devices

    /// The user this transport is of (`role`: the login that asks); throws when there is none.
    func member(role: String) async throws -> String
    func addDevice(user: String, id: String, publicKey: [UInt8], sealedName: [UInt8]) async throws
    /// What the others see as this device's `last_seen`: now.
    func touch(user: String, device: String) async throws
    /// The user's devices, their names opened with the key of the epoch each was sealed with
    /// (`SyncEngine.unreadableName` when `config` has not that key).
    func devices(_ config: SyncConfig) async throws -> [SyncEngine.Device]
    /// Stores this device's name, sealed with the key of `epoch`.
    func storeName(user: String, device: String, sealed: [UInt8], epoch: Int32) async throws

    // MARK: Keys

    /// Stores the check value of the user's key of `epoch`; `KeyExists` when the user has one
    /// of that epoch already.
    func addUserKey(user: String, epoch: Int32, check: [UInt8]) async throws
    /// The check value of the user's key of `epoch`, if the user has one.
    func userKeyCheck(user: String, epoch: Int32) async throws -> [UInt8]?
    /// The user's newest key epoch (0 before any revocation).
    func newestEpoch(user: String) async throws -> Int32
    /// The key of `epoch` wrapped to `device`, if another device stored it.
    func wrappedKey(user: String, epoch: Int32, device: String) async throws -> [UInt8]?
    /// The devices that have the key of `epoch`.
    func keyHolders(user: String, epoch: Int32) async throws -> Set<String>
    /// Stores the key of `epoch`, wrapped to `device` (`DeviceKey.wrap`).
    func storeWrappedKey(_ wrapped: [UInt8], epoch: Int32, for device: String, user: String) async throws
    /// Begins the user's next key epoch with `newKey`, wraps it to `keepers`, marks `revoked`
    /// revoked and stores this device's name sealed with the new key (`sealedName`).
    /// Returns the new epoch.
    func revoke(_ revoked: String, keepers: [SyncEngine.Device], newKey: SymmetricKey, sealedName: [UInt8], config: SyncConfig) async throws -> Int32
}

/// The user has a key of that epoch already (`SyncTransport.addUserKey`).
struct KeyExists: Error {}
