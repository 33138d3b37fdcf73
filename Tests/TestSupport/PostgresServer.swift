import Foundation
import Glibc

/// A PostgreSQL server of one test's own: a fresh cluster in a temporary directory, on a
/// free loopback port, never the machine's own cluster. Its superuser `postgres` connects
/// through the Unix socket in `directory` without a password; everyone else by TCP with
/// a password (SCRAM), as devices would.
///
/// PostgreSQL refuses to run as root, so when the tests run as root the cluster belongs to
/// the `postgres` user that Debian's package creates. `close()` ends it at once, for `defer`.
public final class PostgresServer: @unchecked Sendable {
    /// The cluster, its socket and its log.
    public let directory: URL
    public private(set) var port: Int
    private let bin: String
    private var data: String { directory.appendingPathComponent("data").path }
    public var logPath: String { directory.appendingPathComponent("server.log").path }

    /// With TLS, the server's self-signed certificate for 127.0.0.1 (clients trust it by this file).
    public var certificatePath: String { directory.appendingPathComponent("server.crt").path }
    private let tls: Bool

    /// Makes and starts the cluster; throws naming the package when PostgreSQL is missing. With
    /// `tls`, the server also speaks TLS with a self-signed certificate (`certificatePath`).
    public init(tls: Bool = false) async throws {
        self.tls = tls
        guard let bin = Self.binaries() else {
            throw TestSupportError("PostgreSQL's server is not installed (apt-get install postgresql)")
        }
        self.bin = bin
        directory = try TemporaryDirectory.make(prefix: "baton-pg")
        port = try Self.freePort()
        if geteuid() == 0 {
            guard let owner = getpwnam("postgres") else {
                throw TestSupportError("no postgres user to run the test server as (apt-get install postgresql)")
            }
            guard chown(directory.path, owner.pointee.pw_uid, owner.pointee.pw_gid) == 0 else {
                throw TestSupportError("chown \(directory.path) failed: errno \(errno)")
            }
        }
        try await asOwner("initdb", ["-D", data, "-U", "postgres", "-E", "UTF8", "--no-sync",
                                     "--auth-local=trust", "--auth-host=scram-sha-256"])
        if tls {
            let key = directory.appendingPathComponent("server.key").path
            try await asOwner("/usr/bin/openssl", [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", certificatePath,
            ])
        }
        // Another test's server may take the same port between the check and the bind.
        for attempt in 1...3 {
            do {
                try await start()
                break
            } catch let error as TestSupportError where attempt < 3 && error.description.contains("Address already in use") {
                try? FileManager.default.removeItem(atPath: logPath)
                port = try Self.freePort()
            }
        }
    }

    /// Starts the cluster (again) and waits until it accepts connections.
    public func start() async throws {
        // fsync off: the tests stop the server cleanly or not at all; its durability is PostgreSQL's business.
        // The least WAL (no replicas, no full pages after a checkpoint): a CREATE DATABASE from a
        // template took 226–280 ms of the machine's CPU with the defaults, 54 ms so (psql's 33 included).
        var options = "-k \(directory.path) -c listen_addresses=127.0.0.1 -p \(port) -c fsync=off -c max_connections=300"
            + " -c wal_level=minimal -c max_wal_senders=0 -c full_page_writes=off"
        if tls { options += " -c ssl=on -c ssl_cert_file=\(certificatePath) -c ssl_key_file=\(directory.path)/server.key" }
        try await asOwner("pg_ctl", ["-D", data, "-o", options, "-l", logPath, "-w", "-t", "60", "start"])
    }

    /// Stops the cluster cleanly (connected clients are disconnected).
    public func stop() async throws {
        try await asOwner("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"])
    }

    /// Ends the server at once (SIGQUIT: immediate shutdown) and removes its files.
    public func close() {
        if let pid = postmasterPID() {
            kill(pid, SIGQUIT)
            // The postmaster takes its children down and exits; its files go once it has.
            for _ in 0..<500 where kill(pid, 0) == 0 { usleep(10_000) }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Makes the server end, and its files go, when the test process does, however it ends (a
    /// crash, SIGKILL at a deadline): a watcher started now waits for the end of a socket whose
    /// other end only this process holds, then does what `close()` does. For a server shared by the
    /// tests of one process, which no test may close.
    public func endWithThisProcess() throws {
        guard let pid = postmasterPID() else { throw TestSupportError("no postmaster.pid in \(data)") }
        var ends: [Int32] = [0, 0]
        // Close-on-exec from the start (Glibc's module has no pipe2): no other child inherits
        // this process's end and keeps the watcher waiting.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw TestSupportError("socketpair failed: errno \(errno)")
        }
        defer { Glibc.close(ends[0]) }
        _ = try Subprocess("/bin/sh", ["-c", """
            read -r _; kill -QUIT "$1"; while kill -0 "$1" 2>/dev/null; do sleep 0.1; done; rm -rf "$2"
            """, "sh", String(pid), directory.path], stdin: ends[0], ownGroup: true)
        // ends[1] stays open, unused, for as long as this process lives.
    }

    private func postmasterPID() -> pid_t? {
        guard let pidFile = try? String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8),
              let line = pidFile.split(separator: "\n").first, let pid = pid_t(line), pid > 0 else { return nil }
        return pid
    }

    /// Runs SQL as the superuser in `database` (psql, stopping at the first error); returns what it printed.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres", environment: [String: String] = [:]) async throws -> String {
        let result = try await Executables.run(
            "psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", directory.path, "-p", String(port),
                     "-U", "postgres", "-d", database],
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 }, stdin: sql)
        guard result.status == 0 else { throw TestSupportError("psql failed: \(result)") }
        return result.stdout
    }

    /// The environment under which `psql` and `scripts/sync-server-setup` reach this server as its superuser.
    public func psqlEnvironment(database: String) -> [String: String] {
        ["PGHOST": directory.path, "PGPORT": String(port), "PGUSER": "postgres", "PGDATABASE": database,
         "SYNC_HOST": "127.0.0.1"]
    }

    private func asOwner(_ tool: String, _ arguments: [String]) async throws {
        let executable = tool.hasPrefix("/") ? tool : bin + "/" + tool
        let result = geteuid() == 0
            ? try await Executables.run("runuser", ["-u", "postgres", "--", executable] + arguments, timeout: .seconds(90))
            : try await Executables.run(executable, arguments, timeout: .seconds(90))
        guard result.status == 0 else {
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            throw TestSupportError("\(tool) failed: \(result)\nserver log:\n\(log)")
        }
    }

    /// The newest installed server's bin directory (Debian keeps each major version apart).
    private static func binaries() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return versions.reversed().map { "\(root)/\($0)/bin" }
            .first { FileManager.default.isExecutableFile(atPath: $0 + "/initdb") }
    }

    /// A loopback port nobody listens on now, below the kernel's range of ephemeral ports: a
    /// port the kernel picks (bind to port 0) comes from that range, from which every client
    /// connection also takes its own port, and one of the suite's many connections took such a
    /// port before the server bound it ("Address already in use", twice in four full runs).
    public static func freePort() throws -> Int {
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
            .split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        let ephemeral = range?.first ?? 32_768
        let candidates = ephemeral > 12_000 ? 10_000..<ephemeral : 1_024..<max(ephemeral, 1_025)
        for _ in 0..<100 {
            let port = Int.random(in: candidates)
            if try isFree(port) { return port }
        }
        throw TestSupportError("no free loopback port below \(ephemeral) after 100 tries")
    }

    /// Whether nothing holds `port` on 127.0.0.1 now (a bind to it succeeds).
    private static func isFree(_ port: Int) throws -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket failed: errno \(errno)") }
        defer { Glibc.close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
