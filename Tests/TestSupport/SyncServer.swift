import Foundation

/// A test server set up by `scripts/sync-server-setup`, as the README tells an administrator to.
public struct SyncServer {
    public static let database = "baton_sync"
    public let server: PostgresServer

    public init(_ server: PostgresServer) async throws {
        self.server = server
        try await server.psql("CREATE DATABASE \(Self.database)")
        try await setup(["init"])
    }

    @discardableResult
    public func setup(_ arguments: [String]) async throws -> String {
        let result = try await Executables.run(
            Repository.root.appendingPathComponent("scripts/sync-server-setup").path, arguments,
            environment: ProcessInfo.processInfo.environment.merging(server.psqlEnvironment(database: Self.database)) { $1 })
        guard result.status == 0 else { throw TestSupportError("sync-server-setup \(arguments) failed: \(result)") }
        return result.stdout
    }

    /// A login for a new device of `user`: its sync URL, as add-device prints it.
    public func addDevice(user: String) async throws -> DeviceLogin {
        let url = try await setup(["add-device", user]).trimmingCharacters(in: .whitespacesAndNewlines)
        guard url.hasPrefix("postgres://") else { throw TestSupportError("add-device printed \(url)") }
        return DeviceLogin(url: url)
    }
}

/// `psql` logged in with a device's sync URL.
public struct DeviceLogin {
    public let url: String

    @discardableResult
    public func run(_ sql: String) async throws -> String {
        let result = try await Executables.run("psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
        guard result.status == 0 else { throw TestSupportError("psql as a device failed: \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
