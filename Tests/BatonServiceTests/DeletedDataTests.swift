import BatonCore
import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// What is deleted leaves the disk, and the files are private.
@Suite(.serialized)
struct DeletedDataTests {
    func fileContains(_ path: String, _ marker: String) -> Bool {
        guard let data = FileManager.default.contents(atPath: path) else { return false }
        return data.range(of: Data(marker.utf8)) != nil
    }

    func size(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : -1
    }

    /// (Kept out of the history, which would keep it on purpose; see HistoryTests for its clearing.)
    @Test func anInvalidatedPayloadIsGoneFromTheDatabaseAndItsWALOnceIdle() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register(requiredKeys: "")
        let marker = "MARKER-" + Identifier.make()
        let id = try await world.advertise("Secret", payload: #"{"note":"\#(marker)"}"#, options: ["keywords": marker, "eligible_for_history": "false"])
        _ = try await world.advertise("Kept", payload: #"{"note":"kept"}"#)
        #expect(fileContains(world.database + "-wal", marker), "the payload is written to the WAL first")

        _ = try await world.call("org.baton.Handoff1.Activities", "Invalidate", [.string(id)])
        try await eventually("the WAL is checkpointed and truncated once batond is idle") { size(world.database + "-wal") == 0 }
        for suffix in ["", "-wal", "-shm"] {
            #expect(!fileContains(world.database + suffix, marker), "\(suffix.isEmpty ? "the database" : suffix) still holds the payload")
        }
        #expect(try await world.activityCount() == 1)
    }

    @Test func theFilesAreOwnerOnlyWhateverTheirEarlierModeOrTheUmask() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register(requiredKeys: "")
        #expect(await world.stopDaemon() == 0)
        for suffix in ["", "-wal", "-shm"] where access(world.database + suffix, F_OK) == 0 {
            #expect(chmod(world.database + suffix, 0o644) == 0)
        }
        try await world.startDaemon(umask: 0)
        _ = try await world.advertise("after")
        for suffix in ["", "-wal", "-shm"] {
            var info = stat()
            #expect(stat(world.database + suffix, &info) == 0 && info.st_mode & 0o777 == 0o600,
                    "\(suffix): mode \(String(info.st_mode & 0o777, radix: 8))")
        }
    }
}
