import BatonContract
import BatonCore
import CDBus
@testable import DBus
import Testing

/// The contract's error names, both ways, for every code.
struct ContractErrorNameTests {
    @Test func everyCodeHasItsNameAndBack() {
        for code in BatonError.Code.allCases {
            let error = BatonError(code, "message")
            #expect(error.dbusName == "org.baton.Handoff1.Error." + code.rawValue)
            #expect(BatonError(dbusName: error.dbusName, message: "message") == error)
        }
        #expect(BatonError(dbusName: "org.freedesktop.DBus.Error.Failed", message: "") == nil)
        #expect(BatonError(dbusName: "org.baton.Handoff1.Error.NoSuchCode", message: "") == nil)
    }
}

struct SceneAddressTests {
    @Test func pathsAndIdsMapBothWays() throws {
        let id = "3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c01"
        let path = SceneAddress.path(forID: id)
        #expect(path == "/org/baton/Handoff1/scene/3c9ad3b5_2f1f_4b0e_9a51_3f1d2a6b8c01")
        #expect(try SceneAddress.id(from: path) == id)
        #expect(try SceneAddress.id(from: id.uppercased()) == id)
        for bad in ["/org/baton/Handoff1/other/\(id)", "/org/baton/Handoff1/scene/x", "/org/baton/Handoff1/scene/../x", "x", ""] {
            #expect(throws: BatonError.self) { try SceneAddress.id(from: bad) }
        }
    }
}

/// Records written by the daemon's encoder read back the same by the clients' decoder, on the wire.
struct RecordTests {
    static let full = Activity(
        id: "0190d7a0-7b1c-7c3e-9a51-3f1d2a6b8c01", type: "com.example.notes.note", appID: "com.example.notes",
        title: "Agatha", payload: #"{"id":7}"#, payloadType: "Character", targetContentID: "b|1::c|7", persistentID: "p-7",
        keywords: ["witch", "mentor"], webpageURL: "https://example.com/7", eligibleForHandoff: false, eligibleForSearch: true,
        sceneID: "3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c01", createdAt: 1_700_000_000_000_000, updatedAt: 1_700_000_000_500_000,
        expiresAt: 1_700_000_060_000_000)

    /// The value after a trip through a libdbus message: marshalled, then read back.
    static func throughAMessage(_ value: DBusValue) throws -> DBusValue {
        try #require(try Self.message { message throws(DBus.DBusError) in try Marshal.append([value], to: message) }.first)
    }

    /// The values of a libdbus message that `fill` wrote.
    static func message(_ fill: (OpaquePointer) throws(DBus.DBusError) -> Void) throws -> [DBusValue] {
        let message = try #require(dbus_message_new_signal("/x", "x.y", "Z"))
        defer { dbus_message_unref(message) }
        try fill(message)
        return try Marshal.read(from: message)
    }

    @Test func anActivityComesBackWhole() throws {
        let minimal = Activity(id: "0190d7a0-7b1c-7c3e-9a51-3f1d2a6b8c02", type: "t.t", appID: "a.a", title: "", payload: "{}",
                               createdAt: 1, updatedAt: 2)
        for activity in [Self.full, minimal] {
            #expect(Records.activity(try Self.throughAMessage(Records.record(activity))) == activity)
        }
    }

    @Test func theEncodedReplyIsTheSameRecord() throws {
        let body = Records.encodedRecords([Self.full, Self.full])
        let values = try Self.message { message throws(DBus.DBusError) in
            var writer = BodyWriter(appendingTo: message)
            try body.write(&writer)
        }
        let records = try #require(values.first?.arrayValue)
        #expect(records.map(Records.activity) == [Self.full, Self.full])
    }

    @Test func aTypeComesBackWhole() throws {
        let types = [
            ActivityType(type: "t.t", appID: "a.a"),
            ActivityType(type: "t.t", appID: "a.a", title: "Note", handler: "com.example.Notes", handlerPath: "/handler",
                         requiredKeys: ["id", "book"], payloadType: "Character"),
        ]
        for type in types {
            #expect(Records.activityType(try Self.throughAMessage(Records.record(type))) == type)
        }
    }

    @Test func recordsWithoutTheirKeysAreNotActivities() {
        #expect(Records.activity(.record(["id": .string("x")])) == nil)
        #expect(Records.activity(.string("x")) == nil)
        #expect(Records.activityType(.record(["type": .string("t.t")])) == nil)
    }

    @Test func storageValuesComeBackAsTheyWent() throws {
        let values: [StorageValue] = [.bool(true), .int(-7), .double(2.5), .string("Agatha"), .bytes([0, 255])]
        for value in values {
            let wire = try Self.throughAMessage(.variant(Records.value(value)))
            #expect(try Records.storageValue(wire, key: "k") == value)
        }
        #expect(try Records.storageValue(.int32(7), key: "k") == .int(7), "narrower integers widen")
        #expect(throws: BatonError.self) { try Records.storageValue(.uint64(.max), key: "k") }
        #expect(throws: BatonError.self) { try Records.storageValue(.strings(["a"]), key: "k") }
    }

    @Test func restoredScenesAndExplanationsComeBackWhole() throws {
        let scenes = [
            Scene(id: "3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c01", appID: "a.a", createdAt: 1, lastActiveAt: 1, restoreReason: .recover),
            Scene(id: "3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c02", appID: "a.a", createdAt: 2, lastActiveAt: 2),
        ]
        let restored = Records.restored(try Self.throughAMessage(Records.restored(scenes)))
        #expect(restored.map(\.scene.text) == scenes.map { SceneAddress.path(forID: $0.id) })
        #expect(restored.map(\.reason) == [.recover, .launch])

        let full = Records.Explanation(
            id: Self.full.id, state: "live", continuable: true, searchable: false, reasons: ["advertised with eligible_for_search=false"],
            lastContinuation: .init(scene: "3c9ad3b5-2f1f-4b0e-9a51-3f1d2a6b8c01", state: "refused", error: "no such note", at: 7))
        let bare = Records.Explanation(id: Self.full.id, state: "unknown", continuable: false, searchable: false, reasons: [])
        for explanation in [full, bare] {
            #expect(Records.Explanation(record: try Self.throughAMessage(explanation.record)) == explanation)
        }
        #expect(Records.Explanation(record: .record(["id": .string("x")])) == nil)
    }
}
