/* Baton from C, through the proxies gdbus-codegen writes from the contract's XML:
 * lists the live activities, newest first, or advertises one.
 *
 *   ./baton-activities                         id, type and title of each live activity
 *   ./baton-activities TYPE TITLE PAYLOAD      advertise one; prints its id
 *
 * Built by build.sh (which runs gdbus-codegen on the installed XML). */
#include <stdio.h>
#include "baton-generated.h"

int main(int argc, char **argv) {
    GError *error = NULL;
    BatonActivities *activities = baton_activities_proxy_new_for_bus_sync(
        G_BUS_TYPE_SESSION, G_DBUS_PROXY_FLAGS_DO_NOT_LOAD_PROPERTIES, "org.baton.Handoff1", "/org/baton/Handoff1", NULL, &error);
    if (activities == NULL) {
        fprintf(stderr, "baton-activities: cannot reach batond: %s\n", error->message);
        return 4;
    }
    int status = 0;
    if (argc == 4) {
        gchar *id = NULL;
        GVariant *options = g_variant_new("a{ss}", NULL);
        if (baton_activities_call_advertise_sync(activities, argv[1], argv[2], argv[3], options, &id, NULL, &error)) {
            printf("%s\n", id);
            g_free(id);
        } else {
            /* The error's name (org.baton.Handoff1.Error.…) says what went wrong; its message what to do. */
            gchar *name = g_dbus_error_get_remote_error(error);
            g_dbus_error_strip_remote_error(error);
            fprintf(stderr, "baton-activities: %s: %s\n", name ? name : "error", error->message);
            g_free(name);
            status = 3;
        }
    } else if (argc == 1) {
        GVariant *records = NULL;
        if (baton_activities_call_list_sync(activities, g_variant_new("a{ss}", NULL), &records, NULL, &error)) {
            GVariantIter iter;
            GVariant *record;
            g_variant_iter_init(&iter, records);
            while ((record = g_variant_iter_next_value(&iter)) != NULL) {
                const gchar *id = "", *type = "", *title = "";
                g_variant_lookup(record, "id", "&s", &id);
                g_variant_lookup(record, "type", "&s", &type);
                g_variant_lookup(record, "title", "&s", &title);
                printf("%s  %s  %s\n", id, type, title);
                g_variant_unref(record);
            }
            g_variant_unref(records);
        } else {
            fprintf(stderr, "baton-activities: %s\n", error->message);
            status = 1;
        }
    } else {
        fprintf(stderr, "usage: baton-activities [TYPE TITLE PAYLOAD]\n");
        status = 64;
    }
    g_clear_error(&error);
    g_object_unref(activities);
    return status;
}
