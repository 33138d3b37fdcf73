import Crypto
import FoundationEssentials

/// The user's key: 128 random bits made by `Init` on the first device, shown once as
/// recovery words, typed into `Join` on every other device. Every epoch-0 record is
/// sealed with a key derived from it; later epochs (after a revocation) have random keys
/// wrapped to each remaining device (`DeviceKey`).
public struct UserKey: Sendable, Equatable {
    /// The 16 bytes the words spell.
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// A new random key.
    public static func generate() -> UserKey {
        UserKey(bytes: SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) })
    }

    /// The recovery words: the key as eight proquints (pronounceable five-letter words, 16
    /// bits each) and a ninth that checks them, so a typo is caught before anything is tried.
    public var recoveryWords: String {
        let checked = bytes + Array(SHA256.hash(data: bytes).prefix(2))
        return stride(from: 0, to: checked.count, by: 2)
            .map { Proquint.word(UInt16(checked[$0]) << 8 | UInt16(checked[$0 + 1])) }
            .joined(separator: " ")
    }

    /// Reads recovery words as `recoveryWords` prints them (any case, separated by spaces or hyphens).
    public init(recoveryWords: String) throws(SyncError) {
        let words = recoveryWords.lowercased().split(whereSeparator: { $0.isWhitespace || $0 == "-" })
        guard words.count == 9 else {
            throw .wrongWords("recovery words are 9 words; \(words.count) \(words.count == 1 ? "was" : "were") given")
        }
        var checked: [UInt8] = []
        for (index, word) in words.enumerated() {
            guard let value = Proquint.value(word) else {
                throw .wrongWords("word \(index + 1), \"\(word)\", is not a recovery word (5 letters: consonant, vowel, consonant, vowel, consonant)")
            }
            checked += [UInt8(value >> 8), UInt8(value & 0xFF)]
        }
        let bytes = Array(checked.prefix(16))
        guard Array(SHA256.hash(data: bytes).prefix(2)) == Array(checked.suffix(2)) else {
            throw .wrongWords("the recovery words do not check out: one of them is mistyped")
        }
        self.bytes = bytes
    }

    /// The key that seals epoch 0's records.
    public var epochZeroKey: SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: bytes), salt: Array("baton sync".utf8),
                               info: Array("epoch 0".utf8), outputByteCount: 32)
    }
}

/// Proquints (Wilkerson, "A Proposal for Proquints", arXiv:0901.4016): 16 bits as
/// consonant (4 bits), vowel (2), consonant (4), vowel (2), consonant (4).
enum Proquint {
    private static let consonants = Array("bdfghjklmnprstvz")
    private static let vowels = Array("aiou")

    static func word(_ value: UInt16) -> String {
        let v = Int(value)
        return String([consonants[v >> 12 & 0xF], vowels[v >> 10 & 0x3], consonants[v >> 6 & 0xF],
                       vowels[v >> 4 & 0x3], consonants[v & 0xF]])
    }

    static func value(_ word: Substring) -> UInt16? {
        let letters = Array(word)
        guard letters.count == 5,
              let c1 = consonants.firstIndex(of: letters[0]), let v1 = vowels.firstIndex(of: letters[1]),
              let c2 = consonants.firstIndex(of: letters[2]), let v2 = vowels.firstIndex(of: letters[3]),
              let c3 = consonants.firstIndex(of: letters[4]) else { return nil }
        return UInt16(c1 << 12 | v1 << 10 | c2 << 6 | v2 << 4 | c3)
    }
}

/// Sealing and opening with an epoch's key (ChaCha20-Poly1305). What a sealed box belongs to —
/// user, device, sequence number, epoch, and for a record the time it was written — is bound as
/// associated data, so whoever holds the records (the server's tables, the synced folder) cannot
/// move one to another log or position, or change the time that settles its conflicts, without
/// opening failing.
public enum Seal {
    public static func seal(_ plaintext: [UInt8], key: SymmetricKey, context: String) throws(SyncError) -> [UInt8] {
        do {
            return Array(try ChaChaPoly.seal(plaintext, using: key, authenticating: Array(context.utf8)).combined)
        } catch {
            throw .crypto("sealing failed: \(error)")
        }
    }

    /// The plaintext, or nil when the key is wrong or the box was altered or moved.
    public static func open(_ sealed: [UInt8], key: SymmetricKey, context: String) -> [UInt8]? {
        guard let box = try? ChaChaPoly.SealedBox(combined: sealed),
              let plaintext = try? ChaChaPoly.open(box, using: key, authenticating: Array(context.utf8)) else { return nil }
        return Array(plaintext)
    }

    /// A record's associated data: its place and its hybrid-logical time (`hlc`).
    public static func recordContext(user: String, device: String, seq: Int64, epoch: Int32, hlc: Int64) -> String {
        "baton record 2\u{1F}\(user)\u{1F}\(device)\u{1F}\(seq)\u{1F}\(epoch)\u{1F}\(hlc)"
    }

    /// The associated data of a record sealed before its time was bound (its place only), by a
    /// batond older than the time binding. Such records still open, so a log begun then reads to
    /// its end; their time is as the transport gives it.
    public static func placeOnlyRecordContext(user: String, device: String, seq: Int64, epoch: Int32) -> String {
        "baton record\u{1F}\(user)\u{1F}\(device)\u{1F}\(seq)\u{1F}\(epoch)"
    }

    /// A record's body, or nil when it was not sealed with `key` at this place and time.
    public static func openRecord(
        _ sealed: [UInt8], key: SymmetricKey, user: String, device: String, seq: Int64, epoch: Int32, hlc: Int64
    ) -> [UInt8]? {
        open(sealed, key: key, context: recordContext(user: user, device: device, seq: seq, epoch: epoch, hlc: hlc))
            ?? open(sealed, key: key, context: placeOnlyRecordContext(user: user, device: device, seq: seq, epoch: epoch))
    }

    /// The check value's associated data: a known text sealed per epoch, opened on `Join`.
    public static func checkContext(user: String, epoch: Int32) -> String {
        "baton key check\u{1F}\(user)\u{1F}\(epoch)"
    }

    /// A copy of the clipboard's associated data: its content is sealed on its own before the
    /// record that carries it is written anywhere (the outbox included).
    public static func clipboardContext(user: String, device: String, id: String) -> String {
        "baton clipboard\u{1F}\(user)\u{1F}\(device)\u{1F}\(id)"
    }

    /// A device name's associated data.
    public static func nameContext(user: String, device: String) -> String {
        "baton device name\u{1F}\(user)\u{1F}\(device)"
    }

    static let checkText = Array("baton sync key check".utf8)
}

/// A device's own key pair (X25519), for receiving later epochs' keys; the private half
/// never leaves the device.
public struct DeviceKey: Sendable {
    /// The private key's bytes (swift-crypto's key type is not Sendable).
    public let rawRepresentation: [UInt8]
    public let publicKey: [UInt8]

    public init(rawRepresentation: [UInt8]) throws(SyncError) {
        guard let key = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: rawRepresentation) else {
            throw .crypto("the device key is damaged (not 32 bytes of an X25519 key)")
        }
        self.init(key)
    }

    public init() {
        self.init(Curve25519.KeyAgreement.PrivateKey())
    }

    private init(_ key: Curve25519.KeyAgreement.PrivateKey) {
        rawRepresentation = Array(key.rawRepresentation)
        publicKey = Array(key.publicKey.rawRepresentation)
    }

    /// `epochKey` wrapped so that only the holder of `publicKey` can unwrap it: an ephemeral
    /// key agreement, HKDF, and a seal bound to user, device and epoch.
    public static func wrap(_ epochKey: SymmetricKey, to publicKey: [UInt8], user: String, device: String,
                            epoch: Int32) throws(SyncError) -> [UInt8] {
        do {
            let recipient = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: publicKey)
            let ephemeral = Curve25519.KeyAgreement.PrivateKey()
            let wrapping = try ephemeral.sharedSecretFromKeyAgreement(with: recipient)
                .hkdfDerivedSymmetricKey(using: SHA256.self, salt: Array("baton wrap".utf8), sharedInfo: [], outputByteCount: 32)
            let secret = epochKey.withUnsafeBytes { Array($0) }
            let context = Self.wrapContext(user: user, device: device, epoch: epoch)
            return Array(ephemeral.publicKey.rawRepresentation) + (try Seal.seal(secret, key: wrapping, context: context))
        } catch let error as SyncError {
            throw error
        } catch {
            throw .crypto("wrapping a key failed: \(error)")
        }
    }

    /// The epoch key wrapped to this device, or nil when it was wrapped to another.
    public func unwrap(_ wrapped: [UInt8], user: String, device: String, epoch: Int32) -> SymmetricKey? {
        guard wrapped.count > 32,
              let privateKey = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: rawRepresentation),
              let ephemeral = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: wrapped.prefix(32)),
              let shared = try? privateKey.sharedSecretFromKeyAgreement(with: ephemeral) else { return nil }
        let wrapping = shared.hkdfDerivedSymmetricKey(using: SHA256.self, salt: Array("baton wrap".utf8), sharedInfo: [],
                                                      outputByteCount: 32)
        let context = Self.wrapContext(user: user, device: device, epoch: epoch)
        return Seal.open(Array(wrapped.dropFirst(32)), key: wrapping, context: context).map { SymmetricKey(data: $0) }
    }

    private static func wrapContext(user: String, device: String, epoch: Int32) -> String {
        "baton epoch key\u{1F}\(user)\u{1F}\(device)\u{1F}\(epoch)"
    }
}

/// What can go wrong in sync, each with a sentence for the user.
public enum SyncError: Error, Equatable, CustomStringConvertible {
    /// Recovery words that are malformed, mistyped, or not this user's.
    case wrongWords(String)
    /// The server cannot be reached or refused us.
    case server(String)
    /// A key or sealed box that cannot be made or read.
    case crypto(String)
    /// Sync is not set up, or already is.
    case state(String)

    public var description: String {
        switch self {
        case .wrongWords(let text), .server(let text), .crypto(let text), .state(let text): text
        }
    }
}
