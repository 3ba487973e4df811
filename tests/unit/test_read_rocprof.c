/* The rocprofv3 readers (ingest/read_rocprof_csv.c, ingest/read_rocpd.c) and
 * the CSV splitter under them, on hand-written files to rocprofv3's documented
 * layouts (tests/data/rocprof/, tests/data/rocpd.sql: no machine here runs
 * rocprofv3), every field checked against values worked out by hand, and one
 * test per kind of bad input: one error line naming the file and the line,
 * column or table, AO_EXIT_USAGE, nothing leaked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_files.h"
#include "sql_fixture.h"

#include "core/error.h"
#include "ingest/csv.h"
#include "ingest/reader_common.h"
#include "ingest/trace.h"

static char *data_path(const char *rel)
{
    const char *src = getenv("AORTA_SOURCE_DIR");
    return ao_asprintf("%s/tests/data/%s", src ? src : ".", rel);
}

static char *write_file(const char *dir, const char *name, const char *text)
{
    char *p = ao_asprintf("%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

/* ---- the CSV splitter ------------------------------------------------------ */

static void test_csv_quoting(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char *p = write_file(dir, "q.csv",
                         "\"A\",\"B\",C\r\n"
                         "\"x, y\",\"say \"\"hi\"\"\",3\r\n"
                         "\"two\nlines\",,\"\"\n"
                         "\n"
                         "plain,\"a\"\"\",-7");
    ao_csv c;
    assert_int_equal(ao_csv_open(&c, p), 0);
    assert_int_equal(ao_csv_column(&c, "B"), 1);
    assert_int_equal(ao_csv_column(&c, "C"), 2);
    assert_int_equal(ao_csv_column(&c, "D"), -1);
    assert_int_equal(ao_csv_next(&c), 1);
    assert_string_equal(c.fields[0], "x, y");
    assert_string_equal(c.fields[1], "say \"hi\"");
    int64_t v;
    assert_int_equal(ao_csv_i64(&c, 2, &v), 0);
    assert_int_equal(v, 3);
    assert_int_equal(ao_csv_next(&c), 1);
    assert_string_equal(c.fields[0], "two\nlines");
    assert_string_equal(c.fields[1], "");
    assert_string_equal(c.fields[2], "");
    assert_int_equal(c.rec_line, 3);
    assert_int_equal(ao_csv_next(&c), 1); /* the blank line is skipped */
    assert_int_equal(c.rec_line, 6);
    assert_string_equal(c.fields[1], "a\"");
    assert_int_equal(ao_csv_i64(&c, 2, &v), 0);
    assert_int_equal(v, -7);
    assert_int_equal(ao_csv_next(&c), 0);
    ao_csv_close(&c);
    free(p);
    remove_temp_dir(dir);
}

/* ao_csv_open + reading every record; returns the last result and what was
 * printed. */
static int csv_read_all(const char *text, char **err)
{
    char *dir = make_temp_dir();
    char *p = write_file(dir, "bad.csv", text);
    stderr_capture cap;
    capture_begin(&cap);
    ao_csv c;
    int r = ao_csv_open(&c, p) ? -1 : 1;
    while (r == 1) r = ao_csv_next(&c);
    if (c.f) ao_csv_close(&c);
    *err = capture_end(&cap);
    free(p);
    remove_temp_dir(dir);
    return r;
}

static void test_csv_bad_quoting(void **state)
{
    (void)state;
    char *err;
    assert_int_equal(csv_read_all("A,B\n\"open,1\n", &err), -1);
    assert_contains(err, "line 2: a quoted field is not closed");
    assert_int_equal(count_lines(err), 1);
    free(err);
    assert_int_equal(csv_read_all("A,B\n\"x\"y,1\n", &err), -1);
    assert_contains(err, "line 2, field 1: text after a quoted field's closing quote");
    free(err);
    assert_int_equal(csv_read_all("", &err), -1);
    assert_contains(err, "empty file");
    free(err);
    assert_int_equal(csv_read_all("A,B\n1,2\n3", &err), -1);
    assert_contains(err, "line 3: 1 fields where the header has 2");
    free(err);
}

static void test_rank_from_path(void **state)
{
    (void)state;
    assert_int_equal(ao_ingest_rank_from_path("out/rank_3/4242_kernel_trace.csv"), 3);
    assert_int_equal(ao_ingest_rank_from_path("job_rank-12.sqlite"), 12);
    assert_int_equal(ao_ingest_rank_from_path("RANK7.db"), 7);
    assert_int_equal(ao_ingest_rank_from_path("rank_1/sub/rank.2/x.db"), 2); /* the last */
    assert_int_equal(ao_ingest_rank_from_path("/home/frank_2/trace.db"), -1);
    assert_int_equal(ao_ingest_rank_from_path("ranking/rank_/x.db"), -1);
    assert_int_equal(ao_ingest_rank_from_path("rank_99999999999/x.db"), -1);
}

/* ---- rocprofv3 CSV ------------------------------------------------------------- */

static void check_rocprof_csv(const ao_trace *t)
{
    assert_string_equal(t->format, "rocprof-csv");
    assert_int_equal(t->rank, 1); /* the directory rank_1 */
    assert_int_equal(t->world_size, -1);
    /* Kernels in file order, then the copies. */
    assert_int_equal(t->nacts, 5);
    const ao_activity *a = t->acts;
    assert_int_equal(a[0].kind, AO_ACT_KERNEL);
    assert_string_equal(a[0].name, "void gemm<float, 128>(float*, float const*, int)");
    assert_true(a[0].start_us == 1000000.0 && a[0].end_us == 1000050.0);
    assert_int_equal(a[0].correlation, 101);
    assert_int_equal(a[0].device, 2);
    assert_int_equal(a[0].stream, 0);
    assert_int_equal(a[0].bytes, 0);
    assert_string_equal(a[1].name, "rcclKernel \"AllReduce\", ring");
    assert_true(a[1].start_us == 1000020.0 && a[1].end_us == 1000090.5);
    assert_int_equal(a[1].correlation, 102);
    assert_int_equal(a[1].stream, 7); /* Stream_Id, not Queue_Id */
    assert_string_equal(a[2].name, "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32");
    assert_true(a[2].end_us == 1000150.25);
    assert_int_equal(a[3].kind, AO_ACT_MEMCPY);
    assert_string_equal(a[3].name, "Memcpy HtoD");
    assert_true(a[3].start_us == 999990.0 && a[3].end_us == 999995.5);
    assert_int_equal(a[3].device, 2); /* the destination agent */
    assert_int_equal(a[3].stream, 3);
    assert_int_equal(a[3].correlation, 100);
    assert_string_equal(a[4].name, "Memcpy DtoH");
    assert_int_equal(a[4].device, 2); /* the source agent */
    /* Ranges: the two core-domain ranges; the instant mark and the control
     * domain's row are none. */
    assert_int_equal(t->nranges, 2);
    assert_string_equal(t->ranges[0].name, "step 1");
    assert_true(t->ranges[0].start_us == 999980.0 && t->ranges[0].end_us == 1000095.0);
    assert_int_equal(t->ranges[0].tid, 4243);
    assert_string_equal(t->ranges[1].name, "step 2");
    assert_true(t->ranges[1].start_us == 1000095.0 && t->ranges[1].end_us == 1000200.0);
    /* Launches: the HIP calls that issued something (not hipStreamSynchronize). */
    assert_int_equal(t->nlaunches, 5);
    static const int64_t corr[] = {100, 101, 102, 103, 106};
    for (int i = 0; i < 5; i++) assert_int_equal(t->launches[i].correlation, corr[i]);
    assert_true(t->launches[2].start_us == 999991.0 && t->launches[2].end_us == 999991.3);
    assert_int_equal(t->launches[2].tid, 4244);
    assert_string_equal(ao_trace_get_meta(t, "device_name"), "AMD Instinct MI300X");
}

static void test_rocprof_csv(void **state)
{
    (void)state;
    /* The kernel trace itself, its directory, and its prefix all read the same. */
    const char *forms[] = {"rocprof/rank_1/4242_kernel_trace.csv", "rocprof/rank_1",
                           "rocprof/rank_1/4242_", "rocprof/rank_1/4242"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *p = data_path(forms[i]);
        ao_trace t;
        assert_int_equal(ao_read_rocprof_csv(p, &t), 0);
        check_rocprof_csv(&t);
        assert_non_null(strstr(t.path, "4242_kernel_trace.csv"));
        ao_trace_free(&t);
        free(p);
    }
}

/* A copy of the test trace in a temporary directory with `file` replaced by
 * `text`; reads it and returns the result and what was printed. */
static int read_spoiled_csv(const char *file, const char *text, char **err)
{
    char *dir = make_temp_dir();
    static const char *const names[] = {"kernel_trace.csv", "memory_copy_trace.csv",
                                        "marker_api_trace.csv", "hip_api_trace.csv"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *rel = ao_asprintf("rocprof/rank_1/4242_%s", names[i]);
        char *src = data_path(rel);
        char *body = slurp(src, NULL);
        assert_non_null(body);
        char *dst = ao_asprintf("4242_%s", names[i]);
        free(write_file(dir, dst, strcmp(names[i], file) == 0 ? text : body));
        free(dst);
        free(body);
        free(src);
        free(rel);
    }
    char *kernel = ao_asprintf("%s/4242_kernel_trace.csv", dir);
    stderr_capture cap;
    capture_begin(&cap);
    ao_trace t;
    int rc = ao_read_rocprof_csv(kernel, &t);
    *err = capture_end(&cap);
    free(kernel);
    remove_temp_dir(dir);
    return rc;
}

#define KHDR                                                                                       \
    "\"Kind\",\"Agent_Id\",\"Queue_Id\",\"Kernel_Name\",\"Correlation_Id\",\"Start_Timestamp\","   \
    "\"End_Timestamp\"\n"

static void expect_csv_error(const char *file, const char *text, const char *needle)
{
    char *err;
    assert_int_equal(read_spoiled_csv(file, text, &err), AO_EXIT_USAGE);
    assert_contains(err, "aorta: error: ");
    assert_contains(err, file);
    assert_contains(err, needle);
    assert_int_equal(count_lines(err), 1);
    free(err);
}

static void test_rocprof_csv_bad(void **state)
{
    (void)state;
    /* A truncated last row. */
    expect_csv_error("kernel_trace.csv",
                     KHDR "\"KERNEL_DISPATCH\",1,1,\"k\",5,100,200\n\"KERNEL_DISPATCH\",1,",
                     "line 3: 3 fields where the header has 7 (a truncated row?)");
    /* A missing column. */
    expect_csv_error("kernel_trace.csv", "\"Kind\",\"Kernel_Name\",\"Start_Timestamp\"\n",
                     "line 1: the header has no column \"End_Timestamp\"");
    /* Not a number. */
    expect_csv_error("kernel_trace.csv", KHDR "\"KERNEL_DISPATCH\",1,1,\"k\",5,1e5,200\n",
                     "line 2, column Start_Timestamp: \"1e5\" is not an integer");
    expect_csv_error("kernel_trace.csv", KHDR "\"KERNEL_DISPATCH\",GPU1,1,\"k\",5,100,200\n",
                     "line 2, column Agent_Id: \"GPU1\" is not an agent id");
    expect_csv_error("kernel_trace.csv", KHDR "\"KERNEL_DISPATCH\",1,1,\"k\",5,300,200\n",
                     "line 2: End_Timestamp 200 is before Start_Timestamp 300");
    /* No kernels at all. */
    expect_csv_error("kernel_trace.csv", KHDR, "no kernel dispatches");
    /* A sibling's faults are reported against the sibling. */
    expect_csv_error("memory_copy_trace.csv", "\"Kind\",\"Start_Timestamp\",\"End_Timestamp\"\n",
                     "the header has no column \"Direction\"");
    expect_csv_error("marker_api_trace.csv",
                     "\"Domain\",\"Function\",\"Start_Timestamp\",\"End_Timestamp\"\n"
                     "\"MARKER_CORE_RANGE_API\",\"step\",10,x\n",
                     "line 2, column End_Timestamp: \"x\" is not an integer");
}

static void test_rocprof_csv_not_found(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    stderr_capture cap;
    capture_begin(&cap);
    ao_trace t;
    assert_int_equal(ao_read_rocprof_csv(dir, &t), AO_EXIT_USAGE); /* an empty directory */
    char *missing = ao_asprintf("%s/nothing_", dir);
    assert_int_equal(ao_read_rocprof_csv(missing, &t), AO_EXIT_USAGE);
    char *err = capture_end(&cap);
    assert_contains(err, "no *kernel_trace.csv files in the directory");
    assert_contains(err, "nothing_: not a rocprofv3 kernel trace");
    assert_int_equal(count_lines(err), 2);
    free(err);
    free(missing);
    remove_temp_dir(dir);
}

/* ---- rocpd ------------------------------------------------------------------- */

static void test_rocpd(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char *db = make_db(dir, "rank_9_results.db", "rocpd.sql", NULL);
    ao_trace t;
    assert_int_equal(ao_read_rocpd(db, &t), 0);
    assert_string_equal(t.format, "rocpd");
    assert_int_equal(t.rank, 3); /* the process environment's RANK beats the file name */
    assert_int_equal(t.world_size, 8);
    assert_string_equal(ao_trace_get_meta(&t, "device_name"), "AMD Instinct MI300X");
    /* Ordered by start: the copy, then the two kernels. */
    assert_int_equal(t.nacts, 3);
    const ao_activity *a = t.acts;
    assert_int_equal(a[0].kind, AO_ACT_MEMCPY);
    assert_string_equal(a[0].name, "Memcpy HtoD");
    assert_true(a[0].start_us == 5000005.0 && a[0].end_us == 5000007.5);
    assert_int_equal(a[0].bytes, 1048576);
    assert_int_equal(a[0].device, 0); /* the destination GPU's type index */
    assert_int_equal(a[0].stream, 3);
    assert_int_equal(a[0].correlation, 22);
    assert_int_equal(a[1].kind, AO_ACT_KERNEL);
    assert_string_equal(a[1].name, "void gemm<float, 128>(float*, float const*, int)");
    assert_true(a[1].start_us == 5000010.0 && a[1].end_us == 5000060.0);
    assert_int_equal(a[1].correlation, 20);
    assert_int_equal(a[1].device, 0);
    assert_int_equal(a[1].stream, 1);
    assert_string_equal(a[2].name, "ncclDevKernel_AllGather_RING_LL"); /* no display name */
    assert_true(a[2].end_us == 5000080.5);
    assert_int_equal(a[2].device, 1);
    assert_int_equal(a[2].stream, 2);
    assert_int_equal(a[2].correlation, 21);
    /* roctx ranges with their messages. */
    assert_int_equal(t.nranges, 2);
    assert_string_equal(t.ranges[0].name, "step 1");
    assert_true(t.ranges[0].start_us == 5000000.0 && t.ranges[0].end_us == 5000100.0);
    assert_int_equal(t.ranges[0].tid, 5151);
    assert_string_equal(t.ranges[1].name, "step 2");
    assert_true(t.ranges[1].end_us == 5000250.0);
    /* The three HIP calls that issued something, by start. */
    assert_int_equal(t.nlaunches, 3);
    assert_int_equal(t.launches[0].correlation, 20);
    assert_true(t.launches[0].start_us == 5000001.0 && t.launches[0].end_us == 5000001.5);
    assert_int_equal(t.launches[1].correlation, 21);
    assert_int_equal(t.launches[1].tid, 5152);
    assert_int_equal(t.launches[2].correlation, 22);
    ao_trace_free(&t);
    free(db);
    remove_temp_dir(dir);
}

static void expect_rocpd_error(const char *extra, const char *needle)
{
    expect_db_error(ao_read_rocpd, "bad.db", "rocpd.sql", extra, needle);
}

static void test_rocpd_bad(void **state)
{
    (void)state;
    expect_rocpd_error("DROP VIEW rocpd_kernel_dispatch;",
                       "no rocpd_kernel_dispatch table or view");
    expect_rocpd_error("UPDATE rocpd_kernel_dispatch_0001 SET start = 'soon' WHERE id = 2;",
                       "table rocpd_kernel_dispatch, row 2: column start is text, expected an "
                       "integer");
    expect_rocpd_error(
        "UPDATE rocpd_memory_copy_0001 SET size = 1.5 WHERE id = 1;",
        "table rocpd_memory_copy, row 1: column size is a real, expected an integer");
    expect_rocpd_error("UPDATE rocpd_region_0001 SET end = 4000000000 WHERE id = 2;",
                       "table rocpd_region, row 2: end 4000000000 is before start 5000100000");
    expect_rocpd_error("DROP VIEW rocpd_memory_copy; CREATE VIEW rocpd_memory_copy AS SELECT id,"
                       " guid, start, end FROM rocpd_memory_copy_0001;",
                       "table rocpd_memory_copy has no column name_id");
    expect_rocpd_error("DELETE FROM rocpd_kernel_dispatch_0001;", "no kernel dispatches");
}

static void test_not_a_database(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char *p = write_file(dir, "trace.db", "this is a CSV file, not a database\n1,2,3\n");
    stderr_capture cap;
    capture_begin(&cap);
    ao_trace t;
    assert_int_equal(ao_read_rocpd(p, &t), AO_EXIT_USAGE);
    char *missing = ao_asprintf("%s/absent.db", dir);
    assert_int_equal(ao_read_rocpd(missing, &t), AO_EXIT_USAGE);
    char *err = capture_end(&cap);
    assert_contains(err, "trace.db: not an SQLite database: file is not a database");
    assert_contains(err, "absent.db: cannot read the database: No such file or directory");
    assert_int_equal(count_lines(err), 2);
    free(err);
    free(missing);
    free(p);
    remove_temp_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_quoting),     cmocka_unit_test(test_csv_bad_quoting),
        cmocka_unit_test(test_rank_from_path),  cmocka_unit_test(test_rocprof_csv),
        cmocka_unit_test(test_rocprof_csv_bad), cmocka_unit_test(test_rocprof_csv_not_found),
        cmocka_unit_test(test_rocpd),           cmocka_unit_test(test_rocpd_bad),
        cmocka_unit_test(test_not_a_database),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
