/* The device timeline on the cpu backend: intervals of ops with known sleeps on
 * two streams, cross-stream waits, delivery order, collect never blocking,
 * a pool that stops growing, timing off, misuse, and the profiler schedule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gate.h"

#include "assert_close.h"

#include "runtime/device.h"
#include "timeline/timeline.h"

static void sleep_closure(void *p)
{
    int ms = *(int *)p;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void enqueue_sleep(ao_stream *s, int ms)
{
    ao_launch_host(s, sleep_closure, &ms, sizeof ms);
}

static void open_closure(void *arg)
{
    gate_open(*(struct gate **)arg);
}

/* Sleeps on a loaded 2-core machine overrun, by seconds at worst; they never
 * run short. Upper bounds only catch garbage, with a margin no load reaches. */
static const double LATE_MS = 30000.0;

/* ---- fixture: a cpu device, a compute and an all-gather stream ----------- */

struct fixture {
    ao_device *dev;
    ao_stream *streams[AO_NSTREAMS];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->dev = ao_device_open("cpu", 0);
    if (!f->dev) return -1;
    f->streams[AO_STREAM_COMPUTE] = ao_stream_create(f->dev, "compute", 0);
    f->streams[AO_STREAM_ALLGATHER] = ao_stream_create(f->dev, "allgather", 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    ao_device_sync(f->dev);
    for (int i = 0; i < AO_NSTREAMS; i++)
        if (f->streams[i]) ao_stream_destroy(f->streams[i]);
    ao_device_close(f->dev);
    free(f);
    return 0;
}

/* ---- what collect delivered ---------------------------------------------- */

enum { MAX_ITERS = 64, MAX_OPS = 8 };

struct delivered {
    int n;
    int64_t step[MAX_ITERS];
    const char *phase[MAX_ITERS];
    size_t nops[MAX_ITERS];
    ao_op ops[MAX_ITERS][MAX_OPS];
};

static void record(void *ctx, int64_t step, const char *phase, const ao_op *ops, size_t nops)
{
    struct delivered *d = ctx;
    assert_true(d->n < MAX_ITERS);
    d->step[d->n] = step;
    d->phase[d->n] = phase;
    d->nops[d->n] = nops;
    for (size_t i = 0; i < nops && i < MAX_OPS; i++) d->ops[d->n][i] = ops[i];
    d->n++;
}

static void count_only(void *ctx, int64_t step, const char *phase, const ao_op *ops, size_t nops)
{
    (void)phase;
    (void)ops;
    int64_t *next = ctx;
    assert_int_equal(step, *next);
    assert_int_equal(nops, 50);
    (*next)++;
}

static double len_ms(const ao_op *op)
{
    return (op->end_us - op->start_us) / 1e3;
}

static int timed_sleep(ao_timeline *t, ao_stream *s, ao_stream_id sid, const char *name, int ms)
{
    int op = ao_timeline_op_begin(t, sid, AO_CLASS_COMPUTE, AO_KIND_NONE, name, -1, 0);
    enqueue_sleep(s, ms);
    ao_timeline_op_end(t, op);
    return op;
}

/* ---- intervals ----------------------------------------------------------- */

static void test_two_streams(void **state)
{
    struct fixture *f = *state;
    ao_stream *compute = f->streams[AO_STREAM_COMPUTE], *ag = f->streams[AO_STREAM_ALLGATHER];
    ao_timeline *t = ao_timeline_create(f->dev, f->streams, 1);
    ao_timeline_anchor(t, compute);
    ao_timeline_begin(t, 7, "train");
    /* Forward ends only once the all-gather has begun (a gate, not a race
     * of sleeps that a loaded machine can lose). */
    struct gate started = {0}, *gp = &started;
    int op = ao_timeline_op_begin(t, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE, "forward",
                                  -1, 0);
    enqueue_sleep(compute, 20);
    ao_launch_host(compute, gate_wait, &gp, sizeof gp);
    ao_timeline_op_end(t, op);
    int g = ao_timeline_op_begin(t, AO_STREAM_ALLGATHER, AO_CLASS_COMM, AO_KIND_ALLGATHER,
                                 "allgather", 3, 4096);
    ao_launch_host(ag, open_closure, &gp, sizeof gp);
    enqueue_sleep(ag, 10);
    ao_timeline_op_end(t, g);
    timed_sleep(t, compute, AO_STREAM_COMPUTE, "backward", 5);
    ao_timeline_end(t);

    struct delivered d = {0};
    ao_timeline_collect(t, 1, record, &d);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.step[0], 7);
    assert_string_equal(d.phase[0], "train");
    assert_int_equal(d.nops[0], 3);
    const ao_op *fwd = &d.ops[0][0], *gather = &d.ops[0][1], *bwd = &d.ops[0][2];

    /* Metadata in issue order. */
    assert_string_equal(fwd->name, "forward");
    assert_int_equal(fwd->stream, AO_STREAM_COMPUTE);
    assert_int_equal(fwd->cls, AO_CLASS_COMPUTE);
    assert_int_equal(fwd->kind, AO_KIND_NONE);
    assert_int_equal(fwd->unit, -1);
    assert_string_equal(gather->name, "allgather");
    assert_int_equal(gather->stream, AO_STREAM_ALLGATHER);
    assert_int_equal(gather->cls, AO_CLASS_COMM);
    assert_int_equal(gather->kind, AO_KIND_ALLGATHER);
    assert_int_equal(gather->unit, 3);
    assert_int_equal(gather->bytes, 4096);

    /* Lengths: each op is its sleep. */
    assert_true(len_ms(fwd) >= 20.0 - 0.05 && len_ms(fwd) <= 20.0 + LATE_MS);
    assert_true(len_ms(gather) >= 10.0 - 0.05 && len_ms(gather) <= 10.0 + LATE_MS);
    assert_true(len_ms(bwd) >= 5.0 - 0.05 && len_ms(bwd) <= 5.0 + LATE_MS);

    /* Relative to the anchor, which the idle compute stream reached at once. */
    assert_true(fwd->start_us >= 0.0 && fwd->start_us < LATE_MS * 1e3);
    assert_true(gather->start_us >= 0.0 && gather->start_us < LATE_MS * 1e3);

    /* Same stream: backward after forward. Other stream: the all-gather ran
     * beside forward, not after it. */
    assert_false(atomic_load(&started.timed_out));
    assert_true(bwd->start_us >= fwd->end_us);
    assert_true(gather->start_us < fwd->end_us);
    ao_timeline_destroy(t);
}

static void test_cross_stream_wait(void **state)
{
    struct fixture *f = *state;
    ao_stream *compute = f->streams[AO_STREAM_COMPUTE], *ag = f->streams[AO_STREAM_ALLGATHER];
    ao_timeline *t = ao_timeline_create(f->dev, f->streams, 1);
    ao_timeline_anchor(t, compute);
    ao_event *ready = ao_event_create(f->dev);
    ao_timeline_begin(t, 0, "train");
    timed_sleep(t, compute, AO_STREAM_COMPUTE, "forward", 15);
    ao_event_record(ready, compute);
    ao_stream_wait_event(ag, ready);
    timed_sleep(t, ag, AO_STREAM_ALLGATHER, "allgather", 5);
    ao_timeline_end(t);

    struct delivered d = {0};
    ao_timeline_collect(t, 1, record, &d);
    assert_int_equal(d.n, 1);
    assert_int_equal(d.nops[0], 2);
    assert_true(d.ops[0][1].start_us >= d.ops[0][0].end_us);
    assert_true(len_ms(&d.ops[0][1]) >= 5.0 - 0.05);
    ao_event_destroy(ready);
    ao_timeline_destroy(t);
}

static void test_anchor_realtime(void **state)
{
    struct fixture *f = *state;
    ao_timeline *t = ao_timeline_create(f->dev, f->streams, 1);
    struct timespec before, after;
    clock_gettime(CLOCK_REALTIME, &before);
    ao_timeline_anchor(t, f->streams[AO_STREAM_COMPUTE]);
    clock_gettime(CLOCK_REALTIME, &after);
    struct timespec a = ao_timeline_anchor_realtime(t);
    double b_s = (double)before.tv_sec + before.tv_nsec / 1e9;
    double a_s = (double)a.tv_sec + a.tv_nsec / 1e9;
    double e_s = (double)after.tv_sec + after.tv_nsec / 1e9;
    assert_true(b_s <= a_s && a_s <= e_s);
    assert_int_equal(ao_timeline_event_count(t), 1);
    ao_timeline_destroy(t);
}

/* ---- delivery ------------------------------------------------------------ */

static void test_order_exactly_once(void **state)
{
    struct fixture *f = *state;
    static const char *const phases[] = {"train", "compute_only", "comm_only"};
    ao_timeline *t = ao_timeline_create(f->dev, f->streams, 1);
    ao_timeline_anchor(t, f->streams[AO_STREAM_COMPUTE]);
    struct delivered d = {0};
    for (int i = 0; i < 40; i++) {
        ao_timeline_begin(t, 100 + i, phases[i % 3]);
        for (int k = 0; k <= i % 4; k++) {
            ao_stream_id sid = k % 2 ? AO_STREAM_ALLGATHER : AO_STREAM_COMPUTE;
            int op = ao_timeline_op_begin(t, sid, AO_CLASS_COMPUTE, AO_KIND_NONE, "op", k, 0);
            if (i % 5 == 0) enqueue_sleep(f->streams[sid], 1);
            ao_timeline_op_end(t, op);
        }
        ao_timeline_end(t);
        ao_timeline_collect(t, 0, record, &d);
        /* Never ahead of what has been closed. */
        assert_true(d.n <= i + 1);
    }
    ao_timeline_collect(t, 1, record, &d);
    assert_int_equal(d.n, 40);
    for (int i = 0; i < 40; i++) {
        assert_int_equal(d.step[i], 100 + i);
        assert_string_equal(d.phase[i], phases[i % 3]);
        assert_int_equal(d.nops[i], (size_t)(i % 4 + 1));
        for (size_t k = 0; k < d.nops[i]; k++) {
            assert_int_equal(d.ops[i][k].unit, (int)k);
            assert_true(d.ops[i][k].start_us >= 0.0);
            assert_true(d.ops[i][k].end_us >= d.ops[i][k].start_us);
        }
        /* Each iteration's first op (compute) starts after the previous
         * iteration's first op ended: one stream runs in order. */
        if (i > 0) assert_true(d.ops[i][0].start_us >= d.ops[i - 1][0].end_us);
    }
    /* Nothing is delivered twice. */
    ao_timeline_collect(t, 1, record, &d);
    assert_int_equal(d.n, 40);
    ao_timeline_destroy(t);
}

static void test_collect_does_not_block(void **state)
{
    struct fixture *f = *state;
    ao_stream *compute = f->streams[AO_STREAM_COMPUTE];
    ao_timeline *t = ao_timeline_create(f->dev, f->streams, 1);
    ao_timeline_anchor(t, compute);

    ao_timeline_begin(t, 0, "train");
    timed_sleep(t, compute, AO_STREAM_COMPUTE, "short", 1);
    ao_timeline_end(t);
    ao_stream_sync(compute);

    /* Iteration 1 is held behind a gate: a collect that waited for it would
     * return only when the gate gave up (timed_out). */
    struct gate g1 = {0}, *gp = &g1;
    ao_timeline_begin(t, 1, "train");
    int op =
        ao_timeline_op_begin(t, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE, "long", -1, 0);
    ao_launch_host(compute, gate_wait, &gp, sizeof gp);
    enqueue_sleep(compute, 200);
    ao_timeline_op_end(t, op);
    ao_timeline_end(t);

    struct delivered d = {0};
    ao_timeline_collect(t, 0, record, &d);
    assert_int_equal(d.n, 1); /* iteration 0, complete; not iteration 1 */
    assert_int_equal(d.step[0], 0);

    /* Still busy: a second look delivers nothing and does not wait either. */
    ao_timeline_collect(t, 0, record, &d);
    assert_int_equal(d.n, 1);
    assert_false(atomic_load(&g1.timed_out));
    gate_open(&g1);

    ao_timeline_collect(t, 1, record, &d);
    assert_int_equal(d.n, 2);
    assert_int_equal(d.step[1], 1);
    assert_true(len_ms(&d.ops[1][0]) >= 200.0 - 0.05);

    /* Complete means every stream: compute done, the all-gather still busy. */
    struct gate g2 = {0};
    gp = &g2;
    ao_timeline_begin(t, 2, "train");
    op =
        ao_timeline_op_begin(t, AO_STREAM_ALLGATHER, AO_CLASS_COMPUTE, AO_KIND_NONE, "long", -1, 0);
    ao_launch_host(f->streams[AO_STREAM_ALLGATHER], gate_wait, &gp, sizeof gp);
    ao_timeline_op_end(t, op);
    timed_sleep(t, compute, AO_STREAM_COMPUTE, "short", 0);
    ao_timeline_end(t);
    ao_stream_sync(compute);
    ao_timeline_collect(t, 0, record, &d);
    assert_int_equal(d.n, 2);
    assert_false(atomic_load(&g2.timed_out));
    gate_open(&g2);
    ao_timeline_collect(t, 1, record, &d);
    assert_int_equal(d.n, 3);
    assert_int_equal(d.step[2], 2);
    ao_timeline_destroy(t);
}

/* The host runs many iterations ahead of a stalled device: slots are added,
 * nothing blocks, and everything arrives in order once the device catches
 * up. */
static void test_host_runs_ahead(void **state)
{
    struct fixture *f = *state;
    ao_stream *compute = f->streams[AO_STREAM_COMPUTE];
    ao_timeline *t = ao_timeline_create(f->dev, f->streams, 1);
    ao_timeline_anchor(t, compute);
    struct delivered d = {0};
    /* Two iterations delivered first, so that the ring wraps when it grows. */
    for (int i = 0; i < 2; i++) {
        ao_timeline_begin(t, i, "train");
        timed_sleep(t, compute, AO_STREAM_COMPUTE, "op", 0);
        ao_timeline_end(t);
        ao_timeline_collect(t, 1, record, &d);
    }
    struct gate g = {0}, *gp = &g;
    ao_launch_host(compute, gate_wait, &gp, sizeof gp); /* the device stalls */
    for (int i = 2; i < 10; i++) {
        ao_timeline_begin(t, i, "train");
        timed_sleep(t, compute, AO_STREAM_COMPUTE, "op", 0);
        ao_timeline_end(t);
        ao_timeline_collect(t, 0, record, &d);
    }
    assert_false(atomic_load(&g.timed_out)); /* the host never waited for it */
    assert_int_equal(d.n, 2);
    gate_open(&g);
    size_t grown = ao_timeline_event_count(t);
    assert_true(grown > 1 + 3 * 2 * 32); /* more than the first three slots */
    ao_timeline_collect(t, 1, record, &d);
    assert_int_equal(d.n, 10);
    for (int i = 0; i < 10; i++) assert_int_equal(d.step[i], i);

    /* Caught up, one iteration at a time: once every slot of the grown ring
     * has been used, nothing is created any more. */
    size_t settled = 0;
    for (int i = 10; i < 50; i++) {
        ao_timeline_begin(t, i, "train");
        timed_sleep(t, compute, AO_STREAM_COMPUTE, "op", 0);
        ao_timeline_end(t);
        ao_timeline_collect(t, 0, record, &d);
        ao_device_sync(f->dev);
        if (i == 35) settled = ao_timeline_event_count(t);
    }
    ao_timeline_collect(t, 1, record, &d);
    assert_int_equal(d.n, 50);
    for (int i = 10; i < 50; i++) assert_int_equal(d.step[i], i);
    assert_int_equal(ao_timeline_event_count(t), settled);
    ao_timeline_destroy(t);
}

/* 1000 iterations of 50 ops on two streams, collected the way the engine does
 * (right after each end, the previous iteration complete by then): the pool
 * is sized by the first iteration and never grows again. */
static void test_steady_state_pool(void **state)
{
    struct fixture *f = *state;
    ao_timeline *t = ao_timeline_create(f->dev, f->streams, 1);
    ao_timeline_anchor(t, f->streams[AO_STREAM_COMPUTE]);
    int64_t next = 0;
    size_t after_first = 0;
    for (int i = 0; i < 1000; i++) {
        ao_timeline_begin(t, i, "train");
        for (int k = 0; k < 50; k++) {
            ao_stream_id sid = k % 3 ? AO_STREAM_COMPUTE : AO_STREAM_ALLGATHER;
            int op = ao_timeline_op_begin(t, sid, AO_CLASS_COMPUTE, AO_KIND_NONE, "op", k, 0);
            ao_timeline_op_end(t, op);
        }
        ao_timeline_end(t);
        ao_timeline_collect(t, 0, count_only, &next);
        /* Iteration i done on the device before i+1 is issued, so at most
         * one closed iteration waits when the next opens. */
        ao_device_sync(f->dev);
        if (i == 0) after_first = ao_timeline_event_count(t);
    }
    ao_timeline_collect(t, 1, count_only, &next);
    assert_int_equal(next, 1000);
    /* Slots of 64 ops (the initial 32 doubled once); at most 3 in use. */
    assert_true(ao_timeline_event_count(t) <= 1 + 3 * 2 * 64);
    assert_true(ao_timeline_event_count(t) <= after_first + 2 * 2 * 64);
    size_t settled = ao_timeline_event_count(t);
    for (int i = 1000; i < 1100; i++) {
        ao_timeline_begin(t, i, "train");
        for (int k = 0; k < 50; k++) {
            int op = ao_timeline_op_begin(t, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE,
                                          "op", k, 0);
            ao_timeline_op_end(t, op);
        }
        ao_timeline_end(t);
        ao_timeline_collect(t, 0, count_only, &next);
        ao_device_sync(f->dev);
    }
    ao_timeline_collect(t, 1, count_only, &next);
    assert_int_equal(next, 1100);
    assert_int_equal(ao_timeline_event_count(t), settled);
    ao_timeline_destroy(t);
}

/* An iteration with more ops than any before grows its slot (mid-iteration,
 * keeping the ops already issued); later slots are opened at that size. */
struct grown {
    int n;
    int64_t step[8];
    size_t nops[8];
    int ops_intact[8];
};

static void check_grown(void *ctx, int64_t step, const char *phase, const ao_op *ops, size_t nops)
{
    (void)phase;
    struct grown *g = ctx;
    int ok = 1;
    double prev_end = 0.0;
    for (size_t k = 0; k < nops; k++) {
        ok &= ops[k].unit == (int16_t)k && ops[k].bytes == k &&
              ops[k].kind == AO_KIND_REDUCESCATTER && ops[k].start_us >= prev_end;
        prev_end = ops[k].end_us;
    }
    g->step[g->n] = step;
    g->nops[g->n] = nops;
    g->ops_intact[g->n] = ok;
    g->n++;
}

static void test_growth_keeps_ops(void **state)
{
    struct fixture *f = *state;
    ao_timeline *t = ao_timeline_create(f->dev, f->streams, 1);
    ao_timeline_anchor(t, f->streams[AO_STREAM_COMPUTE]);
    for (int i = 0; i < 6; i++) {
        ao_timeline_begin(t, i, "train");
        int n = 10 + 60 * i; /* 10, 70, 130, ... */
        for (int k = 0; k < n; k++) {
            int op = ao_timeline_op_begin(t, AO_STREAM_ALLGATHER, AO_CLASS_COMM,
                                          AO_KIND_REDUCESCATTER, "rs", k, (uint64_t)k);
            assert_int_equal(op, k);
            ao_timeline_op_end(t, op);
        }
        ao_timeline_end(t);
    }
    struct grown g = {0};
    ao_timeline_collect(t, 1, check_grown, &g);
    assert_int_equal(g.n, 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(g.step[i], i);
        assert_int_equal(g.nops[i], (size_t)(10 + 60 * i));
        assert_true(g.ops_intact[i]);
    }
    ao_timeline_destroy(t);
}

/* ---- timing off ---------------------------------------------------------- */

struct frames {
    ao_timeline *t;
    struct delivered d;
    double start_us[MAX_ITERS], end_us[MAX_ITERS];
};

static void record_frame(void *ctx, int64_t step, const char *phase, const ao_op *ops, size_t nops)
{
    struct frames *fr = ctx;
    int i = fr->d.n;
    record(&fr->d, step, phase, ops, nops);
    assert_int_equal(ao_timeline_frame(fr->t, &fr->start_us[i], &fr->end_us[i]), 1);
}

static void test_disabled(void **state)
{
    struct fixture *f = *state;
    ao_timeline *t = ao_timeline_create(f->dev, f->streams, 0);
    ao_timeline_anchor(t, f->streams[AO_STREAM_COMPUTE]);
    struct frames fr = {.t = t};
    for (int i = 0; i < 5; i++) {
        ao_timeline_begin(t, i, i % 2 ? "comm_only" : "train");
        for (int k = 0; k < 20; k++) {
            int op = ao_timeline_op_begin(t, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE,
                                          "forward", k, 0);
            assert_int_equal(op, -1);
            ao_timeline_op_end(t, op);
        }
        enqueue_sleep(f->streams[AO_STREAM_COMPUTE], 3); /* the step's work */
        ao_timeline_end(t);
        ao_timeline_collect(t, 0, record_frame, &fr);
    }
    ao_timeline_collect(t, 1, record_frame, &fr);
    assert_int_equal(fr.d.n, 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(fr.d.step[i], i);
        assert_string_equal(fr.d.phase[i], i % 2 ? "comm_only" : "train");
        assert_int_equal(fr.d.nops[i], 0);
        /* The frame still times the step: 3 ms of work, in order. */
        assert_true(fr.end_us[i] - fr.start_us[i] >= 2900);
        assert_true(fr.end_us[i] - fr.start_us[i] < 3000 + LATE_MS * 1e3);
        if (i) assert_true(fr.start_us[i] >= fr.end_us[i - 1]);
    }
    /* the anchor and a frame pair per slot (at most one slot per
     * iteration): no event for any of the 100 ops */
    assert_true(ao_timeline_event_count(t) <= 1 + 2 * 5);
    ao_timeline_destroy(t);
}

/* ---- misuse is fatal, with the reason ------------------------------------ */

static int run_child(void (*fn)(ao_device *, ao_stream **), char *err, size_t n)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        ao_device *dev = ao_device_open("cpu", 0);
        ao_stream *streams[AO_NSTREAMS] = {0};
        streams[AO_STREAM_COMPUTE] = ao_stream_create(dev, "compute", 0);
        fn(dev, streams);
        _exit(0);
    }
    close(fds[1]);
    /* Read to the end, keeping what fits: a child must never die of SIGPIPE. */
    size_t used = 0;
    char sink[512];
    for (;;) {
        ssize_t r =
            used < n - 1 ? read(fds[0], err + used, n - 1 - used) : read(fds[0], sink, sizeof sink);
        if (r <= 0) break;
        if (used < n - 1) used += (size_t)r;
    }
    err[used] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static ao_timeline *anchored(ao_device *dev, ao_stream **streams)
{
    ao_timeline *t = ao_timeline_create(dev, streams, 1);
    ao_timeline_anchor(t, streams[AO_STREAM_COMPUTE]);
    return t;
}

static void op_outside_iteration(ao_device *dev, ao_stream **streams)
{
    ao_timeline_op_begin(anchored(dev, streams), AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE,
                         "forward", -1, 0);
}

static void op_on_missing_stream(ao_device *dev, ao_stream **streams)
{
    ao_timeline *t = anchored(dev, streams);
    ao_timeline_begin(t, 0, "train");
    ao_timeline_op_begin(t, AO_STREAM_H2D, AO_CLASS_COPY, AO_KIND_NONE, "h2d", -1, 0);
}

static void op_before_anchor(ao_device *dev, ao_stream **streams)
{
    ao_timeline *t = ao_timeline_create(dev, streams, 1);
    ao_timeline_begin(t, 0, "train");
    ao_timeline_op_begin(t, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE, "forward", -1, 0);
}

static void op_ended_twice(ao_device *dev, ao_stream **streams)
{
    ao_timeline *t = anchored(dev, streams);
    ao_timeline_begin(t, 0, "train");
    int op =
        ao_timeline_op_begin(t, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE, "fwd", -1, 0);
    ao_timeline_op_end(t, op);
    ao_timeline_op_end(t, op);
}

static void op_left_open(ao_device *dev, ao_stream **streams)
{
    ao_timeline *t = anchored(dev, streams);
    ao_timeline_begin(t, 3, "train");
    ao_timeline_op_begin(t, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE, "backward", -1, 0);
    ao_timeline_end(t);
}

static void begun_twice(ao_device *dev, ao_stream **streams)
{
    ao_timeline *t = anchored(dev, streams);
    ao_timeline_begin(t, 0, "train");
    ao_timeline_begin(t, 1, "train");
}

static void anchored_twice(ao_device *dev, ao_stream **streams)
{
    ao_timeline_anchor(anchored(dev, streams), streams[AO_STREAM_COMPUTE]);
}

static void end_without_begin(ao_device *dev, ao_stream **streams)
{
    ao_timeline_end(anchored(dev, streams));
}

static void test_misuse(void **state)
{
    (void)state;
    static const struct {
        void (*fn)(ao_device *, ao_stream **);
        const char *says;
    } cases[] = {
        {op_outside_iteration, "op_begin outside an iteration"},
        {op_on_missing_stream, "on stream 4, which this rank does not have"},
        {op_before_anchor, "timed before the anchor"},
        {op_ended_twice, "op_end(0): not an open op of iteration 0"},
        {op_left_open, "iteration 3 ended with op \"backward\" still open"},
        {begun_twice, "iteration 1 begun before iteration 0 ended"},
        {anchored_twice, "anchor is recorded once"},
        {end_without_begin, "end outside an iteration"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[4096];
        int code = run_child(cases[i].fn, err, sizeof err);
        if (code != 1 || !strstr(err, cases[i].says))
            fail_msg("case %zu: exit %d, stderr: %s", i, code, err);
    }
}

/* ---- profiler schedule --------------------------------------------------- */

/* Expected active steps among 0..39, written out by hand from torch's
 * schedule (num_steps = wait + warmup + active; a step is recorded when
 * step % num_steps >= wait + warmup, and with repeat > 0 only while
 * step / num_steps < repeat). */
static void test_profile_schedule(void **state)
{
    (void)state;
    static const struct {
        ao_profile_schedule ps;
        int active[41]; /* terminated by -1 */
    } cases[] = {
        /* The config's defaults: one cycle of 1 wait, 1 warmup, 2 active. */
        {{1, 1, 1, 2, 1}, {2, 3, -1}},
        {{1, 0, 0, 1, 0},
         {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
          21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, -1}},
        {{1, 0, 0, 1, 3}, {0, 1, 2, -1}},
        {{1, 2, 1, 3, 2}, {3, 4, 5, 9, 10, 11, -1}},
        {{1, 2, 1, 3, 0},
         {3, 4, 5, 9, 10, 11, 15, 16, 17, 21, 22, 23, 27, 28, 29, 33, 34, 35, 39, -1}},
        {{1, 0, 3, 2, 0}, {3, 4, 8, 9, 13, 14, 18, 19, 23, 24, 28, 29, 33, 34, 38, 39, -1}},
        {{1, 5, 0, 1, 4}, {5, 11, 17, 23, -1}},
        {{1, 38, 1, 1, 1}, {39, -1}},
        {{1, 40, 0, 5, 1}, {-1}},
        /* Never: profiling off, no active steps, invalid fields. */
        {{0, 1, 1, 2, 0}, {-1}},
        {{1, 1, 1, 0, 0}, {-1}},
        {{1, -1, 1, 2, 0}, {-1}},
        {{1, 1, -1, 2, 0}, {-1}},
        {{1, 1, 1, 2, -1}, {-1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int want[40] = {0};
        for (int k = 0; cases[c].active[k] >= 0; k++) want[cases[c].active[k]] = 1;
        for (int step = 0; step < 40; step++)
            if (ao_profile_active(&cases[c].ps, step) != want[step])
                fail_msg("case %zu, step %d: got %d, want %d", c, step,
                         ao_profile_active(&cases[c].ps, step), want[step]);
    }
    ao_profile_schedule ps = {1, 1, 1, 2, 0};
    assert_false(ao_profile_active(&ps, -1));
    /* Far steps: no overflow, the cycle still holds. */
    assert_true(ao_profile_active(&ps, 4000000000LL * 4 + 2));
    assert_false(ao_profile_active(&ps, 4000000000LL * 4 + 1));
    ps.repeat = 1000000000;
    assert_true(ao_profile_active(&ps, 4000000000LL - 1));
    assert_false(ao_profile_active(&ps, 4000000000LL));
}

/* ---- NVTX ranges ----------------------------------------------------------- */

/* A device whose ranges are logged: the cpu backend's ops, with events made
 * by the real cpu device (they carry its ops) and range_push/pop appending
 * "+name " and "- " to a log. */
static ao_device *nvtx_real;
static char nvtx_log[1024];

static ao_event *fwd_event_create(ao_device *dev)
{
    (void)dev;
    return ao_event_create(nvtx_real);
}

static void log_push(ao_device *dev, const char *name)
{
    (void)dev;
    size_t n = strlen(nvtx_log);
    snprintf(nvtx_log + n, sizeof nvtx_log - n, "+%s ", name);
}

static void log_pop(ao_device *dev)
{
    (void)dev;
    size_t n = strlen(nvtx_log);
    snprintf(nvtx_log + n, sizeof nvtx_log - n, "- ");
}

static void nvtx_iteration(ao_timeline *t, ao_stream *const *streams, int64_t step)
{
    ao_timeline_begin(t, step, "train");
    int a =
        ao_timeline_op_begin(t, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE, "forward", 0, 0);
    int b = ao_timeline_op_begin(t, AO_STREAM_ALLGATHER, AO_CLASS_COMM, AO_KIND_ALLGATHER,
                                 "allgather", 1, 64);
    int c = ao_timeline_op_begin(t, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE, "backward",
                                 0, 0);
    enqueue_sleep(streams[AO_STREAM_COMPUTE], 1);
    ao_timeline_op_end(t, c); /* nested: closes the innermost range */
    ao_timeline_op_end(t, a); /* out of order: allgather's range is reopened */
    ao_timeline_op_end(t, b);
    ao_timeline_end(t);
}

static void test_nvtx_ranges(void **state)
{
    struct fixture *f = *state;
    nvtx_real = f->dev;
    struct ao_device_ops ops = ao_cpu_device_ops;
    ops.event_create = fwd_event_create;
    ops.range_push = log_push;
    ops.range_pop = log_pop;
    struct ao_device_base fake = {&ops};
    struct delivered d = {0};
    for (int timing = 0; timing <= 1; timing++) {
        ao_timeline *t = ao_timeline_create((ao_device *)&fake, f->streams, timing);
        ao_timeline_anchor(t, f->streams[AO_STREAM_COMPUTE]);
        nvtx_log[0] = '\0';
        nvtx_iteration(t, f->streams, 0); /* off by default */
        assert_string_equal(nvtx_log, "");
        ao_timeline_set_nvtx(t, 1);
        nvtx_iteration(t, f->streams, 7);
        if (timing)
            assert_string_equal(
                nvtx_log, "+train step 7 +forward +allgather +backward - - - +allgather - - ");
        else /* untimed ops have no handle: each end closes the innermost range */
            assert_string_equal(nvtx_log, "+train step 7 +forward +allgather +backward - - - - ");
        ao_timeline_set_nvtx(t, 0);
        nvtx_log[0] = '\0';
        nvtx_iteration(t, f->streams, 8);
        assert_string_equal(nvtx_log, "");
        ao_timeline_collect(t, 1, record, &d);
        ao_timeline_destroy(t);
    }
    assert_int_equal(d.n, 6);
    assert_int_equal(d.nops[4], 3); /* ranges change nothing in the timing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_two_streams, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cross_stream_wait, setup, teardown),
        cmocka_unit_test_setup_teardown(test_anchor_realtime, setup, teardown),
        cmocka_unit_test_setup_teardown(test_order_exactly_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_collect_does_not_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_runs_ahead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_steady_state_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_growth_keeps_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disabled, setup, teardown),
        cmocka_unit_test(test_misuse),
        cmocka_unit_test(test_profile_schedule),
        cmocka_unit_test_setup_teardown(test_nvtx_ranges, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
