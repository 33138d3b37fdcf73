// The floor of `baton` for one call (see Benchmarks/README.md): the least a Swift program can
// do to make scripts/bench's call, ListActivityTypes, and print what it got. Straight libdbus,
// one blocking call on the main thread: no argument parsing, no DBus module (so no bus thread
// and no Swift concurrency), no table. What it costs above dbus-send is the Swift runtime's start.
import CDBus
import Glibc

/// libdbus's type codes are character macros, which Swift does not import.
func typeCode(_ code: Unicode.Scalar) -> Int32 { Int32(code.value) }

func fail(_ error: DBusError, status: Int32) -> Never {
    let line = "cli-floor: \(String(cString: error.message))\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
    exit(status)
}

var error = DBusError()
dbus_error_init(&error)
guard let connection = dbus_bus_get_private(DBUS_BUS_SESSION, &error) else { fail(error, status: 4) }
guard let call = dbus_message_new_method_call(
    "org.baton.Handoff1", "/org/baton/Handoff1", "org.baton.Handoff1.Registry", "ListActivityTypes")
else { exit(1) }
guard let reply = dbus_connection_send_with_reply_and_block(connection, call, 25_000, &error) else { fail(error, status: 1) }

// Each record's "type", one a line.
var body = DBusMessageIter(), records = DBusMessageIter()
guard dbus_message_iter_init(reply, &body) != 0, dbus_message_iter_get_arg_type(&body) == typeCode("a") else { exit(1) }
dbus_message_iter_recurse(&body, &records)
var output = ""
while dbus_message_iter_get_arg_type(&records) == typeCode("a") {
    var fields = DBusMessageIter()
    dbus_message_iter_recurse(&records, &fields)
    while dbus_message_iter_get_arg_type(&fields) == typeCode("e") {
        var entry = DBusMessageIter(), variant = DBusMessageIter()
        var key: UnsafePointer<CChar>?
        dbus_message_iter_recurse(&fields, &entry)
        dbus_message_iter_get_basic(&entry, &key)
        dbus_message_iter_next(&entry)
        dbus_message_iter_recurse(&entry, &variant)
        if let key, strcmp(key, "type") == 0, dbus_message_iter_get_arg_type(&variant) == typeCode("s") {
            var value: UnsafePointer<CChar>?
            dbus_message_iter_get_basic(&variant, &value)
            if let value { output += String(cString: value) + "\n" }
        }
        dbus_message_iter_next(&fields)
    }
    dbus_message_iter_next(&records)
}
print(output, terminator: "")
