import BatonContract
import BatonCore
import BatonStore
import DBus

extension HandoffService {
    /// `org.baton.Handoff1.Privacy`: apps blocked from advertising, and forgetting an app.
    var privacyInterface: Interface {
        Interface(Contract.Interface.privacy, methods: [
            Method(Contract.Privacy.blockApp, ordering: .concurrent) { call in try await self.setBlocked(call, true) },
            Method(Contract.Privacy.unblockApp, ordering: .concurrent) { call in try await self.setBlocked(call, false) },
            Method(Contract.Privacy.forgetApp, ordering: .concurrent, handler: forgetApp),
        ], properties: [
            Property(Contract.Privacy.Property.blockedApps, "as") { _ in .strings(try self.store.blockedApps()) },
        ])
    }

    private func setBlocked(_ call: MethodCall, _ blocked: Bool) async throws -> [DBusValue] {
        let app: String = try call.argument(0)
        try Validate.reverseDNS(app, what: "app id", limits: limits)
        guard try await store.writing({ try $0.setBlocked(app, blocked) }) else { return [] }
        log.info("\(blocked ? "blocked" : "unblocked") \(app)")
        connection.emitPropertiesChanged(path: Self.rootPath, interface: Contract.Interface.privacy, changed: [
            Contract.Privacy.Property.blockedApps: .strings(try store.blockedApps()),
        ])
        return []
    }

    /// `Blocked` when the user blocked `app`: its activities are not recorded.
    func refuseIfBlocked(_ app: String) throws {
        guard try store.isBlocked(app) else { return }
        throw BatonError(.blocked, "the user blocked \(app): its activities are not recorded (baton unblock \(app) allows them again)")
    }

    func forgetApp(_ call: MethodCall) async throws -> [DBusValue] {
        let app: String = try call.argument(0)
        try Validate.reverseDNS(app, what: "app id", limits: limits)
        let forgotten = try await store.writing { try $0.forget(appID: app) }
        announceRemoved(forgotten.activities)
        for scene in forgotten.scenes {
            restoredScenes.withLock { _ = $0.remove(scene) }
            connection.unexport(SceneAddress.objectPath(forID: scene))
        }
        let counts = [
            ("activities", forgotten.activities.count), ("history", forgotten.history), ("scenes", forgotten.scenes.count),
            ("types", forgotten.types), ("values", forgotten.values),
        ]
        log.info("forgot \(app): \(counts.map { "\($0.1) \($0.0)" }.joined(separator: ", "))")
        return [.dictionary(key: .string, value: .uint32, counts.map { .init(.string($0.0), .uint32(UInt32(clamping: $0.1))) })]
    }
}
