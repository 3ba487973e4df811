/* aorta coll's device-free parts: size suffixes, size sweeps (-b/-e/-f/-i),
 * collective lists, counts per nccl-tests, bandwidth columns, and their
 * errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "bench/coll.h"
#include "core/units.h"

static void test_size_suffixes(void **state)
{
    (void)state;
    size_t v;
    assert_int_equal(ao_parse_size("-b", "0", &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(ao_parse_size("-b", "8", &v), 0);
    assert_int_equal(v, 8);
    assert_int_equal(ao_parse_size("-b", "1K", &v), 0);
    assert_int_equal(v, 1024);
    assert_int_equal(ao_parse_size("-b", "3k", &v), 0);
    assert_int_equal(v, 3072);
    assert_int_equal(ao_parse_size("-b", "64M", &v), 0);
    assert_int_equal(v, 64u << 20);
    assert_int_equal(ao_parse_size("-b", "2G", &v), 0);
    assert_int_equal(v, (size_t)2 << 30);
    assert_int_equal(ao_parse_size("-b", "1GiB", &v), 0);
    assert_int_equal(v, (size_t)1 << 30);
    assert_int_equal(ao_parse_size("-b", "16KB", &v), 0);
    assert_int_equal(v, 16384);
    assert_int_equal(ao_parse_size("-b", "1T", &v), 0);
    assert_int_equal(v, (size_t)1 << 40);
}

static void test_size_errors(void **state)
{
    (void)state;
    size_t v = 77;
    const char *bad[] = {
        "", "K", "-1", "1.5M", "12Q", "1MM", " 1", "1 K", "99999999999999999999", "17179869184G"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ao_parse_size("-b", bad[i], &v), -1);
        assert_int_equal(v, 77); /* untouched on error */
    }
    assert_int_equal(ao_parse_size("-b", NULL, &v), -1);
}

static void test_int_parsing(void **state)
{
    (void)state;
    int v = 5;
    assert_int_equal(ao_parse_int("-n", "20", 1, 100, &v), 0);
    assert_int_equal(v, 20);
    assert_int_equal(ao_parse_int("-n", "0", 1, 100, &v), -1);
    assert_int_equal(ao_parse_int("-n", "101", 1, 100, &v), -1);
    assert_int_equal(ao_parse_int("-n", "2x", 1, 100, &v), -1);
    assert_int_equal(ao_parse_int("-n", "", 1, 100, &v), -1);
    assert_int_equal(v, 20);
    double d;
    assert_int_equal(ao_parse_double("-x", "1e3", 0, 1e4, &d), 0);
    assert_true(d == 1000.0);
    assert_int_equal(ao_parse_double("-x", "nan", 0, 1e4, &d), -1);
}

static void expect_sizes(size_t min, size_t max, long f, size_t step, const size_t *want, int n)
{
    size_t *got = NULL;
    int count = ao_coll_size_list(min, max, f, step, &got);
    assert_int_equal(count, n);
    for (int i = 0; i < n; i++) assert_int_equal(got[i], want[i]);
    free(got);
}

static void test_size_lists(void **state)
{
    (void)state;
    /* -b 1K -e 1M -f 4 */
    const size_t f4[] = {1024, 4096, 16384, 65536, 262144, 1048576};
    expect_sizes(1024, 1u << 20, 4, 0, f4, 6);
    /* the last size is the largest not above max: -b 8 -e 100 -f 2 */
    const size_t f2[] = {8, 16, 32, 64};
    expect_sizes(8, 100, 2, 0, f2, 4);
    /* -b 32M -e 32M: one size */
    const size_t one[] = {32u << 20};
    expect_sizes(32u << 20, 32u << 20, 2, 0, one, 1);
    /* -i: add the step, include max when reached exactly */
    const size_t i1k[] = {1024, 2048, 3072, 4096};
    expect_sizes(1024, 4096, 0, 1024, i1k, 4);
    /* -b 0 with a step */
    const size_t z[] = {0, 512, 1024};
    expect_sizes(0, 1100, 0, 512, z, 3);
    /* no overflow near SIZE_MAX */
    const size_t big[] = {SIZE_MAX / 2 + 1};
    expect_sizes(SIZE_MAX / 2 + 1, SIZE_MAX, 2, 0, big, 1);
}

static void test_size_list_errors(void **state)
{
    (void)state;
    size_t *out = NULL;
    assert_int_equal(ao_coll_size_list(2048, 1024, 2, 0, &out), -1);  /* min > max */
    assert_int_equal(ao_coll_size_list(8, 1024, 1, 0, &out), -1);     /* factor 1 */
    assert_int_equal(ao_coll_size_list(8, 1024, 2, 8, &out), -1);     /* both */
    assert_int_equal(ao_coll_size_list(8, 1024, 0, 0, &out), -1);     /* neither */
    assert_int_equal(ao_coll_size_list(0, 1024, 2, 0, &out), -1);     /* 0 never grows */
    assert_int_equal(ao_coll_size_list(1, 1u << 30, 0, 1, &out), -1); /* too many sizes */
    assert_null(out);
}

static void test_coll_lists(void **state)
{
    (void)state;
    ao_coll c[AO_NCOLLS];
    int n = 0;
    assert_int_equal(
        ao_coll_list_parse("--coll", "all_reduce,all_gather,reduce_scatter,broadcast", c, &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(c[0], AO_ALLREDUCE);
    assert_int_equal(c[1], AO_ALLGATHER);
    assert_int_equal(c[2], AO_REDUCESCATTER);
    assert_int_equal(c[3], AO_BROADCAST);
    assert_int_equal(ao_coll_list_parse("--coll", "alltoall,sendrecv,reduce", c, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(c[2], AO_REDUCE);
    n = 9;
    assert_int_equal(ao_coll_list_parse("--coll", "all_reduce,all_reduce", c, &n), -1);
    assert_int_equal(ao_coll_list_parse("--coll", "all_reduce,allreduce", c, &n), -1);
    assert_int_equal(ao_coll_list_parse("--coll", "all_reduce,gather", c, &n), -1);
    assert_int_equal(ao_coll_list_parse("--coll", ",", c, &n), -1);
    assert_int_equal(ao_coll_list_parse("--coll", "", c, &n), -1);
    assert_int_equal(n, 9);
}

static void test_combine_and_gemm_shape(void **state)
{
    (void)state;
    ao_time_combine c;
    assert_int_equal(ao_time_combine_parse("-a", "avg", &c), 0);
    assert_int_equal(c, AO_COMBINE_AVG);
    assert_int_equal(ao_time_combine_parse("-a", "2", &c), 0); /* nccl-tests: 2 = min */
    assert_int_equal(c, AO_COMBINE_MIN);
    assert_int_equal(ao_time_combine_parse("-a", "0", &c), 0);
    assert_int_equal(c, AO_COMBINE_RANK0);
    assert_int_equal(ao_time_combine_parse("-a", "max", &c), 0);
    assert_int_equal(c, AO_COMBINE_MAX);
    assert_int_equal(ao_time_combine_parse("-a", "4", &c), -1);
    assert_int_equal(ao_time_combine_parse("-a", "mean", &c), -1);

    int m, n, k, set;
    ao_dtype t = AO_F32;
    assert_int_equal(ao_gemm_shape_parse("--with-compute", "8192,4096,1024", &m, &n, &k, &t, &set),
                     0);
    assert_int_equal(m, 8192);
    assert_int_equal(n, 4096);
    assert_int_equal(k, 1024);
    assert_int_equal(set, 0);
    assert_int_equal(ao_gemm_shape_parse("--with-compute", "64,64,64,bf16", &m, &n, &k, &t, &set),
                     0);
    assert_int_equal(set, 1);
    assert_int_equal(t, AO_BF16);
    const char *bad[] = {"64,64",          "64,64,64,64,64", "64,0,64", "a,b,c",
                         "64,64,64,int32", "64,64,64,nope",  "64,,64"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(ao_gemm_shape_parse("--with-compute", bad[i], &m, &n, &k, &t, &set), -1);
}

static void test_shapes(void **state)
{
    (void)state;
    ao_coll_shape s;
    /* all_reduce 1 MiB float on 2 ranks: the whole buffer */
    ao_coll_shape_for(AO_ALLREDUCE, 1u << 20, AO_F32, 2, &s);
    assert_int_equal(s.count, 262144);
    assert_int_equal(s.bytes, 1u << 20);
    assert_int_equal(s.send_elems, 262144);
    assert_int_equal(s.recv_elems, 262144);
    /* all_gather: count per rank, size = the receive buffer */
    ao_coll_shape_for(AO_ALLGATHER, 1u << 20, AO_F32, 2, &s);
    assert_int_equal(s.count, 131072);
    assert_int_equal(s.bytes, 1u << 20);
    assert_int_equal(s.send_elems, 131072);
    assert_int_equal(s.recv_elems, 262144);
    /* reduce_scatter: count = what each rank receives, size = the send buffer */
    ao_coll_shape_for(AO_REDUCESCATTER, 1u << 20, AO_F32, 2, &s);
    assert_int_equal(s.count, 131072);
    assert_int_equal(s.send_elems, 262144);
    assert_int_equal(s.recv_elems, 131072);
    /* rounding: 1000 B of float on 3 ranks: 250 elements -> 83 per rank -> 996 B */
    ao_coll_shape_for(AO_ALLGATHER, 1000, AO_F32, 3, &s);
    assert_int_equal(s.count, 83);
    assert_int_equal(s.bytes, 996);
    ao_coll_shape_for(AO_ALLTOALL, 1000, AO_F32, 3, &s);
    assert_int_equal(s.count, 83);
    assert_int_equal(s.bytes, 996);
    assert_int_equal(s.send_elems, 249);
    /* sizes below one element per rank become 0 */
    ao_coll_shape_for(AO_REDUCESCATTER, 6, AO_F64, 2, &s);
    assert_int_equal(s.count, 0);
    assert_int_equal(s.bytes, 0);
    /* broadcast: odd byte counts round down to whole elements */
    ao_coll_shape_for(AO_BROADCAST, 1023, AO_BF16, 8, &s);
    assert_int_equal(s.count, 511);
    assert_int_equal(s.bytes, 1022);
    assert_false(ao_coll_has_inplace(AO_ALLTOALL));
    assert_true(ao_coll_has_inplace(AO_ALLGATHER));
    assert_true(ao_coll_has_root(AO_REDUCE));
    assert_false(ao_coll_has_root(AO_ALLREDUCE));
    assert_true(ao_coll_reduces(AO_REDUCESCATTER));
    assert_false(ao_coll_reduces(AO_BROADCAST));
}

static void test_bandwidth_columns(void **state)
{
    (void)state;
    /* 1 MiB in 100 us = 10.48576 GB/s */
    double algbw = ao_algbw_gbps(1u << 20, 100.0);
    assert_true(fabs(algbw - 10.48576) < 1e-9);
    /* all_reduce on 8 ranks: busbw = algbw * 2 * 7 / 8 */
    assert_true(fabs(algbw * ao_coll_busbw_factor(AO_ALLREDUCE, 8) - 18.35008) < 1e-9);
    /* all_gather on 4 ranks: x 3/4; broadcast: x 1 */
    assert_true(fabs(algbw * ao_coll_busbw_factor(AO_ALLGATHER, 4) - 7.86432) < 1e-9);
    assert_true(fabs(algbw * ao_coll_busbw_factor(AO_BROADCAST, 4) - algbw) < 1e-12);
    /* one rank moves nothing over a bus */
    assert_true(ao_coll_busbw_factor(AO_ALLREDUCE, 1) == 0.0);
    assert_true(isnan(ao_algbw_gbps(1024, 0.0)));
    assert_true(isnan(ao_algbw_gbps(1024, -1.0)));
    assert_true(ao_algbw_gbps(0, 5.0) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_suffixes),
        cmocka_unit_test(test_size_errors),
        cmocka_unit_test(test_int_parsing),
        cmocka_unit_test(test_size_lists),
        cmocka_unit_test(test_size_list_errors),
        cmocka_unit_test(test_coll_lists),
        cmocka_unit_test(test_combine_and_gemm_shape),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_bandwidth_columns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
