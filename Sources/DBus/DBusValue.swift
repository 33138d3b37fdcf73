/// One D-Bus value of any type, as it travels in a message.
///
/// Containers carry their element types so that empty arrays and dictionaries
/// still have a signature. Values built in Swift are checked against their type
/// (`check(against:)`) before they are marshalled; values read from a message
/// are valid by construction.
///
/// Only a variant is boxed: the other cases hold their payload inline or in an array's
/// buffer. (The whole enum was `indirect` once, which put every value, down to each
/// integer of a record, in its own heap allocation.)
public enum DBusValue: Hashable, Sendable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(ObjectPath)
    case signature(Signature)
    case unixFD(FileDescriptor)
    indirect case variant(DBusValue)
    case array(DBusType, [DBusValue])
    /// An array of bytes (`ay`), in one buffer: how every `ay` is read, and the way to send
    /// large ones (an `.array(.byte, …)` holds a `DBusValue` per byte; Benchmarks/README, "A
    /// copy of the clipboard"). Compares unequal to the same bytes as `.array(.byte, …)`.
    case bytes([UInt8])
    case dictionary(key: DBusType, value: DBusType, [DictionaryEntry])
    case structure([DBusValue])

    /// One key/value pair of a dictionary; order is kept as it was sent.
    public struct DictionaryEntry: Hashable, Sendable {
        public var key: DBusValue
        public var value: DBusValue
        public init(_ key: DBusValue, _ value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    /// The type this value has.
    public var type: DBusType {
        switch self {
        case .byte: .byte
        case .boolean: .boolean
        case .int16: .int16
        case .uint16: .uint16
        case .int32: .int32
        case .uint32: .uint32
        case .int64: .int64
        case .uint64: .uint64
        case .double: .double
        case .string: .string
        case .objectPath: .objectPath
        case .signature: .signature
        case .unixFD: .unixFD
        case .variant: .variant
        case .array(let element, _): .array(element)
        case .bytes: .array(.byte)
        case .dictionary(let key, let value, _): .dictionary(key: key, value: value)
        case .structure(let fields): .structure(fields.map(\.type))
        }
    }

    /// True when this value has type `expected`; unlike comparing `type`, this builds nothing.
    public func hasType(_ expected: DBusType) -> Bool {
        switch (self, expected) {
        case (.bytes, .array(.byte)):
            return true
        case (.byte, .byte), (.boolean, .boolean), (.int16, .int16), (.uint16, .uint16),
             (.int32, .int32), (.uint32, .uint32), (.int64, .int64), (.uint64, .uint64),
             (.double, .double), (.string, .string), (.objectPath, .objectPath),
             (.signature, .signature), (.unixFD, .unixFD), (.variant, .variant):
            return true
        case (.array(let element, _), .array(let expectedElement)):
            return element == expectedElement
        case (.dictionary(let key, let value, _), .dictionary(let expectedKey, let expectedValue)):
            return key == expectedKey && value == expectedValue
        case (.structure(let fields), .structure(let expectedFields)):
            return fields.count == expectedFields.count && zip(fields, expectedFields).allSatisfy { $0.hasType($1) }
        default:
            return false
        }
    }

    /// The limit on nested containers (arrays, structures, dictionary entries and
    /// variants together) in one message, from the specification.
    public static let maximumDepth = 64

    /// Throws `InvalidArgs` when this value cannot be sent as `expected`: a different
    /// type, an element that does not match its array, a string with NUL, a bad
    /// object path, or nesting beyond the specification's limits.
    public func check(against expected: DBusType) throws(DBusError) {
        try check(against: expected, depth: 0, arrays: 0, structs: 0)
    }

    private func check(against expected: DBusType, depth: Int, arrays: Int, structs: Int) throws(DBusError) {
        guard depth <= DBusValue.maximumDepth else {
            throw .invalidArgs("value nested deeper than \(DBusValue.maximumDepth) containers")
        }
        switch (self, expected) {
        case (.bytes, .array(.byte)):
            guard arrays < Signature.maximumNesting else { throw .invalidArgs("arrays nested deeper than \(Signature.maximumNesting)") }
        case (.byte, .byte), (.boolean, .boolean), (.int16, .int16), (.uint16, .uint16),
             (.int32, .int32), (.uint32, .uint32), (.int64, .int64), (.uint64, .uint64),
             (.double, .double), (.objectPath, .objectPath), (.signature, .signature), (.unixFD, .unixFD):
            return
        case (.string(let text), .string):
            try DBusNames.validateString(text)
        case (.variant(let inner), .variant):
            // A variant's content starts its own signature, so the per-signature
            // counts restart, while the message depth keeps growing.
            let innerType = inner.type
            try inner.check(against: innerType, depth: depth + 1, arrays: 0, structs: 0)
            // A basic type's one-letter signature is always valid; only containers can pass the limits.
            if !innerType.isBasic { _ = try Signature(validating: innerType.signature) }
        case (.array(let element, let values), .array(let expectedElement)) where element == expectedElement:
            guard arrays < Signature.maximumNesting else {
                throw .invalidArgs("arrays nested deeper than \(Signature.maximumNesting)")
            }
            for value in values {
                try value.check(against: element, depth: depth + 1, arrays: arrays + 1, structs: structs)
            }
        case (.dictionary(let key, let value, let entries), .dictionary(let expectedKey, let expectedValue))
            where key == expectedKey && value == expectedValue:
            guard key.isBasic else { throw .invalidArgs("dictionary key type \(key.signature) is not basic") }
            guard arrays < Signature.maximumNesting, structs < Signature.maximumNesting else {
                throw .invalidArgs("dictionary nested deeper than \(Signature.maximumNesting)")
            }
            for entry in entries {
                try entry.key.check(against: key, depth: depth + 2, arrays: arrays + 1, structs: structs + 1)
                try entry.value.check(against: value, depth: depth + 2, arrays: arrays + 1, structs: structs + 1)
            }
        case (.structure(let fields), .structure(let expectedFields)) where fields.count == expectedFields.count:
            guard !fields.isEmpty else { throw .invalidArgs("a structure needs at least one field") }
            guard structs < Signature.maximumNesting else {
                throw .invalidArgs("structures nested deeper than \(Signature.maximumNesting)")
            }
            for (field, expectedField) in zip(fields, expectedFields) {
                try field.check(against: expectedField, depth: depth + 1, arrays: arrays, structs: structs + 1)
            }
        default:
            throw .invalidArgs("expected a value of type '\(expected.signature)', got '\(type.signature)'")
        }
    }
}

// MARK: - Reading values

extension DBusValue {
    public var byteValue: UInt8? { if case .byte(let v) = self { v } else { nil } }
    public var boolValue: Bool? { if case .boolean(let v) = self { v } else { nil } }
    public var int16Value: Int16? { if case .int16(let v) = self { v } else { nil } }
    public var uint16Value: UInt16? { if case .uint16(let v) = self { v } else { nil } }
    public var int32Value: Int32? { if case .int32(let v) = self { v } else { nil } }
    public var uint32Value: UInt32? { if case .uint32(let v) = self { v } else { nil } }
    public var int64Value: Int64? { if case .int64(let v) = self { v } else { nil } }
    public var uint64Value: UInt64? { if case .uint64(let v) = self { v } else { nil } }
    public var doubleValue: Double? { if case .double(let v) = self { v } else { nil } }
    public var objectPathValue: ObjectPath? { if case .objectPath(let v) = self { v } else { nil } }
    public var signatureValue: Signature? { if case .signature(let v) = self { v } else { nil } }
    public var variantValue: DBusValue? { if case .variant(let v) = self { v } else { nil } }
    public var structureValue: [DBusValue]? { if case .structure(let v) = self { v } else { nil } }

    /// The text of a string, object path or signature.
    public var stringValue: String? {
        switch self {
        case .string(let v): v
        case .objectPath(let v): v.text
        case .signature(let v): v.text
        default: nil
        }
    }

    /// The elements of an array (of bytes too, a `DBusValue` each: `bytesValue` is the fast way).
    public var arrayValue: [DBusValue]? {
        switch self {
        case .array(_, let v): v
        case .bytes(let v): v.map { .byte($0) }
        default: nil
        }
    }

    /// The bytes of an `ay`, as either case holds them.
    public var bytesValue: [UInt8]? {
        switch self {
        case .bytes(let v): v
        case .array(.byte, let v): v.compactMap(\.byteValue)
        default: nil
        }
    }

    /// The entries of a dictionary, in order.
    public var dictionaryEntries: [DictionaryEntry]? {
        if case .dictionary(_, _, let entries) = self { entries } else { nil }
    }

    /// A dictionary with string keys (`a{s…}`) as a Swift dictionary; the last of duplicate keys wins.
    public var stringKeyedValue: [String: DBusValue]? {
        guard case .dictionary(.string, _, let entries) = self else { return nil }
        var result: [String: DBusValue] = [:]
        for entry in entries {
            if case .string(let key) = entry.key { result[key] = entry.value }
        }
        return result
    }

    /// The value inside any number of variants.
    public var unwrapped: DBusValue {
        var value = self
        while case .variant(let inner) = value { value = inner }
        return value
    }
}

// MARK: - Building values

extension DBusValue {
    /// An `a{sv}` record from a Swift dictionary, with keys in sorted order so output is stable.
    public static func record(_ fields: [String: DBusValue]) -> DBusValue {
        record(Array(fields))
    }

    /// An `a{sv}` record from fields with distinct names, in sorted key order so output is
    /// stable. Cheaper than the dictionary form on hot paths: nothing is hashed, and fields
    /// listed in key order are not sorted again.
    public static func record(_ fields: [(key: String, value: DBusValue)]) -> DBusValue {
        let inOrder = zip(fields, fields.dropFirst()).allSatisfy { $0.key < $1.key }
        return .dictionary(
            key: .string, value: .variant,
            (inOrder ? fields : fields.sorted { $0.key < $1.key }).map { DictionaryEntry(.string($0.key), .variant($0.value)) }
        )
    }

    /// An `a{ss}` map from a Swift dictionary, in sorted key order.
    public static func stringMap(_ fields: [String: String]) -> DBusValue {
        .dictionary(
            key: .string, value: .string,
            fields.sorted { $0.key < $1.key }.map { DictionaryEntry(.string($0.key), .string($0.value)) }
        )
    }

    /// An `as` array.
    public static func strings(_ values: [String]) -> DBusValue {
        .array(.string, values.map { .string($0) })
    }
}
