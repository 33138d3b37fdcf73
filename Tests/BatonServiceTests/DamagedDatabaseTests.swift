import BatonCore
import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// Damaged database files, as a crash, a bad disk or a stray program leaves them: batond
/// never serves from one and never restarts in a loop on one.
@Suite(.serialized)
struct DamagedDatabaseTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let corruptName = "org.baton.Handoff1.Error.StorageCorrupt"

    /// Ways a file goes bad, each applied to a database of a few hundred activities.
    enum Damage: String, CaseIterable {
        case truncated, headerBytes, garbagePages, zeroedPages, notSQLite

        func apply(to path: String) throws {
            let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            defer { try? handle.close() }
            switch self {
            case .truncated:
                try handle.truncate(atOffset: UInt64(size / 3))
            case .headerBytes:
                try handle.write(contentsOf: Data("Not SQLite here!".utf8))
            case .garbagePages:
                try handle.seek(toOffset: 4096)
                try handle.write(contentsOf: Data((0..<(size - 4096)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }))
            case .zeroedPages:
                try handle.seek(toOffset: 4096)
                try handle.write(contentsOf: Data(count: size - 4096))
            case .notSQLite:
                try handle.truncate(atOffset: 0)
                try handle.write(contentsOf: Data(String(repeating: "my notes, not a database\n", count: 200).utf8))
            }
        }
    }

    /// A world whose database holds 300 activities, with batond stopped cleanly (no WAL left).
    func worldWithData() async throws -> BatonWorld {
        let world = try BatonWorld()
        try await world.startDaemon()
        try await world.register(requiredKeys: "")
        let payload = #"{"notes":""# + String(repeating: "n", count: 1_000) + #""}"#
        // Fifty at a time: the bus allows a connection only so many calls awaiting replies.
        for start in stride(from: 0, to: 300, by: 50) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in start..<start + 50 {
                    group.addTask { _ = try await world.advertise("activity \(index)", payload: payload) }
                }
                try await group.waitForAll()
            }
        }
        #expect(await world.stopDaemon() == 0)
        return world
    }

    /// The databases moved aside (their `-wal` and `-shm` go with them, under the same name).
    func quarantined(in world: BatonWorld) throws -> [String] {
        let directory = (world.database as NSString).deletingLastPathComponent
        return try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.contains(".corrupt-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }.sorted()
    }

    @Test(arguments: Damage.allCases)
    func aDamagedFileIsMovedAsideAndAFreshOneServed(_ damage: Damage) async throws {
        let world = try await worldWithData()
        defer { world.close() }
        try damage.apply(to: world.database)

        try await world.startDaemon()
        #expect(try await world.activityCount() == 0, "a fresh database")
        let moved = try quarantined(in: world)
        #expect(moved.count == 1 && moved.first?.hasPrefix("baton.sqlite.corrupt-") == true, "\(moved)")
        #expect(world.daemonLog.contains("could not be trusted") && world.daemonLog.contains(".recover"), "\(world.daemonLog)")
        // It works as a new database does, and the next start keeps it.
        try await world.register(requiredKeys: "")
        _ = try await world.advertise("after")
        #expect(await world.stopDaemon() == 0)
        try await world.startDaemon()
        #expect(try await world.activityCount() == 1)
        #expect(try quarantined(in: world) == moved)
    }

    /// A WAL of garbage is not the database's: SQLite ignores frames whose checksums fail,
    /// so the data the file holds is served and nothing is moved.
    @Test func aGarbageWALIsIgnoredAndAnEmptyFileIsANewDatabase() async throws {
        let world = try await worldWithData()
        defer { world.close() }
        try Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7919) }).write(to: URL(fileURLWithPath: world.database + "-wal"))
        try await world.startDaemon()
        #expect(try await world.activityCount() == 300)
        #expect(try quarantined(in: world).isEmpty)
        #expect(await world.stopDaemon() == 0)

        for suffix in ["", "-wal", "-shm"] { unlink(world.database + suffix) }
        _ = FileManager.default.createFile(atPath: world.database, contents: Data())
        try await world.startDaemon()
        #expect(try await world.activityCount() == 0)
        #expect(try quarantined(in: world).isEmpty)
    }

    /// Damage found while serving answers `StorageCorrupt` (never `Failed`), stops every
    /// write into the file, and the next start moves it aside.
    @Test func damageFoundWhileServingIsNamedAndQuarantinedAtTheNextStart() async throws {
        let world = try await worldWithData()
        defer { world.close() }
        try await world.startDaemon()
        // Pages the daemon has not read yet: every page past the first few.
        let size = try #require(try FileManager.default.attributesOfItem(atPath: world.database)[.size] as? Int)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: world.database))
        try handle.seek(toOffset: 8 * 4096)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: size - 8 * 4096))
        try handle.close()

        let listed = await errorName { try await world.call(Self.activities, "List", [.stringMap([:])]) }
        #expect(listed == Self.corruptName, "\(world.daemonLog)")
        let advertised = await errorName { try await world.advertise("into a damaged file") }
        #expect(advertised == Self.corruptName)
        #expect(!world.daemonLog.contains("failed to handle"))
        let baton = try Executables.built("baton")
        // The CLI: its own exit status for the disk's errors, and where to look.
        let fromCLI = try await world.run(baton, ["activities", "list"])
        #expect(fromCLI.status == 7 && fromCLI.stderr.contains("baton doctor"), "\(fromCLI)")
        let before = try await world.run(baton, ["doctor"])
        #expect(before.stdout.contains("found damaged while batond used it"), "\(before)")
        #expect(await world.stopDaemon() == 0)

        try await world.startDaemon()
        #expect(try quarantined(in: world).count == 1)
        #expect(try await world.activityCount() == 0)
        let after = try await world.run(baton, ["doctor"])
        #expect(after.status == 1 && after.stdout.contains("moved it aside") && after.stdout.contains(".recover"), "\(after)")
    }

    /// Damage in pages no call reads (an index the calls here do not use): start-up reads a
    /// few pages whatever the file's size, so batond serves; its full check, once idle, finds
    /// it. From then on nothing is written into the file, and the next start moves it aside.
    @Test func damageOnlyTheFullCheckFindsIsFoundOnceIdleAndQuarantinedAtTheNextStart() async throws {
        let world = try await worldWithData()
        defer { world.close() }
        let sqlite = try Executables.require("sqlite3", package: "sqlite3")
        let root = try await world.run(sqlite, [world.database, "SELECT rootpage FROM sqlite_master WHERE name = 'activity_type_index'"])
        let page = try #require(UInt64(root.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(root)")
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: world.database))
        try handle.seek(toOffset: (page - 1) * 4096)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 4096))
        try handle.close()

        try await world.startDaemon()
        #expect(try await world.activityCount() == 300, "served at start")
        try await eventually("the check once idle found the damage", timeout: .seconds(20)) { world.daemonLog.contains("is damaged") }
        #expect(await errorName { try await world.advertise("into a damaged file") } == Self.corruptName)
        let doctor = try await world.run(try Executables.built("baton"), ["doctor"])
        #expect(doctor.stdout.contains("found damaged while batond used it"), "\(doctor)")
        #expect(await world.stopDaemon() == 0)

        try await world.startDaemon()
        #expect(try quarantined(in: world).count == 1)
        #expect(try await world.activityCount() == 0)
    }

    /// `--database` in a directory others can write to is refused, with the fix.
    @Test func aDatabaseInADirectoryOthersCanWriteIsRefused() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let shared = world.bus.directory.appendingPathComponent("shared").path
        #expect(mkdir(shared, 0o777) == 0 && chmod(shared, 0o1777) == 0)
        let result = try await Executables.run(try Executables.built("batond"), ["--database", shared + "/baton.sqlite"],
                                               environment: world.bus.environment)
        #expect(result.status == 1)
        #expect(result.stderr.contains("other users can write to it") && result.stderr.contains("chmod go-w"), "\(result)")
        #expect(access(shared + "/baton.sqlite", F_OK) != 0, "nothing created")
    }
}
