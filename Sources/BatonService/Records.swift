import BatonContract
import BatonCore
import DBus

/// Domain errors as the contract names them: `org.baton.Handoff1.Error.<Code>`.
extension BatonError: DBusErrorConvertible {
    public var dbusError: DBusError {
        DBusError(name: dbusName, message: message)
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

    /// An activity's record, as a value (for calls to handlers).
    static func record(_ activity: Activity) -> DBusValue {
        var builder = RecordBuilder()
        fields(of: activity, to: &builder)
        return builder.value
    }

    /// A reply of one activity's record (`a{sv}`), written straight into the message.
    static func encodedRecord(_ activity: Activity) -> EncodedBody {
        EncodedBody { body throws(DBusError) in
            try body.record { record throws(DBusError) in try fields(of: activity, to: &record) }
        }
    }

    /// A reply of activities' records (`aa{sv}`), written straight into the message. Built as
    /// `DBusValue`s, then checked and marshalled, a search returning 10 records took 1.13M
    /// instructions a call, and 0.85M this way (callgrind, 10 000 notes).
    static func encodedRecords(_ activities: [Activity]) -> EncodedBody {
        EncodedBody { body throws(DBusError) in
            try body.array(of: .dictionary(key: .string, value: .variant)) { records throws(DBusError) in
                for activity in activities {
                    try records.record { record throws(DBusError) in try fields(of: activity, to: &record) }
                }
            }
        }
    }

    /// The fields of an activity's record, in key order.
    private static func fields<Fields: RecordFields & ~Copyable>(
        of activity: Activity, to record: inout Fields
    ) throws(Fields.Failure) {
        try record.field("app_id", string: activity.appID)
        try record.field("created_at", uint64: activity.createdAt)
        try record.field("eligible_for_handoff", boolean: activity.eligibleForHandoff)
        try record.field("eligible_for_search", boolean: activity.eligibleForSearch)
        if let value = activity.expiresAt { try record.field("expires_at", uint64: value) }
        try record.field("id", string: activity.id)
        try record.field("keywords", strings: activity.keywords)
        try record.field("payload", string: activity.payload)
        if let value = activity.payloadType { try record.field("payload_type", string: value) }
        if let value = activity.persistentID { try record.field("persistent_id", string: value) }
        if let value = activity.sceneID { try record.field("scene", objectPath: scenePath(value)) }
        if let value = activity.targetContentID { try record.field("target_content_id", string: value) }
        try record.field("title", string: activity.title)
        try record.field("type", string: activity.type)
        try record.field("updated_at", uint64: activity.updatedAt)
        if let value = activity.webpageURL { try record.field("webpage_url", string: value) }
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
