import BatonCore
import BatonStore
import BatonSync
import DBus
import Glibc
import Logging
import ServiceLifecycle

/// Everything `batond` needs to run, as its command line sets it.
public struct DaemonOptions: Sendable {
    /// The database file; nil for `$XDG_STATE_HOME/baton/baton.sqlite`.
    public var database: String?
    /// The bus; `.session` unless given.
    public var bus: BusAddress = .session
    public var verbose = false
    /// How long `Continue` waits for an app's handler.
    public var handlerTimeout: Duration = .seconds(10)
    /// How often housekeeping runs: the expiry check (expired activities are hidden at once
    /// regardless) and merging the search index.
    public var purgePeriod: Duration = .seconds(1)
    public var limits = Limits()
    /// Calls one caller may have in flight; beyond, `LimitsExceeded`.
    public var callsPerCaller = 256
    /// How often sync catches up with the other devices' logs when nothing woke it.
    public var syncCatchUpPeriod: Duration = .seconds(30)
    /// Where installed apps declare their activity types (`DeclaredTypes`); nil for the XDG
    /// data directories of the environment.
    public var typeDirectories: [String]?
    /// Runs batond on a `ManualClock` and exports `org.baton.Handoff1.Testing`, through which
    /// tests move that clock instead of sleeping. Never for users: anyone on the bus could then
    /// move batond's time, and without them it stands still.
    public var testClock = false
    /// The daemon's clock when a test built it in process; nil for the system's (or, with
    /// `testClock`, a `ManualClock` of its own). A `ManualClock` here also exports Testing.
    public var clock: (any DaemonClock)?
    /// Whether SIGTERM and SIGINT stop the daemon gracefully: batond's; not a daemon a test
    /// builds in its own process, whose signals are the test runner's.
    public var stopsOnSignals = true

    public init() {}
}

/// batond, built and ready to run: its services in one `ServiceGroup` that stops them
/// gracefully on SIGTERM or SIGINT (the bus first, so every call taken is answered, then
/// housekeeping), and the store they share, to close once the group has returned.
public struct BuiltDaemon: Sendable {
    public let group: ServiceGroup
    public let store: Store
    public let service: HandoffService

    /// Runs the services until a stop signal or the loss of the bus, then closes the store.
    public func run() async throws {
        defer { try? store.close() }
        try await group.run()
    }
}

/// Why batond could not start, as a sentence for its log.
public struct DaemonStartError: Error, CustomStringConvertible {
    public let description: String
}

/// Opens the database (moving aside a damaged one) and the bus connection, and assembles
/// the services; nothing is served until `run()`. `batond` runs it; tests can drive it in
/// process.
public func buildDaemon(_ options: DaemonOptions, environment: [String: String], logger: Logger) throws -> BuiltDaemon {
    // A write to a descriptor a caller passed (ExportTo) whose reader went away must fail
    // with EPIPE, not end batond.
    signal(SIGPIPE, SIG_IGN)
    let store: Store
    do {
        guard let path = options.database ?? Store.defaultPath(environment: environment) else {
            throw DaemonStartError(description: "neither XDG_STATE_HOME nor HOME is set; pass --database PATH")
        }
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            let directory = String(path[..<slash])
            if options.database == nil || access(directory, F_OK) != 0 {
                // The default location (or a missing one) is ours to create and to keep private.
                try Store.prepareDirectory(directory)
            } else {
                try Store.checkWritableOnlyByOwner(directory)
            }
        }
        let moved: Quarantine.Moved?
        (store, moved) = try Quarantine.openStore(
            path: path, limits: options.limits, clock: options.clock ?? (options.testClock ? ManualClock() : SystemClock()))
        if let moved { logger.warning("\(moved.advice)") }
    } catch let error as DaemonStartError {
        throw error
    } catch {
        throw DaemonStartError(description: "\(error)")
    }

    let connection: Connection
    do {
        connection = try Connection(options.bus) { logger.error("\($0)") }
    } catch {
        try? store.close()
        throw DaemonStartError(description: "cannot connect to the session bus: \(error.message)")
    }
    let service = HandoffService(
        connection: connection, store: store, log: logger, handlerTimeout: options.handlerTimeout, callsPerCaller: options.callsPerCaller,
        applicationDirectories: XDGData.applicationDirectories(environment: environment),
        recentlyUsedPath: XDGData.recentlyUsedPath(environment: environment),
        shellsDirectory: Terminals.shellsDirectory(environment: environment), home: environment["HOME"])
    let bus = BusService(
        service: service, connection: connection, systemd: SystemdNotifier(environment: environment),
        typeDirectories: options.typeDirectories ?? DeclaredTypes.directories(environment: environment), logger: logger)
    let housekeeping = HousekeepingService(service: service, period: options.purgePeriod)
    let sync: SyncEngine
    do {
        sync = try service.attachSync(configPath: SyncConfig.path(besideDatabase: store.path), catchUpPeriod: options.syncCatchUpPeriod)
    } catch {
        try? store.close()
        throw DaemonStartError(description: "\(error)")
    }
    var configuration = ServiceGroupConfiguration(
        // Stopped in reverse order: the bus first (it drains), then housekeeping, then sync.
        services: [
            .init(service: SyncService(engine: sync)),
            .init(service: housekeeping),
            // The bus going away ends the daemon cleanly, as a stop signal does.
            .init(service: bus, successTerminationBehavior: .gracefullyShutdownGroup),
        ],
        gracefulShutdownSignals: options.stopsOnSignals ? [.sigterm, .sigint] : [],
        logger: logger)
    configuration.maximumGracefulShutdownDuration = .seconds(15)
    return BuiltDaemon(group: ServiceGroup(configuration: configuration), store: store, service: service)
}

/// `org.baton.Handoff1` on the bus, from owning the name until a stop request (or the loss
/// of the bus), then draining: every call taken gets its reply before the connection closes.
struct BusService: Service {
    let service: HandoffService
    let connection: Connection
    let systemd: SystemdNotifier
    let typeDirectories: [String]
    let logger: Logger

    func run() async throws {
        try await service.registerDeclaredTypes(from: typeDirectories)
        try await service.start()
        // Continuations that wait for their app are delivered when it appears; not while draining.
        let redelivery = service.background.start { await service.continuations.runRedelivery() }
        let notices = service.background.start { await service.offers.run() }
        service.followSourcesThatAreOn()
        // Pinged from the bus thread itself: if it is stuck, the pings stop and systemd restarts batond.
        let watchdog = systemd.watchdogInterval.map { connection.repeatOnBusThread(every: $0) { systemd.watchdog() } }
        defer { watchdog?.cancel() }
        systemd.ready(status: "serving \(HandoffService.busName) from \(service.store.path)")

        await withTaskGroup(of: Bool.self) { waiting in
            waiting.addTask { (try? await gracefulShutdown()) != nil }
            waiting.addTask {
                await connection.waitUntilClosed()
                return false
            }
            let stopRequested = await waiting.next() == true
            redelivery?.cancel()
            notices?.cancel()
            if stopRequested {
                systemd.stopping(status: "stopping; finishing calls in flight")
                logger.info("stopping; finishing calls in flight")
                if !(await service.stop()) { logger.warning("calls were still in flight after 5 s; stopping without their replies") }
            } else {
                logger.warning("the bus connection closed; stopping")
            }
            // Deliveries and notices still under way end here, before housekeeping, sync and the store.
            await service.background.finish()
            connection.close()
            waiting.cancelAll()
        }
        await connection.waitUntilClosed()
        logger.info("stopped")
    }
}

/// Purges expired activities, merges the search index, forgets old request ids and
/// truncates the WAL when idle, every `period`, until the group stops.
struct HousekeepingService: Service {
    let service: HandoffService
    let period: Duration

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await service.runHousekeeping(period: period)
        }
    }
}

/// The daemon's life, for `batond`: build, run, exit status.
public enum Daemon {
    /// Runs until a signal or the loss of the bus; returns the exit status.
    public static func run(_ options: DaemonOptions, environment: [String: String]) async -> Int32 {
        let logger = Logger.batond(verbose: options.verbose)
        do {
            try await buildDaemon(options, environment: environment, logger: logger).run()
            return 0
        } catch {
            logger.error("\(error)")
            return 1
        }
    }
}
