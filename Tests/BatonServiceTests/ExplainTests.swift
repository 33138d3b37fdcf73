import DBus
import Foundation
import Testing
import TestSupport

/// Explain(id): why an activity can or cannot be continued or found, while it lives and
/// for a week after it ended.
@Suite(.serialized)
struct ExplainTests {
    static let activities = "org.baton.Handoff1.Activities"

    struct Explanation {
        var state: String
        var continuable: Bool
        var searchable: Bool
        var reasons: [String]
        var lastContinuation: [String: DBusValue]?
    }

    func explain(_ id: String, _ world: BatonWorld) async throws -> Explanation {
        let fields = try #require(try await world.call(Self.activities, "Explain", [.string(id)]).first?.stringKeyedValue)
            .mapValues(\.unwrapped)
        return Explanation(
            state: fields["state"]?.stringValue ?? "?", continuable: fields["continuable"]?.boolValue ?? true,
            searchable: fields["searchable"]?.boolValue ?? true, reasons: fields["reasons"].flatMap([String].init(dbusValue:)) ?? ["?"],
            lastContinuation: fields["last_continuation"]?.stringKeyedValue?.mapValues(\.unwrapped))
    }

    @Test func everyStateHasItsReasons() async throws {
        let world = try await BatonWorld.started(["--max-live-activities", "5", "--test-clock"])
        defer { world.close() }
        try await world.register()

        let found = try await world.advertise("found", options: ["eligible_for_search": "true"])
        var explained = try await explain(found, world)
        #expect(explained.state == "live" && explained.continuable && explained.searchable)
        #expect(explained.reasons.count == 1 && explained.reasons[0].contains("has no handler"), "\(explained.reasons)")
        #expect(explained.lastContinuation == nil)

        let hidden = try await world.advertise("hidden", options: ["eligible_for_handoff": "false"])
        explained = try await explain(hidden, world)
        #expect(explained.state == "live" && !explained.continuable && !explained.searchable)
        #expect(explained.reasons.contains("advertised with eligible_for_handoff=false"))
        #expect(explained.reasons.contains("advertised with eligible_for_search=false"))

        _ = try await world.call(Self.activities, "Invalidate", [.string(hidden)])
        explained = try await explain(hidden, world)
        #expect(explained.state == "invalidated" && !explained.continuable && !explained.searchable)
        #expect(explained.reasons.first?.hasPrefix("invalidated by its app (20") == true, "\(explained.reasons)")

        // Evicted to keep the app under its quota of 5.
        for index in 0..<5 { _ = try await world.advertise("filler \(index)") }
        explained = try await explain(found, world)
        #expect(explained.state == "evicted")
        #expect(explained.reasons.first?.hasPrefix("removed to keep com.raywenderlich.hawknotes under its 5-activity quota") == true,
                "\(explained.reasons)")

        let saved = try await world.advertise("saved", options: ["persistent_id": "p1"])
        _ = try await world.call(Self.activities, "DeleteSaved", [.strings(["p1"])])
        #expect(try await explain(saved, world).reasons.first?.hasPrefix("deleted by its persistent id") == true)

        let expiring = try await world.advertise("brief", options: ["expires_in": "1"])
        // Expired, hidden at once: "expired at …"; purged at its grace's end (2 s), then
        // explained from its tombstone. The move returns once housekeeping has run.
        try await world.advanceClock(by: .seconds(1))
        let expired = try await explain(expiring, world)
        #expect(expired.state == "expired")
        #expect(!expired.continuable && expired.reasons.first?.hasPrefix("expired") == true, "\(expired.reasons)")
        try await world.advanceClock(by: .seconds(2))
        let purged = try await explain(expiring, world).reasons
        #expect(purged.first?.hasPrefix("expired (20") == true, "purged, and explained from its tombstone: \(purged)")

        let typed = try await world.advertise("typed")
        _ = try await world.call("org.baton.Handoff1.Registry", "UnregisterActivityType", [.string(BatonWorld.type)])
        #expect(try await explain(typed, world).reasons.first?.hasPrefix("its type \(BatonWorld.type) was unregistered") == true)

        let unknown = try await explain("3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c01", world)
        #expect(unknown.state == "unknown" && !unknown.continuable && unknown.reasons.first?.contains("no record") == true)
        #expect(await errorName { try await world.call(Self.activities, "Explain", [.string("not an id")]) }
            == "org.baton.Handoff1.Error.InvalidArgument")

        // The state survives a restart.
        await world.stopDaemon()
        try await world.startDaemon()
        #expect(try await explain(found, world).state == "evicted")
    }

    @Test func theLastContinuationIsExplained() async throws {
        let world = try await BatonWorld.startedInProcess { $0.handlerTimeout = .seconds(1) }
        defer { world.close() }
        try await world.register(handler: "org.baton.AbsentApp")
        let id = try await world.advertise("away")
        // The app is not there: pending, with why.
        #expect(await errorName { try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])]) }
            == "org.baton.Handoff1.Error.HandlerFailed")
        var last = try #require(try await explain(id, world).lastContinuation)
        #expect(last["state"] == .string("pending"))
        #expect(last["error"]?.stringValue?.contains("org.freedesktop.DBus.Error.ServiceUnknown") == true, "\(last)")
        #expect(last["scene"]?.objectPathValue != nil && (last["at"]?.uint64Value ?? 0) > 0)

        // A refusal.
        let app = try world.bus.connect()
        defer { app.close() }
        try await app.export("/", [Interface("org.baton.Handoff1.Handler", methods: [
            Method("ContinueActivity", in: [Argument("scene", "o"), Argument("activity", "a{sv}")], out: [Argument("storage", "a{sv}")]) { _ in
                throw DBusError(name: "org.baton.AbsentApp.Error.NoSuchNote", message: "no such note")
            },
        ])])
        try await app.requestName("org.baton.AbsentApp")
        try await eventually("the waiting one was refused") { try await explain(id, world).lastContinuation?["state"] == .string("refused") }
        last = try #require(try await explain(id, world).lastContinuation)
        #expect(last["error"]?.stringValue?.contains("no such note") == true, "\(last)")
    }
}
