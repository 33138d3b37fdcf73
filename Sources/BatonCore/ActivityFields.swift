/// An activity's fields, each declared once.
///
/// A field's declaration (`declaration`, with `value(of:)` and `set(_:in:)`) says everything the layers need: its name outside Swift
/// (the D-Bus record key, the `Advertise`/`Update` option, the export's key), its SQL column, its
/// key in sync records, who sets it, whether documents must carry it, and its check. The store's
/// row, the D-Bus record, the sync body, the export, BatonKit's options and the CLI's `show` are
/// walks over `ActivityField.declarations`, each with one `switch` over the few kinds of value;
/// the one validation (`Activity.validate`) runs every field's check. A new field is a case here
/// with its declaration and its two accessor arms (the compiler asks for each), a property of
/// `Activity`, a migration adding its column, and, if apps set it, BatonKit's property
/// (docs/developing.md, "Developing").
public enum ActivityField: CaseIterable, Sendable {
    // In the order of the store's columns: `id` first (the row update binds it as `?1`).
    case id, type, appID, title, payload, payloadType, targetContentID, persistentID, keywords, webpageURL
    case eligibleForHandoff, eligibleForSearch, sceneID, createdAt, updatedAt, expiresAt, deviceID, eligibleForHistory

    private var declaration: Declaration {
        switch self {
        case .id:
            .text("id", from: .daemon, required: true) { value, _ throws(BatonError) in
                guard try Identifier.normalize(value, what: "the activity's id") == value else {
                    throw .invalidArgument("the activity's id '\(printable(value))' is not in lowercase")
                }
            }
        case .type:
            .text("type", from: .daemon, required: true) { value, context throws(BatonError) in
                try Validate.reverseDNS(value, what: "activity type", limits: context.limits)
            }
        case .appID:
            .text("app_id", from: .daemon, sync: "appID", required: true) { value, context throws(BatonError) in
                try Validate.reverseDNS(value, what: "app id", limits: context.limits)
            }
        case .title:
            .text("title", from: .argument, required: true, example: "Field walk: the title") { value, context throws(BatonError) in
                try Validate.text(value, what: "the title", limit: context.limits.titleBytes)
            }
        case .payload:
            .text("payload", from: .argument, required: true, example: #"{"id":"walk","page":7}"#) { value, context throws(BatonError) in
                let members = try StrictJSON.parseObject(value, maxBytes: context.limits.payloadBytes, maxDepth: context.limits.payloadDepth)
                try context.type?.checkRequiredKeys(members)
            }
        case .payloadType:
            .optionalText("payload_type", from: .option, sync: "payloadType", example: "WalkPayload", check: Check.name)
        case .targetContentID:
            .optionalText("target_content_id", from: .option, sync: "targetContentID", example: "walk-content",
                          check: Check.name)
        case .persistentID:
            .optionalText("persistent_id", from: .option, sync: "persistentID", example: "walk-saved", check: Check.name)
        case .keywords:
            .list("keywords", from: .option, example: ["walk", "fields"]) { value, context throws(BatonError) in
                guard value.count <= context.limits.keywords else {
                    throw .quotaExceeded("\(value.count) keywords; the limit is \(context.limits.keywords)")
                }
                for keyword in value {
                    try Validate.text(keyword, what: "keyword '\(printable(keyword))'", limit: context.limits.keywordBytes)
                    try Validate.noControlCharacters(keyword, what: "keyword '\(printable(keyword))'")
                    // The option's form is comma-separated: a keyword with a comma could not be set again.
                    guard !keyword.contains(",") else { throw .invalidArgument("keyword '\(printable(keyword))' contains a comma") }
                }
            }
        case .webpageURL:
            .optionalText("webpage_url", from: .option, sync: "webpageURL", example: "https://example.org/walk") {
                value, context throws(BatonError) in
                try Validate.text(value, what: "webpage_url", limit: context.limits.urlBytes)
                try Validate.webPageURL(value)
            }
        case .eligibleForHandoff:
            .flag("eligible_for_handoff", default: true, sync: "eligibleForHandoff")
        case .eligibleForSearch:
            .flag("eligible_for_search", default: false, sync: "eligibleForSearch")
        case .eligibleForHistory:
            .flag("eligible_for_history", default: true, sync: "eligibleForHistory")
        case .sceneID:
            // Scenes stay on their machine: neither synced nor exported. On the bus, an object path.
            .optionalText("scene", from: .scene, column: "scene_id")
        case .createdAt:
            .time("created_at", sync: "createdAt", required: true)
        case .updatedAt:
            .time("updated_at", sync: "updatedAt", required: true)
        case .expiresAt:
            .optionalTime("expires_at", sync: "expiresAt")
        case .deviceID:
            // The device that advertised it ("" for this machine's own); a sync log says it for its records.
            .text("device", from: .device, column: "device_id")
        }
    }

    /// The field's value in `activity`. A switch rather than key paths, as this runs for every
    /// field of every record (Benchmarks/README, "One declaration of an activity's fields").
    public func value(of activity: Activity) -> FieldValue {
        switch self {
        case .id: .text(activity.id)
        case .type: .text(activity.type)
        case .appID: .text(activity.appID)
        case .title: .text(activity.title)
        case .payload: .text(activity.payload)
        case .payloadType: .optionalText(activity.payloadType)
        case .targetContentID: .optionalText(activity.targetContentID)
        case .persistentID: .optionalText(activity.persistentID)
        case .keywords: .list(activity.keywords)
        case .webpageURL: .optionalText(activity.webpageURL)
        case .eligibleForHandoff: .flag(activity.eligibleForHandoff)
        case .eligibleForSearch: .flag(activity.eligibleForSearch)
        case .eligibleForHistory: .flag(activity.eligibleForHistory)
        case .sceneID: .optionalText(activity.sceneID)
        case .createdAt: .time(activity.createdAt)
        case .updatedAt: .time(activity.updatedAt)
        case .expiresAt: .optionalTime(activity.expiresAt)
        case .deviceID: .text(activity.deviceID)
        }
    }

    /// Sets the field in `activity`; a value of another kind than the field's changes nothing.
    public func set(_ value: FieldValue, in activity: inout Activity) {
        switch (self, value) {
        case (.id, .text(let v)): activity.id = v
        case (.type, .text(let v)): activity.type = v
        case (.appID, .text(let v)): activity.appID = v
        case (.title, .text(let v)): activity.title = v
        case (.payload, .text(let v)): activity.payload = v
        case (.payloadType, .optionalText(let v)): activity.payloadType = v
        case (.targetContentID, .optionalText(let v)): activity.targetContentID = v
        case (.persistentID, .optionalText(let v)): activity.persistentID = v
        case (.keywords, .list(let v)): activity.keywords = v
        case (.webpageURL, .optionalText(let v)): activity.webpageURL = v
        case (.eligibleForHandoff, .flag(let v)): activity.eligibleForHandoff = v
        case (.eligibleForSearch, .flag(let v)): activity.eligibleForSearch = v
        case (.eligibleForHistory, .flag(let v)): activity.eligibleForHistory = v
        case (.sceneID, .optionalText(let v)): activity.sceneID = v
        case (.createdAt, .time(let v)): activity.createdAt = v
        case (.updatedAt, .time(let v)): activity.updatedAt = v
        case (.expiresAt, .optionalTime(let v)): activity.expiresAt = v
        case (.deviceID, .text(let v)): activity.deviceID = v
        case (.id, _), (.type, _), (.appID, _), (.title, _), (.payload, _), (.payloadType, _), (.targetContentID, _),
             (.persistentID, _), (.keywords, _), (.webpageURL, _), (.eligibleForHandoff, _), (.eligibleForSearch, _),
             (.eligibleForHistory, _), (.sceneID, _), (.createdAt, _), (.updatedAt, _), (.expiresAt, _), (.deviceID, _):
            break
        }
    }

    /// Each field's kind, in `allCases`' order: what the hot walks (a row, a record) read
    /// rather than copying a `Declaration` per field.
    public static let kinds = declarations.map(\.kind)

    /// Every field's declaration, in `allCases`' order (made once: the walks run on every call).
    public static let declarations: [Declaration] = allCases.map { field in
        var declaration = field.declaration
        declaration.field = field
        // The declared kind types the check; `value(of:)` gives the value: they must agree, or
        // the check would never run. Same every run, so the first test to start finds it.
        precondition(field.value(of: .empty).kind == declaration.kind, "ActivityField.\(field): its declaration and value(of:) disagree")
        return declaration
    }

    /// The field's declaration.
    public var declared: Declaration { Self.declarations[Self.allCases.firstIndex(of: self) ?? 0] }

    /// The field's name outside Swift: record key, option, export key.
    public var name: String { declared.name }

    /// The fields an app sets through `Advertise` and `Update`'s options, by name.
    public static let optionNames = declarations.filter { $0.origin == .option }.map(\.name)
}

/// One field's value, of one of the few kinds the layers know how to store, send and show.
public enum FieldValue: Sendable, Equatable {
    case text(String)
    case optionalText(String?)
    case flag(Bool)
    case list([String])
    /// Microseconds since the Unix epoch.
    case time(UInt64)
    case optionalTime(UInt64?)

    public var kind: ActivityField.Kind {
        switch self {
        case .text: .text
        case .optionalText: .optionalText
        case .flag: .flag
        case .list: .list
        case .time: .time
        case .optionalTime: .optionalTime
        }
    }
}

/// What a field's check may consult besides the value.
public struct FieldContext: Sendable {
    public var limits: Limits
    /// The activity's registered type, when known (the payload's required keys); another
    /// machine's activity may be of a type no app here registered.
    public var type: ActivityType?

    public init(limits: Limits, type: ActivityType?) {
        self.limits = limits
        self.type = type
    }
}

extension ActivityField {
    /// Who sets a field.
    public enum Origin: Sendable, Equatable {
        /// batond: ids, the type's app, times.
        case daemon
        /// `Advertise`'s arguments (`title`, `payload`); `Update` takes them too.
        case argument
        /// `Advertise` and `Update`'s options (`a{ss}`), in text.
        case option
        /// The scene it shows in: this machine's only.
        case scene
        /// The device that advertised it: this machine's only.
        case device
    }

    public enum Kind: Sendable, Equatable {
        case text, optionalText, flag, list, time, optionalTime
    }

    /// A field as the layers read it.
    public struct Declaration: Sendable {
        public fileprivate(set) var field = ActivityField.id
        /// Record key, option and export key (snake_case, as DESIGN names them).
        public let name: String
        /// The column in `activity` and `history`.
        public let column: String
        /// The key in sync records. Format 1's fields keep the keys already on servers; a new field uses its name.
        public let syncKey: String
        public let kind: Kind
        public let origin: Origin
        /// Whether a document (a record, an export, a sync record) without it is refused.
        public let required: Bool
        /// Its value when a document lacks it.
        public let defaultValue: FieldValue
        /// A valid value other than the default, for the test that walks every field through every path.
        public let example: FieldValue?
        /// Throws when the value is not one batond stores.
        public let check: @Sendable (FieldValue, FieldContext) throws(BatonError) -> Void

        public func get(_ activity: Activity) -> FieldValue { field.value(of: activity) }
        public func set(_ activity: inout Activity, _ value: FieldValue) { field.set(value, in: &activity) }

        /// Whether it stays on this machine: not synced, not exported.
        public var isLocal: Bool { origin == .scene || origin == .device }

        /// The value of `text`, an option as `Advertise` and `Update` take it.
        public func value(option text: String) throws(BatonError) -> FieldValue {
            switch kind {
            case .text: return .text(text)
            case .optionalText: return .optionalText(text.isEmpty ? nil : text)
            case .flag: return .flag(try Validate.boolean(text, option: name))
            // Comma-separated; items trimmed, empty items dropped.
            case .list:
                return .list(text.split(separator: ",").map { String($0.trimmingSpaces) }.filter { !$0.isEmpty })
            case .time, .optionalTime:
                guard let number = UInt64(text) else {
                    throw .invalidArgument("\(name) must be a whole number, not '\(printable(text))'")
                }
                return kind == .time ? .time(number) : .optionalTime(number)
            }
        }

        /// The option text that sets `value`; nil for an absent value.
        public func option(_ value: FieldValue) -> String? {
            switch value {
            case .text(let text): text
            case .optionalText(let text): text
            case .flag(let flag): flag ? "true" : "false"
            case .list(let items): items.joined(separator: ",")
            case .time(let time): String(time)
            case .optionalTime(let time): time.map(String.init)
            }
        }
    }
}

extension Activity {
    /// The start of a decode: no id, type or app, an empty object as payload, every other
    /// field at its declared default.
    public static var empty: Activity {
        Activity(id: "", type: "", appID: "", title: "", payload: "{}", createdAt: 0, updatedAt: 0)
    }

    /// The one validation, for local writes, `Import` and other machines' records: throws the
    /// first field's error. `origins`: only the fields those set (`Advertise` checks what its
    /// caller gave; batond made the rest); `except`: fields known to be valid already.
    public func validate(
        _ context: FieldContext, origins: Set<ActivityField.Origin>? = nil, except: Set<ActivityField> = []
    ) throws(BatonError) {
        // By index: each element read in place, not copied (a copy retains its texts and closure).
        let declarations = ActivityField.declarations
        for index in declarations.indices
        where origins?.contains(declarations[index].origin) ?? true && !except.contains(declarations[index].field) {
            try declarations[index].check(declarations[index].field.value(of: self), context)
        }
    }

    /// Every field an app sets by option, as `Advertise` and `Update` take them (what BatonKit
    /// sends); absent values are left out.
    public var options: [String: String] {
        var options: [String: String] = [:]
        for declaration in ActivityField.declarations where declaration.origin == .option {
            options[declaration.name] = declaration.option(declaration.get(self))
        }
        return options
    }
}

// MARK: - Declaring

/// The checks several fields share.
private enum Check {
    static let name: @Sendable (String, FieldContext) throws(BatonError) -> Void = { value, context throws(BatonError) in
        try Validate.text(value, what: "an identifier", limit: context.limits.nameBytes)
    }
}

fileprivate typealias Checked<T> = @Sendable (T, FieldContext) throws(BatonError) -> Void

extension ActivityField.Declaration {
    private init<T>(
        _ name: String, kind: ActivityField.Kind, origin: ActivityField.Origin, column: String?, sync: String?, required: Bool,
        defaultValue: FieldValue, example: FieldValue?, unwrap: @escaping @Sendable (FieldValue) -> T?, check: Checked<T>?
    ) {
        self.name = name
        self.column = column ?? name
        self.syncKey = sync ?? name
        self.kind = kind
        self.origin = origin
        self.required = required
        self.defaultValue = defaultValue
        self.example = example
        self.check = { value, context throws(BatonError) in
            if let check, let unwrapped = unwrap(value) { try check(unwrapped, context) }
        }
    }

    fileprivate static func text(
        _ name: String, from origin: ActivityField.Origin, column: String? = nil,
        sync: String? = nil, required: Bool = false, example: String? = nil, check: Checked<String>? = nil
    ) -> Self {
        Self(name, kind: .text, origin: origin, column: column, sync: sync, required: required, defaultValue: .text(""),
             example: example.map(FieldValue.text), unwrap: { if case .text(let v) = $0 { v } else { nil } },
             check: check)
    }

    /// Absent: nil; only a present value is checked.
    fileprivate static func optionalText(
        _ name: String, from origin: ActivityField.Origin, column: String? = nil,
        sync: String? = nil, example: String? = nil, check: Checked<String>? = nil
    ) -> Self {
        Self(name, kind: .optionalText, origin: origin, column: column, sync: sync, required: false,
             defaultValue: .optionalText(nil), example: example.map(FieldValue.optionalText),
             unwrap: { if case .optionalText(let v) = $0 { .some(v) } else { nil } },
             check: presentOnly(check))
    }

    /// `check` run on a present value only.
    private static func presentOnly(_ check: Checked<String>?) -> Checked<String?>? {
        guard let check else { return nil }
        return { value, context throws(BatonError) in
            if let value { try check(value, context) }
        }
    }

    /// Set by option, `true` or `false`.
    fileprivate static func flag(_ name: String, default value: Bool, sync: String? = nil) -> Self {
        Self(name, kind: .flag, origin: .option, column: nil, sync: sync, required: false, defaultValue: .flag(value),
             example: .flag(!value), unwrap: { if case .flag(let v) = $0 { v } else { nil } }, check: nil)
    }

    fileprivate static func list(
        _ name: String, from origin: ActivityField.Origin,
        sync: String? = nil, example: [String]? = nil, check: Checked<[String]>? = nil
    ) -> Self {
        Self(name, kind: .list, origin: origin, column: nil, sync: sync, required: false, defaultValue: .list([]),
             example: example.map(FieldValue.list), unwrap: { if case .list(let v) = $0 { v } else { nil } },
             check: check)
    }

    /// batond's: microseconds since the epoch.
    fileprivate static func time(_ name: String, sync: String? = nil, required: Bool = false) -> Self {
        Self(name, kind: .time, origin: .daemon, column: nil, sync: sync, required: required, defaultValue: .time(0),
             example: nil, unwrap: { if case .time(let v) = $0 { v } else { nil } }, check: nil)
    }

    fileprivate static func optionalTime(_ name: String, sync: String? = nil) -> Self {
        Self(name, kind: .optionalTime, origin: .daemon, column: nil, sync: sync, required: false, defaultValue: .optionalTime(nil),
             example: nil, unwrap: { if case .optionalTime(let v) = $0 { .some(v) } else { nil } }, check: nil)
    }
}

// MARK: - JSON documents (the export, sync records)

/// A JSON object's key, for documents keyed by the fields' names.
public struct FieldKey: CodingKey, Sendable {
    public let stringValue: String
    public init(_ name: String) { stringValue = name }
    public init?(stringValue: String) { self.stringValue = stringValue }
    public var intValue: Int? { nil }
    public init?(intValue: Int) { nil }
}

extension ActivityField {
    /// Which names a JSON document gives the fields.
    public enum Naming: Sendable {
        /// The export: the fields' names, as in the D-Bus records.
        case export
        /// Sync records: `syncKey`.
        case sync
    }

    /// Writes every field that leaves the machine (not `isLocal`) into `container`; absent values are left out.
    public static func encode(_ activity: Activity, as naming: Naming, to container: inout KeyedEncodingContainer<FieldKey>) throws {
        for declaration in declarations where !declaration.isLocal {
            let key = FieldKey(naming == .export ? declaration.name : declaration.syncKey)
            switch declaration.get(activity) {
            case .text(let value): try container.encode(value, forKey: key)
            case .optionalText(let value): try container.encodeIfPresent(value, forKey: key)
            case .flag(let value): try container.encode(value, forKey: key)
            case .list(let value): try container.encode(value, forKey: key)
            case .time(let value): try container.encode(value, forKey: key)
            case .optionalTime(let value): try container.encodeIfPresent(value, forKey: key)
            }
        }
    }

    /// The activity `container` describes: a required field it lacks throws; another gets its default.
    /// Not checked: that is `Activity.validate`'s.
    public static func decode(from container: KeyedDecodingContainer<FieldKey>, as naming: Naming) throws -> Activity {
        var activity = Activity.empty
        for declaration in declarations where !declaration.isLocal {
            let key = FieldKey(naming == .export ? declaration.name : declaration.syncKey)
            guard declaration.required || container.contains(key) else {
                declaration.set(&activity, declaration.defaultValue)
                continue
            }
            let value: FieldValue = switch declaration.kind {
            case .text: .text(try container.decode(String.self, forKey: key))
            case .optionalText: .optionalText(try container.decodeIfPresent(String.self, forKey: key))
            case .flag: .flag(try container.decode(Bool.self, forKey: key))
            case .list: .list(try container.decode([String].self, forKey: key))
            case .time: .time(try container.decode(UInt64.self, forKey: key))
            case .optionalTime: .optionalTime(try container.decodeIfPresent(UInt64.self, forKey: key))
            }
            declaration.set(&activity, value)
        }
        return activity
    }
}
