import BatonContract
import BatonCore
import BatonStore
import DBus
import Logging

extension HandoffService {
    /// `org.baton.Handoff1.Registry`: which apps own which activity types.
    var registryInterface: Interface {
        Interface(Contract.Interface.registry, methods: [
            Method(Contract.Registry.registerActivityType, ordering: .concurrent, handler: registerActivityType),
            Method(Contract.Registry.unregisterActivityType, ordering: .concurrent, handler: unregisterActivityType),
            Method(Contract.Registry.listActivityTypes, handler: listActivityTypes),
        ])
    }

    func registerActivityType(_ call: MethodCall) async throws -> [DBusValue] {
        let type = try ActivityType.registration(
            type: try call.argument(0), appID: try call.argument(1), options: try call.argument(2), limits: limits)
        try Self.checkHandlerAddress(type)
        if let app = call.confinedApp {
            guard type.appID == app, type.type.hasPrefix(app + ".") else {
                throw BatonError.accessDenied("the sandboxed app \(app) registers types only for itself, named inside its id (like \(app).note)")
            }
            // The bus would start whatever service batond calls: a sandboxed app names only its own.
            if let handler = type.handler, handler != app, !handler.hasPrefix(app + ".") {
                throw BatonError.accessDenied("the sandboxed app \(app) names only itself as handler (\(app), or a name inside it)")
            }
        }
        let replace = try (try call.argument(2) as [String: String])["replace"].map { text throws(BatonError) in
            try Validate.boolean(text, option: "replace")
        } ?? false
        try await store.writing { store in
            if let registered = try store.activityType(type.type), registered.appID != type.appID, !replace || call.confinedApp != nil {
                // A sandboxed app is not told which other app it is.
                guard call.confinedApp == nil else { throw BatonError.accessDenied("\(type.type) is registered to another app") }
                throw BatonError.accessDenied("""
                    \(type.type) is registered to \(registered.appID); to give it to \(type.appID), register it with the option replace=true
                    """)
            }
            try store.register(type)
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

    func unregisterActivityType(_ call: MethodCall) async throws -> [DBusValue] {
        let type: String = try call.argument(0)
        if call.confinedApp != nil, let registered = try store.activityType(type), !call.mayUse(app: registered.appID) {
            throw BatonError.unknownActivityType("no activity type \(printable(type)) is registered")
        }
        guard let removed = try await store.writing({ try $0.unregister(type: type) }) else {
            throw BatonError.unknownActivityType("no activity type \(printable(type)) is registered")
        }
        announceRemoved(removed)
        return []
    }

    func listActivityTypes(_ call: MethodCall) async throws -> [DBusValue] {
        [.array(.dictionary(key: .string, value: .variant), try store.activityTypes().filter { call.mayUse(app: $0.appID) }.map(Records.record))]
    }
}
