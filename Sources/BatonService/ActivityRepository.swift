import BatonContract
import BatonCore
import BatonStore
import BatonSync
import DBus

/// Every activity batond knows, whatever the mode it lives in, behind one door: recorded
/// (the store, through the commit queue), unrecorded (in memory while the user paused
/// recording, `PausedActivities`), or another machine's (changed through sync). Handlers ask
/// it and it decides where; what a write changed comes back as an `Outcome`, which the service
/// announces the same way whatever the mode (`HandoffService.announce`).
///
/// `ActivityRepository.View` is the same door for one caller: a sandboxed app sees and
/// changes its own app's activities only.
struct ActivityRepository: Sendable {
    let store: Store
    let commits: CommitQueue
    let paused: PausedActivities
    /// Read when a write needs it: an interface built before the engine was attached sees it.
    let sync: SyncSlot

    /// What a write changed, for the signals.
    struct Outcome: Sendable {
        /// The activity the write was about (a repeated request's: the first call's); empty
        /// for a write about many.
        var id = ""
        var advertised: Activity?
        var updated: Activity?
        /// Activities that ended.
        var ended: [Ended] = []
        /// Scenes whose properties changed.
        var scenes: [String] = []
    }

    // MARK: Reads

    /// The live activity `text` names, as it is now (updated while paused, if it was), or
    /// `NotFound`/`Expired`.
    func live(_ text: String, now: UInt64) throws -> Activity {
        let id = try Identifier.normalize(text)
        guard let activity = try find(id) else { throw BatonError.notFound("no activity \(id)") }
        guard !activity.isExpired(at: now) else { throw BatonError.expired("activity \(id) has expired") }
        return activity
    }

    /// The activity with `id`, expired or not, as it is now; nil when there is none.
    func find(_ id: String) throws -> Activity? {
        try paused.activity(id) ?? store.storedActivity(id: id).map(paused.latest)
    }

    /// A stored activity as it is now: as updated while recording was paused, if it was.
    func latest(_ stored: Activity) -> Activity { paused.latest(stored) }

    /// The live activity with `id`, as it is now; nil when there is none (or it expired).
    func findLive(_ id: String, now: UInt64) throws -> Activity? {
        try store.activity(id: id, now: now).map(paused.latest) ?? paused.activity(id).flatMap { $0.isExpired(at: now) ? nil : $0 }
    }

    /// What `Continue` continues: the live activity `text` names, else the history's copy of
    /// it; `NotFound`/`Expired` when there is neither.
    func continuable(_ text: String, now: UInt64) throws -> Activity {
        do {
            return try live(text, now: now)
        } catch let error as BatonError where error.code == .notFound || error.code == .expired {
            guard let past = try store.pastActivity(id: try Identifier.normalize(text)) else { throw error }
            return past.activity
        }
    }

    /// How the user's pause touches an activity, for `Explain`.
    enum Unrecorded {
        case advertisedWhilePaused, updatedWhilePaused
    }

    func unrecorded(_ id: String) -> Unrecorded? {
        if paused.activity(id) != nil { return .advertisedWhilePaused }
        return paused.updatedIDs.contains(id) ? .updatedWhilePaused : nil
    }

    /// `List`: those advertised during a pause first (the newest), then the stored ones,
    /// each as updated during the pause if it was (and matching `filter` so).
    func list(_ filter: Store.ActivityFilter, now: UInt64) throws -> [Activity] {
        guard paused.isPaused else { return try store.activities(filter, now: now) }
        let updatedIDs = paused.updatedIDs
        var wider = filter
        // Those whose update no longer matches are left out below: ask for as many more.
        wider.limit = filter.limit.map { $0 + updatedIDs.count }
        var activities = try store.activities(wider, now: now).filter { !updatedIDs.contains($0.id) }
        for updated in paused.matching(filter, now: now, updated: true) {
            let place = activities.firstIndex { ($0.createdAt, $0.id) < (updated.createdAt, updated.id) } ?? activities.endIndex
            activities.insert(updated, at: place)
        }
        activities = paused.matching(filter, now: now) + activities
        if activities.count > filter.limit ?? .max { activities.removeLast(activities.count - (filter.limit ?? .max)) }
        return activities
    }

    /// The one search, for `Search` and the desktop's: live, searchable activities of this
    /// machine and the others whose title or keywords have a word beginning with each word
    /// of `query`; title matches first, then newest first. Those advertised or updated while
    /// recording is paused come first. With `app`, that app's only.
    func search(_ query: String, limit: Int, now: UInt64, app: String?) throws -> [Activity] {
        guard paused.isPaused else { return try store.search(query, limit: limit, now: now, appID: app) }
        let unrecorded = paused.search(query, now: now).filter { app == nil || $0.appID == app }.prefix(limit)
        // The stored copies of those updated during the pause are as they were before it.
        let updatedIDs = paused.updatedIDs
        let stored = try store.search(query, limit: limit - unrecorded.count + updatedIDs.count, now: now, appID: app)
            .filter { !updatedIDs.contains($0.id) }
        return Array((Array(unrecorded) + stored).prefix(limit))
    }

    // MARK: Writes

    /// Keeps a new activity — stored, or in memory only while recording is paused (then its
    /// scene is not told, which would write its id, nor is the request id stored). A repeated
    /// request keeps nothing and returns the first call's id with nothing to announce.
    func advertise(_ activity: Activity, requestID: String?, quota: Int) async throws -> Outcome {
        if paused.isPaused {
            let added = paused.add(activity, requestID: requestID, quota: quota)
            if let first = added.repeated { return Outcome(id: first) }
            return Outcome(id: activity.id, advertised: activity, ended: added.removed.map { Ended(id: $0, appID: activity.appID) })
        }
        let inserted = try await commits.insert(activity, request: requestID.map { Request(id: $0, method: Contract.Activities.advertise.name) })
        guard !inserted.repeated else { return Outcome(id: inserted.id) }
        return Outcome(id: activity.id, advertised: activity, ended: inserted.trimmed, scenes: activity.sceneID.map { [$0] } ?? [])
    }

    /// How an update changes an activity: `change` gets the activity and its type, after
    /// `View` checked the caller may change it, and returns it changed (and whether it moved
    /// to another scene).
    typealias Change = @Sendable (Activity, any ChangeLookups, UInt64) throws -> (activity: Activity, moved: Bool)

    /// Changes the activity `id`: read, changed and written on the writer thread, so no other
    /// write comes in between; while recording is paused, kept in memory instead (its scene is
    /// not told, nor is the request id stored).
    func update(_ id: String, requestID: String?, now: UInt64, change: @escaping Change) async throws -> Outcome {
        if paused.isPaused {
            let (updated, _) = try change(try live(id, now: now), store, now)
            // The pause ended meanwhile: the update is recorded below.
            if paused.keepUpdate(updated) { return Outcome(id: updated.id, updated: updated) }
        }
        let request = requestID.map { Request(id: $0, method: Contract.Activities.update.name) }
        let changed = try await store.writing { transaction -> (activity: Activity, moved: Bool, cleared: [String])? in
            // A repeat returns at once, even if the activity has changed or gone since.
            if let request, try transaction.result(of: request) != nil { return nil }
            let now = transaction.now
            let stored = try transaction.storedActivity(id: try Identifier.normalize(id))
            guard let stored else { throw BatonError.notFound("no activity \(id)") }
            guard !stored.isExpired(at: now) else { throw BatonError.expired("activity \(stored.id) has expired") }
            let changed = try change(stored, transaction, now)
            let cleared = try transaction.update(changed.activity, moved: changed.moved, request: request)
            return (changed.activity, changed.moved, cleared)
        }
        guard let changed else { return Outcome(id: id) }
        let moved = changed.moved ? changed.activity.sceneID.map { [$0] } ?? [] : []
        return Outcome(id: changed.activity.id, updated: changed.activity, scenes: moved + changed.cleared)
    }

    /// Ends the activity `id`: one advertised while paused is forgotten with no trace (nor
    /// history); another machine's goes here now, with a request in this machine's log for its
    /// own machine; this machine's is deleted.
    func invalidate(_ id: String, reason: String = "invalidated by its app") async throws -> Outcome {
        if let removed = paused.remove(id) { return Outcome(id: id, ended: [Ended(id: id, appID: removed.appID)]) }
        if let activity = try store.storedActivity(id: id), activity.isRemote, let sync = sync.engine {
            let ended = try await SyncCalls.syncing { try await sync.invalidate(activity) }
            guard !ended.isEmpty else { throw BatonError.notFound("no activity \(id)") }
            return Outcome(id: id, ended: ended)
        }
        let ended = try await store.writing { try $0.deleteActivities(ids: [id], reason: reason) }
        guard !ended.isEmpty else { throw BatonError.notFound("no activity \(id)") }
        return Outcome(id: id, ended: ended)
    }

    /// Deletes the stored activities with these persistent ids (of `app` only, when given).
    func deleteSaved(persistentIDs: [String], app: String?) async throws -> Outcome {
        Outcome(ended: try await store.writing { try $0.deleteSaved(persistentIDs: persistentIDs, appID: app) })
    }

    /// Deletes every stored activity of `app`.
    func deleteAll(ofApp app: String) async throws -> Outcome {
        Outcome(ended: try await store.writing { try $0.deleteAll(appID: app) })
    }

    /// A source's activity type (recent documents, tracks), registered on first use, and again if
    /// the user forgot the source's app meanwhile (`ForgetApp` unregisters its types).
    func sourceType(_ name: String, app: String, options: [String: String]) async throws -> ActivityType {
        if let type = try store.activityType(name) { return type }
        let type = try ActivityType.registration(type: name, appID: app, options: options, limits: store.limits)
        try await store.writing { try $0.register(type) }
        return type
    }

    /// Refuses what the user blocked: nothing of a blocked app is recorded or changed.
    func refuseIfBlocked(_ app: String) throws {
        guard try store.isBlocked(app) else { return }
        throw BatonError(.blocked, "the user blocked \(app): its activities are not recorded (baton unblock \(app) allows them again)")
    }
}

extension Store {
    /// The other devices' names, read only when one of `activities` came from another device.
    func deviceNames(for activities: [Activity]) throws -> [String: String] {
        activities.contains(where: \.isRemote) ? try remoteDeviceNames() : [:]
    }
}

extension ActivityRepository {
    /// The repository as one caller sees it (docs/DESIGN.md, "Callers and access"): a
    /// sandboxed app sees and changes its own app's activities only — another's does not exist
    /// for it (`NotFound`, `UnknownActivityType`); a host client sees all.
    struct View: Sendable {
        let repository: ActivityRepository
        let scope: CallerScope

        func sees(_ owner: String) -> Bool { scope.sees(owner) }

        /// The registered type `name`, when this caller may use it.
        func type(named name: String, limits: Limits) throws -> ActivityType {
            try Validate.reverseDNS(name, what: "activity type", limits: limits)
            guard let type = try repository.store.activityType(name), sees(type.appID) else {
                throw BatonError.unknownActivityType("no activity type \(printable(name)) is registered; register it with RegisterActivityType first")
            }
            return type
        }

        /// What `Explain` tells of `id`, as this caller may know it: nothing of another app's.
        struct Known: Sendable {
            /// The activity as it is now, while it lives.
            var live: Activity?
            /// Once it ended, for a week.
            var ended: Store.Tombstone?
            /// Once it ended, the history's copy, while the history keeps it.
            var past: PastActivity?
            var unrecorded: Unrecorded?
            var lastContinuation: Store.ContinuationOutcome?
        }

        func known(_ id: String) throws -> Known {
            let live = try repository.find(id)
            let ended = live == nil ? try repository.store.tombstone(activityID: id) : nil
            let past = live == nil ? try repository.store.pastActivity(id: id) : nil
            if let owner = live?.appID ?? ended?.appID ?? past?.activity.appID, !sees(owner) { return Known() }
            return Known(live: live, ended: ended, past: past, unrecorded: repository.unrecorded(id),
                         lastContinuation: try repository.store.lastContinuation(activityID: id))
        }

        func live(_ text: String, now: UInt64) throws -> Activity {
            let activity = try repository.live(text, now: now)
            guard sees(activity.appID) else { throw Access.noActivity(activity.id) }
            return activity
        }

        func list(_ filter: Store.ActivityFilter, now: UInt64) throws -> [Activity] {
            var filter = filter
            guard scope.narrow(&filter.appID) else { return [] }
            return try repository.list(filter, now: now)
        }

        func search(_ query: String, limit: Int, now: UInt64) throws -> [Activity] {
            try repository.search(query, limit: limit, now: now, app: scope.app)
        }

        /// Keeps `activity`, of a type `type(named:)` gave this caller.
        func advertise(_ activity: Activity, requestID: String?, quota: Int) async throws -> Outcome {
            try repository.refuseIfBlocked(activity.appID)
            return try await repository.advertise(activity, requestID: requestID, quota: quota)
        }

        /// Applies `update` to the activity `id`: this caller's app's, this machine's, of a
        /// type still registered, of an app not blocked.
        func update(_ id: String, with update: ActivityUpdate, now: UInt64) async throws -> Outcome {
            try await repository.update(id, requestID: update.requestID, now: now) { [self] activity, lookups, now in
                guard sees(activity.appID) else { throw Access.noActivity(activity.id) }
                guard !activity.isRemote else {
                    throw BatonError.accessDenied("""
                        activity \(activity.id) was advertised on another machine (device \(activity.deviceID)); only that machine changes it
                        """)
                }
                guard let type = try lookups.activityType(activity.type) else {
                    throw BatonError.unknownActivityType("activity type \(activity.type) is no longer registered")
                }
                try repository.refuseIfBlocked(activity.appID)
                var updated = try update.apply(to: activity, type: type, now: now, limits: lookups.limits)
                if let named = update.scene {
                    updated.sceneID = named.isEmpty ? nil : try SceneObjects.scene(named: named, ofApp: activity.appID, find: lookups.scene(id:))
                }
                return (updated, update.scene != nil)
            }
        }

        func deleteSaved(persistentIDs: [String]) async throws -> Outcome {
            try await repository.deleteSaved(persistentIDs: persistentIDs, app: scope.app)
        }

        func deleteAll(ofApp owner: String) async throws -> Outcome {
            guard sees(owner) else { throw BatonError.accessDenied("the sandboxed app \(scope.app ?? "") deletes only its own activities") }
            return try await repository.deleteAll(ofApp: owner)
        }

        func invalidate(_ id: String) async throws -> Outcome {
            if scope.app != nil, let owner = try repository.find(id)?.appID, !sees(owner) { throw Access.noActivity(id) }
            return try await repository.invalidate(id)
        }
    }

    /// The repository as `caller` sees it.
    func view(for call: MethodCall) -> View { View(repository: self, scope: CallerScope(call)) }
}
