import DBus
import Testing
import TestSupport

/// `Explain` of what another machine advertised, and of what another machine ended, agrees
/// with what `Continue` then does, and says where an activity can be continued when it cannot
/// be here: two daemons on clocks the test holds, syncing through folders.
@Suite(.serialized) struct ExplainAcrossMachinesTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let shared = "org.example.notes.page", desktopOnly = "org.example.drawing.canvas"

    func explain(_ id: String, on world: BatonWorld) async throws -> (state: String, continuable: Bool, reasons: [String]) {
        let fields = try #require(try await world.call(Self.activities, "Explain", [.string(id)]).first?.stringKeyedValue).mapValues(\.unwrapped)
        return (fields["state"]?.stringValue ?? "?", fields["continuable"]?.boolValue ?? false,
                fields["reasons"].flatMap([String].init(dbusValue:)) ?? [])
    }

    /// Continue without options: nil when it continued, else the error.
    func refusal(of id: String, on world: BatonWorld, options: [String: String] = [:]) async -> DBusError? {
        do {
            _ = try await world.call(Self.activities, "Continue", [.string(id), .stringMap(options)])
            return nil
        } catch {
            return error as? DBusError ?? DBusError(name: "?", message: "\(error)")
        }
    }

    @Test func anotherMachinesActivitiesAreExplainedAsContinueTreatsThem() async throws {
        let desktop = try await BatonWorld.started(["--test-clock"]), laptop = try await BatonWorld.started(["--test-clock"])
        defer { desktop.close(); laptop.close() }
        let (place, _) = try await MachinesMeet.folder.join([desktop, laptop], names: ["desktop", "laptop"])
        defer { place.close() }
        for (world, type, app) in [(desktop, Self.shared, "org.example.notes"), (laptop, Self.shared, "org.example.notes"),
                                   (desktop, Self.desktopOnly, "org.example.drawing")] {
            _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [.string(type), .string(app), .stringMap(["title": "T"])])
        }
        func advertise(_ type: String, _ title: String) async throws -> String {
            try #require(try await desktop.call(Self.activities, "Advertise", [.string(type), .string(title), .string("{}"), .stringMap([:])])
                .first?.stringValue)
        }
        let note = try await advertise(Self.shared, "Shopping list"), canvas = try await advertise(Self.desktopOnly, "Sketch")
        let asked = try await advertise(Self.shared, "Ended from the laptop")
        try await eventually("the laptop has the desktop's three, and knows its types", timeout: .seconds(20)) {
            // Refused until the laptop has read the desktop's name.
            (try? await laptop.call(Self.activities, "List", [.stringMap(["device": "desktop"])]))?.first?.arrayValue?.count == 3
        }

        // Of a type registered here too: continued here.
        var explained = try await explain(note, on: laptop)
        #expect(explained.state == "live" && explained.continuable, "\(explained)")
        #expect(await refusal(of: note, on: laptop) == nil)

        // Of a type only the desktop has: not here, and the reason says where.
        explained = try await explain(canvas, on: laptop)
        #expect(explained.state == "live" && !explained.continuable, "\(explained)")
        #expect(explained.reasons.contains { $0.contains("no app on this machine registered \(Self.desktopOnly)") && $0.contains("continued on desktop") },
                "\(explained.reasons)")
        #expect(!explained.reasons.contains { $0.contains("no longer registered") }, "it never was registered here: \(explained.reasons)")
        let refused = await refusal(of: canvas, on: laptop)
        #expect(refused?.name == "org.baton.Handoff1.Error.UnknownActivityType" && refused?.message.contains("continued on desktop") == true,
                "\(String(describing: refused))")
        #expect(await refusal(of: canvas, on: laptop, options: ["device": "desktop"]) == nil, "continued on its own machine")

        // The desktop's activity, ended at the laptop's request: explained on the desktop by the
        // laptop's name, continued there from the history, inside the tombstones' week and past it.
        _ = try await laptop.call(Self.activities, "Invalidate", [.string(asked)])
        try await eventually("the laptop's request ended it on the desktop", timeout: .seconds(20)) {
            try await explain(asked, on: desktop).state == "invalidated"
        }
        explained = try await explain(asked, on: desktop)
        #expect(explained.continuable && explained.reasons.first?.hasPrefix("invalidated on device laptop (20") == true, "\(explained)")
        #expect(await refusal(of: asked, on: desktop) == nil)
        _ = try await desktop.call("org.baton.Handoff1.Testing", "AdvanceClock", [.uint64(8 * 86_400 * 1_000_000)])
        explained = try await explain(asked, on: desktop)
        #expect(explained.state == "history" && explained.continuable, "\(explained)")
        #expect(explained.reasons.first?.hasPrefix("invalidated on device laptop (20") == true, "\(explained.reasons)")
        #expect(await refusal(of: asked, on: desktop) == nil)

        // Past the week on the laptop too: another machine's live activities are explained as before.
        _ = try await laptop.call("org.baton.Handoff1.Testing", "AdvanceClock", [.uint64(8 * 86_400 * 1_000_000)])
        explained = try await explain(note, on: laptop)
        #expect(explained.state == "live" && explained.continuable, "\(explained)")
        #expect(await refusal(of: note, on: laptop) == nil)
        explained = try await explain(canvas, on: laptop)
        #expect(explained.state == "live" && !explained.continuable, "\(explained)")
        #expect(explained.reasons.contains { $0.contains("continued on desktop") }, "\(explained.reasons)")
        #expect(await refusal(of: canvas, on: laptop)?.name == "org.baton.Handoff1.Error.UnknownActivityType")
    }
}
