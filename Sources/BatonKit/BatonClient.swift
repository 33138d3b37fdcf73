import BatonContract
import BatonCore
import DBus
import Synchronization

/// A connection to `batond` on the session bus, with the contract's methods as Swift calls.
///
/// Errors the daemon names (`org.baton.Handoff1.Error.*`) come back as `BatonError`
/// with the same code and message; failures of the bus itself stay `DBusError`.
public final class BatonClient: Sendable {
    public static let busName = Contract.busName
    static let root = Contract.root

    /// The underlying bus connection, for apps that also serve objects of their own.
    public let connection: Connection

    /// What `UserActivity.onContinued` is given: the scene it was continued in, and the device ("" for this one).
    public typealias ContinuedCallback = @Sendable (SceneHandle, String) -> Void
    /// The activities of this client that want to hear they were continued, by id.
    private let continuedCallbacks = Mutex<[String: ContinuedCallback]>([:])

    public init(connection: Connection) {
        self.connection = connection
    }

    /// Connects to the session bus (or `address`).
    public convenience init(_ address: BusAddress = .session) throws {
        self.init(connection: try Connection(address))
    }

    public func close() { connection.close() }

    /// Calls `callback` (nil: no longer) when the activity `id` was continued.
    func whenContinued(_ id: String, _ callback: ContinuedCallback?) {
        continuedCallbacks.withLock { $0[id] = callback }
    }

    /// batond said `id` was continued in `scene`, on `device`: the activity's `onContinued` hears it.
    func activityWasContinued(_ id: String, scene: ObjectPath, device: String) {
        guard let callback = continuedCallbacks.withLock({ $0[id] }) else { return }
        callback(SceneHandle(client: self, path: scene), device)
    }

    func call(_ method: ContractMethod, _ arguments: [DBusValue] = [], path: ObjectPath = root) async throws -> [DBusValue] {
        do {
            return try await connection.call(method, arguments, path: path)
        } catch let error as DBusError {
            // A contract error comes back as the BatonError it names; the bus's own stay DBusError.
            throw BatonError(error) ?? error
        }
    }

    /// A write the daemon makes idempotent: `arguments` get the options with a `request_id`,
    /// one for the call and its retries (`IdempotentWrite`).
    func write(
        _ method: ContractMethod, options: [String: String], _ arguments: ([String: String]) -> [DBusValue]
    ) async throws -> [DBusValue] {
        let options = IdempotentWrite.options(options)
        return try await IdempotentWrite.run({ try await call(method, arguments(options)) }, retry: Self.retry)
    }

    static func retry(_ error: any Error) -> IdempotentWrite.Retry? {
        switch error {
        case let error as DBusError where error.name == DBusError.Name.noReply || error.name == DBusError.Name.timeout: .replyLost
        case let error as BatonError where error.code == .storageUnavailable: .storageBusy
        default: nil
        }
    }

    // MARK: Registry

    /// Registers (or replaces) an activity type for an app.
    public func register(_ type: ActivityType) async throws {
        var options = ["title": type.title, "handler_path": type.handlerPath, "required_keys": type.requiredKeys.joined(separator: ",")]
        if let handler = type.handler { options["handler"] = handler }
        if let payloadType = type.payloadType { options["payload_type"] = payloadType }
        _ = try await call(Contract.Registry.registerActivityType, [.string(type.type), .string(type.appID), .stringMap(options)])
    }

    public func unregister(type: String) async throws {
        _ = try await call(Contract.Registry.unregisterActivityType, [.string(type)])
    }

    public func activityTypes() async throws -> [ActivityType] {
        try await call(Contract.Registry.listActivityTypes).first?.arrayValue?.compactMap(Records.activityType) ?? []
    }

    // MARK: Activities

    /// Advertises an activity; `options` are the contract's `Advertise` options.
    /// Sent with a `request_id` (a new one unless `options` has one), so a retry after a
    /// lost reply cannot store it twice.
    public func advertise(type: String, title: String, payload: String, options: [String: String] = [:]) async throws -> String {
        guard let id = try await write(Contract.Activities.advertise, options: options, {
            [.string(type), .string(title), .string(payload), .stringMap($0)]
        }).first?.stringValue else { throw BatonError.invalidArgument("the daemon returned no id") }
        return id
    }

    /// Sent with a `request_id`, as `advertise` is.
    public func update(id: String, payload: String, options: [String: String] = [:]) async throws {
        _ = try await write(Contract.Activities.update, options: options) { [.string(id), .string(payload), .stringMap($0)] }
    }

    public func invalidate(id: String) async throws {
        _ = try await call(Contract.Activities.invalidate, [.string(id)])
    }

    public func activity(id: String) async throws -> Activity {
        guard let record = try await call(Contract.Activities.get, [.string(id)]).first, let activity = Records.activity(record) else {
            throw BatonError.notFound("no activity \(id)")
        }
        return activity
    }

    /// Live activities matching the contract's `List` filter keys, newest first.
    public func activities(filter: [String: String] = [:]) async throws -> [Activity] {
        try await call(Contract.Activities.list, [.stringMap(filter)]).first?.arrayValue?.compactMap(Records.activity) ?? []
    }

    public func search(_ query: String, limit: UInt32 = 0) async throws -> [Activity] {
        try await call(Contract.Activities.search, [.string(query), .uint32(limit)]).first?.arrayValue?.compactMap(Records.activity) ?? []
    }

    /// Like `deleteSavedUserActivities(withPersistentIdentifiers:)`; returns how many went.
    @discardableResult
    public func deleteSaved(persistentIDs: [String]) async throws -> Int {
        Int(try await call(Contract.Activities.deleteSaved, [.strings(persistentIDs)]).first?.uint32Value ?? 0)
    }

    @discardableResult
    public func deleteAllSaved(appID: String) async throws -> Int {
        Int(try await call(Contract.Activities.deleteAllSaved, [.string(appID)]).first?.uint32Value ?? 0)
    }

    /// Continues an activity and returns the scene it went to: `scene`; else the app's
    /// scene that already shows its content (`SceneHandle.setHandlesContent`, or a current
    /// activity with the same target content id); else, or with `newScene`, a new one.
    /// Returns once the app has it; with `wait` false, at once, the scene `pending` until
    /// then. An app that cannot take it now throws `HandlerFailed`, and the continuation
    /// waits in its scene for the app to appear.
    public func continueActivity(
        id: String, into scene: SceneHandle? = nil, newScene: Bool = false, wait: Bool = true
    ) async throws -> SceneHandle {
        var options = scene.map { ["scene": $0.path.text] } ?? [:]
        if newScene { options["new_scene"] = "true" }
        if !wait { options["wait"] = "false" }
        guard let path = try await write(Contract.Activities.continue, options: options, { [.string(id), .stringMap($0)] })
            .first?.objectPathValue else {
            throw BatonError.invalidArgument("the daemon returned no scene")
        }
        return SceneHandle(client: self, path: path)
    }

    // MARK: Scenes

    public func openScene(appID: String, title: String = "") async throws -> SceneHandle {
        let options = title.isEmpty ? [:] : ["title": title]
        guard let path = try await write(Contract.Scenes.openScene, options: options, { [.string(appID), .stringMap($0)] })
            .first?.objectPathValue else {
            throw BatonError.invalidArgument("the daemon returned no scene")
        }
        return SceneHandle(client: self, path: path)
    }

    /// At the app's launch: its scenes, oldest first, each with why it comes back. This
    /// client becomes the app's instance: if it leaves the bus without `detach(appID:)`, the
    /// next launch hears `recover`. Continuations waiting for the app are delivered after.
    public func restoreScenes(appID: String) async throws -> [(scene: SceneHandle, reason: Scene.RestoreReason)] {
        let reply = try await call(Contract.Scenes.restoreScenes, [.string(appID)])
        return Records.restored(reply.first).map { (SceneHandle(client: self, path: $0.scene), $0.reason) }
    }

    /// At the app's clean exit: its scenes come back as `restore`.
    public func detach(appID: String) async throws {
        _ = try await call(Contract.Scenes.detach, [.string(appID)])
    }

    /// The scene a person named, by object path or by id (it need not exist yet).
    public func scene(named text: String) throws -> SceneHandle {
        let id = try SceneAddress.id(from: text)
        return SceneHandle(client: self, path: try ObjectPath(validating: SceneAddress.path(forID: id)))
    }

    /// The app's scenes (every app's for nil), oldest first.
    public func scenes(appID: String? = nil) async throws -> [SceneHandle] {
        try await call(Contract.Scenes.listScenes, [.string(appID ?? "")]).first?.arrayValue?
            .compactMap(\.objectPathValue).map { SceneHandle(client: self, path: $0) } ?? []
    }
}
