import CDBus

/// Moves `DBusValue`s into and out of libdbus message iterators.
///
/// Only the bus thread calls these. Appending assumes the value was already
/// checked with `DBusValue.check(against:)`; libdbus then fails only when out of memory.
enum Marshal {
    private static let arrayCode = Int32(UInt8(ascii: "a"))
    private static let variantCode = Int32(UInt8(ascii: "v"))
    private static let structCode = Int32(UInt8(ascii: "r"))
    private static let dictEntryCode = Int32(UInt8(ascii: "e"))
    private static let byteCode = Int32(UInt8(ascii: "y"))

    // MARK: Appending

    static func append(_ values: [DBusValue], to message: OpaquePointer) throws(DBusError) {
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(message, &iter)
        for value in values {
            guard append(value, to: &iter) else { throw .init(name: DBusError.Name.noMemory, message: "out of memory while building a message") }
        }
    }

    private static func append(_ value: DBusValue, to iter: inout DBusMessageIter) -> Bool {
        switch value {
        case .byte(var v): return dbus_message_iter_append_basic(&iter, Int32(value.type.code), &v) != 0
        case .boolean(let b):
            var v: dbus_bool_t = b ? 1 : 0
            return dbus_message_iter_append_basic(&iter, Int32(value.type.code), &v) != 0
        case .int16(var v): return dbus_message_iter_append_basic(&iter, Int32(value.type.code), &v) != 0
        case .uint16(var v): return dbus_message_iter_append_basic(&iter, Int32(value.type.code), &v) != 0
        case .int32(var v): return dbus_message_iter_append_basic(&iter, Int32(value.type.code), &v) != 0
        case .uint32(var v): return dbus_message_iter_append_basic(&iter, Int32(value.type.code), &v) != 0
        case .int64(var v): return dbus_message_iter_append_basic(&iter, Int32(value.type.code), &v) != 0
        case .uint64(var v): return dbus_message_iter_append_basic(&iter, Int32(value.type.code), &v) != 0
        case .double(var v): return dbus_message_iter_append_basic(&iter, Int32(value.type.code), &v) != 0
        case .string(let text): return appendString(text, code: value.type.code, to: &iter)
        case .objectPath(let path): return appendString(path.text, code: value.type.code, to: &iter)
        case .signature(let signature): return appendString(signature.text, code: value.type.code, to: &iter)
        // libdbus appends a duplicate: the value keeps its own.
        case .unixFD(let descriptor):
            var raw = descriptor.raw
            return dbus_message_iter_append_basic(&iter, Int32(value.type.code), &raw) != 0
        case .variant(let inner):
            return container(variantCode, signature: inner.type.signature, in: &iter) { sub in append(inner, to: &sub) }
        case .bytes(var bytes):
            return container(arrayCode, signature: "y", in: &iter) { sub in
                bytes.withUnsafeMutableBufferPointer { buffer in
                    var base = buffer.baseAddress
                    return withUnsafeMutablePointer(to: &base) { dbus_message_iter_append_fixed_array(&sub, byteCode, $0, Int32(buffer.count)) != 0 }
                }
            }
        case .array(let element, let values):
            return container(arrayCode, signature: element.signature, in: &iter) { sub in
                if element == .byte {
                    // One copy for byte arrays instead of one call per byte.
                    var bytes = values.compactMap(\.byteValue)
                    return bytes.withUnsafeMutableBufferPointer { buffer in
                        var base = buffer.baseAddress
                        return withUnsafeMutablePointer(to: &base) {
                            dbus_message_iter_append_fixed_array(&sub, byteCode, $0, Int32(buffer.count)) != 0
                        }
                    }
                }
                for value in values where !append(value, to: &sub) { return false }
                return true
            }
        case .dictionary(let key, let valueType, let entries):
            let entrySignature = "{" + key.signature + valueType.signature + "}"
            return container(arrayCode, signature: entrySignature, in: &iter) { sub in
                for entry in entries {
                    let ok = container(dictEntryCode, signature: nil, in: &sub) { pair in
                        append(entry.key, to: &pair) && append(entry.value, to: &pair)
                    }
                    if !ok { return false }
                }
                return true
            }
        case .structure(let fields):
            return container(structCode, signature: nil, in: &iter) { sub in
                for field in fields where !append(field, to: &sub) { return false }
                return true
            }
        }
    }

    private static func appendString(_ text: String, code: UInt8, to iter: inout DBusMessageIter) -> Bool {
        // Native Swift strings are stored NUL-terminated, so this does not copy.
        text.withCString { cdbus_iter_append_string(&iter, Int32(code), $0) != 0 }
    }

    private static func container(
        _ code: Int32, signature: String?, in iter: inout DBusMessageIter,
        _ body: (inout DBusMessageIter) -> Bool
    ) -> Bool {
        var sub = DBusMessageIter()
        let opened: Bool = if let signature {
            signature.withCString { dbus_message_iter_open_container(&iter, code, $0, &sub) != 0 }
        } else {
            dbus_message_iter_open_container(&iter, code, nil, &sub) != 0
        }
        guard opened else { return false }
        guard body(&sub) else {
            dbus_message_iter_abandon_container(&iter, &sub)
            return false
        }
        return dbus_message_iter_close_container(&iter, &sub) != 0
    }

    // MARK: Reading

    static func read(from message: OpaquePointer) throws(DBusError) -> [DBusValue] {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
        var values: [DBusValue] = []
        repeat {
            values.append(try read(&iter))
        } while dbus_message_iter_next(&iter) != 0
        return values
    }

    private static func read(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusValue {
        let code = dbus_message_iter_get_arg_type(&iter)
        switch UInt8(truncatingIfNeeded: code) {
        case UInt8(ascii: "y"): return .byte(cdbus_iter_get_byte(&iter))
        case UInt8(ascii: "b"): return .boolean(cdbus_iter_get_bool(&iter) != 0)
        case UInt8(ascii: "n"): return .int16(cdbus_iter_get_int16(&iter))
        case UInt8(ascii: "q"): return .uint16(cdbus_iter_get_uint16(&iter))
        case UInt8(ascii: "i"): return .int32(cdbus_iter_get_int32(&iter))
        case UInt8(ascii: "u"): return .uint32(cdbus_iter_get_uint32(&iter))
        case UInt8(ascii: "x"): return .int64(Int64(cdbus_iter_get_int64(&iter)))
        case UInt8(ascii: "t"): return .uint64(UInt64(cdbus_iter_get_uint64(&iter)))
        case UInt8(ascii: "d"): return .double(cdbus_iter_get_double(&iter))
        case UInt8(ascii: "s"): return .string(readString(&iter))
        // libdbus validated paths and signatures when the message arrived.
        case UInt8(ascii: "o"): return .objectPath(ObjectPath(unchecked: readString(&iter)))
        case UInt8(ascii: "g"): return .signature(try Signature(validating: readString(&iter)))
        case UInt8(ascii: "v"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .variant(try read(&sub))
        case UInt8(ascii: "r"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            var fields: [DBusValue] = []
            repeat {
                fields.append(try read(&sub))
            } while dbus_message_iter_next(&sub) != 0
            return .structure(fields)
        case UInt8(ascii: "a"):
            return try readArray(&iter)
        case UInt8(ascii: "h"):
            // A duplicate the value owns; -1 when the message lost its descriptors.
            let raw = cdbus_iter_get_unix_fd(&iter)
            guard raw >= 0 else { throw .invalidArgs("a file descriptor in the message could not be read") }
            return .unixFD(FileDescriptor(owning: raw))
        default:
            throw .invalidArgs("unexpected type code \(code) in message")
        }
    }

    private static func readString(_ iter: inout DBusMessageIter) -> String {
        guard let pointer = cdbus_iter_get_string(&iter) else { return "" }
        return String(cString: pointer)
    }

    private static func readArray(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusValue {
        guard let raw = dbus_message_iter_get_signature(&iter) else {
            throw .init(name: DBusError.Name.noMemory, message: "out of memory while reading a message")
        }
        let signatureText = String(cString: raw)
        dbus_free(raw)
        let arrayType = try SignatureParser.parseSingle(signatureText)
        var sub = DBusMessageIter()
        dbus_message_iter_recurse(&iter, &sub)
        switch arrayType {
        case .array(.byte):
            var pointer: UnsafeMutableRawPointer?
            var count: Int32 = 0
            withUnsafeMutablePointer(to: &pointer) { dbus_message_iter_get_fixed_array(&sub, $0, &count) }
            guard let pointer, count > 0 else { return .bytes([]) }
            return .bytes(Array(UnsafeRawBufferPointer(start: pointer, count: Int(count))))
        case .array(let element):
            var values: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != cdbus_type_invalid() {
                values.append(try read(&sub))
                dbus_message_iter_next(&sub)
            }
            return .array(element, values)
        case .dictionary(let key, let value):
            var entries: [DBusValue.DictionaryEntry] = []
            while dbus_message_iter_get_arg_type(&sub) != cdbus_type_invalid() {
                var pair = DBusMessageIter()
                dbus_message_iter_recurse(&sub, &pair)
                let k = try read(&pair)
                dbus_message_iter_next(&pair)
                let v = try read(&pair)
                entries.append(.init(k, v))
                dbus_message_iter_next(&sub)
            }
            return .dictionary(key: key, value: value, entries)
        default:
            throw .invalidArgs("array with signature \(signatureText) is malformed")
        }
    }
}
