/* Test databases for the SQLite trace readers: tests/data/NAME.sql (a
 * hand-written script to a vendor's documented schema) run into a fresh .db
 * file with the SQLite library, then `extra` SQL to spoil it for a bad-input
 * case. Include after <cmocka.h> and test_files.h. */
#ifndef AORTA_TESTS_SQL_FIXTURE_H
#define AORTA_TESTS_SQL_FIXTURE_H

#include <sqlite3.h>

#include "core/error.h"
#include "ingest/trace.h"

/* DIR/FILE built from tests/data/SCRIPT plus `extra` (may be NULL); heap path. */
static inline char *make_db(const char *dir, const char *file, const char *script,
                            const char *extra)
{
    const char *src = getenv("AORTA_SOURCE_DIR");
    char *sql_path = ao_asprintf("%s/tests/data/%s", src ? src : ".", script);
    char *sql = slurp(sql_path, NULL);
    if (!sql) print_error("cannot read %s\n", sql_path);
    assert_non_null(sql);
    char *db_path = ao_asprintf("%s/%s", dir, file);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc == SQLITE_OK && extra) rc = sqlite3_exec(db, extra, NULL, NULL, &err);
    if (rc != SQLITE_OK) print_error("%s: %s\n", sql_path, err ? err : "?");
    assert_int_equal(rc, SQLITE_OK);
    sqlite3_close(db);
    free(sql);
    free(sql_path);
    return db_path;
}

/* The number of lines in `text`. */
static inline int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++) n += *text == '\n';
    return n;
}

/* SCRIPT plus `extra` as DIR/FILE read with `read`: AO_EXIT_USAGE after one
 * error line naming FILE and holding `needle`. */
static inline void expect_db_error(int (*read)(const char *, ao_trace *), const char *file,
                                   const char *script, const char *extra, const char *needle)
{
    char *dir = make_temp_dir();
    char *db = make_db(dir, file, script, extra);
    stderr_capture cap;
    capture_begin(&cap);
    ao_trace t;
    int rc = read(db, &t);
    char *err = capture_end(&cap);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_contains(err, "aorta: error: ");
    assert_contains(err, file);
    assert_contains(err, needle);
    assert_int_equal(count_lines(err), 1);
    free(err);
    free(db);
    remove_temp_dir(dir);
}

#endif
