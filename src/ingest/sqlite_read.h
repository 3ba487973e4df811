/* Reading a profiler's SQLite database (rocpd, `nsys export --type sqlite`)
 * with one error path: every failure prints one line naming the file, and
 * the table, row and column where there is one. */
#ifndef AORTA_INGEST_SQLITE_READ_H
#define AORTA_INGEST_SQLITE_READ_H

#include <sqlite3.h>
#include <stdint.h>

#include "ingest/trace.h"

typedef struct ao_sql {
    sqlite3 *db;
    const char *path;
} ao_sql;

/* Opens `path` read-only and checks that it is an SQLite database. Returns 0
 * or AO_EXIT_USAGE after an error. */
int ao_sql_open(ao_sql *q, const char *path);
void ao_sql_close(ao_sql *q);

/* Whether the database has a table or view `name`. */
int ao_sql_has_table(ao_sql *q, const char *name);
/* Whether table or view `table` has column `col`. */
int ao_sql_has_column(ao_sql *q, const char *table, const char *col);
/* Each of the NULL-terminated `cols` is in `table`; else an error naming the
 * first missing one and AO_EXIT_USAGE. */
int ao_sql_require_columns(ao_sql *q, const char *table, const char *const *cols);

/* sqlite3_prepare_v2, or AO_EXIT_USAGE after an error. */
int ao_sql_prepare(ao_sql *q, const char *sql, sqlite3_stmt **st);
/* sqlite3_step: 1 for a row, 0 when done, -1 after an error. */
int ao_sql_step(ao_sql *q, sqlite3_stmt *st);

/* The row being read, for error messages: its table and its id there. */
typedef struct ao_sql_row {
    ao_sql *q;
    sqlite3_stmt *st;
    const char *table;
    int64_t id;
} ao_sql_row;

/* Result column `col` (named by its SQL alias in errors): an integer; with
 * ao_sql_int_or, NULL gives `dflt`. 0, or AO_EXIT_USAGE after an error
 * (*out then 0, or dflt). */
int ao_sql_int(const ao_sql_row *r, int col, int64_t *out);
int ao_sql_int_or(const ao_sql_row *r, int col, int64_t dflt, int64_t *out);
/* Result column `col` as text (NULL stays NULL when nullable). 0, or
 * AO_EXIT_USAGE after an error (*out then NULL). */
int ao_sql_text(const ao_sql_row *r, int col, int nullable, const char **out);
/* Result columns `col` and `col + 1`: start and end in nanoseconds, end not
 * before start, as microseconds. 0, or AO_EXIT_USAGE after an error. */
int ao_sql_times(const ao_sql_row *r, int col, double *start_us, double *end_us);
/* The two row loops the databases share. `st` selects (row id, start ns,
 * end ns, X, thread) ordered by start, where X is the correlation id for
 * launches and the name for ranges; the thread is kept modulo `tid_modulo`
 * (nsys packs the process id above the thread id; 0 keeps it whole). Both
 * finalize `st`. 0, or AO_EXIT_USAGE after an error naming `table`. */
/* Launches: the rows whose correlation id issued one of t's activities. */
int ao_sql_read_launches(ao_sql *q, sqlite3_stmt *st, const char *table, int64_t tid_modulo,
                         ao_trace *t);
/* Ranges: the named rows that last (marks and unnamed ranges are no steps). */
int ao_sql_read_ranges(ao_sql *q, sqlite3_stmt *st, const char *table, int64_t tid_modulo,
                       ao_trace *t);

#endif
