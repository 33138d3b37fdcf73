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

    /// What `Continue` without options did: nil when it continued (into a scene, outside one,
    /// or as a continuation made and waiting for its app), else its error's name.
    func refusal(of id: String, _ world: BatonWorld) async -> String? {
        do {
            _ = try await world.call(Self.activities, "Continue", [.string(id), .stringMap([:])])
            return nil
        } catch let error as DBusError {
            if error.name == "org.baton.Handoff1.Error.HandlerFailed", error.message.contains("the continuation waits in scene") { return nil }
            return error.name
        } catch {
            return "\(error)"
        }
    }

    /// Explain says `state`, a reason containing `cause`, and a `continuable` that `Continue`,
    /// called next, bears out (refusing with `refused` when it is false).
    func expectAgreement(
        _ id: String, _ world: BatonWorld, state: String, cause: String, refused: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let explained = try await explain(id, world)
        #expect(explained.state == state, "\(explained.reasons)", sourceLocation: sourceLocation)
        #expect(explained.reasons.contains { $0.contains(cause) }, "no reason says '\(cause)': \(explained.reasons)", sourceLocation: sourceLocation)
        let refusal = await refusal(of: id, world)
        #expect(explained.continuable == (refusal == nil),
                "Explain: continuable \(explained.continuable), \(explained.reasons); Continue: \(refusal ?? "continued")", sourceLocation: sourceLocation)
        #expect(refusal == refused.map { "org.baton.Handoff1.Error." + $0 }, sourceLocation: sourceLocation)
    }

    /// For every way an activity can be or have been, on a clock the test holds: Explain's
    /// state and continuable agree with what Continue then does, and its reasons name the
    /// cause — inside the tombstones' week, and past it while the history keeps the activity.
    @Test func explainAgreesWithContinue() async throws {
        let world = try await BatonWorld.started(["--max-live-activities", "3", "--test-clock"])
        defer { world.close() }
        try await world.register()
        func register(_ app: String, handler: String? = nil) async throws -> String {
            let type = app + ".page"
            _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
                .string(type), .string(app), .stringMap(["title": "Page"].merging(handler.map { ["handler": $0] } ?? [:]) { $1 }),
            ])
            return type
        }
        func advertise(_ type: String, _ title: String, _ options: [String: String] = [:]) async throws -> String {
            try #require(try await world.call(Self.activities, "Advertise", [.string(type), .string(title), .string("{}"), .stringMap(options)])
                .first?.stringValue)
        }
        let quota = try await register("org.example.quota"), gone = try await register("org.example.gone")
        let blocked = try await register("org.example.blocked"), brief = try await register("org.example.brief")
        let waiting = try await register("org.example.absent", handler: "org.example.Absent")

        let live = try await world.advertise("live", options: ["eligible_for_search": "true"])
        let hidden = try await world.advertise("hidden", options: ["eligible_for_handoff": "false"])
        let invalidated = try await world.advertise("invalidated")
        _ = try await world.call(Self.activities, "Invalidate", [.string(invalidated)])
        let unkept = try await world.advertise("not kept", options: ["eligible_for_history": "false"])
        _ = try await world.call(Self.activities, "Invalidate", [.string(unkept)])
        let evicted = try await advertise(quota, "first")
        for index in 1...3 { _ = try await advertise(quota, "next \(index)") }
        let unregistered = try await advertise(gone, "gone")
        _ = try await world.call("org.baton.Handoff1.Registry", "UnregisterActivityType", [.string(gone)])
        let ofBlocked = try await advertise(blocked, "before the block")
        _ = try await world.call("org.baton.Handoff1.Privacy", "BlockApp", [.string("org.example.blocked")])
        let absent = try await advertise(waiting, "for an app not running")
        _ = try await world.call("org.baton.Handoff1.Privacy", "Pause", [.uint64(0)])
        let unrecorded = try await world.advertise("while paused")

        try await expectAgreement(live, world, state: "live", cause: "has no handler")
        // Continued: Explain tells of that continuation, and it can be continued again.
        let continuedInto = try #require(try await explain(live, world).lastContinuation)
        #expect(continuedInto["state"] == .string("ready") && continuedInto["scene"]?.objectPathValue != nil, "\(continuedInto)")
        try await expectAgreement(live, world, state: "live", cause: "has no handler")
        try await expectAgreement(hidden, world, state: "live", cause: "eligible_for_handoff=false", refused: "NotEligible")
        try await expectAgreement(invalidated, world, state: "invalidated", cause: "invalidated by its app (20")
        try await expectAgreement(unkept, world, state: "invalidated", cause: "the history has no copy", refused: "NotFound")
        try await expectAgreement(evicted, world, state: "evicted", cause: "removed to keep org.example.quota under its 3-activity quota")
        try await expectAgreement(unregistered, world, state: "invalidated", cause: "its type \(gone) was unregistered", refused: "NotFound")
        try await expectAgreement(ofBlocked, world, state: "live", cause: "org.example.blocked is blocked")
        try await expectAgreement(unrecorded, world, state: "live", cause: "advertised while recording was paused")
        // Continued once: its continuation waits for the app, and it can be continued again.
        try await expectAgreement(absent, world, state: "live", cause: "eligible_for_search=false")
        #expect(try await explain(absent, world).lastContinuation?["state"] == .string("pending"))
        try await expectAgreement(absent, world, state: "live", cause: "waits for its app to take it")
        _ = try await world.call("org.baton.Handoff1.Privacy", "Resume", [])

        // Expired, hidden at once; purged when its grace is over, then continued from the history.
        let expiring = try await advertise(brief, "brief", ["expires_in": "1"])
        _ = try await world.advanceClock(by: .seconds(1))
        try await expectAgreement(expiring, world, state: "expired", cause: "expired at", refused: "Expired")
        _ = try await world.advanceClock(by: .seconds(2))
        try await expectAgreement(expiring, world, state: "expired", cause: "expired (20")

        // Past the tombstones' week, inside the history's 30 days: the history still knows how each ended.
        _ = try await world.advanceClock(by: .seconds(8 * 86_400))
        try await expectAgreement(live, world, state: "live", cause: "has no handler")
        try await expectAgreement(hidden, world, state: "live", cause: "eligible_for_handoff=false", refused: "NotEligible")
        try await expectAgreement(invalidated, world, state: "history", cause: "invalidated by its app (20")
        try await expectAgreement(invalidated, world, state: "history", cause: "kept in the history: Continue continues from its copy")
        try await expectAgreement(unkept, world, state: "unknown", cause: "the history did not keep it", refused: "NotFound")
        try await expectAgreement(evicted, world, state: "history", cause: "removed to keep org.example.quota under its 3-activity quota")
        try await expectAgreement(unregistered, world, state: "unknown", cause: "no record", refused: "NotFound")
        try await expectAgreement(ofBlocked, world, state: "live", cause: "org.example.blocked is blocked")
        try await expectAgreement(expiring, world, state: "history", cause: "expired (20")
        try await expectAgreement(absent, world, state: "live", cause: "eligible_for_search=false")
        // Advertised while paused, never written: gone with the pause.
        try await expectAgreement(unrecorded, world, state: "unknown", cause: "no record", refused: "NotFound")

        // `baton activities explain` prints the same, and never "continuable no" beside a continuation it can make.
        let printed = try await world.baton(["activities", "explain", invalidated])
        #expect(printed.status == 0 && printed.stdout.contains("history") && printed.stdout.contains("continuable   yes"), "\(printed)")
        #expect(printed.stdout.contains("invalidated by its app"), "\(printed)")
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
