import BatonCore
import BatonStore
import DBus
import Dispatch
import Glibc
import Synchronization

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

    public init() {}
}

/// The daemon's life: open the database, serve the bus, stop cleanly on SIGTERM/SIGINT.
public enum Daemon {
    /// Runs until a signal or the loss of the bus; returns the exit status.
    public static func run(_ options: DaemonOptions, environment: [String: String]) async -> Int32 {
        let log = Log(verbose: options.verbose)
        // Before anything can make us visible: a SIGTERM that arrives once the name is
        // owned must stop us cleanly, not by the default action.
        let stopSignals = SignalWatcher([SIGTERM, SIGINT])
        let store: Store
        do {
            guard let path = options.database ?? Store.defaultPath(environment: environment) else {
                log.error("neither XDG_STATE_HOME nor HOME is set; pass --database PATH")
                return 1
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
            (store, moved) = try Quarantine.openStore(path: path, limits: options.limits)
            if let moved { log.warning(moved.advice) }
        } catch {
            log.error("\(error)")
            return 1
        }

        let connection: Connection
        do {
            connection = try Connection(options.bus) { log.error($0) }
        } catch {
            log.error("cannot connect to the session bus: \(error.message)")
            return 1
        }
        let service = HandoffService(
            connection: connection, store: store, log: log, handlerTimeout: options.handlerTimeout, callsPerCaller: options.callsPerCaller)
        do {
            try await service.start()
        } catch {
            log.error("cannot start: \(error)")
            connection.close()
            return 1
        }

        let systemd = SystemdNotifier(environment: environment)
        // Pinged from the bus thread itself: if it is stuck, the pings stop and systemd restarts batond.
        let watchdog = systemd.watchdogInterval.map { connection.repeatOnBusThread(every: $0) { systemd.watchdog() } }
        systemd.ready(status: "serving \(HandoffService.busName) from \(store.path)")
        let purger = Task { await service.runHousekeeping(period: options.purgePeriod) }
        let signal = await stopSignals.first(orClosing: connection)
        purger.cancel()
        if let signal {
            systemd.stopping(status: "received signal \(signal); finishing calls in flight")
            log.info("received signal \(signal); finishing calls in flight")
            if !(await service.stop()) { log.warning("calls were still in flight after 5 s; stopping without their replies") }
        } else {
            log.warning("the bus connection closed; stopping")
        }
        watchdog?.cancel()
        connection.close()
        await connection.waitUntilClosed()
        do {
            try store.close()
        } catch {
            log.error("closing the database: \(error)")
        }
        log.info("stopped")
        return 0
    }

}

/// Turns stop signals into an awaitable event, from the moment it is created.
final class SignalWatcher: Sendable {
    private let stream: AsyncStream<Int32?>
    private let continuation: AsyncStream<Int32?>.Continuation
    private let sources: Mutex<[any DispatchSourceSignal]>

    init(_ signals: [Int32]) {
        (stream, continuation) = AsyncStream<Int32?>.makeStream()
        var sources: [any DispatchSourceSignal] = []
        for number in signals {
            Glibc.signal(number, SIG_IGN)  // Dispatch sees it; the default action would kill us first.
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [continuation] in continuation.yield(number) }
            source.resume()
            sources.append(source)
        }
        self.sources = Mutex(sources)
    }

    /// The first signal received, or nil if the connection closes first.
    func first(orClosing connection: Connection) async -> Int32? {
        let watcher = Task { [continuation] in
            await connection.waitUntilClosed()
            continuation.yield(nil)
        }
        var iterator = stream.makeAsyncIterator()
        let first = await iterator.next() ?? nil
        watcher.cancel()
        sources.withLock { sources in
            for source in sources { source.cancel() }
        }
        return first
    }
}
