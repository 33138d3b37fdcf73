import BatonCore
@testable import BatonStore
import Foundation
import Testing
import TestSupport

/// The history on real SQLite: what goes in when an activity ends, and what never does; its
/// limits of age (with the clock given, no waiting) and size; finding and clearing.
struct HistoryStoreTests {
    let type = ActivityType(type: "com.raywenderlich.hawknotes.staterestore.characterDetail", appID: "com.raywenderlich.hawknotes",
                            title: "Character", handler: "com.raywenderlich.hawknotes", requiredKeys: ["id"])

    func store(_ change: (inout Limits) -> Void = { _ in }) throws -> Store {
        var limits = Limits()
        change(&limits)
        let store = try Store(path: try TemporaryDirectory.make(prefix: "baton-history").appendingPathComponent("baton.sqlite").path,
                              limits: limits)
        try store.write { try $0.register(type) }
        return store
    }

    func activity(_ title: String, payload: String = #"{"id":"x"}"#, keywords: [String] = [], searchable: Bool = true) -> Activity {
        Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: title, payload: payload, keywords: keywords,
                 eligibleForSearch: searchable, createdAt: 1, updatedAt: 1)
    }

    @Test func activitiesThatEndGoIntoTheHistoryUnlessTheySayNo() throws {
        let store = try store { $0.liveActivitiesPerApp = 2 }
        let agatha = activity("Agatha"), jamie = activity("Jamie"), sigrid = activity("Sigrid")
        var secret = activity("Secret")
        secret.eligibleForHistory = false
        for each in [agatha, secret] { _ = try store.write { try $0.insert(each) } }
        _ = try store.write { try $0.deleteActivities(ids: [agatha.id, secret.id]) }
        var soon = jamie
        let expiry = WallClock.nowMicroseconds() + 1_000_000
        soon.expiresAt = expiry
        _ = try store.write { try $0.insert(soon) }
        _ = try store.write { try $0.purgeExpired(now: expiry + 500_000) }
        // Two live ones for the app's quota of two; the third evicts the oldest.
        for each in [sigrid, activity("Beatrice"), activity("Kenrick")] { _ = try store.write { try $0.insert(each) } }

        let past = try store.history(.init())
        #expect(Set(past.map(\.activity.title)) == ["Agatha", "Jamie", "Sigrid"])
        let byTitle = Dictionary(uniqueKeysWithValues: past.map { ($0.activity.title, $0) })
        #expect(byTitle["Agatha"]?.endState == "invalidated" && byTitle["Agatha"]?.endReason == "invalidated by its app")
        #expect(byTitle["Jamie"]?.endState == "expired" && byTitle["Jamie"]?.endedAt == expiry, "ended when it expired")
        #expect(byTitle["Sigrid"]?.endState == "evicted")
        #expect(byTitle["Agatha"]?.activity == agatha, "kept whole")

        // Deletions that are not an end leave nothing: DeleteAllSaved, a type unregistered.
        let before = try store.history(.init()).count
        _ = try store.write { try $0.deleteAll(appID: type.appID) }
        _ = try store.write { try $0.insert(activity("Last")) }
        _ = try store.write { try $0.unregister(type: type.type) }
        #expect(try store.history(.init()).count == before)
    }

    @Test func theHistoryKeepsToItsAgeWithTheClockGiven() throws {
        let store = try store { $0.historySeconds = 3600 }
        let old = activity("Old"), recent = activity("Recent")
        _ = try store.write { try $0.insert(old) }
        _ = try store.write { try $0.deleteActivities(ids: [old.id]) }
        let endedAt = try #require(try store.pastActivity(id: old.id)?.endedAt)
        _ = try store.write { try $0.insert(recent) }
        _ = try store.write { try $0.deleteActivities(ids: [recent.id]) }
        #expect(try store.trimHistory(now: endedAt + 3_599_000_000) == 0)
        // An hour after the first ended: it goes, the second (ended later) stays.
        let recentEnd = try #require(try store.pastActivity(id: recent.id)?.endedAt)
        #expect(try store.trimHistory(now: max(endedAt + 3_600_000_001, recentEnd)) == (recentEnd > endedAt ? 1 : 2))
        #expect(try store.pastActivity(id: old.id) == nil)
    }

    @Test func theHistoryKeepsToItsSizeOldestFirst() throws {
        let store = try store { $0.historyBytes = 20 * 1024 }
        let payload = #"{"id":""# + String(repeating: "x", count: 3000) + #""}"#
        var ended: [String] = []
        for index in 0..<12 {
            let each = activity("Note \(index)", payload: payload)
            _ = try store.write { try $0.insert(each) }
            _ = try store.write { try $0.deleteActivities(ids: [each.id]) }
            ended.append(each.id)
            #expect(try store.historySize().bytes <= 20 * 1024)
        }
        let kept = try store.history(.init()).map(\.activity.id)
        #expect(kept.count >= 5 && kept.count < 12)
        #expect(kept == Array(ended.suffix(kept.count).reversed()), "the newest kept, the most recently ended first")
        // The running total is the sum of what is there.
        let summed = try store.read { db in try Int.fetchOne(db, sql: "SELECT sum(size) FROM history") }
        #expect(try store.historySize().bytes == summed)
    }

    /// Every text an activity declares counts against the history's size: a long content id
    /// or persistent id as much as a long payload (they were once left out).
    @Test func everyDeclaredTextCountsAgainstTheHistorysSize() throws {
        let store = try store()
        var long = activity("Note")
        long.targetContentID = String(repeating: "c", count: 5000)
        long.persistentID = String(repeating: "p", count: 3000)
        _ = try store.write { try $0.insert(long) }
        _ = try store.write { try $0.deleteActivities(ids: [long.id]) }
        let size = try store.historySize().bytes
        #expect(size >= 8000 + long.title.utf8.count + long.payload.utf8.count, "\(size)")
    }

    @Test func theHistoryIsSearchedAndClearedByFilter() throws {
        let store = try store()
        let witch = activity("Agatha", keywords: ["witch"]), hidden = activity("Agatha's secret", searchable: false)
        let raven = activity("The Broken Raven")
        for each in [witch, hidden, raven] { _ = try store.write { try $0.insert(each) } }
        _ = try store.write { try $0.deleteActivities(ids: [witch.id, hidden.id, raven.id]) }
        #expect(try store.history(.init(query: "witch")).map(\.activity.id) == [witch.id])
        #expect(try store.history(.init(query: "agath")).map(\.activity.id) == [witch.id], "search-eligible ones only")
        #expect(try store.history(.init(limit: 1)).count == 1)
        #expect(try store.write { try $0.clearHistory(.init(query: "raven")) } == 1)
        #expect(Set(try store.history(.init()).map(\.activity.id)) == [witch.id, hidden.id])
        #expect(try store.write { try $0.clearHistory(.init()) } == 2)
        #expect(try store.historySize() == (0, 0))
    }

    @Test func noHistoryIsKeptWhenItsLimitIsZero() throws {
        let store = try store { $0.historySeconds = 0 }
        let agatha = activity("Agatha")
        _ = try store.write { try $0.insert(agatha) }
        _ = try store.write { try $0.deleteActivities(ids: [agatha.id]) }
        #expect(try store.history(.init()).isEmpty)
    }
}
