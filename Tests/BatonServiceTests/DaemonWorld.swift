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
    let state: URL
    var database: String { state.appendingPathComponent("baton/baton.sqlite").path }
    private(set) var daemon: Subprocess?
    let logPath: String
    var extraArguments: [String] = []

    init(allowOtherUsers: Bool = false) throws {
        bus = try PrivateBus(allowOtherUsers: allowOtherUsers)
        client = try bus.connect()
        state = bus.directory.appendingPathComponent("state")
        logPath = bus.directory.appendingPathComponent("batond.log").path
    }

    /// Starts batond and waits until it owns its name.
    func startDaemon(_ arguments: [String] = []) async throws {
        let log = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        defer { close(log) }
        daemon = try Subprocess(
            try Executables.built("batond"), ["--database", database, "--verbose"] + extraArguments + arguments,
            environment: bus.environment, stderr: log)
        try await client.waitForName("org.baton.Handoff1", timeout: .seconds(15))
    }

    /// Stops batond with `signal` and returns its exit status.
    @discardableResult
    func stopDaemon(_ signal: Int32 = SIGTERM) async -> Int32? {
        guard let daemon else { return nil }
        daemon.kill(signal)
        self.daemon = nil
        return await daemon.wait()
    }

    var daemonLog: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func stop() async {
        await stopDaemon(SIGKILL)
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
