import BatonCore
@testable import BatonStore
import Foundation
import Synchronization
import Testing
import TestSupport

/// The store on real SQLite files in a fresh temporary directory per test.
struct StoreTests {
    let directory: URL
    let store: Store
    let type = ActivityType(type: "com.raywenderlich.hawknotes.staterestore.characterDetail", appID: "com.raywenderlich.hawknotes",
                            title: "Character", handler: "com.raywenderlich.hawknotes", requiredKeys: ["id"], payloadType: "Character")

    init() throws {
        directory = try TemporaryDirectory.make(prefix: "baton-store")
        var limits = Limits()
        limits.liveActivitiesPerApp = 3
        limits.sceneStorageBytes = 100
        store = try Store(path: directory.appendingPathComponent("baton.sqlite").path, limits: limits)
    }

    func activity(_ title: String, at time: UInt64, persistent: String? = nil, search: Bool = true, keywords: [String] = []) -> Activity {
        Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: title, payload: #"{"id":"x"}"#,
                 persistentID: persistent, keywords: keywords, eligibleForSearch: search, createdAt: time, updatedAt: time)
    }

    @Test func typesAndActivitiesPersistAcrossReopening() throws {
        try store.write { try $0.register(type) }
        let agatha = activity("Agatha", at: 1, keywords: ["witch", "mentor"])
        #expect(try store.write { try $0.insert(agatha) }.isEmpty)
        let reopened = try Store(path: store.path)
        #expect(try reopened.activityType(type.type) == type)
        #expect(try reopened.activity(id: agatha.id, now: 2) == agatha)
        // Every column changed: the update binds each to its own numbered parameter.
        var changed = agatha
        changed.title = "Agatha the Wise"
        changed.payload = #"{"id":"agatha","wise":true}"#
        changed.payloadType = "Character"
        changed.targetContentID = "c-agatha"
        changed.persistentID = "p-agatha"
        changed.keywords = ["witch"]
        changed.webpageURL = "https://example.com/agatha"
        changed.eligibleForHandoff.toggle()
        changed.eligibleForSearch.toggle()
        changed.createdAt = 2
        changed.updatedAt = 3
        changed.expiresAt = 9_000
        try reopened.write { try $0.update(changed) }
        #expect(try store.activity(id: agatha.id, now: 4) == changed)
        #expect(throws: BatonError.self) { try store.write { try $0.update(activity("ghost", at: 1)) } }
    }

    /// A writer gets one transaction: its writes commit together, and one that throws after
    /// some of them leaves none, nor a registration the store would remember.
    @Test func aWritersChangesCommitTogetherOrNotAtAll() throws {
        struct Stop: Error {}
        #expect(try store.activityType(type.type) == nil, "the registrations are read, and kept in memory")
        #expect(throws: Stop.self) {
            try store.write { transaction in
                try transaction.register(type)
                _ = try transaction.insert(activity("Agatha", at: 1))
                try transaction.setPaused(until: 0)
                #expect(try transaction.activityType(type.type) == type, "the transaction reads its own writes")
                throw Stop()
            }
        }
        #expect(try store.activityType(type.type) == nil)
        #expect(try store.activities(.init(), now: 2).isEmpty)
        #expect(try store.pausedUntil() == nil)
        let agatha = activity("Agatha", at: 1)
        try store.write { transaction in
            try transaction.register(type)
            _ = try transaction.insert(agatha)
        }
        #expect(try store.activityType(type.type) == type)
        #expect(try store.activities(.init(), now: 2).map(\.id) == [agatha.id])
    }

    /// Reads go through their own SQLite connection: every column must come back as written.
    @Test func everyFieldComesBackAndAClosedStoreRefusesReads() throws {
        try store.write { try $0.register(type) }
        let scene = Scene(id: Identifier.make(), appID: type.appID, title: "Fenêtre ✓", createdAt: 1 << 40, lastActiveAt: 1 << 41)
        try store.write { try $0.insert(scene) }
        let full = Activity(
            id: Identifier.make(), type: type.type, appID: type.appID, title: "Lady Beatrice — “Hawk” ✓",
            payload: #"{"id":"x","note":"a\u0000b"}"#, payloadType: "Character", targetContentID: "b|1::c|2",
            persistentID: "p1", keywords: ["queen", "Sküa"], webpageURL: "https://example.com/b?c=1",
            eligibleForHandoff: false, eligibleForSearch: true, sceneID: scene.id,
            createdAt: 1_790_000_000_000_000, updatedAt: 1_790_000_000_000_001, expiresAt: UInt64(Int64.max))
        #expect(try store.write { try $0.insert(full) }.isEmpty)
        #expect(try store.storedActivity(id: full.id) == full)
        #expect(try store.activity(id: full.id, now: 1) == full)
        #expect(try store.activities(.init(persistentID: "p1"), now: 1) == [full])
        var current = scene
        current.activityID = full.id
        current.lastActiveAt = full.updatedAt
        #expect(try store.scene(id: scene.id) == current)
        #expect(try store.scenes(appID: type.appID) == [current])

        try store.close()
        #expect(throws: StoreError.closed) { try store.storedActivity(id: full.id) }
    }

    @Test func filesAreOwnerOnlyAndUnsafeDirectoriesAreRefused() throws {
        var info = stat()
        #expect(stat(store.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let nested = directory.appendingPathComponent("state/baton").path
        try Store.prepareDirectory(nested)
        #expect(stat(nested, &info) == 0 && info.st_mode & 0o777 == 0o700)
        chmod(nested, 0o755)
        do {
            try Store.prepareDirectory(nested)
            Issue.record("an open directory was accepted")
        } catch {
            #expect("\(error)".contains("chmod 700"), "\(error)")
        }
        #expect(Store.defaultPath(environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"]) == "/s/baton/baton.sqlite")
        #expect(Store.defaultPath(environment: ["HOME": "/h"]) == "/h/.local/state/baton/baton.sqlite")
    }

    @Test func expiredActivitiesAreHiddenThenPurged() throws {
        try store.write { try $0.register(type) }
        var brief = activity("brief", at: 1)
        brief.expiresAt = 10
        _ = try store.write { try $0.insert(brief) }
        #expect(try store.activity(id: brief.id, now: 9) != nil)
        #expect(try store.activity(id: brief.id, now: 10) == nil)
        #expect(try store.activities(.init(), now: 10).isEmpty)
        #expect(try store.nextExpiry() == 10)
        #expect(try store.write { try $0.purgeExpired(now: 10) }.map(\.id) == [brief.id])
        #expect(try store.counts().activities == 0)
    }

    /// An end is one call that returns what it ended (its app, the scenes that showed it) and
    /// leaves, in the same transaction, its tombstone, its history copy and its outbox row.
    @Test func anEndSaysWhatEndedAndWritesWhatItLeaves() throws {
        try store.write { try $0.register(type) }
        let scene = Scene(id: Identifier.make(), appID: type.appID, createdAt: 1, lastActiveAt: 1)
        try store.write { try $0.insert(scene) }
        var shown = activity("Agatha", at: 2)
        shown.sceneID = scene.id
        let other = activity("Beatrice", at: 3)
        _ = try store.write { try $0.insert(shown) }
        _ = try store.write { try $0.insert(other) }
        try store.write { try $0.startSync(as: Store.SyncIdentity(deviceID: "desktop", userName: "ana")) }
        func outboxRows(_ id: String) throws -> Int {
            try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox WHERE kind = 'activity' AND key = ?", arguments: [id]) ?? 0 }
        }
        let queued = try outboxRows(shown.id)

        #expect(try store.write { try $0.deleteActivities(ids: [shown.id, "gone"]) } == [Ended(id: shown.id, appID: type.appID, scenes: [scene.id])])
        #expect(try store.scene(id: scene.id)?.activityID == nil)
        #expect(try store.tombstone(activityID: shown.id)?.reason == "invalidated by its app")
        #expect(try store.history(.init()).map(\.activity.id) == [shown.id])
        #expect(try outboxRows(shown.id) == queued + 1)
        // Only what was picked ended, and only once.
        #expect(try store.activity(id: other.id, now: 4) == other)
        #expect(try store.write { try $0.deleteActivities(ids: [shown.id]) }.isEmpty)
    }

    @Test func quotaTrimsOldestNonPersistentFirst() throws {
        try store.write { try $0.register(type) }
        let kept = activity("kept", at: 1, persistent: "p1")
        let old = activity("old", at: 2)
        let middle = activity("middle", at: 3)
        for item in [kept, old, middle] { _ = try store.write { try $0.insert(item) } }
        #expect(try store.write { try $0.insert(activity("new", at: 4)) }.map(\.id) == [old.id])
        #expect(try store.activities(.init(appID: type.appID), now: 5).map(\.title) == ["new", "middle", "kept"])

        // All persistent: refused, nothing written.
        _ = try store.write { try $0.deleteAll(appID: type.appID) }
        for index in 0..<3 { _ = try store.write { try $0.insert(activity("p\(index)", at: 10, persistent: "p\(index)")) } }
        #expect(throws: BatonError.self) { try store.write { try $0.insert(activity("one too many", at: 11)) } }
        #expect(try store.counts().activities == 3)
        #expect(try store.write { try $0.deleteSaved(persistentIDs: ["p0", "p2", "nope"]) }.count == 2)
        // The kept count follows every kind of removal: one live activity is left.
        #expect(try store.write { try $0.insert(activity("after deletions", at: 12)) }.isEmpty)
        #expect(try store.write { try $0.insert(activity("third", at: 13)) }.isEmpty)
        #expect(try store.write { try $0.insert(activity("fourth trims", at: 14)) }.count == 1)
        _ = try store.write { try $0.purgeExpired(now: 100) }
        _ = try store.write { try $0.unregister(type: type.type) }
        try store.write { try $0.register(type) }
        for index in 0..<3 { #expect(try store.write { try $0.insert(activity("again \(index)", at: 20)) }.isEmpty) }
    }

    /// Every kind of write, one after another, on one connection, each reusing the statements
    /// the others left in the connection's cache. At e75f674 (on GRDB)
    /// the quota trim bound the statement Invalidate had just run and SQLite refused it with
    /// SQLITE_MISUSE (error 21), the `Failed` that mixed load saw about once in 4 000 calls.
    @Test func everyWriteFollowsEveryOtherWrite() throws {
        try store.write { try $0.register(type) }
        let scene = Scene(id: Identifier.make(), appID: type.appID, createdAt: 1, lastActiveAt: 1)
        try store.write { try $0.insert(scene) }
        var live: [Activity] = []
        func insert(_ item: Activity) throws {
            let trimmed = try store.write { try $0.insert(item) }.map(\.id)
            live.removeAll { trimmed.contains($0.id) }
            live.append(item)
        }
        let writes: [(String, () throws -> Void)] = [
            ("insert", { try insert(activity("a", at: 2)) }),
            ("insert into a scene", {
                var item = activity("s", at: 2)
                item.sceneID = scene.id
                try insert(item)
            }),
            ("update", { if var item = live.last { item.title = "changed"; try store.write { try $0.update(item) } } }),
            ("invalidate", { if let item = live.popLast() { _ = try store.write { try $0.deleteActivities(ids: [item.id]) } } }),
            ("storage", { _ = try store.write { try $0.changeStorage(sceneID: scene.id, set: [("k", .int(1))], remove: ["gone"]) } }),
            ("scene update", { try store.write { try $0.update(scene) } }),
            ("continue into", { if let item = live.last { try store.write { try $0.continueInto(sceneID: scene.id, activityID: item.id, storage: [], now: 3) } } }),
            ("purge", { _ = try store.write { try $0.purgeExpired(now: 1) } }),
            ("register", { try store.write { try $0.register(type) } }),
            ("delete saved", { _ = try store.write { try $0.deleteSaved(persistentIDs: ["none"]) } }),
        ]
        // Every ordered pair of writes, with the app at its quota of 3 so that inserts trim.
        for (firstName, first) in writes {
            for (secondName, second) in writes {
                for _ in 0..<4 { try insert(activity("filler", at: 1)) }
                do {
                    try first()
                    try second()
                } catch {
                    Issue.record("\(firstName) then \(secondName): \(error)")
                }
            }
        }
    }

    @Test func searchFindsEligibleTitlesAndKeywordsBestFirst() throws {
        try store.write { try $0.register(type) }
        _ = try store.write { try $0.insert(activity("Agatha", at: 1, keywords: ["witch"])) }
        _ = try store.write { try $0.insert(activity("Jamie", at: 2, keywords: ["boy", "Agatha's friend"])) }
        _ = try store.write { try $0.insert(activity("Agatha hidden", at: 3, search: false)) }
        #expect(try store.search("agath", limit: 10, now: 5).map(\.title) == ["Agatha", "Jamie"])
        #expect(try store.search("WITCH", limit: 10, now: 5).map(\.title) == ["Agatha"])
        // FTS5 syntax in a query is only text.
        #expect(try store.search("\"agatha\" OR NEAR(x) *", limit: 10, now: 5).isEmpty)
        // Quotes split words (they are punctuation), so a quoted word never holds one.
        #expect(Store.ftsQuery(#"say "agatha" ""#) == #""say"* "agatha"*"#)
        #expect(try store.search("   ", limit: 10, now: 5).isEmpty)
        #expect(try store.search("agatha", limit: 1, now: 5).count == 1)
    }

    @Test func searchFollowsEligibilityTitleAndDeletion() throws {
        try store.write { try $0.register(type) }
        var agatha = activity("Agatha", at: 1, keywords: ["witch"])
        _ = try store.write { try $0.insert(agatha) }
        func found(_ query: String) throws -> [String] { try store.search(query, limit: 10, now: 5).map(\.title) }
        agatha.eligibleForSearch = false
        try store.write { try $0.update(agatha) }
        #expect(try found("agatha").isEmpty)
        agatha.title = "Agatha the Wise"
        try store.write { try $0.update(agatha) }
        #expect(try found("wise").isEmpty, "a private activity's new title is not indexed")
        agatha.eligibleForSearch = true
        try store.write { try $0.update(agatha) }
        #expect(try found("wise") == ["Agatha the Wise"])
        agatha.title = "Lady Agatha"
        try store.write { try $0.update(agatha) }
        #expect(try found("wise").isEmpty && found("lady") == ["Lady Agatha"], "the old title left the index")
        #expect(try store.write { try $0.deleteActivities(ids: [agatha.id]) }.map(\.id) == [agatha.id])
        #expect(try found("agatha").isEmpty)
    }

    @Test func searchPutsEveryTitleMatchFirstThenTheNewest() throws {
        var limits = Limits()
        limits.liveActivitiesPerApp = 1_000
        let big = try Store(path: directory.appendingPathComponent("big.sqlite").path, limits: limits)
        try big.write { try $0.register(type) }
        // Title matches, however old, come before the 300 newer keyword-only matches.
        _ = try big.write { try $0.insert(activity("Sigrid the old", at: 1)) }
        _ = try big.write { try $0.insert(activity("Sigrid at home", at: 2)) }
        var expired = activity("Sigrid gone", at: 3)
        expired.expiresAt = 4
        _ = try big.write { try $0.insert(expired) }
        for index in 0..<300 { _ = try big.write { try $0.insert(activity("Raven \(index)", at: UInt64(5 + index), keywords: ["sigrid"])) } }
        #expect(try big.search("sigr", limit: 4, now: 10_000).map(\.title) == ["Sigrid at home", "Sigrid the old", "Raven 299", "Raven 298"])
        #expect(try big.search("sigr", limit: 1, now: 10_000).map(\.title) == ["Sigrid at home"])
        // With every match in hand (fewer than the limit) the title index only orders them:
        // the same answer as when the limit cuts the matches off, one either side of 302.
        let every = try big.search("sigr", limit: 500, now: 10_000).map(\.title)
        #expect(every.count == 302, "every live match, the expired one left out")
        #expect(every.prefix(4) == ["Sigrid at home", "Sigrid the old", "Raven 299", "Raven 298"])
        #expect(try big.search("sigr", limit: 302, now: 10_000).map(\.title) == every)
        #expect(try big.search("sigr", limit: 303, now: 10_000).map(\.title) == every)
        #expect(try big.search("sigr", limit: 301, now: 10_000).map(\.title) == Array(every.prefix(301)))
        for query in ["si", "sig", "sigr", "sigri", "sigrid", "raven 29", "raven 299"] {
            #expect(try !big.search(query, limit: 1, now: 10_000).isEmpty, "\(query)")
        }
        // Prefixes of every indexed length (2…8) and longer ones (9…11, gathered without an index) find the same.
        _ = try big.write { try $0.insert(activity("Lady Beatrice of Strathclyde", at: 400)) }
        for length in 2...11 {
            let query = String("strathclyde".prefix(length))
            #expect(try big.search(query, limit: 5, now: 10_000).map(\.title) == ["Lady Beatrice of Strathclyde"], "\(query)")
        }
        #expect(try big.search("beatric strath", limit: 5, now: 10_000).map(\.title) == ["Lady Beatrice of Strathclyde"])
        #expect(try big.search("beatrices", limit: 5, now: 10_000).isEmpty)
        #expect(try big.search("sigrid", limit: 0, now: 10_000).isEmpty)
    }

    /// Once the WAL passes 1 000 pages the checkpointer copies it into the database file
    /// (the writer's own automatic checkpoint is replaced by it), and every row is intact.
    @Test func theCheckpointerCopiesTheWALIntoTheDatabase() throws {
        var limits = Limits()
        limits.liveActivitiesPerApp = 1_000
        let big = try Store(path: directory.appendingPathComponent("wal.sqlite").path, limits: limits)
        try big.write { try $0.register(type) }
        let payload = #"{"id":""# + String(repeating: "x", count: 30_000) + #""}"#
        var ids: [String] = []
        for index in 0..<200 {
            var item = activity("Large \(index)", at: UInt64(index))
            item.payload = payload
            _ = try big.write { try $0.insert(item) }
            ids.append(item.id)
        }
        big.waitForCheckpoints()
        var info = stat()
        // Without a checkpoint the file would hold little more than the schema; the first
        // checkpoint alone copies 1 000 frames, some of them the same index pages again.
        #expect(stat(big.path, &info) == 0 && info.st_size > 2_000_000, "the database file holds \(info.st_size) bytes")
        #expect(try ids.allSatisfy { try big.storedActivity(id: $0)?.payload == payload })
        try big.close()
        let reopened = try Store(path: big.path, limits: limits)
        #expect(try reopened.activities(.init(), now: 1_000).count == 200)
    }

    /// A statement that fires triggers inside a transaction keeps a statement journal; on disk
    /// it was most of what an Advertise at an app's quota wrote (Benchmarks/README).
    @Test func theWriterKeepsItsStatementJournalsInMemory() throws {
        let memory = 2
        #expect(try store.inTransaction { db in try Int.fetchOne(db, sql: "PRAGMA temp_store") } == memory)
    }

    /// An idle batond hands back what its connections' page caches hold; the next call reads
    /// the pages again and finds what it did before.
    @Test func releasingTheCachesEmptiesThemAndLosesNothing() async throws {
        try store.write { try $0.register(type) }
        // Past the app's quota of 3: the rest go into the history.
        for n in 1...200 { _ = try store.write { try $0.insert(activity("Agatha \(n)", at: UInt64(n))) } }
        let live = try store.activities(.init(), now: 300)
        let past = try store.history(.init())
        #expect(live.count == 3 && past.count == 197)
        let before = try store.cachedBytes()
        try await store.releaseCaches()
        let after = try store.cachedBytes()
        #expect(before > 64 * 1024, "the writes and the reads filled the caches")
        #expect(after < before / 10, "\(after) bytes left of \(before)")
        #expect(try store.activities(.init(), now: 300) == live)
        #expect(try store.history(.init()) == past)
    }

    /// Reads share one read transaction, which each of the store's writes ends. Another
    /// connection's commit is therefore seen only after the store's next write: that is
    /// what shows the snapshot is held (a statement in a transaction of its own would see
    /// it at once), and why a store must be its file's only writer.
    @Test func readsShareASnapshotThatEachWriteEnds() throws {
        try store.write { try $0.register(type) }
        let agatha = activity("Agatha", at: 1)
        _ = try store.write { try $0.insert(agatha) }
        #expect(try store.storedActivity(id: agatha.id)?.title == "Agatha")

        let outsider = try OutsideConnection(path: store.path)
        try outsider.write { db in try db.execute(sql: "UPDATE activity SET title = 'Agatha (outside)' WHERE id = ?", arguments: [agatha.id]) }
        #expect(try store.storedActivity(id: agatha.id)?.title == "Agatha", "the snapshot taken by the first read")

        // The store's own write ends the snapshot: the next read sees both commits.
        let jamie = activity("Jamie", at: 2)
        _ = try store.write { try $0.insert(jamie) }
        #expect(try store.storedActivity(id: agatha.id)?.title == "Agatha (outside)")
        #expect(try store.storedActivity(id: jamie.id)?.title == "Jamie")
        var renamed = jamie
        renamed.title = "Jamie the Hawk"
        try store.write { try $0.update(renamed) }
        #expect(try store.search("hawk", limit: 5, now: 10).map(\.id) == [jamie.id])
    }

    /// A read on another thread can begin a snapshot while a write is under way, before its
    /// commit: the write ends the snapshot again once committed, so its caller's next read
    /// sees the commit (as a client reads after batond's reply).
    @Test func aWriteIsSeenByTheNextReadWhileOtherThreadsRead() throws {
        var limits = Limits()
        limits.liveActivitiesPerApp = 1_000
        let busy = try Store(path: directory.appendingPathComponent("busy.sqlite").path, limits: limits)
        try busy.write { try $0.register(type) }
        let seed = activity("Seed", at: 0)
        _ = try busy.write { try $0.insert(seed) }
        let stop = Atomic(false)
        let reads = Atomic(0)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            while !stop.load(ordering: .relaxed) {
                _ = try? busy.storedActivity(id: seed.id)
                reads.add(1, ordering: .relaxed)
            }
            finished.signal()
        }.start()
        var unseen: [Int] = []
        for index in 1...300 {
            let note = activity("Note \(index)", at: UInt64(index))
            _ = try busy.write { try $0.insert(note) }
            if try busy.storedActivity(id: note.id) == nil { unseen.append(index) }
        }
        stop.store(true, ordering: .relaxed)
        finished.wait()
        #expect(unseen.isEmpty, "writes not seen by the read after them: \(unseen)")
        #expect(reads.load(ordering: .relaxed) > 300, "the other thread read throughout")
    }

    /// The snapshot ends before each write too. Held through a checkpoint that copied the
    /// whole WAL, it would keep the next write from starting the WAL over, and the WAL
    /// would grow for as long as reads and writes alternate.
    @Test func aHeldSnapshotDoesNotKeepTheWALFromStartingOver() throws {
        try store.write { try $0.register(type) }
        for index in 0..<3 { _ = try store.write { try $0.insert(activity("Note \(index)", at: UInt64(index))) } }
        let observer = try OutsideConnection(path: store.path)
        func checkpoint() throws -> (busy: Int, frames: Int, copied: Int) {
            let row = try observer.db.makeStatement(sql: "PRAGMA wal_checkpoint(PASSIVE)").row { (Int($0.int64(0)), Int($0.int64(1)), Int($0.int64(2))) }
            return row ?? (-1, -1, -1)
        }
        // A read takes its snapshot while the WAL holds frames no checkpoint has copied.
        #expect(try store.activities(.init(), now: 10).count == 3)
        let before = try checkpoint()
        #expect(before.busy == 0 && before.frames > 0 && before.copied == before.frames, "\(before)")

        _ = try store.write { try $0.insert(activity("Note 3", at: 3)) }
        let after = try checkpoint()
        #expect(after.frames < before.frames, "the WAL started over: \(after.frames) frames after, \(before.frames) before")
        #expect(try store.activities(.init(), now: 10).count == 3, "the quota of 3 trimmed the oldest")
    }

    @Test func tidyingMergesTheSearchIndexesOnlyAfterWrites() throws {
        var limits = Limits()
        limits.liveActivitiesPerApp = 1_000
        let big = try Store(path: directory.appendingPathComponent("tidy.sqlite").path, limits: limits)
        try big.write { try $0.register(type) }
        for index in 0..<200 { _ = try big.write { try $0.insert(activity("Note \(index)", at: UInt64(index), keywords: ["corpus"])) } }
        let observer = try OutsideConnection(path: big.path)
        func segmentPages() throws -> Int {
            try observer.read { db in
                try Int.fetchOne(db, sql: "SELECT (SELECT COUNT(*) FROM activity_search_data) + (SELECT COUNT(*) FROM activity_title_search_data)") ?? 0
            }
        }
        let before = try segmentPages()
        #expect(try big.tidySearchIndex(budget: .seconds(10)) == false, "everything merged within the budget")
        let after = try segmentPages()
        #expect(after * 3 < before, "\(before) index rows before merging, \(after) after")
        #expect(try big.search("note 42", limit: 5, now: 1_000).map(\.title) == ["Note 42"])
        // Nothing written since: nothing to do, and nothing is written.
        #expect(try big.tidySearchIndex() == false)
        #expect(try segmentPages() == after)
    }

    @Test func upgradingAVersion1DatabaseIndexesOnlyEligibleActivities() throws {
        let path = directory.appendingPathComponent("v1.sqlite").path
        let queue = try OutsideConnection(path: path)
        try Schema.migrator.migrate(queue.db, upTo: "v1")
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
        #expect(try upgraded.write { try $0.deleteActivities(ids: ["a", "b"]) }.map(\.id) == ["a", "b"])
        #expect(try upgraded.search("jamie", limit: 10, now: 5).isEmpty)
    }

    /// A database migrated to v2 as v2 shipped has no index of scenes by activity; opening
    /// it adds one, and a database that already has it (v2 as edited later) opens too.
    @Test func upgradingAVersion2DatabaseIndexesScenesByActivity() throws {
        func hasIndex(_ path: String) throws -> Bool {
            try OutsideConnection(path: path).read { db in
                try Bool.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'scene_activity'") ?? false
            }
        }
        let shipped = directory.appendingPathComponent("v2.sqlite").path
        let queue = try OutsideConnection(path: shipped)
        try Schema.migrator.migrate(queue.db, upTo: "v2")
        queue.close()
        #expect(try !hasIndex(shipped))
        let upgraded = try Store(path: shipped)
        #expect(try hasIndex(shipped))
        let scene = Scene(id: Identifier.make(), appID: type.appID, createdAt: 1, lastActiveAt: 1)
        try upgraded.write { try $0.insert(scene) }
        try upgraded.close()

        let edited = directory.appendingPathComponent("v2-edited.sqlite").path
        let editedQueue = try OutsideConnection(path: edited)
        try Schema.migrator.migrate(editedQueue.db, upTo: "v2")
        try editedQueue.write { try $0.execute(sql: "CREATE INDEX scene_activity ON scene(activity_id) WHERE activity_id IS NOT NULL") }
        editedQueue.close()
        #expect(throws: Never.self) { try Store(path: edited).close() }
        #expect(try hasIndex(edited))
    }

    /// Registrations are looked up from memory: a change or a removal must show at once.
    @Test func aChangedOrRemovedRegistrationShowsAtOnce() throws {
        #expect(try store.activityType(type.type) == nil)
        try store.write { try $0.register(type) }
        #expect(try store.activityType(type.type) == type)
        var changed = type
        changed.handler = nil
        changed.requiredKeys = ["id", "name"]
        try store.write { try $0.register(changed) }
        #expect(try store.activityType(type.type) == changed)
        _ = try store.write { try $0.unregister(type: type.type) }
        #expect(try store.activityType(type.type) == nil)
    }

    @Test func unregisteringATypeRemovesItsActivities() throws {
        try store.write { try $0.register(type) }
        let one = activity("one", at: 1)
        _ = try store.write { try $0.insert(one) }
        #expect(try store.write { try $0.unregister(type: type.type) }?.map(\.id) == [one.id])
        #expect(try store.write { try $0.unregister(type: type.type) } == nil)
        #expect(try store.counts().activities == 0)
    }

    @Test func sceneStorageIsTypedAtomicAndLimited() throws {
        let scene = Scene(id: Identifier.make(), appID: type.appID, createdAt: 1, lastActiveAt: 1)
        try store.write { try $0.insert(scene) }
        try store.write { try $0.changeStorage(sceneID: scene.id, set: [
            ("ContentView.CurrentTab", .string("b2")), ("flag", .bool(true)), ("count", .int(-3)),
            ("ratio", .double(0.25)), ("blob", .bytes([0, 255])), ("none", .bytes([])),
        ], remove: []) }
        #expect(try store.storage(sceneID: scene.id) == [
            "ContentView.CurrentTab": .string("b2"), "flag": .bool(true), "count": .int(-3), "ratio": .double(0.25), "blob": .bytes([0, 255]),
            "none": .bytes([]),
        ])
        // Stored as a zero-length blob, not NULL (which reads back as empty bytes too).
        let storedType = try OutsideConnection(path: store.path).read { db in
            try String.fetchOne(db, sql: "SELECT typeof(value) FROM scene_storage WHERE key = 'none'")
        }
        #expect(storedType == "blob")
        // Over the 100-byte limit: refused, and the removal in the same change is undone too.
        #expect(throws: BatonError.self) {
            try store.write { try $0.changeStorage(sceneID: scene.id, set: [("big", .string(String(repeating: "x", count: 90)))], remove: ["flag"]) }
        }
        #expect(try store.storageValue(sceneID: scene.id, key: "flag") == .bool(true))
        #expect(try store.storageValue(sceneID: scene.id, key: "big") == nil)
        #expect(try store.write { try $0.changeStorage(sceneID: scene.id, set: [], remove: ["flag", "absent"]) } == ["flag"])
        #expect(throws: BatonError.self) { try store.write { try $0.changeStorage(sceneID: "nope", set: [("a", .int(1))], remove: []) } }

        #expect(try store.write { try $0.deleteScene(id: scene.id) })
        #expect(try store.storage(sceneID: scene.id).isEmpty)
        #expect(try store.write { try $0.deleteScene(id: scene.id) } == false)
    }

    @Test func textThatLooksLikeANumberStaysText() throws {
        let scene = Scene(id: Identifier.make(), appID: type.appID, createdAt: 1, lastActiveAt: 1)
        try store.write { try $0.insert(scene) }
        let texts = ["42", "1.5", "007", " 42 ", "1e3", "-0"]
        try store.write { tx in try tx.changeStorage(sceneID: scene.id, set: texts.enumerated().map { ("k\($0.offset)", .string($0.element)) }, remove: []) }
        let stored = try store.storage(sceneID: scene.id)
        for (index, text) in texts.enumerated() {
            #expect(stored["k\(index)"] == .string(text), "\(text) came back as \(String(describing: stored["k\(index)"]))")
        }
    }

    @Test func aScenesCurrentActivityFollowsAdvertising() throws {
        try store.write { try $0.register(type) }
        let scene = Scene(id: Identifier.make(), appID: type.appID, createdAt: 1, lastActiveAt: 1)
        try store.write { try $0.insert(scene) }
        var current = activity("Agatha", at: 5)
        current.sceneID = scene.id
        _ = try store.write { try $0.insert(current) }
        #expect(try store.scene(id: scene.id)?.activityID == current.id)
        #expect(try store.scene(id: scene.id)?.lastActiveAt == 5)
        #expect(try store.activities(.init(sceneID: scene.id), now: 6).map(\.id) == [current.id])
        _ = try store.write { try $0.deleteScene(id: scene.id) }
        #expect(try store.activity(id: current.id, now: 6)?.sceneID == nil)
    }
}

extension StoreTests {
    @Test func aSceneWithTooMuchStorageIsNotCreatedAtAll() throws {
        let scene = Scene(id: Identifier.make(), appID: type.appID, createdAt: 1, lastActiveAt: 1)
        #expect(throws: BatonError.self) { try store.write { try $0.insert(scene, storage: [("big", .string(String(repeating: "x", count: 200)))]) } }
        #expect(try store.scene(id: scene.id) == nil)
        try store.write { try $0.insert(scene, storage: [("tab", .string("b1"))]) }
        #expect(try store.storage(sceneID: scene.id) == ["tab": .string("b1")])
    }

    /// Every scene continued from the activity loses it; a scene showing another keeps its own.
    @Test func invalidatingTheCurrentActivityClearsItFromTheScene() throws {
        try store.write { try $0.register(type) }
        let scenes = (0..<3).map { _ in Scene(id: Identifier.make(), appID: type.appID, createdAt: 1, lastActiveAt: 1) }
        for scene in scenes { try store.write { try $0.insert(scene) } }
        let current = activity("Agatha", at: 5)
        let other = activity("Jamie", at: 5)
        _ = try store.write { try $0.insert(current) }
        _ = try store.write { try $0.insert(other) }
        try store.write { try $0.continueInto(sceneID: scenes[0].id, activityID: current.id, storage: [("k", .int(1))], now: 6) }
        try store.write { try $0.continueInto(sceneID: scenes[1].id, activityID: current.id, storage: [("k", .int(2))], now: 6) }
        try store.write { try $0.continueInto(sceneID: scenes[2].id, activityID: other.id, storage: [("k", .int(3))], now: 6) }
        #expect(try store.scene(id: scenes[0].id)?.activityID == current.id)
        #expect(try store.write { try $0.deleteActivities(ids: [current.id]) }.map(\.id) == [current.id])
        #expect(try store.scene(id: scenes[0].id)?.activityID == nil)
        #expect(try store.scene(id: scenes[1].id)?.activityID == nil)
        #expect(try store.scene(id: scenes[2].id)?.activityID == other.id)
    }
}

extension StoreTests {
    @Test func aBatchCommitsTogetherAndFailsItemByItem() throws {
        try store.write { try $0.register(type) }
        for index in 0..<3 { _ = try store.write { try $0.insert(activity("persistent \(index)", at: 1, persistent: "p\(index)")) } }
        // A duplicate id and an unknown scene fail inside SQLite: the batch is redone one by
        // one, and the failed insert's quota trim of "first" is undone with it.
        let duplicate = activity("dup", at: 2)
        var unknownScene = activity("scene", at: 2)
        unknownScene.sceneID = "no-such-scene"
        _ = try store.write { try $0.deleteSaved(persistentIDs: ["p0", "p1"]) }
        let results = store.insert(batch: [activity("first", at: 3), duplicate, duplicate, unknownScene])
        #expect(results.map { if case .success = $0 { true } else { false } } == [true, true, false, false])
        #expect(try store.activities(.init(), now: 4).map(\.title).sorted() == ["dup", "first", "persistent 2"])
    }

    @Test func aQuotaRefusalInABatchKeepsTheOthers() throws {
        try store.write { try $0.register(type) }
        for index in 0..<2 { _ = try store.write { try $0.insert(activity("persistent \(index)", at: 1, persistent: "p\(index)")) } }
        // The third persistent activity fills the quota of 3; the fourth has nothing to trim.
        let results = store.insert(batch: [activity("third", at: 2, persistent: "p2"), activity("refused", at: 2)])
        guard case .success = results[0], case .failure(let error as BatonError) = results[1] else {
            Issue.record("expected success, then a refusal: \(results)")
            return
        }
        #expect(error.code == .quotaExceeded)
        #expect(try store.activities(.init(), now: 3).map(\.title).sorted() == ["persistent 0", "persistent 1", "third"])
    }
}

extension StoreTests {
    @Test func aContinuationWaitsThenArrivesOrFailsAfterADay() throws {
        try store.write { try $0.register(type) }
        let now = WallClock.nowMicroseconds()
        let agatha = activity("Agatha", at: now)
        _ = try store.write { try $0.insert(agatha) }
        let scene = Scene(id: Identifier.make(), appID: type.appID, title: "Agatha", activityID: agatha.id, createdAt: now, lastActiveAt: now)
        try store.write { try $0.insertPending(scene, activityID: agatha.id) }
        #expect(try store.scene(id: scene.id)?.state == .pending)
        #expect(try store.pendingContinuations().map(\.sceneID) == [scene.id])
        try store.write { try $0.noteDeliveryFailed(sceneID: scene.id, error: "not running") }
        #expect(try store.pendingContinuation(sceneID: scene.id)?.attempts == 1)
        #expect(try store.pendingContinuation(sceneID: scene.id)?.lastError == "not running")

        // Kept across reopening; not failed before its day is over.
        try store.close()
        let reopened = try Store(path: directory.appendingPathComponent("baton.sqlite").path)
        #expect(try reopened.pendingContinuation(sceneID: scene.id)?.createdScene == true)
        #expect(try reopened.write { try $0.failContinuations(requestedBefore: now - Store.continuationLifetime) }.isEmpty)

        // Arrives: storage in, ready, nothing waits; arriving twice is refused.
        try reopened.write { try $0.completeContinuation(sceneID: scene.id, activityID: agatha.id, storage: [("tab", .string("b1"))], now: now + 1) }
        #expect(try reopened.scene(id: scene.id)?.state == .ready)
        #expect(try reopened.storage(sceneID: scene.id) == ["tab": .string("b1")])
        #expect(throws: BatonError.self) {
            try reopened.write { try $0.completeContinuation(sceneID: scene.id, activityID: agatha.id, storage: [], now: now + 2) }
        }

        // Another one into the same (existing) scene, a day old: failed, the scene kept.
        try reopened.write { try $0.markPending(sceneID: scene.id, activityID: agatha.id, now: now + 3) }
        #expect(try reopened.pendingContinuation(sceneID: scene.id)?.createdScene == false)
        #expect(try reopened.write { try $0.failContinuations(requestedBefore: now + 3 + Store.continuationLifetime + 1) } == [scene.id])
        #expect(try reopened.scene(id: scene.id)?.state == .failed)
        #expect(try reopened.pendingContinuations().isEmpty)
        try reopened.close()
    }
}
