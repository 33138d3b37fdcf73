import BatonCore
import DBus

/// Domain errors as the contract names them: `org.baton.Handoff1.Error.<Code>`.
extension BatonError: DBusErrorConvertible {
    public static let namePrefix = "org.baton.Handoff1.Error."

    public var dbusError: DBusError {
        DBusError(name: Self.namePrefix + code.rawValue, message: message)
    }
}

/// Conversions between domain values and the `a{sv}` records of the contract.
enum Records {
    /// A scene's object path (see `SceneAddress`).
    static func scenePath(_ id: String) -> ObjectPath {
        // Ids are normalized UUIDs (hex and dashes), so the path always validates.
        (try? ObjectPath(validating: SceneAddress.path(forID: id))) ?? "/org/baton/Handoff1/scene"
    }

    /// The scene id named by an object path or an id, as callers may give either.
    static func sceneID(from text: String) throws(BatonError) -> String {
        try SceneAddress.id(from: text)
    }

    static func record(_ type: ActivityType) -> DBusValue {
        var fields: [String: DBusValue] = [
            "type": .string(type.type), "app_id": .string(type.appID), "title": .string(type.title),
            "handler": .string(type.handler ?? ""), "handler_path": .string(type.handlerPath),
            "required_keys": .strings(type.requiredKeys),
        ]
        if let payloadType = type.payloadType { fields["payload_type"] = .string(payloadType) }
        return .record(fields)
    }

    /// Fields in key order, as `DBusValue.record` keeps them: listed so, nothing is sorted.
    static func record(_ activity: Activity) -> DBusValue {
        var fields: [(key: String, value: DBusValue)] = [
            ("app_id", .string(activity.appID)), ("created_at", .uint64(activity.createdAt)),
            ("eligible_for_handoff", .boolean(activity.eligibleForHandoff)),
            ("eligible_for_search", .boolean(activity.eligibleForSearch)),
        ]
        fields.reserveCapacity(16)
        if let value = activity.expiresAt { fields.append(("expires_at", .uint64(value))) }
        fields += [("id", .string(activity.id)), ("keywords", .strings(activity.keywords)), ("payload", .string(activity.payload))]
        if let value = activity.payloadType { fields.append(("payload_type", .string(value))) }
        if let value = activity.persistentID { fields.append(("persistent_id", .string(value))) }
        if let value = activity.sceneID { fields.append(("scene", .objectPath(scenePath(value)))) }
        if let value = activity.targetContentID { fields.append(("target_content_id", .string(value))) }
        fields += [("title", .string(activity.title)), ("type", .string(activity.type)), ("updated_at", .uint64(activity.updatedAt))]
        if let value = activity.webpageURL { fields.append(("webpage_url", .string(value))) }
        return .record(fields)
    }

    static func records(_ activities: [Activity]) -> DBusValue {
        .array(.dictionary(key: .string, value: .variant), activities.map(record))
    }

    static func value(_ storage: StorageValue) -> DBusValue {
        switch storage {
        case .bool(let v): .boolean(v)
        case .int(let v): .int64(v)
        case .double(let v): .double(v)
        case .string(let v): .string(v)
        case .bytes(let v): .array(.byte, v.map { .byte($0) })
        }
    }

    /// A scene storage value from a D-Bus value: booleans, integers, doubles,
    /// strings and byte arrays; everything else is refused with what to do instead.
    static func storageValue(_ value: DBusValue, key: String) throws(BatonError) -> StorageValue {
        switch value.unwrapped {
        case .boolean(let v): return .bool(v)
        case .byte(let v): return .int(Int64(v))
        case .int16(let v): return .int(Int64(v))
        case .uint16(let v): return .int(Int64(v))
        case .int32(let v): return .int(Int64(v))
        case .uint32(let v): return .int(Int64(v))
        case .int64(let v): return .int(v)
        case .uint64(let v):
            guard let v = Int64(exactly: v) else { throw .invalidArgument("the value of '\(printable(key))' is too large for a 64-bit integer") }
            return .int(v)
        case .double(let v): return .double(v)
        case .string(let v): return .string(v)
        case .array(.byte, let bytes): return .bytes(bytes.compactMap(\.byteValue))
        case let other:
            throw .invalidArgument("""
                the value of '\(printable(key))' has type '\(other.type.signature)'; scene storage holds b, integers, d, s \
                and ay — store Codable values as JSON strings
                """)
        }
    }

    static func storageRecord(_ values: [String: StorageValue]) -> DBusValue {
        .record(values.mapValues(value))
    }
}
