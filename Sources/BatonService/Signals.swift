import BatonContract
import BatonCore
import BatonStore
import DBus

/// What an interface tells the bus after a change, for interface types that are not the
/// service itself (`RegistryInterface`, `PrivacyInterface`, …): the service does it, in the
/// one place each signal is built.
protocol Announcements: Sendable {
    /// What a write to the activities changed (`ActivityRepository.Outcome`).
    func announce(_ outcome: ActivityRepository.Outcome)
    /// Activities that ended, and the scenes that showed them.
    func announceRemoved(_ ended: [Ended])
    func emitAdvertised(_ activity: Activity)
    func emitUpdated(_ id: String, app: String?)
    /// That the properties `names` of the root object's `interface` changed.
    func emitRootPropertiesChanged(_ interface: Interface, _ names: [String]) async
    /// A new scene's object, announced (`InterfacesAdded`).
    func exportNew(_ scene: Scene) async throws
    /// Scenes that went: their objects, announced (`InterfacesRemoved`).
    func removeScenes(_ ids: [String])
}

extension HandoffService: Announcements {
    /// Scenes that went: their objects leave the bus and they no longer count as restored.
    func removeScenes(_ ids: [String]) {
        for id in ids {
            restoredScenes.withLock { _ = $0.remove(id) }
            connection.unexport(SceneAddress.objectPath(forID: id))
        }
    }
}

/// The Activities interface's signals, each body built here and nowhere else, from typed
/// values in the order of its declaration (`Contract.Activities`; `Connection.emit` refuses a
/// body that differs from it, and `SignalContractTests` checks every one against the XML).
/// Each is heard by the activity's app and host clients (`Audience`); one whose app is no
/// longer known, by host clients only.
extension HandoffService {
    /// `Advertised(id, type, title)`.
    func emitAdvertised(_ activity: Activity) {
        emit(Contract.Activities.advertised, [.string(activity.id), .string(activity.type), .string(activity.title)], to: .app(activity.appID))
    }

    /// `Updated(id)`.
    func emitUpdated(_ id: String, app: String?) {
        emit(Contract.Activities.updated, [.string(id)], to: app.map(Audience.app) ?? .hosts)
    }

    /// `Invalidated(id)`.
    func emitInvalidated(_ id: String, app: String?) {
        emit(Contract.Activities.invalidated, [.string(id)], to: app.map(Audience.app) ?? .hosts)
    }

    /// `Continued(id, scene, created)`: `scene` is `/` when the activity opened outside a scene
    /// (a web page, a document) or on another machine.
    func emitContinued(_ activity: Activity, into scene: ObjectPath, created: Bool) {
        emit(Contract.Activities.continued, [.string(activity.id), .objectPath(scene), .boolean(created)], to: .app(activity.appID))
    }
}
