import BatonContract
import BatonCore
import DBus
#if canImport(FoundationEssentials)
import FoundationEssentials  // no ICU data: see BatonCore/ArchiveDocument.swift
#else
import Foundation
#endif
import Synchronization

/// The storage a continuation handler gives the scene being opened. The daemon
/// applies it, all or nothing, before `Continue` replies.
public struct InitialStorage: StorageWriter {
    /// The values of the whole scene, shared by every scoped view of it.
    final class Values: Sendable {
        let values = Mutex<[String: StorageValue]>([:])
    }

    private let values: Values
    private let prefix: String

    init() {
        values = Values()
        prefix = ""
    }

    private init(values: Values, prefix: String) {
        self.values = values
        self.prefix = prefix
    }

    /// Storage whose keys live under `name[id].`, written into the same scene.
    public func scoped(_ name: String, id: String? = nil) -> InitialStorage {
        InitialStorage(values: values, prefix: prefix + name + (id.map { "[\($0)]" } ?? "") + ".")
    }

    public func key(_ name: String) -> String { prefix + name }

    public func setRaw(_ name: String, _ value: StorageValue) async throws {
        values.values.withLock { $0[key(name)] = value }
    }

    /// Everything written, by full key.
    public var all: [String: StorageValue] { values.values.withLock { $0 } }

    var record: DBusValue {
        Records.storageRecord(all)
    }
}

/// An activity being continued: what it carries, the scene it opens, that scene's first storage.
public struct ContinuedActivity: Sendable {
    public let activity: Activity
    /// The scene being opened (or continued into); it exists once the handler returns.
    public let scene: SceneHandle
    /// Values for the scene; written by the daemon when the handler returns.
    public let storage: InitialStorage
    let client: BatonClient

    /// The payload decoded as `T`, or what did not decode.
    public func typedPayload<T: Decodable>(_ type: T.Type) throws(PayloadError) -> T {
        try UserActivity(activity, client: client).typedPayload(type)
    }
}

/// The counterpart of SwiftUI's `onContinueUserActivity`: an app registers its
/// activity types with a closure each, and this serves `org.baton.Handoff1.Handler`
/// so that `batond` (or the bus, starting the app on demand) can call it.
public final class ActivityContinuation: Sendable {
    public typealias Handler = @Sendable (ContinuedActivity) async throws -> Void

    private let client: BatonClient
    private let appID: String
    private let busName: String
    private let path: ObjectPath
    private let handlers = Mutex<[String: (ActivityType, Handler)]>([:])

    /// `busName` is the app's name on the bus; `path` is where it serves the handler.
    public init(client: BatonClient, appID: String, busName: String, path: ObjectPath = "/") {
        self.client = client
        self.appID = appID
        self.busName = busName
        self.path = path
    }

    /// Declares a type this app continues, and how.
    public func onContinue(
        _ type: String, title: String = "", requiredKeys: [String] = [], payloadType: String? = nil,
        perform handler: @escaping Handler
    ) {
        let registration = ActivityType(
            type: type, appID: appID, title: title, handler: busName, handlerPath: path.text,
            requiredKeys: requiredKeys, payloadType: payloadType)
        handlers.withLock { $0[type] = (registration, handler) }
    }

    /// Serves the handler (with the app's other interfaces at the same path), takes the
    /// bus name, and registers every declared type with the daemon.
    public func start(alongside interfaces: [Interface] = []) async throws {
        try await client.connection.export(path, interfaces + [handlerInterface])
        try await client.connection.requestName(busName)
        for (registration, _) in handlers.withLock({ Array($0.values) }) {
            try await client.register(registration)
        }
    }

    private var handlerInterface: Interface {
        Interface(Contract.Interface.handler, methods: [
            Method(Contract.Handler.continueActivity, ordering: .concurrent) { call in
                let scene = try call.argument(0, as: ObjectPath.self)
                guard let activity = Records.activity(try call.argument(1, as: DBusValue.self)) else {
                    throw DBusError.invalidArgs("the activity record lacks id, type or app_id")
                }
                guard let handler = self.handlers.withLock({ $0[activity.type]?.1 }) else {
                    throw BatonError.unknownActivityType("\(self.appID) does not continue \(activity.type)").dbusError
                }
                let storage = InitialStorage()
                do {
                    try await handler(ContinuedActivity(
                        activity: activity, scene: SceneHandle(client: self.client, path: scene), storage: storage, client: self.client))
                } catch let error as PayloadError {
                    throw BatonError.invalidPayload(error.description).dbusError
                } catch let error as BatonError {
                    throw error.dbusError
                }
                return [storage.record]
            },
            Method(Contract.Handler.activityContinued) { call in
                self.client.activityWasContinued(
                    try call.argument(0), scene: try call.argument(1, as: ObjectPath.self), device: try call.argument(2))
                return []
            },
        ])
    }
}
