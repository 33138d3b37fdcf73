import BatonCore
import BatonService
import BatonStore
import DBus
import Foundation
import Logging
import Synchronization
import Testing
import TestSupport

/// The daemon built by `buildDaemon` and driven in this process, as `batond` runs it.
@Suite(.serialized)
struct InProcessDaemonTests {
    /// batond built on `world`'s bus with a database of its own, running in this process.
    static func daemon(
        on world: BatonWorld, _ adjust: (inout DaemonOptions) -> Void = { _ in }
    ) throws -> (daemon: BuiltDaemon, running: Task<Void, any Error>, database: String) {
        var options = DaemonOptions()
        options.database = world.bus.directory.appendingPathComponent("baton.sqlite").path
        options.bus = .address(world.bus.address)
        adjust(&options)
        let daemon = try buildDaemon(options, environment: [:], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        return (daemon, Task { try await daemon.run() }, options.database ?? "")
    }

    @Test func buildRunServeAndStopGracefully() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let bus = world.bus
        let (daemon, running, database) = try Self.daemon(on: world)

        let client = try bus.connect()
        defer { client.close() }
        try await client.waitForName("org.baton.Handoff1", timeout: .seconds(15))
        _ = try await client.call("org.baton.Handoff1", "/org/baton/Handoff1", "org.baton.Handoff1.Registry", "RegisterActivityType",
                                  [.string("com.example.notes.document"), .string("com.example.notes"), .stringMap([:])])
        let id = try await client.call("org.baton.Handoff1", "/org/baton/Handoff1", "org.baton.Handoff1.Activities", "Advertise",
                                       [.string("com.example.notes.document"), .string("Chapter 3"), .string("{}"), .stringMap([:])])
        #expect(id.first?.stringValue?.count == 36)

        // What SIGTERM does: the group stops the bus service (which drains) and housekeeping.
        await daemon.group.triggerGracefulShutdown()
        try await running.value
        #expect(throws: (any Error).self) { try daemon.store.activityTypes() }
        // Closed with its WAL emptied into the database file.
        var info = stat()
        #expect(stat(database + "-wal", &info) != 0 || info.st_size == 0)
    }

    /// A delivery under way when the daemon stops is a task the daemon owns: cancelled before
    /// the connection closes, so the stop is not taken for the app's failure (no failed
    /// attempt is noted), and its continuation is left pending in the file for the next start.
    @Test func noTaskOutlivesTheDaemonAndAWaitingContinuationStaysStored() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let bus = world.bus
        let (daemon, running, database) = try Self.daemon(on: world) { $0.handlerTimeout = .seconds(30) }

        // An app whose handler never answers.
        let app = try bus.connect()
        defer { app.close() }
        let asked = Atomic(false)
        try await app.export("/", [Interface("org.baton.Handoff1.Handler", methods: [
            Method("ContinueActivity", in: [Argument("scene", "o"), Argument("activity", "a{sv}")], out: [Argument("storage", "a{sv}")],
                   ordering: .concurrent) { _ in
                asked.store(true, ordering: .relaxed)
                try await Task.sleep(for: .seconds(60))
                return [.record([:])]
            },
        ])])
        try await app.requestName("org.example.Holding")
        let client = try bus.connect()
        defer { client.close() }
        try await client.waitForName("org.baton.Handoff1", timeout: .seconds(15))
        let root: ObjectPath = "/org/baton/Handoff1"
        _ = try await client.call("org.baton.Handoff1", root, "org.baton.Handoff1.Registry", "RegisterActivityType",
                                  [.string("org.example.Holding.doc"), .string("org.example.Holding"), .stringMap(["handler": "org.example.Holding"])])
        let id = try #require(try await client.call("org.baton.Handoff1", root, "org.baton.Handoff1.Activities", "Advertise",
                                                    [.string("org.example.Holding.doc"), .string("held"), .string("{}"), .stringMap([:])]).first?.stringValue)
        _ = try await client.call("org.baton.Handoff1", root, "org.baton.Handoff1.Activities", "Continue", [.string(id), .stringMap(["wait": "false"])])
        try await eventually("the handler was asked") { asked.load(ordering: .relaxed) }
        #expect(daemon.service.backgroundTasks >= 1)

        await daemon.group.triggerGracefulShutdown()
        try await running.value
        #expect(daemon.service.backgroundTasks == 0, "tasks outlived the daemon")
        let reopened = try Store(path: database)
        defer { try? reopened.close() }
        let pending = try reopened.pendingContinuations()
        #expect(pending.count == 1)
        // Closing the connection first would have failed the held call (Disconnected) and noted it.
        #expect(pending.first?.attempts == 0 && pending.first?.lastError == nil, "\(pending)")
    }
}
