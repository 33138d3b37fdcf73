import BatonCore
import DBus

/// The contract's records (`a{sv}`) and scene values, encoded and decoded in one place.
///
/// Records are dictionaries so that fields can be added without breaking callers: a
/// decoder takes what it knows and ignores the rest; a field a record lacks gets the
/// contract's default (false for `eligible_for_search`, true for `eligible_for_handoff` and
/// `eligible_for_history`).
public enum Records {
    // MARK: Activity types

    /// A type's record, as `ListActivityTypes` gives it.
    public static func record(_ type: ActivityType) -> DBusValue {
        var fields: [String: DBusValue] = [
            Key.type: .string(type.type), Key.appID: .string(type.appID), Key.title: .string(type.title),
            Key.handler: .string(type.handler ?? ""), Key.handlerPath: .string(type.handlerPath),
            Key.requiredKeys: .strings(type.requiredKeys),
        ]
        if let payloadType = type.payloadType { fields[Key.payloadType] = .string(payloadType) }
        return .record(fields)
    }

    /// The type a record describes; nil when it lacks `type` or `app_id`.
    public static func activityType(_ record: DBusValue) -> ActivityType? {
        guard let f = fields(record), let type = f[Key.type]?.stringValue, let app = f[Key.appID]?.stringValue else { return nil }
        let handler = f[Key.handler]?.stringValue ?? ""
        return ActivityType(
            type: type, appID: app, title: f[Key.title]?.stringValue ?? "", handler: handler.isEmpty ? nil : handler,
            handlerPath: f[Key.handlerPath]?.stringValue ?? "/",
            requiredKeys: f[Key.requiredKeys].flatMap([String].init(dbusValue:)) ?? [],
            payloadType: f[Key.payloadType]?.stringValue)
    }

    // MARK: Activities

    /// An activity's record, as a value (for calls to handlers).
    public static func record(_ activity: Activity) -> DBusValue {
        var builder = RecordBuilder()
        fields(of: activity, to: &builder)
        return builder.value
    }

    /// A reply of one activity's record (`a{sv}`), written straight into the message.
    /// `deviceNames`: the other devices' names by id, for `device_name`.
    public static func encodedRecord(_ activity: Activity, deviceNames: [String: String] = [:]) -> EncodedBody {
        EncodedBody { body throws(DBusError) in
            try body.record { record throws(DBusError) in try fields(of: activity, deviceNames: deviceNames, to: &record) }
        }
    }

    /// A reply of activities' records (`aa{sv}`), written straight into the message. Built as
    /// `DBusValue`s, then checked and marshalled, a search returning 10 records took 1.13M
    /// instructions a call, and 0.85M this way (callgrind, 10 000 notes).
    public static func encodedRecords(_ activities: [Activity], deviceNames: [String: String] = [:]) -> EncodedBody {
        EncodedBody { body throws(DBusError) in
            try body.array(of: .dictionary(key: .string, value: .variant)) { records throws(DBusError) in
                for activity in activities {
                    try records.record { record throws(DBusError) in try fields(of: activity, deviceNames: deviceNames, to: &record) }
                }
            }
        }
    }

    /// Past activities' records (`aa{sv}`), as `History` gives them: an activity's record
    /// with `end_detail`, `end_reason` and `ended_at`.
    public static func encodedRecords(_ past: [PastActivity], deviceNames: [String: String] = [:]) -> EncodedBody {
        EncodedBody { body throws(DBusError) in
            try body.array(of: .dictionary(key: .string, value: .variant)) { records throws(DBusError) in
                for each in past {
                    try records.record { record throws(DBusError) in
                        try fields(of: each.activity, deviceNames: deviceNames, ended: each, to: &record)
                    }
                }
            }
        }
    }

    /// The declared fields in their names' order: a record's keys come sorted.
    private static let recordOrder = ActivityField.declarations.sorted { $0.name < $1.name }.map { ($0.field, $0.name, $0.origin) }

    /// The fields of an activity's record, in key order; with `ended`, a past one's after them.
    /// Absent values are left out; the scene is its object path; the device and its name are
    /// there for another machine's activity only.
    private static func fields<Fields: RecordFields & ~Copyable>(
        of activity: Activity, deviceNames: [String: String] = [:], ended: PastActivity? = nil, to record: inout Fields
    ) throws(Fields.Failure) {
        for (field, name, origin) in recordOrder {
            switch (origin, field.value(of: activity)) {
            case (.scene, .optionalText(let id?)): try record.field(name, objectPath: SceneAddress.objectPath(forID: id))
            case (.scene, _): break
            case (.device, .text(let device)):
                guard !device.isEmpty else { break }
                try record.field(name, string: device)
                if let deviceName = deviceNames[device] { try record.field(Key.deviceName, string: deviceName) }
            case (_, .text(let value)): try record.field(name, string: value)
            case (_, .optionalText(let value?)): try record.field(name, string: value)
            case (_, .flag(let value)): try record.field(name, boolean: value)
            case (_, .list(let value)): try record.field(name, strings: value)
            case (_, .time(let value)): try record.field(name, uint64: value)
            case (_, .optionalTime(let value?)): try record.field(name, uint64: value)
            case (_, .optionalText(nil)), (_, .optionalTime(nil)): break
            }
        }
        if let ended {
            try record.field(Key.endDetail, string: ended.endReason)
            try record.field(Key.endReason, string: ended.endState)
            try record.field(Key.endedAt, uint64: ended.endedAt)
        }
    }

    /// The activity a record describes; nil when it lacks a required field (`id`, `type`,
    /// `app_id`, …). A field it lacks or gives in another type gets its default.
    public static func activity(_ record: DBusValue) -> Activity? {
        guard let f = fields(record) else { return nil }
        var activity = Activity.empty
        for declaration in ActivityField.declarations {
            let given = f[declaration.name]
            let value: FieldValue? = switch declaration.kind {
            case .text: given?.stringValue.map(FieldValue.text)
            case .optionalText where declaration.origin == .scene:
                given?.objectPathValue.flatMap { try? SceneAddress.id(from: $0.text) }.map(FieldValue.optionalText)
            case .optionalText: given?.stringValue.map(FieldValue.optionalText)
            case .flag: given?.boolValue.map(FieldValue.flag)
            case .list: given.flatMap([String].init(dbusValue:)).map(FieldValue.list)
            case .time: given?.uint64Value.map(FieldValue.time)
            case .optionalTime: given?.uint64Value.map(FieldValue.optionalTime)
            }
            if value == nil && declaration.required { return nil }
            declaration.set(&activity, value ?? declaration.defaultValue)
        }
        return activity
    }

    /// Counts as `Import` and `ForgetApp` reply them (`a{su}`), by name.
    public static func counts(_ reply: [DBusValue]) -> [String: Int] {
        Dictionary((reply.first?.dictionaryEntries ?? []).compactMap { entry in
            entry.key.stringValue.flatMap { key in entry.value.unwrapped.uint32Value.map { (key, Int($0)) } }
        }, uniquingKeysWith: { $1 })
    }

    /// The past activity a `History` record describes; nil when it lacks an activity's keys or `ended_at`.
    public static func pastActivity(_ record: DBusValue) -> PastActivity? {
        guard let activity = activity(record), let f = fields(record), let endedAt = f[Key.endedAt]?.uint64Value else { return nil }
        return PastActivity(activity: activity, endedAt: endedAt, endState: f[Key.endReason]?.stringValue ?? "invalidated",
                            endReason: f[Key.endDetail]?.stringValue ?? "")
    }

    /// The record's fields with their variants unwrapped; nil when it is not an `a{sv}`.
    public static func fields(_ record: DBusValue) -> [String: DBusValue]? {
        record.stringKeyedValue?.mapValues(\.unwrapped)
    }

    // MARK: Scene storage

    /// A storage value as the daemon sends it: b, x, d, s or ay.
    public static func value(_ storage: StorageValue) -> DBusValue {
        switch storage {
        case .bool(let v): .boolean(v)
        case .int(let v): .int64(v)
        case .double(let v): .double(v)
        case .string(let v): .string(v)
        case .bytes(let v): .bytes(v)
        }
    }

    /// A scene storage value from a D-Bus value: booleans, integers, doubles,
    /// strings and byte arrays; everything else is refused with what to do instead.
    public static func storageValue(_ value: DBusValue, key: String) throws(BatonError) -> StorageValue {
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
        case .bytes(let bytes): return .bytes(bytes)
        case .array(.byte, let bytes): return .bytes(bytes.compactMap(\.byteValue))
        case let other:
            throw .invalidArgument("""
                the value of '\(printable(key))' has type '\(other.type.signature)'; scene storage holds b, integers, d, s \
                and ay — store Codable values as JSON strings
                """)
        }
    }

    /// A scene's storage as one record (`GetAll`, a handler's answer).
    public static func storageRecord(_ values: [String: StorageValue]) -> DBusValue {
        .record(values.mapValues(value))
    }

    // MARK: Restoring and explaining

    /// `RestoreScenes`' reply: each scene with why it comes back, `a(os)`.
    public static func restored(_ scenes: [Scene]) -> DBusValue {
        .array(.structure([.objectPath, .string]), scenes.map {
            .structure([.objectPath(SceneAddress.objectPath(forID: $0.id)), .string($0.restoreReason.rawValue)])
        })
    }

    /// The scenes of a `RestoreScenes` reply with their reasons; entries it cannot read are left out.
    public static func restored(_ reply: DBusValue?) -> [(scene: ObjectPath, reason: Scene.RestoreReason)] {
        (reply?.arrayValue ?? []).compactMap { entry in
            guard case .structure(let fields) = entry, fields.count == 2, let path = fields[0].objectPathValue,
                  let reason = fields[1].stringValue.flatMap(Scene.RestoreReason.init(rawValue:)) else { return nil }
            return (path, reason)
        }
    }

    /// `Explain`'s answer.
    public struct Explanation: Sendable, Equatable {
        public var id: String
        /// `live`, `expired`, `invalidated`, `evicted` or `unknown`.
        public var state: String
        public var continuable: Bool
        public var searchable: Bool
        /// Sentences.
        public var reasons: [String]
        public var lastContinuation: LastContinuation?

        public struct LastContinuation: Sendable, Equatable {
            public var scene: String
            /// `pending`, `ready`, `refused`, `failed` or `discarded`.
            public var state: String
            public var error: String
            public var at: UInt64

            public init(scene: String, state: String, error: String, at: UInt64) {
                self.scene = scene
                self.state = state
                self.error = error
                self.at = at
            }
        }

        public init(id: String, state: String, continuable: Bool, searchable: Bool, reasons: [String],
                    lastContinuation: LastContinuation? = nil) {
            self.id = id
            self.state = state
            self.continuable = continuable
            self.searchable = searchable
            self.reasons = reasons
            self.lastContinuation = lastContinuation
        }

        public var record: DBusValue {
            var fields: [String: DBusValue] = [
                "id": .string(id), "state": .string(state), "continuable": .boolean(continuable),
                "searchable": .boolean(searchable), "reasons": .strings(reasons),
            ]
            if let last = lastContinuation {
                fields["last_continuation"] = .record([
                    "scene": .objectPath(SceneAddress.objectPath(forID: last.scene)), "state": .string(last.state),
                    "error": .string(last.error), "at": .uint64(last.at),
                ])
            }
            return .record(fields)
        }

        /// The explanation a record gives; nil when it lacks `id` or `state`.
        public init?(record: DBusValue) {
            guard let f = fields(record), let id = f["id"]?.stringValue, let state = f["state"]?.stringValue else { return nil }
            var last: LastContinuation?
            if let l = f["last_continuation"].flatMap(fields), let scene = l["scene"]?.objectPathValue {
                last = LastContinuation(scene: (try? SceneAddress.id(from: scene.text)) ?? scene.text, state: l["state"]?.stringValue ?? "",
                                        error: l["error"]?.stringValue ?? "", at: l["at"]?.uint64Value ?? 0)
            }
            self.init(id: id, state: state, continuable: f["continuable"]?.boolValue ?? false, searchable: f["searchable"]?.boolValue ?? false,
                      reasons: f["reasons"].flatMap([String].init(dbusValue:)) ?? [], lastContinuation: last)
        }
    }

    /// The record fields' names.
    public enum Key {
        // An activity's fields: their declared names (ActivityField).
        public static let id = ActivityField.id.name
        public static let type = ActivityField.type.name
        public static let appID = ActivityField.appID.name
        public static let title = ActivityField.title.name
        public static let payload = ActivityField.payload.name
        public static let payloadType = ActivityField.payloadType.name
        public static let targetContentID = ActivityField.targetContentID.name
        public static let persistentID = ActivityField.persistentID.name
        public static let keywords = ActivityField.keywords.name
        public static let webpageURL = ActivityField.webpageURL.name
        public static let eligibleForHandoff = ActivityField.eligibleForHandoff.name
        public static let eligibleForSearch = ActivityField.eligibleForSearch.name
        public static let eligibleForHistory = ActivityField.eligibleForHistory.name
        /// A past activity's: how it ended (`invalidated`, `expired`, `evicted`), why in a sentence, when.
        public static let endReason = "end_reason"
        public static let endDetail = "end_detail"
        public static let endedAt = "ended_at"
        public static let scene = ActivityField.sceneID.name
        public static let createdAt = ActivityField.createdAt.name
        /// The sync id of the device that advertised it; absent for this machine's own.
        public static let device = ActivityField.deviceID.name
        /// That device's name, as it calls itself.
        public static let deviceName = "device_name"
        public static let updatedAt = ActivityField.updatedAt.name
        public static let expiresAt = ActivityField.expiresAt.name
        public static let handler = "handler"
        public static let handlerPath = "handler_path"
        public static let requiredKeys = "required_keys"
    }
}
