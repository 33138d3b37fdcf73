import DBus
import Glibc
import Synchronization
import TestSupport

/// A service exported by the tests on a private bus, with one member for each
/// feature of the layer.
enum Fixture {
    static let busName = "org.baton.Test"
    static let path: ObjectPath = "/org/baton/Test"
    static let interface = "org.baton.Test1"

    /// Every basic type once, then the common containers.
    static let allTypes: Signature = "ybnqiuxtdsogvasa{sv}(isb)aay"

    /// State the fixture's handlers share with the test.
    final class State: Sendable {
        let count = Mutex<UInt32>(7)
        let notified = Mutex<[String]>([])
        /// Resumed by `Release`; `Hold` waits on it.
        let held = Mutex<[CheckedContinuation<Void, Never>]>([])
        /// Notes `Gather` took since its last flush.
        let gathering = Mutex<[String]>([])
        /// True while `Block` holds the server's bus thread.
        let blocked = Atomic<Bool>(false)
        /// `Block` reads one byte from `gate.read`; the test writes it to `gate.write`.
        let gate: (read: Int32, write: Int32)

        init() {
            var fds: [Int32] = [-1, -1]
            precondition(pipe(&fds) == 0, "pipe failed: errno \(errno)")
            gate = (fds[0], fds[1])
        }

        deinit {
            close(gate.read)
            close(gate.write)
        }
    }

    static func interface(_ state: State) -> Interface {
        Interface(
            interface,
            methods: [
                Method("Echo", in: [Argument("value", "v")], out: [Argument("value", "v")]) { call in
                    call.arguments
                },
                Method("EchoString", in: [Argument("text", "s")], out: [Argument("text", "s")]) { call in
                    call.arguments
                },
                Method("EchoAll", in: allTypes.types.enumerated().map { Argument("a\($0.offset)", Signature([$0.element])) },
                       out: allTypes.types.enumerated().map { Argument("a\($0.offset)", Signature([$0.element])) }) { call in
                    call.arguments
                },
                Method("Add", in: [Argument("a", "i"), Argument("b", "i")], out: [Argument("sum", "x")]) { call in
                    [.int64(Int64(try call.argument(0, as: Int32.self)) + Int64(try call.argument(1, as: Int32.self)))]
                },
                Method("Fail", in: [Argument("name", "s"), Argument("message", "s")]) { call in
                    throw DBusError(name: try call.argument(0), message: try call.argument(1))
                },
                Method("Crash") { _ in
                    throw TestSupportError("secret internal detail")
                },
                Method("BadReply", out: [Argument("text", "s")]) { _ in
                    [.uint32(1)]
                },
                Method("NulReply", out: [Argument("text", "s")]) { _ in
                    [.string("cut\u{0}here")]
                },
                Method("Notify", in: [Argument("note", "s")]) { call in
                    let note: String = try call.argument(0)
                    state.notified.withLock { $0.append(note) }
                    return []
                },
                Method("Ping", in: [Argument("text", "s")]) { call in
                    try call.connection.emit(path: call.path, interface: interface, member: "Pinged", [call.arguments[0]])
                    return []
                },
                Method("Hold", out: [Argument("released", "b")], ordering: .concurrent) { _ in
                    await withCheckedContinuation { continuation in
                        state.held.withLock { $0.append(continuation) }
                    }
                    return [.boolean(true)]
                },
                // Calls another service (here: Hold on this same name, through the bus) and
                // answers with its reply: the shape of the daemon's Continue.
                Method("Relay", out: [Argument("released", "b")], ordering: .concurrent) { call in
                    try await call.connection.call(busName, path, interface, "Hold")
                },
                Method("Release", out: [Argument("count", "u")]) { _ in
                    let waiting = state.held.withLock { held in
                        defer { held.removeAll() }
                        return held
                    }
                    for continuation in waiting { continuation.resume() }
                    return [.uint32(UInt32(waiting.count))]
                },
                // Holds the server's bus thread itself, not only this call, until the test
                // writes a byte to the gate: calls sent meanwhile wait unread in the socket.
                Method("Block") { _ in
                    state.blocked.store(true, ordering: .releasing)
                    var byte: UInt8 = 0
                    _ = read(state.gate.read, &byte, 1)
                    state.blocked.store(false, ordering: .releasing)
                    return []
                },
                // Takes a note; the first of a burst schedules the flush, after dispatch,
                // which announces every note taken by then as one batch.
                Method("Gather", in: [Argument("note", "s")]) { call in
                    let note: String = try call.argument(0)
                    let first = state.gathering.withLock { notes in
                        notes.append(note)
                        return notes.count == 1
                    }
                    guard first else { return [] }
                    let connection = call.connection
                    connection.afterDispatch {
                        let batch = state.gathering.withLock { notes in
                            let batch = notes
                            notes = []
                            return batch
                        }
                        try? connection.emit(path: path, interface: interface, member: "Gathered", [.strings(batch)])
                    }
                    return []
                },
                Method("HeldCount", out: [Argument("count", "u")]) { _ in
                    [.uint32(UInt32(state.held.withLock { $0.count }))]
                },
                // Replies written straight into the message (EncodedBody).
                Method.encoded("Records", in: [Argument("count", "u")], out: [Argument("records", "aa{sv}")]) { call in
                    let count: UInt32 = try call.argument(0)
                    return EncodedBody { body throws(DBusError) in
                        try body.array(of: .dictionary(key: .string, value: .variant)) { records throws(DBusError) in
                            for index in 0..<count {
                                try records.record { record throws(DBusError) in try recordFields(index, to: &record) }
                            }
                        }
                    }
                },
                Method.encoded("EncodedNul", out: [Argument("records", "aa{sv}")]) { _ in
                    EncodedBody { body throws(DBusError) in
                        try body.array(of: .dictionary(key: .string, value: .variant)) { records throws(DBusError) in
                            try records.record { record throws(DBusError) in try recordFields(0, to: &record) }
                            try records.record { record throws(DBusError) in
                                try record.field("a", string: "fine")
                                try record.field("b", string: "cut\u{0}here")
                            }
                        }
                    }
                },
                // libdbus aborts on an array element of the wrong type: the writer must refuse it first.
                Method.encoded("EncodedWrongElement", out: [Argument("texts", "as")]) { _ in
                    EncodedBody { body throws(DBusError) in
                        try body.array(of: .string) { texts throws(DBusError) in
                            try texts.string("fine")
                            try texts.uint64(1)
                        }
                    }
                },
                Method.encoded("EncodedBadReply", out: [Argument("text", "s")]) { _ in
                    EncodedBody { body throws(DBusError) in try body.uint64(1) }
                },
                Method("CallerUser", out: [Argument("uid", "u")]) { call in
                    [.uint32(try await call.connection.caller(of: call.sender ?? "").user)]
                },
            ],
            properties: [
                Property("Count", "u", get: { _ in .uint32(state.count.withLock { $0 }) }, set: { _, value in
                    guard case .uint32(let count) = value else { return }
                    state.count.withLock { $0 = count }
                }),
                Property("Name", "s", changeSignal: .const, get: { _ in .string("fixture") }),
            ],
            signals: [Signal("Pinged", [Argument("text", "s")]), Signal("Gathered", [Argument("notes", "as")])]
        )
    }

    /// The fields of the `index`th record that `Records` writes: one of each kind a record takes.
    static func recordFields<Fields: RecordFields & ~Copyable>(_ index: UInt32, to record: inout Fields) throws(Fields.Failure) {
        try record.field("done", boolean: index % 2 == 1)
        try record.field("id", string: "record \(index) “quoted” 🦅")
        try record.field("n", uint64: UInt64.max - UInt64(index))
        try record.field("path", objectPath: (try? ObjectPath(validating: "/org/baton/Test/r\(index)")) ?? .root)
        try record.field("tags", strings: index == 0 ? [] : ["a", String(repeating: "b", count: 300)])
    }

    /// A bus, a server connection that owns `busName` with the fixture exported, and a client connection.
    struct World: Sendable {
        let bus: PrivateBus
        let server: Connection
        let client: Connection
        let state: State

        func stop() {
            client.close()
            server.close()
            bus.stop()
        }
    }

    static func start() async throws -> World {
        let bus = try PrivateBus()
        let server = try bus.connect()
        let state = State()
        try await server.export(path, [interface(state)])
        try await server.requestName(busName)
        return World(bus: bus, server: server, client: try bus.connect(), state: state)
    }
}

extension Connection {
    /// Calls a fixture method.
    func fixture(_ member: String, _ arguments: [DBusValue] = [], timeout: Duration = .seconds(10)) async throws -> [DBusValue] {
        try await call(Fixture.busName, Fixture.path, Fixture.interface, member, arguments, timeout: timeout)
    }
}
