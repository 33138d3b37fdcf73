import Foundation

/// A test server set up by `scripts/sync-server-setup`, as the guide tells an administrator to:
/// a database of the test's own, on a cluster of its own or on the one the test process shares.
public struct SyncServer: Sendable {
    public let server: PostgresServer
    /// The database devices log in to.
    public let database: String

    /// Sets up the database `baton_sync` on `server`, a cluster of the test's own (one it stops,
    /// starts or gives TLS).
    public init(_ server: PostgresServer) async throws {
        try await self.init(server, database: "baton_sync")
        try await setup(["init"])
    }

    fileprivate init(_ server: PostgresServer, database: String, copying template: String? = nil) async throws {
        self.server = server
        self.database = database
        try await server.psql("CREATE DATABASE \(database)" + (template.map { " TEMPLATE \($0) STRATEGY file_copy" } ?? ""))
    }

    /// A database of the test's own on the cluster the test process shares, copied from one the
    /// script set up: making a cluster cost a second of CPU (initdb), paid once, not by each of
    /// the sync tests (a quarter of the parallel suites' CPU went to PostgreSQL).
    public static func fresh() async throws -> SyncServer {
        let (server, number) = try await SharedCluster.instance.next()
        return try await SyncServer(server, database: "baton_sync_\(number)", copying: SharedCluster.template)
    }

    /// Runs SQL as the superuser in this server's database; returns what it printed.
    @discardableResult
    public func psql(_ sql: String) async throws -> String {
        try await server.psql(sql, database: database)
    }

    @discardableResult
    public func setup(_ arguments: [String]) async throws -> String {
        let result = try await Executables.run(
            Repository.root.appendingPathComponent("scripts/sync-server-setup").path, arguments,
            environment: ProcessInfo.processInfo.environment.merging(server.psqlEnvironment(database: database)) { $1 })
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

/// The PostgreSQL cluster the tests of one process share, with a database the script set up to
/// copy: made by the first test that asks, ended with the process.
private actor SharedCluster {
    static let instance = SharedCluster()
    static let template = "baton_sync_template"
    private var made: Task<PostgresServer, any Error>?
    private var count = 0

    /// The cluster, and a number no other database on it has.
    func next() async throws -> (PostgresServer, Int) {
        let made = self.made ?? Task {
            let server = try await PostgresServer()
            do {
                try server.endWithThisProcess()
                try await SyncServer(server, database: Self.template).setup(["init"])
            } catch {
                server.close()
                throw error
            }
            return server
        }
        self.made = made
        count += 1
        let number = count  // before the await: another caller may count meanwhile
        return (try await made.value, number)
    }
}
