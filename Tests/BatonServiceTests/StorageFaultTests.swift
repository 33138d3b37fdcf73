import BatonCore
import DBus
import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

/// The disk misbehaving under the real daemon: another program holding the database's
/// write lock, a full file system. Every call gets one named answer in time, reads are
/// answered meanwhile, and batond recovers by itself when the fault goes away.
@Suite(.serialized)
struct StorageFaultTests {
    static let activities = "org.baton.Handoff1.Activities"
    static let scenes = "org.baton.Handoff1.Scenes"
    static let scene = "org.baton.Handoff1.Scene"
    static let unavailable = "org.baton.Handoff1.Error.StorageUnavailable"

    /// Another process holding a lock on the database until it is killed: `BEGIN IMMEDIATE`
    /// (writers wait, readers do not), or with `exclusive` SQLite's exclusive locking mode,
    /// which shuts readers out too and can be taken only while nobody else has the file open.
    final class LockHolder {
        let process: Subprocess

        init(database: String, directory: URL, exclusive: Bool = false) async throws {
            let ready = directory.appendingPathComponent("locked").path
            let python = try Executables.require("/usr/bin/python3", package: "python3")
            process = try Subprocess(python, ["-c", """
                import sqlite3, sys, time
                connection = sqlite3.connect(sys.argv[1], isolation_level=None)
                if sys.argv[3] == "exclusive":
                    connection.execute("PRAGMA locking_mode=EXCLUSIVE")
                    connection.execute("BEGIN EXCLUSIVE")
                    connection.execute("SELECT count(*) FROM sqlite_master").fetchall()
                else:
                    connection.execute("BEGIN IMMEDIATE")
                open(sys.argv[2], "w").close()
                time.sleep(120)
                """, database, ready, exclusive ? "exclusive" : "immediate"])
            try await eventually("the lock holder holds the lock") { access(ready, F_OK) == 0 }
        }

        /// Kills it: the kernel releases its lock with it.
        func release() async {
            process.kill(SIGKILL)
            _ = await process.wait()
        }
    }

    @Test func readsAnswerWhileWritesWaitForALockAndWritesGiveUpInTime() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register(requiredKeys: "")
        let agatha = try await world.advertise("Agatha", options: ["eligible_for_search": "true"])
        let scene = try #require(try await world.call(Self.scenes, "OpenScene", [.string(BatonWorld.app), .stringMap([:])])
            .first?.objectPathValue)
        _ = try await world.call(Self.scene, "Set", [.string("tab"), .variant(.string("b1"))], path: scene)

        let holder = try await LockHolder(database: world.database, directory: world.bus.directory)
        let clock = ContinuousClock()
        let started = clock.now
        let writesDone = Atomic(0)
        // Ten writes of five kinds, sent first on one connection; then reads on the same one.
        let writes = Task {
            try await withThrowingTaskGroup(of: String?.self) { group in
                for index in 0..<2 {
                    group.addTask { await errorName { try await world.advertise("blocked \(index)") } }
                    group.addTask {
                        await errorName { try await world.call(Self.scene, "Set", [.string("k\(index)"), .variant(.int64(1))], path: scene) }
                    }
                    group.addTask {
                        await errorName {
                            try await world.call(Self.activities, "Update", [.string(agatha), .string(#"{"n":\#(index)}"#), .stringMap([:])])
                        }
                    }
                    group.addTask { await errorName { try await world.call(Self.scenes, "OpenScene", [.string(BatonWorld.app), .stringMap([:])]) } }
                    group.addTask {
                        await errorName { try await world.call("org.baton.Handoff1.Registry", "UnregisterActivityType", [.string("com.example.nope")]) }
                    }
                }
                var names: [String?] = []
                for try await name in group {
                    names.append(name)
                    // Only a write that waited for the lock ends the reads' count: unregistering an
                    // unknown type may be refused at once, without the lock (seen ending it at 2 rounds).
                    if name == Self.unavailable { writesDone.add(1, ordering: .relaxed) }
                }
                return names
            }
        }
        // While the writes wait for the lock (3 s), every kind of read keeps being answered: count
        // the reads answered before any write has its answer. A read queued behind a waiting
        // write would be answered only after the writes. More than one round of the four kinds:
        // the first could have been sent before the writes (they are sent from a task of their
        // own); the next is sent after it. Under the whole suite's load a round took over a
        // second here (two rounds and no more, twice), so the count is of reads, not rounds.
        let reads: [() async throws -> Bool] = [
            { try await world.call(Self.activities, "Get", [.string(agatha)]).count == 1 },
            { try await world.activityCount() == 1 },
            { try await world.call(Self.scene, "GetAll", path: scene).first?.stringKeyedValue?["tab"]?.unwrapped == .string("b1") },
            { try await world.call(Self.activities, "Search", [.string("agatha"), .uint32(5)]).first?.arrayValue?.count == 1 },
        ]
        var readsWhileWritesWaited = 0
        while writesDone.load(ordering: .relaxed) == 0, clock.now - started < .seconds(10) {
            for answered in reads {
                #expect(try await answered())
                if writesDone.load(ordering: .relaxed) == 0 { readsWhileWritesWaited += 1 }
            }
        }
        #expect(readsWhileWritesWaited >= 5, "reads answered while the writes waited: \(readsWhileWritesWaited)")

        let names = try await writes.value
        let elapsed = clock.now - started
        // Unregistering an unknown type needs no lock: it may answer UnknownActivityType at once or wait and give up.
        #expect(names.allSatisfy { $0 == Self.unavailable || $0 == "org.baton.Handoff1.Error.UnknownActivityType" }, "\(names)")
        #expect(names.filter { $0 == Self.unavailable }.count >= 8, "\(names)")
        // Each write waits at most 3 s from when it was queued, not 3 s each in turn.
        #expect(elapsed < .seconds(8), "the writes took \(elapsed)")
        #expect(!world.daemonLog.contains("failed to handle"), "\(world.daemonLog)")

        // The lock goes away: writes succeed again, with nothing of the refused ones stored.
        await holder.release()
        _ = try await world.advertise("after the lock")
        _ = try await world.call(Self.scene, "Set", [.string("k0"), .variant(.int64(2))], path: scene)
        #expect(try await world.activityCount() == 2)
        let storage = try #require(try await world.call(Self.scene, "GetAll", path: scene).first?.stringKeyedValue)
        #expect(Set(storage.keys) == ["tab", "k0"])
    }

    /// A state directory on a read-only file system: batond says so and how to fix it, and exits.
    @Test func aReadOnlyStateDirectoryIsAClearErrorAtStart() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let mountPoint = world.bus.directory.appendingPathComponent("readonly").path
        #expect(mkdir(mountPoint, 0o700) == 0)
        let result = try await world.run(try Executables.require("unshare", package: "util-linux"), ["-m", "sh", "-c", """
            mount -t tmpfs -o size=1m,mode=0700 tmpfs "$1" && mount -o remount,ro "$1" && exec "$2" --database "$1/baton.sqlite"
            """, "sh", mountPoint, try Executables.built("batond")])
        #expect(result.status == 1)
        #expect(result.stderr.contains("Read-only file system") && result.stderr.contains("--database"), "\(result)")
    }

    @Test func aFullDiskAnswersStorageFullAndRecoversOnceThereIsRoom() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        // A 2 MiB file system of its own, in a private mount namespace, a quarter filled by a filler file.
        let mountPoint = world.bus.directory.appendingPathComponent("small").path
        #expect(mkdir(mountPoint, 0o700) == 0)
        let unshare = try Executables.require("unshare", package: "util-linux")
        let log = open(world.logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        let daemon = try Subprocess(unshare, ["-m", "sh", "-c", """
            mount -t tmpfs -o size=2m,mode=0700 tmpfs "$1" && head -c 512000 /dev/zero > "$1/filler" && \
            exec "$2" --database "$1/baton.sqlite"
            """, "sh", mountPoint, try Executables.built("batond")], environment: world.bus.environment, stderr: log)
        close(log)
        defer { daemon.kill(SIGKILL) }
        try await world.client.waitForName("org.baton.Handoff1", timeout: .seconds(15))
        try await world.register(requiredKeys: "")

        let payload = #"{"text":""# + String(repeating: "x", count: 60_000) + #""}"#
        var stored: [String] = []
        var refusal: String?
        for index in 0..<60 {
            do {
                stored.append(try await world.advertise("large \(index)", payload: payload))
            } catch let error as DBusError {
                refusal = error.name
                break
            }
        }
        #expect(refusal == "org.baton.Handoff1.Error.StorageFull", "\(world.daemonLog)")
        #expect(stored.count >= 5)
        // Every acknowledged write is there, and reads still work.
        #expect(try await world.activityCount() == stored.count)

        // Room again (as the process sees its file system): the next write succeeds.
        #expect(unlink("/proc/\(daemon.pid)/root\(mountPoint)/filler") == 0)
        _ = try await world.advertise("large again", payload: payload)
        #expect(try await world.activityCount() == stored.count + 1)
        #expect(!world.daemonLog.contains("failed to handle"), "\(world.daemonLog)")
    }

    /// The disk failing under a running batond, injected into its system calls by strace (a
    /// file system cannot be made to fail while batond holds it open): writes answer the named
    /// error, reads keep working, and once the fault goes the next write succeeds with none of
    /// the refused ones stored.
    @Test(arguments: [
        ("pwrite64", "EIO", Self.unavailable),
        ("pwrite64", "ENOSPC", "org.baton.Handoff1.Error.StorageFull"),
    ])
    func aDiskFailingWhileServingGetsNamedAnswersAndRecovers(call: String, error: String, expected: String) async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        let daemon = try #require(world.daemon).process.pid
        try await world.register(requiredKeys: "")
        let agatha = try await world.advertise("Agatha")

        let strace = try Subprocess(try Executables.require("strace", package: "strace"), [
            "-f", "-qq", "-o", "/dev/null", "-e", "trace=\(call)", "-e", "inject=\(call):error=\(error)", "-p", String(daemon),
        ])
        defer { strace.kill(SIGKILL) }
        try await eventually("strace traces every thread of batond") { Self.everyThreadTraced(daemon) }

        for index in 0..<3 {
            #expect(await errorName { try await world.advertise("refused \(index)") } == expected)
            #expect(try await world.call(Self.activities, "Get", [.string(agatha)]).count == 1)
        }
        strace.kill(SIGINT)
        _ = await strace.wait()
        _ = try await world.advertise("after the fault")
        #expect(try await world.activityCount() == 2)
        #expect(!world.daemonLog.contains("failed to handle"), "\(world.daemonLog)")
    }

    /// True when every thread of `pid` has a tracer.
    static func everyThreadTraced(_ pid: pid_t) -> Bool {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return !tasks.isEmpty && tasks.allSatisfy { task in
            let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
            return status.split(separator: "\n").contains { $0.hasPrefix("TracerPid:") && !$0.hasSuffix("\t0") }
        }
    }

    /// A database another program holds exclusively when batond starts is not damage: batond
    /// waits for it, then exits with an error naming the lock (systemd starts it again), moves
    /// nothing aside, and serves the same data once the lock is gone.
    @Test func aDatabaseLockedAtStartIsNamedNotQuarantined() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register(requiredKeys: "")
        let agatha = try await world.advertise("Agatha")
        #expect(await world.stopDaemon() == 0)

        let holder = try await LockHolder(database: world.database, directory: world.bus.directory, exclusive: true)
        let clock = ContinuousClock()
        let started = clock.now
        let result = try await world.run(try Executables.built("batond"), ["--database", world.database])
        #expect(result.status == 1)
        #expect(result.stderr.contains("StorageUnavailable") && result.stderr.contains("locked by another program")
            && result.stderr.contains("fuser"), "\(result)")
        #expect(clock.now - started < .seconds(15), "batond gave up after \(clock.now - started)")
        let directory = (world.database as NSString).deletingLastPathComponent
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".corrupt-") }.isEmpty)

        await holder.release()
        try await world.startDaemon()
        #expect(try await world.call(Self.activities, "Get", [.string(agatha)]).count == 1)
        #expect(!world.daemonLog.contains("moved to"), "\(world.daemonLog)")
    }

    /// SQLite's exclusive locking mode would shut batond's readers out too, but another program
    /// cannot take it while batond has the database open in WAL mode: it is refused ("database
    /// is locked"), and batond serves reads and writes meanwhile.
    @Test func anotherProgramCannotShutBatondsReadersOut() async throws {
        let world = try await BatonWorld.started()
        defer { world.close() }
        try await world.register(requiredKeys: "")
        let agatha = try await world.advertise("Agatha")
        _ = try await world.call(Self.activities, "Get", [.string(agatha)])
        let python = try Executables.require("/usr/bin/python3", package: "python3")
        let attempt = Task {
            try await Executables.run(python, ["-c", """
                import sqlite3, sys
                connection = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=3)
                connection.execute("PRAGMA locking_mode=EXCLUSIVE")
                try:
                    connection.execute("BEGIN EXCLUSIVE")
                    print("exclusive")
                except sqlite3.OperationalError as error:
                    print("refused:", error)
                """, world.database])
        }
        for index in 0..<20 {
            #expect(try await world.call(Self.activities, "Get", [.string(agatha)]).isEmpty == false)
            _ = try await world.advertise("meanwhile \(index)")
        }
        let result = try await attempt.value
        #expect(result.stdout == "refused: database is locked\n", "\(result)")
        #expect(try await world.activityCount() == 21)
    }
}
