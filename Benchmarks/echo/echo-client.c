/* Drives one method on one server and prints one JSON line: sequential round
 * trips (p50, p99) and throughput with WINDOW calls in flight, plus the server's
 * CPU time per call (all its threads, from /proc).
 * Usage: echo-client BUS_NAME SERVER_PID PAYLOAD_BYTES SEQUENTIAL_CALLS PIPELINED_CALLS WINDOW [METHOD [ARG]]
 * METHOD: echo (default: Echo(s) with PAYLOAD_BYTES), or batond's
 *   property (Properties.Get of Status.Version: no storage), get ARG=id,
 *   advertise ARG=type (payload of PAYLOAD_BYTES), advertise-searchable ARG=type (the same,
 *   eligible for search with the keyword "benchmark"), continue ARG=id, search ARG=query;
 *   or Zeitgeist's Log: zg-insert (one event, payload of PAYLOAD_BYTES),
 *   zg-find ARG (an actor, application://…, for every event of that actor; otherwise a
 *   subject text, matched whole, as Zeitgeist's templates match text), 10 most recent.
 * For search and zg-find the line also gives "results": how many records the last reply held. */
#include <dbus/dbus.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* On-CPU nanoseconds of each thread of a process, from /proc/PID/task/TID/schedstat. */
#define MAX_TASKS 512
struct task_cpu { int tid; unsigned long long ns; };
struct cpu_sample { int count; struct task_cpu tasks[MAX_TASKS]; };

static void sample_cpu(int pid, struct cpu_sample *sample) {
    char path[64];
    sample->count = 0;
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *tasks = opendir(path);
    if (!tasks) return;
    struct dirent *entry;
    while ((entry = readdir(tasks)) && sample->count < MAX_TASKS) {
        if (entry->d_name[0] == '.') continue;
        char stat[320];
        snprintf(stat, sizeof stat, "/proc/%d/task/%s/schedstat", pid, entry->d_name);
        FILE *f = fopen(stat, "r");
        if (!f) continue;
        unsigned long long ns = 0;
        if (fscanf(f, "%llu", &ns) == 1) {
            sample->tasks[sample->count].tid = atoi(entry->d_name);
            sample->tasks[sample->count].ns = ns;
            sample->count++;
        }
        fclose(f);
    }
    closedir(tasks);
}

/* CPU used between two samples, thread by thread. A sum over the threads alive at each
   moment went negative when a worker thread exited in between (batond's dispatch
   threads come and go); here a thread that started in between counts whole, and one
   that exited loses only what it used after the first sample. */
static unsigned long long cpu_between(const struct cpu_sample *before, const struct cpu_sample *after) {
    unsigned long long total = 0;
    for (int i = 0; i < after->count; i++) {
        unsigned long long base = 0;
        for (int j = 0; j < before->count; j++) {
            if (before->tasks[j].tid == after->tasks[i].tid) { base = before->tasks[j].ns; break; }
        }
        if (after->tasks[i].ns > base) total += after->tasks[i].ns - base;
    }
    return total;
}

static const char *destination;
static char *payload;
static const char *method = "echo";
static const char *argument = "";

/* Appends an a{ss} of `count` key/value pairs (keys and values alternating in `pairs`). */
static void append_options(DBusMessage *m, const char **pairs, int count) {
    DBusMessageIter iter, dict, entry;
    dbus_message_iter_init_append(m, &iter);  /* appends after the arguments already there */
    dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{ss}", &dict);
    for (int i = 0; i < count; i++) {
        dbus_message_iter_open_container(&dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
        dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &pairs[2 * i]);
        dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &pairs[2 * i + 1]);
        dbus_message_iter_close_container(&dict, &entry);
    }
    dbus_message_iter_close_container(&iter, &dict);
}

static void append_empty_options(DBusMessage *m) { append_options(m, NULL, 0); }

/* Zeitgeist's event: (as event_data, aas subjects, ay payload). Empty strings are wildcards in templates. */
static const char *zg_actor = "application://baton-bench.desktop";

static void append_strings(DBusMessageIter *parent, const char **items, int count) {
    DBusMessageIter array;
    dbus_message_iter_open_container(parent, DBUS_TYPE_ARRAY, "s", &array);
    for (int i = 0; i < count; i++) dbus_message_iter_append_basic(&array, DBUS_TYPE_STRING, &items[i]);
    dbus_message_iter_close_container(parent, &array);
}

static void append_zg_event(DBusMessageIter *events, const char *timestamp, const char *actor, const char *text,
                            const char *bytes, int length) {
    static unsigned long inserted;
    char uri[64] = "";
    if (*timestamp) snprintf(uri, sizeof uri, "baton-bench://activity/%d/%lu", (int)getpid(), inserted++);
    DBusMessageIter event, subjects, payload_array;
    const char *data[6] = {"", timestamp,
                           *actor ? "http://www.zeitgeist-project.com/ontologies/2010/01/27/zg#AccessEvent" : "",
                           *actor ? "http://www.zeitgeist-project.com/ontologies/2010/01/27/zg#UserActivity" : "",
                           actor, ""};
    const char *subject[9] = {uri, "", "", "", *actor ? "application/json" : "",
                              text, "", "", ""};
    dbus_message_iter_open_container(events, DBUS_TYPE_STRUCT, NULL, &event);
    append_strings(&event, data, 6);
    dbus_message_iter_open_container(&event, DBUS_TYPE_ARRAY, "as", &subjects);
    if (*actor || *text) append_strings(&subjects, subject, 9);
    dbus_message_iter_close_container(&event, &subjects);
    dbus_message_iter_open_container(&event, DBUS_TYPE_ARRAY, "y", &payload_array);
    dbus_message_iter_append_fixed_array(&payload_array, DBUS_TYPE_BYTE, &bytes, length);
    dbus_message_iter_close_container(&event, &payload_array);
    dbus_message_iter_close_container(events, &event);
}

static DBusMessage *make_call(void) {
    DBusMessage *m;
    if (strcmp(method, "echo") == 0) {
        m = dbus_message_new_method_call(destination, "/org/baton/Bench", "org.baton.Bench1", "Echo");
        dbus_message_append_args(m, DBUS_TYPE_STRING, &payload, DBUS_TYPE_INVALID);
    } else if (strcmp(method, "property") == 0) {
        const char *iface = "org.baton.Handoff1.Status", *name = "Version";
        m = dbus_message_new_method_call(destination, "/org/baton/Handoff1", "org.freedesktop.DBus.Properties", "Get");
        dbus_message_append_args(m, DBUS_TYPE_STRING, &iface, DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID);
    } else if (strcmp(method, "get") == 0) {
        m = dbus_message_new_method_call(destination, "/org/baton/Handoff1", "org.baton.Handoff1.Activities", "Get");
        dbus_message_append_args(m, DBUS_TYPE_STRING, &argument, DBUS_TYPE_INVALID);
    } else if (strcmp(method, "advertise") == 0 || strcmp(method, "advertise-searchable") == 0) {
        const char *title = "Benchmark";
        m = dbus_message_new_method_call(destination, "/org/baton/Handoff1", "org.baton.Handoff1.Activities", "Advertise");
        dbus_message_append_args(m, DBUS_TYPE_STRING, &argument, DBUS_TYPE_STRING, &title, DBUS_TYPE_STRING, &payload, DBUS_TYPE_INVALID);
        const char *searchable[] = {"eligible_for_search", "true", "keywords", "benchmark"};
        append_options(m, searchable, strcmp(method, "advertise") == 0 ? 0 : 2);
    } else if (strcmp(method, "continue") == 0) {
        m = dbus_message_new_method_call(destination, "/org/baton/Handoff1", "org.baton.Handoff1.Activities", "Continue");
        dbus_message_append_args(m, DBUS_TYPE_STRING, &argument, DBUS_TYPE_INVALID);
        append_empty_options(m);
    } else if (strcmp(method, "zg-insert") == 0) {
        char timestamp[32];
        snprintf(timestamp, sizeof timestamp, "%.0f", now_us() / 1000);  /* milliseconds, as Zeitgeist keeps them */
        m = dbus_message_new_method_call(destination, "/org/gnome/zeitgeist/log/activity", "org.gnome.zeitgeist.Log", "InsertEvents");
        DBusMessageIter iter, events;
        dbus_message_iter_init_append(m, &iter);
        dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "(asaasay)", &events);
        append_zg_event(&events, timestamp, zg_actor, "Benchmark", payload, (int)strlen(payload));
        dbus_message_iter_close_container(&iter, &events);
    } else if (strcmp(method, "zg-find") == 0) {
        m = dbus_message_new_method_call(destination, "/org/gnome/zeitgeist/log/activity", "org.gnome.zeitgeist.Log", "FindEvents");
        DBusMessageIter iter, range, templates;
        dbus_int64_t from = 0, to = INT64_MAX;
        dbus_uint32_t storage_any = 2, count = 10, most_recent_events = 0;
        dbus_message_iter_init_append(m, &iter);
        dbus_message_iter_open_container(&iter, DBUS_TYPE_STRUCT, NULL, &range);
        dbus_message_iter_append_basic(&range, DBUS_TYPE_INT64, &from);
        dbus_message_iter_append_basic(&range, DBUS_TYPE_INT64, &to);
        dbus_message_iter_close_container(&iter, &range);
        dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "(asaasay)", &templates);
        int by_actor = strncmp(argument, "application://", 14) == 0;
        append_zg_event(&templates, "", by_actor ? argument : "", by_actor ? "" : argument, "", 0);
        dbus_message_iter_close_container(&iter, &templates);
        dbus_message_iter_append_basic(&iter, DBUS_TYPE_UINT32, &storage_any);
        dbus_message_iter_append_basic(&iter, DBUS_TYPE_UINT32, &count);
        dbus_message_iter_append_basic(&iter, DBUS_TYPE_UINT32, &most_recent_events);
    } else {
        dbus_uint32_t limit = 10;
        m = dbus_message_new_method_call(destination, "/org/baton/Handoff1", "org.baton.Handoff1.Activities", "Search");
        dbus_message_append_args(m, DBUS_TYPE_STRING, &argument, DBUS_TYPE_UINT32, &limit, DBUS_TYPE_INVALID);
    }
    return m;
}

/* How many elements the reply's first argument holds, if it is an array; else -1. */
static int count_results(DBusMessage *reply) {
    DBusMessageIter iter, array;
    if (!dbus_message_iter_init(reply, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_ARRAY) return -1;
    int count = 0;
    dbus_message_iter_recurse(&iter, &array);
    while (dbus_message_iter_get_arg_type(&array) != DBUS_TYPE_INVALID) {
        count++;
        dbus_message_iter_next(&array);
    }
    return count;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static long completed, failed;
static DBusHandlerResult on_reply(DBusConnection *c, DBusMessage *m, void *d) {
    (void)c; (void)d;
    int type = dbus_message_get_type(m);
    if (type == DBUS_MESSAGE_TYPE_METHOD_RETURN) { completed++; return DBUS_HANDLER_RESULT_HANDLED; }
    if (type == DBUS_MESSAGE_TYPE_ERROR) { completed++; failed++; return DBUS_HANDLER_RESULT_HANDLED; }
    return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
}

int main(int argc, char **argv) {
    if (argc < 7) { fprintf(stderr, "usage: %s BUS_NAME SERVER_PID BYTES SEQUENTIAL PIPELINED WINDOW [METHOD [ARG]]\n", argv[0]); return 2; }
    if (argc > 7) method = argv[7];
    if (argc > 8) argument = argv[8];
    destination = argv[1];
    int pid = atoi(argv[2]);
    size_t bytes = strtoul(argv[3], NULL, 10);
    int sequential = atoi(argv[4]), pipelined = atoi(argv[5]), window = atoi(argv[6]);
    payload = malloc(bytes + 1);
    if ((strncmp(method, "advertise", 9) == 0 || strcmp(method, "zg-insert") == 0) && bytes >= 32) {
        /* a JSON object of about BYTES bytes: {"id":"x","t":"aaaa…"} */
        static const char prefix[] = "{\"id\":\"x\",\"t\":\"";
        size_t start = sizeof prefix - 1, filler = bytes - start - 2;
        memcpy(payload, prefix, start);
        for (size_t i = 0; i < filler; i++) payload[start + i] = 'a' + i % 26;
        memcpy(payload + start + filler, "\"}", 3);
    } else {
        for (size_t i = 0; i < bytes; i++) payload[i] = 'a' + i % 26;
        payload[bytes] = 0;
    }

    DBusError error;
    dbus_error_init(&error);
    DBusConnection *c = dbus_bus_get(DBUS_BUS_SESSION, &error);
    if (!c) { fprintf(stderr, "connect: %s\n", error.message); return 1; }

    /* Sequential: one call at a time, each timed. A short warm-up first. */
    double *samples = malloc(sizeof(double) * sequential);
    int results = -1;
    for (int i = -sequential / 10; i < sequential; i++) {
        DBusMessage *m = make_call();
        double start = now_us();
        DBusMessage *reply = dbus_connection_send_with_reply_and_block(c, m, 5000, &error);
        double elapsed = now_us() - start;
        dbus_message_unref(m);
        if (!reply) { fprintf(stderr, "call failed: %s\n", error.message); return 1; }
        if (strcmp(method, "search") == 0 || strcmp(method, "zg-find") == 0) results = count_results(reply);
        dbus_message_unref(reply);
        if (i >= 0) samples[i] = elapsed;
    }
    qsort(samples, sequential, sizeof(double), compare);

    /* Pipelined: keep WINDOW calls in flight until PIPELINED have been answered. */
    dbus_connection_add_filter(c, on_reply, NULL, NULL);
    long sent = 0;
    static struct cpu_sample cpu_before, cpu_after;
    sample_cpu(pid, &cpu_before);
    double start = now_us();
    while (completed < pipelined) {
        while (sent - completed < window && sent < pipelined) {
            DBusMessage *m = make_call();
            dbus_connection_send(c, m, NULL);
            dbus_message_unref(m);
            sent++;
        }
        if (!dbus_connection_read_write_dispatch(c, 5000)) { fprintf(stderr, "disconnected\n"); return 1; }
    }
    double elapsed = now_us() - start;
    sample_cpu(pid, &cpu_after);

    printf("{\"server\":\"%s\",\"method\":\"%s\",\"bytes\":%zu,\"p50_us\":%.2f,\"p99_us\":%.2f,\"calls_per_s\":%.0f,"
           "\"server_cpu_us_per_call\":%.3f,\"failed\":%ld,\"results\":%d}\n",
           destination, method, bytes, samples[sequential / 2], samples[(int)(sequential * 0.99)],
           pipelined / (elapsed / 1e6), cpu_between(&cpu_before, &cpu_after) / 1e3 / pipelined, failed, results);
    return failed ? 1 : 0;
}
