import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging
import Synchronization

/// `Continue` and the delivery of continuations to apps.
///
/// A continuation is written first: its scene (new, or the one that already shows the
/// content) becomes `pending`, with a continuation row, and exists on the bus before the
/// app's handler is asked. Then it is delivered (`deliver(sceneID:)`):
/// - the handler answers: its storage goes into the scene, which becomes `ready`;
/// - the app refuses (its handler throws, or answers with storage a scene cannot hold):
///   a scene opened for it is closed, an existing one is as it was; `HandlerFailed`;
/// - the app cannot take it now (not running and not activatable, the call timed out,
///   the app vanished mid-call): the scene stays `pending` and is delivered again when the
///   handler's name appears on the bus (`runRedelivery`), also after a restart of batond;
///   after a day it becomes `failed`.
final class Continuations: Sendable {
    let connection: Connection
    let store: Store
    let log: Logger
    /// How long an app's handler may take to answer.
    let handlerTimeout: Duration
    let background: BackgroundTasks
    let activities: ActivityRepository
    let scenes: SceneObjects
    let signals: RootSignals
    let sync: SyncSlot
    /// The notification offering another machine's activity: a continued one is no longer offered.
    let notices: HandoffNotices
    /// Where apps' desktop entries are, for recent documents' apps.
    let applicationDirectories: [String]
    /// Scenes whose continuation is being delivered now: one delivery at a time per scene.
    private let deliveries = Mutex<[String: Task<Void, any Error>]>([:])
    var clock: any DaemonClock { store.wallClock }
    var limits: Limits { store.limits }

    init(
        connection: Connection, store: Store, log: Logger, handlerTimeout: Duration, background: BackgroundTasks,
        activities: ActivityRepository, scenes: SceneObjects, signals: RootSignals, sync: SyncSlot, notices: HandoffNotices,
        applicationDirectories: [String]
    ) {
        self.connection = connection
        self.store = store
        self.log = log
        self.handlerTimeout = handlerTimeout
        self.background = background
        self.activities = activities
        self.scenes = scenes
        self.signals = signals
        self.sync = sync
        self.notices = notices
        self.applicationDirectories = applicationDirectories
    }

    /// A delivery refused or cut short because batond is stopping: its continuation stays pending.
    static let stopping = BatonError.storageUnavailable("batond is stopping; the continuation is delivered when it starts again")

    /// `Continue` of the activity `id` with `options`, for a caller confined to an app, or not
    /// (nil): the method, and the desktop's search (the search provider, KRunner).
    func continueActivity(_ id: String, options: [String: String], confinedTo confinedApp: String?) async throws -> [DBusValue] {
        let continued = try await continueInScene(id, options: options, confinedTo: confinedApp)
        // Continued: no longer to be offered by a notification.
        notices.withdraw(of: [(try? Identifier.normalize(id)) ?? id])
        return continued
    }


    private func continueInScene(_ id: String, options: [String: String], confinedTo confinedApp: String?) async throws -> [DBusValue] {
        let now = clock.now()
        let parsed = try ContinuationRoute.Options(options)
        let request = try Validate.requestID(options).map { Request(id: $0, method: Contract.Activities.continue.name) }
        // A repeat answers at once, without asking the app again, even if the activity has gone since.
        if let request, let first = try store.result(of: request) {
            // Empty: the first call asked another machine (`device`), which chose the scene.
            return [.objectPath(first.isEmpty ? "/" : SceneAddress.objectPath(forID: first))]
        }
        let activity = try activities.continuable(id, now: now)
        switch try route(for: activity, options: parsed, confinedTo: confinedApp) {
        case .onDevice(let device):
            return try await continueOnDevice(activity, device: device, options: options, request: request)
        case .outside:
            guard let opener = OutsideOpener.byType[activity.type] else { return try await openWebPage(of: activity, request: request) }
            return try await openOutside(activity, through: opener.handler, request: request, failure: opener.failure)
        case .webPage:
            return try await openWebPage(of: activity, request: request)
        case .scene(let type, let choice, let delivery):
            let existing: Scene?
            switch choice {
            case .named(let named): existing = try store.scene(id: try SceneObjects.scene(named: named, ofApp: activity.appID, find: store.scene(id:)))
            case .showing(let content): existing = try store.scene(showing: content, appID: activity.appID).flatMap { try store.scene(id: $0) }
            case .new: existing = nil
            }
            switch delivery {
            case .unrecorded: return try await continueUnrecorded(activity, type: type, into: existing, now: now)
            case .withoutHandler: return try await continueWithoutHandler(activity, type: type, into: existing, now: now, request: request)
            case .handler: return try await continueThroughHandler(activity, type: type, into: existing, now: now, wait: parsed.wait, request: request)
            }
        }
    }

    /// Where `Continue` with `options` takes `activity` for a caller confined to `confinedApp`
    /// (nil: a host client), or the error it answers with. `Explain` asks the same question, so
    /// that what it says is what `Continue` then does.
    func route(
        for activity: Activity, options: ContinuationRoute.Options = ContinuationRoute.Options(), confinedTo confinedApp: String?
    ) throws -> ContinuationRoute {
        let route: ContinuationRoute
        do {
            route = try ContinuationRoute.route(
                for: activity, confinedTo: confinedApp, options: options, thisDevice: thisDevice, type: try store.activityType(activity.type),
                unrecorded: activities.unrecorded(activity.id) == .advertisedWhilePaused, opensOutside: Set(OutsideOpener.byType.keys))
        } catch let error as BatonError where error.code == .unknownActivityType && activity.isRemote {
            throw BatonError.unknownActivityType(try notHere(activity))
        }
        if route == .outside, let opener = OutsideOpener.byType[activity.type], let obstacle = opener.obstacle(activity, applicationDirectories) {
            throw BatonError.notEligible("activity \(activity.id) is \(opener.refused): \(obstacle)")
        }
        return route
    }

    /// Why another machine's activity, of a type no app here registered, is not continued
    /// here, and where it can be: on its own machine, while an app there has the type.
    func notHere(_ activity: Activity) throws -> String {
        let name = try store.remoteDeviceNames()[activity.deviceID] ?? activity.deviceID
        guard try store.devicesWithType(activity.type).contains(activity.deviceID) else {
            return "no app on this machine registered \(activity.type), and on \(name), where it was advertised, it is no longer registered either"
        }
        return "no app on this machine registered \(activity.type); it can be continued on \(name), where it was advertised "
            + "(Continue with device=\(name), or baton continue \(activity.id) --device \(name))"
    }

    /// A continuation through the type's handler: written first (the scene, new or existing,
    /// turns `pending` and is on the bus), then delivered; with `wait`, the reply waits for the app.
    private func continueThroughHandler(
        _ activity: Activity, type: ActivityType, into existing: Scene?, now: UInt64, wait: Bool, request: Request?
    ) async throws -> [DBusValue] {
        let sceneID: String
        if let existing {
            sceneID = existing.id
            try await store.writing { try $0.markPending(sceneID: existing.id, activityID: activity.id, now: now, request: request) }
            scenes.changed(existing.id)
        } else {
            let scene = Scene(id: Identifier.make(at: now), appID: activity.appID, title: activity.title, activityID: activity.id,
                              createdAt: now, lastActiveAt: now, state: .pending)
            let stored = try await store.writing { try $0.insertPending(scene, activityID: activity.id, request: request) }
            // The same request, continued meanwhile by an earlier call: its scene is the answer.
            guard stored == scene.id else { return [.objectPath(SceneAddress.objectPath(forID: stored))] }
            try await scenes.exportNew(scene)
            sceneID = scene.id
        }
        let path = SceneAddress.objectPath(forID: sceneID)
        let pending = PendingContinuation(sceneID: sceneID, activityID: activity.id, createdScene: existing == nil, requestedAt: now)
        if wait {
            try await deliver(sceneID: sceneID, known: (pending, activity, type))
        } else {
            background.start { try await self.deliver(sceneID: sceneID, known: (pending, activity, type)) }
        }
        return [.objectPath(path)]
    }

    /// `Continue` with `device`: the other machine opens the scene and its app shows it. The
    /// request goes into this machine's log (sent when the server can be reached); the reply is
    /// `/`, as the scene is not on this machine.
    private func continueOnDevice(
        _ activity: Activity, device named: String, options: [String: String], request: Request?
    ) async throws -> [DBusValue] {
        guard let engine = sync.engine, engine.settings != nil else {
            throw BatonError(.syncUnavailable, "continuing on another machine needs sync; set it up with baton sync init or join")
        }
        if let other = options.keys.first(where: { $0 != "device" && $0 != "request_id" }) {
            throw BatonError.invalidArgument("Continue with device takes no \(other): the other machine chooses the scene")
        }
        let devices = try store.remoteDeviceNames()
        let matches = devices.filter { $0.key == named || $0.value == named }
        guard matches.count == 1, let device = matches.first?.key else {
            throw matches.isEmpty
                ? BatonError.notFound("no device '\(printable(named))' among this user's machines (baton devices lists them)")
                : BatonError.invalidArgument("several machines are called '\(printable(named))'; give the device's id")
        }
        guard try store.devicesWithType(activity.type).contains(device) else {
            throw BatonError.unknownActivityType("no app on \(devices[device] ?? device) registered \(activity.type), so it cannot continue it")
        }
        try await SyncCalls.syncing { try await engine.requestContinuation(of: activity.id, on: device, request: request) }
        log.debug("asked \(device) to continue \(activity.id)")
        return [.objectPath("/")]
    }

    /// A continuation of an activity advertised while recording is paused: nothing of the
    /// activity is written. A new scene opens without a title or current activity, the app's
    /// handler fills its storage (the app's own state, as for any scene), and nothing waits
    /// in it: an app that cannot take it now gets `HandlerFailed`, and the new scene closes.
    private func continueUnrecorded(_ activity: Activity, type: ActivityType, into existing: Scene?, now: UInt64) async throws -> [DBusValue] {
        let scene = existing ?? Scene(id: Identifier.make(at: now), appID: activity.appID, title: "", createdAt: now, lastActiveAt: now)
        if existing == nil {
            try await store.writing { try $0.insert(scene, storage: []) }
            try await scenes.exportNew(scene)
        }
        let path = SceneAddress.objectPath(forID: scene.id)
        do {
            if let handler = type.handler {
                let storage = try await askHandler(handler, at: type.handlerPath, scene: path, activity: activity)
                if !storage.isEmpty {
                    let removed = try await store.writing { [storage] in try $0.changeStorage(sceneID: scene.id, set: storage, remove: []) }
                    scenes.storageChanged(scene.id, changed: storage, removed: removed)
                }
            }
        } catch {
            if existing == nil { try? await scenes.close(scene.id) }
            if let unreachable = error as? HandlerUnreachable { throw BatonError.handlerFailed(unreachable.reason) }
            throw error
        }
        signals.continued(activity, into: path, created: existing == nil)
        tellOriginator(activity, type: type, scene: path, device: thisDevice)
        return [.objectPath(path)]
    }

    /// A continuation of a type without a handler: the scene (new, or the one named or
    /// found) shows the activity at once, for the app to read when it starts.
    private func continueWithoutHandler(
        _ activity: Activity, type: ActivityType, into existing: Scene?, now: UInt64, request: Request?
    ) async throws -> [DBusValue] {
        let scene = existing ?? Scene(id: Identifier.make(at: now), appID: activity.appID, title: activity.title, activityID: activity.id,
                                      createdAt: now, lastActiveAt: now)
        if existing != nil {
            try await store.writing { try $0.continueInto(sceneID: scene.id, activityID: activity.id, storage: [], now: now, request: request) }
            scenes.changed(scene.id)
        } else {
            let stored = try await store.writing { try $0.insert(scene, storage: [], request: request) }
            // The same request, continued meanwhile by an earlier call: its scene is the answer.
            guard stored == scene.id else { return [.objectPath(SceneAddress.objectPath(forID: stored))] }
            try await scenes.exportNew(scene)
        }
        let path = SceneAddress.objectPath(forID: scene.id)
        signals.continued(activity, into: path, created: existing == nil)
        tellWhereContinued(activity, type: type, scene: path)
        return [.objectPath(path)]
    }

    /// Opens the page of an activity no app here can continue, through the web pages' handler
    /// (`org.baton.Web`, `baton serve-web`); no scene. Replies "/", as a continuation on another
    /// machine does (and so does a repeat of `request`, without opening the page again).
    private func openWebPage(of activity: Activity, request: Request?) async throws -> [DBusValue] {
        try await openOutside(activity, through: Contract.Sources.WebPages.app, request: request,
                              failure: "no app here continues \(activity.type), and its web page could not be opened")
    }

    /// Asks `handler` to open `activity` outside any scene; replies "/" (and records `request`).
    private func openOutside(_ activity: Activity, through handler: String, request: Request?, failure: String) async throws -> [DBusValue] {
        do {
            _ = try await askHandler(handler, at: Contract.Sources.handlerPath, scene: "/", activity: activity)
        } catch let unreachable as HandlerUnreachable {
            throw BatonError.handlerFailed("\(failure): \(unreachable.reason)")
        }
        if let request { try await store.writing { try $0.record(request, result: "") } }
        log.debug("\(handler) opened \(activity.id)")
        signals.continued(activity, into: "/", created: false)
        // Another machine's: it hears where its activity went, as for any continuation.
        if activity.isRemote { tellItsMachine(activity) }
        return [.objectPath("/")]
    }

    /// Tells the app that advertised `activity` where it went, as Apple's
    /// `userActivityWasContinued`: on this machine through its handler, on another through that
    /// machine's batond (which tells its app).
    func tellWhereContinued(_ activity: Activity, type: ActivityType, scene: ObjectPath) {
        guard activity.isRemote else { return tellOriginator(activity, type: type, scene: scene, device: thisDevice) }
        tellItsMachine(activity)
    }

    /// Another machine's activity, continued here: a request in this machine's log tells that machine.
    func tellItsMachine(_ activity: Activity) {
        background.start { [log] in
            do { try await self.sync.engine?.tellContinued(activity) } catch { log.error("telling \(activity.deviceID) of the continuation: \(error)") }
        }
    }

    /// Delivers the continuation waiting in a scene, once at a time per scene; returns when
    /// the app has it (or there was nothing to deliver), throws why not otherwise. `known`:
    /// what `Continue` just wrote and read, so that it need not be read again.
    /// A delivery already under way for the scene is awaited rather than started twice, and
    /// whatever became of it, the continuation still waiting is delivered after it: that
    /// delivery may have asked before the app's name appeared (the app that appeared is why
    /// this caller came), or before this caller's continuation was written.
    func deliver(sceneID: String, known: (PendingContinuation, Activity, ActivityType)? = nil) async throws {
        var known = known
        while true {
            let (delivery, ours) = deliveries.withLock { running -> (Task<Void, any Error>?, Bool) in
                if let underWay = running[sceneID] { return (underWay, false) }
                // Not the caller's task: a caller that gives up does not stop the delivery.
                let delivery = background.start { [known] in
                    defer { _ = self.deliveries.withLock { $0.removeValue(forKey: sceneID) } }
                    try await self.deliverOnce(sceneID: sceneID, known: known)
                }
                running[sceneID] = delivery
                return (delivery, true)
            }
            // batond is stopping: the continuation waits, pending, for the next start.
            guard let delivery else { throw Self.stopping }
            if ours { return try await delivery.value }
            let failure: (any Error)?
            do { try await delivery.value; failure = nil } catch { failure = error }
            guard try store.pendingContinuation(sceneID: sceneID) != nil else {
                if let failure { throw failure }
                return
            }
            known = nil
        }
    }

    private func deliverOnce(sceneID: String, known: (PendingContinuation, Activity, ActivityType)?) async throws {
        // Read even when `known`: a delivery that ran just before this one (a redelivery when
        // the app appeared) may have delivered this continuation already, and nothing waits.
        guard let pending = try store.pendingContinuation(sceneID: sceneID) else { return }
        let known = known.flatMap { $0.0.activityID == pending.activityID ? $0 : nil }
        let path = SceneAddress.objectPath(forID: sceneID)
        do {
            guard let activity = try known?.1
                    ?? store.continuable(id: pending.activityID, now: clock.now(), askedAt: pending.requestedAt).map(activities.latest) else {
                throw BatonError.notFound("activity \(pending.activityID) was invalidated or expired before its app could take it")
            }
            guard let type = try known?.2 ?? store.activityType(activity.type) else {
                throw BatonError.unknownActivityType("activity type \(activity.type) is no longer registered")
            }
            var storage: [(String, StorageValue)] = []
            if let handler = type.handler {
                storage = try await askHandler(handler, at: type.handlerPath, scene: path, activity: activity)
            }
            let now = clock.now()
            let scene = try await store.writing { [storage] in
                try $0.completeContinuation(sceneID: sceneID, activityID: activity.id, storage: storage, now: now)
            }
            scenes.changed(scene)
            scenes.storageChanged(sceneID, changed: storage, removed: [])
            signals.continued(activity, into: path, created: pending.createdScene)
            log.debug("continued \(activity.id) into \(path.text)")
            tellWhereContinued(activity, type: type, scene: path)
        } catch is CancellationError {
            // batond is stopping: the continuation stays as it is, pending, for the next start.
            throw Self.stopping
        } catch let unreachable as HandlerUnreachable {
            try? await store.writing { try $0.noteDeliveryFailed(sceneID: sceneID, error: unreachable.reason) }
            log.info("\(unreachable.reason); the continuation waits in \(path.text)")
            throw BatonError.handlerFailed("""
                \(unreachable.reason); the continuation waits in scene \(path.text) (State pending) and is delivered \
                when \(unreachable.handler) appears on the bus
                """)
        } catch {
            // Refused, or nothing left to continue: no trace of it.
            let why = (error as? BatonError)?.message ?? "\(error)"
            if (try? await store.writing({ try $0.abandonContinuation(sceneID: sceneID, why: why) })) == true {
                scenes.remove([sceneID])
            } else {
                scenes.changed(sceneID)
            }
            throw error
        }
    }

    /// Calls the app's `Handler.ContinueActivity` and checks the storage it returns.
    /// Throws `HandlerUnreachable` when the app cannot take the call now, `HandlerFailed`
    /// when it refused it or answered with storage a scene cannot hold.
    func askHandler(
        _ handler: String, at pathText: String, scene: ObjectPath, activity: Activity
    ) async throws -> [(String, StorageValue)] {
        let reply: [DBusValue]
        do {
            let path = try ObjectPath(validating: pathText)
            let method = Contract.Handler.continueActivity
            reply = try await connection.call(
                handler, path, method.interface, method.name, [.objectPath(scene), Records.record(activity)], timeout: handlerTimeout)
        } catch let error as DBusError {
            if HandlerUnreachable.names.contains(error.name) || error.name.hasPrefix(HandlerUnreachable.spawnPrefix) {
                throw HandlerUnreachable(handler: handler, reason: "\(handler) cannot take the continuation now: \(error.name): \(error.message)")
            }
            throw BatonError.handlerFailed("\(handler) could not continue the activity: \(error.name): \(error.message)")
        }
        guard reply.count == 1, let entries = reply[0].dictionaryEntries, reply[0].type == .dictionary(key: .string, value: .variant) else {
            throw BatonError.handlerFailed(
                "\(handler) replied '\(Signature(reply.map(\.type)))' to \(Contract.Handler.continueActivity.name); the handler must return a{sv}")
        }
        var storage: [(String, StorageValue)] = []
        for entry in entries {
            guard let key = entry.key.stringValue else { continue }
            do {
                try Validate.storageKey(key, limits: limits)
                let value = try Records.storageValue(entry.value, key: key)
                try value.validate(key: key, limits: limits)
                storage.append((key, value))
            } catch {
                throw BatonError.handlerFailed("\(handler) returned storage the scene cannot hold: \(error.message)")
            }
        }
        return storage
    }

    /// `Handler.ActivityContinued` on the app that advertised the activity (Apple's
    /// `userActivityWasContinued`), without waiting for it. An app that is not running is
    /// not started for it, and one that does not implement it is skipped.
    func tellOriginator(_ activity: Activity, type: ActivityType, scene: ObjectPath, device: String) {
        guard let handler = type.handler, let path = try? ObjectPath(validating: type.handlerPath) else { return }
        let method = Contract.Handler.activityContinued
        var message = Message.methodCall(
            destination: handler, path: path, interface: method.interface, member: method.name,
            body: [.string(activity.id), .objectPath(scene), .string(device)])
        message.autoStart = false
        background.start { [connection, log, handlerTimeout, message] in
            do {
                _ = try await connection.call(message, timeout: handlerTimeout)
            } catch let error as DBusError where error.name == DBusError.Name.unknownMethod || error.name == DBusError.Name.serviceUnknown
                || error.name == DBusError.Name.nameHasNoOwner || error.name == DBusError.Name.unknownInterface {
                // Not implemented, or not running: nothing to tell.
            } catch {
                log.debug("telling \(handler) that \(activity.id) was continued: \(error)")
            }
        }
    }

    /// The `device` of a continuation made on this machine: its sync id, or empty while sync is off.
    var thisDevice: String { sync.engine?.settings?.deviceID ?? "" }

    // MARK: Delivering again

    /// Delivers waiting continuations when their app's handler name appears on the bus, and
    /// at once those whose handler is there already; until the task is cancelled.
    func runRedelivery() async {
        let rule = MatchRule(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
        guard let appeared = try? await connection.signals(matching: rule) else {
            log.error("cannot watch for apps appearing on the bus; waiting continuations are delivered at their app's RestoreScenes only")
            return
        }
        // Subscribed first, so an app that appears now is not missed.
        await deliverWaiting { handler in
            (try? await self.connection.call(
                "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", [.string(handler)]
            ).first?.boolValue) ?? false
        }
        // An app instance that vanished while batond was away crashed as far as it can tell.
        for (_, instance) in (try? store.attachedInstances()) ?? [] {
            let there = try? await connection.call(
                "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", [.string(instance)])
            if there?.first?.boolValue != true { await instanceVanished(instance) }
        }
        for await signal in appeared {
            guard signal.body.count == 3, let name = signal.body[0].stringValue, let owner = signal.body[2].stringValue else { continue }
            if name.hasPrefix(":") {
                if owner.isEmpty { await instanceVanished(name) }
            } else if !owner.isEmpty {
                await deliverWaiting { $0 == name }
            }
        }
    }

    /// An app's instance left the bus: without a `Detach` first, it crashed.
    func instanceVanished(_ instance: String) async {
        // Most names that leave are not app instances: a read decides, not a write.
        guard (try? store.attachedInstances().contains { $0.instance == instance }) == true else { return }
        do {
            let apps = try await store.writing { try $0.instanceVanished(instance) }
            for app in apps { log.info("\(app) left the bus without Detach; its scenes come back as recover") }
        } catch {
            log.error("noting that \(instance) left: \(error)")
        }
    }

    /// Delivers every waiting continuation whose type's handler `matches`, one after another.
    func deliverWaiting(appID: String? = nil, where matches: (String) async -> Bool) async {
        guard let waiting = try? store.pendingContinuations(appID: appID) else { return }
        for pending in waiting where !Task.isCancelled {
            // One whose activity or type went is delivered too: that abandons it.
            let activity = try? store.continuable(id: pending.activityID, now: clock.now(), askedAt: pending.requestedAt)
            let type = activity.flatMap { (try? store.activityType($0.type)) ?? nil }
            if let handler = type?.handler, !(await matches(handler)) { continue }
            do {
                try await deliver(sceneID: pending.sceneID)
            } catch {
                log.debug("delivering the continuation in scene \(pending.sceneID): \(error)")
            }
        }
    }

    /// Continuations asked for more than a day ago that never reached their app: their
    /// scenes become `failed`. Run by housekeeping.
    func failOldContinuations() async {
        do {
            // Housekeeping asks every round: a read, and a write only when one is due.
            let before = clock.now() - Store.continuationLifetime
            guard let oldest = try store.oldestContinuationRequest(), oldest < before else { return }
            let failed = try await store.writing { try $0.failContinuations(requestedBefore: before) }
            for id in failed {
                scenes.changed(id)
                log.info("the continuation in scene \(id) did not reach its app within a day; the scene is failed")
            }
        } catch {
            log.error("failing old continuations: \(error)")
        }
    }
}

/// The app cannot take a continuation now: not running and not activatable, timed out,
/// or gone mid-call. The continuation waits.
struct HandlerUnreachable: Error {
    let handler: String
    let reason: String

    static let names: Set<String> = [
        DBusError.Name.serviceUnknown, DBusError.Name.nameHasNoOwner, DBusError.Name.noReply, DBusError.Name.timeout,
        "org.freedesktop.DBus.Error.TimedOut", DBusError.Name.disconnected, "org.freedesktop.DBus.Error.LimitsExceeded",
    ]
    /// Activation failures: `org.freedesktop.DBus.Error.Spawn.ChildExited` and the like.
    static let spawnPrefix = "org.freedesktop.DBus.Error.Spawn."
}
