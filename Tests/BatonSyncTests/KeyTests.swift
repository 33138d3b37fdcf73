@testable import BatonSync
import Crypto
import Testing

@Suite struct KeyTests {
    @Test func recoveryWordsSpellTheKeyAndCatchATypo() throws {
        let key = UserKey.generate()
        let words = key.recoveryWords
        #expect(words.split(separator: " ").count == 9)
        #expect(try UserKey(recoveryWords: words) == key)
        #expect(try UserKey(recoveryWords: words.uppercased().replacingOccurrences(of: " ", with: "-")) == key)

        // One letter changed for another valid one: the words still parse, the check word catches it.
        var letters = Array(words)
        letters[2] = letters[2] == "b" ? "d" : "b"
        #expect(throws: SyncError.self) { try UserKey(recoveryWords: String(letters)) }
        #expect(throws: SyncError.wrongWords("recovery words are 9 words; 8 were given")) {
            try UserKey(recoveryWords: words.split(separator: " ").dropLast().joined(separator: " "))
        }
        #expect(throws: SyncError.self) { try UserKey(recoveryWords: words.replacingOccurrences(of: words.prefix(5), with: "hello")) }
    }

    @Test func proquintsAreTheProposalsSpelling() {
        // The proposal's own example: 127.0.0.1 is "lusab-babad".
        #expect(Proquint.word(0x7F00) == "lusab")
        #expect(Proquint.word(0x0001) == "babad")
        for value in [UInt16(0), 1, 0x7F00, 0xFFFF, 0x1234] {
            #expect(Proquint.value(Substring(Proquint.word(value))) == value)
        }
    }

    @Test func aSealedRecordOpensOnlyWithItsKeyInItsPlace() throws {
        let key = UserKey.generate().epochZeroKey
        let context = Seal.recordContext(user: "ana", device: "d1", seq: 7, epoch: 0, hlc: 1_000)
        let sealed = try Seal.seal(Array("Agatha's notes".utf8), key: key, context: context)
        #expect(Seal.open(sealed, key: key, context: context) == Array("Agatha's notes".utf8))
        #expect(Seal.openRecord(sealed, key: key, user: "ana", device: "d1", seq: 7, epoch: 0, hlc: 1_000) == Array("Agatha's notes".utf8))
        #expect(!String(decoding: sealed, as: UTF8.self).contains("Agatha"))
        // Another key, another position in the log, another device's log, another time: nothing opens.
        #expect(Seal.open(sealed, key: UserKey.generate().epochZeroKey, context: context) == nil)
        #expect(Seal.openRecord(sealed, key: key, user: "ana", device: "d1", seq: 8, epoch: 0, hlc: 1_000) == nil)
        #expect(Seal.openRecord(sealed, key: key, user: "ana", device: "d2", seq: 7, epoch: 0, hlc: 1_000) == nil)
        #expect(Seal.openRecord(sealed, key: key, user: "ana", device: "d1", seq: 7, epoch: 1, hlc: 1_000) == nil)
        #expect(Seal.openRecord(sealed, key: key, user: "ana", device: "d1", seq: 7, epoch: 0, hlc: 1_001) == nil)
        // A record an older batond sealed with its place only still opens where it is, at any time the transport says.
        let older = try Seal.seal(Array("older".utf8), key: key, context: Seal.placeOnlyRecordContext(user: "ana", device: "d1", seq: 7, epoch: 0))
        #expect(Seal.openRecord(older, key: key, user: "ana", device: "d1", seq: 7, epoch: 0, hlc: 5) == Array("older".utf8))
        #expect(Seal.openRecord(older, key: key, user: "ana", device: "d1", seq: 8, epoch: 0, hlc: 5) == nil)
        var altered = sealed
        altered[altered.count / 2] ^= 1
        #expect(Seal.open(altered, key: key, context: context) == nil)
    }

    @Test func anEpochKeyUnwrapsOnlyOnTheDeviceItWasWrappedTo() throws {
        let laptop = DeviceKey(), desktop = DeviceKey()
        let epochKey = SymmetricKey(size: .bits256)
        let wrapped = try DeviceKey.wrap(epochKey, to: laptop.publicKey, user: "ana", device: "laptop", epoch: 1)
        let unwrapped = try #require(laptop.unwrap(wrapped, user: "ana", device: "laptop", epoch: 1))
        #expect(unwrapped == epochKey)
        #expect(desktop.unwrap(wrapped, user: "ana", device: "laptop", epoch: 1) == nil)
        #expect(laptop.unwrap(wrapped, user: "ana", device: "laptop", epoch: 2) == nil)
        let restored = try DeviceKey(rawRepresentation: laptop.rawRepresentation)
        #expect(restored.unwrap(wrapped, user: "ana", device: "laptop", epoch: 1) == epochKey)
    }
}

@Suite struct WakeupTests {
    /// A wait that a ring ended leaves nothing behind: the next wait lasts its timeout. (Its
    /// cancelled timer used to ring, and the sync loop spun.)
    @Test func aWaitEndedByARingLeavesNoRingBehind() async {
        let bell = Wakeup()
        let clock = ContinuousClock()
        bell.ring()
        await bell.wait(timeout: .seconds(30))  // the ring made while nobody waited ends it at once
        let start = clock.now
        await bell.wait(timeout: .milliseconds(300))
        #expect(clock.now - start >= .milliseconds(300))
    }
}
