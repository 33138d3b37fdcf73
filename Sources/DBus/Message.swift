import CDBus
import Glibc

/// A D-Bus message as plain Swift data: header fields and a decoded body.
///
/// Messages are built and read anywhere; only the bus thread turns them into
/// libdbus messages, after `validate()` has checked everything libdbus would abort on.
public struct Message: Sendable {
    public enum Kind: Sendable, Equatable {
        case methodCall, methodReturn, error, signal
    }

    public var kind: Kind
    public var path: ObjectPath?
    public var interface: String?
    public var member: String?
    public var errorName: String?
    public var destination: String?
    /// The unique name of the sending connection; set by the bus on incoming messages.
    public var sender: String?
    public var serial: UInt32 = 0
    public var replySerial: UInt32?
    /// True when the caller said it does not want a reply.
    public var noReplyExpected = false
    /// Whether the bus may start the destination service to deliver this call.
    public var autoStart = true
    public var body: [DBusValue]
    /// A reply's body written straight into the message after `body`, and the signature
    /// it must end with (see `EncodedBody`).
    var encodedBody: (body: EncodedBody, signature: Signature)?

    public init(kind: Kind, body: [DBusValue] = []) {
        self.kind = kind
        self.body = body
    }

    /// A method call to `destination` (a bus name, or nil on a peer connection).
    public static func methodCall(
        destination: String?, path: ObjectPath, interface: String?, member: String, body: [DBusValue] = []
    ) -> Message {
        var message = Message(kind: .methodCall, body: body)
        message.destination = destination
        message.path = path
        message.interface = interface
        message.member = member
        return message
    }

    /// A broadcast signal from `path`.
    public static func signal(path: ObjectPath, interface: String, member: String, body: [DBusValue] = []) -> Message {
        var message = Message(kind: .signal, body: body)
        message.path = path
        message.interface = interface
        message.member = member
        return message
    }

    /// The successful reply to this method call.
    public func makeReturn(_ body: [DBusValue] = []) -> Message {
        var reply = Message(kind: .methodReturn, body: body)
        reply.destination = sender
        reply.replySerial = serial
        return reply
    }

    /// The error reply to this method call.
    public func makeError(_ error: DBusError) -> Message {
        var reply = Message(kind: .error, body: [.string(error.message)] + error.details)
        reply.errorName = error.name
        reply.destination = sender
        reply.replySerial = serial
        return reply
    }

    /// The signature of the body.
    public var signature: Signature { Signature(body.map(\.type)) }

    /// The error this message carries, if it is an error reply.
    public var error: DBusError? {
        guard kind == .error else { return nil }
        return DBusError(name: errorName ?? DBusError.Name.failed, message: body.first?.stringValue ?? "", details: Array(body.dropFirst()))
    }

    /// Throws `InvalidArgs` when a header field or body value could not be sent.
    public func validate() throws(DBusError) {
        if let interface { try DBusNames.validate(interface, as: .interface) }
        if let member { try DBusNames.validate(member, as: .member) }
        if let errorName { try DBusNames.validate(errorName, as: .errorName) }
        if let destination { try DBusNames.validate(destination, as: .busName) }
        switch kind {
        case .methodCall:
            guard path != nil, member != nil else { throw .invalidArgs("a method call needs a path and a member") }
        case .signal:
            guard path != nil, interface != nil, member != nil else {
                throw .invalidArgs("a signal needs a path, an interface and a member")
            }
        case .error:
            guard errorName != nil, replySerial != nil else { throw .invalidArgs("an error reply needs a name and a reply serial") }
        case .methodReturn:
            guard replySerial != nil else { throw .invalidArgs("a method return needs a reply serial") }
        }
        let types = body.map(\.type)
        let length = types.reduce(0) { $0 + $1.signatureLength }
        guard length <= Signature.maximumLength else {
            throw .invalidArgs("the message body's signature would be \(length) bytes; the limit is \(Signature.maximumLength)")
        }
        for (value, type) in zip(body, types) { try value.check(against: type) }
    }

    /// True when the body's types are exactly `types`, in order.
    func bodyMatches(_ types: [DBusType]) -> Bool { body.matches(types) }
}

// MARK: - libdbus conversion (bus thread only)

extension Message {
    /// Builds a libdbus message (+1 reference). Call `validate()` first.
    func makeRaw() throws(DBusError) -> OpaquePointer {
        let type: Int32 = switch kind {
        case .methodCall: DBUS_MESSAGE_TYPE_METHOD_CALL
        case .methodReturn: DBUS_MESSAGE_TYPE_METHOD_RETURN
        case .error: DBUS_MESSAGE_TYPE_ERROR
        case .signal: DBUS_MESSAGE_TYPE_SIGNAL
        }
        guard let raw = dbus_message_new(type) else {
            throw .init(name: DBusError.Name.noMemory, message: "out of memory while building a message")
        }
        // The body goes in before the header fields. libdbus rewrites the signature
        // field after each top-level argument, and every header field it sets walks
        // the fields already there: with few fields present, those walks are short.
        do throws(DBusError) {
            try Marshal.append(body, to: raw)
            if let encodedBody {
                var writer = BodyWriter(appendingTo: raw)
                try encodedBody.body.write(&writer)
                let written = String(cString: dbus_message_get_signature(raw))
                guard written == encodedBody.signature.text else {
                    throw .failed("the body written has signature '\(written)', declared '\(encodedBody.signature)'")
                }
            }
            var ok = true
            if let path { ok = ok && path.text.withCString { dbus_message_set_path(raw, $0) } != 0 }
            if let interface { ok = ok && interface.withCString { dbus_message_set_interface(raw, $0) } != 0 }
            if let member { ok = ok && member.withCString { dbus_message_set_member(raw, $0) } != 0 }
            if let errorName { ok = ok && errorName.withCString { dbus_message_set_error_name(raw, $0) } != 0 }
            if let destination { ok = ok && destination.withCString { dbus_message_set_destination(raw, $0) } != 0 }
            if let replySerial { ok = ok && dbus_message_set_reply_serial(raw, replySerial) != 0 }
            guard ok else { throw DBusError(name: DBusError.Name.noMemory, message: "out of memory while building a message") }
        } catch {
            dbus_message_unref(raw)
            throw error
        }
        if kind == .methodCall {
            dbus_message_set_no_reply(raw, noReplyExpected ? 1 : 0)
            dbus_message_set_auto_start(raw, autoStart ? 1 : 0)
        } else if kind != .signal {
            dbus_message_set_no_reply(raw, 1)
        }
        return raw
    }

    /// Reads a libdbus message (borrowed) into Swift values. Header strings seen before
    /// are taken from `known`, without a copy.
    init(raw: OpaquePointer, known: inout HeaderStrings) throws(DBusError) {
        let kind: Kind
        switch dbus_message_get_type(raw) {
        case DBUS_MESSAGE_TYPE_METHOD_CALL: kind = .methodCall
        case DBUS_MESSAGE_TYPE_METHOD_RETURN: kind = .methodReturn
        case DBUS_MESSAGE_TYPE_ERROR: kind = .error
        default: kind = .signal
        }
        self.init(kind: kind)
        func text(_ pointer: UnsafePointer<CChar>?) -> String? { pointer.map { known.string($0) } }
        path = text(dbus_message_get_path(raw)).map(ObjectPath.init(unchecked:))
        interface = text(dbus_message_get_interface(raw))
        member = text(dbus_message_get_member(raw))
        errorName = text(dbus_message_get_error_name(raw))
        destination = text(dbus_message_get_destination(raw))
        sender = text(dbus_message_get_sender(raw))
        serial = dbus_message_get_serial(raw)
        let reply = dbus_message_get_reply_serial(raw)
        replySerial = reply == 0 ? nil : reply
        noReplyExpected = dbus_message_get_no_reply(raw) != 0
        autoStart = dbus_message_get_auto_start(raw) != 0
        body = try Marshal.read(from: raw)
    }

    /// The header of a libdbus message whose body could not be read, so that an
    /// error reply can still reach its sender.
    static func headerOnly(raw: OpaquePointer) -> Message {
        var message = Message(kind: dbus_message_get_type(raw) == DBUS_MESSAGE_TYPE_METHOD_CALL ? .methodCall : .signal)
        message.sender = dbus_message_get_sender(raw).map { String(cString: $0) }
        message.serial = dbus_message_get_serial(raw)
        message.noReplyExpected = dbus_message_get_no_reply(raw) != 0
        return message
    }
}

/// The header strings of recent messages (paths, interfaces, members, names), so that
/// a message naming one again shares the stored string: no allocation, no UTF-8 check.
///
/// Most calls name the same few objects and interfaces, in strings longer than the 15
/// bytes Swift stores inline. Reading one afresh cost about 550 instructions, most of a
/// message's header; a hit costs a length comparison per entry and one `memcmp`.
/// Header strings were validated by libdbus, so equal bytes are an equal string.
struct HeaderStrings {
    private var recent: [String] = []
    private var replaced = 0
    private static let capacity = 32

    mutating func string(_ pointer: UnsafePointer<CChar>) -> String {
        let length = strlen(pointer)
        // Short strings are stored inline in the String itself: nothing to share.
        guard length > 15 else { return String(cString: pointer) }
        for candidate in recent where candidate.utf8.count == length {
            let same = candidate.utf8.withContiguousStorageIfAvailable { bytes in
                bytes.baseAddress.map { memcmp($0, pointer, length) == 0 } ?? false
            }
            if same == true { return candidate }
        }
        let made = String(cString: pointer)
        if recent.count < Self.capacity {
            recent.append(made)
        } else {
            recent[replaced] = made
            replaced = (replaced + 1) % Self.capacity
        }
        return made
    }
}

extension Array where Element == DBusValue {
    /// True when these values have exactly `types`, in order.
    func matches(_ types: [DBusType]) -> Bool {
        count == types.count && zip(self, types).allSatisfy { $0.hasType($1) }
    }
}
