import BatonCore
import BatonStore
@testable import BatonSync
import Foundation
import Logging
import Synchronization
import Testing
import TestSupport

/// Two devices, each a real store and a sync engine, against a real PostgreSQL server set up
/// by the administrator's script: what one advertises the other sees, ends when it ends, and
/// the server holds ciphertext only. Its tests run side by side (each has its devices and its
/// database): one after another they were the parallel stage's last suite, 66 s of its 66.
@Suite struct SyncEngineTests {
    let type = ActivityType(type: "com.raywenderlich.hawknotes.staterestore.characterDetail", appID: "com.raywenderlich.hawknotes",
                            title: "Character", handler: "com.raywenderlich.hawknotes", requiredKeys: ["id"])

    /// A device: its own state directory, store and engine, the engine's loop running.
    final class TestDevice: Sendable {
        let store: Store
        let engine: SyncEngine
        let loop: Task<Void, Never>
        let name: String

        /// `log`: where the engine's messages go (stderr, as batond's, when nil); `clock`: the
        /// store's, which the engine stamps its records with.
        init(name: String, log handler: (any LogHandler)? = nil, clock: any DaemonClock = SystemClock(),
             onApplied: @escaping @Sendable (Store.Applied) -> Void = { _ in }) throws {
            self.name = name
            let directory = try TemporaryDirectory.make(prefix: "baton-device-\(name)")
            let database = directory.appendingPathComponent("baton.sqlite").path
            store = try Store(path: database, clock: clock)
            var log = handler.map { handler in Logger(label: "sync.\(name)") { _ in handler } } ?? Logger(label: "sync.\(name)")
            log.logLevel = ProcessInfo.processInfo.environment["BATON_SYNC_DEBUG"] == nil ? .warning : .trace
            engine = try SyncEngine(store: store, configPath: SyncConfig.path(besideDatabase: database), log: log, answerTimeout: .seconds(3),
                                    onApplied: onApplied, onChange: {})
            loop = Task { [engine] in await engine.run() }
        }

        func close() {
            loop.cancel()
        }

        /// Sets this device up as `user`'s first, with a login of its own; returns the recovery words.
        func initialize(on sync: SyncServer, user: String = "ana") async throws -> String {
            try await engine.initialize(url: try await sync.addDevice(user: user).url, deviceName: name)
        }

        /// Joins this device to `user`'s others, with a login of its own.
        func join(on sync: SyncServer, words: String, user: String = "ana") async throws {
            try await engine.join(url: try await sync.addDevice(user: user).url, recoveryWords: words, deviceName: name)
        }
    }

    @Test func whatOneDeviceAdvertisesTheOtherSeesAndTheServerCannotRead() async throws {
        let sync = try await SyncServer.fresh()
        let desktop = try TestDevice(name: "desktop"), laptop = try TestDevice(name: "laptop")
        defer { desktop.close(); laptop.close() }

        try desktop.store.write { try $0.register(type) }
        let agatha = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Agatha Marker",
                              payload: #"{"id":"agatha","note":"Payload Marker"}"#, keywords: ["Keyword Marker"],
                              eligibleForSearch: true, createdAt: 1, updatedAt: 1)
        _ = try desktop.store.write { try $0.insert(agatha) }

        let words = try await desktop.initialize(on: sync)
        // A wrong key on the laptop: a clear error, nothing joined, nothing written.
        await #expect(throws: SyncError.wrongWords("these recovery words are not ana's key; nothing was changed")) {
            try await laptop.engine.join(url: try await sync.addDevice(user: "ana").url,
                                         recoveryWords: UserKey.generate().recoveryWords, deviceName: "laptop")
        }
        #expect(laptop.engine.settings == nil)
        try await laptop.join(on: sync, words: words)

        // What the desktop had before it joined reaches the laptop.
        try await eventually("the laptop has Agatha") { try laptop.store.activity(id: agatha.id, now: 2) != nil }
        let copy = try #require(try laptop.store.activity(id: agatha.id, now: 2))
        #expect(copy.title == agatha.title && copy.payload == agatha.payload && copy.keywords == agatha.keywords)
        #expect(copy.deviceID == desktop.engine.settings?.deviceID)
        #expect(try laptop.store.search("agatha", limit: 5, now: 2).map(\.id) == [agatha.id])
        #expect(try laptop.store.devicesWithType(type.type) == [desktop.engine.settings?.deviceID].compactMap { $0 })
        #expect(try laptop.engine.knownDevices().map(\.name) == ["laptop", "desktop"])

        // A change, then the end, follow.
        var renamed = agatha
        renamed.title = "Agatha Marker, revised"
        try desktop.store.write { try $0.update(renamed) }
        try await eventually("the laptop has the new title") { [renamed] in try laptop.store.activity(id: agatha.id, now: 2)?.title == renamed.title }
        _ = try desktop.store.write { try $0.deleteActivities(ids: [agatha.id]) }
        try await eventually("the laptop lets Agatha go") { try laptop.store.activity(id: agatha.id, now: 2) == nil }
        #expect(try laptop.store.tombstone(activityID: agatha.id)?.state == "invalidated")
        // (The desktop deletes what it sent once the server said so, which may be after the laptop has it.)
        try await eventually("the desktop's outbox is empty") { try desktop.store.outboxCount() == 0 }

        // With nothing to do, the engines rest: no round until something wakes them. (The measure
        // is what happens over a second with nothing going on, so it waits that second.)
        let rounds = desktop.engine.rounds.load(ordering: .relaxed) + laptop.engine.rounds.load(ordering: .relaxed)
        try await Task.sleep(for: .seconds(1))
        #expect(desktop.engine.rounds.load(ordering: .relaxed) + laptop.engine.rounds.load(ordering: .relaxed) - rounds <= 2)

        // The server's tables: ids, numbers, times and ciphertext, never a title, payload, keyword, type or name.
        let dump = try await sync.psql("""
            SELECT string_agg(t::text, E'\\n') FROM (
                SELECT r::text AS t FROM baton.record r UNION ALL SELECT d::text FROM baton.device d
                UNION ALL SELECT k::text FROM baton.user_key k) x
            """)
        #expect(dump.contains(desktop.engine.settings?.deviceID ?? "?"))
        for marker in ["Marker", "marker", "agatha", "hawknotes", "characterDetail", "desktop", "laptop"] {
            #expect(!dump.contains(marker), "the server holds \(marker) in plain text")
            let hex = marker.utf8.map { String(format: "%02x", $0) }.joined()
            #expect(!dump.contains(hex), "the server holds \(marker) in a bytea")
        }
    }

    /// Over TLS, with the server's certificate checked; a certificate that cannot be checked is a clear refusal.
    @Test func devicesReachTheServerOverCheckedTLS() async throws {
        let server = try await PostgresServer(tls: true)
        defer { server.close() }
        let sync = try await SyncServer(server)
        let desktop = try TestDevice(name: "desktop")
        defer { desktop.close() }
        let url = try await sync.addDevice(user: "ana").url
        await #expect(throws: SyncError.self) {
            _ = try await desktop.engine.initialize(url: url + "?sslmode=verify-full", deviceName: "desktop")
        }
        #expect(desktop.engine.settings == nil)
        _ = try await desktop.engine.initialize(url: url + "?sslmode=verify-full&sslrootcert=\(server.certificatePath)", deviceName: "desktop")
        try await eventually("online") { desktop.engine.state == .online }
        let role = url.split(separator: "/")[1].split(separator: ":")[0]
        let encrypted = try await server.psql(
            "SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.usename = '\(role)'",
            database: sync.database)
        #expect(encrypted == "t\n")
    }

    /// A device with the key that sends what no caller could (a payload that is not JSON, a
    /// title over the limit, a page that is not http(s), an app id that is not one, a kind from
    /// the future) has those records skipped — the one validation local writes get; the rest
    /// of its log still applies.
    @Test func hostileRecordsAreSkippedAndTheLogGoesOn() async throws {
        let sync = try await SyncServer.fresh()
        let laptop = try TestDevice(name: "laptop"), desktop = try TestDevice(name: "desktop")
        defer { laptop.close(); desktop.close() }
        let words = try await desktop.initialize(on: sync)
        try await laptop.join(on: sync, words: words)

        // A third device, written by hand: its own login, its own log, sealed with the user's key.
        let rogue = try await sync.addDevice(user: "ana")
        let key = try UserKey(recoveryWords: words).epochZeroKey
        func hex(_ bytes: [UInt8]) -> String { "\\x" + bytes.map { String(format: "%02x", $0) }.joined() }
        let name = try Seal.seal(Array("rogue".utf8), key: key, context: Seal.nameContext(user: "ana", device: "rogue"))
        try await rogue.run("INSERT INTO baton.device (user_name, device_id, public_key, sealed_name) VALUES ('ana', 'rogue', '\\x00', '\(hex(name))')")
        func activity(_ title: String, payload: String, app: String = "org.example", extra: String = "") -> String {
            #"{"v":1,"kind":"activity","activity":{"id":"\#(Identifier.make())","type":"org.example.t","appID":"\#(app)","title":"\#(title)","payload":\#(StrictJSON.quote(payload)),"keywords":[],"eligibleForHandoff":true,"eligibleForSearch":false,"createdAt":1,"updatedAt":1\#(extra)}}"#
        }
        let bodies = [
            activity("Not JSON", payload: "{nope"),
            activity(String(repeating: "x", count: 2000), payload: "{}"),
            activity("Script page", payload: "{}", extra: #","webpageURL":"javascript:alert(1)""#),
            activity("No app", payload: "{}", app: "not an app id"),
            #"{"v":2,"kind":"hologram","id":"x"}"#,
            "not even JSON",
            activity("Fine", payload: #"{"ok":true}"#),
        ]
        for (index, body) in bodies.enumerated() {
            let seq = Int64(index + 1)
            let sealed = try Seal.seal(Array(body.utf8), key: key, context: Seal.recordContext(user: "ana", device: "rogue", seq: seq, epoch: 0, hlc: 1))
            try await rogue.run("INSERT INTO baton.record (user_name, device_id, seq, epoch, hlc, sealed) VALUES ('ana', 'rogue', \(seq), 0, 1, '\(hex(sealed))')")
        }
        try await rogue.run("NOTIFY \(SyncEngine.channel(user: "ana"))")
        try await eventually("the laptop read the rogue log to its end", timeout: .seconds(10)) {
            try laptop.store.syncCursors()["rogue"] == 7
        }
        #expect(try laptop.store.activities(.init(), now: 2).map(\.title) == ["Fine"])
        #expect(laptop.engine.state == .online)
    }

    @Test func theOutboxWaitsForTheServerAndNothingIsLostOrDuplicated() async throws {
        // A cluster of its own: the test stops it.
        let server = try await PostgresServer()
        defer { server.close() }
        let sync = try await SyncServer(server)
        let desktop = try TestDevice(name: "desktop"), laptop = try TestDevice(name: "laptop")
        defer { desktop.close(); laptop.close() }
        try desktop.store.write { try $0.register(type) }
        let words = try await desktop.initialize(on: sync)
        try await laptop.join(on: sync, words: words)
        try await eventually("both online") { desktop.engine.state == .online && laptop.engine.state == .online }

        try await server.stop()
        let titles = (1...50).map { "Note \($0)" }
        for title in titles {
            _ = try desktop.store.write { try $0.insert(Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: title,
                                                  payload: "{}", createdAt: 1, updatedAt: 1)) }
        }
        try await eventually("the desktop notices") { desktop.engine.state == .offline }
        #expect(try desktop.store.outboxCount() == 50)
        try await server.start()
        try await eventually("the laptop has all 50", timeout: .seconds(40)) {
            try laptop.store.activities(.init(), now: 2).count == 50
        }
        #expect(Set(try laptop.store.activities(.init(), now: 2).map(\.title)) == Set(titles))
        try await eventually("the outbox is empty") { try desktop.store.outboxCount() == 0 }
        let desktopID = try #require(desktop.engine.settings?.deviceID)
        let logged = try await sync.psql(
            "SELECT count(*), count(DISTINCT seq), max(seq) FROM baton.record WHERE device_id = '\(desktopID)'")
        // Its hello, the type, then the 50 activities: each once, seqs without a gap.
        #expect(logged == "52|52|52\n")
    }
}

extension SyncEngineTests {
    /// On a server, a copy of the clipboard is deleted from the log once its time is over.
    @Test func aCopyOfTheClipboardIsDeletedFromTheServerWhenItsTimeIsOver() async throws {
        let sync = try await SyncServer.fresh()
        let clock = ManualClock()
        let said = Said()
        let desktop = try TestDevice(name: "desktop", log: said, clock: clock)
        let got = Mutex<[ClipboardCopy]>([])
        let laptop = try TestDevice(name: "laptop") { applied in got.withLock { $0 += applied.clipboard } }
        defer { desktop.close(); laptop.close() }
        try desktop.store.write { try $0.register(type) }
        let words = try await desktop.initialize(on: sync)
        try await laptop.join(on: sync, words: words)
        let desktopID = try #require(desktop.engine.settings?.deviceID)
        let now = clock.now()
        try await desktop.engine.sendClipboard(ClipboardCopy(id: Identifier.make(), mime: ClipboardCopy.text, content: Array("gone soon".utf8),
                                                             madeAt: now, expiresAt: now + 120_000_000))
        try await eventually("the laptop has the copy") { got.withLock { $0.count } == 1 }
        let records = try await sync.psql("SELECT count(*) FROM baton.record WHERE device_id = '\(desktopID)'")

        await clock.advance(by: .seconds(121))
        _ = try desktop.store.write { try $0.insert(Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Next",
                                                             payload: "{}", createdAt: 1, updatedAt: 1)) }
        try await eventually("the copy's record is deleted") {
            // One more (the activity), one fewer (the copy).
            try await sync.psql("SELECT count(*) FROM baton.record WHERE device_id = '\(desktopID)'") == records
                && desktop.store.expiredClipboardRecords(now: clock.now()).isEmpty
        }

        // A server set up before devices could remove their records refuses: said once, the
        // copy stays there (sealed), and sync goes on.
        _ = try await sync.psql("REVOKE DELETE ON baton.record FROM baton_device")
        let now2 = clock.now()
        try await desktop.engine.sendClipboard(ClipboardCopy(id: Identifier.make(), mime: ClipboardCopy.text, content: Array("stays".utf8),
                                                             madeAt: now2, expiresAt: now2 + 120_000_000))
        try await eventually("the laptop has the second copy") { got.withLock { $0.count } == 2 }
        await clock.advance(by: .seconds(121))
        let after = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "After", payload: "{}", createdAt: 1, updatedAt: 1)
        _ = try desktop.store.write { try $0.insert(after) }
        try await eventually("the refusal is said") { said.lines.contains { $0.contains("does not let this device remove") } }
        try await eventually("the laptop has what came after") { try laptop.store.activity(id: after.id, now: 2) != nil }
        #expect(try desktop.store.expiredClipboardRecords(now: clock.now()).isEmpty, "not tried again and again")
        #expect(try await sync.psql("SELECT count(*) FROM baton.record WHERE device_id = '\(desktopID)'")
            == "\((Int(records.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) + 2)\n", "the copy and the activity")
    }

    /// A revoked device cannot read what is written after its revocation, nor append; the
    /// others go on, and a device that joins afterwards gets the new key from one of them.
    @Test func aRevokedDeviceCannotReadWhatComesAfter() async throws {
        let sync = try await SyncServer.fresh()
        let desktop = try TestDevice(name: "desktop"), laptop = try TestDevice(name: "laptop"), stolen = try TestDevice(name: "stolen")
        defer { desktop.close(); laptop.close(); stolen.close() }
        try desktop.store.write { try $0.register(type) }
        let words = try await desktop.initialize(on: sync)
        try await laptop.join(on: sync, words: words)
        try await stolen.join(on: sync, words: words)
        func note(_ title: String) -> Activity {
            Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: title, payload: "{}", createdAt: 1, updatedAt: 1)
        }
        let before = note("Before")
        _ = try desktop.store.write { try $0.insert(before) }
        try await eventually("everyone has Before") {
            try stolen.store.activity(id: before.id, now: 2) != nil && laptop.store.activity(id: before.id, now: 2) != nil
        }
        try await eventually("the desktop knows the stolen device") { try desktop.engine.knownDevices().contains { $0.name == "stolen" } }

        try await desktop.engine.revoke(deviceID: "stolen")
        #expect(desktop.engine.settings?.currentEpoch == 1)
        #expect(try desktop.engine.knownDevices().first { $0.name == "stolen" }?.revoked == true)
        let after = note("After")
        _ = try desktop.store.write { try $0.insert(after) }
        try await eventually("the laptop has After") { try laptop.store.activity(id: after.id, now: 2) != nil }
        #expect(laptop.engine.settings?.currentEpoch == 1)
        // The stolen device stops at the first record it cannot open, and has nothing of it.
        try await eventually("the stolen device is stuck") { stolen.engine.state == .offline }
        #expect(try stolen.store.activity(id: after.id, now: 2) == nil)
        #expect(stolen.engine.settings?.currentEpoch == 0)
        // Nor can it append: its log is closed on the server (row-level security refuses the insert).
        try stolen.store.write { try $0.register(type) }
        _ = try stolen.store.write { try $0.insert(note("From the thief")) }
        try await eventually("the thief's changes wait in its outbox") { try stolen.store.outboxCount() >= 2 && stolen.engine.state == .offline }
        let stolenID = try #require(stolen.engine.settings?.deviceID)
        // Only the hello it wrote when it joined.
        #expect(try await sync.psql("SELECT count(*) FROM baton.record WHERE device_id = '\(stolenID)'") == "1\n")
        #expect(try laptop.store.activities(.init(), now: 2).map(\.title).sorted() == ["After", "Before"])

        // A device that joins later gets the new key from the desktop or the laptop.
        let tablet = try TestDevice(name: "tablet")
        defer { tablet.close() }
        try await tablet.join(on: sync, words: words)
        try await eventually("the tablet has After", timeout: .seconds(20)) { try tablet.store.activity(id: after.id, now: 2) != nil }
        #expect(tablet.engine.settings?.currentEpoch == 1)

        // Names: each device that has the new key seals its name with it, and the stolen
        // device's key (epoch 0's) opens none of them; the others still read every name.
        let user = try #require(desktop.engine.settings?.user)
        let stolenKey = try #require(stolen.engine.settings?.key(epoch: 0))
        var resealed: [String] = []
        for device in [desktop, laptop, tablet] {
            let id = try #require(device.engine.settings?.deviceID)
            try await eventually("\(device.name) reseals its name", timeout: .seconds(20)) {
                try await sync.psql("SELECT name_epoch FROM baton.device WHERE device_id = '\(id)'") == "1\n"
            }
            let hex = try await sync.psql("SELECT encode(sealed_name, 'hex') FROM baton.device WHERE device_id = '\(id)'")
            let sealed = try #require(Hex.decode(hex.trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(Seal.open(sealed, key: stolenKey, context: Seal.nameContext(user: user, device: id)) == nil, "\(device.name)")
            resealed.append(id)
        }
        #expect(resealed.count == 3)
        try await eventually("the laptop knows the tablet by name") { try laptop.engine.knownDevices().contains { $0.name == "tablet" } }
    }
}

extension SyncEngineTests {
    /// A server that stops answering mid-connection (the proxy forwards nothing more, either
    /// way): every exchange gives up at the deadline (3 s here) — revoking, joining and the loop's
    /// rounds fail with the server named, and the loop goes offline — and nothing waits for good.
    /// (The bound is 20 s, not 3: beside other suites, timers on the two cores' shared pool run late.)
    @Test func aServerThatStopsAnsweringIsGivenUpOnAtTheDeadline() async throws {
        let sync = try await SyncServer.fresh()
        let proxy = try TCPProxy(to: sync.server.port)
        defer { proxy.close() }
        let desktop = try TestDevice(name: "desktop"), laptop = try TestDevice(name: "laptop"), tablet = try TestDevice(name: "tablet")
        defer { desktop.close(); laptop.close(); tablet.close() }
        try desktop.store.write { try $0.register(type) }
        let words = try await desktop.engine.initialize(url: proxy.url(try await sync.addDevice(user: "ana").url), deviceName: "desktop")
        try await laptop.join(on: sync, words: words)
        try await eventually("the desktop knows the laptop") {
            try desktop.engine.state == .online && desktop.engine.knownDevices().contains { $0.name == "laptop" }
        }

        proxy.send("hold")
        let clock = ContinuousClock()
        var started = clock.now
        await #expect(throws: SyncError.self) { try await within(.seconds(20), "revoke") { try await desktop.engine.revoke(deviceID: "laptop") } }
        #expect(clock.now - started < .seconds(20), "revoke took \(clock.now - started)")
        let tabletURL = proxy.url(try await sync.addDevice(user: "ana").url)
        started = clock.now
        await #expect(throws: SyncError.self) {
            try await within(.seconds(20), "join") { try await tablet.engine.join(url: tabletURL, recoveryWords: words, deviceName: "tablet") }
        }
        #expect(clock.now - started < .seconds(20), "join took \(clock.now - started)")
        #expect(desktop.engine.settings?.currentEpoch == 0 && tablet.engine.settings == nil)
        _ = try desktop.store.write { try $0.insert(Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Unanswered",
                                              payload: "{}", createdAt: 1, updatedAt: 1)) }
        try await eventually("the desktop goes offline", timeout: .seconds(15)) { desktop.engine.state == .offline }
    }
}
