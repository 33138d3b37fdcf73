import BatonContract
import BatonCore
import DBus
import Logging

/// `org.baton.Handoff1.Testing`, exported only when batond runs on a `ManualClock`
/// (`--test-clock`): tests move its clock instead of sleeping; the reply comes once what fell
/// due (an expiry's purge, the end of a pause, a day-old continuation failing) has run.
struct TestingInterface: Sendable {
    let clock: ManualClock
    let log: Logger

    var interface: Interface {
        Interface(Contract.Interface.testing, methods: [Method(Contract.Testing.advanceClock, handler: advanceClock)])
    }

    func advanceClock(_ call: MethodCall) async throws -> [DBusValue] {
        let microseconds: UInt64 = try call.argument(0)
        await clock.advance(by: .microseconds(Int64(clamping: microseconds)))
        log.info("test clock moved ahead by \(microseconds) µs")
        return [.uint64(clock.now())]
    }
}
