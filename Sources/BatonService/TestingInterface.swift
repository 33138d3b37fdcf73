import BatonContract
import BatonCore
import DBus

extension HandoffService {
    /// `org.baton.Handoff1.Testing`, exported only on a `ManualClock` (`--test-clock`): tests
    /// move batond's clock instead of sleeping; the reply comes once what fell due (an expiry's
    /// purge, the end of a pause, a day-old continuation failing) has run.
    var testingInterface: Interface {
        Interface(Contract.Interface.testing, methods: [
            Method(Contract.Testing.advanceClock) { call in
                let microseconds: UInt64 = try call.argument(0)
                guard let manual = self.clock as? ManualClock else {
                    throw BatonError.invalidArgument("batond runs on the system's clock; only --test-clock moves")
                }
                await manual.advance(by: .microseconds(Int64(clamping: microseconds)))
                self.log.info("test clock moved ahead by \(microseconds) µs")
                return [.uint64(self.clock.now())]
            },
        ])
    }
}
