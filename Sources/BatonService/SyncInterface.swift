import BatonContract
import BatonCore
import BatonStore
import BatonSync
import DBus
import Glibc
import ServiceLifecycle
import Synchronization

/// `org.baton.Handoff1.Sync`: Init, Join, Leave, Devices and the sync's state, over the
/// daemon's `SyncEngine` (BatonSync). Setting up talks to the server, so those calls run
/// concurrently and never hold up the bus thread. It holds only what it uses: the store (for the
/// outbox's count), the engine once the daemon attached it, the properties' values, and the
/// service's announcements.
struct SyncInterface: Sendable {
    let store: Store
    /// The daemon's engine, once attached (`HandoffService.attachSync`).
    let engineAttached: @Sendable () -> SyncEngine?
    let announcements: any Announcements
    /// The properties' values (`HandoffService.syncPropertyValues`), which their announcements read too.
    let values: @Sendable () -> [String: DBusValue]

    var interface: Interface {
        typealias Name = Contract.Sync.Property
        return Interface(Contract.Interface.sync, methods: [
            Method(Contract.Sync.initialize, ordering: .concurrent, handler: initializeSync),
            Method(Contract.Sync.join, ordering: .concurrent, handler: joinSync),
            Method(Contract.Sync.leave, ordering: .concurrent, handler: leaveSync),
            Method(Contract.Sync.devices, handler: syncDevices),
            Method(Contract.Sync.revokeDevice, ordering: .concurrent, handler: revokeDevice),
        ], properties: [
            Property(Name.state, "s") { _ in values()[Name.state] ?? .string("off") },
            Property(Name.deviceID, "s") { _ in values()[Name.deviceID] ?? .string("") },
            Property(Name.deviceName, "s") { _ in values()[Name.deviceName] ?? .string("") },
            Property(Name.lastSyncAt, "t") { _ in values()[Name.lastSyncAt] ?? .uint64(0) },
            Property(Name.transport, "s") { _ in values()[Name.transport] ?? .string("") },
            Property(Name.outbox, "u", changeSignal: .none) { _ in .uint32(UInt32(clamping: (try? store.outboxCount()) ?? 0)) },
        ])
    }

    private func engine() throws(BatonError) -> SyncEngine {
        guard let engine = engineAttached() else { throw BatonError(.syncUnavailable, "sync is not available in this batond") }
        return engine
    }

    func initializeSync(_ call: MethodCall) async throws -> [DBusValue] {
        let url: String = try call.argument(0)
        let options: [String: String] = try call.argument(1)
        let words = try await SyncCalls.syncing { try await engine().initialize(url: url, deviceName: SyncCalls.deviceName(options)) }
        return [.string(words)]
    }

    func joinSync(_ call: MethodCall) async throws -> [DBusValue] {
        let url: String = try call.argument(0)
        let words: String = try call.argument(1)
        let options: [String: String] = try call.argument(2)
        try await SyncCalls.syncing { try await engine().join(url: url, recoveryWords: words, deviceName: SyncCalls.deviceName(options)) }
        return []
    }

    func leaveSync(_ call: MethodCall) async throws -> [DBusValue] {
        let removed = try await SyncCalls.syncing { try await engine().leave() }
        announcements.announceRemoved(removed)
        return []
    }

    func revokeDevice(_ call: MethodCall) async throws -> [DBusValue] {
        let device: String = try call.argument(0)
        try await SyncCalls.syncing { try await engine().revoke(deviceID: device) }
        return []
    }

    func syncDevices(_ call: MethodCall) throws -> [DBusValue] {
        typealias Key = Contract.Sync.DeviceKey
        let engine = try engine()
        let devices = try SyncCalls.syncingNow { try engine.knownDevices() }
        let folder = engine.settings?.folder
        let records = devices.map { device in
            var record = RecordBuilder()
            record.field(Key.id, string: device.id)
            record.field(Key.lastSeen, uint64: device.lastSeen)
            record.field(Key.name, string: device.name)
            record.field(Key.revoked, boolean: device.revoked)
            record.field(Key.thisDevice, boolean: device.isThisDevice)
            if device.isThisDevice, let folder { record.field(Key.folder, string: folder) }
            return record.value
        }
        return [.array(.dictionary(key: .string, value: .variant), records)]
    }
}

extension HandoffService {
    var syncEngine: SyncEngine? { syncSlot.engine }

    /// Tells the bus what other devices' records changed here.
    func announce(_ applied: Store.Applied) {
        let advertised = applied.advertised.compactMap { try? store.storedActivity(id: $0) }
        // Read once: for the offers of tracks that stopped, then for whom each Updated is for.
        let updated = applied.updated.map { id in (id: id, activity: try? store.storedActivity(id: id)) }
        let offers = self.offers
        let stopped = offers.stoppedTracks(updated.compactMap(\.activity))
        let offered = offers.offerable(advertised + stopped)
        for activity in advertised {
            signals.advertised(activity)
        }
        if let offered { offers.offer(offered) }
        notices.withdraw(of: applied.continuedElsewhere)
        for (id, activity) in updated {
            // Told to host clients only when it cannot be read now (it went meanwhile).
            signals.updated(id, app: activity?.appID)
        }
        announceRemoved(applied.ended)
        if !applied.clipboard.isEmpty {
            let copies = applied.clipboard
            background.start { await self.clipboard.received(copies) }
        }
        // Another machine asked for these here: each scene is on the bus before its app is asked.
        for sceneID in applied.pendingScenes {
            background.start {
                do {
                    guard let scene = try self.store.scene(id: sceneID) else { return }
                    try await self.scenes.exportNew(scene)
                    try await self.continuations.deliver(sceneID: sceneID)
                } catch {
                    self.log.info("continuing in scene \(sceneID), as another machine asked: \(error)")
                }
            }
        }
        for continued in applied.continuedThere {
            guard let activity = try? store.storedActivity(id: continued.activityID), let type = try? store.activityType(activity.type) else {
                continue
            }
            continuations.tellOriginator(activity, type: type, scene: "/", device: continued.device)
        }
    }

    /// Announces the Sync properties that changed since the last announcement, if any
    /// (Outbox is read when asked). The engine calls it after each batch it sends and each
    /// round, where most of the time only LastSyncAt moved.
    func announceSyncChanged() {
        guard syncEngine != nil else { return }
        let now = syncPropertyValues()
        // Under the lock, so that two announcements racing leave in the order of their values.
        announcedSync.withLock { announced in
            let changed = now.filter { announced[$0.key] != $0.value }
            guard !changed.isEmpty else { return }
            announced = now
            connection.emitPropertiesChanged(path: Self.rootPath, interface: Contract.Interface.sync, changed: changed,
                                             to: Access.audience(ofPropertiesOf: Contract.Interface.sync))
        }
    }

    /// The Sync properties that change, as their getters and their announcements give them:
    /// the engine's, read synchronously, so the engine announces them as it goes.
    func syncPropertyValues() -> [String: DBusValue] {
        typealias Name = Contract.Sync.Property
        let engine = syncEngine
        return [
            Name.state: .string(engine?.state.rawValue ?? "off"),
            Name.deviceID: .string(engine?.settings?.deviceID ?? ""),
            Name.deviceName: .string(engine?.settings?.deviceName ?? ""),
            Name.lastSyncAt: .uint64(engine?.lastSyncAt ?? 0),
            Name.transport: .string(engine?.settings?.transport ?? ""),
        ]
    }
}

/// What every sync call shares: the device's name, and failures as the contract names them.
enum SyncCalls {
    /// The device's name from the options, else the host's name.
    static func deviceName(_ options: [String: String]) -> String {
        if let name = options["device_name"], !name.isEmpty { return name }
        return ThisMachine.hostName() ?? "this machine"
    }

    /// Runs a sync call, its failures as the contract names them.
    static func syncing<T: Sendable>(_ work: () async throws -> T) async throws -> T {
        do {
            return try await work()
        } catch {
            throw named(error)
        }
    }

    static func syncingNow<T>(_ work: () throws -> T) throws -> T {
        do {
            return try work()
        } catch {
            throw named(error)
        }
    }

    private static func named(_ error: any Error) -> any Error {
        switch error {
        case let error as BatonError: error
        case SyncError.wrongWords(let text): BatonError.invalidArgument(text)
        case let error as SyncError: BatonError(.syncUnavailable, error.description)
        default: BatonError(.syncUnavailable, "the sync server failed: \(SyncEngine.describe(error))")
        }
    }
}

/// Sync across machines as a service of the group: runs the engine's loop until shutdown.
struct SyncService: Service {
    let engine: SyncEngine

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await engine.run()
        }
    }
}

/// The sync engine, once the daemon has made it (`HandoffService.attachSync`); shared by
/// everything that reaches another machine, each reading it when it needs it.
final class SyncSlot: Sendable {
    private let slot = Mutex<SyncEngine?>(nil)

    var engine: SyncEngine? { slot.withLock { $0 } }

    func attach(_ engine: SyncEngine) {
        slot.withLock { $0 = engine }
    }
}
