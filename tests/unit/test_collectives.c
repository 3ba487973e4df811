/* Collectives across ranks (runs/collectives.h, ingest/xrank.h) on hand-built
 * entries and traces with hand-computed answers: the matching key, skew,
 * late rank, transfer and busbw, clocks that disagree, the late windows and
 * what held them, who waited for whom per step, collectives.jsonl round
 * trip and bad lines, and a trace's pass, unit and sizes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "assert_close.h"

#include "core/error.h"
#include "ingest/analyze.h"
#include "ingest/xrank.h"
#include "runs/collectives.h"

static ao_coll_entry *entry(ao_coll_rank *r, long long step, const char *kind, uint64_t bytes,
                            double issue, double start, double end)
{
    ao_coll_entry *e = ao_coll_rank_add(r);
    e->step = step;
    e->kind = kind;
    e->bytes = bytes;
    e->issue_us = issue;
    e->start_us = start;
    e->end_us = end;
    e->group = ao_coll_rank_str(r, "0");
    e->group_size = 3;
    return e;
}

/* Three ranks, step 1: an all-gather (rank 2 last, 30 us after rank 0),
 * then an all-reduce that rank 1 lacks; step 2: an all-gather whose size
 * differs on rank 2. Matched by (step, group, order in it). */
static void three_ranks(ao_coll_rank r[3], ao_coll_set *s)
{
    memset(r, 0, 3 * sizeof *r);
    for (int i = 0; i < 3; i++) r[i].rank = i;
    entry(&r[0], 1, "allgather", 3000, 0, 100, 160);
    entry(&r[1], 1, "allgather", 3000, 0, 110, 160);
    entry(&r[2], 1, "allgather", 3000, 125, 130, 161);
    entry(&r[0], 1, "allreduce", 800, 170, 170, 200);
    entry(&r[2], 1, "allreduce", 800, 170, 180, 200);
    entry(&r[0], 2, "allgather", 3000, 300, 300, 400);
    entry(&r[1], 2, "allgather", 3000, 300, 300, 400);
    entry(&r[2], 2, "allgather", 6000, 300, 300, 400);
    ao_coll_match(r, 3, s);
}

static void free_ranks(ao_coll_rank r[3])
{
    for (int i = 0; i < 3; i++) ao_coll_rank_free(&r[i]);
}

static void test_match(void **state)
{
    (void)state;
    ao_coll_rank r[3];
    ao_coll_set s;
    three_ranks(r, &s);
    assert_int_equal(s.ninst, 3);
    const ao_coll_instance *ag = &s.inst[0], *ar = &s.inst[1], *ag2 = &s.inst[2];
    assert_string_equal(ag->kind, "allgather");
    assert_string_equal(ag->group, "0");
    assert_int_equal(ag->n, 3);
    assert_int_equal(ag->late_rank, 2);
    assert_close(ag->skew_us, 30, 1e-12);
    assert_close(ag->transfer_us, 31, 1e-12); /* the last end, 161, less the last start */
    /* 3000 B over 31 us, x (n-1)/n for an all-gather of 3 */
    assert_close(ag->algbw_gbps, 3000.0 / 31e3, 1e-12);
    assert_close(ag->busbw_gbps, 3000.0 / 31e3 * 2 / 3, 1e-12);
    assert_true(ag->consistent && ag->complete && ag->aligned);
    assert_true(isnan(ag->cause_us[0]));
    /* the all-reduce on two of three ranks: partial */
    assert_int_equal(ar->n, 2);
    assert_false(ar->complete);
    assert_int_equal(ar->late_rank, 2);
    assert_int_equal(s.members[ar->first + 1].rank, 2);
    /* sizes that differ: inconsistent */
    assert_false(ag2->consistent);
    assert_int_equal(s.inconsistent, 1);
    assert_int_equal(s.partial, 1);
    assert_int_equal(s.misaligned, 0);
    ao_coll_set_free(&s);
    free_ranks(r);
}

/* A rank that ends before the last one started: the clocks disagree. */
static void test_misaligned(void **state)
{
    (void)state;
    ao_coll_rank r[2] = {{.rank = 0}, {.rank = 1}};
    entry(&r[0], 0, "reducescatter", 64, NAN, 0, 10);
    entry(&r[1], 0, "reducescatter", 64, NAN, 50, 60);
    ao_coll_set s;
    ao_coll_match(r, 2, &s);
    assert_int_equal(s.ninst, 1);
    assert_false(s.inst[0].aligned);
    assert_int_equal(s.misaligned, 1);
    ao_coll_set_free(&s);
    ao_coll_rank_free(&r[0]);
    ao_coll_rank_free(&r[1]);
}

/* The communicator's own sequence numbers match entries whatever their
 * order, and entries without a group are matched by kind. */
static void test_keys(void **state)
{
    (void)state;
    ao_coll_rank r[2] = {{.rank = 0}, {.rank = 1}};
    ao_coll_entry *e;
    e = entry(&r[0], 0, "allgather", 8, NAN, 0, 5);
    e->seq = 7;
    e = entry(&r[0], 0, "allgather", 8, NAN, 10, 15);
    e->seq = 8;
    e = entry(&r[1], 0, "allgather", 8, NAN, 12, 15);
    e->seq = 8;
    e = entry(&r[1], 0, "allgather", 8, NAN, 3, 5);
    e->seq = 7;
    e = entry(&r[0], 0, "reducescatter", 8, NAN, 20, 30);
    e->group = -1;
    e = entry(&r[1], 0, "reducescatter", 8, NAN, 25, 30);
    e->group = -1;
    ao_coll_set s;
    ao_coll_match(r, 2, &s);
    assert_int_equal(s.ninst, 3);
    assert_int_equal(s.inst[0].seq, 7);
    assert_close(s.inst[0].skew_us, 3, 1e-12);
    assert_int_equal(s.inst[1].seq, 8);
    assert_close(s.inst[1].skew_us, 2, 1e-12);
    assert_null(s.inst[2].group); /* no communicator named: matched by kind */
    assert_int_equal(s.inst[2].late_rank, 1);
    ao_coll_set_free(&s);
    ao_coll_rank_free(&r[0]);
    ao_coll_rank_free(&r[1]);
}

static ao_op op(ao_op_class cls, double issue, double s, double e)
{
    return (ao_op){.cls = (uint8_t)cls,
                   .start_us = s,
                   .end_us = e,
                   .issue_us = issue,
                   .has_issue = !isnan(issue),
                   .kind = AO_KIND_NONE};
}

/* [0, 100): the collective issued at 40; compute [45, 60); another
 * collective [60, 70); idle [70, 100) with the collective queued: device
 * wait; [0, 40) not issued: host wait, 10 of it inside a data range. */
static void test_breakdown(void **state)
{
    (void)state;
    ao_op ops[] = {op(AO_CLASS_COMPUTE, 0, 45, 60), op(AO_CLASS_COMM, 0, 60, 70),
                   op(AO_CLASS_COMPUTE, 100, 100, 120)};
    ao_ival data[] = {{5, 15}};
    double us[AO_NCAUSES];
    ao_late_breakdown(ops, 3, data, 1, 0, 100, 40, -INFINITY, us);
    assert_close(us[AO_CAUSE_HOST_WAIT], 30, 1e-12);
    assert_close(us[AO_CAUSE_DATA_WAIT], 10, 1e-12);
    assert_close(us[AO_CAUSE_COMPUTE], 15, 1e-12);
    assert_close(us[AO_CAUSE_COLLECTIVE], 10, 1e-12);
    /* [40, 45) and [70, 100): idle, the collective queued */
    assert_close(us[AO_CAUSE_DEVICE_WAIT], 35, 1e-12);
    assert_close(us[AO_CAUSE_UNKNOWN], 0, 1e-12);
    assert_int_equal(ao_late_cause_top(us), AO_CAUSE_DEVICE_WAIT);
    /* without an issue time: idle with nothing queued is the host's
     * ([70, 100)), idle with the other ops queued a device wait ([20, 45));
     * before cover_from, unknown */
    ao_late_breakdown(ops, 3, NULL, 0, 0, 100, NAN, 20, us);
    assert_close(us[AO_CAUSE_UNKNOWN], 20, 1e-12);
    assert_close(us[AO_CAUSE_HOST_WAIT], 30, 1e-12);
    assert_close(us[AO_CAUSE_DEVICE_WAIT], 25, 1e-12);
    /* the index gives the same over a window */
    ao_ops_index x;
    ao_ops_index_init(&x, ops, 3);
    ao_late_window w = {0, 0, 100, 40};
    double v[AO_NCAUSES];
    ao_ops_index_breakdown(&x, data, 1, &w, 0, -INFINITY, v);
    ao_late_breakdown(ops, 3, data, 1, 0, 100, 40, -INFINITY, us);
    for (int c = 0; c < AO_NCAUSES; c++) assert_close(v[c], us[c], 1e-12);
}

/* Rank 2 late at two collectives whose waits overlap: its windows are
 * clipped, the others' waits are unions, per step and per rank. */
static void test_summary(void **state)
{
    (void)state;
    ao_coll_rank r[3] = {{.rank = 0}, {.rank = 1}, {.rank = 2}};
    entry(&r[0], 5, "allgather", 8, NAN, 0, 110);
    entry(&r[1], 5, "allgather", 8, NAN, 40, 110);
    entry(&r[2], 5, "allgather", 8, NAN, 100, 110);
    ao_coll_entry *e;
    e = entry(&r[0], 5, "reducescatter", 8, NAN, 20, 130);
    e->group = ao_coll_rank_str(&r[0], "1");
    e = entry(&r[1], 5, "reducescatter", 8, NAN, 20, 130);
    e->group = ao_coll_rank_str(&r[1], "1");
    e = entry(&r[2], 5, "reducescatter", 8, NAN, 120, 130);
    e->group = ao_coll_rank_str(&r[2], "1");
    ao_coll_set s;
    ao_coll_match(r, 3, &s);
    ao_late_window *w;
    size_t nw = ao_coll_late_windows(&s, 2, &w);
    assert_int_equal(nw, 2);
    assert_close(w[0].a, 0, 1e-12);
    assert_close(w[0].b, 100, 1e-12);
    assert_close(w[1].a, 100, 1e-12); /* clipped: [20, 100) was counted */
    assert_close(w[1].b, 120, 1e-12);
    free(w);
    for (size_t i = 0; i < s.ninst; i++)
        for (int c = 0; c < AO_NCAUSES; c++) s.inst[i].cause_us[c] = c == AO_CAUSE_COMPUTE ? 10 : 0;
    ao_coll_summary sum;
    ao_coll_summarize(&s, 3, &sum);
    assert_int_equal(sum.nsteps, 1);
    assert_int_equal(sum.steps[0].late_rank, 2);
    /* rank 0 waits [0, 120), rank 1 [20, 120): 120 and 100 us, mean 110 */
    assert_close(sum.steps[0].late_cost_ms, 0.110, 1e-12);
    assert_close(sum.ranks[0].waited_ms, 0.120, 1e-12);
    assert_close(sum.ranks[1].waited_ms, 0.100, 1e-12);
    assert_close(sum.ranks[2].cost_ms, 0.110, 1e-12);
    assert_int_equal(sum.ranks[2].late, 2);
    assert_close(sum.steps[0].cause_ms[AO_CAUSE_COMPUTE], 0.020, 1e-12);
    assert_int_equal(sum.waited_for, 2);
    ao_coll_summary_free(&sum);
    ao_coll_set_free(&s);
    for (int i = 0; i < 3; i++) ao_coll_rank_free(&r[i]);
}

static char *temp_path(void)
{
    char tmpl[] = "/tmp/aorta_test_collXXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    close(fd);
    unlink(tmpl);
    return ao_strdup(tmpl);
}

static void test_file(void **state)
{
    (void)state;
    ao_coll_rank r[3];
    ao_coll_set s;
    three_ranks(r, &s);
    s.inst[0].cause_us[AO_CAUSE_HOST_WAIT] = 25;
    for (int c = 1; c < AO_NCAUSES; c++) s.inst[0].cause_us[c] = c == AO_CAUSE_COMPUTE ? 5 : 0;
    s.inst[0].unit = ao_coll_set_str(&s, "layers.3");
    s.inst[0].pass = AO_PASS_BACKWARD;
    char *path = temp_path();
    assert_int_equal(ao_coll_write(path, &s), 0);
    assert_int_not_equal(ao_coll_write(path, &s), 0); /* never over an older file */
    ao_coll_set b;
    assert_int_equal(ao_coll_read(path, &b), 0);
    assert_int_equal(b.ninst, s.ninst);
    assert_int_equal(b.nranks, 3);
    for (size_t i = 0; i < s.ninst; i++) {
        const ao_coll_instance *x = &s.inst[i], *y = &b.inst[i];
        assert_int_equal(y->step, x->step);
        assert_int_equal(y->late_rank, x->late_rank);
        assert_int_equal(y->n, x->n);
        assert_true(y->skew_us == x->skew_us && y->transfer_us == x->transfer_us);
        assert_true(y->bytes == x->bytes && y->consistent == x->consistent);
        assert_string_equal(y->kind, x->kind);
        for (size_t m = 0; m < x->n; m++)
            assert_true(b.members[y->first + m].start_us == s.members[x->first + m].start_us);
    }
    assert_string_equal(b.inst[0].unit, "layers.3");
    assert_int_equal(b.inst[0].pass, AO_PASS_BACKWARD);
    assert_close(b.inst[0].cause_us[AO_CAUSE_HOST_WAIT], 25, 1e-12);
    assert_true(isnan(b.inst[1].cause_us[0]));
    ao_coll_set_free(&b);
    unlink(path);

    /* bad lines: one error, the file, the line and the key */
    static const char *const bad[] = {
        "{\"schema\":1}\n",
        "not json\n",
        "{\"schema\":2}\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(bad[i], f);
        fclose(f);
        assert_int_equal(ao_coll_read(path, &b), AO_EXIT_USAGE);
        unlink(path);
    }
    free(path);
    ao_coll_set_free(&s);
    free_ranks(r);
}

/* ---- a trace's side ----------------------------------------------------------------- */

static void test_range_words(void **state)
{
    (void)state;
    char u[64];
    assert_int_equal(ao_xrank_range_pass("FSDP::pre_backward (layers.3)"), AO_PASS_BACKWARD);
    assert_int_equal(ao_xrank_range_pass("FSDP::post_backward_reduce"), AO_PASS_BACKWARD);
    assert_int_equal(ao_xrank_range_pass("autograd::engine::evaluate_function"), AO_PASS_BACKWARD);
    assert_int_equal(ao_xrank_range_pass("FSDP::pre_forward"), AO_PASS_FORWARD);
    assert_int_equal(ao_xrank_range_pass("Optimizer.step#AdamW.step"), AO_PASS_OPTIMIZER);
    assert_int_equal(ao_xrank_range_pass("nccl:_all_gather_base"), AO_PASS_UNKNOWN);
    assert_int_equal(ao_xrank_range_pass("ProfilerStep#4"), AO_PASS_UNKNOWN);
    assert_true(ao_xrank_range_unit("FSDP::all_gather (layers.3)", u, sizeof u));
    assert_string_equal(u, "layers.3");
    assert_true(ao_xrank_range_unit("FSDP::pre_forward", u, sizeof u));
    assert_string_equal(u, "root");
    assert_false(ao_xrank_range_unit("FSDP::backward_prefetch for layers.2", u, sizeof u));
    assert_false(ao_xrank_range_unit("nccl:_all_gather_base", u, sizeof u));
}

static ao_activity *nccl(ao_trace *t, const char *name, double s, double e, int64_t corr,
                         const char *dtype, int64_t in, int64_t out)
{
    ao_activity *a = ao_trace_add_activity(t);
    a->name = ao_trace_intern(t, name, (size_t)-1);
    a->start_us = s;
    a->end_us = e;
    a->correlation = corr;
    a->kind = AO_ACT_KERNEL;
    ao_coll_args *c = ao_trace_add_coll_args(t, a);
    c->group = ao_trace_intern(t, "0", (size_t)-1);
    c->dtype = ao_trace_intern(t, dtype, (size_t)-1);
    c->in_nelems = in;
    c->out_nelems = out;
    c->group_size = 2;
    return a;
}

static void host(ao_trace *t, const char *name, double s, double e, int64_t tid, int launch,
                 int64_t corr)
{
    if (launch) {
        ao_launch *l = ao_trace_add_launch(t);
        l->start_us = s;
        l->end_us = e;
        l->correlation = corr;
        l->tid = tid;
        return;
    }
    ao_range *r = ao_trace_add_range(t);
    r->name = ao_trace_intern(t, name, (size_t)-1);
    r->start_us = s;
    r->end_us = e;
    r->tid = tid;
}

/* A gather launched inside FSDP's forward ranges of layers.0 on thread 1, a
 * reduce-scatter inside the backward ranges on thread 2, an all-reduce under
 * no range that says anything: pass, unit and bytes from the trace. */
static void test_trace_entries(void **state)
{
    (void)state;
    ao_trace t;
    ao_trace_init(&t, "rank0.json", "kineto");
    host(&t, "ProfilerStep#1", 0, 1000, 1, 0, 0);
    host(&t, "FSDP::pre_forward (layers.0)", 10, 60, 1, 0, 0);
    host(&t, "FSDP::all_gather (layers.0)", 20, 50, 1, 0, 0);
    host(&t, "FSDP::post_backward_reduce (layers.0)", 100, 150, 2, 0, 0);
    host(&t, "cudaLaunchKernel", 30, 32, 1, 1, 1);
    host(&t, "cudaLaunchKernel", 120, 122, 2, 1, 2);
    host(&t, "cudaLaunchKernel", 300, 302, 1, 1, 3);
    nccl(&t, "ncclDevKernel_AllGather_RING_LL", 40, 90, 1, "BFloat16", 100, 200);
    nccl(&t, "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", 130, 180, 2, "Float", 200, 100);
    nccl(&t, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 310, 320, 3, "Half", 50, 50);
    ao_classifier c;
    assert_int_equal(ao_classifier_init(&c, NULL, NULL), 0);
    ao_rank_result res;
    assert_int_equal(ao_analyze_trace(&t, &c, 2, &res), 0);
    assert_int_equal(res.ncomms, 3);
    ao_coll_rank cr = {0};
    ao_xrank_entries(&t, &res, 0, 10, &cr);
    assert_int_equal(cr.n, 3);
    const ao_coll_entry *ag = &cr.v[0], *rs = &cr.v[1], *ar = &cr.v[2];
    assert_string_equal(ag->kind, "allgather");
    assert_int_equal(ag->pass, AO_PASS_FORWARD);
    assert_string_equal(cr.strs[ag->unit], "layers.0");
    assert_int_equal(ag->bytes, 200 * 2);  /* the gathered output, bf16 */
    assert_close(ag->start_us, 30, 1e-12); /* less the origin */
    assert_close(ag->issue_us, 22, 1e-12); /* the launch call's end */
    assert_int_equal(ag->step, 1);
    assert_int_equal(rs->pass, AO_PASS_BACKWARD);
    assert_int_equal(rs->bytes, 200 * 4); /* the reduced input, fp32 */
    assert_int_equal(ar->pass, AO_PASS_UNKNOWN);
    assert_int_equal(ar->unit, -1);
    assert_int_equal(ar->bytes, 50 * 2);
    assert_string_equal(cr.strs[ag->group], "0");
    ao_coll_rank_free(&cr);
    ao_rank_result_free(&res);
    ao_classifier_free(&c);
    ao_trace_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match),       cmocka_unit_test(test_misaligned),
        cmocka_unit_test(test_keys),        cmocka_unit_test(test_breakdown),
        cmocka_unit_test(test_summary),     cmocka_unit_test(test_file),
        cmocka_unit_test(test_range_words), cmocka_unit_test(test_trace_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
