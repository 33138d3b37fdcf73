import DBus
import Foundation
import Glibc

/// The built `batond` running on a private bus with a database of its own.
public final class RunningBatond: @unchecked Sendable {
    public let process: Subprocess
    public let database: String

    /// Starts batond on `bus` and waits until it owns org.baton.Handoff1.
    public init(on bus: PrivateBus, arguments: [String] = []) async throws {
        database = bus.directory.appendingPathComponent("state/baton/baton.sqlite").path
        let log = open(bus.directory.appendingPathComponent("batond.log").path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        defer { close(log) }
        process = try Subprocess(try Executables.built("batond"), ["--database", database, "--verbose"] + arguments,
                                 environment: bus.environment, stderr: log)
        let watcher = try bus.connect()
        defer { watcher.close() }
        try await watcher.waitForName("org.baton.Handoff1", timeout: .seconds(15))
    }

    /// Stops batond with `signal` (SIGTERM: a clean stop) and returns its exit status.
    @discardableResult
    public func stop(_ signal: Int32 = SIGTERM) async -> Int32 {
        process.kill(signal)
        return await process.wait()
    }
}
