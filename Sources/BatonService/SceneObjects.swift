import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging
import Synchronization

/// The scene objects on the bus, one per stored scene at `SceneAddress.objectPath(forID:)`,
/// each exporting `org.baton.Handoff1.Scene` (`SceneInterface`): exported when a scene is
/// stored, removed when it goes, their property changes and `StorageChanged` announced. Which
/// scenes came back from the database at start (`Restored`) is known here only.
final class SceneObjects: Sendable {
    let connection: Connection
    let store: Store
    let log: Logger
    /// Scenes that came back from the database when the daemon started.
    private let restored = Mutex<Set<String>>([])
    /// The interface every scene object exports, built once (`interface`).
    private let built = Mutex<Interface?>(nil)

    init(connection: Connection, store: Store, log: Logger) {
        self.connection = connection
        self.store = store
        self.log = log
    }

    /// `org.baton.Handoff1.Scene`: the same value for every scene (handlers find their scene by path).
    var interface: Interface {
        built.withLock { built in
            if let built { return built }
            let interface = SceneInterface(store: store, objects: self).interface
            built = interface
            return interface
        }
    }

    /// Exports the scenes stored when batond starts, marked restored. With no manager above
    /// them yet, this announces nothing (no one can be listening before the name is owned).
    func restore(_ scenes: [Scene]) async throws {
        restored.withLock { $0 = Set(scenes.map(\.id)) }
        for scene in scenes {
            try await connection.export(SceneAddress.objectPath(forID: scene.id), [interface], owner: scene.appID)
        }
    }

    /// Exports a scene just stored, announced (`InterfacesAdded`) with the properties it
    /// was stored with rather than read back.
    func exportNew(_ scene: Scene) async throws {
        try await connection.export(
            SceneAddress.objectPath(forID: scene.id), [interface],
            properties: [Contract.Interface.scene: properties(of: scene, handlesContent: [])], owner: scene.appID)
    }

    /// Scenes that went: their objects leave the bus (`InterfacesRemoved`) and they no longer count as restored.
    func remove(_ ids: [String]) {
        for id in ids {
            restored.withLock { _ = $0.remove(id) }
            connection.unexport(SceneAddress.objectPath(forID: id))
        }
    }

    /// Closes the scene `id`: deleted with its storage, then removed from the bus.
    func close(_ id: String) async throws {
        guard try await store.writing({ try $0.deleteScene(id: id) }) else { throw BatonError.notFound("no scene \(id)") }
        remove([id])
    }

    /// What changes when a scene's activity does: its current activity, last-active time and state.
    static let activityProperties = [Contract.Scene.Property.activityID, Contract.Scene.Property.lastActiveAt, Contract.Scene.Property.state]

    /// Announces that the properties `names` of the scene `id` changed, with their values as
    /// its getters give them (`properties(of:)`, from one read of its row).
    func changed(_ id: String, _ names: [String] = activityProperties) {
        guard let scene = try? store.scene(id: id) else { return }
        changed(scene, names)
    }

    /// The same, for a scene as a write just left it.
    func changed(_ scene: Scene, _ names: [String] = activityProperties) {
        let content = names.contains(Contract.Scene.Property.handlesContent) ? (try? store.handlesContent(sceneID: scene.id)) ?? [] : []
        let values = properties(of: scene, handlesContent: content)
        let interface = interface
        var changed: [String: DBusValue] = [:]
        for name in names {
            guard interface.property(named: name)?.changeSignal == .emits, let value = values[name] else {
                log.error("\(Contract.Interface.scene).\(name) is not announced when it changes")
                continue
            }
            changed[name] = value
        }
        connection.emitPropertiesChanged(path: SceneAddress.objectPath(forID: scene.id), interface: Contract.Interface.scene, changed: changed)
    }

    /// `StorageChanged(changed, removed)` of the scene `id`; nothing when nothing changed.
    func storageChanged(_ id: String, changed: [(String, StorageValue)], removed: [String]) {
        guard !changed.isEmpty || !removed.isEmpty else { return }
        var values: [String: StorageValue] = [:]
        for (key, value) in changed { values[key] = value }
        do {
            try connection.emit(Contract.Scene.storageChanged, path: SceneAddress.objectPath(forID: id), [
                Records.storageRecord(values), .strings(removed),
            ])
        } catch {
            log.error("could not emit \(Contract.Scene.storageChanged.name): \(error)")
        }
    }

    /// Every property of a scene from one row: `GetAll`, and `InterfacesAdded` when a
    /// scene opens, read the database once instead of once per property.
    func properties(of scene: Scene, handlesContent: [String]) -> [String: DBusValue] {
        typealias Name = Contract.Scene.Property
        return [
            Name.handlesContent: .strings(handlesContent),
            Name.state: .string(scene.state.rawValue),
            Name.restoreReason: .string(scene.restoreReason.rawValue),
            Name.id: .string(scene.id), Name.appID: .string(scene.appID), Name.title: .string(scene.title),
            Name.activityID: .string(scene.activityID ?? ""), Name.createdAt: .uint64(scene.createdAt),
            Name.lastActiveAt: .uint64(scene.lastActiveAt),
            Name.restored: .boolean(restored.withLock { $0.contains(scene.id) }),
        ]
    }

    /// The id of the scene `text` names (path or id), which must be one of `appID`'s.
    static func scene(named text: String, ofApp appID: String, find: (String) throws -> Scene?) throws -> String {
        let id = try SceneAddress.id(from: text)
        guard let scene = try find(id) else { throw BatonError.notFound("no scene \(id)") }
        guard scene.appID == appID else {
            throw BatonError.invalidArgument("scene \(id) belongs to \(scene.appID), not to \(appID)")
        }
        return id
    }
}
