// Debian's libsqlite3 (libsqlite3-dev), and what Swift cannot call of it directly.
#ifndef BATON_CSQLITE_SHIM_H
#define BATON_CSQLITE_SHIM_H

#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast of -1 to a function pointer, which Swift does not import: SQLite
// copies the bytes before the call returns, so Swift's buffer need not outlive it.
static inline int baton_sqlite3_bind_text(sqlite3_stmt *statement, int index, const char *text, int bytes) {
    return sqlite3_bind_text(statement, index, text, bytes, SQLITE_TRANSIENT);
}

static inline int baton_sqlite3_bind_blob(sqlite3_stmt *statement, int index, const void *bytes, int count) {
    return sqlite3_bind_blob(statement, index, bytes, count, SQLITE_TRANSIENT);
}

static inline void baton_sqlite3_result_text(sqlite3_context *context, const char *text, int bytes) {
    sqlite3_result_text(context, text, bytes, SQLITE_TRANSIENT);
}

// sqlite3_db_config is variadic. The options taken here are those with an int and an int*.
static inline int baton_sqlite3_db_config_flag(sqlite3 *db, int option, int value) {
    return sqlite3_db_config(db, option, value, (int *)0);
}

#endif
