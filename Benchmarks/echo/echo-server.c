/* The baseline: the least a libdbus service can do to answer Echo(s) -> s.
 * One thread, read_write_dispatch, a filter that replies with the same string.
 *
 * With SOURCE and ID it is also the floor of batond's Get: it asks SOURCE (batond)
 * once for Activities.Get(ID), keeps the record's fields as plain C values, and answers
 * every org.baton.Handoff1.Activities.Get, whatever id it names, by writing that record
 * into the reply, as a server holding it in memory would. No storage, no Swift: what
 * is left is libdbus building the reply. With DATABASE too (batond's store, opened
 * read-only) it first reads the row of the id each Get names, as batond's reader does
 * (bind, step, every column, reset), then writes the kept record: libdbus and SQLite,
 * what Get costs in C with its storage.
 *
 * With --advertise it is the floor of batond's Advertise at an app's quota: it answers
 * every org.baton.Handoff1.Activities.Advertise with the messages batond sends for one
 * there, in the same order (Invalidated for the activity the quota removes, Advertised,
 * then the reply with the new id), and stores nothing.
 *
 * Usage: echo-server BUS_NAME [SOURCE ID [DATABASE] | --advertise] */
#include <dbus/dbus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../read-row.h"

/* One field of the record: a basic value, or an array of them (keywords, `as`). */
struct field {
    char *key;
    char signature[3];    /* the variant's: "s", "t", "as", ... */
    int count;            /* values: 1 for a basic value */
    DBusBasicValue *values;
};
static struct field *fields;
static int field_count = -1; /* -1: no record, Get is not answered */
static int advertise;        /* 1: Advertise is answered */
static sqlite3_stmt *row;    /* with DATABASE: the activity's row by id, read before each Get's reply */
static unsigned long long advertised;

static dbus_bool_t is_string(int type) {
    return type == DBUS_TYPE_STRING || type == DBUS_TYPE_OBJECT_PATH || type == DBUS_TYPE_SIGNATURE;
}

/* The value under `iter`, strings copied (they live in the message). */
static DBusBasicValue take_basic(DBusMessageIter *iter) {
    DBusBasicValue value;
    dbus_message_iter_get_basic(iter, &value);
    if (is_string(dbus_message_iter_get_arg_type(iter))) value.str = strdup(value.str);
    return value;
}

/* Reads an a{sv} record whose values are basic or arrays of basic values; 0 on success. */
static int keep_record(DBusMessage *reply) {
    DBusMessageIter body, entries;
    if (!dbus_message_iter_init(reply, &body)) return 1;
    char *signature = dbus_message_iter_get_signature(&body);
    int is_record = strcmp(signature, "a{sv}") == 0;
    dbus_free(signature);
    if (!is_record) return 1;
    int count = dbus_message_iter_get_element_count(&body);
    fields = calloc(count, sizeof *fields);
    dbus_message_iter_recurse(&body, &entries);
    for (field_count = 0; field_count < count; dbus_message_iter_next(&entries), field_count++) {
        struct field *f = &fields[field_count];
        DBusMessageIter entry, variant, items;
        dbus_message_iter_recurse(&entries, &entry);
        f->key = take_basic(&entry).str;
        dbus_message_iter_next(&entry);
        dbus_message_iter_recurse(&entry, &variant);
        int type = dbus_message_iter_get_arg_type(&variant);
        if (dbus_type_is_basic(type)) {
            f->signature[0] = (char)type;
            f->count = 1;
            f->values = malloc(sizeof *f->values);
            f->values[0] = take_basic(&variant);
            continue;
        }
        int element = dbus_message_iter_get_element_type(&variant);
        if (type != DBUS_TYPE_ARRAY || !dbus_type_is_basic(element)) return 1;
        f->signature[0] = DBUS_TYPE_ARRAY;
        f->signature[1] = (char)element;
        f->count = dbus_message_iter_get_element_count(&variant);
        f->values = calloc(f->count + 1, sizeof *f->values);
        dbus_message_iter_recurse(&variant, &items);
        for (int i = 0; i < f->count; i++, dbus_message_iter_next(&items)) f->values[i] = take_basic(&items);
    }
    return 0;
}

/* Writes the kept record into `reply`. */
static dbus_bool_t write_record(DBusMessage *reply) {
    DBusMessageIter body, entries, entry, variant, items;
    dbus_message_iter_init_append(reply, &body);
    if (!dbus_message_iter_open_container(&body, DBUS_TYPE_ARRAY, "{sv}", &entries)) return FALSE;
    for (int i = 0; i < field_count; i++) {
        struct field *f = &fields[i];
        if (!dbus_message_iter_open_container(&entries, DBUS_TYPE_DICT_ENTRY, NULL, &entry)
            || !dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &f->key)
            || !dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, f->signature, &variant))
            return FALSE;
        if (f->signature[0] == DBUS_TYPE_ARRAY) {
            if (!dbus_message_iter_open_container(&variant, DBUS_TYPE_ARRAY, f->signature + 1, &items)) return FALSE;
            for (int j = 0; j < f->count; j++)
                if (!dbus_message_iter_append_basic(&items, f->signature[1], &f->values[j])) return FALSE;
            if (!dbus_message_iter_close_container(&variant, &items)) return FALSE;
        } else if (!dbus_message_iter_append_basic(&variant, f->signature[0], &f->values[0])) {
            return FALSE;
        }
        if (!dbus_message_iter_close_container(&entry, &variant) || !dbus_message_iter_close_container(&entries, &entry))
            return FALSE;
    }
    return dbus_message_iter_close_container(&body, &entries);
}

/* Sends a signal of org.baton.Handoff1.Activities from batond's root object, with string arguments. */
static void emit(DBusConnection *connection, const char *name, const char **strings, int count) {
    DBusMessage *signal = dbus_message_new_signal("/org/baton/Handoff1", "org.baton.Handoff1.Activities", name);
    for (int i = 0; i < count; i++) dbus_message_append_args(signal, DBUS_TYPE_STRING, &strings[i], DBUS_TYPE_INVALID);
    dbus_connection_send(connection, signal, NULL);
    dbus_message_unref(signal);
}

/* Advertise at the quota: the oldest activity goes (Invalidated), the new one is announced
 * (Advertised), and the caller gets its id. Ids are lowercase UUIDs, as batond's are. */
static DBusMessage *answer_advertise(DBusConnection *connection, DBusMessage *message) {
    const char *type = NULL, *title = NULL, *payload = NULL;
    if (!dbus_message_get_args(message, NULL, DBUS_TYPE_STRING, &type, DBUS_TYPE_STRING, &title,
                               DBUS_TYPE_STRING, &payload, DBUS_TYPE_INVALID))
        return dbus_message_new_error(message, DBUS_ERROR_INVALID_ARGS, "expected (s type, s title, s payload_json, a{ss})");
    char oldest[37], id[37];
    snprintf(oldest, sizeof oldest, "00000000-0000-4000-8000-%012llx", advertised);
    snprintf(id, sizeof id, "00000000-0000-4000-8000-%012llx", ++advertised);
    const char *invalidated[] = {oldest}, *announced[] = {id, type, title}, *reply_id = id;
    emit(connection, "Invalidated", invalidated, 1);
    emit(connection, "Advertised", announced, 3);
    DBusMessage *reply = dbus_message_new_method_return(message);
    dbus_message_append_args(reply, DBUS_TYPE_STRING, &reply_id, DBUS_TYPE_INVALID);
    return reply;
}

static DBusHandlerResult on_message(DBusConnection *connection, DBusMessage *message, void *data) {
    (void)data;
    DBusMessage *reply = NULL;
    DBusMessageIter iter;
    if (dbus_message_is_method_call(message, "org.baton.Bench1", "Echo")) {
        const char *text = NULL;
        if (!dbus_message_iter_init(message, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_STRING)
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
        dbus_message_iter_get_basic(&iter, &text);
        reply = dbus_message_new_method_return(message);
        dbus_message_append_args(reply, DBUS_TYPE_STRING, &text, DBUS_TYPE_INVALID);
    } else if (field_count >= 0 && dbus_message_is_method_call(message, "org.baton.Handoff1.Activities", "Get")) {
        const char *id = NULL;
        if (row && (!dbus_message_get_args(message, NULL, DBUS_TYPE_STRING, &id, DBUS_TYPE_INVALID) || read_row(row, id) < 0)) {
            reply = dbus_message_new_error(message, "org.baton.Handoff1.Error.NotFound", "no such activity");
        } else if (reply = dbus_message_new_method_return(message), !write_record(reply)) {
            dbus_message_unref(reply);
            reply = dbus_message_new_error(message, DBUS_ERROR_NO_MEMORY, "cannot build the record");
        }
    } else if (advertise && dbus_message_is_method_call(message, "org.baton.Handoff1.Activities", "Advertise")) {
        reply = answer_advertise(connection, message);
    } else {
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    }
    dbus_connection_send(connection, reply, NULL);
    dbus_message_unref(reply);
    return DBUS_HANDLER_RESULT_HANDLED;
}

int main(int argc, char **argv) {
    advertise = argc == 3 && strcmp(argv[2], "--advertise") == 0;
    if (argc != 2 && argc != 4 && argc != 5 && !advertise) {
        fprintf(stderr, "usage: %s BUS_NAME [SOURCE ID [DATABASE] | --advertise]\n", argv[0]);
        return 2;
    }
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_bus_get(DBUS_BUS_SESSION, &error);
    if (!connection) { fprintf(stderr, "connect: %s\n", error.message); return 1; }
    if (argc == 5) {
        sqlite3 *db;
        if (sqlite3_open_v2(argv[4], &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK
            || sqlite3_prepare_v3(db, "SELECT * FROM activity WHERE id = ?", -1, SQLITE_PREPARE_PERSISTENT, &row, NULL) != SQLITE_OK) {
            fprintf(stderr, "%s: %s\n", argv[4], sqlite3_errmsg(db));
            return 1;
        }
    }
    if (argc >= 4) {
        DBusMessage *get = dbus_message_new_method_call(argv[2], "/org/baton/Handoff1", "org.baton.Handoff1.Activities", "Get");
        const char *id = argv[3];
        dbus_message_append_args(get, DBUS_TYPE_STRING, &id, DBUS_TYPE_INVALID);
        DBusMessage *record = dbus_connection_send_with_reply_and_block(connection, get, 10000, &error);
        dbus_message_unref(get);
        if (!record) { fprintf(stderr, "Get %s from %s: %s\n", id, argv[2], error.message); return 1; }
        if (keep_record(record) != 0) { fprintf(stderr, "Get %s from %s: not a record of basic values\n", id, argv[2]); return 1; }
        dbus_message_unref(record);
    }
    dbus_connection_add_filter(connection, on_message, NULL, NULL);
    if (dbus_bus_request_name(connection, argv[1], DBUS_NAME_FLAG_DO_NOT_QUEUE, &error) != 1) {
        fprintf(stderr, "name: %s\n", error.message ? error.message : "taken");
        return 1;
    }
    while (dbus_connection_read_write_dispatch(connection, -1)) {}
    return 0;
}
