/* §7 overlap metrics: hand-computed iterations, busbw factors, the
 * decomposition, then random op sets checked against invariants and against a
 * brute-force computation over unit cells. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "assert_close.h"

#include "core/intervals.h"
#include "core/metrics.h"

static ao_op op(double s, double e, ao_stream_id stream, ao_op_class cls, ao_coll_kind kind,
                uint64_t bytes)
{
    return (ao_op){.start_us = s,
                   .end_us = e,
                   .bytes = bytes,
                   .name = "op",
                   .unit = -1,
                   .stream = (uint8_t)stream,
                   .cls = (uint8_t)cls,
                   .kind = (int8_t)kind};
}

static ao_op compute(double s, double e)
{
    return op(s, e, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE, 0);
}

static ao_op comm(double s, double e, ao_coll_kind kind, uint64_t bytes)
{
    ao_stream_id st = kind == AO_KIND_ALLGATHER       ? AO_STREAM_ALLGATHER
                      : kind == AO_KIND_REDUCESCATTER ? AO_STREAM_REDUCESCATTER
                                                      : AO_STREAM_ALLREDUCE;
    return op(s, e, st, AO_CLASS_COMM, kind, bytes);
}

static ao_op copy(double s, double e, uint64_t bytes)
{
    return op(s, e, AO_STREAM_H2D, AO_CLASS_COPY, AO_KIND_NONE, bytes);
}

#define N(a)          (sizeof(a) / sizeof((a)[0]))
#define NEAR(x, want) assert_close((x), (want), 1e-12)

static void test_empty_iteration(void **state)
{
    (void)state;
    ao_overlap o;
    ao_overlap_compute(NULL, 0, 8, &o);
    assert_true(o.step_ms == 0 && o.compute_ms == 0 && o.comm_ms == 0 && o.copy_ms == 0);
    assert_true(o.overlap_ms == 0 && o.exposed_comm_ms == 0 && o.idle_ms == 0);
    assert_true(isnan(o.overlap_ratio) && isnan(o.compute_covered_ratio));
    assert_true(isnan(o.overlap_efficiency));
    for (int k = 0; k < AO_NKINDS; k++) assert_true(o.kinds[k].algbw_gbps == 0);
}

static void test_compute_only(void **state)
{
    (void)state;
    ao_op ops[] = {compute(150, 250), compute(0, 100)};
    ao_overlap o;
    ao_overlap_compute(ops, N(ops), 8, &o);
    assert_true(o.window_start_us == 0 && o.window_end_us == 250);
    NEAR(o.step_ms, 0.25);
    NEAR(o.compute_ms, 0.2);
    assert_true(o.comm_ms == 0 && o.overlap_ms == 0 && o.exposed_comm_ms == 0);
    NEAR(o.idle_ms, 0.05);
    assert_true(isnan(o.overlap_ratio));
    assert_true(o.compute_covered_ratio == 0);
    assert_true(isnan(o.overlap_efficiency));
    assert_int_equal(o.streams[AO_STREAM_COMPUTE].ops, 2);
    NEAR(o.streams[AO_STREAM_COMPUTE].busy_ms, 0.2);
}

static void test_comm_only(void **state)
{
    (void)state;
    ao_op ops[] = {comm(10, 60, AO_KIND_ALLREDUCE, 1000000)};
    ao_overlap o;
    ao_overlap_compute(ops, 1, 8, &o);
    NEAR(o.step_ms, 0.05);
    NEAR(o.comm_ms, 0.05);
    NEAR(o.exposed_comm_ms, 0.05);
    assert_true(o.overlap_ms == 0 && o.idle_ms == 0);
    assert_true(o.overlap_ratio == 0);
    assert_true(isnan(o.compute_covered_ratio) && isnan(o.overlap_efficiency));
    /* 1e6 bytes in 50 us = 20 GB/s; allreduce at n=8: x 2*7/8 */
    assert_int_equal(o.kinds[AO_KIND_ALLREDUCE].ops, 1);
    assert_int_equal(o.kinds[AO_KIND_ALLREDUCE].bytes, 1000000);
    NEAR(o.kinds[AO_KIND_ALLREDUCE].algbw_gbps, 20);
    NEAR(o.kinds[AO_KIND_ALLREDUCE].busbw_gbps, 35);
    NEAR(o.streams[AO_STREAM_ALLREDUCE].busy_ms, 0.05);
}

static void test_fully_hidden_comm(void **state)
{
    (void)state;
    ao_op ops[] = {compute(0, 1000), comm(100, 300, AO_KIND_ALLGATHER, 1),
                   comm(400, 700, AO_KIND_REDUCESCATTER, 1)};
    ao_overlap o;
    ao_overlap_compute(ops, N(ops), 2, &o);
    NEAR(o.step_ms, 1.0);
    NEAR(o.comm_ms, 0.5);
    NEAR(o.overlap_ms, 0.5);
    assert_true(o.exposed_comm_ms == 0 && o.idle_ms == 0);
    NEAR(o.overlap_ratio, 1);
    NEAR(o.compute_covered_ratio, 0.5);
    NEAR(o.overlap_efficiency, 1);
    NEAR(o.compute_kind_ms[AO_KIND_ALLGATHER], 0.2);
    NEAR(o.compute_kind_ms[AO_KIND_REDUCESCATTER], 0.3);
    assert_true(o.compute_kind_ms[AO_KIND_ALLREDUCE] == 0);
}

static void test_partly_exposed_comm(void **state)
{
    (void)state;
    ao_op ops[] = {compute(0, 100), comm(50, 250, AO_KIND_ALLREDUCE, 1), compute(200, 300)};
    ao_overlap o;
    ao_overlap_compute(ops, N(ops), 2, &o);
    NEAR(o.step_ms, 0.3);
    NEAR(o.compute_ms, 0.2);
    NEAR(o.comm_ms, 0.2);
    NEAR(o.overlap_ms, 0.1);
    NEAR(o.exposed_comm_ms, 0.1);
    assert_true(o.idle_ms == 0);
    NEAR(o.overlap_ratio, 0.5);
    NEAR(o.compute_covered_ratio, 0.5);
    NEAR(o.overlap_efficiency, 0.5);
    NEAR(o.compute_kind_ms[AO_KIND_ALLREDUCE], 0.1);
}

static void test_copies_and_idle_at_both_ends(void **state)
{
    (void)state;
    /* Zero-length markers at 0 and 1000 stretch W; they add no busy time. */
    ao_op ops[] = {compute(0, 0),       copy(100, 200, 4096),
                   compute(300, 500),   comm(450, 600, AO_KIND_ALLGATHER, 1),
                   compute(1000, 1000), copy(450, 480, 8)};
    ao_overlap o;
    ao_overlap_compute(ops, N(ops), 2, &o);
    assert_true(o.window_start_us == 0 && o.window_end_us == 1000);
    NEAR(o.step_ms, 1.0);
    NEAR(o.compute_ms, 0.2);
    NEAR(o.comm_ms, 0.15);
    NEAR(o.copy_ms, 0.13);
    NEAR(o.overlap_ms, 0.05);
    NEAR(o.exposed_comm_ms, 0.1);
    /* busy: [100,200) + [300,600) = 400 us of 1000 */
    NEAR(o.idle_ms, 0.6);
    assert_int_equal(o.streams[AO_STREAM_H2D].ops, 2);
    NEAR(o.streams[AO_STREAM_H2D].busy_ms, 0.13);
    assert_int_equal(o.streams[AO_STREAM_COMPUTE].ops, 3);
    /* copies are not communication */
    for (int k = 0; k < AO_NKINDS; k++)
        if (k != AO_KIND_ALLGATHER) assert_int_equal(o.kinds[k].bytes, 0);
}

static void test_copy_only_gives_no_comm_overlap(void **state)
{
    (void)state;
    ao_op ops[] = {compute(0, 100), copy(0, 100, 1)};
    ao_overlap o;
    ao_overlap_compute(ops, N(ops), 2, &o);
    assert_true(o.comm_ms == 0 && o.overlap_ms == 0 && o.idle_ms == 0);
    NEAR(o.copy_ms, 0.1);
    assert_true(isnan(o.overlap_ratio));
}

static void test_multiple_kinds_and_streams(void **state)
{
    (void)state;
    ao_op ops[] = {
        compute(0, 1000),
        comm(0, 100, AO_KIND_ALLGATHER, 100),
        comm(50, 150, AO_KIND_ALLGATHER, 100), /* overlaps the first on its stream */
        comm(900, 1100, AO_KIND_REDUCESCATTER, 400),
        comm(1100, 1200, AO_KIND_ALLREDUCE, 0),
        op(1150, 1250, AO_STREAM_ALLREDUCE, AO_CLASS_COMM, AO_KIND_BROADCAST, 50),
    };
    ao_overlap o;
    ao_overlap_compute(ops, N(ops), 4, &o);
    NEAR(o.step_ms, 1.25);
    NEAR(o.comm_ms, 0.5); /* [0,150) + [900,1250) */
    NEAR(o.overlap_ms, 0.25);
    NEAR(o.exposed_comm_ms, 0.25);
    assert_true(o.idle_ms == 0);
    NEAR(o.overlap_efficiency, 0.5);
    assert_int_equal(o.kinds[AO_KIND_ALLGATHER].ops, 2);
    assert_int_equal(o.kinds[AO_KIND_ALLGATHER].bytes, 200);
    NEAR(o.kinds[AO_KIND_ALLGATHER].busy_ms, 0.15);
    NEAR(o.kinds[AO_KIND_REDUCESCATTER].busy_ms, 0.2);
    NEAR(o.kinds[AO_KIND_ALLREDUCE].busy_ms, 0.1);
    NEAR(o.kinds[AO_KIND_BROADCAST].busy_ms, 0.1);
    assert_true(o.kinds[AO_KIND_ALLREDUCE].algbw_gbps == 0); /* 0 bytes */
    NEAR(o.compute_kind_ms[AO_KIND_ALLGATHER], 0.15);
    NEAR(o.compute_kind_ms[AO_KIND_REDUCESCATTER], 0.1);
    assert_true(o.compute_kind_ms[AO_KIND_ALLREDUCE] == 0);
    assert_true(o.compute_kind_ms[AO_KIND_BROADCAST] == 0);
    assert_int_equal(o.streams[AO_STREAM_ALLGATHER].ops, 2);
    NEAR(o.streams[AO_STREAM_ALLGATHER].busy_ms, 0.15);
    assert_int_equal(o.streams[AO_STREAM_ALLREDUCE].ops, 2);
    NEAR(o.streams[AO_STREAM_ALLREDUCE].busy_ms, 0.15);
    assert_int_equal(o.streams[AO_STREAM_H2D].ops, 0);
    assert_true(o.streams[AO_STREAM_H2D].busy_ms == 0);
}

static void test_busbw_factors(void **state)
{
    (void)state;
    NEAR(ao_busbw_factor(AO_KIND_ALLREDUCE, 1), 0);
    NEAR(ao_busbw_factor(AO_KIND_ALLREDUCE, 2), 1);
    NEAR(ao_busbw_factor(AO_KIND_ALLREDUCE, 8), 1.75);
    NEAR(ao_busbw_factor(AO_KIND_ALLGATHER, 1), 0);
    NEAR(ao_busbw_factor(AO_KIND_ALLGATHER, 2), 0.5);
    NEAR(ao_busbw_factor(AO_KIND_REDUCESCATTER, 8), 0.875);
    NEAR(ao_busbw_factor(AO_KIND_BROADCAST, 1), 1);
    NEAR(ao_busbw_factor(AO_KIND_BROADCAST, 8), 1);
    NEAR(ao_busbw_factor(AO_KIND_NONE, 8), 0);
    NEAR(ao_busbw_factor(AO_KIND_ALLREDUCE, 0), 0);

    /* AR: 8e6 B in 100 us = 80 GB/s; AG: 4e6 B in 200 us = 20 GB/s;
     * broadcast: 1e6 B in 10 us = 100 GB/s. */
    ao_op ops[] = {comm(0, 100, AO_KIND_ALLREDUCE, 8000000),
                   comm(0, 200, AO_KIND_ALLGATHER, 4000000),
                   op(300, 310, AO_STREAM_ALLREDUCE, AO_CLASS_COMM, AO_KIND_BROADCAST, 1000000)};
    const struct {
        int n;
        double ar, ag, bc;
    } want[] = {{1, 0, 0, 100}, {2, 80, 10, 100}, {8, 140, 17.5, 100}};
    for (size_t i = 0; i < N(want); i++) {
        ao_overlap o;
        ao_overlap_compute(ops, N(ops), want[i].n, &o);
        NEAR(o.kinds[AO_KIND_ALLREDUCE].algbw_gbps, 80);
        NEAR(o.kinds[AO_KIND_ALLGATHER].algbw_gbps, 20);
        NEAR(o.kinds[AO_KIND_BROADCAST].algbw_gbps, 100);
        NEAR(o.kinds[AO_KIND_ALLREDUCE].busbw_gbps, want[i].ar);
        NEAR(o.kinds[AO_KIND_ALLGATHER].busbw_gbps, want[i].ag);
        NEAR(o.kinds[AO_KIND_BROADCAST].busbw_gbps, want[i].bc);
    }
}

static void test_names(void **state)
{
    (void)state;
    const char *streams[] = {"compute", "allgather", "reducescatter", "allreduce", "h2d"};
    for (int s = 0; s < AO_NSTREAMS; s++)
        assert_string_equal(ao_stream_id_name((ao_stream_id)s), streams[s]);
    assert_string_equal(ao_op_class_name(AO_CLASS_COMPUTE), "compute");
    assert_string_equal(ao_op_class_name(AO_CLASS_COMM), "comm");
    assert_string_equal(ao_op_class_name(AO_CLASS_COPY), "copy");
    const char *kinds[] = {"allgather", "reducescatter", "allreduce", "broadcast"};
    for (int k = 0; k < AO_NKINDS; k++)
        assert_string_equal(ao_coll_kind_name((ao_coll_kind)k), kinds[k]);
    assert_string_equal(ao_coll_kind_name(AO_KIND_NONE), "unknown");
    assert_string_equal(ao_stream_id_name(AO_NSTREAMS), "unknown");
}

static void test_decompose(void **state)
{
    (void)state;
    ao_decomposition d;
    ao_decompose(80, 50, 100, 90, 60, &d);
    NEAR(d.ideal_ms, 80);
    NEAR(d.serial_ms, 130);
    NEAR(d.achieved, 0.6);
    NEAR(d.contention_ms, 10);
    NEAR(d.comm_slowdown, 1.2);

    /* Without a compute baseline only comm_slowdown is known, and the
     * reverse; zero and negative baselines count as absent. */
    const double absent[] = {NAN, 0, -3};
    for (size_t i = 0; i < N(absent); i++) {
        ao_decompose(absent[i], 50, 100, 90, 60, &d);
        assert_true(isnan(d.compute_isolated_ms) && isnan(d.ideal_ms) && isnan(d.serial_ms));
        assert_true(isnan(d.achieved) && isnan(d.contention_ms));
        NEAR(d.comm_slowdown, 1.2);
        ao_decompose(80, absent[i], 100, 90, 60, &d);
        assert_true(isnan(d.comm_isolated_ms) && isnan(d.ideal_ms) && isnan(d.achieved));
        assert_true(isnan(d.comm_slowdown));
        NEAR(d.contention_ms, 10);
    }
    /* a step slower than serial gives a negative achieved */
    ao_decompose(80, 50, 150, 90, 60, &d);
    NEAR(d.achieved, -0.4);
}

/* ---- random op sets -------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t next_u64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static unsigned rnd(unsigned n)
{
    return (unsigned)(next_u64() % n);
}

/* A random op whose class, stream and kind agree the way the engine's do;
 * endpoints are integers in [0, span) so cells can check them. */
static ao_op random_op(unsigned span, int integer)
{
    double s, e;
    if (integer) {
        s = rnd(span);
        e = rnd(5) == 0 ? s : s + rnd(span / 4 + 1);
        if (e > span) e = span;
    } else {
        s = (double)(next_u64() >> 11) / 9007199254740992.0 * span;
        e = s + (rnd(5) == 0 ? 0 : (double)(next_u64() >> 11) / 9007199254740992.0 * span / 4);
    }
    uint64_t bytes = rnd(1u << 20);
    switch (rnd(7)) {
    case 0:
    case 1:
        return compute(s, e);
    case 2:
        return comm(s, e, AO_KIND_ALLGATHER, bytes);
    case 3:
        return comm(s, e, AO_KIND_REDUCESCATTER, bytes);
    case 4:
        return comm(s, e, AO_KIND_ALLREDUCE, bytes);
    case 5:
        return op(s, e, AO_STREAM_ALLREDUCE, AO_CLASS_COMM, AO_KIND_BROADCAST, bytes);
    default:
        return copy(s, e, bytes);
    }
}

/* Cells [0,span) marked per class, kind and stream. */
typedef struct cells {
    unsigned span;
    uint8_t *cls[3], *kind[AO_NKINDS], *stream[AO_NSTREAMS];
} cells;

static double count(const uint8_t *a, const uint8_t *b, const uint8_t *not_c, unsigned span)
{
    unsigned k = 0;
    for (unsigned i = 0; i < span; i++)
        k += (a ? a[i] : 1) && (b ? b[i] : 1) && (not_c ? !not_c[i] : 1);
    return k;
}

static void check_against_cells(const ao_op *ops, size_t n, unsigned span, int world)
{
    uint8_t *mem = calloc((size_t)(3 + AO_NKINDS + AO_NSTREAMS + 1) * span, 1);
    uint8_t *p = mem;
    uint8_t *C = p, *M = (p += span), *X = (p += span), *Mk[AO_NKINDS], *S[AO_NSTREAMS];
    for (int k = 0; k < AO_NKINDS; k++) Mk[k] = (p += span);
    for (int s = 0; s < AO_NSTREAMS; s++) S[s] = (p += span);
    uint8_t *busy = (p += span);
    uint8_t *cls[3] = {C, M, X};

    double w0 = n ? ops[0].start_us : 0, w1 = n ? ops[0].end_us : 0;
    uint64_t bytes[AO_NKINDS] = {0};
    int kops[AO_NKINDS] = {0}, sops[AO_NSTREAMS] = {0};
    for (size_t i = 0; i < n; i++) {
        w0 = fmin(w0, ops[i].start_us);
        w1 = fmax(w1, ops[i].end_us);
        sops[ops[i].stream]++;
        if (ops[i].kind >= 0) {
            kops[ops[i].kind]++;
            bytes[ops[i].kind] += ops[i].bytes;
        }
        for (unsigned c = (unsigned)ops[i].start_us; c < (unsigned)ops[i].end_us; c++) {
            cls[ops[i].cls][c] = 1;
            S[ops[i].stream][c] = 1;
            busy[c] = 1;
            if (ops[i].kind >= 0) Mk[ops[i].kind][c] = 1;
        }
    }
    /* W's cells are [w0, w1); idle is the part of W no op covers */
    double idle = 0;
    for (unsigned c = (unsigned)w0; c < (unsigned)w1; c++) idle += !busy[c];

    ao_overlap o;
    ao_overlap_compute(ops, n, world, &o);
    double c_us = count(C, NULL, NULL, span), m_us = count(M, NULL, NULL, span);
    double ov = count(C, M, NULL, span);
    assert_true(o.window_start_us == w0 && o.window_end_us == w1);
    assert_true(o.step_ms == (w1 - w0) / 1000.0);
    assert_true(o.compute_ms == c_us / 1000.0);
    assert_true(o.comm_ms == m_us / 1000.0);
    assert_true(o.copy_ms == count(X, NULL, NULL, span) / 1000.0);
    assert_true(o.overlap_ms == ov / 1000.0);
    assert_true(o.exposed_comm_ms == count(M, NULL, C, span) / 1000.0);
    assert_true(o.idle_ms == idle / 1000.0);
    if (m_us > 0)
        NEAR(o.overlap_ratio, ov / m_us);
    else
        assert_true(isnan(o.overlap_ratio));
    if (c_us > 0)
        NEAR(o.compute_covered_ratio, ov / c_us);
    else
        assert_true(isnan(o.compute_covered_ratio));
    if (fmin(c_us, m_us) > 0)
        NEAR(o.overlap_efficiency, ov / fmin(c_us, m_us));
    else
        assert_true(isnan(o.overlap_efficiency));
    for (int k = 0; k < AO_NKINDS; k++) {
        double busy_k = count(Mk[k], NULL, NULL, span);
        assert_true(o.compute_kind_ms[k] == count(C, Mk[k], NULL, span) / 1000.0);
        assert_int_equal(o.kinds[k].ops, kops[k]);
        assert_int_equal(o.kinds[k].bytes, bytes[k]);
        assert_true(o.kinds[k].busy_ms == busy_k / 1000.0);
        double algbw = busy_k > 0 ? (double)bytes[k] / (busy_k * 1e-6) / 1e9 : 0;
        assert_close(o.kinds[k].algbw_gbps, algbw, 1e-9 * algbw);
        assert_close(o.kinds[k].busbw_gbps, algbw * ao_busbw_factor((ao_coll_kind)k, world),
                     1e-9 * algbw);
    }
    for (int s = 0; s < AO_NSTREAMS; s++) {
        assert_int_equal(o.streams[s].ops, sops[s]);
        assert_true(o.streams[s].busy_ms == count(S[s], NULL, NULL, span) / 1000.0);
    }
    free(mem);
}

static void test_random_against_cells(void **state)
{
    (void)state;
    rng_state = 7;
    ao_op ops[16];
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = rnd(17);
        for (size_t i = 0; i < n; i++) ops[i] = random_op(64, 1);
        check_against_cells(ops, n, 64, 1 + (int)rnd(8));
    }
}

/* Beyond the stack scratch: exercises the heap path. */
static void test_random_large_iterations(void **state)
{
    (void)state;
    rng_state = 11;
    size_t n = 3000;
    ao_op *ops = malloc(n * sizeof *ops);
    for (int iter = 0; iter < 5; iter++) {
        for (size_t i = 0; i < n; i++) ops[i] = random_op(20000, 1);
        check_against_cells(ops, n, 20000, 8);
    }
    free(ops);
}

static void test_random_invariants(void **state)
{
    (void)state;
    rng_state = 3;
    ao_op ops[64];
    ao_ival all[64];
    for (int iter = 0; iter < 10000; iter++) {
        size_t n = rnd(65);
        for (size_t i = 0; i < n; i++) ops[i] = random_op(1000, 0);
        ao_overlap o;
        ao_overlap_compute(ops, n, 8, &o);
        double tol = 1e-9 * (o.step_ms + 1e-300);
        assert_true(o.overlap_ms <= fmin(o.compute_ms, o.comm_ms) + tol);
        assert_true(o.step_ms + tol >= fmax(o.compute_ms, o.comm_ms));
        assert_close(o.exposed_comm_ms, o.comm_ms - o.overlap_ms, 1e-9 * o.comm_ms);
        for (size_t i = 0; i < n; i++) all[i] = (ao_ival){ops[i].start_us, ops[i].end_us};
        double busy_ms = ao_iv_length(all, ao_iv_normalize(all, n)) / 1000.0;
        assert_close(o.idle_ms + busy_ms, o.step_ms, tol);
        for (int k = 0; k < AO_NKINDS; k++) {
            assert_true(o.compute_kind_ms[k] <= fmin(o.compute_ms, o.kinds[k].busy_ms) + tol);
            assert_close(o.exposed_kind_ms[k] + o.compute_kind_ms[k], o.kinds[k].busy_ms, tol);
        }
        if (!isnan(o.overlap_ratio)) assert_true(o.overlap_ratio >= 0 && o.overlap_ratio <= 1);
        if (!isnan(o.overlap_efficiency))
            assert_true(o.overlap_efficiency >= 0 && o.overlap_efficiency <= 1 + 1e-12);
    }
}

static ao_op issued(ao_op o, double issue_us)
{
    o.has_issue = 1;
    o.issue_us = issue_us;
    return o;
}

/* host_wait_ms: the idle time in which no op was enqueued. Gap 100-300: the
 * next compute was enqueued at 250, so 150 us of host wait; gap 400-500: the
 * gather was enqueued at 350 (waiting on the device: not the host's); gap
 * 600-700: enqueued at 650, 50 us. */
static void test_host_wait(void **state)
{
    (void)state;
    ao_op ops[] = {issued(compute(0, 100), -50), issued(compute(300, 400), 250),
                   issued(comm(500, 600, AO_KIND_ALLGATHER, 1), 350),
                   issued(compute(700, 800), 650)};
    ao_overlap o;
    ao_overlap_compute(ops, N(ops), 2, &o);
    NEAR(o.idle_ms, 0.4);
    NEAR(o.host_wait_ms, 0.2);
    NEAR(o.exposed_kind_ms[AO_KIND_ALLGATHER], 0.1);
    NEAR(o.exposed_kind_ms[AO_KIND_REDUCESCATTER], 0);
    ops[2].has_issue = 0; /* one op without an issue time: unknown */
    ao_overlap_compute(ops, N(ops), 2, &o);
    assert_true(isnan(o.host_wait_ms));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_iteration),
        cmocka_unit_test(test_host_wait),
        cmocka_unit_test(test_compute_only),
        cmocka_unit_test(test_comm_only),
        cmocka_unit_test(test_fully_hidden_comm),
        cmocka_unit_test(test_partly_exposed_comm),
        cmocka_unit_test(test_copies_and_idle_at_both_ends),
        cmocka_unit_test(test_copy_only_gives_no_comm_overlap),
        cmocka_unit_test(test_multiple_kinds_and_streams),
        cmocka_unit_test(test_busbw_factors),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_decompose),
        cmocka_unit_test(test_random_against_cells),
        cmocka_unit_test(test_random_large_iterations),
        cmocka_unit_test(test_random_invariants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
