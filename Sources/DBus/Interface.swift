/// A D-Bus interface declared once in Swift: its methods, properties and signals.
///
/// Dispatch, signature checks, `Introspect` XML, `org.freedesktop.DBus.Properties`
/// and `ObjectManager` all derive from this one declaration, as sd-bus does
/// with its vtables.
public struct Interface: Sendable {
    public let name: String
    public var methods: [Method]
    public var properties: [Property]
    public var signals: [Signal]
    /// Reads every property of an object at once, for `GetAll` and `ObjectManager`, when
    /// that is cheaper than one getter per property (one database row instead of seven).
    /// It must return a value of the declared type for each property.
    public var readAll: ReadAll?

    public typealias ReadAll = @Sendable (ObjectPath) async throws -> [String: DBusValue]

    /// Declares an interface; an invalid interface or member name is a programming error.
    public init(
        _ name: String, methods: [Method] = [], properties: [Property] = [], signals: [Signal] = [], readAll: ReadAll? = nil
    ) {
        precondition(DBusNames.isValid(name, as: .interface), "invalid interface name '\(name)'")
        for member in methods.map(\.name) + properties.map(\.name) + signals.map(\.name) {
            precondition(DBusNames.isValid(member, as: .member), "invalid member name '\(member)' in \(name)")
        }
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
        self.readAll = readAll
    }

    func method(named member: String) -> Method? { methods.first { $0.name == member } }
    public func property(named member: String) -> Property? { properties.first { $0.name == member } }
}

/// A named argument of a method or signal.
public struct Argument: Sendable, Equatable {
    public let name: String
    public let type: DBusType

    /// `signature` must hold exactly one complete type; anything else is a programming error.
    public init(_ name: String, _ signature: Signature) {
        precondition(signature.types.count == 1, "argument '\(name)' needs one complete type, got '\(signature)'")
        self.name = name
        self.type = signature.types[0]
    }
}

/// What a method handler receives: the call, where it arrived, and the connection to answer on.
public struct MethodCall: Sendable {
    /// The whole incoming message.
    public let message: Message
    /// The connection the call arrived on, for calling other services or emitting signals.
    public let connection: Connection

    /// The body arguments; their types already match the method's declared signature.
    public var arguments: [DBusValue] { message.body }
    /// The object path the call was addressed to.
    public var path: ObjectPath { message.path ?? .root }
    /// The unique bus name of the caller.
    public var sender: String? { message.sender }
    /// Who is calling, on a connection with an access check (`Connection.setAccessCheck`);
    /// nil without one, or for a call without a sender (a peer connection).
    public internal(set) var caller: Caller?

    /// The argument at `index` as a Swift value, or `InvalidArgs` naming what was wrong.
    public func argument<T: DBusArgument>(_ index: Int, as type: T.Type = T.self) throws(DBusError) -> T {
        guard arguments.indices.contains(index) else {
            throw .invalidArgs("argument \(index) is missing")
        }
        guard let value = T(dbusValue: arguments[index]) else {
            throw .invalidArgs("argument \(index) has type '\(arguments[index].type.signature)', not \(T.self)")
        }
        return value
    }
}

/// A method: its arguments, its handler, and how its calls are ordered.
public struct Method: Sendable {
    public typealias Handler = @Sendable (MethodCall) async throws -> [DBusValue]
    /// A handler whose reply writes itself (see `EncodedBody`).
    public typealias EncodingHandler = @Sendable (MethodCall) async throws -> EncodedBody

    enum Responder: Sendable {
        case values(Handler)
        case encoded(EncodingHandler)
    }

    /// How calls to a method are scheduled relative to other incoming calls.
    public enum Ordering: Sendable {
        /// The handler runs to completion before the next incoming call starts:
        /// calls are answered in the order they arrived. The default.
        case inOrder
        /// The handler starts in arrival order, but later calls are served while it
        /// awaits (another service's reply, say). For methods that wait on others.
        case concurrent
    }

    public let name: String
    public let inputs: [Argument]
    public let outputs: [Argument]
    public let ordering: Ordering
    let responder: Responder
    let inputSignature: Signature
    let outputSignature: Signature

    public init(
        _ name: String,
        in inputs: [Argument] = [], out outputs: [Argument] = [],
        ordering: Ordering = .inOrder,
        handler: @escaping Handler
    ) {
        self.init(name, in: inputs, out: outputs, ordering: ordering, responder: .values(handler))
    }

    /// A method whose handler returns a body that writes itself, for large replies on hot
    /// paths; the body must have the signature of `outputs`. (A factory, not an `init`, so
    /// that a handler closure that only throws is not ambiguous.)
    public static func encoded(
        _ name: String,
        in inputs: [Argument] = [], out outputs: [Argument] = [],
        ordering: Ordering = .inOrder,
        handler: @escaping EncodingHandler
    ) -> Method {
        Method(name, in: inputs, out: outputs, ordering: ordering, responder: .encoded(handler))
    }

    private init(_ name: String, in inputs: [Argument], out outputs: [Argument], ordering: Ordering, responder: Responder) {
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.ordering = ordering
        self.responder = responder
        self.inputSignature = Signature(inputs.map(\.type))
        self.outputSignature = Signature(outputs.map(\.type))
        precondition(inputSignature.text.utf8.count <= Signature.maximumLength
            && outputSignature.text.utf8.count <= Signature.maximumLength, "method \(name) has a signature over 255 bytes")
    }
}

/// A property: its type, who may write it, and how changes are announced.
public struct Property: Sendable {
    public typealias Getter = @Sendable (ObjectPath) async throws -> DBusValue
    public typealias Setter = @Sendable (ObjectPath, DBusValue) async throws -> Void

    /// `org.freedesktop.DBus.Property.EmitsChangedSignal`, from the specification.
    public enum ChangeSignal: String, Sendable {
        /// `PropertiesChanged` carries the new value.
        case emits = "true"
        /// `PropertiesChanged` names the property without its value.
        case invalidates
        /// The value never changes for the object's lifetime.
        case const
        /// Changes are not announced.
        case none = "false"
    }

    public let name: String
    public let type: DBusType
    public let changeSignal: ChangeSignal
    public let getter: Getter
    public let setter: Setter?

    /// A read-only property, or read-write when `set` is given.
    public init(
        _ name: String, _ signature: Signature, changeSignal: ChangeSignal = .emits,
        get: @escaping Getter, set: Setter? = nil
    ) {
        precondition(signature.types.count == 1, "property '\(name)' needs one complete type")
        self.name = name
        self.type = signature.types[0]
        self.changeSignal = changeSignal
        self.getter = get
        self.setter = set
    }

    var access: String { setter == nil ? "read" : "readwrite" }

    /// The value at `path`, read through the getter; an internal error when it is not of the
    /// declared type (a bug, never sent as a value of the wrong type).
    public func value(at path: ObjectPath) async throws -> DBusValue {
        let value = try await getter(path)
        guard value.type == type else {
            throw InternalError("property \(name) at \(path) returned '\(value.type.signature)', declared '\(type.signature)'")
        }
        return value
    }
}

/// A signal an interface may emit.
public struct Signal: Sendable {
    public let name: String
    public let arguments: [Argument]

    public init(_ name: String, _ arguments: [Argument] = []) {
        self.name = name
        self.arguments = arguments
    }
}

/// A Swift type that a D-Bus value converts to, for typed argument access.
public protocol DBusArgument {
    /// The Swift value, or nil when `dbusValue` has another type.
    init?(dbusValue: DBusValue)
}

extension String: DBusArgument {
    public init?(dbusValue: DBusValue) {
        guard case .string(let v) = dbusValue else { return nil }
        self = v
    }
}
extension Bool: DBusArgument {
    public init?(dbusValue: DBusValue) { guard let v = dbusValue.boolValue else { return nil }; self = v }
}
extension UInt8: DBusArgument {
    public init?(dbusValue: DBusValue) { guard let v = dbusValue.byteValue else { return nil }; self = v }
}
extension Int16: DBusArgument {
    public init?(dbusValue: DBusValue) { guard let v = dbusValue.int16Value else { return nil }; self = v }
}
extension UInt16: DBusArgument {
    public init?(dbusValue: DBusValue) { guard let v = dbusValue.uint16Value else { return nil }; self = v }
}
extension Int32: DBusArgument {
    public init?(dbusValue: DBusValue) { guard let v = dbusValue.int32Value else { return nil }; self = v }
}
extension UInt32: DBusArgument {
    public init?(dbusValue: DBusValue) { guard let v = dbusValue.uint32Value else { return nil }; self = v }
}
extension Int64: DBusArgument {
    public init?(dbusValue: DBusValue) { guard let v = dbusValue.int64Value else { return nil }; self = v }
}
extension UInt64: DBusArgument {
    public init?(dbusValue: DBusValue) { guard let v = dbusValue.uint64Value else { return nil }; self = v }
}
extension Double: DBusArgument {
    public init?(dbusValue: DBusValue) { guard let v = dbusValue.doubleValue else { return nil }; self = v }
}
extension ObjectPath: DBusArgument {
    public init?(dbusValue: DBusValue) { guard let v = dbusValue.objectPathValue else { return nil }; self = v }
}
extension DBusValue: DBusArgument {
    public init?(dbusValue: DBusValue) { self = dbusValue }
}
extension Array: DBusArgument where Element: DBusArgument {
    public init?(dbusValue: DBusValue) {
        // An `ay` as read: its bytes at once, not a DBusValue each.
        if Element.self == UInt8.self, case .bytes(let bytes) = dbusValue {
            // The same type: `as?` here would cast each byte on its own.
            self = unsafeBitCast(bytes, to: [Element].self)
            return
        }
        guard let values = dbusValue.arrayValue else { return nil }
        var result: [Element] = []
        result.reserveCapacity(values.count)
        for value in values {
            guard let element = Element(dbusValue: value) else { return nil }
            result.append(element)
        }
        self = result
    }
}
extension Dictionary: DBusArgument where Key == String, Value: DBusArgument {
    /// An `a{s…}` dictionary; with duplicate keys the last one wins.
    public init?(dbusValue: DBusValue) {
        guard let entries = dbusValue.dictionaryEntries else { return nil }
        var result: [String: Value] = [:]
        for entry in entries {
            guard case .string(let key) = entry.key, let value = Value(dbusValue: entry.value) else { return nil }
            result[key] = value
        }
        self = result
    }
}
