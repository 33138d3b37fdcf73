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

    /// Sets up sync for `user` on the first daemon (`Init`, named `names[0]`) and joins each
    /// other to it with the recovery words (`Join`), as a user does; `route` turns a device's
    /// URL into the one its daemon is given (through a `TCPProxy`, say). Returns the words.
    @discardableResult
    public func join(_ worlds: [BatonWorld], names: [String], user: String = "ana", route: (BatonWorld, String) -> String = { $1 }) async throws -> String {
        guard let first = worlds.first, names.count == worlds.count else { throw TestSupportError("one name for each daemon") }
        let url = route(first, try await addDevice(user: user).url)
        guard let words = try await first.call("org.baton.Handoff1.Sync", "Init", [.string(url), .stringMap(["device_name": names[0]])])
            .first?.stringValue else { throw TestSupportError("Init gave no recovery words") }
        for (world, name) in zip(worlds, names).dropFirst() {
            let url = route(world, try await addDevice(user: user).url)
            _ = try await world.call("org.baton.Handoff1.Sync", "Join", [.string(url), .string(words), .stringMap(["device_name": name])])
        }
        return words
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
