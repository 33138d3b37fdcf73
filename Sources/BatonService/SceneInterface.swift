import BatonContract
import BatonCore
import BatonStore
import DBus

/// `org.baton.Handoff1.Scene`, the interface every scene object exports (`SceneObjects`):
/// the scene's storage, its properties, closing it. Handlers find their scene by the path
/// the call was sent to.
struct SceneInterface: Sendable {
    let store: Store
    let objects: SceneObjects

    var limits: Limits { store.limits }

    var interface: Interface {
        typealias Name = Contract.Scene.Property
        return Interface(Contract.Interface.scene, methods: [
            Method(Contract.Scene.get, handler: get),
            Method(Contract.Scene.set, ordering: .concurrent, handler: set),
            Method(Contract.Scene.setMany, ordering: .concurrent, handler: setMany),
            Method(Contract.Scene.remove, ordering: .concurrent, handler: remove),
            Method(Contract.Scene.getAll, handler: getAll),
            Method(Contract.Scene.close, ordering: .concurrent, handler: close),
            Method(Contract.Scene.setHandlesContent, ordering: .concurrent, handler: setHandlesContent),
            Method(Contract.Scene.acknowledge, ordering: .concurrent, handler: acknowledge),
        ], properties: [
            Property(Name.id, "s", changeSignal: .const) { try property(Name.id, at: $0) },
            Property(Name.appID, "s", changeSignal: .const) { try property(Name.appID, at: $0) },
            Property(Name.title, "s", get: { try property(Name.title, at: $0) }, set: setTitle),
            Property(Name.activityID, "s") { try property(Name.activityID, at: $0) },
            Property(Name.createdAt, "t", changeSignal: .const) { try property(Name.createdAt, at: $0) },
            Property(Name.lastActiveAt, "t") { try property(Name.lastActiveAt, at: $0) },
            Property(Name.restored, "b", changeSignal: .const) { try property(Name.restored, at: $0) },
            Property(Name.state, "s") { try property(Name.state, at: $0) },
            Property(Name.restoreReason, "s") { try property(Name.restoreReason, at: $0) },
            Property(Name.handlesContent, "as") { .strings(try store.handlesContent(sceneID: try scene(at: $0).id)) },
        ], signals: [
            Signal(Contract.Scene.storageChanged),
        ], readAll: { path in
            let scene = try scene(at: path)
            return objects.properties(of: scene, handlesContent: try store.handlesContent(sceneID: scene.id))
        })
    }

    /// The app restored the scene fine.
    func acknowledge(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try scene(at: call.path).id
        try await store.writing { try $0.acknowledge(sceneID: id) }
        return []
    }

    func get(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try scene(at: call.path).id
        let key: String = try call.argument(0)
        guard let value = try store.storageValue(sceneID: id, key: key) else {
            throw BatonError.notFound("scene \(id) has no value for '\(printable(key))'")
        }
        return [.variant(Records.value(value))]
    }

    func set(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try scene(at: call.path).id
        let key: String = try call.argument(0)
        let value = try Records.storageValue(try call.argument(1), key: key)
        try await store.writing { try $0.changeStorage(sceneID: id, set: [(key, value)], remove: []) }
        objects.storageChanged(id, changed: [(key, value)], removed: [])
        return []
    }

    func setMany(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try scene(at: call.path).id
        let values: [String: DBusValue] = try call.argument(0)
        var changes: [(String, StorageValue)] = []
        for (key, value) in values.sorted(by: { $0.key < $1.key }) {
            changes.append((key, try Records.storageValue(value, key: key)))
        }
        try await store.writing { [changes] in try $0.changeStorage(sceneID: id, set: changes, remove: []) }
        objects.storageChanged(id, changed: changes, removed: [])
        return []
    }

    func remove(_ call: MethodCall) async throws -> [DBusValue] {
        let id = try scene(at: call.path).id
        let key: String = try call.argument(0)
        let removed = try await store.writing { try $0.changeStorage(sceneID: id, set: [], remove: [key]) }
        objects.storageChanged(id, changed: [], removed: removed)
        return []
    }

    func getAll(_ call: MethodCall) async throws -> [DBusValue] {
        [Records.storageRecord(try store.storage(sceneID: try scene(at: call.path).id))]
    }

    func close(_ call: MethodCall) async throws -> [DBusValue] {
        try await objects.close(try scene(at: call.path).id)
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
        objects.changed(id, [Contract.Scene.Property.handlesContent])
        return []
    }

    /// Content ids one scene may handle: enough for a window's tabs, small enough to route fast.
    static let handlesContentLimit = 64

    func setTitle(_ path: ObjectPath, _ value: DBusValue) async throws {
        let id = try scene(at: path).id
        let title = value.stringValue ?? ""
        try Validate.text(title, what: "the title", limit: limits.titleBytes)
        try await store.writing { try $0.setTitle(title, ofScene: id) }
    }

    /// The scene a call is addressed to.
    func scene(at path: ObjectPath) throws -> Scene {
        let id = try SceneAddress.id(from: path.text)
        guard let scene = try store.scene(id: id) else { throw BatonError.notFound("no scene \(id)") }
        return scene
    }

    func property(_ name: String, at path: ObjectPath) throws -> DBusValue {
        // Every name asked for is one of the keys `properties(of:)` gives (the getters are declared with them).
        objects.properties(of: try scene(at: path), handlesContent: [])[name] ?? .string("")
    }
}
