import BatonCore
import BatonStore
@testable import BatonSync
import Foundation
import Logging
import Testing
import TestSupport

/// A laptop left shut for a month, on clocks the test holds (both machines' stores and the
/// records they stamp), through a server and through a folder: meanwhile the desktop changed
/// one activity, ended one, let one expire, and forgot the tombstones (after their week).
/// Back, the laptop has the desktop's state, and what it writes crosses to the desktop.
@Suite(.serialized) struct MonthAwayTests {
    let type = ActivityType(type: "com.raywenderlich.hawknotes.staterestore.characterDetail", appID: "com.raywenderlich.hawknotes",
                            title: "Character", handler: "com.raywenderlich.hawknotes", requiredKeys: ["id"])
    typealias TestDevice = SyncEngineTests.TestDevice

    enum Meeting: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case server, folder
        var testDescription: String { rawValue }
    }

    static let day: UInt64 = 24 * 3600 * 1_000_000

    @Test(arguments: Meeting.allCases)
    func aMachineAwayForAMonthComesBackToTheState(_ meeting: Meeting) async throws {
        let start = WallClock.nowMicroseconds()
        let desktopClock = ManualClock(startingAt: start), laptopClock = ManualClock(startingAt: start)
        let desktop = try TestDevice(name: "desktop", clock: desktopClock), laptop = try TestDevice(name: "laptop", clock: laptopClock)
        defer { desktop.close(); laptop.close() }
        try desktop.store.write { try $0.register(type) }
        switch meeting {
        case .server:
            let sync = try await SyncServer.fresh()
            try await laptop.join(on: sync, words: try await desktop.initialize(on: sync))
        case .folder:
            let folder = try TemporaryDirectory.make(prefix: "baton-sync-month").path
            let words = try await desktop.engine.initialize(url: folder, deviceName: "desktop")
            try await laptop.engine.join(url: folder, recoveryWords: words, deviceName: "laptop")
        }

        func advertise(_ title: String, lifetime: UInt64) throws -> Activity {
            let now = desktopClock.now()
            let activity = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: title, payload: "{}",
                                    createdAt: now, updatedAt: now, expiresAt: now + lifetime)
            _ = try desktop.store.write { try $0.insert(activity) }
            return activity
        }
        var kept = try advertise("Agatha", lifetime: 60 * Self.day)
        let ended = try advertise("Jamie", lifetime: 60 * Self.day), expiring = try advertise("Sigrid", lifetime: 10 * Self.day)
        try await eventually("the laptop has all three", timeout: .seconds(20)) { [kept] in
            try [kept, ended, expiring].allSatisfy { try laptop.store.activity(id: $0.id, now: laptopClock.now()) != nil }
        }

        // The laptop is shut. Over the month, the desktop ends one, changes one, lets one expire and forgets the tombstones.
        laptop.close()
        _ = try desktop.store.write { try $0.deleteActivities(ids: [ended.id]) }
        await desktopClock.advance(by: .seconds(15 * 24 * 3600))
        kept.title = "Agatha, two weeks on"
        kept.updatedAt = desktopClock.now()
        try desktop.store.write { [kept] in _ = try $0.update(kept) }
        await desktopClock.advance(by: .seconds(15 * 24 * 3600))
        let expired = try desktop.store.write { try $0.purgeExpired(now: desktopClock.now()) }
        #expect(expired.map(\.id) == [expiring.id])
        _ = try await desktop.store.tidy(truncatingWALAfter: .seconds(3600))
        #expect(try desktop.store.tombstone(activityID: ended.id) == nil, "the desktop forgot the end after a week")
        try await eventually("the desktop sent it all") { try desktop.store.outboxCount() == 0 }

        // Opened a month later: a new engine on the laptop's store and settings, as after a restart.
        await laptopClock.advance(by: .seconds(30 * 24 * 3600))
        let returned = try SyncEngine(store: laptop.store, configPath: SyncConfig.path(besideDatabase: laptop.store.path),
                                      log: Logger(label: "sync.laptop.back"), answerTimeout: .seconds(3), onApplied: { _ in }, onChange: {})
        let loop = Task { await returned.run() }
        defer { loop.cancel() }
        let now: @Sendable () -> UInt64 = { laptopClock.now() }
        try await eventually("the laptop has the desktop's state", timeout: .seconds(20)) { [kept] in
            try laptop.store.activity(id: kept.id, now: now())?.title == kept.title
                && laptop.store.activity(id: ended.id, now: now()) == nil && laptop.store.activity(id: expiring.id, now: now()) == nil
        }
        #expect(Set(try laptop.store.activities(.init(), now: now()).map(\.id)) == [kept.id])

        // And the other way: what the laptop advertises now reaches the desktop.
        let fresh = Activity(id: Identifier.make(), type: type.type, appID: type.appID, title: "Lady Beatrice", payload: "{}",
                             createdAt: now(), updatedAt: now())
        _ = try laptop.store.write { try $0.insert(fresh) }
        try await eventually("the desktop has what the laptop wrote on its return", timeout: .seconds(20)) {
            try desktop.store.activity(id: fresh.id, now: desktopClock.now()) != nil
        }
    }
}
