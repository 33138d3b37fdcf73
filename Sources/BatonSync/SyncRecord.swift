import BatonCore
import BatonStore
import FoundationEssentials

/// What one record of a device's log says, before it is sealed: JSON, versioned, every field
/// that means something to the user inside (the server sees none of it).
///
/// `v` is the format's version; a device skips records of a kind it does not know, so a newer
/// device can add kinds without breaking older ones.
struct SyncRecord: Codable, Equatable {
    var v = 1
    /// `activity` (advertised or changed: how it is now), `ended`, `type`, `type_removed`.
    var kind: String
    var activity: ActivityBody?
    /// The activity or type concerned, for `ended` and `type_removed`.
    var id: String?
    /// How an activity ended (`invalidated`, `expired`, `evicted`) and why, in a sentence.
    var state: String?
    var reason: String?
    /// A type's app, for `type`.
    var appID: String?
    /// The one device a request is for (`continue_on`, `continued`); the others skip it.
    var target: String?
    /// For `complete`: every activity and type the device has (its log before was compacted).
    var activities: [String]?
    var types: [String]?
    /// For `clipboard` (with `id`): the copy's kind and times, and its content sealed with the
    /// key of `epoch` (`Seal.clipboardContext`).
    var mime: String?
    var madeAt: UInt64?
    var expiresAt: UInt64?
    var epoch: Int32?
    /// Not in the JSON: after it, past a 0 byte (`encoded`), as it is; base64 inside the JSON
    /// made encoding an image's copy cost more than the rest of sending it
    /// (Benchmarks/README, "A copy of the clipboard").
    var sealed: [UInt8]?

    enum CodingKeys: String, CodingKey {
        case v, kind, activity, id, state, reason, appID, target, activities, types, mime, madeAt, expiresAt, epoch
    }

    init(_ change: Store.SyncChange) {
        switch change {
        case .activity(let activity):
            kind = "activity"
            self.activity = ActivityBody(activity)
        case .activityEnded(let id, let state, let reason):
            kind = "ended"
            self.id = id
            self.state = state
            self.reason = reason
        case .type(let type):
            kind = "type"
            id = type.type
            appID = type.appID
        case .typeRemoved(let name):
            kind = "type_removed"
            id = name
        }
    }

    /// What a record taken out of a folder's log says in its place (a copy of the clipboard
    /// whose time is over): nothing. Every device skips it.
    static var removed: SyncRecord { SyncRecord(kind: "removed") }

    /// The first record of a device's log: it makes the log appear, so the user's other
    /// devices learn of the new one (and give it the current key) at once. Applies nothing.
    static var hello: SyncRecord { SyncRecord(kind: "hello") }

    private init(kind: String) {
        self.kind = kind
    }

    /// The record that ends a snapshot of the device's state (`WriteTransaction.enqueueSnapshot`).
    static func complete(activities: [String], types: [String]) -> SyncRecord {
        var record = SyncRecord(kind: "complete")
        record.activities = activities
        record.types = types
        return record
    }

    /// A copy of the clipboard, its content sealed already.
    init(clipboard copy: ClipboardCopy, epoch: Int32, sealed: [UInt8]) {
        kind = "clipboard"
        id = copy.id
        mime = copy.mime
        madeAt = copy.madeAt
        expiresAt = copy.expiresAt
        self.epoch = epoch
        self.sealed = sealed
    }

    /// A request to one device: `continue_on` (continue activity `id` there) or
    /// `continued` (activity `id`, the target's, was continued on the sender).
    init(request kind: String, activityID: String, target: String) {
        self.kind = kind
        id = activityID
        self.target = target
    }

    /// The change it describes for device `me`, or nil for a kind (or a shape) this version
    /// does not know, or a request for another device — except that an activity was
    /// continued, which every device hears (one that offers it in a notification withdraws it).
    func change(for me: String) -> Store.RemoteChange? {
        if let target, target != me {
            return kind == "continued" ? id.map { .continuedElsewhere(activityID: $0) } : nil
        }
        switch kind {
        case "continue_on": return id.map { .continueHere(activityID: $0) }
        case "continued": return id.map { .continuedThere(activityID: $0) }
        case "invalidate": return id.map { .invalidateHere(activityID: $0) }
        default: return change
        }
    }

    /// The change it describes, or nil for a kind (or a shape) this version does not know.
    var change: Store.RemoteChange? {
        switch kind {
        case "activity": activity.map { .activity($0.activity) }
        case "ended": id.map { .activityEnded(id: $0, state: state ?? "invalidated", reason: reason ?? "invalidated") }
        case "type": id.flatMap { name in appID.map { .type(name: name, appID: $0) } }
        case "type_removed": id.map { .typeRemoved($0) }
        case "complete": activities.flatMap { activities in types.map { .complete(activities: activities, types: $0) } }
        default: nil
        }
    }

    /// JSON; a record carrying sealed bytes has them after it, past a 0 byte (JSON has none).
    /// A batond older than such records reads no JSON there and skips the record.
    func encoded() throws -> [UInt8] {
        let json = Array(try JSONEncoder().encode(self))
        guard let sealed else { return json }
        return json + [0] + sealed
    }

    static func decode(_ bytes: [UInt8]) -> SyncRecord? {
        let end = bytes.firstIndex(of: 0) ?? bytes.endIndex
        guard var record = try? JSONDecoder().decode(SyncRecord.self, from: Data(bytes[..<end])) else { return nil }
        if end < bytes.endIndex { record.sealed = Array(bytes[(end + 1)...]) }
        return record
    }
}

/// An activity as it crosses machines: every field but the local ones (its scene stays on its
/// machine; the log it is in says its device), under format 1's keys (`ActivityField`'s `syncKey`).
struct ActivityBody: Codable, Equatable {
    let activity: Activity

    init(_ activity: Activity) {
        var crossing = activity
        for declaration in ActivityField.declarations where declaration.isLocal {
            declaration.set(&crossing, declaration.defaultValue)
        }
        self.activity = crossing
    }

    init(from decoder: any Decoder) throws {
        activity = try ActivityField.decode(from: decoder.container(keyedBy: FieldKey.self), as: .sync)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: FieldKey.self)
        try ActivityField.encode(activity, as: .sync, to: &container)
    }
}

/// What another device sent is checked as the bus checks a caller's input: a device with the
/// key is still only another program, and nothing it sends may crash batond or store what a
/// caller could not. A record that fails is skipped (and logged), so one bad record does not
/// stop the log behind it.
enum RemoteCheck {
    /// The largest copy of a clipboard taken from another machine: the largest any setting sends.
    static let largestCopy = 33_554_432

    static func check(_ change: Store.RemoteChange, limits: Limits) throws(BatonError) {
        switch change {
        case .activity(let activity):
            // As local writes and Import are: every field's check. The type may be one no app here registered.
            try activity.validate(FieldContext(limits: limits, type: nil))
        case .activityEnded(let id, let state, let reason):
            _ = try Identifier.normalize(id, what: "the activity's id")
            try Validate.text(state, what: "the end's state", limit: 32)
            try Validate.text(reason, what: "the end's reason", limit: limits.titleBytes)
        case .type(let name, let appID):
            try Validate.reverseDNS(name, what: "the type", limits: limits)
            try Validate.reverseDNS(appID, what: "the type's app", limits: limits)
        case .typeRemoved(let name):
            try Validate.reverseDNS(name, what: "the type", limits: limits)
        case .continueHere(let id), .continuedThere(let id), .invalidateHere(let id), .continuedElsewhere(let id):
            _ = try Identifier.normalize(id, what: "the activity's id")
        case .complete(let activities, let types):
            for id in activities { _ = try Identifier.normalize(id, what: "an activity's id") }
            for name in types { try Validate.reverseDNS(name, what: "a type", limits: limits) }
        case .clipboard(let copy):
            try copy.validate(maxBytes: Self.largestCopy)
        }
    }
}
