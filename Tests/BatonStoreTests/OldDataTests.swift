import BatonCore
@testable import BatonStore
import Foundation
import Testing
import TestSupport

/// Databases that batond on GRDB wrote at schema v20 (`Tests/Fixtures/v20`, made by its
/// `make-v20` with the build of f4df60c: four machines that used every part of Baton, one of
/// them killed with its last commits in its WAL). Every later build opens them and keeps every
/// row; nothing a user has is lost when the store's layer changes (#57).
struct OldDataTests {
    static let machines = ["desktop", "laptop", "office", "home"]
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/v20")

    /// A copy of `machine`'s state directory in a fresh temporary directory: its database path.
    static func copy(_ machine: String) throws -> String {
        let directory = try TemporaryDirectory.make(prefix: "baton-v20-\(machine)")
        let source = fixtures.appendingPathComponent(machine)
        for file in try FileManager.default.contentsOfDirectory(atPath: source.path) {
            try FileManager.default.copyItem(at: source.appendingPathComponent(file), to: directory.appendingPathComponent(file))
        }
        return directory.appendingPathComponent("baton.sqlite").path
    }

    /// Every table's schema and rows as `sqlite3 .dump` prints them (a program we did not write),
    /// read from a copy so that reading changes nothing of `path`.
    static func dump(_ path: String) async throws -> String {
        let directory = try TemporaryDirectory.make(prefix: "baton-v20-dump")
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.copyItem(atPath: path + suffix, toPath: directory.path + "/copy.sqlite" + suffix)
        }
        let sqlite3 = try Executables.require("sqlite3", package: "sqlite3")
        let result = try await Executables.run(sqlite3, [directory.path + "/copy.sqlite", ".dump"])
        guard result.status == 0 else { throw TestSupportError("sqlite3 .dump failed: \(result)") }
        return result.stdout
    }

    @Test(arguments: machines)
    func everyRowIsKeptWhenTheStoreOpensAndCloses(machine: String) async throws {
        let path = try Self.copy(machine)
        let before = try await Self.dump(path)
        #expect(before.contains("INSERT INTO activity "), "the fixture holds activities")
        let (store, moved) = try Quarantine.openStore(path: path, limits: .default)
        #expect(moved == nil, "a sound v20 database is not set aside")
        try store.close()
        let after = try await Self.dump(path)
        // What the migrations since v20 add, and nothing else: every line before is there, in order.
        let added: Set<Substring> = [
            "INSERT INTO grdb_migrations VALUES('v21');",
            "CREATE TABLE source_setting (source TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (source, name));",
            "CREATE TABLE outbox_expiry (seq INTEGER PRIMARY KEY, expires_at INTEGER NOT NULL);",
            "CREATE TABLE clipboard_sent (log_seq INTEGER PRIMARY KEY, hlc INTEGER NOT NULL, expires_at INTEGER NOT NULL);",
            "INSERT INTO grdb_migrations VALUES('v22');",
            "CREATE TABLE outbox_body (seq INTEGER PRIMARY KEY REFERENCES outbox(seq) ON DELETE CASCADE, body BLOB NOT NULL);",
        ]
        let lines = after.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.filter { !added.contains($0) } == before.split(separator: "\n", omittingEmptySubsequences: false),
                "opening and closing the store changed the database of \(machine) beyond its migrations")
        #expect(added.isSubset(of: Set(lines)), "the migrations since v20 ran on \(machine)")
    }

    /// What each kind of row reads back as, through the store's own reads.
    @Test(arguments: machines)
    func everyKindOfRowReadsBack(machine: String) throws {
        let (store, _) = try Quarantine.openStore(path: try Self.copy(machine), limits: .default)
        defer { try? store.close() }
        // The fixture was made on 2026-12-06; every time it holds is near that.
        let then: UInt64 = 1_796_500_000_000_000
        let characterDetail = "com.raywenderlich.hawknotes.staterestore.characterDetail"
        #expect(try store.activityType(characterDetail)?.handler == "com.raywenderlich.hawknotes")
        #expect(try store.activityType("org.example.absent.page")?.requiredKeys == ["path"])

        let live = try store.activities(Store.ActivityFilter(), now: then)
        let agatha = try #require(live.first { $0.title == "Agatha on \(machine)" })
        #expect(agatha.keywords == ["hawk", "Agnès"])
        #expect(agatha.webpageURL == "https://example.org/agatha")
        #expect(agatha.persistentID == "agatha-\(machine)")
        #expect(agatha.payload.contains("\"name\":\"Agatha\""))
        // Accent- and case-insensitive search, as before: "agnes" finds the keyword Agnès.
        #expect(try store.search("agnes", limit: 10, now: then).contains { $0.id == agatha.id })
        #expect(live.contains { $0.type == "org.freedesktop.RecentDocument" })
        #expect(live.contains { $0.type == "org.baton.media.track" })
        #expect(live.contains { $0.type == "org.baton.web.page" })
        // The other machine's activities, applied by sync.
        #expect(live.contains { !$0.deviceID.isEmpty })

        let scene = try #require(try store.scenes(appID: "com.raywenderlich.hawknotes").first { $0.activityID == agatha.id })
        let storage = try store.storage(sceneID: scene.id)
        #expect(storage["BookView.ShowingAmazonPage"] == .bool(true))
        #expect(storage["count"] == .int(42))
        #expect(storage["ratio"] == .double(0.75))
        #expect(storage["blob"] == .bytes([0x00, 0xFF, 0x10]))
        #expect(storage["empty"] == .bytes([]))
        #expect(storage["ContentView.CurrentTab"] == .string("f1597af6-7f54-4136-ae1d-dd470ba37d59"))
        #expect(try store.handlesContent(sceneID: scene.id) == ["0edb89dd-1bdb-4aad-b0b3-c2e9b397f2d5"])

        #expect(try store.history(Store.HistoryFilter()).contains { $0.activity.title == "Lady Beatrice on \(machine)" })
        #expect(try store.pendingContinuations().count == 1)
        #expect(try store.blockedApps() == ["org.example.Blocked"])
        #expect(try store.notificationsEnabled() == false)
        #expect(Set(try store.sourcesOn().keys) == ["recent-documents", "media"])
        #expect(try store.syncIdentity() != nil)
        if machine == "desktop" { #expect(try store.outboxCount() > 0, "the changes made while the folder was away") }
        if machine == "laptop" || machine == "home" { #expect(try store.pausedUntil() != nil) }
    }
}
