import BatonCore
import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// A private bus with the real `batond` binary on it, its own database, and a client.
final class DaemonWorld: @unchecked Sendable {
    static let type = "com.raywenderlich.hawknotes.staterestore.characterDetail"
    static let app = "com.raywenderlich.hawknotes"
    static let root: ObjectPath = "/org/baton/Handoff1"

    let bus: PrivateBus
    let client: Connection
    private(set) var daemon: RunningBatond?
    /// Where RunningBatond keeps the database and the log, stable across restarts.
    var database: String { bus.directory.appendingPathComponent("state/baton/baton.sqlite").path }
    var logPath: String { bus.directory.appendingPathComponent("batond.log").path }
    var extraArguments: [String] = []

    init(allowOtherUsers: Bool = false) throws {
        bus = try PrivateBus(allowOtherUsers: allowOtherUsers)
        client = try bus.connect()
    }

    /// Starts batond and waits until it owns its name.
    func startDaemon(_ arguments: [String] = []) async throws {
        daemon = try await RunningBatond(on: bus, arguments: extraArguments + arguments)
    }

    /// Stops batond with `signal` and returns its exit status.
    @discardableResult
    func stopDaemon(_ signal: Int32 = SIGTERM) async -> Int32? {
        guard let daemon else { return nil }
        self.daemon = nil
        return await daemon.stop(signal)
    }

    var daemonLog: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Kills batond and the bus at once, for `defer`. (A `Task` started in a `defer` to stop
    /// them may not run before the test process exits: that left one bus daemon running per
    /// test run.)
    func close() {
        daemon?.process.kill(SIGKILL)
        daemon = nil
        client.close()
        bus.stop()
    }

    // MARK: Calls

    func call(_ interface: String, _ member: String, _ arguments: [DBusValue] = [], path: ObjectPath = root) async throws -> [DBusValue] {
        try await client.call("org.baton.Handoff1", path, interface, member, arguments, timeout: .seconds(20))
    }

    func register(handler: String? = nil, requiredKeys: String = "id") async throws {
        var options = ["title": "Character", "required_keys": requiredKeys]
        if let handler { options["handler"] = handler }
        _ = try await call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string(Self.type), .string(Self.app), .stringMap(options),
        ])
    }

    func advertise(_ title: String, payload: String = #"{"id":"a1","name":"Agatha"}"#, options: [String: String] = [:]) async throws -> String {
        let reply = try await call("org.baton.Handoff1.Activities", "Advertise", [
            .string(Self.type), .string(title), .string(payload), .stringMap(options),
        ])
        return try #require(reply.first?.stringValue)
    }

    func activityCount() async throws -> Int {
        try await call("org.baton.Handoff1.Activities", "List", [.stringMap([:])]).first?.arrayValue?.count ?? -1
    }

    func run(_ tool: String, _ arguments: [String]) async throws -> CommandResult {
        try await Executables.run(tool, arguments, environment: bus.environment)
    }
}

/// The `org.baton.Handoff1.Error.*` name of a failure, for assertions.
func errorName(of operation: () async throws -> Any) async -> String? {
    do {
        _ = try await operation()
        return nil
    } catch let error as DBusError {
        return error.name
    } catch {
        return "\(error)"
    }
}
