import BatonCore
import BatonStore
import DBus
import Logging

extension HandoffService {
    /// `org.baton.Handoff1.Scenes` on the root object: opening, listing and closing scenes.
    var scenesInterface: Interface {
        Interface(Self.scenes, methods: [
            Method("OpenScene", in: [Argument("app_id", "s"), Argument("options", "a{ss}")], out: [Argument("scene", "o")],
                   ordering: .concurrent, handler: openScene),
            Method("ListScenes", in: [Argument("app_id", "s")], out: [Argument("scenes", "ao")], handler: listScenes),
            Method("CloseScene", in: [Argument("scene", "o")], ordering: .concurrent, handler: closeScene),
        ])
    }

    /// `org.baton.Handoff1.Scene`, the interface every scene object exports. Built once: it
    /// is the same value for every scene (handlers find their scene by path).
    var sceneInterface: Interface {
        sceneInterfaceOnce.withLock { built in
            if let built { return built }
            let interface = Interface(Self.scene, methods: [
                Method("Get", in: [Argument("key", "s")], out: [Argument("value", "v")], handler: sceneGet),
                Method("Set", in: [Argument("key", "s"), Argument("value", "v")], ordering: .concurrent, handler: sceneSet),
                Method("SetMany", in: [Argument("values", "a{sv}")], ordering: .concurrent, handler: sceneSetMany),
                Method("Remove", in: [Argument("key", "s")], ordering: .concurrent, handler: sceneRemove),
                Method("GetAll", out: [Argument("values", "a{sv}")], handler: sceneGetAll),
                Method("Close", ordering: .concurrent, handler: sceneClose),
            ], properties: [
                Property("Id", "s", changeSignal: .const) { try self.sceneProperty("Id", at: $0) },
                Property("AppId", "s", changeSignal: .const) { try self.sceneProperty("AppId", at: $0) },
                Property("Title", "s", get: { try self.sceneProperty("Title", at: $0) }, set: setSceneTitle),
                Property("ActivityId", "s") { try self.sceneProperty("ActivityId", at: $0) },
                Property("CreatedAt", "t", changeSignal: .const) { try self.sceneProperty("CreatedAt", at: $0) },
                Property("LastActiveAt", "t") { try self.sceneProperty("LastActiveAt", at: $0) },
                Property("Restored", "b", changeSignal: .const) { try self.sceneProperty("Restored", at: $0) },
            ], signals: [
                Signal("StorageChanged", [Argument("changed", "a{sv}"), Argument("removed", "as")]),
            ], readAll: { self.sceneProperties(try self.scene(at: $0)) })
            built = interface
            return interface
        }
    }

    // MARK: Scenes

    func openScene(_ call: MethodCall) async throws -> [DBusValue] {
        let appID: String = try call.argument(0)
        try Validate.reverseDNS(appID, what: "app id", limits: limits)
        let options: [String: String] = try call.argument(1)
        if let unknown = options.keys.first(where: { $0 != "title" && $0 != "request_id" }) {
            throw BatonError.invalidArgument("OpenScene has no option '\(printable(unknown))'; its options are title, request_id")
        }
        let title = options["title"] ?? ""
        try Validate.text(title, what: "the title", limit: limits.titleBytes)
        let request = try Validate.requestID(options).map { Request(id: $0, method: "OpenScene") }
        let now = WallClock.nowMicroseconds()
        let scene = Scene(id: Identifier.make(), appID: appID, title: title, createdAt: now, lastActiveAt: now)
        let id = try await store.writing { try $0.insert(scene, storage: [], request: request) }
        if id == scene.id { try await exportNew(scene) }
        return [.objectPath(Records.scenePath(id))]
    }

    func listScenes(_ call: MethodCall) async throws -> [DBusValue] {
        let appID: String = try call.argument(0)
        let scenes = try store.scenes(appID: appID.isEmpty ? nil : appID)
        return [.array(.objectPath, scenes.map { .objectPath(Records.scenePath($0.id)) })]
    }

    func closeScene(_ call: MethodCall) async throws -> [DBusValue] {
        try await close(scene: try Records.sceneID(from: try call.argument(0, as: ObjectPath.self).text))
        return []
    }

    // MARK: A scene

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

    func setSceneTitle(_ path: ObjectPath, _ value: DBusValue) async throws {
        let id = try scene(at: path).id
        let title = value.stringValue ?? ""
        try Validate.text(title, what: "the title", limit: limits.titleBytes)
        try await store.writing { try $0.setTitle(title, ofScene: id) }
    }

    // MARK: Helpers

    func close(scene id: String) async throws {
        guard try await store.writing({ try $0.deleteScene(id: id) }) else { throw BatonError.notFound("no scene \(id)") }
        restoredScenes.withLock { _ = $0.remove(id) }
        connection.unexport(Records.scenePath(id))
    }

    /// The scene a Scene-interface call is addressed to.
    func scene(at path: ObjectPath) throws -> Scene {
        let id = try Records.sceneID(from: path.text)
        guard let scene = try store.scene(id: id) else { throw BatonError.notFound("no scene \(id)") }
        return scene
    }

    /// Exports a scene just stored, announced (`InterfacesAdded`) with the properties it
    /// was stored with rather than read back.
    func exportNew(_ scene: Scene) async throws {
        try await connection.export(Records.scenePath(scene.id), [sceneInterface], properties: [Self.scene: sceneProperties(scene)])
    }

    /// Every property of a scene from one row: `GetAll`, and `InterfacesAdded` when a
    /// scene opens, read the database once instead of once per property.
    func sceneProperties(_ scene: Scene) -> [String: DBusValue] {
        [
            "Id": .string(scene.id), "AppId": .string(scene.appID), "Title": .string(scene.title),
            "ActivityId": .string(scene.activityID ?? ""), "CreatedAt": .uint64(scene.createdAt),
            "LastActiveAt": .uint64(scene.lastActiveAt),
            "Restored": .boolean(restoredScenes.withLock { $0.contains(scene.id) }),
        ]
    }

    func sceneProperty(_ name: String, at path: ObjectPath) throws -> DBusValue {
        // Every name asked for is one of the keys above (the getters are declared with them).
        sceneProperties(try scene(at: path))[name] ?? .string("")
    }
}
