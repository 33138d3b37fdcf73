import CDBus
import Glibc

/// A validated D-Bus object path, such as `/org/baton/Handoff1`.
public struct ObjectPath: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The path text; always valid for libdbus.
    public let text: String

    public var description: String { text }

    /// Validates a path that came from anywhere.
    public init(validating text: String) throws(DBusError) {
        try DBusNames.validate(text, as: .objectPath)
        self.text = text
    }

    /// A path written in the source code; an invalid literal is a programming error.
    public init(stringLiteral text: String) {
        do {
            try self.init(validating: text)
        } catch {
            preconditionFailure(error.message)
        }
    }

    init(unchecked text: String) { self.text = text }

    public static let root = ObjectPath(unchecked: "/")

    /// The path of a child element; `element` must already be a valid path element.
    public func appending(_ element: String) throws(DBusError) -> ObjectPath {
        try ObjectPath(validating: text == "/" ? "/" + element : text + "/" + element)
    }

    /// True when `self` lies strictly below `ancestor`.
    public func isDescendant(of ancestor: ObjectPath) -> Bool {
        if ancestor.text == "/" { return text != "/" }
        return text.hasPrefix(ancestor.text + "/")
    }

    /// The path elements: `/a/b` has `["a", "b"]`, `/` has none.
    public var elements: [Substring] { text.split(separator: "/") }

    public static func < (lhs: ObjectPath, rhs: ObjectPath) -> Bool { lhs.text < rhs.text }

    /// Turns arbitrary text (an id, a UUID) into a valid path element: ASCII letters
    /// and digits stay, every other byte becomes `_XX` in hex, as systemd does for unit paths.
    public static func escapeElement(_ text: String) -> String {
        guard !text.isEmpty else { return "_" }
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16)
                out += "_" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return out
    }
}

/// True when `text` holds a NUL byte: memchr over the string's bytes. The generic
/// `text.utf8.contains(0)` is a loop of about 30 instructions a byte. (BatonCore, which
/// does not depend on this module, has the same four lines.)
func containsNUL(_ text: String) -> Bool {
    var text = text
    return text.withUTF8 { bytes in bytes.baseAddress.map { memchr($0, 0, bytes.count) != nil } ?? false }
}

/// Validation of names against the specification before they reach libdbus,
/// which aborts the process on a malformed one.
public enum DBusNames {
    public enum Kind: Sendable {
        case objectPath, interface, member, errorName, busName

        var label: String {
            switch self {
            case .objectPath: "object path"
            case .interface: "interface name"
            case .member: "member name"
            case .errorName: "error name"
            case .busName: "bus name"
            }
        }
    }

    /// Throws `InvalidArgs` naming what is wrong when `text` is not a valid name of `kind`.
    public static func validate(_ text: String, as kind: Kind) throws(DBusError) {
        // C strings end at NUL: a name with one inside would be validated cut short.
        guard !containsNUL(text) else {
            throw .invalidArgs("\(kind.label) '\(DBusError.printable(text))' contains a NUL byte")
        }
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        let valid = text.withCString { pointer -> dbus_bool_t in
            switch kind {
            case .objectPath: dbus_validate_path(pointer, &error)
            case .interface: dbus_validate_interface(pointer, &error)
            case .member: dbus_validate_member(pointer, &error)
            case .errorName: dbus_validate_error_name(pointer, &error)
            case .busName: dbus_validate_bus_name(pointer, &error)
            }
        }
        if valid == 0 {
            let reason = error.message.map { String(cString: $0) } ?? "not valid"
            throw .invalidArgs("'\(DBusError.printable(text))' is not a valid \(kind.label): \(reason)")
        }
    }

    /// True when `text` is a valid name of `kind`.
    public static func isValid(_ text: String, as kind: Kind) -> Bool {
        do {
            try validate(text, as: kind)
            return true
        } catch {
            return false
        }
    }

    /// Throws when a string cannot travel in a message: it holds a NUL byte.
    ///
    /// Swift strings are always valid UTF-8 without surrogates, which is all
    /// libdbus 1.14 checks, so NUL is the one thing left to refuse.
    static func validateString(_ text: String) throws(DBusError) {
        if containsNUL(text) { throw nulInString(text) }
    }

    static func nulInString(_ text: String) -> DBusError {
        .invalidArgs("string '\(DBusError.printable(text))' contains a NUL byte, which D-Bus strings cannot carry")
    }
}

/// Outside D-Bus (JSON, say) a path is its text; decoding validates it.
extension ObjectPath: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            try self.init(validating: text)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(text)
    }
}
