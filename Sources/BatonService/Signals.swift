import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging

/// What an interface tells the bus after a change, for the interface types (`RegistryInterface`,
/// `PrivacyInterface`, …): the service does it, with the emitters below and `SceneObjects`.
protocol Announcements: Sendable {
    /// What a write to the activities changed (`ActivityRepository.Outcome`).
    func announce(_ outcome: ActivityRepository.Outcome)
    /// Activities that ended, and the scenes that showed them.
    func announceRemoved(_ ended: [Ended])
    /// The root object's signals and property announcements.
    var signals: RootSignals { get }
    /// The scene objects: a new one exported, those that went removed.
    var scenes: SceneObjects { get }
}

/// The root object's signals, each body built here and nowhere else, from typed values in
/// the order of its declaration (`Contract.Activities`; `Connection.emit` refuses a body that
/// differs from it, and `SignalContractTests` checks every one against the XML). Each is heard
/// by the activity's app and host clients (`Audience`); one whose app is no longer known, by
/// host clients only. A signal that cannot be sent is logged, not thrown.
struct RootSignals: Sendable {
    let connection: Connection
    let log: Logger

    /// `Advertised(id, type, title)`.
    func advertised(_ activity: Activity) {
        emit(Contract.Activities.advertised, [.string(activity.id), .string(activity.type), .string(activity.title)], to: .app(activity.appID))
    }

    /// `Updated(id)`.
    func updated(_ id: String, app: String?) {
        emit(Contract.Activities.updated, [.string(id)], to: app.map(Audience.app) ?? .hosts)
    }

    /// `Invalidated(id)`.
    func invalidated(_ id: String, app: String?) {
        emit(Contract.Activities.invalidated, [.string(id)], to: app.map(Audience.app) ?? .hosts)
    }

    /// `Continued(id, scene, created)`: `scene` is `/` when the activity opened outside a scene
    /// (a web page, a document) or on another machine.
    func continued(_ activity: Activity, into scene: ObjectPath, created: Bool) {
        emit(Contract.Activities.continued, [.string(activity.id), .objectPath(scene), .boolean(created)], to: .app(activity.appID))
    }

    /// `Status.SourceSettingChanged(source, name, value)`: the user's settings, for host clients.
    func sourceSettingChanged(_ source: String, _ name: String, to value: String) {
        emit(Contract.Status.sourceSettingChanged, [.string(source), .string(name), .string(value)], to: .hosts)
    }

    /// Announces that the properties `names` of the root object's `interface` changed, with
    /// their values as its getters give them, to those who may read them
    /// (`Access.audience(ofPropertiesOf:)`).
    func propertiesChanged(_ interface: Interface, _ names: [String]) async {
        do {
            try await connection.emitPropertiesChanged(
                path: Contract.root, of: interface, names, to: Access.audience(ofPropertiesOf: interface.name))
        } catch {
            log.error("could not announce \(interface.name) \(names): \(error)")
        }
    }

    private func emit(_ signal: ContractSignal, _ body: [DBusValue], to audience: Audience) {
        do {
            try connection.emit(signal, body, to: audience)
        } catch {
            log.error("could not emit \(signal.name): \(error)")
        }
    }
}
