/* The price of overlap on synthetic kernel lists (timeline/contention.h):
 * every expected value is worked out by hand from the definition. Durations
 * are whole microseconds, so the sums are exact in binary. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/json.h"
#include "timeline/contention.h"

static ao_op kernel(const char *name, double s, double e, int lane)
{
    return (ao_op){.start_us = s,
                   .end_us = e,
                   .name = name,
                   .unit = -1,
                   .stream = (uint8_t)lane,
                   .cls = AO_CLASS_COMPUTE,
                   .kind = AO_KIND_NONE};
}

static ao_op coll(double s, double e)
{
    return (ao_op){.start_us = s,
                   .end_us = e,
                   .name = "ncclDevKernel_AllGather_RING_LL",
                   .unit = -1,
                   .stream = 7,
                   .cls = AO_CLASS_COMM,
                   .kind = AO_KIND_ALLGATHER};
}

static void learn_price(ao_contention *c, const ao_op *ops, size_t n, ao_contention_step *s)
{
    ao_contention_learn(c, ops, n);
    ao_contention_price(c, ops, n, s);
}

/* A compute-only step teaches each launch its alone time; in a train step
 * the second launch of "gemm" runs beside a collective: it is priced against
 * the second launch's own alone time (150), not the name's mean. */
static void test_exact_launch_reference(void **state)
{
    (void)state;
    ao_contention *c = ao_contention_create();
    ao_op base[] = {kernel("gemm", 0, 100, 0), kernel("gemm", 100, 250, 0)};
    ao_contention_step s;
    learn_price(c, base, 2, &s);
    assert_true(isnan(s.ms)); /* no collective: nothing to price */
    assert_int_equal(ao_contention_alone(c), 2);

    ao_op train[] = {kernel("gemm", 0, 100, 0), kernel("gemm", 100, 280, 0), coll(120, 400)};
    learn_price(c, train, 3, &s);
    assert_int_equal(ao_contention_alone(c), 3); /* the first launch ran alone again */
    assert_int_equal(s.beside, 1);
    assert_int_equal(s.priced, 1);
    assert_true(s.ms == 0.030);        /* 180 - 150 us */
    assert_true(s.beside_ms == 0.180); /* the beside launch's duration */
    assert_true(s.unpriced_ms == 0);
    assert_int_equal(s.ntop, 1);
    assert_string_equal(s.top[0].name, "gemm");
    assert_int_equal(s.top[0].beside, 1);
    assert_int_equal(s.top[0].priced, 1);
    assert_int_equal(s.top[0].alone, 3); /* 100, 150, 100 alone, by name */
    assert_true(s.top[0].beside_us == 180);
    assert_true(s.top[0].alone_us == 150);
    assert_true(s.top[0].excess_ms == 0.030);
    ao_contention_destroy(c);
}

/* A launch that never ran alone falls back to the name's alone mean; one
 * whose name never ran alone is unpriced time, not a guess. */
static void test_pooled_fallback_and_unpriced(void **state)
{
    (void)state;
    ao_contention *c = ao_contention_create();
    ao_op step[] = {kernel("ln", 0, 40, 0), kernel("ln", 40, 100, 0), kernel("cast", 100, 130, 0),
                    coll(50, 120)};
    ao_contention_step s;
    learn_price(c, step, 4, &s);
    assert_int_equal(s.beside, 2);
    assert_int_equal(s.priced, 1);
    assert_true(s.ms == 0.020);          /* ln #2: 60 - 40 (ln #1's time) */
    assert_true(s.beside_ms == 0.090);   /* 60 + 30 */
    assert_true(s.unpriced_ms == 0.030); /* cast never ran alone */
    assert_int_equal(s.ntop, 2);
    assert_string_equal(s.top[0].name, "ln");
    assert_true(s.top[0].excess_ms == 0.020);
    assert_string_equal(s.top[1].name, "cast");
    assert_int_equal(s.top[1].priced, 0);
    assert_true(isnan(s.top[1].beside_us) && isnan(s.top[1].alone_us));
    assert_true(s.top[1].excess_ms == 0);
    ao_contention_destroy(c);
}

/* Half-open intervals: ending where a collective starts is alone; any
 * overlap is beside; copies neither are priced nor make a kernel beside;
 * the input order does not matter (occurrences count by start); bytes tell
 * memsets apart; a faster beside instance counts negative. */
static void test_boundaries_copies_order_bytes(void **state)
{
    (void)state;
    ao_contention *c = ao_contention_create();
    ao_op base[] = {kernel("k", 0, 10, 0), kernel("k", 10, 30, 0)};
    base[0].bytes = 4;
    base[1].bytes = 8;
    ao_contention_step s;
    learn_price(c, base, 2, &s);
    ao_op copy = {.start_us = 0, .end_us = 100, .name = "memcpy", .cls = AO_CLASS_COPY};
    /* unordered: the 8-byte k (alone time 20) beside, the 4-byte one (10)
     * touching the collective's start, alone */
    ao_op train[] = {coll(10, 40), kernel("k", 12, 30, 0), kernel("k", 0, 10, 0), copy};
    train[1].bytes = 8;
    train[2].bytes = 4;
    learn_price(c, train, 4, &s);
    assert_int_equal(s.beside, 1);
    assert_true(s.ms == -0.002); /* 18 - 20 us: faster beside, kept negative */
    assert_int_equal(s.top[0].bytes, 8);
    assert_int_equal(s.top[0].alone, 1);
    ao_contention_destroy(c);
}

/* Lanes are part of a launch's identity: the same name on another stream is
 * another series; a series restarts its count every step. */
static void test_lanes_and_steps(void **state)
{
    (void)state;
    ao_contention *c = ao_contention_create();
    ao_op base[] = {kernel("k", 0, 10, 0), kernel("k", 0, 30, 1)};
    ao_contention_step s;
    for (int i = 0; i < 3; i++) learn_price(c, base, 2, &s);
    assert_int_equal(ao_contention_alone(c), 6);
    ao_op train[] = {kernel("k", 0, 14, 0), kernel("k", 0, 33, 1), coll(5, 6)};
    learn_price(c, train, 3, &s);
    assert_int_equal(s.beside, 2);
    assert_true(s.ms == 0.007); /* (14 - 10) + (33 - 30) */
    ao_contention_destroy(c);
}

/* Many distinct launches: the table grows and keeps every reference. */
static void test_many_keys(void **state)
{
    (void)state;
    ao_contention *c = ao_contention_create();
    enum { N = 3000 };
    ao_op *base = malloc((N + 1) * sizeof *base);
    char(*names)[16] = malloc(N * sizeof *names);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "k%d", i % 700);
        base[i] = kernel(names[i], 10.0 * i, 10.0 * i + 4, i % 3);
    }
    ao_contention_step s;
    learn_price(c, base, N, &s);
    assert_int_equal(ao_contention_alone(c), N);
    for (int i = 0; i < N; i++) base[i].end_us += 1; /* every one 1 us slower */
    base[N] = coll(0, 10.0 * N);
    ao_contention_price(c, base, N + 1, &s);
    assert_int_equal(s.beside, N);
    assert_int_equal(s.priced, N);
    assert_true(fabs(s.ms - N * 1e-3) < 1e-9);
    assert_int_equal(s.ntop, AO_CONTENTION_TOP);
    free(base);
    free(names);
    ao_contention_destroy(c);
}

/* The record's form: written once, read back by key. */
static void test_gen(void **state)
{
    (void)state;
    ao_contention *c = ao_contention_create();
    ao_op step[] = {kernel("ln", 0, 40, 0), kernel("ln", 40, 100, 0), coll(50, 120)};
    ao_contention_step s;
    learn_price(c, step, 3, &s);
    yajl_gen g = ao_json_gen_new(0);
    assert_int_equal(yajl_gen_map_open(g), yajl_gen_status_ok);
    assert_int_equal(ao_contention_step_gen(g, &s), yajl_gen_status_ok);
    assert_int_equal(yajl_gen_map_close(g), yajl_gen_status_ok);
    const unsigned char *buf;
    size_t len;
    yajl_gen_get_buf(g, &buf, &len);
    char err[128];
    yajl_val v = yajl_tree_parse((const char *)buf, err, sizeof err);
    assert_non_null(v);
    yajl_val o = ao_json_member(v, "contention");
    assert_true(ao_json_number(ao_json_member(o, "ms")) == 0.020);
    assert_true(ao_json_number(ao_json_member(o, "unpriced_ms")) == 0);
    yajl_val top = ao_json_member(o, "top");
    assert_true(YAJL_IS_ARRAY(top) && top->u.array.len == 1);
    yajl_val it = top->u.array.values[0];
    assert_string_equal(YAJL_GET_STRING(ao_json_member(it, "name")), "ln");
    assert_true(ao_json_number(ao_json_member(it, "alone_us")) == 40);
    assert_true(ao_json_number(ao_json_member(it, "beside_us")) == 60);
    yajl_tree_free(v);
    yajl_gen_free(g);
    ao_contention_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_launch_reference),
        cmocka_unit_test(test_pooled_fallback_and_unpriced),
        cmocka_unit_test(test_boundaries_copies_order_bytes),
        cmocka_unit_test(test_lanes_and_steps),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_gen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
