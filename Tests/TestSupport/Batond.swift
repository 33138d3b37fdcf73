import DBus
import Foundation
import Glibc

/// The built `batond` running on a private bus with a database of its own.
public final class RunningBatond: @unchecked Sendable {
    public let process: Subprocess
    public let database: String

    /// Starts batond on `bus` and waits until it owns org.baton.Handoff1. With `umask`, batond
    /// runs with that umask (set in a shell that then runs it: the test process's own umask is
    /// shared by every test running at the same time).
    public init(on bus: PrivateBus, arguments: [String] = [], umask: mode_t? = nil, environment extra: [String: String] = [:]) async throws {
        database = Self.database(on: bus)
        let log = open(Self.logPath(on: bus), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        defer { close(log) }
        let command = [try Executables.built("batond"), "--database", database, "--verbose"] + arguments
        if let umask {
            process = try Subprocess("/bin/sh", ["-c", "umask \(String(umask, radix: 8)) && exec \"$0\" \"$@\""] + command,
                                     environment: bus.environment.merging(extra) { $1 }, stderr: log)
        } else {
            process = try Subprocess(command[0], Array(command.dropFirst()), environment: bus.environment.merging(extra) { $1 }, stderr: log)
        }
        let watcher = try bus.connect()
        defer { watcher.close() }
        try await watcher.waitForName("org.baton.Handoff1", timeout: .seconds(15))
    }

    /// The database batond uses on `bus`, stable across restarts.
    public static func database(on bus: PrivateBus) -> String {
        bus.directory.appendingPathComponent("state/baton/baton.sqlite").path
    }

    /// The file batond's stderr is appended to.
    public static func logPath(on bus: PrivateBus) -> String {
        bus.directory.appendingPathComponent("batond.log").path
    }

    /// Stops batond with `signal` (SIGTERM: a clean stop) and returns its exit status.
    @discardableResult
    public func stop(_ signal: Int32 = SIGTERM) async -> Int32 {
        process.kill(signal)
        return await process.wait()
    }
}
