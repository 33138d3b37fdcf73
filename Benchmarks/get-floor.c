/* Get's storage floor: what SQLite itself costs to read one activity's row by id, in C.
 * Opens DATABASE read-only, prepares the row's SELECT once, and reads the row N times
 * (bind, step, every column, reset) inside one read transaction, as batond's reader does.
 * Usage: get-floor DATABASE ID N */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

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
        sqlite3_bind_text(row, 1, argv[2], -1, SQLITE_STATIC);
        if (sqlite3_step(row) != SQLITE_ROW) { fprintf(stderr, "no row %s\n", argv[2]); return 1; }
        for (int c = 0; c < sqlite3_column_count(row); c++) {
            switch (sqlite3_column_type(row, c)) {
            case SQLITE_INTEGER: bytes += sqlite3_column_int64(row, c) & 1; break;
            case SQLITE_TEXT: bytes += sqlite3_column_bytes(row, c) + (sqlite3_column_text(row, c) != NULL); break;
            case SQLITE_BLOB: bytes += sqlite3_column_bytes(row, c) + (sqlite3_column_blob(row, c) != NULL); break;
            default: break;
            }
        }
        sqlite3_reset(row);
        sqlite3_clear_bindings(row);
    }
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    printf("%ld\n", bytes);
    sqlite3_finalize(row);
    sqlite3_close(db);
    return 0;
}
