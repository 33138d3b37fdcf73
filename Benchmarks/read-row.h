/* Get's storage floor, shared by get-floor.c and echo/echo-server.c: reads the row of activity
 * `id` with `row` (SELECT * FROM activity WHERE id = ?) as batond's reader does — bind, step,
 * every column, reset. Returns a count of what it read (so the reads are not optimised away),
 * or -1 when there is no such row. */
#include <sqlite3.h>

static long read_row(sqlite3_stmt *row, const char *id) {
    sqlite3_bind_text(row, 1, id, -1, SQLITE_STATIC);
    long bytes = -1;
    if (sqlite3_step(row) == SQLITE_ROW) {
        bytes = 0;
        for (int c = 0; c < sqlite3_column_count(row); c++) {
            switch (sqlite3_column_type(row, c)) {
            case SQLITE_INTEGER: bytes += sqlite3_column_int64(row, c) & 1; break;
            case SQLITE_TEXT: bytes += sqlite3_column_bytes(row, c) + (sqlite3_column_text(row, c) != NULL); break;
            case SQLITE_BLOB: bytes += sqlite3_column_bytes(row, c) + (sqlite3_column_blob(row, c) != NULL); break;
            default: break;
            }
        }
    }
    sqlite3_reset(row);
    sqlite3_clear_bindings(row);
    return bytes;
}
