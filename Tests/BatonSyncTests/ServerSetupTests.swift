import Foundation
import Testing
import TestSupport

/// The server's rules, tried with `psql` logged in as each device, as a device would log in:
/// a device reads its own user's rows only and appends to its own log only; nobody rewrites a
/// record; revocation is final.
@Suite(.serialized) struct ServerSetupTests {
    @Test func usersAreIsolatedAndEachChangesOnlyItsOwnLog() async throws {
        let sync = try await SyncServer.fresh()
        let ana1 = try await sync.addDevice(user: "ana"), ana2 = try await sync.addDevice(user: "ana")
        let bo = try await sync.addDevice(user: "bo")

        try await ana1.run("INSERT INTO baton.device (user_name, device_id, public_key, sealed_name) VALUES ('ana', 'd1', '\\x01', '\\x02')")
        try await ana2.run("INSERT INTO baton.device (user_name, device_id, public_key, sealed_name) VALUES ('ana', 'd2', '\\x01', '\\x02')")
        try await bo.run("INSERT INTO baton.device (user_name, device_id, public_key, sealed_name) VALUES ('bo', 'b1', '\\x01', '\\x02')")
        try await ana1.run(Self.append(user: "ana", device: "d1", seq: 1))
        try await ana2.run(Self.append(user: "ana", device: "d2", seq: 1))
        try await bo.run(Self.append(user: "bo", device: "b1", seq: 1))

        // Each of ana's devices reads both of ana's logs, and nothing of bo's.
        #expect(try await ana2.run("SELECT device_id || ':' || seq FROM baton.record ORDER BY 1") == "d1:1\nd2:1")
        #expect(try await bo.run("SELECT count(*) FROM baton.record") == "1")
        #expect(try await bo.run("SELECT count(*) FROM baton.device") == "1")
        #expect(try await bo.run("SELECT count(*) FROM baton.member") == "1")
        // The logs' heads, kept by the server: each user sees their own, nobody writes them.
        #expect(try await ana1.run("SELECT device_id || ':' || seq FROM baton.log_head ORDER BY 1") == "d1:1\nd2:1")
        #expect(try await bo.run("SELECT device_id || ':' || seq FROM baton.log_head") == "b1:1")
        await #expect(throws: (any Error).self) { try await ana1.run("UPDATE baton.log_head SET seq = 0") }
        await #expect(throws: (any Error).self) { try await bo.run("INSERT INTO baton.log_head VALUES ('ana', 'd1', 99)") }

        // Appending to another device's log, or as another user, is refused.
        await #expect(throws: (any Error).self) { try await ana2.run(Self.append(user: "ana", device: "d1", seq: 2)) }
        await #expect(throws: (any Error).self) { try await bo.run(Self.append(user: "ana", device: "b1", seq: 2)) }
        await #expect(throws: (any Error).self) {
            try await bo.run("INSERT INTO baton.device (user_name, device_id, public_key, sealed_name) VALUES ('ana', 'b9', '\\x01', '\\x02')")
        }
        // Nobody rewrites a record, not even in their own log. A device removes records of its own
        // log only (copies of the clipboard once their time is over): another's, or another
        // user's, stay where they are.
        await #expect(throws: (any Error).self) { try await ana1.run("UPDATE baton.record SET hlc = 0") }
        try await ana2.run("DELETE FROM baton.record WHERE device_id = 'd1'")
        try await bo.run("DELETE FROM baton.record WHERE user_name = 'ana'")
        #expect(try await ana1.run("SELECT count(*) FROM baton.record WHERE device_id = 'd1'") == "1")
        try await ana1.run("DELETE FROM baton.record WHERE device_id = 'd1'")
        #expect(try await ana2.run("SELECT device_id || ':' || seq FROM baton.record ORDER BY 1") == "d2:1")
        // Its head stays: readers never go back before it.
        #expect(try await ana2.run("SELECT seq FROM baton.log_head WHERE device_id = 'd1'") == "1")
        // Nor makes themselves a member of another user.
        await #expect(throws: (any Error).self) { try await bo.run("INSERT INTO baton.member VALUES ('x', 'ana')") }

        // A revoked device can append no more, and cannot take the revocation back.
        try await ana1.run("UPDATE baton.device SET revoked_at = now() WHERE device_id = 'd2'")
        await #expect(throws: (any Error).self) { try await ana2.run(Self.append(user: "ana", device: "d2", seq: 2)) }
        try await ana2.run("UPDATE baton.device SET revoked_at = NULL WHERE device_id = 'd2'")
        #expect(try await ana1.run("SELECT revoked_at IS NOT NULL FROM baton.device WHERE device_id = 'd2'") == "t")
        // A device's name is its own: another device of the user cannot replace it.
        try await ana2.run("UPDATE baton.device SET sealed_name = '\\x99', name_epoch = 7 WHERE device_id = 'd1'")
        #expect(try await ana1.run("SELECT name_epoch || ':' || (sealed_name = '\\x99') FROM baton.device WHERE device_id = 'd1'") == "0:false")
        try await ana1.run("UPDATE baton.device SET sealed_name = '\\x98', name_epoch = 1 WHERE device_id = 'd1'")
        #expect(try await ana2.run("SELECT name_epoch || ':' || encode(sealed_name, 'hex') FROM baton.device WHERE device_id = 'd1'") == "1:98")

        #expect(try await sync.psql("SELECT count(*) FROM baton.record") == "2\n")
    }

    @Test func setupRunsTwiceAndRemovesADevice() async throws {
        let sync = try await SyncServer.fresh()
        try await sync.setup(["init"])
        let device = try await sync.addDevice(user: "ana")
        #expect(try await device.run("SELECT baton.current_member()") == "ana")
        let role = try #require(device.url.split(separator: "/")[1].split(separator: ":").first)
        try await sync.setup(["remove-device", String(role)])
        await #expect(throws: (any Error).self) { try await device.run("SELECT 1") }
        let help = try await Executables.run(Repository.root.appendingPathComponent("scripts/sync-server-setup").path, ["--help"])
        #expect(help.status == 0 && help.stdout.contains("add-device USER"))
    }

    static func append(user: String, device: String, seq: Int) -> String {
        "INSERT INTO baton.record (user_name, device_id, seq, epoch, hlc, sealed) VALUES ('\(user)', '\(device)', \(seq), 0, 1, '\\xdead')"
    }
}
