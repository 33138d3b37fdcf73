import BatonCore
import DBus
import Foundation
import Testing
import TestSupport

/// Mixed load on the real daemon: writers, a scene client, a reader and a client that
/// connects afresh for every call, all at once, with housekeeping running underneath.
@Suite(.serialized)
struct StressTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let scenes = "org.baton.Handoff1.Scenes"
    static let scene = "org.baton.Handoff1.Scene"

    /// What went wrong, by error name, across every client.
    final class Tally: @unchecked Sendable {
        private let lock = NSLock()
        private var unexpected: [String: Int] = [:]
        private(set) var calls = 0

        /// Counts a call; an error is recorded unless its name is among `allowed`.
        func count(_ allowed: Set<String> = [], _ call: () async throws -> Void) async {
            var failure: String?
            do {
                try await call()
            } catch let error as DBusError where allowed.contains(error.name) {
                failure = nil
            } catch let error as DBusError {
                failure = "\(error.name): \(error.message)"
            } catch {
                failure = "\(error)"
            }
            lock.withLock {
                calls += 1
                if let failure { unexpected[failure, default: 0] += 1 }
            }
        }

        var failures: [String: Int] { lock.withLock { unexpected } }
    }

    @Test func mixedClientsGetOnlyNamedAnswers() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        // A small quota, so that advertising trims from the start, as a full app does.
        try await world.startDaemon(["--max-live-activities", "40"])
        try await world.register(requiredKeys: "")
        let tally = Tally()
        let notFound = "org.baton.Handoff1.Error.NotFound"
        let gone: Set<String> = [notFound, "org.baton.Handoff1.Error.Expired"]
        let rounds = 300

        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<6 {
                group.addTask {
                    let client = try world.bus.connect()
                    defer { client.close() }
                    for round in 0..<rounds {
                        var id = ""
                        let expiring = round % 10 == 0 ? ["expires_in": "1"] : [:]
                        await tally.count {
                            id = try #require(try await client.call(
                                "org.baton.Handoff1", BatonWorld.root, Self.activities, "Advertise",
                                [.string(BatonWorld.type), .string("writer \(writer) round \(round)"), .string(#"{"n":\#(round)}"#),
                                 .stringMap(["keywords": "stress,w\(writer)", "eligible_for_search": "true"].merging(expiring) { $1 })],
                                timeout: .seconds(20)).first?.stringValue)
                        }
                        guard !id.isEmpty else { continue }
                        // Another writer's Advertise may have trimmed it already.
                        await tally.count(gone) {
                            _ = try await client.call("org.baton.Handoff1", BatonWorld.root, Self.activities, "Update",
                                                      [.string(id), .string(#"{"updated":true}"#), .stringMap(["title": "updated \(round)"])],
                                                      timeout: .seconds(20))
                        }
                        if round % 3 == 0 {
                            await tally.count([notFound]) {
                                _ = try await client.call("org.baton.Handoff1", BatonWorld.root, Self.activities, "Invalidate",
                                                          [.string(id)], timeout: .seconds(20))
                            }
                        }
                    }
                }
            }
            group.addTask {
                let client = try world.bus.connect()
                defer { client.close() }
                for round in 0..<rounds {
                    var path: ObjectPath = "/"
                    await tally.count {
                        path = try #require(try await client.call(
                            "org.baton.Handoff1", BatonWorld.root, Self.scenes, "OpenScene",
                            [.string(BatonWorld.app), .stringMap(["title": "scene \(round)"])], timeout: .seconds(20)).first?.objectPathValue)
                    }
                    await tally.count {
                        _ = try await client.call("org.baton.Handoff1", path, Self.scene, "Set",
                                                  [.string("ContentView.CurrentTab"), .variant(.string("b\(round)"))], timeout: .seconds(20))
                    }
                    await tally.count {
                        let values = try await client.call("org.baton.Handoff1", path, Self.scene, "GetAll", [], timeout: .seconds(20))
                        #expect(values.first?.stringKeyedValue?["ContentView.CurrentTab"]?.unwrapped == .string("b\(round)"))
                    }
                    if round % 2 == 0 {
                        await tally.count {
                            _ = try await client.call("org.baton.Handoff1", BatonWorld.root, Self.scenes, "CloseScene",
                                                      [.objectPath(path)], timeout: .seconds(20))
                        }
                    }
                }
            }
            group.addTask {
                let client = try world.bus.connect()
                defer { client.close() }
                for round in 0..<rounds * 2 {
                    await tally.count {
                        _ = try await client.call("org.baton.Handoff1", BatonWorld.root, Self.activities, "List",
                                                  [.stringMap(["limit": "20"])], timeout: .seconds(20))
                    }
                    await tally.count {
                        _ = try await client.call("org.baton.Handoff1", BatonWorld.root, Self.activities, "Search",
                                                  [.string(round % 2 == 0 ? "stress" : "updated w1"), .uint32(10)], timeout: .seconds(20))
                    }
                }
            }
            group.addTask {
                for _ in 0..<rounds / 3 {
                    await tally.count {
                        let client = try world.bus.connect()
                        defer { client.close() }
                        _ = try await client.call("org.baton.Handoff1", BatonWorld.root, Self.activities, "List",
                                                  [.stringMap(["limit": "5"])], timeout: .seconds(20))
                    }
                }
            }
            try await group.waitForAll()
        }

        #expect(tally.failures.isEmpty, "unexpected answers in \(tally.calls) calls: \(tally.failures)")
        #expect(!world.daemonLog.contains("SQLite error"), "\(world.daemonLog.split(separator: "\n").filter { $0.contains("SQLite") || $0.contains("failed") }.prefix(5))")
        // Still serving, and every live activity is within the quota.
        #expect(try await world.activityCount() <= 40)
    }
}

extension StressTests {
    /// Another program reading the database (the sqlite3 shell) while batond writes. Once,
    /// batond closed a descriptor of its WAL index after opening the database, which dropped
    /// its locks on it: the shell then took itself for the last user, truncated the index,
    /// and batond died of SIGBUS.
    @Test func anotherProgramReadingTheDatabaseDoesNotHurtBatond() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register(requiredKeys: "")
        let sqlite = try Executables.require("sqlite3", package: "sqlite3")
        let writes = Task {
            for index in 0..<2_000 { _ = try await world.advertise("note \(index)") }
        }
        for _ in 0..<40 {
            let counted = try await world.run(sqlite, [world.database, "SELECT COUNT(*) FROM activity"])
            #expect(counted.status == 0, "\(counted)")
        }
        try await writes.value
        #expect(try await world.activityCount() == 2_000)
        #expect(world.daemon?.process.hasExited == false, "\(world.daemonLog)")
    }
}
