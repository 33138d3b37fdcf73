import BatonCore
import DBus
import Foundation
import Testing
import TestSupport

/// `request_id` makes a write idempotent: a caller whose reply was lost (a timeout, a
/// daemon killed after its commit) asks again and gets the first answer, with nothing
/// written twice, also across a restart of the daemon.
@Suite(.serialized)
struct RequestIDTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let scenes = "org.baton.Handoff1.Scenes"

    func payload(_ world: BatonWorld, _ id: String) async throws -> String? {
        try await world.call(Self.activities, "Get", [.string(id)]).first?.stringKeyedValue?["payload"]?.unwrapped.stringValue
    }

    @Test func everyIdempotentWriteAnswersARepeatWithItsFirstResult() async throws {
        let world = try await BatonWorld.startedInProcess()
        defer { world.close() }
        try await world.register(requiredKeys: "")
        let signals = try await world.client.signals(matching: MatchRule(interface: Self.activities, member: "Advertised"))
        var advertisedSignals = signals.makeAsyncIterator()

        // Advertise: the same id, one activity, one Advertised signal.
        let first = try await world.advertise("Agatha", options: ["request_id": "advertise-1"])
        let again = try await world.advertise("Agatha, sent again", options: ["request_id": "advertise-1"])
        #expect(again == first)
        #expect(try await world.activityCount() == 1)
        #expect(await advertisedSignals.next()?.body.first == .string(first))
        let other = try await world.advertise("Jamie", options: ["request_id": "advertise-2"])
        #expect(await advertisedSignals.next()?.body.first == .string(other), "no Advertised for the repeat came in between")

        // Update: a repeat changes nothing, even after a later update.
        _ = try await world.call(Self.activities, "Update", [.string(first), .string(#"{"n":1}"#), .stringMap(["request_id": "update-1"])])
        _ = try await world.call(Self.activities, "Update", [.string(first), .string(#"{"n":2}"#), .stringMap(["request_id": "update-2"])])
        _ = try await world.call(Self.activities, "Update", [.string(first), .string(#"{"n":1}"#), .stringMap(["request_id": "update-1"])])
        #expect(try await payload(world, first) == #"{"id":"a1","name":"Agatha","n":2}"#)
        // replace_payload: the payload given replaces the stored one instead of being merged into it.
        _ = try await world.call(Self.activities, "Update", [.string(first), .string(#"{"id":"b"}"#), .stringMap(["replace_payload": "true"])])
        #expect(try await payload(world, first) == #"{"id":"b"}"#)

        // OpenScene and Continue: the same scene, one scene each.
        let opened = try await world.call(Self.scenes, "OpenScene", [.string(BatonWorld.app), .stringMap(["request_id": "open-1"])])
        #expect(try await world.call(Self.scenes, "OpenScene", [.string(BatonWorld.app), .stringMap(["request_id": "open-1"])]) == opened)
        let continued = try await world.call(Self.activities, "Continue", [.string(other), .stringMap(["request_id": "continue-1"])])
        #expect(try await world.call(Self.activities, "Continue", [.string(other), .stringMap(["request_id": "continue-1"])]) == continued)
        #expect(try await world.call(Self.scenes, "ListScenes", [.string("")]).first?.arrayValue?.count == 2)

        // A repeat is answered even when what it wrote has gone since.
        _ = try await world.call(Self.activities, "Invalidate", [.string(other)])
        #expect(try await world.call(Self.activities, "Continue", [.string(other), .stringMap(["request_id": "continue-1"])]) == continued)

        // A clear error for an id used with another method, and for ids out of bounds.
        let reused = await errorName { try await world.advertise("x", options: ["request_id": "open-1"]) }
        #expect(reused == "org.baton.Handoff1.Error.InvalidArgument")
        for bad in ["", String(repeating: "r", count: 129)] {
            #expect(await errorName { try await world.advertise("x", options: ["request_id": bad]) } == "org.baton.Handoff1.Error.InvalidArgument")
        }
        #expect(try await world.activityCount() == 1)
    }

    /// The request is committed with the write: after `kill -9` the repeat still finds it.
    @Test func aRequestIsRememberedAcrossARestartAndAnsweredToOtherClients() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register(requiredKeys: "")
        let gdbus = try Executables.require("gdbus", package: "libglib2.0-bin")
        func advertise() async throws -> String {
            let result = try await world.run(gdbus, [
                "call", "--session", "--dest", "org.baton.Handoff1", "--object-path", "/org/baton/Handoff1",
                "--method", "\(Self.activities).Advertise", BatonWorld.type, "Agatha", #"{"id":"a"}"#, "{'request_id': 'retry-me'}",
            ])
            #expect(result.status == 0, "\(result)")
            return result.stdout
        }
        let first = try await advertise()
        await world.stopDaemon(SIGKILL)
        try await world.startDaemon()
        #expect(try await advertise() == first)
        #expect(try await world.activityCount() == 1)
    }
}
