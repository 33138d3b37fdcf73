import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging

/// `org.baton.Handoff1.Scenes` on the root object: opening, listing and closing scenes, and an
/// app's launch and clean exit. The scene objects themselves are `SceneObjects`'.
struct ScenesInterface: Sendable {
    let store: Store
    let log: Logger
    let objects: SceneObjects
    /// Continuations waiting for an app are delivered at its launch.
    let continuations: Continuations
    let background: BackgroundTasks

    var limits: Limits { store.limits }
    var clock: any DaemonClock { store.wallClock }

    var interface: Interface {
        Interface(Contract.Interface.scenes, methods: [
            Method(Contract.Scenes.openScene, ordering: .concurrent, handler: openScene),
            Method(Contract.Scenes.listScenes, handler: listScenes),
            Method(Contract.Scenes.closeScene, ordering: .concurrent, handler: closeScene),
            Method(Contract.Scenes.restoreScenes, ordering: .concurrent, handler: restoreScenes),
            Method(Contract.Scenes.detach, ordering: .concurrent, handler: detach),
        ])
    }

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
        if id == scene.id { try await objects.exportNew(scene) }
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
        guard CallerScope(call).visible(try store.scene(id: id), owner: \.appID) != nil else { throw BatonError.notFound("no scene \(id)") }
        try await objects.close(id)
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
            objects.remove([scene.id])
            log.warning("""
                discarded scene \(scene.id) of \(appID): it came back as recover \(Store.recoverLimit) times in a row \
                without the app acknowledging it, so it likely makes the app crash at launch
                """)
        }
        for scene in restoration.scenes { objects.changed(scene.id, [Contract.Scene.Property.restoreReason]) }
        background.start { [continuations] in await continuations.deliverWaiting(appID: appID) { _ in true } }
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
}
