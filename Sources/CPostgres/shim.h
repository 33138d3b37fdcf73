// Debian's libpq (libpq-dev's header), found at run time rather than linked: see baton_libpq_load.
#ifndef BATON_CPOSTGRES_SHIM_H
#define BATON_CPOSTGRES_SHIM_H

#include <dlfcn.h>
#include <poll.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include "/usr/include/postgresql/libpq-fe.h"

// The libpq functions Baton calls, each with libpq's own prototype.
struct baton_libpq {
#define BATON_LIBPQ_FUNCTIONS(X) \
    X(PQconnectStartParams) X(PQconnectPoll) X(PQstatus) X(PQsetnonblocking) X(PQsetNoticeReceiver) \
    X(PQsocket) X(PQerrorMessage) X(PQfinish) X(PQsendQueryParams) X(PQflush) X(PQconsumeInput) \
    X(PQisBusy) X(PQgetResult) X(PQresultStatus) X(PQresultErrorField) X(PQresultErrorMessage) \
    X(PQclear) X(PQnfields) X(PQntuples) X(PQftype) X(PQgetisnull) X(PQgetlength) X(PQgetvalue) \
    X(PQnotifies) X(PQfreemem)
#define BATON_LIBPQ_FIELD(name) __typeof__(&name) _Nonnull name;
    BATON_LIBPQ_FUNCTIONS(BATON_LIBPQ_FIELD)
#undef BATON_LIBPQ_FIELD
};

// Loads libpq.so.5 and finds its functions, once: the table, or NULL with dlerror's text in
// *error. batond opens libpq only when it syncs through PostgreSQL: linked, libpq and the
// libraries it needs (OpenSSL, GnuTLS, Kerberos, LDAP, SASL…) weighed on every idle batond's
// memory and every start (Benchmarks/README, "One program for what ships"). Called from one
// thread at a time.
static inline const struct baton_libpq *_Nullable baton_libpq_load(const char *_Nullable *_Nonnull error) {
    static struct baton_libpq functions;
    static int loaded;
    if (loaded) return &functions;
    void *library = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        *error = dlerror();
        return NULL;
    }
#define BATON_LIBPQ_FIND(name) \
    if ((*(void **)&functions.name = dlsym(library, #name)) == NULL) { *error = dlerror(); return NULL; }
    BATON_LIBPQ_FUNCTIONS(BATON_LIBPQ_FIND)
#undef BATON_LIBPQ_FIND
    loaded = 1;
    return &functions;
}

#endif
