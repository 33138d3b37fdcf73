import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging

extension HandoffService {
    /// `org.baton.Handoff1.Activities`: what users are doing. Writes are `.concurrent`: the
    /// bus thread serves other calls while they wait for the writer thread.
    var activitiesInterface: Interface {
        Interface(Contract.Interface.activities, methods: [
            Method(Contract.Activities.advertise, ordering: .concurrent, handler: advertise),
            Method(Contract.Activities.update, ordering: .concurrent, handler: update),
            Method(Contract.Activities.invalidate, ordering: .concurrent, handler: invalidate),
            // The three readers of records write their replies straight into the message.
            Method.encoded(Contract.Activities.get, handler: get),
            Method.encoded(Contract.Activities.list, handler: list),
            Method.encoded(Contract.Activities.search, handler: search),
            Method(Contract.Activities.deleteSaved, ordering: .concurrent, handler: deleteSaved),
            Method(Contract.Activities.deleteAllSaved, ordering: .concurrent, handler: deleteAllSaved),
            Method(Contract.Activities.continue, ordering: .concurrent, handler: continueActivity),
            Method(Contract.Activities.explain, handler: explain),
        ], signals: [
            Signal(Contract.Activities.advertised),
            Signal(Contract.Activities.invalidated),
            Signal(Contract.Activities.updated),
            Signal(Contract.Activities.continued),
        ])
    }

    /// Checks the call on the bus thread, in arrival order, then waits for the group commit.
    func advertise(_ call: MethodCall) async throws -> [DBusValue] {
        let typeName: String = try call.argument(0)
        try Validate.reverseDNS(typeName, what: "activity type", limits: limits)
        guard let type = try store.activityType(typeName), call.mayUse(app: type.appID) else {
            throw BatonError.unknownActivityType(
                "no activity type \(printable(typeName)) is registered; register it with RegisterActivityType first")
        }
        try refuseIfBlocked(type.appID)
        let advertisement = try Advertisement.parse(
            type: type, title: try call.argument(1), payload: try call.argument(2), options: try call.argument(3), limits: limits)
        let sceneID = try advertisement.scene.map { try scene(named: $0, ofApp: type.appID) }
        let activity = advertisement.makeActivity(id: Identifier.make(at: clock.now()), type: type, sceneID: sceneID, now: clock.now())
        return [.string(try await record(activity, requestID: advertisement.requestID))]
    }

    /// Stores a new activity and announces it (while recording is paused, in memory only);
    /// returns its id, or the first call's for a repeated request. Advertise's, and the sources'.
    func record(_ activity: Activity, requestID: String?) async throws -> String {
        if paused.isPaused { return advertiseUnrecorded(activity, requestID: requestID) }
        let inserted = try await commits.insert(activity, request: requestID.map { Request(id: $0, method: Contract.Activities.advertise.name) })
        // A repeated request stored nothing and announces nothing: the first call did.
        guard !inserted.repeated else { return inserted.id }
        announceRemoved(inserted.trimmed)
        emitAdvertised(activity)
        if let sceneID = activity.sceneID { emitSceneChanged(sceneID) }
        return activity.id
    }

    /// While recording is paused: kept in memory only (`PausedActivities`); its scene is not
    /// told (that would write its id), nor is the request id stored.
    private func advertiseUnrecorded(_ activity: Activity, requestID: String?) -> String {
        let added = paused.add(activity, requestID: requestID, quota: limits.liveActivitiesPerApp)
        if let first = added.repeated { return first }
        announceRemoved(added.removed.map { (id: $0, app: activity.appID) })
        emitAdvertised(activity)
        return activity.id
    }

    /// Read, merged and written on the writer thread, so no other write comes in between.
    /// While recording is paused, kept in memory instead (`PausedActivities`).
    func update(_ call: MethodCall) async throws -> [DBusValue] {
        let id: String = try call.argument(0)
        let update = try ActivityUpdate(payload: try call.argument(1), options: try call.argument(2), limits: limits)
        if paused.isPaused, try updateUnrecorded(id, with: update, for: call) { return [] }
        let request = update.requestID.map { Request(id: $0, method: Contract.Activities.update.name) }
        let changed = try await store.writing { store -> Activity? in
            // A repeat returns at once, even if the activity has changed or gone since.
            if let request, try store.result(of: request) != nil { return nil }
            let now = store.wallClock.now()
            let activity = try Self.liveActivity(id, in: store, now: now)
            let type = try self.mayUpdate(activity, for: call, in: store)
            var updated = try update.apply(to: activity, type: type, now: now, limits: store.limits)
            if let named = update.scene {
                updated.sceneID = named.isEmpty ? nil : try Self.scene(named: named, ofApp: activity.appID, in: store)
            }
            try store.update(updated, moved: update.scene != nil, request: request)
            return updated
        }
        guard let changed else { return [] }
        emitUpdated(changed.id, app: changed.appID)
        if update.scene != nil, let scene = changed.sceneID { emitSceneChanged(scene) }
        for scene in store.takeScenesWithClearedActivity() { emitSceneChanged(scene) }
        return []
    }

    /// An update while recording is paused: the activity as updated is kept in memory only,
    /// whether it was advertised during the pause or before it; its scene is not told (that
    /// would write its id), nor is the request id stored. False when the pause ended meanwhile.
    private func updateUnrecorded(_ id: String, with update: ActivityUpdate, for call: MethodCall) throws -> Bool {
        let now = clock.now()
        let activity = try liveActivity(id, now: now)
        let type = try mayUpdate(activity, for: call, in: store)
        var updated = try update.apply(to: activity, type: type, now: now, limits: limits)
        if let named = update.scene { updated.sceneID = named.isEmpty ? nil : try scene(named: named, ofApp: activity.appID) }
        guard paused.keepUpdate(updated) else { return false }
        emitUpdated(updated.id, app: updated.appID)
        return true
    }

    /// The type of `activity`, when `call` may update it: its own app's, this machine's, of a
    /// type still registered, of an app not blocked.
    private func mayUpdate(_ activity: Activity, for call: MethodCall, in store: Store) throws -> ActivityType {
        guard call.mayUse(app: activity.appID) else { throw Access.noActivity(activity.id) }
        guard !activity.isRemote else {
            throw BatonError.accessDenied("""
                activity \(activity.id) was advertised on another machine (device \(activity.deviceID)); only that machine changes it
                """)
        }
        guard let type = try store.activityType(activity.type) else {
            throw BatonError.unknownActivityType("activity type \(activity.type) is no longer registered")
        }
        try refuseIfBlocked(activity.appID)
        return type
    }

    func invalidate(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try Identifier.normalize(try call.argument(0))
        if call.confinedApp != nil, let app = try paused.activity(id)?.appID ?? store.storedActivity(id: id)?.appID, !call.mayUse(app: app) {
            throw Access.noActivity(id)
        }
        // Advertised while paused: forgotten, with no trace (nor history).
        if let removed = paused.remove(id) {
            announceRemoved([(id: id, app: removed.appID)])
            return []
        }
        // Another machine's: gone here now, and a request in this machine's log for its own machine.
        if let activity = try store.storedActivity(id: id), activity.isRemote, let engine = syncEngine {
            guard try await Self.syncing({ try await engine.invalidate(activity) }) else { throw BatonError.notFound("no activity \(id)") }
            announceRemoved([id])
            return []
        }
        try await store.writing { store in
            guard try !store.deleteActivities(ids: [id]).isEmpty else { throw BatonError.notFound("no activity \(id)") }
        }
        announceRemoved([id])
        return []
    }

    func get(_ call: MethodCall) async throws -> EncodedBody {
        let activity = try liveActivity(try call.argument(0), now: clock.now())
        guard call.mayUse(app: activity.appID) else { throw Access.noActivity(activity.id) }
        return Records.encodedRecord(activity, deviceNames: try deviceNames(for: [activity]))
    }

    func list(_ call: MethodCall) async throws -> EncodedBody {
        var filter = try filter(try call.argument(0))
        if let app = call.confinedApp {
            guard filter.appID == nil || filter.appID == app else { return Records.encodedRecords([Activity](), deviceNames: [:]) }
            filter.appID = app
        }
        let now = clock.now()
        var activities = paused.isPaused ? try listWhilePaused(filter, now: now) : try store.activities(filter, now: now)
        if activities.count > filter.limit ?? .max { activities.removeLast(activities.count - (filter.limit ?? .max)) }
        return Records.encodedRecords(activities, deviceNames: try deviceNames(for: activities))
    }

    /// `List` while paused: those advertised during the pause first (the newest), then the
    /// stored ones, each as updated during the pause if it was (and matching `filter` so).
    private func listWhilePaused(_ filter: Store.ActivityFilter, now: UInt64) throws -> [Activity] {
        let updatedIDs = paused.updatedIDs
        var wider = filter
        // Those whose update no longer matches are left out below: ask for as many more.
        wider.limit = filter.limit.map { $0 + updatedIDs.count }
        var activities = try store.activities(wider, now: now).filter { !updatedIDs.contains($0.id) }
        for updated in paused.matching(filter, now: now, updated: true) {
            let place = activities.firstIndex { ($0.createdAt, $0.id) < (updated.createdAt, updated.id) } ?? activities.endIndex
            activities.insert(updated, at: place)
        }
        return paused.matching(filter, now: now) + activities
    }

    func search(_ call: MethodCall) async throws -> EncodedBody {
        let requested: UInt32 = try call.argument(1)
        let limit = requested == 0 ? 50 : Int(min(requested, 1000))
        let activities = try searchActivities(try call.argument(0), limit: limit, confinedTo: call.confinedApp)
        return Records.encodedRecords(activities, deviceNames: try deviceNames(for: activities))
    }

    /// The one search, for `Search` and the desktop's (the search provider, KRunner): live,
    /// searchable activities of this machine and the others whose title or keywords have a
    /// word beginning with each word of `query`; title matches first, then newest first.
    /// Those advertised or updated while recording is paused come first. With `app`, that app's only.
    func searchActivities(_ query: String, limit: Int, confinedTo app: String?) throws -> [Activity] {
        let now = clock.now()
        guard paused.isPaused else { return try store.search(query, limit: limit, now: now, appID: app) }
        let unrecorded = paused.search(query, now: now).filter { app == nil || $0.appID == app }.prefix(limit)
        // The stored copies of those updated during the pause are as they were before it.
        let updatedIDs = paused.updatedIDs
        let stored = try store.search(query, limit: limit - unrecorded.count + updatedIDs.count, now: now, appID: app)
            .filter { !updatedIDs.contains($0.id) }
        return Array((Array(unrecorded) + stored).prefix(limit))
    }

    /// The other devices' names, read only when one of `activities` came from another device.
    func deviceNames(for activities: [Activity]) throws -> [String: String] {
        activities.contains(where: \.isRemote) ? try store.remoteDeviceNames() : [:]
    }

    func deleteSaved(_ call: MethodCall) async throws -> [DBusValue] {
        let persistentIDs: [String] = try call.argument(0)
        let app = call.confinedApp
        let removed = try await store.writing { try $0.deleteSaved(persistentIDs: persistentIDs, appID: app) }
        announceRemoved(removed)
        return [.uint32(UInt32(removed.count))]
    }

    func deleteAllSaved(_ call: MethodCall) async throws -> [DBusValue] {
        let appID: String = try call.argument(0)
        guard call.mayUse(app: appID) else {
            throw BatonError.accessDenied("the sandboxed app \(call.confinedApp ?? "") deletes only its own activities")
        }
        let removed = try await store.writing { try $0.deleteAll(appID: appID) }
        announceRemoved(removed)
        return [.uint32(UInt32(removed.count))]
    }

    /// Why an activity is or is not continuable and searchable, in sentences: from the
    /// activity itself while it lives, from its tombstone for a week after it ended.
    func explain(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try Identifier.normalize(try call.argument(0))
        let now = clock.now()
        var reasons: [String] = []
        let state: String
        var continuable = false
        var searchable = false
        let unrecorded = paused.activity(id)
        let live = try unrecorded ?? store.storedActivity(id: id).map(paused.latest)
        let ended = live == nil ? try store.tombstone(activityID: id) : nil
        if let app = call.confinedApp, let owner = live?.appID ?? ended?.appID, owner != app {
            return [Records.Explanation(id: id, state: "unknown", continuable: false, searchable: false,
                                        reasons: [Self.neverHere(id)], lastContinuation: nil).record]
        }
        if let activity = live {
            let expired = activity.isExpired(at: now)
            if unrecorded != nil { reasons.append("advertised while recording was paused: kept in memory only, until resumed") }
            if unrecorded == nil, paused.updatedIDs.contains(id) {
                reasons.append("updated while recording was paused: the update is kept in memory only, and undone when recording resumes")
            }
            state = expired ? "expired" : "live"
            if let expiresAt = activity.expiresAt, expired { reasons.append("expired at \(WallClock.text(expiresAt))") }
            let type = try store.activityType(activity.type)
            let document = activity.type == RecentDocuments.type
            let obstacle = document ? RecentDocuments.obstacle(to: activity, applicationDirectories: applicationDirectories) : nil
            if document {
                reasons.append(obstacle.map { "a recent document that cannot be opened here: \($0)" }
                               ?? "a recent document: continuing opens it in the app that used it")
            } else if type == nil, let page = activity.webpageURL {
                reasons.append("no app here registered \(activity.type): continuing opens its web page, \(page), in the default browser")
            } else if type == nil {
                reasons.append("type \(activity.type) is no longer registered")
            }
            if !activity.eligibleForHandoff { reasons.append("advertised with eligible_for_handoff=false") }
            if !activity.eligibleForSearch { reasons.append("advertised with eligible_for_search=false") }
            continuable = !expired && (document ? obstacle == nil : type != nil || activity.webpageURL != nil) && activity.eligibleForHandoff
            searchable = !expired && activity.eligibleForSearch
            if continuable, !document, let type, type.handler == nil {
                reasons.append("type \(type.type) has no handler: a continuation opens a scene for \(type.appID) to read when it starts")
            }
        } else if let tombstone = ended {
            state = tombstone.state
            reasons.append("\(tombstone.reason) (\(WallClock.text(tombstone.endedAt)))")
            if let past = try store.pastActivity(id: id) {
                let registered = try store.activityType(past.activity.type) != nil
                continuable = registered && past.activity.eligibleForHandoff
                reasons.append(continuable ? "kept in the history: Continue continues from its copy"
                               : "kept in the history, but \(registered ? "advertised with eligible_for_handoff=false" : "its type is no longer registered")")
            }
        } else {
            state = "unknown"
            reasons.append(Self.neverHere(id))
        }
        let last = try store.lastContinuation(activityID: id).map {
            Records.Explanation.LastContinuation(scene: $0.sceneID, state: $0.state, error: $0.error ?? "", at: $0.at)
        }
        return [Records.Explanation(id: id, state: state, continuable: continuable, searchable: searchable, reasons: reasons,
                                    lastContinuation: last).record]
    }

    static func neverHere(_ id: String) -> String {
        "batond has no record of \(id): it never was here, or it ended more than 7 days ago"
    }

    /// The id of the scene `text` names (path or id), which must be one of `appID`'s.
    func scene(named text: String, ofApp appID: String) throws -> String {
        try Self.scene(named: text, ofApp: appID, in: store)
    }

    static func scene(named text: String, ofApp appID: String, in store: Store) throws -> String {
        let id = try SceneAddress.id(from: text)
        guard let scene = try store.scene(id: id) else { throw BatonError.notFound("no scene \(id)") }
        guard scene.appID == appID else {
            throw BatonError.invalidArgument("scene \(id) belongs to \(scene.appID), not to \(appID)")
        }
        return id
    }

    /// What `Continue` continues: the live activity `text` names, else the history's copy of
    /// it; `NotFound`/`Expired` when there is neither.
    func continuableActivity(_ text: String, now: UInt64) throws -> Activity {
        do {
            return try liveActivity(text, now: now)
        } catch let error as BatonError where error.code == .notFound || error.code == .expired {
            guard let past = try store.pastActivity(id: try Identifier.normalize(text)) else { throw error }
            return past.activity
        }
    }

    /// The activity `text` names (one advertised or updated while paused too, as it is in
    /// memory), or `NotFound`/`Expired`.
    func liveActivity(_ text: String, now: UInt64) throws -> Activity {
        guard paused.isPaused else { return try Self.liveActivity(text, in: store, now: now) }
        let id = try Identifier.normalize(text)
        guard let activity = try paused.activity(id) ?? store.storedActivity(id: id).map(paused.latest) else {
            throw BatonError.notFound("no activity \(id)")
        }
        guard !activity.isExpired(at: now) else { throw BatonError.expired("activity \(id) has expired") }
        return activity
    }

    static func liveActivity(_ text: String, in store: Store, now: UInt64) throws -> Activity {
        let id = try Identifier.normalize(text)
        guard let activity = try store.storedActivity(id: id) else { throw BatonError.notFound("no activity \(id)") }
        guard !activity.isExpired(at: now) else { throw BatonError.expired("activity \(id) has expired") }
        return activity
    }

    /// `List`'s filter from its option map.
    func filter(_ options: [String: String]) throws -> Store.ActivityFilter {
        var filter = Store.ActivityFilter()
        for (key, value) in options {
            switch key {
            case "type": filter.type = value
            case "app_id": filter.appID = value
            case "scene": filter.sceneID = try SceneAddress.id(from: value)
            case "persistent_id": filter.persistentID = value
            case "target_content_id": filter.targetContentID = value
            case "id_prefix": filter.idPrefix = try Identifier.normalizePrefix(value)
            case "device":
                // local, remote, this machine's or another's id, or another's name.
                let names = try store.remoteDeviceNames()
                let named = names.filter { $0.value == value }.map(\.key)
                switch value {
                case "local", syncEngine?.settings?.deviceID ?? "local": filter.device = .local
                case "remote": filter.device = .remote
                case _ where names[value] != nil: filter.device = .id(value)
                case _ where named.count == 1: filter.device = .id(named[0])
                default:
                    throw BatonError.invalidArgument(
                        "device must be local, remote, or one of this user's machines (baton devices lists them), not '\(printable(value))'")
                }
            case "limit":
                guard let limit = Int(value), limit > 0 else { throw BatonError.invalidArgument("limit must be a positive number, not '\(printable(value))'") }
                filter.limit = limit
            default:
                throw BatonError.invalidArgument(
                    "List has no filter '\(printable(key))'; its filters are type, app_id, scene, persistent_id, target_content_id, id_prefix, device, limit")
            }
        }
        return filter
    }
}
