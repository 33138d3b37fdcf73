import BatonCore
import BatonSync
@testable import BatonStore
import Foundation
import Synchronization
import Testing
import TestSupport

/// The store's side of sync, on real SQLite: the outbox filled in the writes' own
/// transactions, staged batches that a retry sends unchanged, and other devices' records
/// applied without resurrecting what ended here.
struct SyncStoreTests {
    let store: Store
    let type = ActivityType(type: "com.raywenderlich.hawknotes.staterestore.characterDetail", appID: "com.raywenderlich.hawknotes",
                            title: "Character", handler: "com.raywenderlich.hawknotes", requiredKeys: ["id"])
    let me = Store.SyncIdentity(deviceID: "desktop", userName: "ana")

    init() throws {
        var limits = Limits()
        limits.liveActivitiesPerApp = 3
        store = try Store(path: try TemporaryDirectory.make(prefix: "baton-sync-store").appendingPathComponent("baton.sqlite").path,
                          limits: limits)
    }

    func activity(_ title: String, at time: UInt64 = 1, device: String = "") -> Activity {
        Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: title, payload: #"{"id":"x"}"#,
                 eligibleForSearch: true, createdAt: time, updatedAt: time, deviceID: device)
    }

    /// Stages a batch whose bodies say what each change was.
    func stage(limit: Int = 100) throws -> [(seq: Int64, change: String)] {
        try store.write { try $0.stageOutbox(limit: limit) { change in
            let text = switch change {
            case .activity(let activity): "activity \(activity.title)"
            case .activityEnded(let id, let state, let reason): "ended \(id) \(state): \(reason)"
            case .type(let type): "type \(type.type)"
            case .typeRemoved(let name): "type removed \(name)"
            }
            return Array(text.utf8)
        } }.map { ($0.logSeq, String(decoding: $0.body, as: UTF8.self)) }
    }

    /// Stages the outbox and takes it as sent, as the sync service does once the server has it.
    func sendStaged() throws {
        let last = try stage().last?.seq ?? 0
        try store.write { try $0.sent(upTo: last) }
    }

    /// Another device is last seen when it last wrote: its newest record's time, never earlier
    /// than what was known, and not from a record that was skipped (time 0).
    @Test func anotherDeviceIsLastSeenWhenItLastWrote() throws {
        try store.write { try $0.startSync(as: me) }
        try store.write { try $0.noteRemoteDevice(id: "laptop", name: "laptop", lastSeen: 2_000_000, revoked: false) }
        func apply(_ seq: Int64, hlc: Int64) throws {
            _ = try store.write { try $0.applyRemote(device: "laptop", records: [Store.RemoteRecord(seq: seq, hlc: hlc, change: nil)], rules: ConflictRules()) }
        }
        try apply(1, hlc: 5_000 << 16)
        #expect(try store.remoteDevices().first?.lastSeen == 5_000_000)
        try apply(2, hlc: 0)
        try apply(3, hlc: 1_000 << 16)
        #expect(try store.remoteDevices().first?.lastSeen == 5_000_000)
    }

    @Test func nothingGoesToTheOutboxWhileSyncIsOff() throws {
        try store.write { try $0.register(type) }
        _ = try store.write { try $0.insert(activity("Agatha")) }
        #expect(try store.outboxCount() == 0)
        #expect(try store.syncIdentity() == nil)
    }

    @Test func turningSyncOnSendsWhatWasThereThenEveryChangeAsItIsNow() throws {
        try store.write { try $0.register(type) }
        let agatha = activity("Agatha")
        _ = try store.write { try $0.insert(agatha) }
        let rang = Atomic(0)
        store.onOutbox { rang.add(1, ordering: .relaxed) }
        try store.write { try $0.startSync(as: me) }
        #expect(try store.syncIdentity() == me)
        #expect(try stage().map(\.change) == ["type \(type.type)", "activity Agatha"])
        // Staged but not yet on the server: staged again, unchanged, whatever happened since.
        var renamed = agatha
        renamed.title = "Agatha the Wise"
        try store.write { try $0.update(renamed) }
        #expect(rang.load(ordering: .relaxed) >= 1)
        #expect(try stage().map(\.seq) == [1, 2])
        #expect(try stage().map(\.change) == ["type \(type.type)", "activity Agatha"])
        try store.write { try $0.sent(upTo: 2) }
        #expect(try store.outboxCount() == 1)

        // Several changes of one activity become one record of how it is now; an ended one says how it ended.
        let jamie = activity("Jamie")
        _ = try store.write { try $0.insert(jamie) }
        var older = jamie
        older.title = "Jamie, older"
        try store.write { try $0.update(older) }
        _ = try store.write { try $0.deleteActivities(ids: [agatha.id]) }
        #expect(try stage().map(\.change) == ["activity Jamie, older", "ended \(agatha.id) invalidated: invalidated by its app"])
        #expect(try stage().map(\.seq) == [3, 4])
        try store.write { try $0.sent(upTo: 4) }
        #expect(try store.outboxCount() == 0)
    }

    /// A record made when it was queued (a request, a copy of the clipboard) is sent as it is
    /// and staged again unchanged until the server has it; its bytes are written into the
    /// outbox once, not again when it is staged (a copy of the clipboard can be 8 MiB).
    @Test func aRecordMadeWhenQueuedIsSentAsItIsAndWrittenOnce() throws {
        try store.write { try $0.startSync(as: me) }
        let request = Array("asked of the laptop".utf8), copy = [UInt8](repeating: 7, count: 300_000)
        try store.write { try $0.enqueueRequest(request) }
        try store.write { try $0.enqueueClipboard(copy, id: "copy-1", expiresAt: .max) }
        let staging = { try self.store.write { try $0.stageOutbox(limit: 10) { change in
            Issue.record("a record made when it was queued is encoded again: \(change)")
            return []
        } } }
        let staged = try staging()
        #expect(staged.map(\.body) == [request, copy])
        #expect(try staging() == staged, "staged again unchanged until sent")
        // Staging wrote no second copy: each record is still where it was queued (`outbox_body`).
        let copied = try store.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox o LEFT JOIN outbox_body b ON b.seq = o.seq WHERE o.record IS NOT NULL OR b.body IS NULL")
        }
        #expect(copied == 0)
        try store.write { try $0.sent(upTo: try #require(staged.last).logSeq) }
        #expect(try store.outboxCount() == 0)
        // Their records leave with their rows.
        #expect(try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox_body") } == 0)
    }

    /// A request queued before v22 kept its record in the outbox row itself (`outbox.body`): it is
    /// staged, staged again unchanged and sent as it is, like one queued since.
    @Test func aRecordQueuedBeforeV22IsSentFromWhereItWas() throws {
        try store.write { try $0.startSync(as: me) }
        try store.inTransaction { db in
            try db.execute(sql: "INSERT INTO outbox (kind, key, at, hlc, body) VALUES ('request', 'asked before', 1, 1, CAST('asked before v22' AS BLOB))")
        }
        try store.write { try $0.enqueueRequest(Array("asked since".utf8)) }
        let staged = try stage()
        #expect(staged.map(\.change) == ["asked before v22", "asked since"])
        #expect(try stage().map(\.change) == staged.map(\.change), "staged again unchanged until sent")
        try store.write { try $0.sent(upTo: try #require(staged.last).seq) }
        #expect(try store.outboxCount() == 0)
    }

    @Test func theSyncServiceWokenByACommitSeesIt() throws {
        try store.write { try $0.startSync(as: me) }
        let seen = Mutex<Int?>(nil)
        store.onOutbox { seen.withLock { $0 = try? store.outboxCount() } }
        try store.inTransaction { db in
            try db.execute(sql: "INSERT INTO activity_type (type, app_id, title, handler_path, required_keys) VALUES ('t', 'app', 'T', '/', '')")
            // A read on another thread while the write is under way opens a snapshot without it.
            _ = try store.outboxCount()
        }
        #expect(seen.withLock { $0 } == 1)
    }

    /// The sync service is woken through the same call however many commits rang before: a
    /// closure kept in a Mutex used to gain two reabstraction thunks at every ring, so each
    /// ring walked a longer chain (the stack grew by two frames per commit).
    @Test func ringingTheOutboxBellDoesNotGetDeeper() throws {
        try store.write { try $0.register(type) }
        try store.write { try $0.startSync(as: me) }
        let depths = Mutex<[Int]>([])
        store.onOutbox { depths.withLock { $0.append(Thread.callStackSymbols.count) } }
        for index in 0..<300 { _ = try store.write { try $0.insert(activity("Ring \(index)")) } }
        let seen = depths.withLock { $0 }
        #expect(seen.count == 300)
        #expect(seen.last == seen.first, "stack depth at the first ring \(seen.first ?? 0), at the last \(seen.last ?? 0)")
    }

    @Test func aWriteThatRollsBackLeavesNothingInTheOutbox() throws {
        try store.write { try $0.register(type) }
        try store.write { try $0.startSync(as: me) }
        _ = try stage()
        try store.write { try $0.sent(upTo: 1) }
        // The quota refuses a fourth activity when all three are persistent: nothing is written.
        for index in 0..<3 {
            var saved = activity("Saved \(index)")
            saved.persistentID = "p\(index)"
            _ = try store.write { try $0.insert(saved) }
        }
        try sendStaged()
        #expect(throws: BatonError.self) { try store.write { try $0.insert(activity("One too many")) } }
        #expect(try store.outboxCount() == 0)
        // Nor does a scene change, which stays on this machine.
        let scene = Scene(id: Identifier.make(), appID: type.appID, createdAt: 1, lastActiveAt: 1)
        try store.write { try $0.insert(scene) }
        #expect(try store.outboxCount() == 0)
    }

    @Test func anotherDevicesActivitiesAreSearchableOutsideTheQuotaAndNeverComeBack() throws {
        try store.write { try $0.register(type) }
        try store.write { try $0.startSync(as: me) }
        try sendStaged()
        // Of a type no app here registered: stored all the same.
        var foreign = activity("Sigrid's map", device: "laptop")
        foreign.type = "org.example.maps.place"
        let remote = (1...3).map { activity("Lady Beatrice \($0)", device: "laptop") }
        let applied = try store.write { tx in try tx.applyRemote(device: "laptop", records: (remote + [foreign]).enumerated().map {
            Store.RemoteRecord(seq: Int64($0.offset + 1), hlc: Int64($0.offset + 1), change: .activity($0.element))
        }, rules: ConflictRules()) }
        #expect(applied.advertised.count == 4)
        #expect(try store.syncCursors() == ["laptop": 4])
        #expect(try store.search("beatrice", limit: 10, now: 2).count == 3)
        #expect(try store.activity(id: foreign.id, now: 2)?.deviceID == "laptop")
        // Another device's activities are not this machine's to send, nor to trim for its quota.
        #expect(try store.outboxCount() == 0)
        for index in 0..<3 { _ = try store.write { try $0.insert(activity("Local \(index)")) } }
        #expect(try store.activities(.init(appID: type.appID), now: 2).count == 7)

        // Ended there: gone here, with a tombstone, and a late copy of it is refused.
        let ended = try store.write { try $0.applyRemote(device: "laptop", records: [
            Store.RemoteRecord(seq: 5, hlc: 5, change: .activityEnded(id: remote[0].id, state: "invalidated", reason: "invalidated by its app")),
            Store.RemoteRecord(seq: 6, hlc: 6, change: .activity(remote[0])),
        ], rules: ConflictRules()) }
        #expect(ended.ended.map(\.id) == [remote[0].id] && ended.advertised.isEmpty)
        #expect(try store.activity(id: remote[0].id, now: 2) == nil)
        #expect(try store.tombstone(activityID: remote[0].id)?.state == "invalidated")
        // A device cannot change another's activity.
        var hijacked = remote[1]
        hijacked.title = "Hijacked"
        #expect(try store.write { try $0.applyRemote(device: "phone", records: [Store.RemoteRecord(seq: 1, hlc: 1, change: .activity(hijacked))], rules: ConflictRules()) } == Store.Applied())
        #expect(try store.activity(id: remote[1].id, now: 2)?.title == "Lady Beatrice 2")

        // Sync off: every other device's activity goes, this machine's stay.
        #expect(Set(try store.write { try $0.stopSync() }.map(\.id)) == Set([remote[1].id, remote[2].id, foreign.id]))
        #expect(try store.activities(.init(), now: 2).count == 3)
        #expect(try store.syncCursors().isEmpty)
    }

    @Test func anotherDevicesRequestToEndAnActivityLosesToAChangeItsWriterMadeLater() throws {
        try store.write { try $0.register(type) }
        try store.write { try $0.startSync(as: me) }
        let agatha = activity("Agatha")
        _ = try store.write { try $0.insert(agatha) }
        try sendStaged()
        func invalidate(seq: Int64, at hlc: Int64) throws -> Store.Applied {
            try store.write { try $0.applyRemote(device: "laptop", records: [Store.RemoteRecord(seq: seq, hlc: hlc, change: .invalidateHere(activityID: agatha.id))], rules: ConflictRules()) }
        }
        // The laptop asks after Agatha was sent; she changes here before the request arrives.
        let asked = store.clock.stamp(wallMicroseconds: 0)
        var chapter2 = agatha
        chapter2.title = "Agatha, chapter 2"
        try store.write { try $0.update(chapter2) }
        let overruled = [Store.Applied.Overruled(activityID: agatha.id, device: "laptop")]
        #expect(try invalidate(seq: 1, at: asked).overruled == overruled)
        // Also once the change has left for the server.
        try sendStaged()
        #expect(try invalidate(seq: 2, at: asked).overruled == overruled)
        #expect(try store.activity(id: agatha.id, now: 2)?.title == "Agatha, chapter 2")

        // A request made after her last change wins; her end goes to every device and is final.
        let ended = try invalidate(seq: 3, at: store.clock.stamp(wallMicroseconds: 0))
        #expect(ended.ended.map(\.id) == [agatha.id] && ended.overruled.isEmpty)
        #expect(try stage().map(\.change) == ["ended \(agatha.id) invalidated: invalidated on device laptop"])
    }

    @Test func thisMachinesRequestToEndAnotherDevicesActivityLosesToItsWritersLaterChange() throws {
        try store.write { try $0.register(type) }
        try store.write { try $0.startSync(as: me) }
        try sendStaged()
        let beatrice = activity("Lady Beatrice", device: "laptop")
        var seq: Int64 = 0
        func fromLaptop(_ change: Store.RemoteChange, at hlc: Int64) throws -> Store.Applied {
            seq += 1
            return try store.write { try $0.applyRemote(device: "laptop", records: [Store.RemoteRecord(seq: seq, hlc: hlc, change: change)], rules: ConflictRules()) }
        }
        func titled(_ title: String) -> Store.RemoteChange {
            var changed = beatrice
            changed.title = title
            return .activity(changed)
        }
        _ = try fromLaptop(.activity(beatrice), at: 100)
        #expect(try !store.write { try $0.invalidateRemote(id: beatrice.id, request: Array("invalidate".utf8)) }.isEmpty)
        let asked = try #require(try store.read { db in try Int64.fetchOne(db, sql: "SELECT requested_hlc FROM tombstone") })
        #expect(asked > 100, "the request is later than every record this machine saw")

        // A change the laptop made before the request does not bring her back; one made after does.
        #expect(try fromLaptop(titled("Lady Beatrice, earlier"), at: asked - 1) == Store.Applied())
        #expect(try store.activity(id: beatrice.id, now: 2) == nil)
        #expect(try fromLaptop(titled("Lady Beatrice, later"), at: asked + 1).advertised == [beatrice.id])
        #expect(try store.activity(id: beatrice.id, now: 2)?.title == "Lady Beatrice, later")
        #expect(try store.tombstone(activityID: beatrice.id) == nil)

        // Once her writer ended her, nothing brings her back, however late its clock says.
        #expect(try !store.write { try $0.invalidateRemote(id: beatrice.id, request: Array("invalidate".utf8)) }.isEmpty)
        _ = try fromLaptop(.activityEnded(id: beatrice.id, state: "invalidated", reason: "invalidated on device desktop"), at: asked + 2)
        #expect(try fromLaptop(titled("Lady Beatrice, much later"), at: Int64.max - 1) == Store.Applied())
        #expect(try store.activity(id: beatrice.id, now: 2) == nil)
    }

    @Test func theClockNeverGoesBackAcrossARestart() throws {
        try store.write { try $0.register(type) }
        try store.write { try $0.startSync(as: me) }
        let staged = try #require(try store.write { try $0.stageOutbox(limit: 10) { _ in [] } }.last)
        try store.close()
        // Staged, in the outbox still; then sent, out of it.
        let reopened = try Store(path: store.path)
        #expect(reopened.clock.stamp(wallMicroseconds: 0) > staged.hlc)
        try reopened.write { try $0.sent(upTo: staged.logSeq) }
        #expect(try reopened.outboxCount() == 0)
        try reopened.close()
        #expect(try Store(path: store.path).clock.stamp(wallMicroseconds: 0) > staged.hlc)
    }

    @Test func upgradingAVersion10DatabaseKeepsActivitiesTheirSearchAndTheirQuota() throws {
        let path = try TemporaryDirectory.make(prefix: "baton-v10").appendingPathComponent("baton.sqlite").path
        let queue = try OutsideConnection(path: path)
        try Schema.migrator.migrate(queue.db, upTo: "v10")
        try queue.write { db in
            try db.execute(sql: """
                INSERT INTO activity_type VALUES ('t', 'app', 'T', NULL, '/', '', NULL);
                INSERT INTO activity (id, type, app_id, title, payload, keywords, eligible_for_handoff, eligible_for_search, created_at, updated_at)
                VALUES ('a', 't', 'app', 'Jamie public', '{}', '', 1, 1, 1, 1), ('b', 't', 'app', 'Jamie private', '{}', '', 1, 0, 2, 2);
                """)
        }
        queue.close()
        let upgraded = try Store(path: path)
        #expect(try upgraded.search("jamie", limit: 10, now: 5).map(\.title) == ["Jamie public"])
        #expect(try upgraded.activities(.init(), now: 5).map(\.deviceID) == ["", ""])
        // Unregistering the type still takes its activities with it, each with a tombstone.
        #expect(Set(try upgraded.write { try $0.unregister(type: "t") }?.map(\.id) ?? []) == ["a", "b"])
        #expect(try upgraded.activities(.init(), now: 5).isEmpty)
        #expect(try upgraded.tombstone(activityID: "a")?.reason == "its type t was unregistered")
        try upgraded.close()
        let counts = try OutsideConnection(path: path).read { db in try Int.fetchOne(db, sql: "SELECT sum(count) FROM app_activity_count") }
        #expect(counts == 0)
    }
}
