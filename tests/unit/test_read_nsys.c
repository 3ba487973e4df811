/* The Nsight Systems reader (ingest/read_nsys.c) on tests/data/nsys.sql, an
 * `nsys export --type sqlite` database written by hand to NVIDIA's documented
 * export schema (no machine here runs nsys): every field read checked against
 * values worked out by hand, then one test per kind of bad input: one error
 * line naming the file and the table, row or column, AO_EXIT_USAGE. */
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
#include "ingest/trace.h"

static void test_nsys(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char *db = make_db(dir, "job_rank_5.sqlite", "nsys.sql", NULL);
    ao_trace t;
    assert_int_equal(ao_read_nsys(db, &t), 0);
    assert_string_equal(t.format, "nsys");
    assert_string_equal(t.path, db);
    assert_int_equal(t.rank, 5); /* from the file name */
    assert_int_equal(t.world_size, -1);
    assert_string_equal(ao_trace_get_meta(&t, "device_name"), "NVIDIA H200");
    assert_string_equal(ao_trace_get_meta(&t, "nsys_export_schema"), "3.11.0");
    /* Kernels, the copy and the memset in one stream ordered by start. */
    assert_int_equal(t.nacts, 4);
    const ao_activity *a = t.acts;
    assert_int_equal(a[0].kind, AO_ACT_MEMCPY);
    assert_string_equal(a[0].name, "Memcpy HtoD"); /* copyKind 1 */
    assert_true(a[0].start_us == 1999995.0 && a[0].end_us == 1999999.0);
    assert_int_equal(a[0].bytes, 4194304);
    assert_int_equal(a[0].correlation, 500);
    assert_int_equal(a[0].stream, 7);
    assert_int_equal(a[1].kind, AO_ACT_KERNEL);
    assert_string_equal(a[1].name, /* the demangled name, not the short one */
                        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"
                        "(Params)");
    assert_true(a[1].start_us == 2000000.0 && a[1].end_us == 2000040.0);
    assert_int_equal(a[1].correlation, 501);
    assert_int_equal(a[1].device, 0);
    assert_int_equal(a[1].stream, 7);
    assert_int_equal(a[1].bytes, 0);
    assert_string_equal(
        a[2].name, "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    assert_true(a[2].start_us == 2000010.0 && a[2].end_us == 2000075.25);
    assert_int_equal(a[2].stream, 13);
    assert_int_equal(a[2].correlation, 502);
    assert_int_equal(a[3].kind, AO_ACT_MEMSET);
    assert_string_equal(a[3].name, "Memset");
    assert_int_equal(a[3].bytes, 65536);
    assert_true(a[3].start_us == 2000080.0 && a[3].end_us == 2000081.0);
    /* The runtime calls that issued those four; not cudaStreamSynchronize. */
    assert_int_equal(t.nlaunches, 4);
    static const int64_t corr[] = {500, 501, 502, 503};
    static const int64_t tid[] = {7001, 7001, 7002, 7001};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t.launches[i].correlation, corr[i]);
        assert_int_equal(t.launches[i].tid, tid[i]);
    }
    assert_true(t.launches[1].start_us == 1999996.0 && t.launches[1].end_us == 1999996.4);
    /* Closed push/pop and start/end ranges, the text inline or by textId; the
     * mark and the unclosed range are none. */
    assert_int_equal(t.nranges, 3);
    assert_string_equal(t.ranges[0].name, "ProfilerStep#7");
    assert_true(t.ranges[0].start_us == 1999990.0 && t.ranges[0].end_us == 2000100.0);
    assert_int_equal(t.ranges[0].tid, 7001);
    assert_string_equal(t.ranges[1].name, "forward");
    assert_string_equal(t.ranges[2].name, "step 8");
    assert_true(t.ranges[2].start_us == 2000100.0 && t.ranges[2].end_us == 2000200.0);
    assert_int_equal(t.ranges[2].tid, 7002);
    ao_trace_free(&t);
    free(db);
    remove_temp_dir(dir);
}

/* Only the kernel table is required: nsys creates the others when it
 * recorded something of their kind. */
static void test_nsys_minimal(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char *db =
        make_db(dir, "min.sqlite", "nsys.sql",
                "DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY; DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET;"
                " DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME; DROP TABLE NVTX_EVENTS;"
                " DROP TABLE TARGET_INFO_GPU; DROP TABLE META_DATA_EXPORT;"
                " ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName;");
    ao_trace t;
    assert_int_equal(ao_read_nsys(db, &t), 0);
    assert_int_equal(t.nacts, 2);
    assert_string_equal(t.acts[0].name, "ampere_sgemm_128x64_nn"); /* the short name */
    assert_int_equal(t.nranges, 0);
    assert_int_equal(t.nlaunches, 0);
    assert_int_equal(t.rank, -1);
    assert_null(ao_trace_get_meta(&t, "device_name"));
    ao_trace_free(&t);
    free(db);
    remove_temp_dir(dir);
}

static void expect_nsys_error(const char *extra, const char *needle)
{
    expect_db_error(ao_read_nsys, "bad.sqlite", "nsys.sql", extra, needle);
}

static void test_nsys_bad(void **state)
{
    (void)state;
    expect_nsys_error("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;",
                      "no CUPTI_ACTIVITY_KIND_KERNEL table");
    expect_nsys_error("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL;",
                      "table CUPTI_ACTIVITY_KIND_KERNEL is empty: no kernels");
    expect_nsys_error("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 'late' WHERE rowid = 2;",
                      "table CUPTI_ACTIVITY_KIND_KERNEL, row 2: column end is text, expected an "
                      "integer");
    expect_nsys_error("UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET bytes = '4 MiB';",
                      "table CUPTI_ACTIVITY_KIND_MEMCPY, row 1: column bytes is text, expected an "
                      "integer");
    expect_nsys_error("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 99 WHERE rowid = 1;"
                      " UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET shortName = 98 WHERE rowid = 1;",
                      "table CUPTI_ACTIVITY_KIND_KERNEL, row 1: no StringIds row for its name "
                      "(demangledName 99, shortName 98)");
    expect_nsys_error("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN streamId;",
                      "table CUPTI_ACTIVITY_KIND_KERNEL has no column streamId");
    expect_nsys_error("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName;"
                      " ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN shortName;",
                      "has no column demangledName or shortName");
    expect_nsys_error("DROP TABLE StringIds;", "no StringIds table");
    expect_nsys_error("UPDATE NVTX_EVENTS SET end = 1 WHERE text = 'forward';",
                      "table NVTX_EVENTS, row 2: end 1 is before start 2000000000");
    expect_nsys_error("UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = x'00' WHERE rowid = 3;",
                      "table CUPTI_ACTIVITY_KIND_RUNTIME, row 3: column globalTid is a blob");
}

static void test_nsys_not_a_database(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char *p = ao_asprintf("%s/report.nsys-rep", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    for (int i = 0; i < 64; i++) fputs("binary-ish report, not the sqlite export\n", f);
    fclose(f);
    stderr_capture cap;
    capture_begin(&cap);
    ao_trace t;
    assert_int_equal(ao_read_nsys(p, &t), AO_EXIT_USAGE);
    char *err = capture_end(&cap);
    assert_contains(err, "report.nsys-rep: not an SQLite database");
    assert_int_equal(count_lines(err), 1);
    free(err);
    free(p);
    remove_temp_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nsys),
        cmocka_unit_test(test_nsys_minimal),
        cmocka_unit_test(test_nsys_bad),
        cmocka_unit_test(test_nsys_not_a_database),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
