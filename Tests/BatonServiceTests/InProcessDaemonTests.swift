import BatonCore
import BatonService
import DBus
import Foundation
import Logging
import Testing
import TestSupport

/// The daemon built by `buildDaemon` and driven in this process, as `batond` runs it.
@Suite(.serialized)
struct InProcessDaemonTests {
    @Test func buildRunServeAndStopGracefully() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        let bus = world.bus
        let database = bus.directory.appendingPathComponent("baton.sqlite").path
        var options = DaemonOptions()
        options.database = database
        options.bus = .address(bus.address)
        let daemon = try buildDaemon(options, environment: [:], logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        let running = Task { try await daemon.run() }

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
}
