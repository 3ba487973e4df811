/* attach/steps.h: records and marks cut into steps, with the three sources,
 * completion by settled records, late records, unseen steps and the switch
 * from windows to a better source. Times are given, never read. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attach/steps.h"

#define MS 1000000ull

typedef struct got {
    long long step[32];
    ao_step_source source[32];
    ao_overlap m[32];
    size_t nops[32];
    char name[32][32];
    int n;
} got;

static void collect(void *ctx, const ao_step_out *s)
{
    got *g = ctx;
    assert_true(g->n < 32);
    g->step[g->n] = s->step;
    g->source[g->n] = s->source;
    g->m[g->n] = s->m;
    g->nops[g->n] = s->nops;
    strncpy(g->name[g->n], s->name ? s->name : "", 31);
    g->n++;
}

static ao_cupti_record kernel(const char *name, uint64_t t0, uint64_t t1, uint32_t stream,
                              int64_t corr)
{
    return (ao_cupti_record){AO_CUPTI_KERNEL, t0, t1, stream, 0, name, corr};
}

static ao_steps *make(ao_step_source forced, const char *comm)
{
    ao_steps_opts o = {.forced = forced, .comm_regex = comm, .settle_ns = 10 * MS, .world_size = 2};
    ao_steps *s = ao_steps_new(&o, 0);
    assert_non_null(s);
    return s;
}

/* One NVTX step: compute [0,10) ms on stream 1, an all-reduce [6,14) on
 * stream 2, a memset on stream 1 (compute: the compute stream's) and a copy
 * on stream 3 [2,4); the range held ids (100, 200]. */
static void add_step(ao_steps *s, uint64_t base, int64_t c0, uint64_t arrived)
{
    ao_cupti_record r[] = {
        kernel("gemm", base, base + 6 * MS, 1, c0 + 1),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", base + 6 * MS, base + 14 * MS, 2, c0 + 3),
        kernel("gelu", base + 6 * MS, base + 10 * MS, 1, c0 + 4),
        {AO_CUPTI_MEMSET, base + 5 * MS, base + 5 * MS + 1000, 1, 4, "memset", c0 + 2},
        {AO_CUPTI_MEMCPY, base + 2 * MS, base + 4 * MS, 3, 1 << 20, "memcpy HtoD", c0 + 5},
    };
    for (size_t i = 0; i < sizeof r / sizeof *r; i++) ao_steps_add(s, &r[i], arrived);
}

static void test_nvtx_steps(void **state)
{
    (void)state;
    ao_steps *s = make(AO_STEP_NONE, NULL);
    assert_true(ao_steps_is_step_range(s, "step"));
    assert_true(ao_steps_is_step_range(s, "ProfilerStep#12"));
    assert_true(ao_steps_is_step_range(s, "train step 3"));
    assert_false(ao_steps_is_step_range(s, "forward"));
    got g = {0};
    add_step(s, 100 * MS, 100, 1000 * MS);
    ao_steps_add_mark(s, "step", 100, 200);
    /* nothing issued after the step has settled: not complete */
    ao_steps_advance(s, 1000 * MS, 0, collect, &g);
    assert_int_equal(g.n, 0);
    add_step(s, 200 * MS, 300, 1001 * MS);
    ao_steps_add_mark(s, "step", 300, 400);
    ao_steps_advance(s, 1005 * MS, 0, collect, &g); /* not settled yet */
    assert_int_equal(g.n, 0);
    ao_steps_advance(s, 1011 * MS, 0, collect, &g);
    assert_int_equal(g.n, 1);
    assert_int_equal(g.step[0], 0);
    assert_int_equal(g.source[0], AO_STEP_NVTX);
    assert_string_equal(g.name[0], "step");
    assert_int_equal(g.nops[0], 5);
    const ao_overlap *m = &g.m[0];
    assert_true(fabs(m->step_ms - 14) < 1e-9);
    assert_true(fabs(m->compute_ms - 10) < 1e-9);
    assert_true(fabs(m->comm_ms - 8) < 1e-9);
    assert_true(fabs(m->copy_ms - 2.001) < 1e-9); /* memsets are copies, as in analyze */
    assert_true(fabs(m->overlap_ms - 4) < 1e-9);
    assert_true(fabs(m->exposed_comm_ms - 4) < 1e-9);
    assert_true(fabs(m->overlap_ratio - 0.5) < 1e-9);
    assert_int_equal(m->kinds[AO_KIND_ALLREDUCE].ops, 1);
    /* a record of step 0 arriving now is late */
    ao_cupti_record late = kernel("gemm", 101 * MS, 102 * MS, 1, 150);
    ao_steps_add(s, &late, 1012 * MS);
    ao_steps_advance(s, 1012 * MS, 1, collect, &g);
    assert_int_equal(g.n, 2);
    assert_int_equal(g.step[1], 1);
    ao_steps_stats st;
    ao_steps_get_stats(s, &st);
    assert_int_equal(st.source, AO_STEP_NVTX);
    assert_int_equal(st.late, 1);
    assert_int_equal(st.emitted, 2);
    assert_int_equal(st.nchanges, 1);
    ao_steps_free(s);
}

static void test_aside_and_outside(void **state)
{
    (void)state;
    ao_steps *s = make(AO_STEP_NVTX, NULL);
    got g = {0};
    add_step(s, 100 * MS, 100, 0);
    ao_steps_add_mark(s, "step", 100, 200);
    ao_steps_aside(s, 200, 150 * MS);
    ao_steps_add_mark(s, "step", 300, 400); /* nothing recorded: aside */
    ao_steps_resume(s, 400, 250 * MS);
    add_step(s, 300 * MS, 500, 0);
    ao_steps_add_mark(s, "step", 500, 600);
    /* issued between ranges: in no step */
    ao_cupti_record between = kernel("x", 290 * MS, 291 * MS, 1, 450);
    ao_steps_add(s, &between, 0);
    ao_steps_advance(s, 100 * MS, 1, collect, &g);
    assert_int_equal(g.n, 2);
    assert_int_equal(g.step[0], 0);
    assert_int_equal(g.step[1], 2);
    ao_steps_stats st;
    ao_steps_get_stats(s, &st);
    assert_int_equal(st.nunseen, 1);
    assert_int_equal(st.unseen[0], 1);
    assert_int_equal(st.outside, 1);
    ao_steps_free(s);
}

static void test_kernel_steps(void **state)
{
    (void)state;
    ao_steps_opts o = {
        .forced = AO_STEP_KERNEL, .kernel_regex = "adam", .min_gap = 2, .settle_ns = 0};
    ao_steps *s = ao_steps_new(&o, 0);
    got g = {0};
    int64_t c = 1;
    uint64_t t = 0;
    /* step: fwd, bwd, norm(adam-like run), clip, adam, adam; a gap of one
     * kernel between two matching runs does not end the step */
    for (int step = 0; step < 3; step++) {
        const char *names[] = {"fwd", "bwd", "adam_norm", "clip", "adam_a", "adam_b"};
        for (int k = 0; k < 6; k++, t += MS) {
            ao_cupti_record r = kernel(names[k], t, t + MS, 1, c++);
            ao_steps_add(s, &r, 0);
        }
    }
    ao_steps_advance(s, 1, 0, collect, &g);
    assert_int_equal(g.n, 2); /* the third step's end is not known yet */
    assert_int_equal(g.nops[0], 6);
    assert_true(fabs(g.m[0].step_ms - 6) < 1e-9);
    ao_steps_advance(s, 1, 1, collect, &g);
    assert_int_equal(g.n, 3);
    assert_int_equal(g.source[2], AO_STEP_KERNEL);
    ao_steps_free(s);
}

static void test_windows_then_nvtx(void **state)
{
    (void)state;
    ao_steps_opts o = {.window_ms = 10, .settle_ns = 0, .comm_regex = "comm"};
    ao_steps *s = ao_steps_new(&o, 0);
    got g = {0};
    /* 60 ms of work, no marks: windows once 5 windows have passed */
    for (int i = 0; i < 12; i++) {
        ao_cupti_record r = kernel(i % 2 ? "my_comm" : "gemm", (uint64_t)i * 5 * MS,
                                   (uint64_t)i * 5 * MS + 4 * MS, (uint32_t)(1 + i % 2), i + 1);
        ao_steps_add(s, &r, 0);
    }
    ao_steps_advance(s, 1, 0, collect, &g);
    assert_true(g.n >= 5);
    assert_int_equal(g.source[0], AO_STEP_WINDOW);
    assert_int_equal(g.step[0], 0);
    assert_true(g.m[0].comm_ms > 0); /* --comm's regex */
    int before = g.n;
    /* an NVTX step: the source switches and stays */
    ao_cupti_record r = kernel("gemm", 100 * MS, 101 * MS, 1, 20);
    ao_steps_add(s, &r, 0);
    ao_steps_add_mark(s, "step", 19, 20);
    ao_steps_advance(s, 1, 1, collect, &g);
    assert_int_equal(g.source[g.n - 1], AO_STEP_NVTX);
    assert_true(g.n > before);
    ao_steps_stats st;
    ao_steps_get_stats(s, &st);
    assert_int_equal(st.nchanges, 2);
    assert_int_equal(st.changes[0].source, AO_STEP_WINDOW);
    assert_int_equal(st.changes[1].source, AO_STEP_NVTX);
    ao_steps_free(s);
}

static void test_regex_check(void **state)
{
    (void)state;
    assert_int_equal(ao_steps_regex_check("--step-nvtx", "^step$"), 0);
    assert_int_equal(ao_steps_regex_check("--step-nvtx", "(step"), 2);
    ao_steps_opts o = {.nvtx_regex = "(bad"};
    assert_null(ao_steps_new(&o, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nvtx_steps),   cmocka_unit_test(test_aside_and_outside),
        cmocka_unit_test(test_kernel_steps), cmocka_unit_test(test_windows_then_nvtx),
        cmocka_unit_test(test_regex_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
