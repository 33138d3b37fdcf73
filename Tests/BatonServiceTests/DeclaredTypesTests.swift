import BatonCore
import DBus
import Foundation
import Testing
import TestSupport

/// Activity types an installed app declares in `$XDG_DATA_HOME/baton/types` are known as soon
/// as batond starts, before the app ever runs; a declaration never takes a type from another
/// app nor undoes the app's own registration, and a bad file is skipped with a warning.
@Suite(.serialized)
struct DeclaredTypesTests {
    static let hawkNotesType = "com.raywenderlich.hawknotes.staterestore.characterDetail"

    /// The repository's own declaration for Hawk Notes (what `scripts/install` installs).
    static var hawkNotesDeclaration: URL {
        Repository.root.appendingPathComponent("share/baton/types/com.raywenderlich.hawknotes.json")
    }

    func declare(_ files: [String: String], in world: BatonWorld) throws {
        let directory = URL(fileURLWithPath: world.bus.dataHome).appendingPathComponent("baton/types")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for (name, contents) in files { try contents.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8) }
    }

    func types(in world: BatonWorld) async throws -> [String: [String: DBusValue]] {
        let records = try #require(try await world.call("org.baton.Handoff1.Registry", "ListActivityTypes").first?.arrayValue)
        var byName: [String: [String: DBusValue]] = [:]
        for record in records {
            let fields = try #require(record.stringKeyedValue).mapValues(\.unwrapped)
            if case .string(let name) = fields["type"] { byName[name] = fields }
        }
        return byName
    }

    @Test func hawkNotesTypeIsKnownBeforeTheAppRuns() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try declare(["com.raywenderlich.hawknotes.json": String(contentsOf: Self.hawkNotesDeclaration, encoding: .utf8)], in: world)
        try await world.startDaemon()
        let type = try #require(try await types(in: world)[Self.hawkNotesType])
        #expect(type["app_id"] == .string("com.raywenderlich.hawknotes"))
        #expect(type["handler"] == .string("com.raywenderlich.hawknotes"))
        // An activity of it can be advertised at once: what failed with UnknownActivityType before.
        let reply = try await world.call("org.baton.Handoff1.Activities", "Advertise", [
            .string(Self.hawkNotesType), .string("Agatha"), .string(#"{"id": "0edb89dd-1bdb-4aad-b0b3-c2e9b397f2d5"}"#), .stringMap([:]),
        ])
        #expect(reply.first?.stringValue?.isEmpty == false)
        #expect(await errorName {
            try await world.call("org.baton.Handoff1.Activities", "Advertise", [
                .string(Self.hawkNotesType), .string("no id"), .string("{}"), .stringMap([:]),
            ])
        } == "org.baton.Handoff1.Error.InvalidPayload")
    }

    @Test func badFilesAreSkippedAndOtherAppsTypesAreNotTaken() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string("com.example.shared.edit"), .string("com.example.owner"), .stringMap(["title": "Owner's"]),
        ])
        _ = try await world.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string("com.example.mine.view"), .string("com.example.mine"), .stringMap(["title": "Registered by the app"]),
        ])
        #expect(await world.stopDaemon() == 0)

        try declare([
            "a-not-json.json": "{ nope",
            "b-bad-type.json": #"{"app_id": "com.example.bad", "types": {"not a type": {}}}"#,
            "c-unknown-option.json": #"{"app_id": "com.example.bad", "types": {"com.example.bad.x": {"colour": "red"}}}"#,
            "d-good.json": #"""
                {"app_id": "com.example.mine", "types": {
                    "com.example.mine.view": {"title": "Declared"},
                    "com.example.mine.edit": {"title": "Editing", "required_keys": "id,rev"},
                    "com.example.shared.edit": {"title": "Taken"}}}
                """#,
            "ignored.txt": "not a declaration",
        ], in: world)
        try await world.startDaemon()
        let types = try await types(in: world)
        #expect(types["com.example.mine.edit"]?["required_keys"] == .array(.string, [.string("id"), .string("rev")]),
                "\(String(describing: types["com.example.mine.edit"]))")
        #expect(types["com.example.mine.view"]?["title"] == .string("Registered by the app"))
        #expect(types["com.example.shared.edit"]?["app_id"] == .string("com.example.owner"))
        #expect(types["com.example.bad.x"] == nil)
        let log = world.daemonLog
        #expect(log.contains("a-not-json.json: it is not JSON"), "\(log)")
        #expect(log.contains("b-bad-type.json") && log.contains("c-unknown-option.json") && log.contains("colour"), "\(log)")
        #expect(log.contains("registered to com.example.owner; left as it is"), "\(log)")
        #expect(!log.contains("ignored.txt"))
    }
}
