import BatonCore
import DBus
import Foundation
import Glibc
import Testing
import TestSupport

/// The service tests' shared calls on TestSupport's `BatonWorld`, on Hawk Notes' activity type.
extension BatonWorld {
    static let type = "com.raywenderlich.hawknotes.staterestore.characterDetail"
    static let app = "com.raywenderlich.hawknotes"
    static let root: ObjectPath = "/org/baton/Handoff1"

    func register(handler: String? = nil, requiredKeys: String = "id") async throws {
        var options = ["title": "Character", "required_keys": requiredKeys]
        if let handler { options["handler"] = handler }
        _ = try await call("org.baton.Handoff1.Registry", "RegisterActivityType", [
            .string(Self.type), .string(Self.app), .stringMap(options),
        ])
    }

    func advertise(_ title: String, payload: String = #"{"id":"a1","name":"Agatha"}"#, options: [String: String] = [:]) async throws -> String {
        let reply = try await call("org.baton.Handoff1.Activities", "Advertise", [
            .string(Self.type), .string(title), .string(payload), .stringMap(options),
        ])
        return try #require(reply.first?.stringValue)
    }

    /// Moves the clock of a batond started with `--test-clock` ahead (it stands still
    /// otherwise); returns its time then (µs), once housekeeping has run at that time.
    @discardableResult
    func advanceClock(by duration: Duration) async throws -> UInt64 {
        let microseconds = UInt64(duration.components.seconds) * 1_000_000 + UInt64(duration.components.attoseconds / 1_000_000_000_000)
        return try #require(try await call("org.baton.Handoff1.Testing", "AdvanceClock", [.uint64(microseconds)]).first?.uint64Value)
    }

    func activityCount() async throws -> Int {
        try await call("org.baton.Handoff1.Activities", "List", [.stringMap([:])]).first?.arrayValue?.count ?? -1
    }
}

/// The `org.baton.Handoff1.Error.*` name of a failure, for assertions.
func errorName(of operation: () async throws -> Any) async -> String? {
    do {
        _ = try await operation()
        return nil
    } catch let error as DBusError {
        return error.name
    } catch {
        return "\(error)"
    }
}
