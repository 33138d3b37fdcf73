import BatonContract
import BatonCore
import DBus

/// A connection to `batond` on the session bus, with the contract's methods as Swift calls.
///
/// Errors the daemon names (`org.baton.Handoff1.Error.*`) come back as `BatonError`
/// with the same code and message; failures of the bus itself stay `DBusError`.
public final class BatonClient: Sendable {
    public static let busName = Contract.busName
    static let root = ObjectPath(stringLiteral: Contract.rootPath)

    /// The underlying bus connection, for apps that also serve objects of their own.
    public let connection: Connection

    public init(connection: Connection) {
        self.connection = connection
    }

    /// Connects to the session bus (or `address`).
    public convenience init(_ address: BusAddress = .session) throws {
        self.init(connection: try Connection(address))
    }

    public func close() { connection.close() }

    func call(_ interface: String, _ member: String, _ arguments: [DBusValue] = [], path: ObjectPath = root) async throws -> [DBusValue] {
        do {
            return try await connection.call(Self.busName, path, Contract.busName + "." + interface, member, arguments)
        } catch let error as DBusError {
            // A contract error comes back as the BatonError it names; the bus's own stay DBusError.
            throw BatonError(dbusName: error.name, message: error.message) ?? error
        }
    }

    /// A write the daemon makes idempotent: `arguments` get the options with a `request_id`,
    /// one for the call and its retries (`IdempotentWrite`).
    func write(
        _ interface: String, _ member: String, options: [String: String], _ arguments: ([String: String]) -> [DBusValue]
    ) async throws -> [DBusValue] {
        let options = IdempotentWrite.options(options)
        return try await IdempotentWrite.run({ try await call(interface, member, arguments(options)) }, retry: Self.retry)
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
        _ = try await call("Registry", "RegisterActivityType", [.string(type.type), .string(type.appID), .stringMap(options)])
    }

    public func unregister(type: String) async throws {
        _ = try await call("Registry", "UnregisterActivityType", [.string(type)])
    }

    public func activityTypes() async throws -> [ActivityType] {
        try await call("Registry", "ListActivityTypes").first?.arrayValue?.compactMap(ActivityRecord.activityType) ?? []
    }

    // MARK: Activities

    /// Advertises an activity; `options` are the contract's `Advertise` options.
    /// Sent with a `request_id` (a new one unless `options` has one), so a retry after a
    /// lost reply cannot store it twice.
    public func advertise(type: String, title: String, payload: String, options: [String: String] = [:]) async throws -> String {
        guard let id = try await write("Activities", "Advertise", options: options, {
            [.string(type), .string(title), .string(payload), .stringMap($0)]
        }).first?.stringValue else { throw BatonError.invalidArgument("the daemon returned no id") }
        return id
    }

    /// Sent with a `request_id`, as `advertise` is.
    public func update(id: String, payload: String, options: [String: String] = [:]) async throws {
        _ = try await write("Activities", "Update", options: options) { [.string(id), .string(payload), .stringMap($0)] }
    }

    public func invalidate(id: String) async throws {
        _ = try await call("Activities", "Invalidate", [.string(id)])
    }

    public func activity(id: String) async throws -> Activity {
        guard let record = try await call("Activities", "Get", [.string(id)]).first, let activity = ActivityRecord.activity(record) else {
            throw BatonError.notFound("no activity \(id)")
        }
        return activity
    }

    /// Live activities matching the contract's `List` filter keys, newest first.
    public func activities(filter: [String: String] = [:]) async throws -> [Activity] {
        try await call("Activities", "List", [.stringMap(filter)]).first?.arrayValue?.compactMap(ActivityRecord.activity) ?? []
    }

    public func search(_ query: String, limit: UInt32 = 0) async throws -> [Activity] {
        try await call("Activities", "Search", [.string(query), .uint32(limit)]).first?.arrayValue?.compactMap(ActivityRecord.activity) ?? []
    }

    /// Like `deleteSavedUserActivities(withPersistentIdentifiers:)`; returns how many went.
    @discardableResult
    public func deleteSaved(persistentIDs: [String]) async throws -> Int {
        Int(try await call("Activities", "DeleteSaved", [.strings(persistentIDs)]).first?.uint32Value ?? 0)
    }

    @discardableResult
    public func deleteAllSaved(appID: String) async throws -> Int {
        Int(try await call("Activities", "DeleteAllSaved", [.string(appID)]).first?.uint32Value ?? 0)
    }

    /// Continues an activity into a new scene (or into `scene`) and returns it.
    public func continueActivity(id: String, into scene: SceneHandle? = nil) async throws -> SceneHandle {
        let options = scene.map { ["scene": $0.path.text] } ?? [:]
        guard let path = try await write("Activities", "Continue", options: options, { [.string(id), .stringMap($0)] })
            .first?.objectPathValue else {
            throw BatonError.invalidArgument("the daemon returned no scene")
        }
        return SceneHandle(client: self, path: path)
    }

    // MARK: Scenes

    public func openScene(appID: String, title: String = "") async throws -> SceneHandle {
        let options = title.isEmpty ? [:] : ["title": title]
        guard let path = try await write("Scenes", "OpenScene", options: options, { [.string(appID), .stringMap($0)] })
            .first?.objectPathValue else {
            throw BatonError.invalidArgument("the daemon returned no scene")
        }
        return SceneHandle(client: self, path: path)
    }

    /// The scene a person named, by object path or by id (it need not exist yet).
    public func scene(named text: String) throws -> SceneHandle {
        let id = try SceneAddress.id(from: text)
        return SceneHandle(client: self, path: try ObjectPath(validating: SceneAddress.path(forID: id)))
    }

    /// The app's scenes (every app's for nil), oldest first.
    public func scenes(appID: String? = nil) async throws -> [SceneHandle] {
        try await call("Scenes", "ListScenes", [.string(appID ?? "")]).first?.arrayValue?
            .compactMap(\.objectPathValue).map { SceneHandle(client: self, path: $0) } ?? []
    }
}

/// Reading the contract's records back into domain values.
enum ActivityRecord {
    static func fields(_ record: DBusValue) -> [String: DBusValue]? {
        record.stringKeyedValue?.mapValues(\.unwrapped)
    }

    static func activityType(_ record: DBusValue) -> ActivityType? {
        guard let f = fields(record), let type = f["type"]?.stringValue, let app = f["app_id"]?.stringValue else { return nil }
        let handler = f["handler"]?.stringValue ?? ""
        return ActivityType(
            type: type, appID: app, title: f["title"]?.stringValue ?? "", handler: handler.isEmpty ? nil : handler,
            handlerPath: f["handler_path"]?.stringValue ?? "/",
            requiredKeys: f["required_keys"].flatMap([String].init(dbusValue:)) ?? [], payloadType: f["payload_type"]?.stringValue)
    }

    static func activity(_ record: DBusValue) -> Activity? {
        guard let f = fields(record), let id = f["id"]?.stringValue, let type = f["type"]?.stringValue,
              let app = f["app_id"]?.stringValue else { return nil }
        let sceneID = f["scene"]?.objectPathValue.flatMap { try? SceneAddress.id(from: $0.text) }
        return Activity(
            id: id, type: type, appID: app, title: f["title"]?.stringValue ?? "", payload: f["payload"]?.stringValue ?? "{}",
            payloadType: f["payload_type"]?.stringValue, targetContentID: f["target_content_id"]?.stringValue,
            persistentID: f["persistent_id"]?.stringValue, keywords: f["keywords"].flatMap([String].init(dbusValue:)) ?? [],
            webpageURL: f["webpage_url"]?.stringValue, eligibleForHandoff: f["eligible_for_handoff"]?.boolValue ?? true,
            eligibleForSearch: f["eligible_for_search"]?.boolValue ?? false, sceneID: sceneID,
            createdAt: f["created_at"]?.uint64Value ?? 0, updatedAt: f["updated_at"]?.uint64Value ?? 0,
            expiresAt: f["expires_at"]?.uint64Value)
    }
}
