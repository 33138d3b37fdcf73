import BatonContract
import BatonCore
import DBus
import Glibc

extension HandoffService {
    /// The daemon's own facts, for `baton status`, none of them sensitive; and whether it
    /// notifies of other machines' activities (`Notifications.swift`) and which of its sources
    /// are on (`ActivitySource`), the user's to change.
    var statusInterface: Interface {
        typealias Name = Contract.Status.Property
        return Interface(Contract.Interface.status, methods: [
            Method(Contract.Status.setNotifications, ordering: .concurrent, handler: setNotifications),
            Method(Contract.Status.enableSource, ordering: .concurrent, handler: enableSource),
            Method(Contract.Status.disableSource, ordering: .concurrent, handler: disableSource),
        ], properties: [
            Property(Name.version, "u", changeSignal: .const) { _ in .uint32(1) },
            Property(Name.databasePath, "s", changeSignal: .const) { _ in .string(self.store.path) },
            Property(Name.databaseSize, "t", changeSignal: .none) { _ in .uint64(self.databaseSize()) },
            Property(Name.startedAt, "t", changeSignal: .const) { _ in .uint64(self.startedAt) },
            Property(Name.notifications, "b", changeSignal: .emits) { _ in .boolean(try self.store.notificationsEnabled()) },
            Property(Name.sources, "as", changeSignal: .emits) { _ in .array(.string, try self.sourcesOn()) },
        ])
    }

    /// Bytes of the database file and its WAL.
    func databaseSize() -> UInt64 {
        ["", "-wal"].reduce(0) { total, suffix in
            var info = stat()
            return stat(store.path + suffix, &info) == 0 ? total + UInt64(info.st_size) : total
        }
    }

    // MARK: Sources

    /// Each source the user can turn on, by its name in `Contract.Sources.switchable`.
    var sources: [String: any ActivitySource] {
        [RecentDocuments.source: RecentDocumentsSource(
            store: store, activities: activities, announcements: self, background: background, follower: recentDocumentsFollower,
            path: recentlyUsedPath, applicationDirectories: applicationDirectories, log: log)]
    }

    func enableSource(_ call: MethodCall) async throws -> [DBusValue] {
        try await switchSource(try call.argument(0), on: true)
    }

    func disableSource(_ call: MethodCall) async throws -> [DBusValue] {
        try await switchSource(try call.argument(0), on: false)
    }

    private func switchSource(_ name: String, on: Bool) async throws -> [DBusValue] {
        guard let source = sources[name] else {
            throw BatonError.invalidArgument("no source '\(printable(name))'; the sources are \(sources.keys.sorted().joined(separator: ", "))")
        }
        let now = clock.now()
        guard try await store.writing({ try $0.setSource(name, on: on, from: now) }) else { return [] }
        log.info("source \(name) \(on ? "on" : "off")")
        if on { source.followIfOn() } else { source.stop() }
        await emitRootPropertiesChanged(statusInterface, [Contract.Status.Property.sources])
        return []
    }

    /// The sources turned on, by name.
    func sourcesOn() throws -> [DBusValue] {
        try store.sourcesOn().keys.sorted().map { .string($0) }
    }

    /// Starts following every source the user turned on (batond starting).
    func followSourcesThatAreOn() {
        for source in sources.values { source.followIfOn() }
    }
}

/// A source of activities batond records without any app knowing of it (recent documents):
/// off until the user turns it on (`Status.EnableSource`), then followed until turned off.
protocol ActivitySource: Sendable {
    /// Starts following what it records, if the user turned it on and no one follows it yet.
    func followIfOn()
    /// Stops following it.
    func stop()
}
