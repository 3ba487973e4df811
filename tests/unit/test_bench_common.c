/* What `aorta coll` and `aorta sdma` share: the result table (text, CSV, JSON
 * from the same cells), dtype element access, quantiles, and sdma's overlap
 * arithmetic on hand-computed values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "bench/sdma.h"
#include "bench/table.h"
#include "bench/values.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static const ao_column cols[] = {
    {"name", "name", "", 6, 0, 0},
    {"hidden", "hidden", "", 4, 0, AO_COL_NO_TEXT},
    {"t_us", "time", "(us)", 8, 2, 0},
    {"n", "n", "", 4, 0, 0},
};

static void test_table_formats(void **state)
{
    (void)state;
    ao_table *t = ao_table_new(cols, 4);
    int r = ao_table_add_row(t);
    ao_table_set_str(t, r, 0, "a,b");
    ao_table_set_int(t, r, 1, 7);
    ao_table_set_num(t, r, 2, 12.345);
    ao_table_set_int(t, r, 3, -1);
    r = ao_table_add_row(t);
    ao_table_set_str(t, r, 0, "x\"");
    ao_table_set_num(t, r, 2, NAN); /* absent: N/A, empty, null */
    ao_table_set_str(t, r, 2, "y"); /* overwrite frees the old cell */
    ao_table_set_num(t, r, 2, NAN);
    assert_int_equal(ao_table_rows(t), 2);
    assert_true(ao_table_num(t, 0, 2) == 12.345);
    assert_true(isnan(ao_table_num(t, 1, 2)));
    assert_true(isnan(ao_table_num(t, 0, 0)));

    char path[] = "/tmp/aorta_table_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    ao_table_print_header(t, f);
    ao_table_print_row(t, 0, f);
    ao_table_print_row(t, 1, f);
    fclose(f);
    assert_string_equal(slurp(path), "#   name     time    n\n"
                                     "#            (us)     \n"
                                     "     a,b    12.35   -1\n"
                                     "      x\"      N/A  N/A\n");
    assert_int_equal(ao_table_write_csv(t, path), 0);
    assert_string_equal(slurp(path), "name,hidden,t_us,n\n\"a,b\",7,12.345,-1\n\"x\"\"\",,,\n");

    assert_int_equal(ao_table_write_json(t, path), 0);
    char err[256];
    yajl_val root = yajl_tree_parse(slurp(path), err, sizeof err);
    assert_non_null(root);
    assert_true(YAJL_IS_ARRAY(root));
    assert_int_equal(root->u.array.len, 2);
    const char *p_t[] = {"t_us", NULL}, *p_h[] = {"hidden", NULL}, *p_n[] = {"name", NULL};
    yajl_val row0 = root->u.array.values[0], row1 = root->u.array.values[1];
    assert_true(YAJL_GET_DOUBLE(yajl_tree_get(row0, p_t, yajl_t_number)) == 12.345);
    assert_int_equal(YAJL_GET_INTEGER(yajl_tree_get(row0, p_h, yajl_t_number)), 7);
    assert_string_equal(YAJL_GET_STRING(yajl_tree_get(row0, p_n, yajl_t_string)), "a,b");
    assert_true(YAJL_IS_NULL(yajl_tree_get(row1, p_t, yajl_t_any)));
    yajl_tree_free(root);

    assert_int_equal(ao_table_write_csv(t, "/nonexistent-dir/x.csv"), -1);
    assert_int_equal(ao_table_write_json(t, "/nonexistent-dir/x.json"), -1);
    unlink(path);
    ao_table_free(t);
}

static void test_values(void **state)
{
    (void)state;
    unsigned char buf[64];
    const ao_dtype all[] = {AO_F32, AO_F16, AO_BF16, AO_F64, AO_I32,
                            AO_I8,  AO_U8,  AO_I64,  AO_U32, AO_U64};
    /* Small integers are exact in every dtype. */
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        for (int v = 0; v <= 100; v += 7) {
            ao_value_store(all[k], buf, 3, v);
            assert_true(ao_value_load(all[k], buf, 3) == v);
        }
    }
    /* Known bit patterns. */
    ao_value_store(AO_F16, buf, 0, 1.0);
    assert_int_equal(((uint16_t *)buf)[0], 0x3c00);
    ao_value_store(AO_F16, buf, 0, -2.5);
    assert_int_equal(((uint16_t *)buf)[0], 0xc100);
    ao_value_store(AO_BF16, buf, 0, 1.0);
    assert_int_equal(((uint16_t *)buf)[0], 0x3f80);
    /* Rounding: 257 is not a bf16 (8 bits): ties to even gives 256; 2049 in
     * fp16 gives 2048; fp16 overflows to infinity past 65504. */
    assert_true(ao_value_round(AO_BF16, 257) == 256);
    assert_true(ao_value_round(AO_BF16, 259) == 260);
    assert_true(ao_value_round(AO_F16, 2049) == 2048);
    assert_true(ao_value_round(AO_F16, 65504) == 65504);
    assert_true(isinf(ao_value_round(AO_F16, 70000)));
    assert_true(ao_value_round(AO_F16, ldexp(1, -24)) == ldexp(1, -24)); /* subnormal */
    /* Integers wrap like the device's: 256 -> 0 in int8, 300 -> 44 in uint8. */
    assert_true(ao_value_round(AO_I8, 256) == 0);
    assert_true(ao_value_round(AO_I8, 200) == -56);
    assert_true(ao_value_round(AO_U8, 300) == 44);
    /* All-ones bytes (the check's sentinel) are never a small integer. */
    memset(buf, 0xff, sizeof buf);
    assert_true(isnan(ao_value_load(AO_F32, buf, 0)));
    assert_true(isnan(ao_value_load(AO_BF16, buf, 0)));
    assert_true(ao_value_load(AO_I32, buf, 0) == -1);
}

static void test_quantile(void **state)
{
    (void)state;
    double v[] = {5, 1, 4, 2, 3};
    assert_true(ao_bench_quantile(v, 5, 0.5) == 3);
    assert_true(ao_bench_quantile(v, 5, 0.0) == 1);
    assert_true(ao_bench_quantile(v, 5, 1.0) == 5);
    assert_true(fabs(ao_bench_quantile(v, 5, 0.99) - 4.96) < 1e-12);
    assert_true(v[0] == 1 && v[4] == 5); /* sorted */
    double one = 7;
    assert_true(ao_bench_quantile(&one, 1, 0.99) == 7);
    assert_true(isnan(ao_bench_quantile(v, 0, 0.5)));
}

static void test_sdma_math(void **state)
{
    (void)state;
    /* gemm 10 ms, copy 4 ms, serial 14 ms */
    assert_true(fabs(ao_sdma_savings_pct(14, 10) - 400.0 / 14) < 1e-12); /* perfect */
    assert_true(fabs(ao_sdma_achieved(14, 10, 10, 4) - 1.0) < 1e-12);
    assert_true(fabs(ao_sdma_achieved(14, 12, 10, 4) - 0.5) < 1e-12);
    assert_true(fabs(ao_sdma_achieved(14, 14, 10, 4)) < 1e-12); /* none */
    assert_true(ao_sdma_savings_pct(14, 14) == 0);
    assert_true(isnan(ao_sdma_achieved(10, 9, 10, 0))); /* nothing to hide */
    assert_true(isnan(ao_sdma_achieved(9, 9, 10, 4)));  /* serial beat an op alone */
    assert_true(isnan(ao_sdma_savings_pct(0, 0)));
    assert_true(ao_interval_overlap(0, 10, 2, 5) == 3);
    assert_true(ao_interval_overlap(0, 10, 8, 12) == 2);
    assert_true(ao_interval_overlap(0, 10, 10, 12) == 0); /* touching is not overlapping */
    assert_true(ao_interval_overlap(3, 4, 0, 1) == 0);

    ao_sdma_direction d;
    assert_int_equal(ao_sdma_direction_parse("--direction", "p2p", &d), 0);
    assert_int_equal(d, AO_SDMA_P2P);
    assert_string_equal(ao_sdma_direction_name(AO_SDMA_D2H), "d2h");
    assert_int_equal(ao_sdma_direction_parse("--direction", "H2D", &d), -1);
    ao_sdma_engine e;
    assert_int_equal(ao_sdma_engine_parse("--engine", "kernel", &e), 0);
    assert_int_equal(e, AO_SDMA_KERNEL);
    assert_int_equal(ao_sdma_engine_parse("--engine", "sdma", &e), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_formats),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_quantile),
        cmocka_unit_test(test_sdma_math),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
