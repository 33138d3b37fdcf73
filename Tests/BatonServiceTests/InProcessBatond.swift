import BatonCore
import BatonService
import Logging
import TestSupport

/// batond as `buildDaemon` builds it, run in this test process on `world`'s bus (a private
/// `dbus-daemon`, real SQLite, the database a `RunningBatond` would use). A test about time
/// passes a `ManualClock` it holds: `advance(by:)` returns once what fell due has run. Tests
/// about the process itself (signals, `kill -9`, its log, the command line's flags) start
/// `batond`.
final class InProcessBatond: Sendable {
    let daemon: BuiltDaemon
    private let running: Task<Void, any Error>

    /// Builds and starts it; returns once it owns its name. `world.close()` stops it.
    init(on world: BatonWorld, clock: any DaemonClock = SystemClock(), _ adjust: (inout DaemonOptions) -> Void = { _ in }) async throws {
        var options = DaemonOptions()
        options.database = RunningBatond.database(on: world.bus)
        options.bus = .address(world.bus.address)
        options.clock = clock
        options.stopsOnSignals = false
        adjust(&options)
        let daemon = try buildDaemon(options, environment: world.bus.environment, logger: Logger(label: "batond") { _ in SwiftLogNoOpLogHandler() })
        self.daemon = daemon
        let running = Task { try await daemon.run() }
        self.running = running
        // Closing the world closes the bus, which ends the daemon; stopped first, it ends cleanly.
        world.onClose { running.cancel() }
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

extension BatonWorld {
    /// A world with batond running in this process (`InProcessBatond`) and owning its name.
    static func startedInProcess(_ adjust: (inout DaemonOptions) -> Void = { _ in }) async throws -> BatonWorld {
        let world = try BatonWorld()
        do {
            _ = try await InProcessBatond(on: world, adjust)
        } catch {
            world.close()
            throw error
        }
        return world
    }
}
