import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging

extension HandoffService {
    /// `org.baton.Handoff1.Scenes` on the root object: opening, listing and closing scenes.
    var scenesInterface: Interface {
        Interface(Contract.Interface.scenes, methods: [
            Method(Contract.Scenes.openScene, ordering: .concurrent, handler: openScene),
            Method(Contract.Scenes.listScenes, handler: listScenes),
            Method(Contract.Scenes.closeScene, ordering: .concurrent, handler: closeScene),
            Method(Contract.Scenes.restoreScenes, ordering: .concurrent, handler: restoreScenes),
            Method(Contract.Scenes.detach, ordering: .concurrent, handler: detach),
        ])
    }

    /// `org.baton.Handoff1.Scene`, the interface every scene object exports. Built once: it
    /// is the same value for every scene (handlers find their scene by path).
    var sceneInterface: Interface {
        typealias Name = Contract.Scene.Property
        return sceneInterfaceOnce.withLock { built in
            if let built { return built }
            let interface = Interface(Contract.Interface.scene, methods: [
                Method(Contract.Scene.get, handler: sceneGet),
                Method(Contract.Scene.set, ordering: .concurrent, handler: sceneSet),
                Method(Contract.Scene.setMany, ordering: .concurrent, handler: sceneSetMany),
                Method(Contract.Scene.remove, ordering: .concurrent, handler: sceneRemove),
                Method(Contract.Scene.getAll, handler: sceneGetAll),
                Method(Contract.Scene.close, ordering: .concurrent, handler: sceneClose),
                Method(Contract.Scene.setHandlesContent, ordering: .concurrent, handler: setHandlesContent),
                Method(Contract.Scene.acknowledge, ordering: .concurrent, handler: acknowledge),
            ], properties: [
                Property(Name.id, "s", changeSignal: .const) { try self.sceneProperty(Name.id, at: $0) },
                Property(Name.appID, "s", changeSignal: .const) { try self.sceneProperty(Name.appID, at: $0) },
                Property(Name.title, "s", get: { try self.sceneProperty(Name.title, at: $0) }, set: setSceneTitle),
                Property(Name.activityID, "s") { try self.sceneProperty(Name.activityID, at: $0) },
                Property(Name.createdAt, "t", changeSignal: .const) { try self.sceneProperty(Name.createdAt, at: $0) },
                Property(Name.lastActiveAt, "t") { try self.sceneProperty(Name.lastActiveAt, at: $0) },
                Property(Name.restored, "b", changeSignal: .const) { try self.sceneProperty(Name.restored, at: $0) },
                Property(Name.state, "s") { try self.sceneProperty(Name.state, at: $0) },
                Property(Name.restoreReason, "s") { try self.sceneProperty(Name.restoreReason, at: $0) },
                Property(Name.handlesContent, "as") { .strings(try self.store.handlesContent(sceneID: try self.scene(at: $0).id)) },
            ], signals: [
                Signal(Contract.Scene.storageChanged),
            ], readAll: { path in
                let scene = try self.scene(at: path)
                return self.sceneProperties(scene, handlesContent: try self.store.handlesContent(sceneID: scene.id))
            })
            built = interface
            return interface
        }
    }

    // MARK: Scenes

    func openScene(_ call: MethodCall) async throws -> [DBusValue] {
        let appID: String = try call.argument(0)
        try Validate.reverseDNS(appID, what: "app id", limits: limits)
        try CallerScope(call).refuseAnotherApp(appID, "opens scenes")
        let options: [String: String] = try call.argument(1)
        if let unknown = options.keys.first(where: { $0 != "title" && $0 != "request_id" }) {
            throw BatonError.invalidArgument("OpenScene has no option '\(printable(unknown))'; its options are title, request_id")
        }
        let title = options["title"] ?? ""
        try Validate.text(title, what: "the title", limit: limits.titleBytes)
        let request = try Validate.requestID(options).map { Request(id: $0, method: Contract.Scenes.openScene.name) }
        let now = clock.now()
        let scene = Scene(id: Identifier.make(at: now), appID: appID, title: title, createdAt: now, lastActiveAt: now)
        let id = try await store.writing { try $0.insert(scene, storage: [], request: request) }
        if id == scene.id { try await exportNew(scene) }
        return [.objectPath(SceneAddress.objectPath(forID: id))]
    }

    func listScenes(_ call: MethodCall) async throws -> [DBusValue] {
        let named: String = try call.argument(0)
        var appID = named.isEmpty ? nil : named
        guard CallerScope(call).narrow(&appID) else { return [.array(.objectPath, [])] }
        let scenes = try store.scenes(appID: appID)
        return [.array(.objectPath, scenes.map { .objectPath(SceneAddress.objectPath(forID: $0.id)) })]
    }

    func closeScene(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try SceneAddress.id(from: try call.argument(0, as: ObjectPath.self).text)
        if let scene = try store.scene(id: id), !CallerScope(call).sees(scene.appID) {
            throw BatonError.notFound("no scene \(id)")
        }
        try await close(scene: id)
        return []
    }

    /// An app's launch: its scenes with why each comes back; the caller becomes the app's
    /// instance (its vanishing without `Detach` makes the next launch a `recover`). Scenes
    /// that came back as `recover` too often in a row are discarded. Continuations waiting
    /// for the app are delivered once the reply is on its way.
    func restoreScenes(_ call: MethodCall) async throws -> [DBusValue] {
        let appID: String = try call.argument(0)
        try Validate.reverseDNS(appID, what: "app id", limits: limits)
        try CallerScope(call).refuseAnotherApp(appID, "restores scenes")
        let instance = call.sender ?? ""
        let restoration = try await store.writing { try $0.restoreScenes(appID: appID, instance: instance) }
        for scene in restoration.discarded {
            removeScenes([scene.id])
            log.warning("""
                discarded scene \(scene.id) of \(appID): it came back as recover \(Store.recoverLimit) times in a row \
                without the app acknowledging it, so it likely makes the app crash at launch
                """)
        }
        for scene in restoration.scenes { emitSceneChanged(scene.id, [Contract.Scene.Property.restoreReason]) }
        background.start { await self.deliverWaiting(appID: appID) { _ in true } }
        return [Records.restored(restoration.scenes)]
    }

    /// An app's clean exit: its scenes come back as `restore`.
    func detach(_ call: MethodCall) async throws -> [DBusValue] {
        let appID: String = try call.argument(0)
        try Validate.reverseDNS(appID, what: "app id", limits: limits)
        try CallerScope(call).refuseAnotherApp(appID, "detaches")
        try await store.writing { try $0.detach(appID: appID) }
        return []
    }


    // MARK: A scene

    /// The app restored the scene fine.
    func acknowledge(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try scene(at: call.path).id
        try await store.writing { try $0.acknowledge(sceneID: id) }
        return []
    }

    func sceneGet(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try scene(at: call.path).id
        let key: String = try call.argument(0)
        guard let value = try store.storageValue(sceneID: id, key: key) else {
            throw BatonError.notFound("scene \(id) has no value for '\(printable(key))'")
        }
        return [.variant(Records.value(value))]
    }

    func sceneSet(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try scene(at: call.path).id
        let key: String = try call.argument(0)
        let value = try Records.storageValue(try call.argument(1), key: key)
        try await store.writing { try $0.changeStorage(sceneID: id, set: [(key, value)], remove: []) }
        emitStorageChanged(id, changed: [(key, value)], removed: [])
        return []
    }

    func sceneSetMany(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try scene(at: call.path).id
        let values: [String: DBusValue] = try call.argument(0)
        var changes: [(String, StorageValue)] = []
        for (key, value) in values.sorted(by: { $0.key < $1.key }) {
            changes.append((key, try Records.storageValue(value, key: key)))
        }
        try await store.writing { [changes] in try $0.changeStorage(sceneID: id, set: changes, remove: []) }
        emitStorageChanged(id, changed: changes, removed: [])
        return []
    }

    func sceneRemove(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try scene(at: call.path).id
        let key: String = try call.argument(0)
        let removed = try await store.writing { try $0.changeStorage(sceneID: id, set: [], remove: [key]) }
        if !removed.isEmpty { emitStorageChanged(id, changed: [], removed: removed) }
        return []
    }

    func sceneGetAll(_ call: MethodCall) async throws -> [DBusValue] {
        [Records.storageRecord(try store.storage(sceneID: try scene(at: call.path).id))]
    }

    func sceneClose(_ call: MethodCall) async throws -> [DBusValue] {
        try await close(scene: try scene(at: call.path).id)
        return []
    }

    /// Replaces the content ids the scene shows, which route continuations of them here.
    func setHandlesContent(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try scene(at: call.path).id
        let ids: [String] = try call.argument(0)
        guard ids.count <= Self.handlesContentLimit else {
            throw BatonError.invalidArgument("a scene handles at most \(Self.handlesContentLimit) content ids; \(ids.count) were given")
        }
        for contentID in ids {
            guard !contentID.isEmpty else { throw BatonError.invalidArgument("a content id cannot be empty") }
            try Validate.text(contentID, what: "the content id", limit: limits.nameBytes)
        }
        try await store.writing { try $0.setHandlesContent(ids, sceneID: id) }
        emitSceneChanged(id, [Contract.Scene.Property.handlesContent])
        return []
    }

    /// Content ids one scene may handle: enough for a window's tabs, small enough to route fast.
    static let handlesContentLimit = 64

    func setSceneTitle(_ path: ObjectPath, _ value: DBusValue) async throws {
        let id = try scene(at: path).id
        let title = value.stringValue ?? ""
        try Validate.text(title, what: "the title", limit: limits.titleBytes)
        try await store.writing { try $0.setTitle(title, ofScene: id) }
    }

    // MARK: Helpers

    func close(scene id: String) async throws {
        guard try await store.writing({ try $0.deleteScene(id: id) }) else { throw BatonError.notFound("no scene \(id)") }
        removeScenes([id])
    }

    /// The scene a Scene-interface call is addressed to.
    func scene(at path: ObjectPath) throws -> Scene {
        let id = try SceneAddress.id(from: path.text)
        guard let scene = try store.scene(id: id) else { throw BatonError.notFound("no scene \(id)") }
        return scene
    }

    /// Exports a scene just stored, announced (`InterfacesAdded`) with the properties it
    /// was stored with rather than read back.
    func exportNew(_ scene: Scene) async throws {
        try await connection.export(
            SceneAddress.objectPath(forID: scene.id), [sceneInterface],
            properties: [Contract.Interface.scene: sceneProperties(scene, handlesContent: [])], owner: scene.appID)
    }

    /// Every property of a scene from one row: `GetAll`, and `InterfacesAdded` when a
    /// scene opens, read the database once instead of once per property.
    func sceneProperties(_ scene: Scene, handlesContent: [String]) -> [String: DBusValue] {
        typealias Name = Contract.Scene.Property
        return [
            Name.handlesContent: .strings(handlesContent),
            Name.state: .string(scene.state.rawValue),
            Name.restoreReason: .string(scene.restoreReason.rawValue),
            Name.id: .string(scene.id), Name.appID: .string(scene.appID), Name.title: .string(scene.title),
            Name.activityID: .string(scene.activityID ?? ""), Name.createdAt: .uint64(scene.createdAt),
            Name.lastActiveAt: .uint64(scene.lastActiveAt),
            Name.restored: .boolean(restoredScenes.withLock { $0.contains(scene.id) }),
        ]
    }

    func sceneProperty(_ name: String, at path: ObjectPath) throws -> DBusValue {
        // Every name asked for is one of the keys above (the getters are declared with them).
        sceneProperties(try scene(at: path), handlesContent: [])[name] ?? .string("")
    }
}
