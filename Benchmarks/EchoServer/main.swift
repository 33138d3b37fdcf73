// The Swift side of the echo benchmark: Echo(s) -> s served by the DBus module,
// exactly as a Baton service declares a method. Usage: dbus-echo-server BUS_NAME
import DBus
import Glibc

let arguments = CommandLine.arguments
guard arguments.count == 2 else {
    Connection.logToStandardError("usage: dbus-echo-server BUS_NAME")
    exit(2)
}

let connection = try Connection(.session)
try await connection.export("/org/baton/Bench", [
    Interface("org.baton.Bench1", methods: [
        Method("Echo", in: [Argument("text", "s")], out: [Argument("text", "s")]) { call in
            call.arguments
        },
    ]),
])
try await connection.requestName(arguments[1])
await connection.waitUntilClosed()
