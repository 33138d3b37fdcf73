import BatonContract
import DBus

extension HandoffService {
    /// `org.baton.Handoff1.Testing`, exported only with `--test-clock`: tests move batond's
    /// clock ahead instead of sleeping, then await what follows (an expiry, a purge, the end of
    /// a pause), which housekeeping does within its period (1 s).
    var testingInterface: Interface {
        Interface(Contract.Interface.testing, methods: [
            Method(Contract.Testing.advanceClock) { call in
                let microseconds: UInt64 = try call.argument(0)
                self.clock.advance(by: microseconds)
                self.log.info("test clock moved ahead by \(microseconds) µs")
                return [.uint64(self.clock.now())]
            },
        ])
    }
}
