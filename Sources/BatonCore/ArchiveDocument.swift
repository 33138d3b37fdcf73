// JSON and base64 only: FoundationEssentials has them without Foundation's ICU data (34 MB in
// every program linked with it), so `baton`, which needs no more of Foundation, is small.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Everything of the user's that Baton keeps, as one JSON document: what `Export` gives and
/// `Import` takes (docs/guide.md, "Export and import").
///
/// The document is versioned (`format`, `version`); keys are sorted and lists ordered, so
/// exporting the same data twice gives the same text. A payload travels as the JSON text
/// it was advertised with (a string), so it comes back byte for byte. Scene storage keeps
/// its types: each value is an object with one of `bool`, `int`, `double`, `string` or
/// `bytes` (base64).
///
/// `decode` checks a document as the bus checks calls: strict JSON, every name, text and
/// payload against the limits; a document that fails anywhere is refused whole.
public struct ArchiveDocument: Equatable, Sendable {
    public var types: [ActivityType] = []
    /// This machine's live activities.
    public var activities: [Activity] = []
    public var history: [PastActivity] = []
    public var scenes: [SceneContents] = []

    public struct SceneContents: Equatable, Sendable {
        public var scene: Scene
        public var storage: [String: StorageValue]
        public init(scene: Scene, storage: [String: StorageValue]) {
            self.scene = scene
            self.storage = storage
        }
    }

    public static let format = "org.baton.Handoff1.export"
    public static let version = 1

    public init(types: [ActivityType] = [], activities: [Activity] = [], history: [PastActivity] = [], scenes: [SceneContents] = []) {
        self.types = types
        self.activities = activities
        self.history = history
        self.scenes = scenes
    }

    // MARK: Writing

    /// The document's text: pretty-printed, keys sorted, lists in a fixed order.
    public func encoded() -> String {
        let wire = Wire(
            format: Self.format, version: Self.version,
            types: types.sorted { $0.type < $1.type }.map(WireType.init),
            activities: activities.sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }.map { WireActivity($0, ended: nil) },
            history: history.sorted { ($0.endedAt, $0.activity.id) < ($1.endedAt, $1.activity.id) }.map { WireActivity($0.activity, ended: $0) },
            scenes: scenes.sorted { ($0.scene.createdAt, $0.scene.id) < ($1.scene.createdAt, $1.scene.id) }.map(WireScene.init))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encoding these plain structs cannot fail: no floating-point value is non-finite (storage refuses them).
        guard let data = try? encoder.encode(wire) else { return "{}" }
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    // MARK: Reading

    /// The document `text` holds, checked whole; `registered` are the types the daemon
    /// already has (an activity may be of one of those or of one in the document).
    public static func decode(_ text: String, registered: [ActivityType], limits: Limits) throws(BatonError) -> ArchiveDocument {
        // Strict first (duplicate keys, NaN, lone surrogates, depth): then Foundation may read it.
        let top: [StrictJSON.Member]
        do {
            top = try StrictJSON.parseObject(text, maxBytes: .max, maxDepth: 8)
        } catch where error.code == .invalidPayload {
            throw .invalidArgument("the export is not strict JSON: \(error.message)")
        }
        guard let format = top.first(where: { $0.key == "format" }), format.rawValue == "\"\(Self.format)\"" else {
            throw .invalidArgument("this is not a Baton export: its \"format\" is not \"\(Self.format)\"")
        }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(text.utf8))
        } catch {
            throw .invalidArgument("the export does not have the shape of format \(Self.format) version \(Self.version): \(describe(error))")
        }
        guard wire.version == Self.version else {
            throw .invalidArgument("the export is version \(wire.version); this batond reads version \(Self.version) (a newer baton made it?)")
        }
        var document = ArchiveDocument()
        for (index, type) in wire.types.enumerated() {
            document.types.append(try at("types[\(index)]") { () throws(BatonError) in try type.checked(limits: limits) })
        }
        // A type registered here stays as it is (Import keeps what is here): its activities must fit it.
        var known = Dictionary(document.types.map { ($0.type, $0) }, uniquingKeysWith: { $1 })
        for type in registered { known[type.type] = type }
        for (index, activity) in wire.activities.enumerated() {
            document.activities.append(try at("activities[\(index)]") { () throws(BatonError) in try activity.checked(types: known, limits: limits) })
        }
        for (index, past) in wire.history.enumerated() {
            let activity = try at("history[\(index)]") { () throws(BatonError) in try past.checked(types: known, limits: limits) }
            guard let endedAt = past.ended_at, let state = past.end_reason, ["invalidated", "expired", "evicted"].contains(state) else {
                throw .invalidArgument("history[\(index)] needs ended_at and end_reason (invalidated, expired or evicted)")
            }
            let detail = past.end_detail ?? state
            try at("history[\(index)]") { () throws(BatonError) in try Validate.text(detail, what: "end_detail", limit: limits.titleBytes) }
            document.history.append(PastActivity(activity: activity, endedAt: endedAt, endState: state, endReason: detail))
        }
        for (index, scene) in wire.scenes.enumerated() {
            document.scenes.append(try at("scenes[\(index)]") { () throws(BatonError) in try scene.checked(limits: limits) })
        }
        for (what, ids) in [("activity", document.activities.map(\.id) + document.history.map(\.activity.id)),
                            ("scene", document.scenes.map(\.scene.id)), ("type", document.types.map(\.type))] {
            var seen = Set<String>()
            if let twice = ids.first(where: { !seen.insert($0).inserted }) {
                throw .invalidArgument("the export has \(what) \(twice) twice")
            }
        }
        return document
    }

    /// Runs `check`, saying where in the document what it throws was found.
    private static func at<T>(_ place: String, _ check: () throws(BatonError) -> T) throws(BatonError) -> T {
        do {
            return try check()
        } catch {
            throw BatonError(error.code, "\(place): \(error.message)", biggestKeys: error.biggestKeys)
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            "\(path(context.codingPath + [key])) is missing"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context), DecodingError.dataCorrupted(let context):
            "\(path(context.codingPath)) \(context.debugDescription.prefix(1).lowercased() + context.debugDescription.dropFirst())"
        default:
            "\(error)"
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().drop { $0 == "." }.description
    }
}

// MARK: - The document on the wire (snake_case names, as in the D-Bus records)

private struct Wire: Codable {
    var format: String
    var version: Int
    var types: [WireType]
    var activities: [WireActivity]
    var history: [WireActivity]
    var scenes: [WireScene]
}

private struct WireType: Codable {
    var type, app_id, title, handler_path: String
    var handler, payload_type: String?
    var required_keys: [String]

    init(_ type: ActivityType) {
        self.type = type.type
        app_id = type.appID
        title = type.title
        handler = type.handler
        handler_path = type.handlerPath
        required_keys = type.requiredKeys
        payload_type = type.payloadType
    }

    func checked(limits: Limits) throws(BatonError) -> ActivityType {
        var options = ["title": title, "handler_path": handler_path, "required_keys": required_keys.joined(separator: ",")]
        options["handler"] = handler
        options["payload_type"] = payload_type
        return try ActivityType.registration(type: type, appID: app_id, options: options, limits: limits)
    }
}

/// An activity in the document: its fields by name (`ActivityField`), and a past one's end.
private struct WireActivity: Codable {
    var activity: Activity
    var ended_at: UInt64?
    var end_reason, end_detail: String?

    init(_ activity: Activity, ended: PastActivity?) {
        self.activity = activity
        ended_at = ended?.endedAt
        end_reason = ended?.endState
        end_detail = ended?.endReason
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: FieldKey.self)
        activity = try ActivityField.decode(from: container, as: .export)
        ended_at = try container.decodeIfPresent(UInt64.self, forKey: FieldKey("ended_at"))
        end_reason = try container.decodeIfPresent(String.self, forKey: FieldKey("end_reason"))
        end_detail = try container.decodeIfPresent(String.self, forKey: FieldKey("end_detail"))
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: FieldKey.self)
        try ActivityField.encode(activity, as: .export, to: &container)
        try container.encodeIfPresent(ended_at, forKey: FieldKey("ended_at"))
        try container.encodeIfPresent(end_reason, forKey: FieldKey("end_reason"))
        try container.encodeIfPresent(end_detail, forKey: FieldKey("end_detail"))
    }

    /// The activity, checked as every activity is (`Activity.validate`), with its id, times and type's app.
    func checked(types: [String: ActivityType], limits: Limits) throws(BatonError) -> Activity {
        var activity = self.activity
        activity.id = try Identifier.normalize(activity.id)
        guard let registration = types[activity.type] else {
            throw .unknownActivityType("activity type \(printable(activity.type)) is neither in the export nor registered")
        }
        guard registration.appID == activity.appID else {
            throw .invalidArgument("activity type \(activity.type) belongs to \(registration.appID), not \(printable(activity.appID))")
        }
        try activity.validate(FieldContext(limits: limits, type: registration))
        return activity
    }
}

private struct WireScene: Codable {
    var id, app_id, title: String
    var activity_id: String?
    var created_at, last_active_at: UInt64
    var storage: [String: WireValue]

    init(_ contents: ArchiveDocument.SceneContents) {
        id = contents.scene.id
        app_id = contents.scene.appID
        title = contents.scene.title
        activity_id = contents.scene.activityID
        created_at = contents.scene.createdAt
        last_active_at = contents.scene.lastActiveAt
        storage = contents.storage.mapValues(WireValue.init)
    }

    func checked(limits: Limits) throws(BatonError) -> ArchiveDocument.SceneContents {
        let id = try Identifier.normalize(self.id)
        try Validate.reverseDNS(app_id, what: "app id", limits: limits)
        try Validate.text(title, what: "the title", limit: limits.titleBytes)
        let activity = try activity_id.map { text throws(BatonError) in try Identifier.normalize(text) }
        var values: [String: StorageValue] = [:]
        var total = 0
        for key in storage.keys.sorted() {
            guard let wire = storage[key] else { continue }
            try Validate.storageKey(key, limits: limits)
            let value = try wire.value(key: key)
            try value.validate(key: key, limits: limits)
            values[key] = value
            total += key.utf8.count + value.byteSize
        }
        guard total <= limits.sceneStorageBytes else {
            throw SizeReport.error("the scene's storage", bytes: total, limit: limits.sceneStorageBytes,
                                   keys: values.map { KeySize(key: $0.key, bytes: $0.key.utf8.count + $0.value.byteSize) })
        }
        return .init(scene: Scene(id: id, appID: app_id, title: title, activityID: activity, createdAt: created_at, lastActiveAt: last_active_at),
                     storage: values)
    }
}

/// A typed storage value: exactly one of its fields.
private struct WireValue: Codable {
    var bool: Bool?
    var int: Int64?
    var double: Double?
    var string: String?
    var bytes: String?

    init(_ value: StorageValue) {
        switch value {
        case .bool(let v): bool = v
        case .int(let v): int = v
        case .double(let v): double = v
        case .string(let v): string = v
        case .bytes(let v): bytes = Data(v).base64EncodedString()
        }
    }

    func value(key: String) throws(BatonError) -> StorageValue {
        let given = [bool.map(StorageValue.bool), int.map(StorageValue.int), double.map(StorageValue.double), string.map(StorageValue.string)]
            .compactMap { $0 }
        let decoded = try bytes.map { text throws(BatonError) -> StorageValue in
            guard let data = Data(base64Encoded: text) else { throw .invalidArgument("the bytes of '\(printable(key))' are not base64") }
            return .bytes(Array(data))
        }
        let all = given + (decoded.map { [$0] } ?? [])
        guard all.count == 1, let value = all.first else {
            throw .invalidArgument("the value of '\(printable(key))' needs exactly one of bool, int, double, string, bytes")
        }
        return value
    }
}
