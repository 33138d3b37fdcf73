import BatonCore
import DBus
import Foundation
import Testing
import TestSupport

/// The history through the real daemon on a private bus: what ended is listed, found and
/// continued; it keeps to its size; cleared, it leaves the disk.
@Suite(.serialized)
struct HistoryTests {
    static let archive = "org.baton.Handoff1.Archive"
    static let activities = "org.baton.Handoff1.Activities"

    func history(_ world: BatonWorld, _ filter: [String: String] = [:]) async throws -> [[String: DBusValue]] {
        try #require(try await world.call(Self.archive, "History", [.stringMap(filter)]).first?.arrayValue)
            .compactMap { $0.stringKeyedValue?.mapValues(\.unwrapped) }
    }

    @Test func whatEndedIsListedFoundAndContinued() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        try await world.register()
        let agatha = try await world.advertise("Agatha", options: ["keywords": "witch", "eligible_for_search": "true", "target_content_id": "agatha"])
        let secret = try await world.advertise("Secret", options: ["eligible_for_history": "false"])
        let live = try await world.advertise("Still here")
        for id in [agatha, secret] { _ = try await world.call(Self.activities, "Invalidate", [.string(id)]) }

        // From gdbus, a client we did not write: the record with how and when it ended.
        let listed = try await world.run("gdbus", [
            "call", "--session", "--dest", "org.baton.Handoff1", "--object-path", "/org/baton/Handoff1", "--method", "\(Self.archive).History", "{}",
        ])
        #expect(listed.status == 0 && listed.stdout.contains("'end_reason': <'invalidated'>") && listed.stdout.contains(agatha)
                && !listed.stdout.contains(secret) && !listed.stdout.contains(live), "\(listed)")
        let past = try #require(try await history(world).first)
        #expect(past["title"]?.stringValue == "Agatha" && past["end_detail"]?.stringValue == "invalidated by its app")
        #expect(past["ended_at"]?.uint64Value ?? 0 >= past["updated_at"]?.uint64Value ?? .max)
        #expect(try await history(world, ["query": "witc"]).compactMap { $0["id"]?.stringValue } == [agatha])
        #expect(try await history(world, ["query": "raven"]).isEmpty)
        await #expect(throws: DBusError.self) { try await world.call(Self.archive, "History", [.stringMap(["colour": "red"])]) }

        // Explain says so, and Continue does it: a scene showing it opens, as for a live one.
        let explained = try #require(try await world.call(Self.activities, "Explain", [.string(agatha)]).first?.stringKeyedValue)
        #expect(explained["continuable"]?.unwrapped == .boolean(true) && explained["state"]?.unwrapped.stringValue == "invalidated")
        let scene = try #require(try await world.call(Self.activities, "Continue", [.string(agatha), .stringMap([:])]).first?.objectPathValue)
        let shown = try await world.call("org.freedesktop.DBus.Properties", "Get", [.string("org.baton.Handoff1.Scene"), .string("ActivityId")], path: scene)
        #expect(shown.first?.unwrapped.stringValue == agatha)
        // Not brought back to life: it is still only in the history.
        await #expect(throws: DBusError.self) { try await world.call(Self.activities, "Get", [.string(agatha)]) }

        // The command line, as a user types it.
        let table = try await world.baton(["history"])
        #expect(table.status == 0 && table.stdout.contains("Agatha") && table.stdout.contains("invalidated"), "\(table)")
        let found = try await world.baton(["history", "search", "witch", "--json"])
        #expect(found.status == 0 && found.stdout.contains(agatha), "\(found)")
        let refused = try await world.baton(["history", "clear"])
        #expect(refused.status == 3 && refused.stderr.contains("--all"), "\(refused)")
        let cleared = try await world.baton(["history", "clear", "--all"])
        #expect(cleared.stdout == "removed 1 activity from the history\n", "\(cleared)")
        #expect(try await history(world).isEmpty)
    }

    /// With a history of one day, a past activity is kept for a day to the microsecond, then
    /// trimmed by housekeeping at that time (batond's clock held by the test).
    // On a clock the test holds: a move that never returned would hang it; the limit fails it.
    @Test(.timeLimit(.minutes(1))) func aPastActivityAgesOutAfterTheHistorysDays() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let clock = ManualClock()
        let batond = try await InProcessBatond(on: world, clock: clock) { $0.limits.historySeconds = 86_400 }
        try await world.register()
        let id = try await world.advertise("Agatha")
        _ = try await world.call(Self.activities, "Invalidate", [.string(id)])
        #expect(try await history(world).compactMap { $0["id"]?.stringValue } == [id])
        await clock.advance(by: .seconds(86_400))
        #expect(try await history(world).count == 1, "aged out before its day was over")
        await clock.advance(by: .microseconds(1))
        #expect(try await history(world).isEmpty, "still in the history after its day")
        try await batond.stop()
    }

    @Test func theHistoryKeepsToItsSizeAndClearedLeavesTheDisk() async throws {
        let world = try await BatonWorld.started(["--history-size", "1"])
        defer { world.close() }
        try await world.register(requiredKeys: "")
        let marker = "MARKER-" + Identifier.make()
        let first = try await world.advertise("First", payload: #"{"note":"\#(marker)"}"#)
        _ = try await world.call(Self.activities, "Invalidate", [.string(first)])
        #expect(try await history(world).count == 1)
        let filler = String(repeating: "x", count: 60_000)
        for index in 0..<20 {
            let id = try await world.advertise("Filler \(index)", payload: #"{"note":"\#(filler)"}"#)
            _ = try await world.call(Self.activities, "Invalidate", [.string(id)])
        }
        let kept = try await history(world)
        // 1 MiB holds 17 of these; when it is full the oldest go, down to 90%.
        #expect(kept.count < 18 && kept.count > 10, "\(kept.count)")
        #expect(!kept.contains { $0["title"]?.stringValue == "First" })
        #expect(kept.first?["title"]?.stringValue == "Filler 19")

        // What the history let go of, or was told to clear, leaves the disk once batond is idle.
        let second = try await world.advertise("Second", payload: #"{"note":"\#(marker)"}"#)
        _ = try await world.call(Self.activities, "Invalidate", [.string(second)])
        #expect(try await world.call(Self.archive, "ClearHistory", [.stringMap(["query": "second"])]).first?.uint32Value == 0,
                "Second was not searchable: query finds search-eligible ones only")
        let removed = try await world.call(Self.archive, "ClearHistory", [.stringMap(["since": "\(WallClock.nowMicroseconds() - 60_000_000)"])])
        #expect(removed.first?.uint32Value == UInt32(kept.count + 1))
        try await eventually("the WAL is truncated once batond is idle") {
            (try? FileManager.default.attributesOfItem(atPath: world.database + "-wal")[.size] as? Int) == 0
        }
        for suffix in ["", "-wal"] {
            let data = FileManager.default.contents(atPath: world.database + suffix) ?? Data()
            #expect(data.range(of: Data(marker.utf8)) == nil, "\(suffix.isEmpty ? "the database" : suffix) still holds the payload")
        }
    }
}
