/* The baseline: the least a libdbus service can do to answer Echo(s) -> s.
 * One thread, read_write_dispatch, a filter that replies with the same string.
 * Usage: echo-server BUS_NAME */
#include <dbus/dbus.h>
#include <stdio.h>
#include <string.h>

static DBusHandlerResult on_message(DBusConnection *connection, DBusMessage *message, void *data) {
    (void)data;
    if (!dbus_message_is_method_call(message, "org.baton.Bench1", "Echo"))
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    const char *text = NULL;
    DBusMessageIter iter;
    if (!dbus_message_iter_init(message, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_STRING)
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    dbus_message_iter_get_basic(&iter, &text);
    DBusMessage *reply = dbus_message_new_method_return(message);
    dbus_message_append_args(reply, DBUS_TYPE_STRING, &text, DBUS_TYPE_INVALID);
    dbus_connection_send(connection, reply, NULL);
    dbus_message_unref(reply);
    return DBUS_HANDLER_RESULT_HANDLED;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s BUS_NAME\n", argv[0]); return 2; }
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_bus_get(DBUS_BUS_SESSION, &error);
    if (!connection) { fprintf(stderr, "connect: %s\n", error.message); return 1; }
    dbus_connection_add_filter(connection, on_message, NULL, NULL);
    if (dbus_bus_request_name(connection, argv[1], DBUS_NAME_FLAG_DO_NOT_QUEUE, &error) != 1) {
        fprintf(stderr, "name: %s\n", error.message ? error.message : "taken");
        return 1;
    }
    while (dbus_connection_read_write_dispatch(connection, -1)) {}
    return 0;
}
