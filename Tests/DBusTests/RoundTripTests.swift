import DBus
import Glibc
import Testing
import TestSupport

/// Values sent through a real bus and back: our client, our server, a private dbus-daemon.
@Suite(.serialized)
struct RoundTripTests {
    static let samples: [DBusValue] = [
        .byte(0), .byte(255), .boolean(true), .boolean(false),
        .int16(.min), .int16(.max), .uint16(.max), .int32(.min), .int32(-1), .uint32(.max),
        .int64(.min), .int64(.max), .uint64(.max), .double(-0.5), .double(.greatestFiniteMagnitude),
        .double(.infinity), .string(""), .string("Agatha 🦅 “quoted” \u{FFFF}"), .objectPath("/"),
        .objectPath("/org/baton/Handoff1/scene/a_b"), .signature(""), .signature("a{sa(iv)}"),
        .variant(.variant(.string("nested"))),
        // Every `ay` is read as `.bytes`, in one buffer (sent either way).
        .array(.string, []), .bytes([]), .bytes((0...255).map(UInt8.init)),
        .array(.array(.int32), [.array(.int32, [.int32(1), .int32(2)]), .array(.int32, [])]),
        .dictionary(key: .string, value: .variant, []),
        .record(["id": .string("x"), "n": .uint64(3), "tags": .strings(["a", "b"])]),
        .dictionary(key: .uint32, value: .structure([.string, .double]), [
            .init(.uint32(1), .structure([.string("one"), .double(1)])),
        ]),
        .structure([.int32(1), .structure([.string("deep"), .array(.variant, [.variant(.boolean(true))])])]),
    ]

    @Test func everyTypeRoundTripsInAVariant() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        for value in Self.samples {
            let reply = try await world.client.fixture("Echo", [.variant(value)])
            #expect(reply == [.variant(value)], "round trip of \(value.type.signature)")
        }
    }

    @Test func aFileDescriptorTravelsAsAnOwnedDuplicate() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let sent = FileDescriptor(owning: ends[1])
        let reply = try await world.client.fixture("Echo", [.variant(.unixFD(sent))])
        guard case .variant(.unixFD(let back))? = reply.first else {
            Issue.record("the reply holds \(reply), not a file descriptor")
            return
        }
        // Another descriptor for the same pipe: what is written through it comes out of ours.
        #expect(back.raw != sent.raw)
        #expect(write(back.raw, "hawk", 4) == 4)
        var bytes = [UInt8](repeating: 0, count: 8)
        #expect(read(ends[0], &bytes, 8) == 4 && Array(bytes.prefix(4)) == Array("hawk".utf8))
    }

    @Test func allTypesAsTopLevelArguments() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let arguments: [DBusValue] = [
            .byte(7), .boolean(true), .int16(-2), .uint16(3), .int32(-4), .uint32(5), .int64(-6), .uint64(7),
            .double(8.5), .string("nine"), .objectPath("/ten"), .signature("a{sv}"), .variant(.int32(11)),
            .strings(["twelve"]), .record(["thirteen": .int32(13)]),
            .structure([.int32(14), .string("fifteen"), .boolean(false)]),
            .array(.array(.byte), [.bytes([1]), .bytes([])]),
        ]
        #expect(Signature(arguments.map(\.type)) == Fixture.allTypes)
        #expect(try await world.client.fixture("EchoAll", arguments) == arguments)
        // Bytes sent a DBusValue each arrive in one buffer.
        let perByte: DBusValue = .array(.byte, [.byte(1), .byte(255)])
        #expect(try await world.client.fixture("Echo", [.variant(perByte)]) == [.variant(.bytes([1, 255]))])
    }

    @Test func maximumNestingIsAcceptedAndOneMoreIsRefused() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        // 32 nested arrays is the specification's limit for one signature.
        var deepest = DBusValue.int32(1)
        for _ in 0..<32 { deepest = .array(deepest.type, [deepest]) }
        #expect(try await world.client.fixture("Echo", [.variant(deepest)]) == [.variant(deepest)])

        let tooDeep = DBusValue.array(deepest.type, [deepest])
        await #expect(throws: DBusError.self) { try await world.client.fixture("Echo", [.variant(tooDeep)]) }

        // Variants restart the signature but not the message depth (64 in all).
        var variants = DBusValue.int32(1)
        for _ in 0..<63 { variants = .variant(variants) }
        #expect(try await world.client.fixture("Echo", [variants]) == [variants])
        var tooManyVariants = DBusValue.int32(1)
        for _ in 0..<70 { tooManyVariants = .variant(tooManyVariants) }
        await #expect(throws: DBusError.self) { try await world.client.fixture("Echo", [tooManyVariants]) }

        // The server is still serving after the refusals.
        #expect(try await world.client.fixture("EchoString", [.string("alive")]) == [.string("alive")])
    }

    @Test func invalidValuesAreRefusedBeforeSending() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let invalid: [(String, DBusValue)] = [
            ("NUL in a string", .string("a\u{0}b")),
            ("array element of the wrong type", .array(.string, [.int32(1)])),
            ("dictionary key that is not basic", .dictionary(key: .variant, value: .string, [])),
            ("empty structure", .structure([])),
        ]
        for (what, value) in invalid {
            do {
                _ = try await world.client.fixture("Echo", [.variant(value)])
                Issue.record("\(what) was sent")
            } catch let error as DBusError {
                #expect(error.name == DBusError.Name.invalidArgs, "\(what): \(error)")
            }
        }
        #expect(throws: DBusError.self) { try ObjectPath(validating: "/trailing/") }
        #expect(throws: DBusError.self) { try ObjectPath(validating: "no-slash") }
        #expect(throws: DBusError.self) { try ObjectPath(validating: "/a\u{0}b") }
        await #expect(throws: DBusError.self) {
            try await world.client.call("not a bus name", "/", Fixture.interface, "Echo")
        }
        await #expect(throws: DBusError.self) {
            try await world.client.call(Fixture.busName, Fixture.path, "bad..interface", "Echo")
        }
        #expect(try await world.client.fixture("EchoString", [.string("")]) == [.string("")])
    }

    /// A body written straight into the message reads back as the same values built the usual
    /// way, typed out here in full rather than through the fixture's own field list.
    @Test func encodedRepliesCarryWhatValuesWould() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let records = try await world.client.fixture("Records", [.uint32(3)])
        func expected(_ index: UInt64, done: Bool, tags: [String]) throws -> DBusValue {
            .record([
                "done": .boolean(done), "id": .string("record \(index) “quoted” 🦅"), "n": .uint64(.max - index),
                "path": .objectPath(try ObjectPath(validating: "/org/baton/Test/r\(index)")), "tags": .strings(tags),
            ])
        }
        let tags = ["a", String(repeating: "b", count: 300)]
        let all: [DBusValue] = [try expected(0, done: false, tags: []), try expected(1, done: true, tags: tags),
                                try expected(2, done: false, tags: tags)]
        #expect(records == [.array(.dictionary(key: .string, value: .variant), all)])
        // The same function fills a RecordBuilder: the two paths agree field for field.
        var builder = RecordBuilder()
        Fixture.recordFields(1, to: &builder)
        #expect(records.first?.arrayValue?.dropFirst().first == builder.value)
        #expect(try await world.client.fixture("Records", [.uint32(0)]) == [.array(.dictionary(key: .string, value: .variant), [])])
    }

    /// A NUL in a record half written, or a body of the wrong type, is answered Failed, and the
    /// service goes on answering.
    @Test func anEncodedReplyThatCannotBeSentIsAnsweredFailed() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        for member in ["EncodedNul", "EncodedWrongElement", "EncodedBadReply"] {
            do {
                let reply = try await world.client.fixture(member)
                Issue.record("\(member) was answered \(reply)")
            } catch let error as DBusError {
                #expect(error.name == DBusError.Name.failed, "\(member): \(error)")
            }
        }
        #expect(try await world.client.fixture("Records", [.uint32(1)]).first?.arrayValue?.count == 1)
    }

    @Test func largeStringsRoundTrip() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let large = String(repeating: "hawk ", count: 200_000)  // 1 MB
        #expect(try await world.client.fixture("EchoString", [.string(large)]) == [.string(large)])
    }
}

extension RoundTripTests {
    @Test func codableRecordsCrossTheBus() async throws {
        let world = try await Fixture.start()
        defer { world.stop() }
        let record = RecordCodingTests().agatha
        let reply = try await world.client.fixture("Echo", [.variant(try DBusRecordEncoder().encode(record))])
        let decoded = try DBusRecordDecoder().decode(RecordCodingTests.Character.self, from: try #require(reply.first))
        #expect(decoded == record)
    }
}
