import BatonCore
import BatonService
import Logging
import TestSupport

/// batond as `buildDaemon` builds it, run in this test process on `world`'s bus (a private
/// `dbus-daemon`, real SQLite, the database a `RunningBatond` would use), on a clock the test
/// holds: `clock.advance(by:)` returns once what fell due has run. For tests about time; those
/// about the process itself (signals, `kill -9`, its log, the CLI's flags) start `batond`.
final class InProcessBatond: Sendable {
    let daemon: BuiltDaemon
    let clock: ManualClock
    private let running: Task<Void, any Error>

    /// Builds and starts it; returns once it owns its name.
    init(on world: BatonWorld, clock: ManualClock = ManualClock(), _ adjust: (inout DaemonOptions) -> Void = { _ in }) async throws {
        var options = DaemonOptions()
        options.database = RunningBatond.database(on: world.bus)
        options.bus = .address(world.bus.address)
        options.clock = clock
        adjust(&options)
        let daemon = try buildDaemon(options, environment: world.bus.environment, logger: Logger(label: "batond") { _ in SwiftLogNoOpLogHandler() })
        self.daemon = daemon
        self.clock = clock
        running = Task { try await daemon.run() }
        do {
            try await world.client.waitForName("org.baton.Handoff1", timeout: .seconds(15))
        } catch {
            running.cancel()
            throw error
        }
    }

    /// Stops it as SIGTERM does (every call taken is answered) and waits until the store closed.
    func stop() async throws {
        await daemon.group.triggerGracefulShutdown()
        try await running.value
    }
}
