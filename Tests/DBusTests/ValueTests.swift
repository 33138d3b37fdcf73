import DBus
import Testing

/// Signatures, names and the value model, without a bus.
struct SignatureTests {
    @Test(arguments: ["", "y", "a{sv}", "aa{sa(iv)}", "(ybnqiuxtdsogv)", "a(sa{sv}as)", "ayaay", "h", "a{hs}", "(ha{ss})"])
    func validSignaturesParseAndPrintBack(_ text: String) throws {
        #expect(try Signature(validating: text).text == text)
        #expect(Signature(try Signature(validating: text).types).text == text)
    }

    @Test(arguments: [
        ("a", "ends in the middle"), ("(", "unclosed"), ("()", "empty structure"), ("a{vs}", "key must be a basic"),
        ("a{s}", "'}' is not a type code"), ("{sv}", "not a type code"),
        ("z", "not a type code"), ("a{sv", "exactly a key and a value"), (")", "not a type code"),
    ])
    func invalidSignaturesAreRefusedWithAReason(_ text: String, _ reason: String) {
        do {
            _ = try Signature(validating: text)
            Issue.record("'\(text)' was accepted")
        } catch {
            #expect(error.name == DBusError.Name.invalidSignature)
            #expect(error.message.contains(reason), "\(error.message)")
        }
    }

    @Test func nestingAndLengthLimits() throws {
        #expect(throws: Never.self) { try Signature(validating: String(repeating: "a", count: 32) + "y") }
        #expect(throws: DBusError.self) { try Signature(validating: String(repeating: "a", count: 33) + "y") }
        let structs32 = String(repeating: "(", count: 32) + "y" + String(repeating: ")", count: 32)
        #expect(throws: Never.self) { try Signature(validating: structs32) }
        #expect(throws: DBusError.self) { try Signature(validating: "(" + structs32 + ")") }
        #expect(throws: DBusError.self) { try Signature(validating: String(repeating: "y", count: 256)) }
        #expect(throws: Never.self) { try Signature(validating: String(repeating: "y", count: 255)) }
    }

    @Test func namesAreValidatedBeforeLibdbusSeesThem() {
        #expect(DBusNames.isValid("org.baton.Handoff1", as: .busName))
        #expect(DBusNames.isValid(":1.42", as: .busName))
        #expect(!DBusNames.isValid("org", as: .interface))
        // A NUL cuts the C string libdbus would validate, in a long name and in a short one.
        #expect(!DBusNames.isValid("org.baton.Handoff1\u{0}.x", as: .interface))
        #expect(!DBusNames.isValid("Get\u{0}All", as: .member))
        #expect(!DBusNames.isValid("Has-Dash", as: .member))
        #expect(!DBusNames.isValid("org.baton.Error.😀", as: .errorName))
        #expect(!DBusNames.isValid("//double", as: .objectPath))
        #expect(ObjectPath.escapeElement("") == "_")
        #expect(ObjectPath.escapeElement("a-b") == "a_2db")
        #expect(DBusNames.isValid("/" + ObjectPath.escapeElement("../\u{0}/😀 x"), as: .objectPath))
    }

    @Test func valueTypesAndChecks() throws {
        let record = DBusValue.record(["b": .int32(1), "a": .string("x")])
        #expect(record.type.signature == "a{sv}")
        #expect(record.dictionaryEntries?.map(\.key) == [.string("a"), .string("b")])
        #expect(record.stringKeyedValue?["b"] == .variant(.int32(1)))
        // Fields listed in key order are kept; any other order is sorted.
        let keys = { (value: DBusValue) in value.dictionaryEntries?.compactMap(\.key.stringValue) }
        #expect(keys(.record([(key: "a", value: .int32(1)), (key: "b", value: .int32(2)), (key: "c", value: .int32(3))])) == ["a", "b", "c"])
        #expect(keys(.record([(key: "a", value: .int32(1)), (key: "c", value: .int32(3)), (key: "b", value: .int32(2))])) == ["a", "b", "c"])
        #expect(DBusValue.variant(.variant(.uint32(3))).unwrapped == .uint32(3))
        #expect(throws: DBusError.self) { try DBusValue.string("x").check(against: .int32) }
        #expect(throws: DBusError.self) { try DBusValue.array(.int32, [.uint32(1)]).check(against: .array(.int32)) }
    }
}

/// The Codable bridge between Swift records and `a{sv}`.
struct RecordCodingTests {
    struct Character: Codable, Equatable {
        var id: String
        var name: String
        var book: Int
        var tags: [String]
        var rating: Double?
        var scene: ObjectPath?
        var nested: Nested
    }

    struct Nested: Codable, Equatable {
        var flags: [Bool]
        var counts: [String: UInt32]
    }

    let agatha = Character(
        id: "8c1b0e7e-7f5e-4bb6-a3a2-1b1c0c1d2e3f", name: "Agatha", book: 1, tags: ["witch", "mentor"],
        rating: nil, scene: "/org/baton/Handoff1/scene/x",
        nested: Nested(flags: [true, false], counts: ["notes": 3]))

    @Test func recordsRoundTrip() throws {
        let encoded = try DBusRecordEncoder().encode(agatha)
        #expect(encoded.type.signature == "a{sv}")
        let fields = try #require(encoded.stringKeyedValue)
        #expect(fields["name"] == .variant(.string("Agatha")))
        #expect(fields["book"] == .variant(.int64(1)))
        #expect(fields["tags"] == .variant(.strings(["witch", "mentor"])))
        #expect(fields["rating"] == nil, "nil optionals are left out")
        #expect(try DBusRecordDecoder().decode(Character.self, from: encoded) == agatha)
    }

    @Test func decodingIsLenientOnlyWhereNothingIsLost() throws {
        // Written by hand as a shell user would send it: int32 for the book, no optionals.
        let handMade = DBusValue.record([
            "id": .string("x"), "name": .string("Jamie"), "book": .int32(2), "tags": .array(.variant, []),
            "nested": .record(["flags": .array(.boolean, []), "counts": .dictionary(key: .string, value: .uint32, [])]),
        ])
        let jamie = try DBusRecordDecoder().decode(Character.self, from: handMade)
        #expect(jamie.name == "Jamie" && jamie.book == 2 && jamie.tags.isEmpty && jamie.rating == nil)

        let negative = DBusValue.record(["value": .int64(-1)])
        struct Unsigned: Decodable { var value: UInt32 }
        #expect(throws: DecodingError.self) { try DBusRecordDecoder().decode(Unsigned.self, from: negative) }

        struct Named: Decodable { var name: String }
        do {
            _ = try DBusRecordDecoder().decode(Named.self, from: .record(["name": .int32(1)]))
            Issue.record("an int decoded as a string")
        } catch DecodingError.typeMismatch(_, let context) {
            #expect(context.codingPath.map(\.stringValue) == ["name"])
            #expect(context.debugDescription.contains("'i'"))
        }
        #expect(throws: DecodingError.self) { try DBusRecordDecoder().decode(Named.self, from: .record([:])) }
    }
}
