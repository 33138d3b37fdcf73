import BatonCore
import BatonStore
import DBus
import Glibc
import Synchronization

/// `org.baton.Handoff1` on a bus connection: the Registry, Activities and Scenes
/// interfaces on the root object, one Scene object per scene, their signals.
///
/// Every write goes to the store, and is committed, before its reply is sent.
/// Handlers start in arrival order on the connection's bus thread. Reads are answered
/// there; a write is queued, in that order, on the store's writer thread, and its
/// handler awaits it while the bus thread goes on serving (`.concurrent`), so no call
/// waits behind a write that waits for the disk. `Continue` also awaits the app's handler.
public final class HandoffService: Sendable {
    public static let busName = "org.baton.Handoff1"
    public static let rootPath: ObjectPath = "/org/baton/Handoff1"
    public static let registry = "org.baton.Handoff1.Registry"
    public static let activities = "org.baton.Handoff1.Activities"
    public static let scenes = "org.baton.Handoff1.Scenes"
    public static let scene = "org.baton.Handoff1.Scene"
    public static let handler = "org.baton.Handoff1.Handler"
    public static let status = "org.baton.Handoff1.Status"

    let connection: Connection
    let store: Store
    let log: Log
    let handlerTimeout: Duration
    private var limits: Limits { store.limits }
    /// Scenes that came back from the database when the daemon started.
    private let restoredScenes = Mutex<Set<String>>([])
    /// When the daemon started, for Status.StartedAt.
    private let startedAt = WallClock.nowMicroseconds()

    private let commits: CommitQueue

    /// `callsPerCaller`: calls one caller may have in flight; beyond, `LimitsExceeded`.
    public init(connection: Connection, store: Store, log: Log, handlerTimeout: Duration = .seconds(10), callsPerCaller: Int = 256) {
        self.connection = connection
        self.store = store
        self.log = log
        self.handlerTimeout = handlerTimeout
        self.callsPerCaller = callsPerCaller
        self.commits = CommitQueue(store: store, schedule: connection.afterDispatch)
    }

    private let callsPerCaller: Int

    /// Exports every object (scenes from the database marked restored), then owns the bus name.
    public func start() async throws {
        connection.limitCalls(perCaller: callsPerCaller, refusal: BatonError(.limitsExceeded, """
            this client has \(callsPerCaller) calls waiting for batond's answers already; wait for some of them, then send more
            """).dbusError)
        let ownUser = getuid()
        connection.setAccessCheck { _, callerUser in
            guard callerUser == ownUser else {
                throw BatonError.accessDenied("batond serves only its own user (uid \(ownUser))")
            }
        }
        let scenes = try store.scenes()
        restoredScenes.withLock { $0 = Set(scenes.map(\.id)) }
        // Scenes first: with no manager above them yet, restoring them announces nothing
        // (no one can be listening before the name is owned) and reads no properties.
        for scene in scenes {
            try await connection.export(Records.scenePath(scene.id), [sceneInterface])
        }
        try await connection.export(
            Self.rootPath, [registryInterface, activitiesInterface, scenesInterface, statusInterface], objectManager: true)
        try await connection.requestName(Self.busName)
        log.info("serving \(Self.busName) with \(scenes.count) restored scenes from \(store.path)")
    }

    /// Stops taking calls and answers every call already received: releases the name,
    /// answers calls that still arrive with `StorageUnavailable` (clients try again, and
    /// reach the next batond), and returns once every earlier call has its reply, or after
    /// `grace`. Returns false when `grace` ran out first.
    @discardableResult
    public func stop(grace: Duration = .seconds(5)) async -> Bool {
        try? await connection.releaseName(Self.busName)
        return await connection.drain(
            refusing: BatonError.storageUnavailable("batond is stopping; try again (the next call starts it again)").dbusError,
            timeout: grace)
    }

    /// How long no write may commit before the WAL is emptied and truncated.
    public static let idleBeforeTruncatingWAL: Duration = .seconds(2)

    /// How long an expired activity is kept (hidden) before it is purged, so that a
    /// caller who just missed it hears `Expired` rather than `NotFound`.
    public static let expiredGrace: UInt64 = 2_000_000

    /// The daemon's housekeeping, every `period` until the task is cancelled: purges expired
    /// activities shortly after they expire, and merges the search index's segments after
    /// writes. Expired activities are hidden from every call at once; purging reclaims
    /// their space and announces them. With nothing written, each round is one indexed read.
    ///
    /// An earlier version raced its sleep against an AsyncStream; cancelling the losing
    /// `next()` finished the stream for good, and the loop then spun, writing without pause.
    public func runHousekeeping(period: Duration = .seconds(1)) async {
        while !Task.isCancelled {
            if let next = try? store.nextExpiry(), next + Self.expiredGrace <= WallClock.nowMicroseconds() {
                await purgeExpired()
            }
            do {
                try await store.writing { store in
                    try store.tidySearchIndex()
                    try store.forgetRequests(before: WallClock.nowMicroseconds() - Store.requestLifetime)
                    try store.truncateWALIfIdle(after: Self.idleBeforeTruncatingWAL)
                }
            } catch {
                log.error("housekeeping failed: \(error)")
            }
            try? await Task.sleep(for: period)
        }
    }

    /// Deletes expired activities and announces them; returns how many went.
    @discardableResult
    public func purgeExpired() async -> Int {
        do {
            let purged = try await store.writing { try $0.purgeExpired(now: WallClock.nowMicroseconds() - Self.expiredGrace) }
            for id in purged { emitActivities("Invalidated", [.string(id)]) }
            if !purged.isEmpty { log.debug("purged \(purged.count) expired activities") }
            return purged.count
        } catch {
            log.error("purging expired activities failed: \(error)")
            return 0
        }
    }

    // MARK: Status

    /// The daemon's own facts, for `baton status`: read-only, and none of them sensitive.
    var statusInterface: Interface {
        Interface(Self.status, properties: [
            Property("Version", "u", changeSignal: .const) { _ in .uint32(1) },
            Property("DatabasePath", "s", changeSignal: .const) { _ in .string(self.store.path) },
            Property("DatabaseSize", "t", changeSignal: .none) { _ in
                var total: UInt64 = 0
                for suffix in ["", "-wal"] {
                    var info = stat()
                    if stat(self.store.path + suffix, &info) == 0 { total += UInt64(info.st_size) }
                }
                return .uint64(total)
            },
            Property("StartedAt", "t", changeSignal: .const) { _ in .uint64(self.startedAt) },
        ])
    }

    // MARK: Registry

    var registryInterface: Interface {
        Interface(Self.registry, methods: [
            Method("RegisterActivityType",
                   in: [Argument("type", "s"), Argument("app_id", "s"), Argument("options", "a{ss}")], ordering: .concurrent) { call in
                let type = try ActivityType.registration(
                    type: try call.argument(0), appID: try call.argument(1), options: try call.argument(2), limits: self.limits)
                if let handler = type.handler, !DBusNames.isValid(handler, as: .busName) {
                    throw BatonError.invalidArgument("handler '\(printable(handler))' is not a bus name, like com.example.App")
                }
                guard DBusNames.isValid(type.handlerPath, as: .objectPath) else {
                    throw BatonError.invalidArgument("handler_path '\(printable(type.handlerPath))' is not an object path")
                }
                try await self.store.writing { try $0.register(type) }
                self.log.debug("registered \(type.type) for \(type.appID)")
                return []
            },
            Method("UnregisterActivityType", in: [Argument("type", "s")], ordering: .concurrent) { call in
                let type: String = try call.argument(0)
                guard let removed = try await self.store.writing({ try $0.unregister(type: type) }) else {
                    throw BatonError.unknownActivityType("no activity type \(printable(type)) is registered")
                }
                for id in removed { self.emitActivities("Invalidated", [.string(id)]) }
                return []
            },
            Method("ListActivityTypes", out: [Argument("types", "aa{sv}")]) { _ in
                [.array(.dictionary(key: .string, value: .variant), try self.store.activityTypes().map(Records.record))]
            },
        ])
    }

    // MARK: Activities

    var activitiesInterface: Interface {
        Interface(Self.activities, methods: [
            // Concurrent: calls keep arriving while a commit runs, so they can share the next one.
            Method("Advertise", in: [Argument("type", "s"), Argument("title", "s"), Argument("payload_json", "s"),
                                     Argument("options", "a{ss}")], out: [Argument("id", "s")], ordering: .concurrent) { call in
                return [.string(try await self.advertise(call))]
            },
            Method("Update", in: [Argument("id", "s"), Argument("payload_json", "s"), Argument("options", "a{ss}")],
                   ordering: .concurrent) { call in
                let id: String = try call.argument(0)
                let update = try ActivityUpdate(payload: try call.argument(1), options: try call.argument(2), limits: self.limits)
                let request = update.requestID.map { Request(id: $0, method: "Update") }
                // Read, merged and written on the writer thread, so no other write comes in between.
                try await self.store.writing { store in
                    // A repeat returns at once, even if the activity has changed or gone since.
                    if let request, try store.result(of: request) != nil { return }
                    let now = WallClock.nowMicroseconds()
                    let activity = try Self.liveActivity(id, in: store, now: now)
                    guard let type = try store.activityType(activity.type) else {
                        throw BatonError.unknownActivityType("activity type \(activity.type) is no longer registered")
                    }
                    try store.update(try update.apply(to: activity, type: type, now: now, limits: store.limits), request: request)
                }
                return []
            },
            Method("Invalidate", in: [Argument("id", "s")], ordering: .concurrent) { call in
                let id = try Identifier.normalize(try call.argument(0))
                let activity = try await self.store.writing { store in
                    let activity = try store.storedActivity(id: id)
                    guard try !store.deleteActivities(ids: [id]).isEmpty else { throw BatonError.notFound("no activity \(id)") }
                    return activity
                }
                self.emitActivities("Invalidated", [.string(id)])
                if let scene = activity?.sceneID { self.emitSceneChanged(scene) }
                return []
            },
            // The three readers of records write their replies straight into the message.
            Method.encoded("Get", in: [Argument("id", "s")], out: [Argument("activity", "a{sv}")]) { call in
                Records.encodedRecord(try self.liveActivity(try call.argument(0), now: WallClock.nowMicroseconds()))
            },
            Method.encoded("List", in: [Argument("filter", "a{ss}")], out: [Argument("activities", "aa{sv}")]) { call in
                Records.encodedRecords(try self.store.activities(try self.filter(try call.argument(0)), now: WallClock.nowMicroseconds()))
            },
            Method.encoded("Search", in: [Argument("query", "s"), Argument("limit", "u")], out: [Argument("activities", "aa{sv}")]) { call in
                let requested: UInt32 = try call.argument(1)
                let limit = requested == 0 ? 50 : Int(min(requested, 1000))
                return Records.encodedRecords(try self.store.search(try call.argument(0), limit: limit, now: WallClock.nowMicroseconds()))
            },
            Method("DeleteSaved", in: [Argument("persistent_ids", "as")], out: [Argument("deleted", "u")], ordering: .concurrent) { call in
                let persistentIDs: [String] = try call.argument(0)
                let removed = try await self.store.writing { try $0.deleteSaved(persistentIDs: persistentIDs) }
                for id in removed { self.emitActivities("Invalidated", [.string(id)]) }
                return [.uint32(UInt32(removed.count))]
            },
            Method("DeleteAllSaved", in: [Argument("app_id", "s")], out: [Argument("deleted", "u")], ordering: .concurrent) { call in
                let appID: String = try call.argument(0)
                let removed = try await self.store.writing { try $0.deleteAll(appID: appID) }
                for id in removed { self.emitActivities("Invalidated", [.string(id)]) }
                return [.uint32(UInt32(removed.count))]
            },
            Method("Continue", in: [Argument("id", "s"), Argument("options", "a{ss}")], out: [Argument("scene", "o")],
                   ordering: .concurrent) { call in
                return [.objectPath(try await self.continueActivity(call))]
            },
        ], signals: [
            Signal("Advertised", [Argument("id", "s"), Argument("type", "s"), Argument("title", "s")]),
            Signal("Invalidated", [Argument("id", "s")]),
            Signal("Continued", [Argument("id", "s"), Argument("scene", "o")]),
        ])
    }

    /// Checks the call on the bus thread, in arrival order, then waits for the commit.
    private func advertise(_ call: MethodCall) async throws -> String {
        let typeName: String = try call.argument(0)
        try Validate.reverseDNS(typeName, what: "activity type", limits: limits)
        guard let type = try store.activityType(typeName) else {
            throw BatonError.unknownActivityType(
                "no activity type \(printable(typeName)) is registered; register it with RegisterActivityType first")
        }
        let advertisement = try Advertisement.parse(
            type: type, title: try call.argument(1), payload: try call.argument(2), options: try call.argument(3), limits: limits)
        var sceneID: String?
        if let named = advertisement.scene {
            let id = try Records.sceneID(from: named)
            guard let scene = try store.scene(id: id) else { throw BatonError.notFound("no scene \(id)") }
            guard scene.appID == type.appID else {
                throw BatonError.invalidArgument("scene \(id) belongs to \(scene.appID), not to \(type.appID)")
            }
            sceneID = id
        }
        let activity = advertisement.makeActivity(id: Identifier.make(), type: type, sceneID: sceneID, now: WallClock.nowMicroseconds())
        let inserted = try await commits.insert(activity, request: advertisement.requestID.map { Request(id: $0, method: "Advertise") })
        // A repeated request stored nothing and announces nothing: the first call did.
        guard !inserted.repeated else { return inserted.id }
        for id in inserted.trimmed { emitActivities("Invalidated", [.string(id)]) }
        emitActivities("Advertised", [.string(activity.id), .string(activity.type), .string(activity.title)])
        if let sceneID { emitSceneChanged(sceneID) }
        return activity.id
    }

    /// The activity `id` names, or `NotFound`/`Expired`.
    private func liveActivity(_ text: String, now: UInt64) throws -> Activity {
        try Self.liveActivity(text, in: store, now: now)
    }

    private static func liveActivity(_ text: String, in store: Store, now: UInt64) throws -> Activity {
        let id = try Identifier.normalize(text)
        guard let activity = try store.storedActivity(id: id) else { throw BatonError.notFound("no activity \(id)") }
        guard !activity.isExpired(at: now) else { throw BatonError.expired("activity \(id) has expired") }
        return activity
    }

    private func filter(_ options: [String: String]) throws(BatonError) -> Store.ActivityFilter {
        var filter = Store.ActivityFilter()
        for (key, value) in options {
            switch key {
            case "type": filter.type = value
            case "app_id": filter.appID = value
            case "scene": filter.sceneID = try Records.sceneID(from: value)
            case "persistent_id": filter.persistentID = value
            case "target_content_id": filter.targetContentID = value
            case "limit":
                guard let limit = Int(value), limit > 0 else { throw .invalidArgument("limit must be a positive number, not '\(printable(value))'") }
                filter.limit = limit
            default:
                throw .invalidArgument(
                    "List has no filter '\(printable(key))'; its filters are type, app_id, scene, persistent_id, target_content_id, limit")
            }
        }
        return filter
    }

    // MARK: Continue

    /// Opens (or continues into) a scene for the activity's app, asks the type's
    /// handler for the scene's storage, and only then creates anything: a handler
    /// that fails or times out leaves no scene behind.
    private func continueActivity(_ call: MethodCall) async throws -> ObjectPath {
        let now = WallClock.nowMicroseconds()
        let options: [String: String] = try call.argument(1)
        if let unknown = options.keys.first(where: { $0 != "scene" && $0 != "request_id" }) {
            throw BatonError.invalidArgument("Continue has no option '\(printable(unknown))'; its options are scene, request_id")
        }
        let request = try Validate.requestID(options).map { Request(id: $0, method: "Continue") }
        // A repeat answers at once, without asking the app again, even if the activity has gone since.
        if let request, let first = try store.result(of: request) { return Records.scenePath(first) }
        let activity = try liveActivity(try call.argument(0), now: now)
        guard let type = try store.activityType(activity.type) else {
            throw BatonError.unknownActivityType("activity type \(activity.type) is no longer registered")
        }
        var existing: Scene?
        if let named = options["scene"] {
            let id = try Records.sceneID(from: named)
            guard let scene = try store.scene(id: id) else { throw BatonError.notFound("no scene \(id)") }
            guard scene.appID == activity.appID else {
                throw BatonError.invalidArgument("scene \(id) belongs to \(scene.appID), not to \(activity.appID)")
            }
            existing = scene
        }
        let sceneID = existing?.id ?? Identifier.make()
        let path = Records.scenePath(sceneID)

        var storage: [(String, StorageValue)] = []
        if let handler = type.handler {
            storage = try await askHandler(handler, at: type.handlerPath, scene: path, activity: activity)
        }
        if let existing {
            try await store.writing { [storage] in
                try $0.continueInto(sceneID: existing.id, activityID: activity.id, storage: storage, now: now, request: request)
            }
            emitSceneChanged(existing.id)
            emitStorageChanged(existing.id, changed: storage, removed: [])
        } else {
            let scene = Scene(id: sceneID, appID: activity.appID, title: activity.title, activityID: activity.id,
                              createdAt: now, lastActiveAt: now)
            let stored = try await store.writing { [storage] in try $0.insert(scene, storage: storage, request: request) }
            // The same request, continued meanwhile by an earlier call: its scene is the answer.
            guard stored == scene.id else { return Records.scenePath(stored) }
            try await exportNew(scene)
        }
        emitActivities("Continued", [.string(activity.id), .objectPath(path)])
        log.debug("continued \(activity.id) into \(path)")
        return path
    }

    private func askHandler(
        _ handler: String, at pathText: String, scene: ObjectPath, activity: Activity
    ) async throws -> [(String, StorageValue)] {
        let reply: [DBusValue]
        do {
            let path = try ObjectPath(validating: pathText)
            reply = try await connection.call(
                handler, path, Self.handler, "ContinueActivity", [.objectPath(scene), Records.record(activity)],
                timeout: handlerTimeout)
        } catch let error as DBusError {
            throw BatonError.handlerFailed("\(handler) could not continue the activity: \(error.name): \(error.message)")
        }
        guard reply.count == 1, let entries = reply[0].dictionaryEntries, reply[0].type == .dictionary(key: .string, value: .variant) else {
            throw BatonError.handlerFailed(
                "\(handler) replied '\(Signature(reply.map(\.type)))' to ContinueActivity; the handler must return a{sv}")
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

    // MARK: Scenes

    var scenesInterface: Interface {
        Interface(Self.scenes, methods: [
            Method("OpenScene", in: [Argument("app_id", "s"), Argument("options", "a{ss}")], out: [Argument("scene", "o")],
                   ordering: .concurrent) { call in
                let appID: String = try call.argument(0)
                try Validate.reverseDNS(appID, what: "app id", limits: self.limits)
                let options: [String: String] = try call.argument(1)
                if let unknown = options.keys.first(where: { $0 != "title" && $0 != "request_id" }) {
                    throw BatonError.invalidArgument("OpenScene has no option '\(printable(unknown))'; its options are title, request_id")
                }
                let title = options["title"] ?? ""
                try Validate.text(title, what: "the title", limit: self.limits.titleBytes)
                let request = try Validate.requestID(options).map { Request(id: $0, method: "OpenScene") }
                let now = WallClock.nowMicroseconds()
                let scene = Scene(id: Identifier.make(), appID: appID, title: title, createdAt: now, lastActiveAt: now)
                let id = try await self.store.writing { try $0.insert(scene, storage: [], request: request) }
                if id == scene.id { try await self.exportNew(scene) }
                return [.objectPath(Records.scenePath(id))]
            },
            Method("ListScenes", in: [Argument("app_id", "s")], out: [Argument("scenes", "ao")]) { call in
                let appID: String = try call.argument(0)
                let scenes = try self.store.scenes(appID: appID.isEmpty ? nil : appID)
                return [.array(.objectPath, scenes.map { .objectPath(Records.scenePath($0.id)) })]
            },
            Method("CloseScene", in: [Argument("scene", "o")], ordering: .concurrent) { call in
                try await self.closeScene(try Records.sceneID(from: try call.argument(0, as: ObjectPath.self).text))
                return []
            },
        ])
    }

    private func closeScene(_ id: String) async throws {
        guard try await store.writing({ try $0.deleteScene(id: id) }) else { throw BatonError.notFound("no scene \(id)") }
        restoredScenes.withLock { _ = $0.remove(id) }
        connection.unexport(Records.scenePath(id))
    }

    /// The scene a Scene-interface call is addressed to.
    private func scene(at path: ObjectPath) throws -> Scene {
        let id = try Records.sceneID(from: path.text)
        guard let scene = try store.scene(id: id) else { throw BatonError.notFound("no scene \(id)") }
        return scene
    }

    /// The interface every scene object exports, built once: it is the same value for
    /// every scene (handlers find their scene by path), and building it on each export
    /// showed in Continue's profile.
    var sceneInterface: Interface {
        sceneInterfaceOnce.withLock { built in
            if let built { return built }
            let interface = makeSceneInterface()
            built = interface
            return interface
        }
    }
    private let sceneInterfaceOnce = Mutex<Interface?>(nil)

    private func makeSceneInterface() -> Interface {
        Interface(Self.scene, methods: [
            Method("Get", in: [Argument("key", "s")], out: [Argument("value", "v")]) { call in
                let id = try self.scene(at: call.path).id
                let key: String = try call.argument(0)
                guard let value = try self.store.storageValue(sceneID: id, key: key) else {
                    throw BatonError.notFound("scene \(id) has no value for '\(printable(key))'")
                }
                return [.variant(Records.value(value))]
            },
            Method("Set", in: [Argument("key", "s"), Argument("value", "v")], ordering: .concurrent) { call in
                let id = try self.scene(at: call.path).id
                let key: String = try call.argument(0)
                let value = try Records.storageValue(try call.argument(1), key: key)
                try await self.store.writing { try $0.changeStorage(sceneID: id, set: [(key, value)], remove: []) }
                self.emitStorageChanged(id, changed: [(key, value)], removed: [])
                return []
            },
            Method("SetMany", in: [Argument("values", "a{sv}")], ordering: .concurrent) { call in
                let id = try self.scene(at: call.path).id
                let values: [String: DBusValue] = try call.argument(0)
                var changes: [(String, StorageValue)] = []
                for (key, value) in values.sorted(by: { $0.key < $1.key }) {
                    changes.append((key, try Records.storageValue(value, key: key)))
                }
                try await self.store.writing { [changes] in try $0.changeStorage(sceneID: id, set: changes, remove: []) }
                self.emitStorageChanged(id, changed: changes, removed: [])
                return []
            },
            Method("Remove", in: [Argument("key", "s")], ordering: .concurrent) { call in
                let id = try self.scene(at: call.path).id
                let key: String = try call.argument(0)
                let removed = try await self.store.writing { try $0.changeStorage(sceneID: id, set: [], remove: [key]) }
                if !removed.isEmpty { self.emitStorageChanged(id, changed: [], removed: removed) }
                return []
            },
            Method("GetAll", out: [Argument("values", "a{sv}")]) { call in
                [Records.storageRecord(try self.store.storage(sceneID: try self.scene(at: call.path).id))]
            },
            Method("Close", ordering: .concurrent) { call in
                try await self.closeScene(try self.scene(at: call.path).id)
                return []
            },
        ], properties: [
            Property("Id", "s", changeSignal: .const) { path in try self.sceneProperty("Id", at: path) },
            Property("AppId", "s", changeSignal: .const) { path in try self.sceneProperty("AppId", at: path) },
            Property("Title", "s", get: { path in try self.sceneProperty("Title", at: path) }, set: { path, value in
                let id = try self.scene(at: path).id
                let title = value.stringValue ?? ""
                try Validate.text(title, what: "the title", limit: self.limits.titleBytes)
                try await self.store.writing { try $0.setTitle(title, ofScene: id) }
            }),
            Property("ActivityId", "s") { path in try self.sceneProperty("ActivityId", at: path) },
            Property("CreatedAt", "t", changeSignal: .const) { path in try self.sceneProperty("CreatedAt", at: path) },
            Property("LastActiveAt", "t") { path in try self.sceneProperty("LastActiveAt", at: path) },
            Property("Restored", "b", changeSignal: .const) { path in try self.sceneProperty("Restored", at: path) },
        ], signals: [
            Signal("StorageChanged", [Argument("changed", "a{sv}"), Argument("removed", "as")]),
        ], readAll: { path in self.sceneProperties(try self.scene(at: path)) })
    }

    /// Exports a scene just stored, announced (`InterfacesAdded`) with the properties it
    /// was stored with rather than read back.
    private func exportNew(_ scene: Scene) async throws {
        try await connection.export(Records.scenePath(scene.id), [sceneInterface], properties: [Self.scene: sceneProperties(scene)])
    }

    /// Every property of a scene from one row: `GetAll`, and `InterfacesAdded` when a
    /// scene opens, read the database once instead of once per property.
    private func sceneProperties(_ scene: Scene) -> [String: DBusValue] {
        [
            "Id": .string(scene.id), "AppId": .string(scene.appID), "Title": .string(scene.title),
            "ActivityId": .string(scene.activityID ?? ""), "CreatedAt": .uint64(scene.createdAt),
            "LastActiveAt": .uint64(scene.lastActiveAt),
            "Restored": .boolean(restoredScenes.withLock { $0.contains(scene.id) }),
        ]
    }

    private func sceneProperty(_ name: String, at path: ObjectPath) throws -> DBusValue {
        // Every name asked for is one of the keys above (the getters are declared with them).
        sceneProperties(try scene(at: path))[name] ?? .string("")
    }

    // MARK: Signals

    private func emitActivities(_ member: String, _ body: [DBusValue]) {
        do {
            try connection.emit(path: Self.rootPath, interface: Self.activities, member: member, body)
        } catch {
            log.error("could not emit \(member): \(error)")
        }
    }

    /// Announces a scene's current activity and last-active time after they changed.
    private func emitSceneChanged(_ id: String) {
        guard let scene = try? store.scene(id: id) else { return }
        connection.emitPropertiesChanged(path: Records.scenePath(id), interface: Self.scene, changed: [
            "ActivityId": .string(scene.activityID ?? ""), "LastActiveAt": .uint64(scene.lastActiveAt),
        ])
    }

    private func emitStorageChanged(_ id: String, changed: [(String, StorageValue)], removed: [String]) {
        guard !changed.isEmpty || !removed.isEmpty else { return }
        var values: [String: StorageValue] = [:]
        for (key, value) in changed { values[key] = value }
        do {
            try connection.emit(path: Records.scenePath(id), interface: Self.scene, member: "StorageChanged", [
                Records.storageRecord(values), .strings(removed),
            ])
        } catch {
            log.error("could not emit StorageChanged: \(error)")
        }
    }
}
