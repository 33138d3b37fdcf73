// Debian's libpq (libpq-dev), and what Swift cannot read of it directly.
#ifndef BATON_CPOSTGRES_SHIM_H
#define BATON_CPOSTGRES_SHIM_H

#include <libpq-fe.h>
#include <poll.h>
#include <sys/eventfd.h>

// The error fields are character constants ('C', 'M'), which Swift does not import.
static inline const char *baton_pq_sqlstate(const PGresult *result) {
    return PQresultErrorField(result, 'C');
}

static inline const char *baton_pq_primary_message(const PGresult *result) {
    return PQresultErrorField(result, 'M');
}

#endif
