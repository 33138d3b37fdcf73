import CDBus
import Glibc

/// A reply body that writes itself into the message, for methods whose replies are large
/// and hot (lists of records): built as `DBusValue`s first, every field was a value to
/// allocate, then to check, then to copy out again. See `Method.encoded(_:in:out:ordering:handler:)`.
///
/// The body is written on the bus thread when the reply is sent. Strings are checked for
/// NUL as they are written, and the finished body's signature must equal the method's
/// declared one; either failure replies `Failed` instead, as a handler's bad values do.
public struct EncodedBody: Sendable {
    let write: @Sendable (inout BodyWriter) throws(DBusError) -> Void

    public init(_ write: @escaping @Sendable (inout BodyWriter) throws(DBusError) -> Void) {
        self.write = write
    }
}

/// Appends values to a message body or to one container in it. Only what the records of a
/// reply need: basic values, arrays and `a{sv}` records.
///
/// libdbus aborts the process when an array's element has another type than the array's, so
/// the writer of an array refuses those values itself (`Failed`, naming both types).
public struct BodyWriter: ~Copyable {
    fileprivate var iter: DBusMessageIter
    /// The type every value written here must have: an array's element type; nil at the top
    /// level of the body, whose signature is compared once written.
    private let element: DBusType?

    init(appendingTo message: OpaquePointer) {
        iter = DBusMessageIter()
        element = nil
        dbus_message_iter_init_append(message, &iter)
    }

    fileprivate init(element: DBusType?) {
        iter = DBusMessageIter()
        self.element = element
    }

    public mutating func string(_ text: String) throws(DBusError) {
        try expect(.string)
        try Self.appendString(text, code: DBusType.string.code, to: &iter)
    }

    public mutating func objectPath(_ path: ObjectPath) throws(DBusError) {
        try expect(.objectPath)
        try Self.appendString(path.text, code: DBusType.objectPath.code, to: &iter)
    }

    public mutating func boolean(_ value: Bool) throws(DBusError) {
        try expect(.boolean)
        var v: dbus_bool_t = value ? 1 : 0
        try Self.succeed(dbus_message_iter_append_basic(&iter, Int32(DBusType.boolean.code), &v))
    }

    public mutating func uint64(_ value: UInt64) throws(DBusError) {
        try expect(.uint64)
        var v = value
        try Self.succeed(dbus_message_iter_append_basic(&iter, Int32(DBusType.uint64.code), &v))
    }

    /// An array of `element`, its values written by `body`.
    public mutating func array(of element: DBusType, _ body: (inout BodyWriter) throws(DBusError) -> Void) throws(DBusError) {
        if let expected = self.element {
            // Matched without building `.array(element)`, which boxes (one allocation a record's keywords).
            guard case .array(let expectedElement) = expected, expectedElement == element else {
                throw mismatch(.array(element), expected)
            }
        }
        try container(UInt8(ascii: "a"), signature: element.signature, element: element, body)
    }

    /// An array of strings (`as`).
    public mutating func strings(_ values: [String]) throws(DBusError) {
        try array(of: .string) { writer throws(DBusError) in
            for value in values { try writer.string(value) }
        }
    }

    /// An `a{sv}` record: `body` writes its fields, in key order.
    public mutating func record(_ body: (inout RecordWriter) throws(DBusError) -> Void) throws(DBusError) {
        try expect(Self.recordType)
        var record = RecordWriter()
        try Self.open(UInt8(ascii: "a"), signature: "{sv}", in: &iter, &record.entries.iter)
        do {
            try body(&record)
        } catch {
            dbus_message_iter_abandon_container(&iter, &record.entries.iter)
            throw error
        }
        try Self.succeed(dbus_message_iter_close_container(&iter, &record.entries.iter))
    }

    private static let recordType = DBusType.dictionary(key: .string, value: .variant)

    private func expect(_ type: DBusType) throws(DBusError) {
        if let element, element != type { throw mismatch(type, element) }
    }

    private func mismatch(_ type: DBusType, _ element: DBusType) -> DBusError {
        .failed("a value of type '\(type.signature)' was written into an array of '\(element.signature)'")
    }

    /// Opens a container, lets `body` fill it and closes it. Inside a variant or dictionary
    /// entry (`element` nil) the caller writes exactly what the signature says.
    fileprivate mutating func container(
        _ code: UInt8, signature: String?, element: DBusType?, _ body: (inout BodyWriter) throws(DBusError) -> Void
    ) throws(DBusError) {
        var sub = BodyWriter(element: element)
        try Self.open(code, signature: signature, in: &iter, &sub.iter)
        do {
            try body(&sub)
        } catch {
            dbus_message_iter_abandon_container(&iter, &sub.iter)
            throw error
        }
        try Self.succeed(dbus_message_iter_close_container(&iter, &sub.iter))
    }

    private static func open(
        _ code: UInt8, signature: String?, in iter: inout DBusMessageIter, _ sub: inout DBusMessageIter
    ) throws(DBusError) {
        let opened = if let signature {
            signature.withCString { dbus_message_iter_open_container(&iter, Int32(code), $0, &sub) }
        } else {
            dbus_message_iter_open_container(&iter, Int32(code), nil, &sub)
        }
        try succeed(opened)
    }

    fileprivate static func appendString(_ text: String, code: UInt8, to iter: inout DBusMessageIter) throws(DBusError) {
        // Native Swift strings are stored NUL-terminated, so this does not copy them (small
        // ones are copied to the stack). A NUL inside makes the C string shorter than the text.
        let appended: dbus_bool_t? = text.withCString { chars in
            strlen(chars) == text.utf8.count ? cdbus_iter_append_string(&iter, Int32(code), chars) : nil
        }
        guard let appended else { throw DBusNames.nulInString(text) }
        try succeed(appended)
    }

    fileprivate static func succeed(_ result: dbus_bool_t) throws(DBusError) {
        guard result != 0 else { throw .init(name: DBusError.Name.noMemory, message: "out of memory while building a message") }
    }
}

/// Takes the fields of one `a{sv}` record, one call per field: `RecordWriter` writes them into
/// a message, `RecordBuilder` makes a `DBusValue`. One list of fields serves both.
/// Keys are the caller's constants; give them in key order, as `DBusValue.record` sorts them.
public protocol RecordFields: ~Copyable {
    associatedtype Failure: Error
    mutating func field(_ key: String, string value: String) throws(Failure)
    mutating func field(_ key: String, objectPath value: ObjectPath) throws(Failure)
    mutating func field(_ key: String, boolean value: Bool) throws(Failure)
    mutating func field(_ key: String, uint64 value: UInt64) throws(Failure)
    mutating func field(_ key: String, strings values: [String]) throws(Failure)
}

/// Builds an `a{sv}` record as a `DBusValue`, for bodies that are not written directly.
public struct RecordBuilder: RecordFields {
    private var fields: [(key: String, value: DBusValue)] = []

    public init(capacity: Int = 16) {
        fields.reserveCapacity(capacity)
    }

    public var value: DBusValue { .record(fields) }

    public mutating func field(_ key: String, string value: String) { fields.append((key, .string(value))) }
    public mutating func field(_ key: String, objectPath value: ObjectPath) { fields.append((key, .objectPath(value))) }
    public mutating func field(_ key: String, boolean value: Bool) { fields.append((key, .boolean(value))) }
    public mutating func field(_ key: String, uint64 value: UInt64) { fields.append((key, .uint64(value))) }
    public mutating func field(_ key: String, strings values: [String]) { fields.append((key, .strings(values))) }
}

/// Writes the fields of one `a{sv}` record into a message (see `BodyWriter.record`).
public struct RecordWriter: RecordFields, ~Copyable {
    fileprivate var entries = BodyWriter(element: nil)

    fileprivate init() {}

    public mutating func field(_ key: String, string value: String) throws(DBusError) {
        try field(key, "s") { writer throws(DBusError) in try writer.string(value) }
    }

    public mutating func field(_ key: String, objectPath value: ObjectPath) throws(DBusError) {
        try field(key, "o") { writer throws(DBusError) in try writer.objectPath(value) }
    }

    public mutating func field(_ key: String, boolean value: Bool) throws(DBusError) {
        try field(key, "b") { writer throws(DBusError) in try writer.boolean(value) }
    }

    public mutating func field(_ key: String, uint64 value: UInt64) throws(DBusError) {
        try field(key, "t") { writer throws(DBusError) in try writer.uint64(value) }
    }

    public mutating func field(_ key: String, strings values: [String]) throws(DBusError) {
        try field(key, "as") { writer throws(DBusError) in try writer.strings(values) }
    }

    /// One dictionary entry: the key, then a variant of `signature` that `body` fills.
    private mutating func field(
        _ key: String, _ signature: String, _ body: (inout BodyWriter) throws(DBusError) -> Void
    ) throws(DBusError) {
        try entries.container(UInt8(ascii: "e"), signature: nil, element: nil) { entry throws(DBusError) in
            try BodyWriter.appendString(key, code: DBusType.string.code, to: &entry.iter)
            try entry.container(UInt8(ascii: "v"), signature: signature, element: nil, body)
        }
    }
}
