import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging

extension HandoffService {
    /// `Continue`: finds the scene to continue in — the one named, else one of the app's
    /// that already shows the activity's content, else a new one — asks the type's handler
    /// for the scene's storage, and only then writes anything: a handler that fails or
    /// times out leaves no scene behind and the scene it went to unchanged.
    func continueActivity(_ call: MethodCall) async throws -> [DBusValue] {
        let now = WallClock.nowMicroseconds()
        let options: [String: String] = try call.argument(1)
        if let unknown = options.keys.first(where: { !Self.continueOptions.contains($0) }) {
            throw BatonError.invalidArgument(
                "Continue has no option '\(printable(unknown))'; its options are \(Self.continueOptions.joined(separator: ", "))")
        }
        let newScene = try options["new_scene"].map { text throws(BatonError) in try Validate.boolean(text, option: "new_scene") } ?? false
        if newScene && options["scene"] != nil {
            throw BatonError.invalidArgument("Continue was given both scene and new_scene=true; give one")
        }
        let request = try Validate.requestID(options).map { Request(id: $0, method: Contract.Activities.continue.name) }
        // A repeat answers at once, without asking the app again, even if the activity has gone since.
        if let request, let first = try store.result(of: request) { return [.objectPath(SceneAddress.objectPath(forID: first))] }
        let activity = try liveActivity(try call.argument(0), now: now)
        guard activity.eligibleForHandoff else {
            throw BatonError.notEligible("activity \(activity.id) was advertised with eligible_for_handoff=false: it cannot be continued")
        }
        guard let type = try store.activityType(activity.type) else {
            throw BatonError.unknownActivityType("activity type \(activity.type) is no longer registered")
        }
        var existing: Scene?
        if let named = options["scene"] {
            existing = try store.scene(id: try scene(named: named, ofApp: activity.appID))
        } else if !newScene, let content = activity.targetContentID,
                  let showing = try store.scene(showing: content, appID: activity.appID) {
            existing = try store.scene(id: showing)
        }
        let sceneID = existing?.id ?? Identifier.make()
        let path = SceneAddress.objectPath(forID: sceneID)

        var storage: [(String, StorageValue)] = []
        if let handler = type.handler {
            storage = try await askHandler(handler, at: type.handlerPath, scene: path, activity: activity)
        }
        if let existing {
            // Both writes refuse an activity invalidated while the handler was asked (NotFound).
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
            guard stored == scene.id else { return [.objectPath(SceneAddress.objectPath(forID: stored))] }
            try await exportNew(scene)
        }
        emit(Contract.Activities.continued, [.string(activity.id), .objectPath(path), .boolean(existing == nil)])
        log.debug("continued \(activity.id) into \(path)")
        return [.objectPath(path)]
    }

    static let continueOptions = ["scene", "new_scene", "request_id"]

    /// Calls the app's `Handler.ContinueActivity` and checks the storage it returns.
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
}
