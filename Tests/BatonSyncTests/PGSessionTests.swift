@testable import BatonSync
import Synchronization
import Testing
import TestSupport

/// The connection to the sync server through libpq on a thread of its own (`PGSession`), against
/// a real PostgreSQL 15 whose logins authenticate with SCRAM-SHA-256.
struct PGSessionTests {
    static func session(_ sync: SyncServer, timeout: Duration = .seconds(10)) async throws -> PGSession {
        let login = try await sync.addDevice(user: "ana")
        return try await PGSession.connect(ServerSession.parameters(try ServerAddress(login.url + "?sslmode=disable")), timeout: timeout)
    }

    @Test(.timeLimit(.minutes(1))) func valuesCrossInTheBinaryFormatWhole() async throws {
        let sync = try await SyncServer.fresh()
        let session = try await Self.session(sync)
        defer { session.close() }
        let big = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let values: [PGValue] = [.int64(-5_000_000_000), .int32(-7), .bool(true), .bytea([]), .bytea(big), .text("Agnès \u{1F985}"), .text("")]
        let row = try #require(try await session.query("SELECT $1::bigint, $2::integer, $3::boolean, $4::bytea, $5::bytea, $6::text, $7::text, NULL::text", values).first)
        #expect(Array(row.prefix(7)) == values)
        #expect(row[7] == .null)
        #expect(try await session.query("SELECT 1 WHERE false").isEmpty)
    }

    /// A refused statement says why, with its SQLSTATE; the connection goes on.
    @Test(.timeLimit(.minutes(1))) func aRefusedStatementNamesItsSQLStateAndTheSessionGoesOn() async throws {
        let sync = try await SyncServer.fresh()
        let session = try await Self.session(sync)
        defer { session.close() }
        let transport = ServerSession(session: session)
        let user = try await transport.member(role: "")
        try await transport.addUserKey(user: user, epoch: 0, check: [1, 2, 3])
        await #expect(throws: KeyExists.self) { try await transport.addUserKey(user: user, epoch: 0, check: [4]) }
        let error = await #expect(throws: PGError.self) { try await session.query("SELECT * FROM no_such_table") }
        #expect(error?.sqlState == "42P01")
        #expect(try await transport.userKeyCheck(user: user, epoch: 0) == [1, 2, 3])
        #expect(!session.isClosed)
    }

    /// LISTEN with no thread parked in libpq: a NOTIFY from another connection reaches the listener.
    @Test(.timeLimit(.minutes(1))) func aNotificationFromAnotherConnectionIsHeard() async throws {
        let sync = try await SyncServer.fresh()
        let session = try await Self.session(sync)
        defer { session.close() }
        let heard = Atomic(0)
        let transport = ServerSession(session: session)
        try await transport.listening(on: "baton_test", notified: { heard.add(1, ordering: .relaxed) }) {
            _ = try await sync.psql("NOTIFY baton_test")
            try await eventually("the notification is heard") { heard.load(ordering: .relaxed) >= 1 }
        }
    }

    /// A statement the server does not answer in time ends the connection: the caller hears at
    /// the deadline, statements queued behind it fail too, and the listener hears the end.
    @Test(.timeLimit(.minutes(1))) func aStatementPastItsDeadlineEndsTheConnection() async throws {
        let sync = try await SyncServer.fresh()
        let session = try await Self.session(sync, timeout: .seconds(2))
        let ended = Atomic(false)
        session.onNotification { ended.store(true, ordering: .relaxed) }
        let slow = Task { try await session.query("SELECT pg_sleep(30)") }
        // Queued only once the slow one runs on the server.
        try await eventually("the slow statement runs") {
            (try? await sync.psql("SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'")) == "1\n"
        }
        let behind = Task { try await session.query("SELECT 1") }
        let slowError = await #expect(throws: PGError.self) { try await slow.value }
        #expect(slowError?.message.contains("did not answer within") == true)
        await #expect(throws: PGError.self) { try await behind.value }
        #expect(session.isClosed)
        let listenerHeard = ended.load(ordering: .relaxed)
        #expect(listenerHeard)
        await #expect(throws: PGError.self) { try await session.query("SELECT 1") }
    }

    @Test(.timeLimit(.minutes(1))) func nobodyListeningIsAClearError() async throws {
        let port = try PostgresServer.freePort()
        let address = try ServerAddress("postgres://nobody:secret@127.0.0.1:\(port)/baton?sslmode=disable")
        let error = await #expect(throws: PGError.self) { try await PGSession.connect(ServerSession.parameters(address), timeout: .seconds(5)) }
        #expect(error?.message.contains("Connection refused") == true, "\(String(describing: error))")
    }

    /// libpq reads whatever a caller leaves out from the environment and the home; every
    /// setting that changed a connection here is given.
    @Test func everySettingLibpqWouldLookUpIsGiven() throws {
        let given = Dictionary(uniqueKeysWithValues: ServerSession.parameters(try ServerAddress("postgres://r:p@h:5433/d")).map { ($0.0, $0.1) })
        for keyword in ["host", "port", "user", "password", "dbname", "sslmode", "sslrootcert", "sslcert", "sslkey", "passfile", "gssencmode"] {
            #expect(given[keyword] != nil, "\(keyword) is left to libpq's environment")
        }
        #expect(given["sslmode"] == "prefer")
        let checked = Dictionary(uniqueKeysWithValues: ServerSession.parameters(try ServerAddress("postgres://r:p@h/d?sslmode=verify-full")).map { ($0.0, $0.1) })
        #expect(checked["sslrootcert"] == "/etc/ssl/certs/ca-certificates.crt")
    }

    /// batond opens libpq (and the 23 libraries it needs, about 5 MB of an idle batond's memory)
    /// only once it syncs through PostgreSQL: not at start, not for a synced folder.
    @Test(.timeLimit(.minutes(1))) func libpqIsOpenedOnlyWhenSyncUsesPostgreSQL() async throws {
        // Read by cat: /proc's files say they are empty, and a read sized by that stops early.
        func mapsLibpq(_ world: BatonWorld) async throws -> Bool {
            let pid = try #require(world.daemon?.process.pid)
            return try await Executables.run("/bin/cat", ["/proc/\(pid)/maps"]).stdout.contains("/libpq.so.5")
        }
        let world = try await BatonWorld.started()
        defer { world.close() }
        #expect(try await !mapsLibpq(world), "a batond that does not sync opened libpq")
        let folder = try TemporaryDirectory.make(prefix: "baton-folder")
        let folderSync = try await world.baton(["sync", "init", folder.path, "--name", "desk"])
        #expect(folderSync.status == 0, "\(folderSync)")
        #expect(try await !mapsLibpq(world), "a batond that syncs through a folder opened libpq")
        _ = try await world.baton(["sync", "leave", "--yes"])

        let sync = try await SyncServer.fresh()
        let initialized = try await world.baton(["sync", "init", try await sync.addDevice(user: "ana").url + "?sslmode=disable", "--name", "desk"])
        #expect(initialized.status == 0, "\(initialized)")
        #expect(try await mapsLibpq(world), "\(initialized)\n\(world.daemonLog)")
    }
}
