#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/json.h"
#include "ingest/reader_common.h"
#include "ingest/sqlite_read.h"

int ao_sql_open(ao_sql *q, const char *path)
{
    q->path = path;
    q->db = NULL;
    /* SQLite opens the file itself: check first that it is one (a FIFO would
     * block it). */
    int fd = ao_open_input(path, "database");
    if (fd < 0) return AO_EXIT_USAGE;
    close(fd);
    int rc = sqlite3_open_v2(path, &q->db, SQLITE_OPEN_READONLY, NULL);
    if (rc != SQLITE_OK) {
        ao_error(path, "cannot open as an SQLite database: %s",
                 q->db ? sqlite3_errmsg(q->db) : sqlite3_errstr(rc));
        ao_sql_close(q);
        return AO_EXIT_USAGE;
    }
    /* Opening is lazy: the first read of the schema tells a database from any
     * other file. */
    rc = sqlite3_exec(q->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        ao_error(path, "not an SQLite database: %s", sqlite3_errmsg(q->db));
        ao_sql_close(q);
        return AO_EXIT_USAGE;
    }
    return 0;
}

void ao_sql_close(ao_sql *q)
{
    if (q->db) sqlite3_close(q->db);
    q->db = NULL;
}

int ao_sql_prepare(ao_sql *q, const char *sql, sqlite3_stmt **st)
{
    if (sqlite3_prepare_v2(q->db, sql, -1, st, NULL) == SQLITE_OK) return 0;
    ao_error(q->path, "query failed: %s", sqlite3_errmsg(q->db));
    *st = NULL;
    return AO_EXIT_USAGE;
}

int ao_sql_step(ao_sql *q, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) return 1;
    if (rc == SQLITE_DONE) return 0;
    ao_error(q->path, "query failed: %s", sqlite3_errmsg(q->db));
    return -1;
}

/* 1 when the one-row query `sql` with text parameters a, b finds a row. */
static int exists(ao_sql *q, const char *sql, const char *a, const char *b)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK) return 0;
    sqlite3_bind_text(st, 1, a, -1, SQLITE_STATIC);
    if (b) sqlite3_bind_text(st, 2, b, -1, SQLITE_STATIC);
    int found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

int ao_sql_has_table(ao_sql *q, const char *name)
{
    return exists(q, "SELECT 1 FROM sqlite_master WHERE type IN ('table','view') AND name = ?1",
                  name, NULL);
}

int ao_sql_has_column(ao_sql *q, const char *table, const char *col)
{
    return exists(q, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2", table, col);
}

int ao_sql_require_columns(ao_sql *q, const char *table, const char *const *cols)
{
    for (; *cols; cols++)
        if (!ao_sql_has_column(q, table, *cols)) {
            ao_error(q->path, "table %s has no column %s", table, *cols);
            return AO_EXIT_USAGE;
        }
    return 0;
}

static const char *type_name(int type)
{
    switch (type) {
    case SQLITE_INTEGER:
        return "an integer";
    case SQLITE_FLOAT:
        return "a real";
    case SQLITE_TEXT:
        return "text";
    case SQLITE_BLOB:
        return "a blob";
    default:
        return "NULL";
    }
}

static int wrong_type(const ao_sql_row *r, int col, const char *want)
{
    ao_error(r->q->path, "table %s, row %lld: column %s is %s, expected %s", r->table,
             (long long)r->id, sqlite3_column_name(r->st, col),
             type_name(sqlite3_column_type(r->st, col)), want);
    return AO_EXIT_USAGE;
}

int ao_sql_int_or(const ao_sql_row *r, int col, int64_t dflt, int64_t *out)
{
    int type = sqlite3_column_type(r->st, col);
    *out = dflt;
    if (type == SQLITE_NULL) return 0;
    if (type != SQLITE_INTEGER) return wrong_type(r, col, "an integer");
    *out = sqlite3_column_int64(r->st, col);
    return 0;
}

int ao_sql_int(const ao_sql_row *r, int col, int64_t *out)
{
    *out = 0;
    if (sqlite3_column_type(r->st, col) != SQLITE_INTEGER) return wrong_type(r, col, "an integer");
    *out = sqlite3_column_int64(r->st, col);
    return 0;
}

int ao_sql_text(const ao_sql_row *r, int col, int nullable, const char **out)
{
    int type = sqlite3_column_type(r->st, col);
    *out = NULL;
    if (type == SQLITE_NULL && nullable) return 0;
    if (type != SQLITE_TEXT) return wrong_type(r, col, "text");
    *out = (const char *)sqlite3_column_text(r->st, col);
    return 0;
}

int ao_sql_times(const ao_sql_row *r, int col, double *start_us, double *end_us)
{
    int64_t s, e;
    if (ao_sql_int(r, col, &s) || ao_sql_int(r, col + 1, &e)) return AO_EXIT_USAGE;
    if (e < s) {
        ao_error(r->q->path, "table %s, row %lld: %s %lld is before %s %lld", r->table,
                 (long long)r->id, sqlite3_column_name(r->st, col + 1), (long long)e,
                 sqlite3_column_name(r->st, col), (long long)s);
        return AO_EXIT_USAGE;
    }
    *start_us = ao_ingest_ns_to_us(s);
    *end_us = ao_ingest_ns_to_us(e);
    return 0;
}

static int64_t thread_id(int64_t tid, int64_t tid_modulo)
{
    return tid < 0 || tid_modulo <= 0 ? tid : tid % tid_modulo;
}

int ao_sql_read_launches(ao_sql *q, sqlite3_stmt *st, const char *table, int64_t tid_modulo,
                         ao_trace *t)
{
    ao_corr_set ids;
    ao_corr_set_build(&ids, t);
    int r;
    while ((r = ao_sql_step(q, st)) == 1) {
        ao_sql_row row = {q, st, table, sqlite3_column_int64(st, 0)};
        double s, e;
        int64_t corr, tid;
        if (ao_sql_int_or(&row, 3, -1, &corr)) break;
        if (!ao_corr_set_has(&ids, corr)) continue;
        if (ao_sql_times(&row, 1, &s, &e) || ao_sql_int_or(&row, 4, -1, &tid)) break;
        ao_launch *l = ao_trace_add_launch(t);
        l->start_us = s;
        l->end_us = e;
        l->correlation = corr;
        l->tid = thread_id(tid, tid_modulo);
    }
    ao_corr_set_free(&ids);
    sqlite3_finalize(st);
    return r == 0 ? 0 : AO_EXIT_USAGE;
}

int ao_sql_read_ranges(ao_sql *q, sqlite3_stmt *st, const char *table, int64_t tid_modulo,
                       ao_trace *t)
{
    int r;
    while ((r = ao_sql_step(q, st)) == 1) {
        ao_sql_row row = {q, st, table, sqlite3_column_int64(st, 0)};
        double s, e;
        const char *name;
        int64_t tid;
        if (ao_sql_times(&row, 1, &s, &e) || ao_sql_text(&row, 3, 1, &name) ||
            ao_sql_int_or(&row, 4, -1, &tid))
            break;
        if (!name || e <= s) continue;
        ao_range *g = ao_trace_add_range(t);
        g->start_us = s;
        g->end_us = e;
        g->name = ao_trace_intern(t, name, (size_t)-1);
        g->tid = thread_id(tid, tid_modulo);
    }
    sqlite3_finalize(st);
    return r == 0 ? 0 : AO_EXIT_USAGE;
}
