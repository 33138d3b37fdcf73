/// The `a{ss}` option maps of the D-Bus contract, parsed into checked values.
///
/// Unknown option names are refused with the list of known ones: a typo must
/// not be silently ignored.
struct OptionReader {
    private var remaining: [String: String]
    private let method: String

    init(_ options: [String: String], method: String) {
        remaining = options
        self.method = method
    }

    mutating func take(_ key: String) -> String? { remaining.removeValue(forKey: key) }

    /// Comma-separated text: items trimmed, empty items dropped.
    mutating func takeList(_ key: String) -> [String]? {
        take(key).map { text in
            text.split(separator: ",").map { String($0.trimmingSpaces) }.filter { !$0.isEmpty }
        }
    }

    /// Throws when options remain that no one asked for.
    func finish(known: [String]) throws(BatonError) {
        guard let unknown = remaining.keys.sorted().first else { return }
        throw .invalidArgument(
            "\(method) has no option '\(printable(unknown))'; its options are \(known.joined(separator: ", "))")
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }
}

extension ActivityType {
    static let registrationOptions = ["title", "handler", "handler_path", "required_keys", "payload_type", "replace"]

    /// A registration from `RegisterActivityType(type, app_id, options)`.
    public static func registration(
        type: String, appID: String, options: [String: String], limits: Limits
    ) throws(BatonError) -> ActivityType {
        try Validate.reverseDNS(type, what: "activity type", limits: limits)
        try Validate.reverseDNS(appID, what: "app id", limits: limits)
        var reader = OptionReader(options, method: "RegisterActivityType")
        let title = reader.take("title") ?? ""
        try Validate.text(title, what: "the title", limit: limits.titleBytes)
        let handler = reader.take("handler").flatMap { $0.isEmpty ? nil : $0 }
        if let handler { try Validate.text(handler, what: "the handler", limit: limits.nameBytes) }
        let handlerPath = reader.take("handler_path").flatMap { $0.isEmpty ? nil : $0 } ?? "/"
        try Validate.text(handlerPath, what: "handler_path", limit: limits.nameBytes)
        let requiredKeys = reader.takeList("required_keys") ?? []
        for key in requiredKeys {
            try Validate.text(key, what: "required key", limit: limits.nameBytes)
            try Validate.noControlCharacters(key, what: "required key '\(printable(key))'")
        }
        let payloadType = reader.take("payload_type").flatMap { $0.isEmpty ? nil : $0 }
        if let payloadType { try Validate.text(payloadType, what: "payload_type", limit: limits.nameBytes) }
        _ = reader.take("replace")  // whom the type goes to is the service's decision (RegistryInterface)
        try reader.finish(known: registrationOptions)
        return ActivityType(type: type, appID: appID, title: title, handler: handler, handlerPath: handlerPath,
                            requiredKeys: requiredKeys, payloadType: payloadType)
    }

    /// Throws `InvalidPayload` naming the required keys `members` lacks.
    public func checkRequiredKeys(_ members: [StrictJSON.Member]) throws(BatonError) {
        let present = Set(members.map(\.key))
        let missing = requiredKeys.filter { !present.contains($0) }
        guard missing.isEmpty else {
            throw .invalidPayload("activities of type \(type) need the payload keys \(missing.joined(separator: ", "))")
        }
    }
}

/// A checked `Advertise(type, title, payload_json, options)` call.
public struct Advertisement: Equatable, Sendable {
    /// What the caller gave (the title, the payload and every option field), in an activity
    /// that `makeActivity` completes with what batond decides.
    public var fields: Activity
    /// Seconds from now.
    public var expiresIn: UInt64?
    /// The advertising scene, as the caller named it (object path or id); resolved by the service.
    public var scene: String?
    /// Makes the call idempotent: repeated within a day, it returns the first call's id.
    public var requestID: String?

    /// The option fields, then the options that are not fields.
    static let options = ActivityField.optionNames + ["expires_in", "scene", "request_id"]

    /// Ten years: longer than any desktop session, short enough to stay far from overflow.
    public static let maximumExpiry: UInt64 = 10 * 365 * 24 * 3600

    public static func parse(
        type: ActivityType, title: String, payload: String, options: [String: String], limits: Limits
    ) throws(BatonError) -> Advertisement {
        var fields = Activity.empty
        fields.title = title
        fields.payload = payload
        fields.payloadType = type.payloadType
        var advertisement = Advertisement(fields: fields)
        var reader = OptionReader(options, method: "Advertise")
        try advertisement.read(&reader)
        advertisement.scene = reader.take("scene").flatMap { $0.isEmpty ? nil : $0 }
        advertisement.requestID = try Validate.requestID(options)
        _ = reader.take("request_id")
        try reader.finish(known: Self.options)
        try advertisement.fields.validate(FieldContext(limits: limits, type: type), origins: [.argument, .option])
        return advertisement
    }

    /// Reads the options Advertise and Update share: every option field, and `expires_in`.
    mutating func read(_ reader: inout OptionReader) throws(BatonError) {
        let declarations = ActivityField.declarations
        for index in declarations.indices where declarations[index].origin == .option {
            if let text = reader.take(declarations[index].name) {
                declarations[index].field.set(try declarations[index].value(option: text), in: &fields)
            }
        }
        if let value = reader.take("expires_in") {
            guard let seconds = UInt64(value), seconds > 0, seconds <= Self.maximumExpiry else {
                throw .invalidArgument("expires_in must be a whole number of seconds from 1 to \(Self.maximumExpiry), not '\(printable(value))'")
            }
            expiresIn = seconds
        }
    }

    /// The activity this advertisement creates.
    public func makeActivity(id: String, type: ActivityType, sceneID: String?, now: UInt64) -> Activity {
        var activity = fields
        activity.id = id
        activity.type = type.type
        activity.appID = type.appID
        activity.sceneID = sceneID
        activity.createdAt = now
        activity.updatedAt = now
        activity.expiresAt = expiresIn.map { now + $0 * 1_000_000 }
        return activity
    }
}

/// A checked `Update(id, payload_json, options)` call: the payload's keys are merged
/// into the activity's (an empty payload leaves it as it is), or replace its payload with
/// `replace_payload=true`; options replace fields. `scene` moves the activity: it becomes
/// that scene's current activity (`becomeCurrent(in:)`), or, empty, no scene's (`resignCurrent()`).
public struct ActivityUpdate: Sendable {
    let payloadChanges: [StrictJSON.Member]?
    let replacePayload: Bool
    let options: [String: String]
    /// Makes the call idempotent: repeated within a day, it changes nothing.
    public let requestID: String?
    /// The scene to show the activity in, as the caller named it; "" for none; nil: unchanged.
    public let scene: String?

    static let options = ["title", "replace_payload"] + Advertisement.options

    public init(payload: String, options: [String: String], limits: Limits) throws(BatonError) {
        payloadChanges = payload.isEmpty
            ? nil : try StrictJSON.parseObject(payload, maxBytes: limits.payloadBytes, maxDepth: limits.payloadDepth)
        requestID = try Validate.requestID(options)
        replacePayload = try options["replace_payload"].map { text throws(BatonError) in
            try Validate.boolean(text, option: "replace_payload")
        } ?? false
        if replacePayload && payloadChanges == nil {
            throw .invalidArgument("replace_payload=true needs a payload to replace the stored one with")
        }
        scene = options["scene"]
        self.options = options.filter { $0.key != "request_id" && $0.key != "replace_payload" && $0.key != "scene" }
    }

    /// The activity after this update, checked against its type and the limits.
    public func apply(to activity: Activity, type: ActivityType, now: UInt64, limits: Limits) throws(BatonError) -> Activity {
        var reader = OptionReader(options, method: "Update")
        var changes = Advertisement(fields: activity)
        if let title = reader.take("title") { changes.fields.title = title }
        try changes.read(&reader)
        try reader.finish(known: Self.options)

        var updated = changes.fields
        if let payloadChanges {
            let current = replacePayload ? [] : try StrictJSON.parseObject(activity.payload, maxBytes: .max, maxDepth: .max)
            let merged = StrictJSON.merge(current, with: payloadChanges)
            let size = merged.utf8.count
            guard size <= limits.payloadBytes else {
                let members = (try? StrictJSON.parseObject(merged, maxBytes: .max, maxDepth: .max)) ?? []
                throw SizeReport.error("the merged payload", bytes: size, limit: limits.payloadBytes, keys: SizeReport.keys(of: members))
            }
            updated.payload = merged
        }
        // A payload the update leaves as it is was checked when it was stored.
        try updated.validate(FieldContext(limits: limits, type: type), origins: [.argument, .option],
                             except: payloadChanges == nil ? [.payload] : [])
        if let seconds = changes.expiresIn { updated.expiresAt = now + seconds * 1_000_000 }
        updated.updatedAt = now
        return updated
    }
}
