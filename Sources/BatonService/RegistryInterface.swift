import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging

/// `org.baton.Handoff1.Registry`: which apps own which activity types. It holds only what it
/// uses: the store, a log, and the service's announcements (of the activities an
/// unregistration ended). Which types a caller may see and claim is its `CallerScope`'s to say (below).
struct RegistryInterface: Sendable {
    let store: Store
    let log: Logger
    let announcements: any Announcements

    var limits: Limits { store.limits }

    var interface: Interface {
        Interface(Contract.Interface.registry, methods: [
            Method(Contract.Registry.registerActivityType, ordering: .concurrent, handler: register),
            Method(Contract.Registry.unregisterActivityType, ordering: .concurrent, handler: unregister),
            Method(Contract.Registry.listActivityTypes, handler: list),
        ])
    }

    func register(_ call: MethodCall) async throws -> [DBusValue] {
        let options: [String: String] = try call.argument(2)
        let type = try ActivityType.registration(type: try call.argument(0), appID: try call.argument(1), options: options, limits: limits)
        try Self.checkHandlerAddress(type)
        let scope = CallerScope(call)
        try scope.mayRegister(type)
        let replace = try options["replace"].map { text throws(BatonError) in try Validate.boolean(text, option: "replace") } ?? false
        try await store.writing { transaction in
            if let registered = try transaction.activityType(type.type) { try scope.mayTake(registered, for: type, replace: replace) }
            try transaction.register(type)
        }
        log.debug("registered \(type.type) for \(type.appID)")
        return []
    }

    /// A handler must be a bus name and an object path: batond calls it there.
    static func checkHandlerAddress(_ type: ActivityType) throws(BatonError) {
        if let handler = type.handler, !DBusNames.isValid(handler, as: .busName) {
            throw BatonError.invalidArgument("handler '\(printable(handler))' is not a bus name, like com.example.App")
        }
        guard DBusNames.isValid(type.handlerPath, as: .objectPath) else {
            throw BatonError.invalidArgument("handler_path '\(printable(type.handlerPath))' is not an object path")
        }
    }

    func unregister(_ call: MethodCall) async throws -> [DBusValue] {
        let type: String = try call.argument(0)
        let unknown = BatonError.unknownActivityType("no activity type \(printable(type)) is registered")
        guard CallerScope(call).visible(try store.activityType(type), owner: \.appID) != nil,
              let removed = try await store.writing({ try $0.unregister(type: type) }) else { throw unknown }
        announcements.announceRemoved(removed)
        return []
    }

    func list(_ call: MethodCall) async throws -> [DBusValue] {
        let scope = CallerScope(call)
        return [.array(.dictionary(key: .string, value: .variant), try store.activityTypes().compactMap { scope.visible($0, owner: \.appID) }.map(Records.record))]
    }
}

/// The registry as one caller sees it (docs/DESIGN.md, "Callers and access"): a sandboxed app
/// registers types only for itself, named inside its id, names only itself as handler, and
/// sees only its own; another app's type does not exist for it. A host client may do all,
/// and give a type to another app with `replace=true`.
extension CallerScope {
    /// Refuses a registration this caller may not make.
    func mayRegister(_ type: ActivityType) throws(BatonError) {
        guard let app else { return }
        guard type.appID == app, type.type.hasPrefix(app + ".") else {
            throw .accessDenied("the sandboxed app \(app) registers types only for itself, named inside its id (like \(app).note)")
        }
        // The bus would start whatever service batond calls: a sandboxed app names only its own.
        if let handler = type.handler, handler != app, !handler.hasPrefix(app + ".") {
            throw .accessDenied("the sandboxed app \(app) names only itself as handler (\(app), or a name inside it)")
        }
    }

    /// Refuses taking over `registered` (another app's) for `type`: a host client may, with
    /// `replace`; a sandboxed app is not told which other app it is.
    func mayTake(_ registered: ActivityType, for type: ActivityType, replace: Bool) throws(BatonError) {
        guard registered.appID != type.appID, !replace || app != nil else { return }
        guard app == nil else { throw .accessDenied("\(type.type) is registered to another app") }
        throw .accessDenied("""
            \(type.type) is registered to \(registered.appID); to give it to \(type.appID), register it with the option replace=true
            """)
    }
}
