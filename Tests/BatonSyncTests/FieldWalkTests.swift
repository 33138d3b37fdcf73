import BatonContract
import BatonCore
import BatonKit
import DBus
import Foundation
import Testing
import TestSupport

/// Every declared field of an activity (`ActivityField`) walked through every path an activity
/// takes, so that a new field is tested by declaring it: its `example` is advertised, and must
/// come back from Get, List, History, BatonKit, `baton --json` and Python, through Export and
/// Import, and on another machine through sync; BatonKit's and Python's writes must carry it.
/// Three batond daemons on private buses, a real PostgreSQL server.
@Suite(.serialized) struct FieldWalkTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let archive = "org.baton.Handoff1.Archive"
    static let type = "org.baton.walk.page"
    static let app = "org.baton.walk"
    static let declarations = ActivityField.declarations

    @Test func everyDeclaredFieldCrossesEveryPath() async throws {
        // Every field an app gives has an example that is not its default (what would a walk of the default prove?).
        let given = Self.declarations.filter { $0.origin == .argument || $0.origin == .option }
        for declaration in given {
            #expect(declaration.example != nil && declaration.example != declaration.defaultValue, "\(declaration.name) has no example")
        }
        let examples = given.compactMap { declaration in declaration.example.map { (declaration, $0) } }
        var options: [String: String] = [:]
        for (declaration, example) in examples where declaration.origin == .option { options[declaration.name] = declaration.option(example) }
        func example(_ field: ActivityField) -> String? { field.declared.example.flatMap(field.declared.option) }
        let title = try #require(example(.title)), payload = try #require(example(.payload))

        let setup = try await SyncServer.fresh()
        let desktop = try await BatonWorld.started(), laptop = try await BatonWorld.started(), fresh = try await BatonWorld.started()
        defer { desktop.close(); laptop.close(); fresh.close() }
        try await setup.join([desktop, laptop], names: ["desktop", "laptop"])
        let advertised = try await SignalLog(laptop.client, MatchRule(interface: Self.activities, member: "Advertised"))
        let invalidated = try await SignalLog(laptop.client, MatchRule(interface: Self.activities, member: "Invalidated"))
        _ = try await desktop.call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string(Self.type), .string(Self.app), .stringMap(["title": "Walk"]),
        ])

        // Advertised over the bus: every example comes back from Get, as itself.
        let id = try #require(try await desktop.call(Self.activities, "Advertise", [
            .string(Self.type), .string(title), .string(payload), .stringMap(options),
        ]).first?.stringValue)
        let reference = try #require(try await Self.get(id, on: desktop))
        for (declaration, example) in examples {
            #expect(declaration.get(reference) == example, "Get gave \(declaration.name) \(declaration.get(reference)), not \(example)")
        }
        #expect(reference.id == id && reference.type == Self.type && reference.appID == Self.app && reference.createdAt > 0)
        #expect(reference.deviceID.isEmpty && reference.sceneID == nil)

        // List, and BatonKit's reads.
        let listed = try #require(try await desktop.call(Self.activities, "List", [.stringMap([:])]).first?.arrayValue)
        Self.expectSame(listed.compactMap(Records.activity).first { $0.id == id }, reference, "List")
        let client = try BatonClient(.address(desktop.bus.address))
        defer { client.close() }
        Self.expectSame(try await client.activity(id: id), reference, "BatonKit's activity(id:)")
        Self.expectSame(try await client.activities().first { $0.id == id }, reference, "BatonKit's activities()")

        // BatonKit's writes: an activity's options (what UserActivity sends) carry every field.
        let kitID = try await client.advertise(type: Self.type, title: reference.title, payload: reference.payload, options: reference.options)
        let kitCopy = try #require(try await Self.get(kitID, on: desktop))
        Self.expectSameGiven(kitCopy, reference, "BatonKit's advertise")

        // baton --json.
        let shown = try await desktop.baton(["activities", "show", id, "--json"])
        #expect(shown.status == 0, "\(shown)")
        let shownRecord = try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
        Self.expectSame(json: shownRecord, reference, "baton activities show --json")

        // Python: its read, and its write with every option field by name.
        let python = try Executables.require("/usr/bin/python3", package: "python3-gi")
        let optionsJSON = String(decoding: try JSONSerialization.data(withJSONObject: options, options: [.sortedKeys]), as: UTF8.self)
        let script = """
            import baton, json, sys
            client = baton.Client()
            print(json.dumps(client.get(sys.argv[1])))
            print(client.advertise(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), **json.loads(sys.argv[5])))
            """
        let ran = try await desktop.run(python, ["-c", script, id, Self.type, title, payload, optionsJSON], environment: [
            "PYTHONPATH": Repository.root.appendingPathComponent("python").path, "PYTHONDONTWRITEBYTECODE": "1",
        ])
        #expect(ran.status == 0, "\(ran)")
        let lines = ran.stdout.split(separator: "\n").map(String.init)
        try #require(lines.count == 2, "\(ran)")
        let pythonRecord = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        Self.expectSame(json: pythonRecord, reference, "Python's get")
        let pythonCopy = try #require(try await Self.get(lines[1], on: desktop))
        Self.expectSameGiven(pythonCopy, reference, "Python's advertise")

        // Another machine, through sync: every field but the local ones, and the device it came from.
        try await advertised.wait(for: "the activity on the laptop", timeout: .seconds(20)) { $0.body.first?.stringValue == id }
        let remote = try #require(try await Self.get(id, on: laptop))
        Self.expectSame(remote, reference, "the laptop, through sync")
        #expect(try await remote.deviceID == desktop.syncProperty("DeviceId")?.stringValue && !remote.deviceID.isEmpty)

        // History, here and there, once it ends: of one like it that the history keeps (the
        // example of eligible_for_history is false).
        var keptOptions = options
        keptOptions[ActivityField.eligibleForHistory.name] = "true"
        let keptID = try #require(try await desktop.call(Self.activities, "Advertise", [
            .string(Self.type), .string(title), .string(payload), .stringMap(keptOptions),
        ]).first?.stringValue)
        let kept = try #require(try await Self.get(keptID, on: desktop))
        try await advertised.wait(for: "the kept one on the laptop", timeout: .seconds(20)) { $0.body.first?.stringValue == keptID }
        _ = try await desktop.call(Self.activities, "Invalidate", [.string(keptID)])
        try await invalidated.wait(for: "its end on the laptop", timeout: .seconds(20)) { $0.body.first?.stringValue == keptID }
        Self.expectSame(try await Self.past(keptID, on: desktop), kept, "History")
        Self.expectSame(try await Self.past(keptID, on: laptop), kept, "the laptop's History")

        // Export, then Import on a machine of its own: the live one and the past one.
        let document = try #require(try await desktop.call(Self.archive, "Export", [.stringMap([:])]).first?.stringValue)
        let exported = try #require(try JSONSerialization.jsonObject(with: Data(document.utf8)) as? [String: Any])
        let exportedLive = try #require((exported["activities"] as? [[String: Any]])?.first { $0["id"] as? String == id })
        Self.expectSame(json: exportedLive, reference, "Export")
        let exportedPast = try #require((exported["history"] as? [[String: Any]])?.first { $0["id"] as? String == keptID })
        Self.expectSame(json: exportedPast, kept, "Export's history")
        _ = try await fresh.call(Self.archive, "Import", [.string(document), .stringMap([:])])
        Self.expectSame(try await Self.get(id, on: fresh), reference, "Import")
        Self.expectSame(try await Self.past(keptID, on: fresh), kept, "Import's history")
    }

    // MARK: Reading and comparing

    static func get(_ id: String, on world: BatonWorld) async throws -> Activity? {
        try await world.call(activities, "Get", [.string(id)]).first.flatMap(Records.activity)
    }

    static func past(_ id: String, on world: BatonWorld) async throws -> Activity? {
        let records = try await world.call(archive, "History", [.stringMap(["id_prefix": id])]).first?.arrayValue ?? []
        return records.compactMap(Records.pastActivity).first { $0.activity.id == id }?.activity
    }

    /// Every field that leaves the machine is `expected`'s.
    static func expectSame(_ got: Activity?, _ expected: Activity, _ place: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let got else {
            Issue.record("\(place): no activity \(expected.id)", sourceLocation: sourceLocation)
            return
        }
        for declaration in declarations where !declaration.isLocal {
            #expect(declaration.get(got) == declaration.get(expected), "\(place): \(declaration.name)", sourceLocation: sourceLocation)
        }
    }

    /// Every field a caller gives is `expected`'s (a copy advertised anew has its own id and times);
    /// the payload as JSON (Python writes its own spacing).
    static func expectSameGiven(_ got: Activity, _ expected: Activity, _ place: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for declaration in declarations where declaration.origin == .argument || declaration.origin == .option {
            let same = declaration.field == .payload
                ? sameJSON(got.payload, expected.payload) : declaration.get(got) == declaration.get(expected)
            #expect(same, "\(place): \(declaration.name) is \(declaration.get(got))", sourceLocation: sourceLocation)
        }
    }

    /// A JSON rendering of a record (`baton --json`, Python, the export) has every field that
    /// leaves the machine, with `expected`'s value; the payload as text or, from Python, as an object.
    static func expectSame(json record: [String: Any], _ expected: Activity, _ place: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for declaration in declarations where !declaration.isLocal {
            let given = record[declaration.name]
            let same: Bool = switch declaration.get(expected) {
            case .text(let text) where declaration.field == .payload:
                (given as? String).map { sameJSON($0, text) } ?? given.map { sameJSON($0, text) } ?? false
            case .text(let text): given as? String == text
            case .optionalText(let text): given as? String == text
            case .flag(let flag): given as? Bool == flag
            case .list(let items): given as? [String] == items
            case .time(let time): (given as? NSNumber)?.uint64Value == time
            case .optionalTime(let time): (given as? NSNumber)?.uint64Value == time
            }
            #expect(same, "\(place): \(declaration.name) is \(String(describing: given))", sourceLocation: sourceLocation)
        }
    }

    static func sameJSON(_ text: String, _ other: String) -> Bool {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) else { return false }
        return sameJSON(object, other)
    }

    static func sameJSON(_ object: Any, _ text: String) -> Bool {
        guard let parsed = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? NSDictionary else { return false }
        return (object as? NSDictionary)?.isEqual(parsed) ?? false
    }
}
