/// Encodes `Encodable` values as D-Bus values: structs and dictionaries become
/// `a{sv}` records, so fields can be added without breaking callers.
///
/// Mapping: `String` → `s`, `Bool` → `b`, `Int`/`Int64` → `x`, `Int32` → `i`,
/// `Int16`/`Int8` → `n`, `UInt8` → `y`, `UInt16` → `q`, `UInt32` → `u`,
/// `UInt`/`UInt64` → `t`, `Double`/`Float` → `d`, `ObjectPath` → `o`, `DBusValue`
/// as itself. Arrays whose elements share one type become `aT`; empty or mixed
/// arrays become `av`. A nil optional field is left out of its record.
public struct DBusRecordEncoder: Sendable {
    public init() {}

    public func encode<T: Encodable>(_ value: T) throws -> DBusValue {
        let node = EncodingNode()
        try node.store(value, codingPath: [])
        return try node.value(codingPath: [])
    }
}

/// Decodes `Decodable` values from D-Bus values, reading through variants and
/// converting between integer types when no value is lost.
public struct DBusRecordDecoder: Sendable {
    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from value: DBusValue) throws -> T {
        try RecordDecoder(value: value, codingPath: []).decodeValue(type)
    }
}

// MARK: - Encoding

/// One value under construction; containers fill it in as `encode(to:)` runs.
private final class EncodingNode {
    var single: DBusValue?
    var keyed: [(String, EncodingNode)]?
    var unkeyed: [EncodingNode]?

    func store<T: Encodable>(_ value: T, codingPath: [any CodingKey]) throws {
        if let primitive = Self.primitive(value) {
            single = primitive
        } else {
            try value.encode(to: NodeEncoder(node: self, codingPath: codingPath))
        }
    }

    static func primitive(_ value: Any) -> DBusValue? {
        switch value {
        case let v as DBusValue: v
        case let v as String: .string(v)
        case let v as Bool: .boolean(v)
        case let v as Int: .int64(Int64(v))
        case let v as Int64: .int64(v)
        case let v as Int32: .int32(v)
        case let v as Int16: .int16(v)
        case let v as Int8: .int16(Int16(v))
        case let v as UInt: .uint64(UInt64(v))
        case let v as UInt64: .uint64(v)
        case let v as UInt32: .uint32(v)
        case let v as UInt16: .uint16(v)
        case let v as UInt8: .byte(v)
        case let v as Double: .double(v)
        case let v as Float: .double(Double(v))
        case let v as ObjectPath: .objectPath(v)
        case let v as Signature: .signature(v)
        default: nil
        }
    }

    func value(codingPath: [any CodingKey]) throws -> DBusValue {
        if let single { return single }
        if let keyed {
            var entries: [DBusValue.DictionaryEntry] = []
            for (key, node) in keyed {
                entries.append(.init(.string(key), .variant(try node.value(codingPath: codingPath))))
            }
            return .dictionary(key: .string, value: .variant, entries)
        }
        if let unkeyed {
            let values = try unkeyed.map { try $0.value(codingPath: codingPath) }
            if let first = values.first, values.allSatisfy({ $0.type == first.type }) {
                return .array(first.type, values)
            }
            return .array(.variant, values.map { .variant($0) })
        }
        throw EncodingError.invalidValue((), .init(codingPath: codingPath, debugDescription: "nothing was encoded"))
    }
}

private struct NodeEncoder: Encoder {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if node.keyed == nil { node.keyed = [] }
        return KeyedEncodingContainer(KeyedNodeContainer<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if node.unkeyed == nil { node.unkeyed = [] }
        return UnkeyedNodeContainer(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleNodeContainer(node: node, codingPath: codingPath)
    }
}

private struct KeyedNodeContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    private func child(_ key: Key) -> EncodingNode { child(named: key.stringValue) }

    private func child(named name: String) -> EncodingNode {
        let child = EncodingNode()
        node.keyed?.append((name, child))
        return child
    }

    mutating func encodeNil(forKey key: Key) throws {}  // absent from the record
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try child(key).store(value, codingPath: codingPath + [key])
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        NodeEncoder(node: child(key), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        NodeEncoder(node: child(key), codingPath: codingPath + [key]).unkeyedContainer()
    }
    mutating func superEncoder() -> any Encoder { NodeEncoder(node: child(named: "super"), codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { NodeEncoder(node: child(key), codingPath: codingPath + [key]) }
}

private struct UnkeyedNodeContainer: UnkeyedEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var count: Int { node.unkeyed?.count ?? 0 }

    private func child() -> EncodingNode {
        let child = EncodingNode()
        node.unkeyed?.append(child)
        return child
    }

    mutating func encodeNil() throws {
        throw EncodingError.invalidValue(
            Optional<Int>.none as Any, .init(codingPath: codingPath, debugDescription: "D-Bus arrays cannot hold nil"))
    }
    mutating func encode<T: Encodable>(_ value: T) throws { try child().store(value, codingPath: codingPath) }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        NodeEncoder(node: child(), codingPath: codingPath).container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        NodeEncoder(node: child(), codingPath: codingPath).unkeyedContainer()
    }
    mutating func superEncoder() -> any Encoder { NodeEncoder(node: child(), codingPath: codingPath) }
}

private struct SingleNodeContainer: SingleValueEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws {
        throw EncodingError.invalidValue(
            Optional<Int>.none as Any, .init(codingPath: codingPath, debugDescription: "D-Bus has no null value"))
    }
    mutating func encode<T: Encodable>(_ value: T) throws { try node.store(value, codingPath: codingPath) }
}

// MARK: - Decoding

private struct RecordDecoder: Decoder {
    let value: DBusValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func mismatch(_ expected: Any.Type) -> DecodingError {
        .typeMismatch(expected, .init(
            codingPath: codingPath,
            debugDescription: "expected \(expected), found a D-Bus value of type '\(value.unwrapped.type.signature)'"))
    }

    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        let plain = value.unwrapped
        if T.self == DBusValue.self, let result = value as? T { return result }
        if let result = try Self.primitive(plain, as: type) { return result }
        if T.self is any PrimitiveDecodable.Type { throw mismatch(type) }
        return try T(from: RecordDecoder(value: plain, codingPath: codingPath))
    }

    /// Reads a primitive Swift type, converting numbers only without loss.
    static func primitive<T>(_ value: DBusValue, as type: T.Type) throws -> T? {
        func integer<I: FixedWidthInteger>(_: I.Type) -> I? {
            switch value {
            case .byte(let v): I(exactly: v)
            case .int16(let v): I(exactly: v)
            case .uint16(let v): I(exactly: v)
            case .int32(let v): I(exactly: v)
            case .uint32(let v): I(exactly: v)
            case .int64(let v): I(exactly: v)
            case .uint64(let v): I(exactly: v)
            default: nil
            }
        }
        let result: Any? = switch type {
        case is String.Type: value.stringValue
        case is Bool.Type: value.boolValue
        case is Double.Type: value.doubleValue ?? integer(Int64.self).map { Double($0) }
        case is Float.Type: value.doubleValue.map { Float($0) }
        case is Int.Type: integer(Int.self)
        case is Int64.Type: integer(Int64.self)
        case is Int32.Type: integer(Int32.self)
        case is Int16.Type: integer(Int16.self)
        case is Int8.Type: integer(Int8.self)
        case is UInt.Type: integer(UInt.self)
        case is UInt64.Type: integer(UInt64.self)
        case is UInt32.Type: integer(UInt32.self)
        case is UInt16.Type: integer(UInt16.self)
        case is UInt8.Type: integer(UInt8.self)
        case is ObjectPath.Type: value.objectPathValue
        case is Signature.Type: value.signatureValue
        default: nil
        }
        return result as? T
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard let entries = value.unwrapped.dictionaryEntries else { throw mismatch([String: Any].self) }
        var fields: [String: DBusValue] = [:]
        for entry in entries {
            guard let key = entry.key.stringValue else { throw mismatch([String: Any].self) }
            fields[key] = entry.value
        }
        return KeyedDecodingContainer(KeyedRecordContainer<Key>(fields: fields, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        switch value.unwrapped {
        case .array(_, let values), .structure(let values):
            return UnkeyedRecordContainer(values: values, codingPath: codingPath)
        default:
            throw mismatch([Any].self)
        }
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleRecordContainer(decoder: self)
    }
}

/// The types decoded directly from a D-Bus basic value.
private protocol PrimitiveDecodable {}
extension String: PrimitiveDecodable {}
extension Bool: PrimitiveDecodable {}
extension Double: PrimitiveDecodable {}
extension Float: PrimitiveDecodable {}
extension Int: PrimitiveDecodable {}
extension Int64: PrimitiveDecodable {}
extension Int32: PrimitiveDecodable {}
extension Int16: PrimitiveDecodable {}
extension Int8: PrimitiveDecodable {}
extension UInt: PrimitiveDecodable {}
extension UInt64: PrimitiveDecodable {}
extension UInt32: PrimitiveDecodable {}
extension UInt16: PrimitiveDecodable {}
extension UInt8: PrimitiveDecodable {}
extension ObjectPath: PrimitiveDecodable {}
extension Signature: PrimitiveDecodable {}

private struct KeyedRecordContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let fields: [String: DBusValue]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { fields.keys.compactMap { Key(stringValue: $0) } }
    func contains(_ key: Key) -> Bool { fields[key.stringValue] != nil }

    private func field(_ key: Key) throws -> DBusValue {
        guard let value = fields[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "the record has no field '\(key.stringValue)'"))
        }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool { fields[key.stringValue] == nil }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try RecordDecoder(value: field(key), codingPath: codingPath + [key]).decodeValue(type)
    }
    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try RecordDecoder(value: field(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try RecordDecoder(value: field(key), codingPath: codingPath + [key]).unkeyedContainer()
    }
    func superDecoder() throws -> any Decoder {
        RecordDecoder(value: .record(fields), codingPath: codingPath)
    }
    func superDecoder(forKey key: Key) throws -> any Decoder {
        RecordDecoder(value: try field(key), codingPath: codingPath + [key])
    }
}

private struct UnkeyedRecordContainer: UnkeyedDecodingContainer {
    let values: [DBusValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    var count: Int? { values.count }
    var isAtEnd: Bool { currentIndex >= values.count }

    private mutating func next() throws -> DBusValue {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "the array has only \(values.count) elements"))
        }
        defer { currentIndex += 1 }
        return values[currentIndex]
    }

    mutating func decodeNil() throws -> Bool { false }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try RecordDecoder(value: next(), codingPath: codingPath).decodeValue(type)
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try RecordDecoder(value: next(), codingPath: codingPath).container(keyedBy: type)
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try RecordDecoder(value: next(), codingPath: codingPath).unkeyedContainer()
    }
    mutating func superDecoder() throws -> any Decoder { RecordDecoder(value: try next(), codingPath: codingPath) }
}

private struct SingleRecordContainer: SingleValueDecodingContainer {
    let decoder: RecordDecoder
    var codingPath: [any CodingKey] { decoder.codingPath }
    func decodeNil() -> Bool { false }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decodeValue(type) }
}
