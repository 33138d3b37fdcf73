// What a connection's other calls cost while many of its calls wait for their replies (run by
// Benchmarks/pending-calls, on a private bus). A service holds WAITING calls unanswered; the
// client then makes CALLS calls to the bus itself, one after another, and prints the process's
// CPU per call. The bus thread used to look through every waiting call on each pass.
// Usage: bench-pending-calls WAITING CALLS
import DBus
import Glibc

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
guard arguments.count == 2 else {
    Connection.logToStandardError("usage: bench-pending-calls WAITING CALLS")
    exit(2)
}
let (waiting, calls) = (arguments[0], arguments[1])

/// User and system CPU of this process, in microseconds.
func cpuMicroseconds() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000 + usage.ru_utime.tv_usec + usage.ru_stime.tv_usec
}

let service = try Connection(.session)
try await service.export("/org/baton/Bench", [
    Interface("org.baton.Bench1", methods: [
        // Answers only when the process ends.
        Method("Hold") { _ in
            try await Task.sleep(for: .seconds(3_600))
            return []
        },
    ]),
])
try await service.requestName("org.baton.BenchHold")

let client = try Connection(.session)
for _ in 0..<waiting {
    Task { _ = try? await client.call("org.baton.BenchHold", "/org/baton/Bench", "org.baton.Bench1", "Hold", timeout: .seconds(3_600)) }
}
// Every call sent and waiting: the service has them when its name's owner answers a call.
_ = try await client.call("org.baton.BenchHold", "/org/freedesktop/DBus", "org.freedesktop.DBus.Peer", "Ping")
try await Task.sleep(for: .milliseconds(200))

let before = cpuMicroseconds()
for _ in 0..<calls {
    _ = try await client.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId")
}
print("\(waiting) calls waiting: \((cpuMicroseconds() - before) / calls) µs of CPU per other call")
exit(0)
