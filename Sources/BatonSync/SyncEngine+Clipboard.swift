import BatonCore
import BatonStore
import Crypto
import FoundationEssentials

extension SyncEngine {
    /// Sends a copy of this machine's clipboard to the user's other machines, as a record of
    /// its own. Its content is sealed with the current key here, before anything is written,
    /// so that the outbox holds it sealed too; it is dropped unsent once it expired.
    public func sendClipboard(_ copy: ClipboardCopy) async throws {
        guard let config = settings else { throw SyncError.state("sync is off on this machine") }
        let epoch = config.currentEpoch
        guard let key = config.key(epoch: epoch) else { throw SyncError.crypto("this machine has no key for epoch \(epoch)") }
        let sealed = try Seal.seal(copy.content, key: key, context: Seal.clipboardContext(user: config.user, device: config.deviceID, id: copy.id))
        let body = try SyncRecord(clipboard: copy, epoch: epoch, sealed: sealed).encoded()
        try await store.writing { try $0.enqueueClipboard(body, id: copy.id, expiresAt: copy.expiresAt) }
    }
}

extension SyncEngine {
    /// Takes this device's copies of the clipboard whose time is over out of its log: deleted on
    /// a server, replaced by a record that says nothing in a folder. A server that does not
    /// allow it is said once; the copy stays there, sealed.
    func removeExpiredClipboard(on session: some SyncTransport, _ config: SyncConfig) async throws {
        for record in try store.expiredClipboardRecords(now: store.wallClock.now()) {
            let removed = try await session.removeRecord(user: config.user, device: config.deviceID, seq: record.logSeq) { epoch in
                guard let key = config.key(epoch: epoch) else { throw SyncError.crypto("this machine has no key for epoch \(epoch)") }
                let context = Seal.recordContext(user: config.user, device: config.deviceID, seq: record.logSeq, epoch: epoch, hlc: record.hlc)
                return try Seal.seal(try SyncRecord.removed.encoded(), key: key, context: context)
            }
            // Noted before anything is said: whoever reads the warning finds the copy not to be tried again.
            try await store.writing { try $0.clipboardRecordRemoved(logSeq: record.logSeq) }
            if !removed && clipboardRemovalRefused.exchange(true, ordering: .relaxed) == false {
                log.warning("sync: the server does not let this device remove its expired copies of the clipboard (sealed); run scripts/sync-server-setup on it again")
            }
        }
    }
}

extension SyncRecord {
    /// The copy a `clipboard` record of `device` carries, its content opened with `key`; nil
    /// when a field is missing or the content does not open there.
    func clipboardCopy(user: String, device: String, key: SymmetricKey?) -> ClipboardCopy? {
        guard kind == "clipboard", let id, let mime, let madeAt, let expiresAt, let sealed, let key,
              let content = Seal.open(sealed, key: key, context: Seal.clipboardContext(user: user, device: device, id: id)) else {
            return nil
        }
        return ClipboardCopy(id: id, mime: mime, content: content, madeAt: madeAt, expiresAt: expiresAt, device: device)
    }
}
