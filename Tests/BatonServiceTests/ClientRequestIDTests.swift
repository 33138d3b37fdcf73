import BatonCore
import DBus
import Foundation
import Testing
import TestSupport

/// `baton` sends a `request_id` with each write it may retry, as dbus-monitor sees it.
@Suite(.serialized)
struct ClientRequestIDTests {
    @Test func batonSendsARequestIDWithEachIdempotentWrite() async throws {
        let world = try BatonWorld()
        defer { world.close() }
        _ = try await InProcessBatond(on: world)
        try await world.register(requiredKeys: "")
        let monitor = try await BusMonitor(bus: world.bus, rules: ["type='method_call',destination='org.baton.Handoff1'"])
        defer { monitor.stop() }
        let baton = try Executables.built("baton")
        let advertised = try await world.run(baton, ["activities", "advertise", BatonWorld.type, "Agatha", "{}"])
        #expect(advertised.status == 0, "\(advertised)")
        let id = advertised.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await world.run(baton, ["activities", "update", id, #"{"n":1}"#]).status == 0)
        #expect(try await world.run(baton, ["scenes", "open", BatonWorld.app]).status == 0)
        #expect(try await world.run(baton, ["activities", "continue", id]).status == 0)
        try await eventually("dbus-monitor printed the four calls") { monitor.text.components(separatedBy: "method call").count > 4 }
        for member in ["Advertise", "Update", "OpenScene", "Continue"] {
            let call = try #require(monitor.text.components(separatedBy: "method call").first { $0.contains("member=\(member)") })
            #expect(call.contains(#"string "request_id""#), "\(member): \(call)")
        }
    }
}
