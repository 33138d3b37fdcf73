import BatonCore
import BatonKit
import BatonStore
@testable import BatonSync
import Crypto
import Foundation
import Glibc
import HawkNotes
import Logging
import Synchronization
import Testing
import TestSupport

/// Two devices syncing through a folder instead of a server (`file://`): one folder both see,
/// and two folders with a copier between them that behaves as a sync tool does — a file
/// arrives under a temporary name and is renamed into place, late, later files first, each
/// half-written under its own name first.
@Suite(.serialized) struct FolderSyncTests {
    let type = ActivityType(type: "com.raywenderlich.hawknotes.staterestore.characterDetail", appID: "com.raywenderlich.hawknotes",
                            title: "Character", handler: "com.raywenderlich.hawknotes", requiredKeys: ["id"])

    @Test func devicesSyncThroughOneFolder() async throws {
        let folder = try TemporaryDirectory.make(prefix: "baton-sync-folder").path
        try await whatOneAdvertisesTheOtherSees(desktopFolder: folder, laptopFolder: folder)
    }

    @Test func devicesSyncThroughTwoFoldersASyncToolKeepsTheSame() async throws {
        let desktopFolder = try TemporaryDirectory.make(prefix: "baton-sync-desktop").path
        let laptopFolder = try TemporaryDirectory.make(prefix: "baton-sync-laptop").path
        // The harder ways too: later files first, each half-written under its name before it is whole.
        var options = FolderCopier.Options()
        options.outOfOrder = true
        options.partialFirst = true
        let copier = try FolderCopier(desktopFolder, laptopFolder, options: options, ignoring: FolderTransport.isIgnored)
        defer { copier.stop() }
        try await whatOneAdvertisesTheOtherSees(desktopFolder: desktopFolder, laptopFolder: laptopFolder)
        #expect(copier.copied > 0)
    }

    /// A copy of the clipboard crosses as a record of its own, its bytes unchanged, sealed in the
    /// outbox as in the folder; one whose time was over before it was sent never leaves.
    @Test func aCopyOfTheClipboardCrossesSealedAndOnlyWhileItLasts() async throws {
        let folder = try TemporaryDirectory.make(prefix: "baton-sync-clipboard").path
        let received = Mutex<[ClipboardCopy]>([])
        let desktop = try SyncEngineTests.TestDevice(name: "desktop")
        let laptop = try SyncEngineTests.TestDevice(name: "laptop") { applied in received.withLock { $0 += applied.clipboard } }
        defer { desktop.close(); laptop.close() }
        let words = try await desktop.engine.initialize(url: folder, deviceName: "desktop")
        try await laptop.engine.join(url: folder, recoveryWords: words, deviceName: "laptop")
        let desktopID = try #require(desktop.engine.settings?.deviceID)

        let now = WallClock.nowMicroseconds()
        let text = ClipboardCopy(id: Identifier.make(), mime: ClipboardCopy.text, content: Array("Clipboard Marker, ünïcode\r\n".utf8),
                                 madeAt: now, expiresAt: now + 120_000_000)
        // Over before it was sent: written to the outbox, never to the log.
        let stale = ClipboardCopy(id: Identifier.make(), mime: ClipboardCopy.text, content: Array("Stale Marker".utf8),
                                  madeAt: now - 2_000_000, expiresAt: now - 1_000_000)
        let image = ClipboardCopy(id: Identifier.make(), mime: ClipboardCopy.png, content: (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) },
                                  madeAt: now, expiresAt: now + 120_000_000)
        for copy in [text, stale, image] { try await desktop.engine.sendClipboard(copy) }
        try await eventually("the laptop has both copies") { received.withLock { $0.count } >= 2 }
        var expected = [text, image]
        for index in expected.indices { expected[index].device = desktopID }
        #expect(received.withLock { $0 } == expected)

        // Nothing of the text in the clear: not in the folder, not in either database or its WAL.
        var files = (FileManager.default.enumerator(atPath: folder)?.compactMap { $0 as? String } ?? []).map { folder + "/" + $0 }
        for store in [desktop.store, laptop.store] { files += [store.path, store.path + "-wal"] }
        // The record's JSON carries the content as base64: the text's own base64 must not be there either.
        let encoded = String(Data(text.content).base64EncodedString().prefix(20))
        for file in files {
            let bytes = FileManager.default.contents(atPath: file) ?? Data()
            #expect(bytes.range(of: Data("Marker".utf8)) == nil && bytes.range(of: Data(encoded.utf8)) == nil, "\(file) holds a copy in the clear")
        }
    }

    /// A copy of the clipboard leaves the folder's log once its time is over: its record is
    /// replaced by one that says nothing, and a machine that joins afterwards reads the log
    /// without it (and every other record).
    @Test func aCopyOfTheClipboardLeavesTheLogWhenItsTimeIsOver() async throws {
        let folder = try TemporaryDirectory.make(prefix: "baton-sync-clipboard-gone").path
        let clock = ManualClock()
        let desktop = try SyncEngineTests.TestDevice(name: "desktop", clock: clock)
        let laptopGot = Mutex<[ClipboardCopy]>([]), tabletGot = Mutex<[ClipboardCopy]>([])
        let laptop = try SyncEngineTests.TestDevice(name: "laptop") { applied in laptopGot.withLock { $0 += applied.clipboard } }
        defer { desktop.close(); laptop.close() }
        try desktop.store.write { try $0.register(type) }
        let words = try await desktop.engine.initialize(url: folder, deviceName: "desktop")
        try await laptop.engine.join(url: folder, recoveryWords: words, deviceName: "laptop")
        let now = clock.now()
        let copy = ClipboardCopy(id: Identifier.make(), mime: ClipboardCopy.text, content: Array("a short-lived copy".utf8),
                                 madeAt: now, expiresAt: now + 120_000_000)
        try await desktop.engine.sendClipboard(copy)
        try await eventually("the laptop has the copy") { laptopGot.withLock { $0.count } == 1 }

        // Its time is over: at the engine's next round it leaves the log.
        await clock.advance(by: .seconds(121))
        let note = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "After the copy", payload: "{}",
                            createdAt: 1, updatedAt: 1)
        _ = try desktop.store.write { try $0.insert(note) }
        try await eventually("the desktop took the copy out of its log") {
            try desktop.store.expiredClipboardRecords(now: clock.now()).isEmpty
        }
        let tablet = try SyncEngineTests.TestDevice(name: "tablet") { applied in tabletGot.withLock { $0 += applied.clipboard } }
        defer { tablet.close() }
        try await tablet.engine.join(url: folder, recoveryWords: words, deviceName: "tablet")
        try await eventually("the tablet read the desktop's log") { try tablet.store.activity(id: note.id, now: 2) != nil }
        #expect(tabletGot.withLock { $0 }.isEmpty, "the copy is no longer in the log")
    }

    /// Another user's files in the folder (a stranger's device, copied in) add no device and
    /// hold nothing up: each machine lists only the other, and what the desktop advertises
    /// still reaches the laptop; nothing of the stranger's is applied.
    @Test func anotherUsersFilesInTheFolderAddNoDevice() async throws {
        let folder = try TemporaryDirectory.make(prefix: "baton-sync-ours").path
        let theirs = try TemporaryDirectory.make(prefix: "baton-sync-theirs").path
        let desktop = try SyncEngineTests.TestDevice(name: "desktop"), laptop = try SyncEngineTests.TestDevice(name: "laptop")
        let stranger = try SyncEngineTests.TestDevice(name: "stranger")
        defer { desktop.close(); laptop.close(); stranger.close() }
        for device in [desktop, stranger] { try device.store.write { try $0.register(type) } }
        let theirActivity = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Theirs", payload: #"{"id":"theirs"}"#,
                                     createdAt: 1, updatedAt: 1)
        _ = try stranger.store.write { try $0.insert(theirActivity) }
        _ = try await stranger.engine.initialize(url: theirs, deviceName: "stranger")
        let strangerID = try #require(stranger.engine.settings?.deviceID)
        try await eventually("the stranger wrote its log") {
            (try? FileManager.default.contentsOfDirectory(atPath: theirs + "/" + strangerID))?.contains { $0.hasPrefix("log-") } == true
        }

        let words = try await desktop.engine.initialize(url: folder, deviceName: "desktop")
        try FileManager.default.copyItem(atPath: theirs + "/" + strangerID, toPath: folder + "/" + strangerID)
        try await laptop.engine.join(url: folder, recoveryWords: words, deviceName: "laptop")
        let agatha = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Agatha", payload: #"{"id":"agatha"}"#,
                              createdAt: 2, updatedAt: 2)
        _ = try desktop.store.write { try $0.insert(agatha) }
        try await eventually("the laptop has Agatha") { try laptop.store.activity(id: agatha.id, now: 3) != nil }
        try await eventually("the desktop knows the laptop") { try desktop.engine.knownDevices().map(\.name) == ["desktop", "laptop"] }
        #expect(try laptop.engine.knownDevices().map(\.name) == ["laptop", "desktop"])
        #expect(try laptop.store.activity(id: theirActivity.id, now: 3) == nil && desktop.store.activity(id: theirActivity.id, now: 3) == nil)
        #expect(try laptop.store.remoteDeviceNames()[strangerID] == nil && desktop.store.remoteDeviceNames()[strangerID] == nil)
    }

    /// The first promises of sync (as `SyncEngineTests` checks them over the server): what the
    /// desktop had before it joined, a change and an end reach the laptop; the folder holds
    /// ciphertext only.
    private func whatOneAdvertisesTheOtherSees(desktopFolder: String, laptopFolder: String) async throws {
        let desktop = try SyncEngineTests.TestDevice(name: "desktop"), laptop = try SyncEngineTests.TestDevice(name: "laptop")
        defer { desktop.close(); laptop.close() }
        try desktop.store.write { try $0.register(type) }
        let agatha = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Agatha Marker",
                              payload: #"{"id":"agatha","note":"Payload Marker"}"#, createdAt: 1, updatedAt: 1)
        _ = try desktop.store.write { try $0.insert(agatha) }

        let words = try await desktop.engine.initialize(url: "file://" + desktopFolder, deviceName: "desktop")
        // Whole: the copier may half-write a file under its own name first.
        try await eventually("the laptop's folder has the desktop's key") {
            let root = FileManager.default.contents(atPath: laptopFolder + "/" + FolderTransport.rootName)
            return root != nil && root == FileManager.default.contents(atPath: desktopFolder + "/" + FolderTransport.rootName)
        }
        await #expect(throws: SyncError.self) {
            try await laptop.engine.join(url: laptopFolder, recoveryWords: UserKey.generate().recoveryWords, deviceName: "laptop")
        }
        #expect(laptop.engine.settings == nil)
        try await laptop.engine.join(url: laptopFolder, recoveryWords: words, deviceName: "laptop")

        try await eventually("the laptop has Agatha") { try laptop.store.activity(id: agatha.id, now: 2) != nil }
        #expect(try laptop.store.activity(id: agatha.id, now: 2)?.payload == agatha.payload)
        try await eventually("the laptop knows the desktop by name") { try laptop.engine.knownDevices().map(\.name) == ["laptop", "desktop"] }

        var renamed = agatha
        renamed.title = "Agatha Marker, revised"
        try desktop.store.write { try $0.update(renamed) }
        try await eventually("the laptop has the new title") { [renamed] in try laptop.store.activity(id: agatha.id, now: 2)?.title == renamed.title }
        _ = try desktop.store.write { try $0.deleteActivities(ids: [agatha.id]) }
        try await eventually("the laptop lets Agatha go") { try laptop.store.activity(id: agatha.id, now: 2) == nil }
        #expect(try laptop.store.tombstone(activityID: agatha.id)?.state == "invalidated")

        // And back: the laptop's activity reaches the desktop.
        try laptop.store.write { try $0.register(type) }
        let sam = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Sam Vimes", payload: #"{"id":"sam"}"#,
                           createdAt: 3, updatedAt: 3)
        _ = try laptop.store.write { try $0.insert(sam) }
        try await eventually("the desktop has Sam") { try desktop.store.activity(id: sam.id, now: 4) != nil }

        // Every file in the folders: ids, numbers and ciphertext, never a title, payload, type or name.
        for folder in Set([desktopFolder, laptopFolder]) {
            let files = FileManager.default.enumerator(atPath: folder)?.compactMap { $0 as? String } ?? []
            #expect(files.contains { $0.contains("/log-") })
            for file in files {
                let bytes = FileManager.default.contents(atPath: folder + "/" + file) ?? Data()
                let text = String(decoding: bytes, as: UTF8.self)
                for marker in ["Marker", "agatha", "Vimes", "hawknotes", "characterDetail", "desktop", "laptop"] {
                    #expect(!text.contains(marker), "\(file) holds \(marker) in plain text")
                }
            }
        }
    }
}


/// Two batond processes syncing through a folder, set up as a person does: `baton sync init
/// PATH` on the first, `baton sync join PATH` with the words on the second.
@Suite(.serialized) struct FolderDaemonTests {
    @Test func twoDaemonsSetUpWithTheCLIShareActivitiesThroughAFolder() async throws {
        let desktopFolder = try TemporaryDirectory.make(prefix: "baton-folder-desktop").path
        let laptopFolder = try TemporaryDirectory.make(prefix: "baton-folder-laptop").path
        let copier = try FolderCopier(desktopFolder, laptopFolder, ignoring: FolderTransport.isIgnored)
        defer { copier.stop() }
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }

        let initialized = try await desktop.baton(["sync", "init", "file://" + desktopFolder, "--name", "desktop", "--json"])
        #expect(initialized.status == 0, "\(initialized)")
        let words = try #require(initialized.stdout.split(separator: "\"").dropLast().last.map(String.init))
        try await eventually("the laptop's folder has the desktop's key") {
            FileManager.default.fileExists(atPath: laptopFolder + "/" + FolderTransport.rootName)
        }
        let joined = try await laptop.baton(["sync", "join", laptopFolder, "--name", "laptop"], stdin: words + "\n")
        #expect(joined.status == 0, "\(joined)")

        // A client nobody here wrote reads where the devices meet.
        let transport = try await laptop.run("busctl", ["--user", "get-property", "org.baton.Handoff1", "/org/baton/Handoff1",
                                                        "org.baton.Handoff1.Sync", "Transport"])
        #expect(transport.stdout == "s \"folder\"\n", "\(transport)")
        let status = try await laptop.baton(["sync", "status"])
        #expect(status.stdout.hasPrefix("sync is ") && status.stdout.contains("through the synced folder \(laptopFolder) as laptop"), "\(status)")
        // gdbus, another client nobody here wrote, reads it from Devices.
        let listed = try await laptop.run("gdbus", ["call", "--session", "--dest", "org.baton.Handoff1", "--object-path", "/org/baton/Handoff1",
                                                    "--method", "org.baton.Handoff1.Sync.Devices"])
        #expect(listed.stdout.contains("'folder': <'\(laptopFolder)'>"), "\(listed)")

        _ = try await desktop.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string("org.example.notes.note"), .string("org.example.notes"), .stringMap([:]),
        ])
        let id = try #require(try await desktop.call("org.baton.Handoff1.Activities", "Advertise", [
            .string("org.example.notes.note"), .string("Shopping list"), .string("{}"), .stringMap([:]),
        ]).first?.stringValue)
        try await eventually("the laptop has the note", timeout: .seconds(10)) {
            (try? await laptop.call("org.baton.Handoff1.Activities", "Get", [.string(id)])) != nil
        }
        let devices = try await laptop.baton(["devices"])
        #expect(devices.stdout.contains("desktop") && devices.stdout.contains("laptop"), "\(devices)")
        // The other machine, and when it last wrote: when it advertised the note, moments ago.
        let withOthers = try await laptop.baton(["sync", "status"])
        #expect(withOthers.stdout.contains("  desktop: last seen ") && !withOthers.stdout.contains("desktop: last seen never"), "\(withOthers)")

        // The laptop's folder goes (a disk unmounted): offline, and the doctor says what to do; back, online.
        #expect(rename(laptopFolder, laptopFolder + ".away") == 0)
        try await eventually("the laptop is offline", timeout: .seconds(20)) { try await laptop.syncProperty("State")?.stringValue == "offline" }
        let doctor = try await laptop.baton(["doctor", "--json"])
        #expect(doctor.stdout.contains(#""check":"sync","ok":false"#) && doctor.stdout.contains("the synced folder is not there"), "\(doctor)")
        #expect(rename(laptopFolder + ".away", laptopFolder) == 0)
        try await eventually("the laptop is online again", timeout: .seconds(20)) { try await laptop.syncProperty("State")?.stringValue == "online" }
    }
}

extension FolderSyncTests {
    /// A folder others can write to: random bytes, a log sealed with another key, a log moved
    /// from one device's place to another's, a log cut short, 10 000 files of junk. Sync goes
    /// on, nothing forged is applied, and what was skipped is said, once.
    @Test func aHostileFolderAppliesNothingForgedAndSaysWhatItSkipped() async throws {
        let (folder, said, desktop, laptop) = try await twoDevicesOnline(prefix: "baton-sync-hostile", laptopSays: true)
        defer { desktop.close(); laptop.close() }
        let first = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "First", payload: #"{"id":"1"}"#, createdAt: 1, updatedAt: 1)
        _ = try desktop.store.write { try $0.insert(first) }
        try await eventually("the laptop has the first") { try laptop.store.activity(id: first.id, now: 2) != nil }
        let desktopID = try #require(desktop.engine.settings?.deviceID)
        let user = try #require(desktop.engine.settings?.user)

        let files = FileManager.default
        // Each file whole at once, as a sync tool brings it: a temporary name, then a rename.
        func plant(_ device: String, _ name: String, _ bytes: [UInt8]) throws {
            try files.createDirectory(atPath: folder + "/" + device, withIntermediateDirectories: true)
            let temporary = folder + "/" + device + "/.syncthing." + name + ".tmp"
            #expect(files.createFile(atPath: temporary, contents: Data(bytes)))
            #expect(rename(temporary, folder + "/" + device + "/" + name) == 0)
        }
        // Random bytes where a log would be.
        try plant("random-device", "log-000000000001-000000000003", (0..<4096).map { _ in UInt8.random(in: 0...255) })
        // A well-formed log sealed with a key that is not the user's.
        let transport = FolderTransport(path: folder, me: nil, log: Logger(label: "planter"), now: { 1 })
        let stranger = SymmetricKey(size: .bits256)
        let forgedBody = try SyncRecord.hello.encoded()
        let forged = try Seal.seal(forgedBody, key: stranger, context: Seal.recordContext(user: user, device: "stranger-device", seq: 1, epoch: 0, hlc: Int64.max / 2))
        try files.createDirectory(atPath: folder + "/stranger-device", withIntermediateDirectories: true)
        try await transport.append(user: user, device: "stranger-device", epoch: 0, seqs: [1], hlcs: [Int64.max / 2], sealed: [forged])
        // The desktop's real log, moved to another device's place, and cut short under a third.
        // Its first: a log read from the start (a later one would wait for the records before it).
        let desktopLog = try #require(try files.contentsOfDirectory(atPath: folder + "/" + desktopID).first { $0.hasPrefix("log-000000000001-") })
        let real = try #require(files.contents(atPath: folder + "/" + desktopID + "/" + desktopLog))
        try plant("moved-device", desktopLog, Array(real))
        try plant("short-device", desktopLog, Array(real.dropLast(5)))
        // Junk: 10 000 files a sync tool or a person left.
        for index in 0..<10_000 { try plant("junk-device", "log-\(index)-\(index)", [UInt8(index % 256)]) }

        // Sync goes on: the desktop's next activity arrives; nothing planted became an activity.
        let second = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Second", payload: #"{"id":"2"}"#, createdAt: 3, updatedAt: 3)
        _ = try desktop.store.write { try $0.insert(second) }
        try await eventually("the laptop has the second", timeout: .seconds(20)) { try laptop.store.activity(id: second.id, now: 4) != nil }
        try await eventually("the laptop has read every planted log") {
            said.lines.contains { $0.contains("stranger-device") || $0.contains("moved-device") } && said.lines.contains { $0.contains("cut short") }
        }
        #expect(Set(try laptop.store.activities(.init(), now: 4).map(\.id)) == [first.id, second.id])
        #expect(laptop.store.clock.stamp(wallMicroseconds: 0) < Int64.max / 4, "a forged record's time was not observed")
        let lines = said.lines
        #expect(lines.contains { $0.contains("random-device") && $0.contains("not a log of Baton's") }, "\(lines)")
        #expect(lines.contains { $0.contains("stranger-device") && $0.contains("do not open with the user's key") }, "\(lines)")
        #expect(lines.contains { $0.contains("moved-device") && $0.contains("do not open with the user's key") }, "\(lines)")
        #expect(lines.contains { $0.contains("short-device") && $0.contains("cut short") }, "\(lines)")
        #expect(lines.filter { $0.contains("random-device") }.count == 1, "said once: \(lines)")
    }
}

extension FolderSyncTests {
    /// A record's time settles its conflicts, so it is sealed with it: whoever can write the
    /// folder cannot make a genuine record newer (to win) or older (to lose). A record whose time
    /// was changed in the desktop's own log is skipped and said, and the log goes on after it.
    @Test func aRecordWhoseTimeWasChangedInTheFolderIsNotApplied() async throws {
        let (folder, said, desktop, laptop) = try await twoDevicesOnline(prefix: "baton-sync-retimed", laptopSays: true)
        defer { desktop.close(); laptop.close() }
        func advertise(_ title: String) async throws -> Activity {
            let activity = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: title, payload: "{}", createdAt: 1, updatedAt: 1)
            _ = try desktop.store.write { try $0.insert(activity) }
            try await eventually("\(title) is in the folder") { try desktop.store.outboxCount() == 0 }
            return activity
        }
        let first = try await advertise("First")
        try await eventually("the laptop has the first") { try laptop.store.activity(id: first.id, now: 2) != nil }

        // The laptop stops reading; the desktop writes one record, whose time is then moved a day on in its file.
        laptop.close()
        let desktopID = try #require(desktop.engine.settings?.deviceID)
        let before = Set(try FileManager.default.contentsOfDirectory(atPath: folder + "/" + desktopID))
        let retimed = try await advertise("Retimed")
        let written = try #require(Set(try FileManager.default.contentsOfDirectory(atPath: folder + "/" + desktopID)).subtracting(before)
            .first { $0.hasPrefix("log-") })
        var bytes = try #require(FileManager.default.contents(atPath: folder + "/" + desktopID + "/" + written)).map { $0 }
        // The first record's time: after the 12-byte magic, its seq (8 bytes) and epoch (4), 8 bytes big-endian.
        let hlcAt = 12 + 8 + 4
        let hlc = bytes[hlcAt..<(hlcAt + 8)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let later = hlc + (86_400_000 << 16)
        for index in 0..<8 { bytes[hlcAt + index] = UInt8(truncatingIfNeeded: later >> UInt64(56 - 8 * index)) }
        let temporary = folder + "/" + desktopID + "/.syncthing." + written + ".tmp"
        #expect(FileManager.default.createFile(atPath: temporary, contents: Data(bytes)))
        #expect(rename(temporary, folder + "/" + desktopID + "/" + written) == 0)
        let after = try await advertise("After")

        // Back: the laptop reads on past the retimed record, and applies only what came after it.
        let settings = SyncConfig.path(besideDatabase: laptop.store.path)
        let returned = try SyncEngine(store: laptop.store, configPath: settings, log: Logger(label: "sync.laptop.back") { _ in said },
                                      answerTimeout: .seconds(3), onApplied: { _ in }, onChange: {})
        let loop = Task { await returned.run() }
        defer { loop.cancel() }
        try await eventually("the laptop has what came after", timeout: .seconds(20)) { try laptop.store.activity(id: after.id, now: 2) != nil }
        #expect(try laptop.store.activity(id: retimed.id, now: 2) == nil, "a record whose time was changed is not applied")
        #expect(said.lines.contains { $0.contains("desktop") && $0.contains("their time changed") }, "\(said.lines)")
        #expect(laptop.store.clock.stamp(wallMicroseconds: 0) < Int64(bitPattern: later), "the changed time was not observed")
    }
}

/// A log handler that keeps what is said (warnings and worse), for a test to read.
final class Said: LogHandler, Sendable {
    private let kept = Mutex<[String]>([])
    var lines: [String] { kept.withLock { $0 } }
    var metadata: Logger.Metadata {
        get { [:] }
        set {}  // swiftlint:disable:this unused_setter_value
    }
    var logLevel: Logger.Level {
        get { .trace }
        set {}  // swiftlint:disable:this unused_setter_value
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}  // swiftlint:disable:this unused_setter_value
    }

    func log(event: LogEvent) {
        if event.level >= .warning { kept.withLock { $0.append(event.message.description) } }
    }
}

/// The real thing: two Syncthing instances from Debian keep the folder the same between the
/// desktop's path and the laptop's (their own homes, in a network namespace of the test's own
/// with only loopback). Hawk Notes' Agatha, opened on the desktop, is continued on the laptop
/// by the laptop's Hawk Notes, and the desktop's app hears where it went.
@Suite(.serialized) struct SyncthingTests {
    @Test func anActivityCrossesThroughSyncthingAndIsContinuedOnTheOtherMachine() async throws {
        let work = try TemporaryDirectory.make(prefix: "baton-syncthing")
        let desktopFolder = work.appendingPathComponent("desktop-sync").path, laptopFolder = work.appendingPathComponent("laptop-sync").path
        for folder in [desktopFolder, laptopFolder] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let output = work.appendingPathComponent("pair.out").path
        let outputFile = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { close(outputFile) }
        let pair = try Subprocess(try Executables.require("unshare", package: "util-linux"), [
            "-n", "python3", Repository.root.appendingPathComponent("Tests/Scripts/syncthing-pair.py").path, work.path, desktopFolder, laptopFolder,
        ], stdout: outputFile, stderr: outputFile, ownGroup: true)
        defer { pair.kill(SIGKILL) }
        try await eventually("both Syncthing instances share the folder", timeout: .seconds(90)) {
            let said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            if pair.hasExited { throw TestSupportError("syncthing-pair ended: \(said)") }
            return said.contains("ready")
        }

        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started()
        defer { desktop.close(); laptop.close() }
        guard let words = try await desktop.call("org.baton.Handoff1.Sync", "Init", [.string("file://" + desktopFolder), .stringMap(["device_name": "desktop"])])
            .first?.stringValue else { throw TestSupportError("Init gave no recovery words") }
        try await eventually("Syncthing brings the desktop's key to the laptop's folder", timeout: .seconds(20)) {
            FileManager.default.fileExists(atPath: laptopFolder + "/" + FolderTransport.rootName)
        }
        _ = try await laptop.call("org.baton.Handoff1.Sync", "Join", [.string(laptopFolder), .string(words), .stringMap(["device_name": "laptop"])])
        let laptopID = try #require(try await laptop.syncProperty("DeviceId")?.stringValue)

        let laptopApp = try Subprocess(try Executables.built("hawk-notes"), ["serve"], environment: laptop.bus.environment)
        defer { laptopApp.kill(SIGKILL) }
        try await laptop.client.waitForName(HawkNotesApp.busName, timeout: .seconds(15))
        let desktopClient = try BatonClient(.address(desktop.bus.address))
        defer { desktopClient.close() }
        try await HawkNotesApp.serve(client: desktopClient)
        let window = HawkNotesScene(scene: try await desktopClient.openScene(appID: HawkNotesApp.appID, title: "Window 1"), client: desktopClient)
        let agatha = try await window.open(Catalog.agatha, in: Catalog.goodHawk)
        let heard = Mutex<[String]>([])
        agatha.onContinued = { _, device in heard.withLock { $0.append(device) } }
        let id = try #require(agatha.id)

        try await eventually("Syncthing brings Agatha to the laptop", timeout: .seconds(30)) {
            (try? await laptop.call("org.baton.Handoff1.Activities", "Get", [.string(id)])) != nil
        }
        let scene = try #require(try await laptop.call("org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap([:])])
            .first?.objectPathValue)
        let shown = try await laptop.run(try Executables.built("hawk-notes"), ["show", scene.text])
        #expect(shown.stdout.contains("The Good Hawk › Agatha"), "\(shown)")
        try await eventually("the desktop's Hawk Notes heard it went to the laptop", timeout: .seconds(30)) {
            heard.withLock { $0 } == [laptopID]
        }
        // Syncthing never met a conflict: each machine wrote only its own files.
        let left = FileManager.default.enumerator(atPath: work.path)?.compactMap { $0 as? String }.filter { $0.contains(".sync-conflict-") } ?? []
        #expect(left.isEmpty, "\(left)")
    }
}

extension FolderSyncTests {
    /// The folder stays small: past `FolderTransport.compactionFiles` log files a device writes
    /// its state again and drops what came before. A laptop away meanwhile comes back to the
    /// state: what the desktop has now, and nothing it ended while the laptop was away.
    @Test func compactionKeepsTheFolderSmallAndAMachineAwayCatchesUp() async throws {
        let folder = try TemporaryDirectory.make(prefix: "baton-sync-compaction").path
        let desktop = try SyncEngineTests.TestDevice(name: "desktop"), laptop = try SyncEngineTests.TestDevice(name: "laptop")
        defer { desktop.close(); laptop.close() }
        try desktop.store.write { try $0.register(type) }
        let words = try await desktop.engine.initialize(url: folder, deviceName: "desktop")
        try await laptop.engine.join(url: folder, recoveryWords: words, deviceName: "laptop")
        func advertise(_ title: String) throws -> Activity {
            let activity = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: title, payload: "{}",
                                    persistentID: title, createdAt: 1, updatedAt: 1)
            _ = try desktop.store.write { try $0.insert(activity) }
            return activity
        }
        let kept = try advertise("kept"), ended = try advertise("ended")
        try await eventually("the laptop has both") { try laptop.store.activity(id: ended.id, now: 2) != nil && laptop.store.activity(id: kept.id, now: 2) != nil }

        // The laptop goes away; the desktop ends one and writes many times, one file each.
        laptop.close()
        _ = try desktop.store.write { try $0.deleteActivities(ids: [ended.id]) }
        let desktopID = try #require(desktop.engine.settings?.deviceID)
        var latest = kept
        for round in 0..<(FolderTransport.compactionFiles + 8) {
            latest.title = "kept, round \(round)"
            try desktop.store.write { [latest] in try $0.update(latest) }
            try await eventually("round \(round) is sent") { try desktop.store.outboxCount() == 0 }
        }
        let added = try advertise("added while away")
        try await eventually("the desktop compacted its log") {
            let files = try FileManager.default.contentsOfDirectory(atPath: folder + "/" + desktopID).filter { $0.hasPrefix("log-") }
            return files.count < FolderTransport.compactionFiles / 2 && !files.contains { $0.hasPrefix("log-000000000001-") }
        }

        // Back: a new engine on the laptop's store and settings, as after a restart.
        let settings = SyncConfig.path(besideDatabase: laptop.store.path)
        let returned = try SyncEngine(store: laptop.store, configPath: settings, log: Logger(label: "sync.laptop.back"), answerTimeout: .seconds(3),
                                      onApplied: { _ in }, onChange: {})
        let loop = Task { await returned.run() }
        defer { loop.cancel() }
        try await eventually("the laptop has the desktop's state", timeout: .seconds(20)) { [latest] in
            try laptop.store.activity(id: added.id, now: 2) != nil && laptop.store.activity(id: kept.id, now: 2)?.title == latest.title
        }
        try await eventually("the activity ended while the laptop was away is gone there") { try laptop.store.activity(id: ended.id, now: 2) == nil }
        #expect(try laptop.store.tombstone(activityID: ended.id)?.reason.contains("while this machine was not reading") == true)
        #expect(Set(try laptop.store.activities(.init(), now: 2).map(\.id)) == [kept.id, added.id])
    }
}

extension FolderSyncTests {
    /// A request to end another machine's activity outlives the log it was written in: the
    /// laptop, away while the desktop invalidated the laptop's activity and then compacted its
    /// log past that request, ends the activity when it comes back.
    @Test func aRequestMadeWhileAMachineWasAwaySurvivesCompaction() async throws {
        let (folder, _, desktop, laptop) = try await twoDevicesOnline(prefix: "baton-sync-request")
        defer { desktop.close(); laptop.close() }
        try laptop.store.write { try $0.register(type) }
        let mine = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Laptop's Agatha", payload: "{}", createdAt: 1, updatedAt: 1)
        _ = try laptop.store.write { try $0.insert(mine) }
        try await eventually("the desktop has the laptop's activity") { try desktop.store.activity(id: mine.id, now: 2) != nil }

        // Away: the desktop invalidates it (here at once; there when the laptop reads the request), then compacts.
        laptop.close()
        let remote = try #require(try desktop.store.activity(id: mine.id, now: 2))
        #expect(try await desktop.engine.invalidate(remote).map(\.id) == [mine.id])
        let desktopID = try #require(desktop.engine.settings?.deviceID)
        let note = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "note", payload: "{}", createdAt: 1, updatedAt: 1)
        try desktop.store.write { try $0.register(type) }
        _ = try desktop.store.write { try $0.insert(note) }
        var latest = note
        for round in 0..<(FolderTransport.compactionFiles + 8) {
            latest.title = "note, round \(round)"
            try desktop.store.write { [latest] in try $0.update(latest) }
            try await eventually("round \(round) is sent") { try desktop.store.outboxCount() == 0 }
        }
        try await eventually("the desktop compacted its log past the request") {
            !(try FileManager.default.contentsOfDirectory(atPath: folder + "/" + desktopID).contains { $0.hasPrefix("log-000000000001-") })
        }

        // Back: the laptop reads the desktop's log from its new start, and the request is in it.
        let returned = try SyncEngine(store: laptop.store, configPath: SyncConfig.path(besideDatabase: laptop.store.path),
                                      log: Logger(label: "sync.laptop.back"), answerTimeout: .seconds(3), onApplied: { _ in }, onChange: {})
        let loop = Task { await returned.run() }
        defer { loop.cancel() }
        try await eventually("the laptop has the desktop's note", timeout: .seconds(20)) { [latest] in
            try laptop.store.activity(id: note.id, now: 2)?.title == latest.title
        }
        try await eventually("the laptop ended its activity as the desktop asked") { try laptop.store.activity(id: mine.id, now: 2) == nil }
    }
}

extension FolderSyncTests {
    /// A folder of its own with two devices in it, the desktop online; the desktop logs to
    /// `said`, or the laptop does (`laptopSays`).
    func twoDevicesOnline(prefix: String, laptopSays: Bool = false) async throws
        -> (folder: String, said: Said, desktop: SyncEngineTests.TestDevice, laptop: SyncEngineTests.TestDevice) {
        let folder = try TemporaryDirectory.make(prefix: prefix).path
        let said = Said()
        let desktop = try SyncEngineTests.TestDevice(name: "desktop", log: laptopSays ? nil : said)
        let laptop = try SyncEngineTests.TestDevice(name: "laptop", log: laptopSays ? said : nil)
        do {
            try desktop.store.write { try $0.register(type) }
            let words = try await desktop.engine.initialize(url: folder, deviceName: "desktop")
            try await laptop.engine.join(url: folder, recoveryWords: words, deviceName: "laptop")
            try await eventually("the desktop is online") { desktop.engine.state == .online }
        } catch {
            desktop.close()
            laptop.close()
            throw error
        }
        return (folder, said, desktop, laptop)
    }

    /// A folder that goes (a disk unmounted, here moved away) makes sync offline, said once;
    /// when it is back, sync resumes and what was advertised meanwhile crosses.
    @Test func aFolderThatGoesIsSaidOnceAndSyncResumesWhenItIsBack() async throws {
        let (folder, said, desktop, laptop) = try await twoDevicesOnline(prefix: "baton-sync-away")
        defer { desktop.close(); laptop.close() }

        #expect(rename(folder, folder + ".away") == 0)
        try await eventually("the desktop is offline") { desktop.engine.state == .offline }
        let meanwhile = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Meanwhile", payload: "{}", createdAt: 1, updatedAt: 1)
        _ = try desktop.store.write { try $0.insert(meanwhile) }
        #expect(rename(folder + ".away", folder) == 0)
        try await eventually("the laptop has what the desktop advertised while the folder was away", timeout: .seconds(20)) {
            try laptop.store.activity(id: meanwhile.id, now: 2) != nil
        }
        #expect(desktop.engine.state == .online)
        let gone = said.lines.filter { $0.contains("is not there") }
        #expect(gone.count == 1 && gone.first?.contains("retrying until the folder is back") == true, "\(said.lines)")
    }
}

extension FolderSyncTests {
    /// A folder that cannot be written (here made immutable with chattr, which stops root too, as
    /// a disk mounted read-only would) makes sync offline, said once; writable again, sync
    /// resumes and what was advertised meanwhile crosses.
    @Test func aFolderThatCannotBeWrittenIsSaidOnceAndSyncResumesWhenItCanBe() async throws {
        let chattr = try Executables.require("chattr", package: "e2fsprogs")
        let (folder, said, desktop, laptop) = try await twoDevicesOnline(prefix: "baton-sync-readonly")
        defer { desktop.close(); laptop.close() }

        let locked = try await Executables.run(chattr, ["+i", folder])
        guard locked.status == 0 else {
            throw TestSupportError("chattr +i \(folder) failed (a file system without immutable files?): \(locked)")
        }
        let meanwhile = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Meanwhile", payload: "{}", createdAt: 1, updatedAt: 1)
        // Made writable again whatever happens: an immutable folder outlives the test otherwise.
        let whileLocked: (any Error)?
        do {
            _ = try desktop.store.write { try $0.insert(meanwhile) }
            try await eventually("the desktop is offline", timeout: .seconds(20)) { desktop.engine.state == .offline }
            whileLocked = nil
        } catch {
            whileLocked = error
        }
        let unlocked = try await Executables.run(chattr, ["-i", folder])
        #expect(unlocked.status == 0, "\(unlocked)")
        if let whileLocked { throw whileLocked }
        try await eventually("the laptop has what the desktop advertised while the folder could not be written", timeout: .seconds(20)) {
            try laptop.store.activity(id: meanwhile.id, now: 2) != nil
        }
        #expect(desktop.engine.state == .online)
        let notWritable = said.lines.filter { $0.contains("is not writable") }
        #expect(notWritable.count == 1 && notWritable.first?.contains("sync resumes when it is") == true, "\(said.lines)")
    }
}
