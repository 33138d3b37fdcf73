import BatonContract
import BatonCore
import BatonStore
import DBus
import Glibc
import Logging

/// `org.baton.Handoff1.Status`: the daemon's own facts, for `baton status`, none of them
/// sensitive; and whether it notifies of other machines' activities (`NotificationOffers`)
/// and which of its sources are on (`ActivitySource`), the user's to change. It holds only
/// what it uses: the store, when the daemon started, the offer on screen, the sources, a log,
/// and the service's announcements.
struct StatusInterface: Sendable {
    let store: Store
    let startedAt: UInt64
    /// The offer on screen, withdrawn when the user turns offers off.
    let notices: HandoffNotices
    /// Each source the user can turn on, by its name in `Contract.Sources.switchable`.
    let sources: [String: any ActivitySource]
    let log: Logger
    let announcements: any Announcements
    var clock: any DaemonClock { store.wallClock }

    var interface: Interface {
        typealias Name = Contract.Status.Property
        return Interface(Contract.Interface.status, methods: [
            Method(Contract.Status.setNotifications, ordering: .concurrent, handler: setNotifications),
            Method(Contract.Status.enableSource, ordering: .concurrent) { call in try await switchSource(try call.argument(0), on: true) },
            Method(Contract.Status.disableSource, ordering: .concurrent) { call in try await switchSource(try call.argument(0), on: false) },
            Method(Contract.Status.sourceSettings) { call in [.stringMap(try settings(of: try call.argument(0)))] },
            Method(Contract.Status.setSourceSetting, ordering: .concurrent, handler: setSourceSetting),
        ], properties: [
            Property(Name.version, "u", changeSignal: .const) { _ in .uint32(1) },
            Property(Name.databasePath, "s", changeSignal: .const) { _ in .string(store.path) },
            Property(Name.databaseSize, "t", changeSignal: .none) { _ in .uint64(databaseSize()) },
            Property(Name.startedAt, "t", changeSignal: .const) { _ in .uint64(startedAt) },
            Property(Name.notifications, "b", changeSignal: .emits) { _ in .boolean(try store.notificationsEnabled()) },
            Property(Name.sources, "as", changeSignal: .emits) { _ in .array(.string, try store.sourcesOn().keys.sorted().map { .string($0) }) },
        ], signals: [Signal(Contract.Status.sourceSettingChanged)])
    }

    /// Bytes of the database file and its WAL.
    func databaseSize() -> UInt64 {
        ["", "-wal"].reduce(0) { total, suffix in
            var info = stat()
            return stat(store.path + suffix, &info) == 0 ? total + UInt64(info.st_size) : total
        }
    }

    func setNotifications(_ call: MethodCall) async throws -> [DBusValue] {
        let enabled: Bool = try call.argument(0)
        guard try await store.writing({ try $0.setNotifications(enabled) }) else { return [] }
        log.info("notifications of other machines' activities \(enabled ? "on" : "off")")
        if !enabled { notices.withdrawShown() }
        await announcements.signals.propertiesChanged(interface, [Contract.Status.Property.notifications])
        return []
    }

    func settings(of source: String) throws -> [String: String] {
        try store.settingValues(of: source, declared: try Self.declaredSettings(of: source))
    }

    /// The settings `source` declares; `InvalidArgument` for a source batond does not have.
    static func declaredSettings(of source: String) throws(BatonError) -> [SourceSetting] {
        guard let declared = Contract.Sources.settings[source] else {
            throw .invalidArgument("no source '\(printable(source))'; the sources are \(Contract.Sources.settings.keys.sorted().joined(separator: ", "))")
        }
        return declared
    }

    func setSourceSetting(_ call: MethodCall) async throws -> [DBusValue] {
        let source: String = try call.argument(0), name: String = try call.argument(1), value: String = try call.argument(2)
        let declared = try Self.declaredSettings(of: source)
        guard let setting = declared.first(where: { $0.name == name }) else {
            throw BatonError.invalidArgument(declared.isEmpty ? "the source \(source) has no settings"
                : "\(source) has no setting '\(printable(name))'; its settings are \(declared.map(\.name).joined(separator: ", "))")
        }
        let checked = try setting.checked(value, of: source)
        if try await store.writing({ try $0.setSourceSetting(source, name, to: checked) }) {
            log.info("source \(source): \(name) is \(checked)")
            announcements.signals.sourceSettingChanged(source, name, to: checked)
        }
        return []
    }

    private func switchSource(_ name: String, on: Bool) async throws -> [DBusValue] {
        guard let source = sources[name] else {
            throw BatonError.invalidArgument("no source '\(printable(name))'; the sources are \(sources.keys.sorted().joined(separator: ", "))")
        }
        let now = clock.now()
        guard try await store.writing({ try $0.setSource(name, on: on, from: now) }) else { return [] }
        log.info("source \(name) \(on ? "on" : "off")")
        if on { source.followIfOn() } else { source.stop() }
        await announcements.signals.propertiesChanged(interface, [Contract.Status.Property.sources])
        return []
    }
}

extension Store {
    /// `source`'s `declared` settings, each with the value the user gave it or its default.
    func settingValues(of source: String, declared: [SourceSetting]) throws -> [String: String] {
        let given = try sourceSettings(source)
        return Dictionary(uniqueKeysWithValues: declared.map { ($0.name, given[$0.name] ?? $0.defaultValue) })
    }
}

extension HandoffService {
    /// `org.baton.Handoff1.Status`, over this service's store, offer on screen and sources.
    var status: StatusInterface {
        StatusInterface(store: store, startedAt: startedAt, notices: notices, sources: sources, log: log, announcements: self)
    }

    /// Each source the user can turn on, by its name in `Contract.Sources.switchable`.
    var sources: [String: any ActivitySource] {
        [RecentDocuments.source: RecentDocumentsSource(
            store: store, activities: activities, announcements: self, background: background, follower: recentDocumentsFollower,
            path: recentlyUsedPath, applicationDirectories: applicationDirectories, log: log),
         Media.source: MediaSource(
            store: store, activities: activities, announcements: self, background: background, follower: mediaFollower,
            connection: connection, recentlyUsedPath: recentlyUsedPath, applicationDirectories: applicationDirectories, log: log),
         ClipboardSource.name: clipboard,
         Terminals.source: TerminalsSource(
            store: store, activities: activities, announcements: self, background: background, follower: terminalsFollower,
            shellsDirectory: shellsDirectory, home: home, log: log)]
    }

    /// The clipboard source and its interface, over what it holds in memory.
    var clipboard: ClipboardSource {
        ClipboardSource(store: store, state: clipboardState, paused: paused, sync: syncSlot, connection: connection, signals: signals, log: log)
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
