import BatonCore
import BatonStore
import Foundation

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
        case .request:
            preconditionFailure("a request's record is made when it is asked for (SyncRecord.request)")
        }
    }

    /// A request to one device: `continue_on` (continue activity `id` there) or
    /// `continued` (activity `id`, the target's, was continued on the sender).
    init(request kind: String, activityID: String, target: String) {
        self.kind = kind
        id = activityID
        self.target = target
    }

    /// The change it describes for device `me`, or nil for a kind (or a shape) this version
    /// does not know, or a request for another device.
    func change(for me: String) -> Store.RemoteChange? {
        if let target, target != me { return nil }
        switch kind {
        case "continue_on": return id.map { .continueHere(activityID: $0) }
        case "continued": return id.map { .continuedThere(activityID: $0) }
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
        default: nil
        }
    }

    func encoded() throws -> [UInt8] {
        Array(try JSONEncoder().encode(self))
    }

    static func decode(_ bytes: [UInt8]) -> SyncRecord? {
        try? JSONDecoder().decode(SyncRecord.self, from: Data(bytes))
    }
}

/// An activity as it crosses machines: everything but its scene (scenes stay on their machine)
/// and its device (the log it is in says that).
struct ActivityBody: Codable, Equatable {
    var id, type, appID, title, payload: String
    var payloadType, targetContentID, persistentID, webpageURL: String?
    var keywords: [String]
    var eligibleForHandoff, eligibleForSearch: Bool
    var createdAt, updatedAt: UInt64
    var expiresAt: UInt64?

    init(_ activity: Activity) {
        id = activity.id
        type = activity.type
        appID = activity.appID
        title = activity.title
        payload = activity.payload
        payloadType = activity.payloadType
        targetContentID = activity.targetContentID
        persistentID = activity.persistentID
        webpageURL = activity.webpageURL
        keywords = activity.keywords
        eligibleForHandoff = activity.eligibleForHandoff
        eligibleForSearch = activity.eligibleForSearch
        createdAt = activity.createdAt
        updatedAt = activity.updatedAt
        expiresAt = activity.expiresAt
    }

    var activity: Activity {
        Activity(id: id, type: type, appID: appID, title: title, payload: payload, payloadType: payloadType,
                 targetContentID: targetContentID, persistentID: persistentID, keywords: keywords, webpageURL: webpageURL,
                 eligibleForHandoff: eligibleForHandoff, eligibleForSearch: eligibleForSearch,
                 createdAt: createdAt, updatedAt: updatedAt, expiresAt: expiresAt)
    }
}
