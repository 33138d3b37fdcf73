import BatonCore
import DBus
import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

/// SIGTERM in the middle of a burst of writes: batond stops taking calls, answers every
/// call it took, and exits 0; every answered write is stored and every stored one was answered.
@Suite(.serialized)
struct ShutdownTests {
    final class Outcome: Sendable {
        private let state = Mutex<(answered: Set<String>, errors: [String: Int])>(([], [:]))
        func answered(_ title: String) { state.withLock { _ = $0.answered.insert(title) } }
        func failed(_ name: String) { state.withLock { $0.errors[name, default: 0] += 1 } }
        var titles: Set<String> { state.withLock { $0.answered } }
        var errors: [String: Int] { state.withLock { $0.errors } }
    }

    @Test(arguments: 1...3)
    func sigtermDuringAWriteBurstAnswersEveryCommittedWrite(round: Int) async throws {
        let world = try BatonWorld()
        defer { world.close() }
        try await world.startDaemon()
        try await world.register(requiredKeys: "")
        let outcome = Outcome()
        let clients = try (0..<4).map { _ in try world.bus.connect() }
        defer { clients.forEach { $0.close() } }
        let burst = Task {
            await withTaskGroup(of: Void.self) { group in
                for (number, client) in clients.enumerated() {
                    for lane in 0..<16 {
                        group.addTask {
                            for call in 0... {
                                let title = "client \(number) lane \(lane) call \(call)"
                                do {
                                    _ = try await client.call("org.baton.Handoff1", BatonWorld.root, "org.baton.Handoff1.Activities",
                                                              "Advertise", [.string(BatonWorld.type), .string(title), .string("{}"), .stringMap([:])],
                                                              timeout: .seconds(20))
                                    outcome.answered(title)
                                } catch let error as DBusError {
                                    outcome.failed(error.name)
                                    return
                                } catch {
                                    outcome.failed("\(error)")
                                    return
                                }
                            }
                        }
                    }
                }
            }
        }
        try await eventually("the burst is under way") { outcome.titles.count >= 200 }
        let status = await world.stopDaemon(SIGTERM)
        await burst.value
        #expect(status == 0)

        let sqlite = try Executables.require("sqlite3", package: "sqlite3")
        let stored = try await world.run(sqlite, [world.database, "SELECT title FROM activity"])
        #expect(stored.status == 0, "\(stored)")
        let storedTitles = Set(stored.stdout.split(separator: "\n").map(String.init))
        let answered = outcome.titles
        #expect(answered.isSubset(of: storedTitles), "answered, not stored: \(answered.subtracting(storedTitles).prefix(5))")
        #expect(storedTitles.isSubset(of: answered), "stored, never answered: \(storedTitles.subtracting(answered).prefix(5))")
        // The calls after the stop were refused with names a client can act on, none lost silently.
        let lost = outcome.errors.filter { ![Self.stopping, DBusError.Name.serviceUnknown, DBusError.Name.nameHasNoOwner].contains($0.key) }
        #expect(lost.isEmpty, "\(outcome.errors)")
    }

    static let stopping = "org.baton.Handoff1.Error.StorageUnavailable"
}
