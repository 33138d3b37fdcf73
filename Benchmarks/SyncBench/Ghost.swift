import BatonCore
import BatonStore
import BatonSync
import Foundation
import Glibc
import Logging
import TestSupport

/// A device of the user's that is no daemon, for the control of phase 2: its records are made by a
/// sync engine in this process, then kept aside on the server, and put back (by one `psql`
/// session of the superuser) in batches as a timed loop goes. Whoever follows the user's logs —
/// B, and the server's trigger and NOTIFY — then works as it does for A's records, while the
/// daemon being timed does no sync work at all.
final class Ghost: Sendable {
    /// The ghost's activities, in the order of its log.
    let ids: [String]
    /// Its records before the first of `ids` (its type's, say): left on the server.
    private let lead: Int
    private let psql: Subprocess
    private let input: Int32

    private init(ids: [String], lead: Int, psql: Subprocess, input: Int32) {
        self.ids = ids
        self.lead = lead
        self.psql = psql
        self.input = input
    }

    /// Makes `count` activities on a new device of `user` joined with `words`, while `proxy`
    /// keeps the partner that must not see them yet away from the server, and sets them aside.
    /// The partner is let back before this returns (not yet online).
    static func made(user: String, words: String, type: String, setup: SyncServer, hiding proxy: TCPProxy, count: Int) async throws -> Ghost {
        let path = try TemporaryDirectory.make(prefix: "baton-ghost").appendingPathComponent("baton.sqlite").path
        let store = try Store(path: path)
        try store.write { try $0.register(ActivityType(type: type, appID: "com.raywenderlich.hawknotes", title: "Character")) }
        var log = Logger(label: "bench.ghost")
        log.logLevel = .error
        let engine = try SyncEngine(store: store, configPath: SyncConfig.path(besideDatabase: path), log: log,
                                    onApplied: { _ in }, onChange: {})
        let loop = Task { await engine.run() }
        defer { loop.cancel() }
        proxy.send("refuse")
        proxy.send("cut")
        defer { proxy.send("accept") }
        try await engine.join(url: try await setup.addDevice(user: user).url, recoveryWords: words, deviceName: "ghost")
        guard let device = engine.settings?.deviceID else { throw TestSupportError("the ghost did not join") }
        var ids: [String] = []
        for index in 0..<count {
            let now = WallClock.nowMicroseconds()
            let activity = Activity(id: Identifier.make(), type: type, appID: "com.raywenderlich.hawknotes", title: "ghost \(index)",
                                    payload: #"{"id":"bench"}"#, createdAt: now, updatedAt: now)
            _ = try await store.writing { try $0.insert(activity) }
            ids.append(activity.id)
        }
        let clock = ContinuousClock(), deadline = clock.now + .seconds(60)
        while try store.outboxCount() > 0 {
            guard clock.now < deadline else { throw TestSupportError("the ghost's outbox did not empty within 60 s") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let lead = try await setup.server.psql("""
            CREATE TABLE bench_ghost AS SELECT * FROM baton.record
                WHERE device_id = '\(device)' AND seq > (SELECT max(seq) - \(count) FROM baton.record WHERE device_id = '\(device)');
            CREATE INDEX ON bench_ghost (seq);
            DELETE FROM baton.record WHERE device_id = '\(device)' AND seq IN (SELECT seq FROM bench_ghost);
            UPDATE baton.log_head SET seq = (SELECT max(seq) FROM baton.record WHERE device_id = '\(device)') WHERE device_id = '\(device)';
            SELECT min(seq) - 1 FROM bench_ghost;
            """, database: setup.database).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let lead = Int(lead) else { throw TestSupportError("setting the ghost's records aside printed '\(lead)'") }

        var pipe: [Int32] = [0, 0]
        guard Glibc.pipe(&pipe) == 0 else { throw TestSupportError("pipe: errno \(errno)") }
        _ = fcntl(pipe[1], F_SETFD, FD_CLOEXEC)
        let null = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { Glibc.close(null) }
        let psql = try Subprocess(
            "/usr/bin/psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1"],
            environment: ProcessInfo.processInfo.environment.merging(setup.server.psqlEnvironment(database: setup.database)) { $1 },
            stdin: pipe[0], stdout: null)
        Glibc.close(pipe[0])
        return Ghost(ids: ids, lead: lead, psql: psql, input: pipe[1])
    }

    /// Puts the records of `ids[range]` back, in one statement (as one batch of a device's).
    func putBack(_ range: Range<Int>) throws {
        guard !range.isEmpty else { return }
        let statement = "INSERT INTO baton.record SELECT * FROM bench_ghost WHERE seq > \(lead + range.lowerBound) AND seq <= \(lead + range.upperBound);\n"
        guard statement.withCString({ write(input, $0, strlen($0)) }) > 0 else { throw TestSupportError("psql is gone: errno \(errno)") }
    }

    func close() {
        Glibc.close(input)
        psql.kill(SIGTERM)
    }
}
