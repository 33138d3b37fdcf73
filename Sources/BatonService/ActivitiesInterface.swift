import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging

/// `org.baton.Handoff1.Activities`: what users are doing. Every read and write goes through
/// the activity repository as the caller sees it (`ActivityRepository.View`), which knows the
/// mode (recorded, paused, another machine's); what a write changed is announced by the
/// service (`Announcements`). `Continue` is `Continuations`'.
struct ActivitiesInterface: Sendable {
    let store: Store
    let activities: ActivityRepository
    let continuations: Continuations
    let announcements: any Announcements
    /// Where apps' desktop entries are: `Explain` says whether a recent document's app is here.
    let applicationDirectories: [String]

    var limits: Limits { store.limits }
    var clock: any DaemonClock { store.wallClock }

    /// Writes are `.concurrent`: the bus thread serves other calls while they wait for the writer thread.
    var interface: Interface {
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
        let activities = activities.view(for: call)
        let type = try activities.type(named: try call.argument(0), limits: limits)
        let advertisement = try Advertisement.parse(
            type: type, title: try call.argument(1), payload: try call.argument(2), options: try call.argument(3), limits: limits)
        let sceneID = try advertisement.scene.map { try SceneObjects.scene(named: $0, ofApp: type.appID, find: store.scene(id:)) }
        let now = clock.now()
        let activity = advertisement.makeActivity(id: Identifier.make(at: now), type: type, sceneID: sceneID, now: now)
        let outcome = try await activities.advertise(activity, requestID: advertisement.requestID, quota: limits.liveActivitiesPerApp)
        announcements.announce(outcome)
        return [.string(outcome.id)]
    }

    func update(_ call: MethodCall) async throws -> [DBusValue] {
        let update = try ActivityUpdate(payload: try call.argument(1), options: try call.argument(2), limits: limits)
        announcements.announce(try await activities.view(for: call).update(try call.argument(0), with: update, now: clock.now()))
        return []
    }

    func invalidate(_ call: MethodCall) async throws -> [DBusValue] {
        announcements.announce(try await activities.view(for: call).invalidate(try Identifier.normalize(try call.argument(0))))
        return []
    }

    func get(_ call: MethodCall) async throws -> EncodedBody {
        let activity = try activities.view(for: call).live(try call.argument(0), now: clock.now())
        return Records.encodedRecord(activity, deviceNames: try store.deviceNames(for: [activity]))
    }

    func list(_ call: MethodCall) async throws -> EncodedBody {
        let found = try activities.view(for: call).list(try filter(try call.argument(0)), now: clock.now())
        return Records.encodedRecords(found, deviceNames: try store.deviceNames(for: found))
    }

    func search(_ call: MethodCall) async throws -> EncodedBody {
        let requested: UInt32 = try call.argument(1)
        let limit = requested == 0 ? 50 : Int(min(requested, 1000))
        let found = try activities.view(for: call).search(try call.argument(0), limit: limit, now: clock.now())
        return Records.encodedRecords(found, deviceNames: try store.deviceNames(for: found))
    }

    func continueActivity(_ call: MethodCall) async throws -> [DBusValue] {
        try await continuations.continueActivity(try call.argument(0), options: try call.argument(1), confinedTo: CallerScope(call).app)
    }

    func deleteSaved(_ call: MethodCall) async throws -> [DBusValue] {
        let deleted = try await activities.view(for: call).deleteSaved(persistentIDs: try call.argument(0))
        announcements.announce(deleted)
        return [.uint32(UInt32(deleted.ended.count))]
    }

    func deleteAllSaved(_ call: MethodCall) async throws -> [DBusValue] {
        let deleted = try await activities.view(for: call).deleteAll(ofApp: try call.argument(0))
        announcements.announce(deleted)
        return [.uint32(UInt32(deleted.ended.count))]
    }

    /// Why an activity is or is not continuable and searchable, in sentences: from the
    /// activity itself while it lives; once it ended, from its tombstone (a week) and the
    /// history's copy (while the history keeps it). `continuable` is what `Continue` without
    /// options then does: the same lookup and the same route (`Continuations.route`).
    func explain(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try Identifier.normalize(try call.argument(0))
        let now = clock.now()
        let view = activities.view(for: call)
        let known = try view.known(id)
        var reasons: [String] = []
        let state: String
        var searchable = false
        // What Continue would continue: the live activity unless it expired, else the history's copy.
        var continued: Activity?
        if let activity = known.live {
            let expired = activity.isExpired(at: now)
            state = expired ? "expired" : "live"
            switch known.unrecorded {
            case .advertisedWhilePaused: reasons.append("advertised while recording was paused: kept in memory only, until resumed")
            case .updatedWhilePaused:
                reasons.append("updated while recording was paused: the update is kept in memory only, and undone when recording resumes")
            case nil: break
            }
            if let expiresAt = activity.expiresAt, expired { reasons.append("expired at \(WallClock.text(expiresAt))") }
            if !activity.eligibleForHandoff { reasons.append("advertised with eligible_for_handoff=false") }
            if !activity.eligibleForSearch { reasons.append("advertised with eligible_for_search=false") }
            if !activity.isRemote, try store.isBlocked(activity.appID) {
                reasons.append("its app \(activity.appID) is blocked: it advertises and changes nothing until unblocked (baton unblock \(activity.appID)); what it advertised before stays")
            }
            searchable = !expired && activity.eligibleForSearch
            continued = expired ? nil : activity
        } else if let ending = known.ended.map({ (state: $0.state, reason: $0.reason, at: $0.endedAt) })
                    ?? known.past.map({ (state: "history", reason: $0.endReason, at: $0.endedAt) }) {
            state = ending.state
            reasons.append("\(ending.reason) (\(WallClock.text(ending.at)))")
            continued = known.past?.activity
            if continued == nil { reasons.append("the history has no copy of it, so it cannot be continued") }
        } else {
            state = "unknown"
            reasons.append(Self.neverHere(id))
        }
        var continuable = false
        if let activity = continued {
            let fromHistory = known.live == nil
            do {
                let route = try continuations.route(for: activity, confinedTo: view.scope.app)
                continuable = true
                let does = what(route, does: activity)
                if fromHistory {
                    reasons.append("kept in the history: Continue continues from its copy" + (does.map { "; \($0)" } ?? ""))
                } else if let does {
                    reasons.append(does)
                }
            } catch let refusal as BatonError {
                // Said above already, in the words of the option the app gave.
                if activity.eligibleForHandoff || fromHistory {
                    reasons.append(fromHistory ? "kept in the history, but \(refusal.message)" : refusal.message)
                }
            }
        }
        if let waiting = known.lastContinuation, waiting.state == "pending" {
            reasons.append("its continuation into scene \(SceneAddress.objectPath(forID: waiting.sceneID).text) waits for its app to take it "
                           + "(asked \(WallClock.text(waiting.at))): it is delivered when the app appears on the bus")
        }
        let last = known.lastContinuation.map {
            Records.Explanation.LastContinuation(scene: $0.sceneID, state: $0.state, error: $0.error ?? "", at: $0.at)
        }
        return [Records.Explanation(id: id, state: state, continuable: continuable, searchable: searchable, reasons: reasons,
                                    lastContinuation: last).record]
    }

    /// What continuing `activity` by `route` does, in a sentence, where it is worth saying.
    func what(_ route: ContinuationRoute, does activity: Activity) -> String? {
        switch route {
        case .outside: return openedOutside(activity)?.opens
        case .webPage:
            return "no app here registered \(activity.type): continuing opens its web page, \(activity.webpageURL ?? ""), in the default browser"
        case .scene(let type, _, .withoutHandler):
            return "type \(type.type) has no handler: a continuation opens a scene for \(type.appID) to read when it starts"
        case .scene, .onDevice: return nil
        }
    }

    /// For an activity of a source that opens outside any scene (a web page, a recent
    /// document, a track): what continuing it does, and why it cannot be done here (nil when it can).
    func openedOutside(_ activity: Activity) -> (opens: String, obstacle: String?)? {
        guard let opener = OutsideOpener.byType[activity.type] else { return nil }
        return (opener.opens(activity, applicationDirectories),
                opener.obstacle(activity, applicationDirectories).map { "\(opener.refused): \($0)" })
    }

    static func neverHere(_ id: String) -> String {
        "batond has no record of \(id): it never was here, or it ended more than 7 days ago and the history did not keep it"
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
                case "local", continuations.sync.engine?.settings?.deviceID ?? "local": filter.device = .local
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
