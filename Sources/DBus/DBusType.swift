/// One complete D-Bus type, parsed from its signature text.
///
/// The grammar and limits come from the D-Bus specification, "Type System":
/// https://dbus.freedesktop.org/doc/dbus-specification.html#type-system
/// A Unix file descriptor (`h`) arrives as a `FileDescriptor` the value owns.
public indirect enum DBusType: Hashable, Sendable {
    case byte, boolean, int16, uint16, int32, uint32, int64, uint64, double
    case string, objectPath, signature
    case unixFD
    case variant
    case array(DBusType)
    /// `a{KV}`: a dictionary; the key is always a basic type.
    case dictionary(key: DBusType, value: DBusType)
    case structure([DBusType])

    /// The signature text of this type, such as `a{sv}`.
    public var signature: String {
        switch self {
        case .array, .dictionary, .structure:
            var text = ""
            write(to: &text)
            return text
        default:
            // One ASCII letter: a small string, built without allocating.
            return String(Unicode.Scalar(code))
        }
    }

    /// The length of `signature`, computed without building it.
    public var signatureLength: Int {
        switch self {
        case .array(let element): 1 + element.signatureLength
        case .dictionary(let key, let value): 3 + key.signatureLength + value.signatureLength
        case .structure(let fields): fields.reduce(2) { $0 + $1.signatureLength }
        default: 1
        }
    }

    /// True for the types that may be dictionary keys.
    public var isBasic: Bool {
        switch self {
        case .variant, .array, .dictionary, .structure: false
        default: true
        }
    }

    func write(to text: inout String) {
        switch self {
        case .array(let element):
            text.append("a")
            element.write(to: &text)
        case .dictionary(let key, let value):
            text.append("a{")
            key.write(to: &text)
            value.write(to: &text)
            text.append("}")
        case .structure(let fields):
            text.append("(")
            for field in fields { field.write(to: &text) }
            text.append(")")
        default:
            text.unicodeScalars.append(Unicode.Scalar(code))
        }
    }

    /// The ASCII type code libdbus uses (`DBUS_TYPE_*`).
    var code: UInt8 {
        switch self {
        case .byte: UInt8(ascii: "y")
        case .boolean: UInt8(ascii: "b")
        case .int16: UInt8(ascii: "n")
        case .uint16: UInt8(ascii: "q")
        case .int32: UInt8(ascii: "i")
        case .uint32: UInt8(ascii: "u")
        case .int64: UInt8(ascii: "x")
        case .uint64: UInt8(ascii: "t")
        case .double: UInt8(ascii: "d")
        case .string: UInt8(ascii: "s")
        case .objectPath: UInt8(ascii: "o")
        case .signature: UInt8(ascii: "g")
        case .unixFD: UInt8(ascii: "h")
        case .variant: UInt8(ascii: "v")
        case .array, .dictionary: UInt8(ascii: "a")
        case .structure: UInt8(ascii: "r")
        }
    }

    private static let basicTypes: [DBusType] = [
        .byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double, .string, .objectPath, .signature, .unixFD,
    ]

    /// The basic type with this type code, if any.
    static func basic(code: UInt8) -> DBusType? {
        basicTypes.first { $0.code == code }
    }
}

/// The signature of a message body or argument list: zero or more complete types.
///
/// Creating one from text validates it against the specification's grammar and
/// limits (255 bytes, 32 nested arrays, 32 nested structures), so a `Signature`
/// can always be handed to libdbus.
public struct Signature: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The maximum signature length in bytes.
    public static let maximumLength = 255
    /// The maximum nesting of arrays, and separately of structures.
    public static let maximumNesting = 32

    /// The complete types, in order.
    public let types: [DBusType]
    /// The signature text.
    public let text: String

    public var description: String { text }

    /// Parses and validates signature text that came from anywhere.
    public init(validating text: String) throws(DBusError) {
        self.types = try SignatureParser.parse(text)
        self.text = text
    }

    /// A signature written in the source code; an invalid literal is a programming error.
    public init(stringLiteral text: String) {
        do {
            try self.init(validating: text)
        } catch {
            preconditionFailure("invalid D-Bus signature literal '\(text)': \(error.message)")
        }
    }

    /// The signature of these types in order.
    public init(_ types: [DBusType]) {
        var text = ""
        for type in types { type.write(to: &text) }
        self.types = types
        self.text = text
    }

    public static let empty = Signature([])

    public static func == (lhs: Signature, rhs: Signature) -> Bool { lhs.text == rhs.text }
    public func hash(into hasher: inout Hasher) { hasher.combine(text) }
}

/// A recursive-descent parser for signature text over its UTF-8 bytes.
enum SignatureParser {
    static func parse(_ text: String) throws(DBusError) -> [DBusType] {
        let bytes = Array(text.utf8)
        guard bytes.count <= Signature.maximumLength else {
            throw .invalidSignature(text, "longer than \(Signature.maximumLength) bytes")
        }
        var position = 0
        var types: [DBusType] = []
        while position < bytes.count {
            types.append(try parseOne(bytes, &position, arrays: 0, structs: 0, text: text))
        }
        return types
    }

    /// Parses text that must hold exactly one complete type.
    static func parseSingle(_ text: String) throws(DBusError) -> DBusType {
        let types = try parse(text)
        guard types.count == 1, let type = types.first else {
            throw .invalidSignature(text, "expected exactly one complete type")
        }
        return type
    }

    private static func parseOne(
        _ bytes: [UInt8], _ position: inout Int, arrays: Int, structs: Int, text: String
    ) throws(DBusError) -> DBusType {
        guard position < bytes.count else { throw .invalidSignature(text, "ends in the middle of a type") }
        let code = bytes[position]
        position += 1
        if let basic = DBusType.basic(code: code) { return basic }
        switch code {
        case UInt8(ascii: "v"):
            return .variant
        case UInt8(ascii: "a"):
            guard arrays < Signature.maximumNesting else {
                throw .invalidSignature(text, "arrays nested deeper than \(Signature.maximumNesting)")
            }
            if position < bytes.count, bytes[position] == UInt8(ascii: "{") {
                position += 1
                guard structs < Signature.maximumNesting else {
                    throw .invalidSignature(text, "structures nested deeper than \(Signature.maximumNesting)")
                }
                let key = try parseOne(bytes, &position, arrays: arrays + 1, structs: structs + 1, text: text)
                guard key.isBasic else { throw .invalidSignature(text, "a dictionary key must be a basic type") }
                let value = try parseOne(bytes, &position, arrays: arrays + 1, structs: structs + 1, text: text)
                guard position < bytes.count, bytes[position] == UInt8(ascii: "}") else {
                    throw .invalidSignature(text, "a dictionary entry holds exactly a key and a value")
                }
                position += 1
                return .dictionary(key: key, value: value)
            }
            return .array(try parseOne(bytes, &position, arrays: arrays + 1, structs: structs, text: text))
        case UInt8(ascii: "("):
            guard structs < Signature.maximumNesting else {
                throw .invalidSignature(text, "structures nested deeper than \(Signature.maximumNesting)")
            }
            var fields: [DBusType] = []
            while true {
                guard position < bytes.count else { throw .invalidSignature(text, "unclosed structure") }
                if bytes[position] == UInt8(ascii: ")") {
                    position += 1
                    break
                }
                fields.append(try parseOne(bytes, &position, arrays: arrays, structs: structs + 1, text: text))
            }
            guard !fields.isEmpty else { throw .invalidSignature(text, "empty structure") }
            return .structure(fields)
        default:
            let shown = code < 0x80 ? String(Unicode.Scalar(code)) : "byte \(code)"
            throw .invalidSignature(text, "'\(shown)' is not a type code here")
        }
    }
}
