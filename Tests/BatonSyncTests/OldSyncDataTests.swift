import BatonCore
@testable import BatonStore
@testable import BatonSync
import Foundation
import Testing
import TestSupport

/// What machines on the build of f4df60c (postgres-nio, GRDB) wrote for sync (`Tests/Fixtures/v20`,
/// see its `make-v20`): a machine of today's build joins their user and reads all of it.
struct OldSyncDataTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/v20")

    /// The user's recovery words, from a fixture machine's sync settings (its key).
    static func words(of machine: String) throws -> String {
        let settings = try #require(try SyncConfig.load(from: fixtures.appendingPathComponent("\(machine)/sync.json").path))
        return try #require(settings.userKeyValue).recoveryWords
    }

    /// Titles of the live activities that came from other machines.
    static func remoteTitles(_ device: SyncEngineTests.TestDevice) throws -> Set<String> {
        Set(try device.store.activities(Store.ActivityFilter(), now: device.store.wallClock.now()).filter(\.isRemote).map(\.title))
    }

    @Test(.timeLimit(.minutes(1))) func aNewMachineReadsTheRowsAnOldOneWroteToPostgreSQL() async throws {
        let sync = try await SyncServer.fresh()
        // The server's rows as pg_dump wrote them (log heads come back with the records anyway).
        try await sync.psql(String(contentsOf: Self.fixtures.appendingPathComponent("postgres.sql"), encoding: .utf8))
        #expect(try await sync.psql("SELECT count(*) FROM baton.record") != "0\n")
        let login = try await sync.addDevice(user: "fixture")
        let newcomer = try SyncEngineTests.TestDevice(name: "newcomer")
        defer { newcomer.close() }
        try await newcomer.engine.join(url: login.url, recoveryWords: try Self.words(of: "office"), deviceName: "newcomer")
        try await eventually("the old machines' activities arrive") {
            let titles = (try? Self.remoteTitles(newcomer)) ?? []
            return titles.isSuperset(of: ["Agatha on office", "Agatha on home"])
        }
        let titles = try Self.remoteTitles(newcomer)
        #expect(!titles.contains("Jamie on office"), "home asked office to end it, and office did")
        #expect(!titles.contains("Lady Beatrice on office"), "it ended on office before it synced")
        try await eventually("the old machines' names are read") {
            Set(((try? newcomer.engine.knownDevices()) ?? []).map(\.name)).isSuperset(of: ["office", "home", "newcomer"])
        }
    }

    @Test(.timeLimit(.minutes(1))) func aNewMachineReadsTheFilesAnOldOneWroteToAFolder() async throws {
        let folder = try TemporaryDirectory.make(prefix: "baton-v20-folder").appendingPathComponent("sync")
        try FileManager.default.copyItem(at: Self.fixtures.appendingPathComponent("folder"), to: folder)
        let newcomer = try SyncEngineTests.TestDevice(name: "newcomer")
        defer { newcomer.close() }
        try await newcomer.engine.join(url: "file://" + folder.path, recoveryWords: try Self.words(of: "desktop"), deviceName: "newcomer")
        try await eventually("the old machines' activities arrive") {
            ((try? Self.remoteTitles(newcomer)) ?? []).isSuperset(of: ["Agatha on desktop", "Agatha on laptop"])
        }
        #expect(!(try Self.remoteTitles(newcomer)).contains("Jamie on desktop"), "the laptop asked the desktop to end it, and it did")
        try await eventually("the old machines' names are read") {
            Set(((try? newcomer.engine.knownDevices()) ?? []).map(\.name)).isSuperset(of: ["desktop", "laptop", "newcomer"])
        }
    }
}
