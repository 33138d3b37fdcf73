/* Get's storage floor: what SQLite itself costs to read one activity's row by id, in C.
 * Opens DATABASE read-only, prepares the row's SELECT once, and reads the row N times
 * (bind, step, every column, reset) inside one read transaction, as batond's reader does.
 * Usage: get-floor DATABASE ID N */
#include <stdio.h>
#include <stdlib.h>

#include "read-row.h"

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: get-floor DATABASE ID N\n"); return 2; }
    sqlite3 *db;
    if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) { fprintf(stderr, "%s\n", sqlite3_errmsg(db)); return 1; }
    sqlite3_stmt *row;
    if (sqlite3_prepare_v3(db, "SELECT * FROM activity WHERE id = ?", -1, SQLITE_PREPARE_PERSISTENT, &row, NULL) != SQLITE_OK) {
        fprintf(stderr, "%s\n", sqlite3_errmsg(db)); return 1;
    }
    sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    long n = atol(argv[3]), bytes = 0;
    for (long i = 0; i < n; i++) {
        long read = read_row(row, argv[2]);
        if (read < 0) { fprintf(stderr, "no row %s\n", argv[2]); return 1; }
        bytes += read;
    }
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    printf("%ld\n", bytes);
    sqlite3_finalize(row);
    sqlite3_close(db);
    return 0;
}
