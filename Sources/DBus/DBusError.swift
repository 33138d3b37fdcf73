/// A D-Bus error: a dotted name that programs match on and a message for people.
///
/// Errors replied by a remote service arrive as this type, and every failure of
/// this layer (invalid value, timeout, lost connection) is one too, named with
/// the standard `org.freedesktop.DBus.Error.*` name that fits. A method handler
/// that throws a `DBusError` replies with exactly that error.
public struct DBusError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The error name, such as `org.freedesktop.DBus.Error.UnknownMethod`.
    public var name: String
    /// What went wrong, in words a person can act on.
    public var message: String
    /// The error reply's arguments after the message, for programs (none for most errors).
    public var details: [DBusValue]

    public init(name: String, message: String, details: [DBusValue] = []) {
        self.name = name
        self.message = message
        self.details = details
    }

    public var description: String { "\(name): \(message)" }
}

/// An error that knows which D-Bus error it becomes when a method handler throws it.
///
/// Domain errors adopt this so that handlers can throw them directly; anything
/// else a handler throws is logged and replied as `org.freedesktop.DBus.Error.Failed`
/// without its details.
public protocol DBusErrorConvertible: Error {
    var dbusError: DBusError { get }
}

extension DBusError: DBusErrorConvertible {
    public var dbusError: DBusError { self }
}

extension DBusError {
    /// The standard error names from the specification and libdbus's `dbus-protocol.h`.
    public enum Name {
        public static let failed = "org.freedesktop.DBus.Error.Failed"
        public static let noReply = "org.freedesktop.DBus.Error.NoReply"
        public static let timeout = "org.freedesktop.DBus.Error.Timeout"
        public static let disconnected = "org.freedesktop.DBus.Error.Disconnected"
        public static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
        public static let invalidSignature = "org.freedesktop.DBus.Error.InvalidSignature"
        public static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
        public static let unknownInterface = "org.freedesktop.DBus.Error.UnknownInterface"
        public static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
        public static let unknownProperty = "org.freedesktop.DBus.Error.UnknownProperty"
        public static let propertyReadOnly = "org.freedesktop.DBus.Error.PropertyReadOnly"
        public static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
        public static let nameHasNoOwner = "org.freedesktop.DBus.Error.NameHasNoOwner"
        /// A process that ended: nothing can be told of it, and its connection is going.
        public static let unixProcessIdUnknown = "org.freedesktop.DBus.Error.UnixProcessIdUnknown"
        public static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
        public static let noMemory = "org.freedesktop.DBus.Error.NoMemory"
        /// Not in the specification: this layer's name for "another connection owns the name".
        public static let nameTaken = "org.freedesktop.DBus.Error.NameTaken"
        /// Not in the specification: the local call was cancelled before a reply came.
        public static let cancelled = "org.freedesktop.DBus.Error.Cancelled"
    }

    public static func failed(_ message: String) -> DBusError { .init(name: Name.failed, message: message) }
    public static func invalidArgs(_ message: String) -> DBusError { .init(name: Name.invalidArgs, message: message) }
    public static func invalidSignature(_ text: String, _ reason: String) -> DBusError {
        .init(name: Name.invalidSignature, message: "invalid signature '\(printable(text))': \(reason)")
    }
    public static func disconnected(_ message: String = "the connection to the bus is closed") -> DBusError {
        .init(name: Name.disconnected, message: message)
    }

    /// Makes text safe to quote in a message: control characters and NUL become escapes.
    static func printable(_ text: String, limit: Int = 120) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        if text.unicodeScalars.count > limit { out += "…" }
        return out
    }
}
