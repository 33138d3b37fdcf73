import BatonContract
import BatonCore
import BatonStore
import BatonSync
import CMalloc
import DBus
import Glibc
import Logging
import Synchronization

/// `org.baton.Handoff1` on a bus connection: the interfaces of the root object, one Scene
/// object per scene, their signals. Each interface is a small type of its own
/// (`RegistryInterface`, `ActivitiesInterface`, …) holding only what it uses, its members a
/// table pointing at named methods; continuations and their delivery are `Continuations`',
/// the scene objects `SceneObjects`'. This type builds them over one activity repository and
/// holds the service's life: start, stop, housekeeping, and the announcements after a change.
///
/// Every write goes to the store, and is committed, before its reply is sent. Which thread
/// runs what, and where a call can wait: docs/DESIGN.md, "The process".
public final class HandoffService: Sendable {
    public static let busName = Contract.busName
    public static let rootPath = Contract.root

    let connection: Connection
    let store: Store
    let log: Logger
    let handlerTimeout: Duration
    var limits: Limits { store.limits }
    /// The daemon's wall clock (the store's): tests move it instead of sleeping.
    var clock: any DaemonClock { store.wallClock }
    /// When the daemon started, for Status.StartedAt.
    let startedAt: UInt64
    /// Every task that outlives the call that started it; finished before the store closes.
    let background = BackgroundTasks()
    /// How many such tasks are running: none once the daemon has stopped.
    public var backgroundTasks: Int { background.count }

    let commits: CommitQueue
    /// What is advertised while the user has paused recording (memory only).
    let paused: PausedActivities
    /// Sync across machines, once the daemon has made it (`attachSync`).
    let syncSlot = SyncSlot()
    /// The Sync properties as last announced, so that an announcement carries only what changed.
    let announcedSync = Mutex<[String: DBusValue]>([:])
    /// The notification offering another machine's activity, if one is on screen.
    let notices: HandoffNotices
    /// Every activity, whatever its mode; `activities.view(for:)` as one caller sees them.
    let activities: ActivityRepository
    let signals: RootSignals
    let scenes: SceneObjects
    let continuations: Continuations

    /// `callsPerCaller`: calls one caller may have in flight; beyond, `LimitsExceeded`.
    /// A store on a `ManualClock` exports `org.baton.Handoff1.Testing` (see `DaemonOptions.testClock`).
    public init(
        connection: Connection, store: Store, log: Logger, handlerTimeout: Duration = .seconds(10), callsPerCaller: Int = 256,
        applicationDirectories: [String] = [], recentlyUsedPath: String? = nil, shellsDirectory: String? = nil, home: String? = nil
    ) {
        self.applicationDirectories = applicationDirectories
        self.recentlyUsedPath = recentlyUsedPath
        self.shellsDirectory = shellsDirectory
        self.home = home
        self.connection = connection
        self.store = store
        self.log = log
        self.handlerTimeout = handlerTimeout
        self.callsPerCaller = callsPerCaller
        self.commits = CommitQueue(store: store, schedule: connection.afterDispatch)
        self.startedAt = store.wallClock.now()
        // Unreadable, the pause is taken as on: better to record nothing than what the user paused.
        let until: UInt64?
        do { until = try store.pausedUntil() } catch { until = 0 }
        self.paused = PausedActivities(until: until)
        self.notices = HandoffNotices(connection: connection, background: background)
        self.activities = ActivityRepository(store: store, commits: commits, paused: paused, sync: syncSlot)
        self.signals = RootSignals(connection: connection, log: log)
        self.scenes = SceneObjects(connection: connection, store: store, log: log)
        self.continuations = Continuations(
            connection: connection, store: store, log: log, handlerTimeout: handlerTimeout, background: background,
            activities: activities, scenes: scenes, signals: signals, sync: syncSlot, notices: notices,
            applicationDirectories: applicationDirectories)
    }

    private let callsPerCaller: Int
    /// Where apps' desktop entries are (`AppEntry`): the `applications` of the XDG data directories.
    let applicationDirectories: [String]
    /// The user's `recently-used.xbel`, which the recent-documents source follows (`RecentDocuments.swift`).
    let recentlyUsedPath: String?
    /// The task following it, while the source is on.
    let recentDocumentsFollower = SourceFollower()
    /// The task following the media players, while the source is on.
    let mediaFollower = SourceFollower()
    /// Where shells set up with `baton shell-init` say their directories (`Terminals.shellsDirectory`).
    let shellsDirectory: String?
    /// The user's home directory, for titles (`~/src`) and blocked paths.
    let home: String?
    /// The task following the terminals' shells, while the source is on.
    let terminalsFollower = SourceFollower()
    /// What the clipboard source holds in memory: the copy offered, the last one sent.
    let clipboardState = ClipboardState()

    /// Makes the sync engine, with its settings in `configPath`; its changes are announced on the bus.
    public func attachSync(configPath: String, catchUpPeriod: Duration = .seconds(30)) throws -> SyncEngine {
        let engine = try SyncEngine(
            store: store, configPath: configPath, log: log, catchUpPeriod: catchUpPeriod,
            onApplied: { [weak self] applied in self?.announce(applied) },
            onChange: { [weak self] in self?.announceSyncChanged() })
        syncSlot.attach(engine)
        return engine
    }

    /// Exports every object (scenes from the database marked restored), then owns the bus name.
    public func start() async throws {
        // Calls are answered on the bus thread: a write there would wait for the disk (see docs/DESIGN.md, "The process").
        connection.afterDispatch { DiskWaits.forbidOnCurrentThread() }
        connection.limitCalls(perCaller: callsPerCaller, refusal: BatonError(.limitsExceeded, """
            this client has \(callsPerCaller) calls waiting for batond's answers already; wait for some of them, then send more
            """).dbusError)
        let ownUser = getuid()
        try await connection.setAccessCheck { call in
            guard call.caller?.user == ownUser else {
                throw BatonError.accessDenied("batond serves only its own user (uid \(ownUser))")
            }
            try Access.check(call)
        }
        // Scenes first: with no manager above them yet, restoring them announces nothing.
        let restored = try store.scenes()
        try await scenes.restore(restored)
        // Not among the objects the root manages: those are the scenes.
        let search = desktopSearch
        try await connection.export(Contract.SearchProvider.path, [search.searchProviderInterface], managed: false)
        try await connection.export(Contract.KRunner.path, [search.krunnerInterface], managed: false)
        let registry = RegistryInterface(store: store, log: log, announcements: self)
        let archive = ArchiveInterface(store: store, log: log, announcements: self)
        let sync = SyncInterface(
            store: store, engineAttached: { self.syncEngine }, announcements: self, values: { self.syncPropertyValues() })
        let activities = ActivitiesInterface(
            store: store, activities: activities, continuations: continuations, announcements: self,
            applicationDirectories: applicationDirectories)
        let scenesInterface = ScenesInterface(store: store, log: log, objects: scenes, continuations: continuations, background: background)
        let testing = (clock as? ManualClock).map { TestingInterface(clock: $0, log: log).interface }
        try await connection.export(
            Self.rootPath, [registry.interface, activities.interface, scenesInterface.interface, status.interface, sync.interface,
                            archive.interface, privacy.interface, clipboard.interface] + (testing.map { [$0] } ?? []), objectManager: true)
        try await connection.requestName(Self.busName)
        log.info("serving \(Self.busName) with \(restored.count) restored scenes from \(store.path)")
    }

    /// Stops taking calls and answers every call already received: releases the name,
    /// answers calls that still arrive with `StorageUnavailable` (clients try again, and
    /// reach the next batond), and returns once every earlier call has its reply, or after
    /// `grace`. Returns false when `grace` ran out first.
    @discardableResult
    public func stop(grace: Duration = .seconds(5)) async -> Bool {
        try? await connection.releaseName(Self.busName)
        return await connection.drain(
            refusing: BatonError.storageUnavailable("batond is stopping; try again (the next call starts it again)").dbusError,
            timeout: grace)
    }

    /// How long no write may commit before the WAL is emptied and truncated.
    public static let idleBeforeTruncatingWAL: Duration = .seconds(2)

    /// How long an expired activity is kept (hidden) before it is purged, so that a
    /// caller who just missed it hears `Expired` rather than `NotFound`.
    public static let expiredGrace: UInt64 = 2_000_000

    /// The daemon's housekeeping, every `period` of the daemon's clock until the task is
    /// cancelled: purges expired activities shortly after they expire, ends a pause whose time
    /// is up, fails day-old continuations, trims the history to its age, and merges the search
    /// index's segments after writes. Expired activities are hidden from every call at once;
    /// purging reclaims their space and announces them. With nothing written, each round is one
    /// indexed read.
    public func runHousekeeping(period: Duration = .seconds(1)) async {
        let integrityChecked = Atomic(false)
        await clock.repeating(every: period, next: { self.nextDeadline() }) {
            if !integrityChecked.load(ordering: .relaxed), self.store.hasBeenIdle(for: Self.idleBeforeTruncatingWAL) {
                integrityChecked.store(true, ordering: .relaxed)
                await self.checkIntegrity()
                await self.releaseIdleMemory()
            }
            await self.housekeepingRound()
        }
    }

    /// The next time housekeeping has something to do, for a clock that keeps exact time
    /// (`ManualClock`; `SystemClock` keeps to the period): an expired activity's purge, the end
    /// of a pause, a continuation's day running out, the oldest past activity aging out.
    func nextDeadline() -> UInt64? {
        let purge = (try? store.nextExpiry())?.map { $0 + Self.expiredGrace }
        let pauseEnds = paused.until.flatMap { $0 == 0 ? nil : $0 }
        let continuationFails = (try? store.oldestContinuationRequest())?.map { $0 + Store.continuationLifetime + 1 }
        let historyAges = try? store.historyAgesOut()
        return [purge, pauseEnds, continuationFails, historyAges ?? nil, clipboardState.nextExpiry].compactMap { $0 }.min()
    }

    /// One round of housekeeping, at the clock's time.
    func housekeepingRound() async {
        if let next = try? store.nextExpiry(), next + Self.expiredGrace <= clock.now() {
            await purgeExpired()
        }
        if paused.hasEnded(at: clock.now()) { await privacy.resumeRecording() }
        clipboard.expire()
        await continuations.failOldContinuations()
        do {
            if try await store.tidy(truncatingWALAfter: Self.idleBeforeTruncatingWAL) { await releaseIdleMemory() }
        } catch {
            log.error("housekeeping failed: \(error)")
        }
    }

    /// Hands back to the kernel what batond no longer needs once it is idle — once after
    /// start-up, then after each stretch of writes: the connections' page caches, then every
    /// page malloc keeps free. About 0.3 MB of an idle batond's 20 (Benchmarks/README, "Idle memory").
    func releaseIdleMemory() async {
        do {
            try await store.releaseCaches()
        } catch {
            log.debug("releasing the page caches: \(error)")
        }
        malloc_trim(0)
    }

    /// The full check of the database file that start-up leaves out (`Quarantine`), once,
    /// on a thread of its own: it reads the whole file.
    func checkIntegrity() async {
        do {
            if let found = try await OwnThread.run({ [store] in try store.checkIntegrity() }) {
                log.error("""
                    the database \(store.path) is damaged (\(found)); batond writes nothing more into it and moves it aside \
                    at its next start (systemctl --user restart batond). baton doctor says more.
                    """)
            } else {
                log.debug("integrity check of \(store.path): ok")
            }
        } catch {
            log.error("checking the database \(store.path): \(error)")
        }
    }

    /// Deletes expired activities and announces them; returns how many went.
    @discardableResult
    public func purgeExpired() async -> Int {
        do {
            let purged = try await store.writing { try $0.purgeExpired(now: $0.now - Self.expiredGrace) }
            announceRemoved(purged)
            if !purged.isEmpty { log.debug("purged \(purged.count) expired activities") }
            return purged.count
        } catch {
            log.error("purging expired activities failed: \(error)")
            return 0
        }
    }

    // MARK: Announcements

    /// `org.baton.Handoff1.Privacy`, over the service's pause.
    var privacy: PrivacyInterface { PrivacyInterface(store: store, paused: paused, clock: clock, log: log, announcements: self) }
}

extension HandoffService: Announcements {
    /// Announces what a write to the activities changed: those that ended, the one advertised
    /// or updated, the scenes whose properties changed.
    func announce(_ outcome: ActivityRepository.Outcome) {
        if !outcome.ended.isEmpty { announceRemoved(outcome.ended) }
        if let advertised = outcome.advertised { signals.advertised(advertised) }
        if let updated = outcome.updated { signals.updated(updated.id, app: updated.appID) }
        for scene in outcome.scenes { scenes.changed(scene) }
    }

    /// Announces activities that ended (`Invalidated` for each), then every scene whose
    /// current activity went with them (`PropertiesChanged` for its `ActivityId`); they are
    /// no longer offered nor kept as updated during a pause.
    func announceRemoved(_ ended: [Ended]) {
        for each in ended { signals.invalidated(each.id, app: each.appID) }
        paused.forgetUpdates(of: ended.map(\.id))
        notices.withdraw(of: ended.map(\.id))
        for scene in ended.flatMap(\.scenes) { scenes.changed(scene) }
    }
}
