/* The cpu device backend: stream order, events across streams, timing, GEMM
 * against a naive loop, memory ops, priorities, dtype tables, error paths. */
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

#include "runtime/device.h"

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int setup(void **state)
{
    ao_device *dev = ao_device_open("cpu", 0);
    if (!dev) return -1;
    *state = dev;
    return 0;
}

static int teardown(void **state)
{
    ao_device_close(*state);
    return 0;
}

/* ---- closures ------------------------------------------------------------ */

struct log {
    int n;
    int order[4096];
    int64_t t_us[4096];
};

struct append_arg {
    struct log *log;
    int value;
};

static void append(void *p)
{
    struct append_arg *a = p;
    a->log->t_us[a->log->n] = now_us();
    a->log->order[a->log->n++] = a->value;
}

/* Bigger than any inline slot: exercises the heap copy. */
struct big_arg {
    struct log *log;
    int value;
    char payload[1000];
};

static void append_big(void *p)
{
    struct big_arg *a = p;
    for (size_t i = 0; i < sizeof a->payload; i++)
        if (a->payload[i] != (char)(a->value + (int)i)) return; /* a corrupt copy logs nothing */
    a->log->order[a->log->n++] = a->value;
}

static void sleep_closure(void *p)
{
    sleep_ms(*(int *)p);
}

static void test_fifo_order(void **state)
{
    ao_device *dev = *state;
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    struct log *log = calloc(1, sizeof *log);
    for (int i = 0; i < 3000; i++) {
        if (i % 100 == 7) {
            struct big_arg b = {log, i, {0}};
            for (size_t j = 0; j < sizeof b.payload; j++) b.payload[j] = (char)(i + (int)j);
            ao_launch_host(s, append_big, &b, sizeof b);
            memset(&b, 0, sizeof b); /* the stream owns a copy */
        } else {
            struct append_arg a = {log, i};
            ao_launch_host(s, append, &a, sizeof a);
            a.value = -1;
        }
    }
    ao_stream_sync(s);
    assert_int_equal(log->n, 3000);
    for (int i = 0; i < 3000; i++) assert_int_equal(log->order[i], i);
    ao_stream_destroy(s);
    free(log);
}

static void test_destroy_drains(void **state)
{
    ao_device *dev = *state;
    ao_stream *s = ao_stream_create(dev, "drain", 0);
    struct log log = {0};
    int ms = 5;
    for (int i = 0; i < 5; i++) {
        ao_launch_host(s, sleep_closure, &ms, sizeof ms);
        struct append_arg a = {&log, i};
        ao_launch_host(s, append, &a, sizeof a);
    }
    ao_stream_destroy(s);
    assert_int_equal(log.n, 5);
}

static void test_device_sync_waits_for_all_streams(void **state)
{
    ao_device *dev = *state;
    ao_stream *a = ao_stream_create(dev, "a", 0), *b = ao_stream_create(dev, "b", 0);
    struct log la = {0}, lb = {0};
    int ms = 30;
    ao_launch_host(a, sleep_closure, &ms, sizeof ms);
    ao_launch_host(b, sleep_closure, &ms, sizeof ms);
    struct append_arg xa = {&la, 1}, xb = {&lb, 2};
    ao_launch_host(a, append, &xa, sizeof xa);
    ao_launch_host(b, append, &xb, sizeof xb);
    ao_device_sync(dev);
    assert_int_equal(la.n, 1);
    assert_int_equal(lb.n, 1);
    ao_stream_destroy(a);
    ao_stream_destroy(b);
}

/* ---- events -------------------------------------------------------------- */

static void test_wait_event_across_streams(void **state)
{
    ao_device *dev = *state;
    ao_stream *a = ao_stream_create(dev, "a", 0), *b = ao_stream_create(dev, "b", 0);
    ao_event *e = ao_event_create(dev);
    struct log la = {0}, lb = {0};
    int ms = 50;
    int64_t t0 = now_us();
    ao_launch_host(a, sleep_closure, &ms, sizeof ms);
    struct append_arg xa = {&la, 1};
    ao_launch_host(a, append, &xa, sizeof xa);
    ao_event_record(e, a);
    ao_stream_wait_event(b, e);
    struct append_arg xb = {&lb, 2};
    ao_launch_host(b, append, &xb, sizeof xb);
    ao_stream_sync(b);
    assert_int_equal(lb.n, 1);
    assert_int_equal(la.n, 1); /* A's work before the record ran first */
    assert_true(lb.t_us[0] >= la.t_us[0]);
    assert_true(lb.t_us[0] - t0 >= 50000);
    ao_event_destroy(e);
    ao_stream_destroy(a);
    ao_stream_destroy(b);
}

/* A wait captures the recording current at the call: recording the event
 * again later (behind a shut gate) must not hold the earlier wait back. */
static void test_wait_captures_generation(void **state)
{
    ao_device *dev = *state;
    ao_stream *a = ao_stream_create(dev, "a", 0), *b = ao_stream_create(dev, "b", 0);
    ao_event *e = ao_event_create(dev);
    struct log lb = {0};
    int short_ms = 20;
    struct gate g = {0}, *gp = &g;
    int64_t t0 = now_us();
    ao_launch_host(a, sleep_closure, &short_ms, sizeof short_ms);
    ao_event_record(e, a);
    ao_stream_wait_event(b, e);
    struct append_arg xb = {&lb, 1};
    ao_launch_host(b, append, &xb, sizeof xb);
    ao_launch_host(a, gate_wait, &gp, sizeof gp);
    ao_event_record(e, a);
    ao_stream_sync(b);
    assert_true(lb.t_us[0] - t0 >= 20000);   /* after the first recording */
    assert_false(atomic_load(&g.timed_out)); /* not held back by the second */
    assert_int_equal(ao_event_query(e), 0);  /* the second recording is still pending */
    gate_open(&g);
    ao_event_sync(e);
    assert_int_equal(ao_event_query(e), 1);
    ao_event_destroy(e);
    ao_stream_destroy(a);
    ao_stream_destroy(b);
}

static void test_elapsed(void **state)
{
    ao_device *dev = *state;
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    ao_event *e0 = ao_event_create(dev), *e1 = ao_event_create(dev);
    int ms = 20;
    ao_event_record(e0, s);
    ao_launch_host(s, sleep_closure, &ms, sizeof ms);
    ao_event_record(e1, s);
    ao_event_sync(e1);
    double us = ao_event_elapsed_us(e0, e1);
    assert_true(us >= 20000.0);
    assert_true(us < 30e6); /* sane, with a margin no loaded machine reaches */
    assert_true(ao_event_elapsed_us(e1, e0) < 0);
    ao_stream_destroy(s);
    ao_event_destroy(e0);
    ao_event_destroy(e1);
}

static void test_query_never_blocks(void **state)
{
    ao_device *dev = *state;
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    ao_event *e = ao_event_create(dev);
    assert_int_equal(ao_event_query(e), 1); /* never recorded: nothing pending, as CUDA */
    struct gate g = {0}, *gp = &g;
    ao_launch_host(s, gate_wait, &gp, sizeof gp);
    ao_event_record(e, s);
    /* A query that waited would return only once the gate gave up. */
    for (int i = 0; i < 100; i++) assert_int_equal(ao_event_query(e), 0);
    assert_false(atomic_load(&g.timed_out));
    gate_open(&g);
    ao_event_sync(e);
    assert_int_equal(ao_event_query(e), 1);
    ao_stream_destroy(s);
    ao_event_destroy(e);
}

/* An event destroyed with its recording still queued stays valid for it. */
static void test_destroy_event_with_pending_record(void **state)
{
    ao_device *dev = *state;
    ao_stream *s = ao_stream_create(dev, "compute", 0), *t = ao_stream_create(dev, "other", 0);
    ao_event *e = ao_event_create(dev);
    int ms = 20;
    ao_launch_host(s, sleep_closure, &ms, sizeof ms);
    ao_event_record(e, s);
    ao_stream_wait_event(t, e);
    ao_event_destroy(e);
    ao_stream_sync(t);
    ao_stream_destroy(s);
    ao_stream_destroy(t);
}

/* ---- child processes for fatal paths ------------------------------------- */

/* Runs fn(dev) in a child with stderr captured; returns its exit status. */
static int run_child(void (*fn)(ao_device *), char *err, size_t n)
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
        fn(dev);
        _exit(0);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t r;
    while ((r = read(fds[0], err + used, n - 1 - used)) > 0) used += (size_t)r;
    err[used] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void elapsed_unrecorded(ao_device *dev)
{
    ao_event *a = ao_event_create(dev), *b = ao_event_create(dev);
    ao_event_elapsed_us(a, b);
}

static void elapsed_incomplete(ao_device *dev)
{
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    ao_event *a = ao_event_create(dev), *b = ao_event_create(dev);
    ao_event_record(a, s);
    ao_event_sync(a);
    struct gate g = {0}, *gp = &g;
    ao_launch_host(s, gate_wait, &gp, sizeof gp);
    ao_event_record(b, s);
    ao_event_elapsed_us(a, b);
}

static void gemm_bf16(ao_device *dev)
{
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    float x[4] = {0};
    ao_gemm_desc d = {.m = 2,
                      .n = 2,
                      .k = 1,
                      .alpha = 1,
                      .a = x,
                      .lda = 1,
                      .b = x,
                      .ldb = 2,
                      .c = x,
                      .ldc = 2,
                      .ab_type = AO_BF16,
                      .c_type = AO_F32,
                      .batch_count = 1};
    ao_gemm(dev, s, &d);
}

static void gemm_bad_ld(ao_device *dev)
{
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    float x[16] = {0};
    ao_gemm_desc d = {.m = 2,
                      .n = 4,
                      .k = 3,
                      .alpha = 1,
                      .a = x,
                      .lda = 3,
                      .b = x,
                      .ldb = 3,
                      .c = x,
                      .ldc = 4,
                      .ab_type = AO_F32,
                      .c_type = AO_F32,
                      .batch_count = 1};
    ao_gemm(dev, s, &d);
}

static void gemm_bias_batched(ao_device *dev)
{
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    float x[16] = {0};
    ao_gemm_desc d = {.m = 2,
                      .n = 2,
                      .k = 1,
                      .alpha = 1,
                      .a = x,
                      .lda = 1,
                      .b = x,
                      .ldb = 2,
                      .c = x,
                      .ldc = 2,
                      .ab_type = AO_F32,
                      .c_type = AO_F32,
                      .batch_count = 2,
                      .stride_a = 2,
                      .stride_b = 2,
                      .stride_c = 4,
                      .bias = x};
    ao_gemm(dev, s, &d);
}

static void policy_twice(ao_device *dev)
{
    ao_gemm_set_policy(dev, 1, 0, 1); /* defaults: silent */
    ao_gemm_set_policy(dev, 4, 0, 0);
    ao_gemm_set_policy(dev, 2, 66, 0);
}

static void test_fatal_paths(void **state)
{
    char err[4096];
    assert_int_equal(run_child(elapsed_unrecorded, err, sizeof err), 1);
    assert_non_null(strstr(err, "aorta: error: event elapsed time: the start event was never"));
    assert_int_equal(run_child(elapsed_incomplete, err, sizeof err), 1);
    assert_non_null(strstr(err, "the end event is not complete yet"));
    assert_int_equal(run_child(gemm_bf16, err, sizeof err), 1);
    assert_non_null(strstr(err, "fp32 only (got A/B bfloat16"));
    assert_int_equal(run_child(gemm_bad_ld, err, sizeof err), 1);
    assert_non_null(strstr(err, "ldb = 3 is smaller than the 4 columns"));
    assert_int_equal(run_child(gemm_bias_batched, err, sizeof err), 1);
    assert_non_null(strstr(err, "a bias needs batch_count 1 (got 2)"));
    assert_int_equal(run_child(policy_twice, err, sizeof err), 0);
    char *first = strstr(err, "have no effect on the cpu device");
    assert_non_null(first);
    assert_null(strstr(first + 1, "have no effect")); /* said once */
}

/* ---- GEMM ---------------------------------------------------------------- */

static float elem(const float *x, int ld, int trans, int r, int c)
{
    return trans ? x[c * ld + r] : x[r * ld + c];
}

static void check_gemm(ao_device *dev, ao_stream *s, int ta, int tb, int m, int n, int k, int batch,
                       int pad, float beta)
{
    int a_rows = ta ? k : m, a_cols = ta ? m : k;
    int b_rows = tb ? n : k, b_cols = tb ? k : n;
    int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
    long long sa = (long long)a_rows * lda + 3, sb = (long long)b_rows * ldb + 5,
              sc = (long long)m * ldc + 1;
    float *a = ao_dev_alloc(dev, sizeof(float) * (size_t)(sa * batch));
    float *b = ao_dev_alloc(dev, sizeof(float) * (size_t)(sb * batch));
    float *c = ao_dev_alloc(dev, sizeof(float) * (size_t)(sc * batch));
    float *ref = malloc(sizeof(float) * (size_t)(sc * batch));
    srand(42);
    for (long long i = 0; i < sa * batch; i++) a[i] = (float)(rand() % 17 - 8) / 4;
    for (long long i = 0; i < sb * batch; i++) b[i] = (float)(rand() % 13 - 6) / 2;
    for (long long i = 0; i < sc * batch; i++) ref[i] = c[i] = (float)(rand() % 7 - 3);
    const float alpha = 1.5f;
    for (int p = 0; p < batch; p++) {
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
                double acc = 0;
                for (int l = 0; l < k; l++)
                    acc +=
                        (double)elem(a + p * sa, lda, ta, i, l) * elem(b + p * sb, ldb, tb, l, j);
                float *r = &ref[p * sc + i * ldc + j];
                *r = (float)(alpha * acc + beta * *r);
            }
        }
    }
    ao_gemm_desc d = {.trans_a = ta,
                      .trans_b = tb,
                      .m = m,
                      .n = n,
                      .k = k,
                      .alpha = alpha,
                      .beta = beta,
                      .a = a,
                      .lda = lda,
                      .b = b,
                      .ldb = ldb,
                      .c = c,
                      .ldc = ldc,
                      .ab_type = AO_F32,
                      .c_type = AO_F32,
                      .batch_count = batch,
                      .stride_a = sa,
                      .stride_b = sb,
                      .stride_c = sc};
    ao_gemm(dev, s, &d);
    ao_stream_sync(s);
    for (long long i = 0; i < sc * batch; i++) {
        /* Values are small multiples of 1/8: exact in fp32 whatever the order. */
        if (c[i] != ref[i])
            fail_msg("ta=%d tb=%d m=%d n=%d k=%d batch=%d: C[%lld] = %g, expected %g", ta, tb, m, n,
                     k, batch, i, c[i], ref[i]);
    }
    ao_dev_free(dev, a);
    ao_dev_free(dev, b);
    ao_dev_free(dev, c);
    free(ref);
}

/* A two-level batch equals its products one by one: 2 groups of 3 products
 * (4x5 = 4x6 times 6x5), groups 7 elements further apart than a stride. */
static void test_gemm_two_level(void **state)
{
    ao_device *dev = *state;
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    const int m = 4, n = 5, k = 6, inner = 3, outer = 2;
    const long long sa = m * k, sb = k * n, sc = m * n;
    const long long oa = inner * sa + 7, ob = inner * sb + 7, oc = inner * sc + 7;
    float *a = ao_dev_alloc(dev, (size_t)(outer * oa) * sizeof *a);
    float *b = ao_dev_alloc(dev, (size_t)(outer * ob) * sizeof *b);
    float *c = ao_dev_alloc(dev, (size_t)(outer * oc) * sizeof *c);
    float *ref = ao_dev_alloc(dev, (size_t)(outer * oc) * sizeof *ref);
    for (long long i = 0; i < outer * oa; i++) a[i] = (float)(i % 7 - 3);
    for (long long i = 0; i < outer * ob; i++) b[i] = (float)(i % 5 - 2) / 2;
    for (long long i = 0; i < outer * oc; i++) c[i] = ref[i] = -1;
    ao_gemm_desc d = {.m = m,
                      .n = n,
                      .k = k,
                      .alpha = 1,
                      .lda = k,
                      .ldb = n,
                      .ldc = n,
                      .ab_type = AO_F32,
                      .c_type = AO_F32,
                      .batch_count = 1};
    for (int o = 0; o < outer; o++)
        for (int i = 0; i < inner; i++) {
            d.a = a + o * oa + i * sa;
            d.b = b + o * ob + i * sb;
            d.c = ref + o * oc + i * sc;
            ao_gemm(dev, s, &d);
        }
    d.a = a, d.b = b, d.c = c;
    d.batch_count = inner;
    d.stride_a = sa, d.stride_b = sb, d.stride_c = sc;
    d.batch_outer = outer;
    d.outer_stride_a = oa, d.outer_stride_b = ob, d.outer_stride_c = oc;
    ao_gemm(dev, s, &d);
    ao_stream_sync(s);
    for (long long i = 0; i < outer * oc; i++) assert_float_equal(c[i], ref[i], 0);
    ao_dev_free(dev, a);
    ao_dev_free(dev, b);
    ao_dev_free(dev, c);
    ao_dev_free(dev, ref);
    ao_stream_destroy(s);
}

/* The cpu backend runs stream work on its own threads, which a host-side
 * launch path never delays: holds do nothing, and nothing waits for them. */
static void test_hold_is_noop(void **state)
{
    ao_device *dev = *state;
    ao_stream *s = ao_stream_create(dev, "allgather", 0);
    ao_event *e = ao_event_create(dev);
    ao_stream_hold(s);
    ao_event_record(e, s);
    ao_event_sync(e);
    assert_int_equal(ao_event_query(e), 1);
    ao_stream_release(s);
    ao_event_destroy(e);
    ao_stream_destroy(s);
}

/* The epilogue tests' GEMM: C[2x3] = A[2x2] B[3x2]^T on exact small values
 * (A B^T = {1, 2, 3, 3, 4, 7}), in buffers of the cpu device. */
struct small_gemm {
    float *a, *b, *c;
    ao_gemm_desc d;
};

static struct small_gemm small_gemm_new(ao_device *dev)
{
    struct small_gemm g;
    g.a = ao_dev_alloc(dev, 4 * sizeof *g.a);
    g.b = ao_dev_alloc(dev, 6 * sizeof *g.b);
    g.c = ao_dev_alloc(dev, 6 * sizeof *g.c);
    const float av[4] = {1, 2, 3, 4}, bv[6] = {1, 0, 0, 1, 1, 1};
    memcpy(g.a, av, sizeof av);
    memcpy(g.b, bv, sizeof bv);
    g.d = (ao_gemm_desc){.trans_b = 1,
                         .m = 2,
                         .n = 3,
                         .k = 2,
                         .alpha = 1,
                         .a = g.a,
                         .lda = 2,
                         .b = g.b,
                         .ldb = 2,
                         .c = g.c,
                         .ldc = 3,
                         .ab_type = AO_F32,
                         .c_type = AO_F32,
                         .batch_count = 1};
    return g;
}

static void small_gemm_free(ao_device *dev, struct small_gemm *g)
{
    ao_dev_free(dev, g->a);
    ao_dev_free(dev, g->b);
    ao_dev_free(dev, g->c);
}

/* C = A B^T + bias. */
static void test_gemm_bias(void **state)
{
    ao_device *dev = *state;
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    struct small_gemm g = small_gemm_new(dev);
    float *bias = ao_dev_alloc(dev, 3 * sizeof *bias);
    const float biasv[3] = {0.5f, -1, 2};
    memcpy(bias, biasv, sizeof biasv);
    g.d.bias = bias;
    ao_gemm(dev, s, &g.d);
    ao_stream_sync(s);
    const float want[6] = {1.5f, 1, 5, 3.5f, 3, 9};
    for (int i = 0; i < 6; i++) assert_float_equal(g.c[i], want[i], 0);
    small_gemm_free(dev, &g);
    ao_dev_free(dev, bias);
    ao_stream_destroy(s);
}

/* D = A B^T + C into a separate D: C only read. */
static void test_gemm_separate_d(void **state)
{
    ao_device *dev = *state;
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    struct small_gemm g = small_gemm_new(dev);
    float *d = ao_dev_alloc(dev, 6 * sizeof *d);
    const float cv[6] = {1, 2, 3, 4, 5, 6};
    memcpy(g.c, cv, sizeof cv);
    g.d.beta = 1;
    g.d.d = d;
    ao_gemm(dev, s, &g.d);
    ao_stream_sync(s);
    const float want[6] = {2, 4, 6, 7, 9, 13};
    for (int i = 0; i < 6; i++) {
        assert_float_equal(d[i], want[i], 0);
        assert_float_equal(g.c[i], cv[i], 0);
    }
    small_gemm_free(dev, &g);
    ao_dev_free(dev, d);
    ao_stream_destroy(s);
}

static void test_gemm(void **state)
{
    ao_device *dev = *state;
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(dev, s, ta, tb, 5, 7, 3, 1, 0, 0.0f);
            check_gemm(dev, s, ta, tb, 13, 4, 9, 1, 3, 0.5f);  /* ld > width, beta */
            check_gemm(dev, s, ta, tb, 6, 11, 8, 3, 2, -1.0f); /* strided batch */
            check_gemm(dev, s, ta, tb, 64, 48, 80, 2, 0, 1.0f);
        }
    }
    ao_stream_destroy(s);
}

/* ---- memory -------------------------------------------------------------- */

static void test_memset_copy(void **state)
{
    ao_device *dev = *state;
    ao_stream *s = ao_stream_create(dev, "h2d", 0);
    const size_t n = 100003;
    unsigned char *d0 = ao_dev_alloc(dev, n), *d1 = ao_dev_alloc(dev, n);
    unsigned char *h = ao_host_alloc(dev, n), *h2 = ao_host_alloc(dev, n);
    assert_int_equal((uintptr_t)d0 % 64, 0);
    assert_int_equal((uintptr_t)h % 64, 0);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 7);
    ao_memset_async(dev, d0, 0xab, n, s);
    ao_stream_sync(s);
    for (size_t i = 0; i < n; i++) assert_int_equal(d0[i], 0xab);
    ao_copy_async(dev, d0, h, n, AO_H2D, s);
    ao_copy_sm_async(dev, d1, d0, n, s);
    ao_memset_async(dev, d0, 0, n / 2, s);
    ao_copy_peer_async(dev, h2, dev, d1, n, s);
    ao_stream_sync(s);
    assert_memory_equal(d1, h, n);
    assert_memory_equal(h2, h, n);
    for (size_t i = 0; i < n / 2; i++) assert_int_equal(d0[i], 0);
    assert_memory_equal(d0 + n / 2, h + n / 2, n - n / 2);
    ao_dev_free(dev, d0);
    ao_dev_free(dev, d1);
    ao_host_free(dev, h);
    ao_host_free(dev, h2);
    ao_stream_destroy(s);
}

/* ---- device, priorities, dtypes ------------------------------------------ */

static void test_priorities(void **state)
{
    ao_device *dev = *state;
    ao_device_info info;
    ao_device_get_info(dev, &info);
    assert_int_equal(info.priority_least, 0);
    assert_int_equal(info.priority_greatest, -5);
    static const int asked[] = {0, -1, -3, -5, -10, 4};
    static const int applied[] = {0, -1, -3, -5, -5, 0};
    for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++) {
        ao_stream *s = ao_stream_create(dev, "p", asked[i]);
        assert_int_equal(ao_stream_priority(s), applied[i]);
        assert_string_equal(ao_stream_name(s), "p");
        ao_stream_destroy(s);
    }
}

static void test_device_info_and_backends(void **state)
{
    ao_device *dev = *state;
    ao_device_info info;
    ao_device_get_info(dev, &info);
    assert_string_equal(info.backend, "cpu");
    assert_string_equal(ao_device_backend(dev), "cpu");
    assert_true(strlen(info.name) > 0);
    assert_true(info.sm_count >= 1);
    assert_true(info.total_mem > 0);
    assert_true(strstr(info.runtime_version, "OpenBLAS") != NULL);

    assert_int_equal(ao_device_count("cpu"), 1);
    assert_int_equal(ao_device_count("nope"), 0);
    int found_cpu = 0;
    for (int i = 0; i < ao_device_backend_count(); i++) {
        char v[256];
        ao_device_backend_version(i, v, sizeof v);
        assert_true(strlen(v) > 0);
        found_cpu |= strcmp(ao_device_backend_name(i), "cpu") == 0;
    }
    assert_true(found_cpu);
    assert_null(ao_device_backend_name(ao_device_backend_count()));
    assert_non_null(ao_device_best_backend());

    assert_null(ao_device_open("cpu", 1));
    assert_null(ao_device_open("nope", 0));
    ao_device *again = ao_device_open("auto", 0);
    assert_non_null(again);
    ao_device_close(again);

    assert_true(ao_device_supports(dev, AO_F32));
    assert_true(ao_device_supports(dev, AO_I32));
    assert_false(ao_device_supports(dev, AO_BF16));
    assert_false(ao_device_supports(dev, AO_F16));
    assert_false(ao_device_supports(dev, (ao_dtype)99));
}

static void test_dtypes(void **state)
{
    static const struct {
        const char *name;
        ao_dtype t;
        size_t size;
    } table[] = {
        {"float", AO_F32, 4},  {"half", AO_F16, 2},  {"bfloat16", AO_BF16, 2},
        {"double", AO_F64, 8}, {"int32", AO_I32, 4}, {"int8", AO_I8, 1},
        {"uint8", AO_U8, 1},   {"int64", AO_I64, 8}, {"uint32", AO_U32, 4},
        {"uint64", AO_U64, 8}, {"fp32", AO_F32, 4},  {"f32", AO_F32, 4},
        {"fp16", AO_F16, 2},   {"f16", AO_F16, 2},   {"bf16", AO_BF16, 2},
        {"BF16", AO_BF16, 2},  {"fp64", AO_F64, 8},  {"f64", AO_F64, 8},
        {"i32", AO_I32, 4},    {"u8", AO_U8, 1},     {"i64", AO_I64, 8},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        ao_dtype t = AO_NDTYPES;
        assert_int_equal(ao_dtype_parse(table[i].name, &t), 0);
        assert_int_equal(t, table[i].t);
        assert_int_equal(ao_dtype_size(t), table[i].size);
    }
    for (int t = 0; t < AO_NDTYPES; t++) {
        ao_dtype back;
        assert_int_equal(ao_dtype_parse(ao_dtype_name((ao_dtype)t), &back), 0);
        assert_int_equal(back, t);
    }
    assert_string_equal(ao_dtype_name(AO_BF16), "bfloat16");
    ao_dtype t;
    assert_int_equal(ao_dtype_parse("fp8", &t), -1);
    assert_int_equal(ao_dtype_parse("", &t), -1);
    assert_int_equal(ao_dtype_parse("fp3", &t), -1);
    assert_int_equal(ao_dtype_parse("float ", &t), -1);
    assert_int_equal(ao_dtype_size(AO_NDTYPES), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifo_order),
        cmocka_unit_test(test_destroy_drains),
        cmocka_unit_test(test_device_sync_waits_for_all_streams),
        cmocka_unit_test(test_wait_event_across_streams),
        cmocka_unit_test(test_wait_captures_generation),
        cmocka_unit_test(test_elapsed),
        cmocka_unit_test(test_query_never_blocks),
        cmocka_unit_test(test_destroy_event_with_pending_record),
        cmocka_unit_test(test_fatal_paths),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_bias),
        cmocka_unit_test(test_gemm_separate_d),
        cmocka_unit_test(test_gemm_two_level),
        cmocka_unit_test(test_hold_is_noop),
        cmocka_unit_test(test_memset_copy),
        cmocka_unit_test(test_priorities),
        cmocka_unit_test(test_device_info_and_backends),
        cmocka_unit_test(test_dtypes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
