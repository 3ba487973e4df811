/* The collective API without a network: names, parsing, nccl-tests sizes and
 * bus-bandwidth factors, id hex encoding, the backend registry, and the
 * watchdog driven through comm.c by a fake backend on the cpu device. */
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

#include "comm/comm.h"
#include "comm/wait.h"
#include "comm/watchdog.h"

static void test_coll_names(void **state)
{
    static const char *const names[AO_NCOLLS] = {
        "allgather", "reducescatter", "allreduce", "broadcast", "reduce", "alltoall", "sendrecv"};
    for (int c = 0; c < AO_NCOLLS; c++) {
        assert_string_equal(ao_coll_name((ao_coll)c), names[c]);
        ao_coll back = AO_NCOLLS;
        assert_int_equal(ao_coll_parse(names[c], &back), 0);
        assert_int_equal(back, c);
    }
    ao_coll c;
    assert_int_equal(ao_coll_parse("all_gather", &c), 0);
    assert_int_equal(c, AO_ALLGATHER);
    assert_int_equal(ao_coll_parse("Reduce-Scatter", &c), 0);
    assert_int_equal(c, AO_REDUCESCATTER);
    assert_int_equal(ao_coll_parse("all_reduce", &c), 0);
    assert_int_equal(c, AO_ALLREDUCE);
    assert_int_equal(ao_coll_parse("all_to_all", &c), 0);
    assert_int_equal(c, AO_ALLTOALL);
    assert_int_equal(ao_coll_parse("gather", &c), -1);
    assert_int_equal(ao_coll_parse("", &c), -1);
    assert_int_equal(ao_coll_parse("__", &c), -1);
    assert_int_equal(ao_coll_parse("allreduceallreduceallreduceallreduce", &c), -1);
    assert_string_equal(ao_coll_name(AO_NCOLLS), "unknown");
}

static void test_redop_names(void **state)
{
    static const char *const names[AO_NREDOPS] = {"sum", "prod", "max", "min", "avg"};
    for (int op = 0; op < AO_NREDOPS; op++) {
        assert_string_equal(ao_redop_name((ao_redop)op), names[op]);
        ao_redop back = AO_NREDOPS;
        assert_int_equal(ao_redop_parse(names[op], &back), 0);
        assert_int_equal(back, op);
    }
    ao_redop op;
    assert_int_equal(ao_redop_parse("SUM", &op), 0);
    assert_int_equal(op, AO_SUM);
    assert_int_equal(ao_redop_parse("mean", &op), 0);
    assert_int_equal(op, AO_AVG);
    assert_int_equal(ao_redop_parse("product", &op), 0);
    assert_int_equal(op, AO_PROD);
    assert_int_equal(ao_redop_parse("xor", &op), -1);
    assert_int_equal(ao_redop_parse("", &op), -1);
}

static void test_busbw_factors(void **state)
{
    /* Hand-computed from nccl-tests' PERFORMANCE.md formulas. */
    assert_float_equal(ao_coll_busbw_factor(AO_ALLREDUCE, 8), 1.75, 1e-12);
    assert_float_equal(ao_coll_busbw_factor(AO_ALLREDUCE, 2), 1.0, 1e-12);
    assert_float_equal(ao_coll_busbw_factor(AO_ALLREDUCE, 1), 0.0, 1e-12);
    assert_float_equal(ao_coll_busbw_factor(AO_ALLGATHER, 8), 0.875, 1e-12);
    assert_float_equal(ao_coll_busbw_factor(AO_REDUCESCATTER, 4), 0.75, 1e-12);
    assert_float_equal(ao_coll_busbw_factor(AO_ALLTOALL, 2), 0.5, 1e-12);
    assert_float_equal(ao_coll_busbw_factor(AO_BROADCAST, 8), 1.0, 1e-12);
    assert_float_equal(ao_coll_busbw_factor(AO_REDUCE, 8), 1.0, 1e-12);
    assert_float_equal(ao_coll_busbw_factor(AO_SENDRECV, 2), 1.0, 1e-12);
}

static void test_coll_bytes(void **state)
{
    /* all_gather: receive buffer; reduce_scatter: send buffer; the rest count x size. */
    assert_int_equal(ao_coll_bytes(AO_ALLGATHER, 1024, AO_F32, 4), 16384);
    assert_int_equal(ao_coll_bytes(AO_REDUCESCATTER, 1024, AO_BF16, 8), 16384);
    assert_int_equal(ao_coll_bytes(AO_ALLTOALL, 10, AO_F64, 2), 160);
    assert_int_equal(ao_coll_bytes(AO_ALLREDUCE, 1024, AO_F32, 4), 4096);
    assert_int_equal(ao_coll_bytes(AO_BROADCAST, 3, AO_I64, 8), 24);
    assert_int_equal(ao_coll_bytes(AO_REDUCE, 5, AO_U8, 8), 5);
    assert_int_equal(ao_coll_bytes(AO_SENDRECV, 7, AO_I32, 2), 28);
}

static void test_id_hex(void **state)
{
    ao_comm_id id, back;
    for (int i = 0; i < AO_COMM_ID_BYTES; i++) id.bytes[i] = (unsigned char)(i * 37 + 11);
    char hex[2 * AO_COMM_ID_BYTES + 1];
    ao_comm_id_to_hex(&id, hex);
    assert_int_equal(strlen(hex), 2 * AO_COMM_ID_BYTES);
    assert_memory_equal(hex, "0b30557a9f", 10);
    memset(&back, 0, sizeof back);
    assert_int_equal(ao_comm_id_from_hex(hex, &back), 0);
    assert_memory_equal(&id, &back, sizeof id);

    for (char *p = hex; *p; p++) *p = (char)(*p >= 'a' ? *p - 32 : *p); /* upper case too */
    assert_int_equal(ao_comm_id_from_hex(hex, &back), 0);
    assert_memory_equal(&id, &back, sizeof id);

    hex[17] = 'g';
    assert_int_equal(ao_comm_id_from_hex(hex, &back), -1);
    assert_int_equal(ao_comm_id_from_hex("00ff", &back), -1);
    assert_int_equal(ao_comm_id_from_hex(NULL, &back), -1);
}

static void test_registry(void **state)
{
    int n = ao_comm_backend_count();
    int has_mpi = 0;
    for (int i = 0; i < n; i++) {
        char v[512];
        ao_comm_backend_version(i, v, sizeof v);
        assert_true(strlen(v) > 0);
        has_mpi |= strcmp(ao_comm_backend_name(i), "mpi") == 0;
    }
    assert_null(ao_comm_backend_name(n));
    ao_comm_id id;
    memset(&id, 0xff, sizeof id);
    assert_int_equal(ao_comm_make_id("bogus", &id), -1);
#ifdef AORTA_HAVE_MPI
    assert_true(has_mpi);
    assert_string_equal(ao_comm_backend_for("cpu"), "mpi");
    assert_int_equal(ao_comm_make_id("mpi", &id), 0);
    for (int i = 0; i < AO_COMM_ID_BYTES; i++) assert_int_equal(id.bytes[i], 0);
#else
    assert_false(has_mpi);
    assert_null(ao_comm_backend_for("cpu"));
#endif
#ifndef AORTA_HAVE_NCCL
    assert_null(ao_comm_backend_for("cuda"));
#endif
}

/* ---- watchdog through a fake backend -------------------------------------- */

struct fake_comm {
    struct ao_comm_base base;
    int op_ms;      /* how long each collective "runs" on the stream */
    int call_ms;    /* how long the host stays inside each enqueue call */
    int fail_check; /* check() reports an async error */
    int hang_check; /* check() never returns (a driver that does not answer) */
    int destroyed;
};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void run_op(void *p)
{
    sleep_ms(*(int *)p);
}

static void fake_coll(ao_comm *c, ao_coll op, const void *send, void *recv, size_t count,
                      ao_dtype t, ao_redop r, int peer, int recv_peer)
{
    struct fake_comm *f = (struct fake_comm *)c;
    if (f->call_ms) sleep_ms(f->call_ms);
    ao_launch_host(f->base.stream, run_op, &f->op_ms, sizeof f->op_ms);
}

static void fake_abort(ao_comm *c)
{
    fprintf(stderr, "fake abort of the %s communicator\n", ao_stream_name(ao_comm_stream(c)));
}

static int fake_check(ao_comm *c, char *buf, size_t n)
{
    if (((struct fake_comm *)c)->hang_check) sleep_ms(120000);
    if (!((struct fake_comm *)c)->fail_check) return 0;
    snprintf(buf, n, "peer rank 3 went away");
    return -1;
}

static void fake_destroy(ao_comm *c)
{
    ((struct fake_comm *)c)->destroyed = 1;
}

static const struct ao_comm_ops fake_ops = {
    .name = "fake",
    .device_backend = "cpu",
    .destroy = fake_destroy,
    .abort = fake_abort,
    .coll = fake_coll,
    .check = fake_check,
};

static void fake_init(struct fake_comm *f, ao_device *dev, ao_stream *s, double timeout_s)
{
    memset(f, 0, sizeof *f);
    f->base.ops = &fake_ops;
    f->base.dev = dev;
    f->base.stream = s;
    f->base.rank = 1;
    f->base.size = 2;
    f->base.timeout_s = timeout_s;
    f->base.watch = ao_watch_add((ao_comm *)f);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 40 ops of 100 ms queued at once take 4 s, twice the 2 s timeout, yet none
 * of them is late: each op's clock starts when the one before it is done. An
 * op would have to wait 2 s for a core to be late (20 times its length): load
 * does not get there. 40 also outgrows the first ring of pending ops. */
static void test_watchdog_quiet_when_ops_progress(void **state)
{
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "allgather", 0);
    struct fake_comm f;
    fake_init(&f, dev, s, 2);
    f.op_ms = 100;
    float buf[4];
    int64_t t0 = now_ms();
    for (int i = 0; i < 40; i++) ao_allgather((ao_comm *)&f, buf, buf, 1, AO_F32);
    ao_stream_sync(s);
    assert_true(now_ms() - t0 >= 4000);
    ao_comm_destroy((ao_comm *)&f);
    assert_int_equal(f.destroyed, 1);
    assert_null(f.base.watch);
    ao_stream_destroy(s);
    ao_device_close(dev);
}

/* Runs a hanging scenario in a child; returns its exit status, stderr in err
 * and how long it took. */
static int run_child(void (*fn)(void), char *err, size_t n, int64_t *ms)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    int64_t t0 = now_ms();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
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
    *ms = now_ms() - t0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void hang_allreduce(void)
{
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "allreduce", 0);
    ao_stream *other = ao_stream_create(dev, "allgather", 0);
    struct fake_comm f, g;
    fake_init(&f, dev, s, 0.3);
    fake_init(&g, dev, other, 0.3);
    f.op_ms = 60000;
    float buf[1];
    ao_allreduce((ao_comm *)&f, buf, buf, 1024, AO_F32, AO_SUM);
    ao_stream_sync(s);
}

/* A 10 ms op, then the caller's own work on the stream (where the engine
 * records its end event), then the caller's mark; a 2 s timeout. Marked at
 * once, the op is seen done long before the 5 s of work end (a 10 ms op
 * late by 2 s is more than load does); deferred, the mark waits for work
 * that outlasts any test (60 s), so the watchdog must fire first. */
static void op_then_caller_work(int defer)
{
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "allgather", 0);
    struct fake_comm f;
    fake_init(&f, dev, s, 2);
    f.op_ms = 10;
    int work_ms = defer ? 60000 : 5000;
    float buf[1];
    if (defer) ao_comm_defer_mark((ao_comm *)&f);
    ao_allgather((ao_comm *)&f, buf, buf, 1, AO_F32);
    ao_launch_host(s, run_op, &work_ms, sizeof work_ms);
    ao_comm_mark((ao_comm *)&f);
    ao_stream_sync(s);
}

static void deferred_mark(void)
{
    op_then_caller_work(1);
}

static void immediate_mark(void)
{
    op_then_caller_work(0);
}

/* Where the completion record sits: right after the op, the op is seen done
 * at once; deferred, only after the caller's work, past the timeout (what
 * shows that the record moved, not that it vanished). */
static void test_watchdog_deferred_mark(void **state)
{
    char err[4096];
    int64_t ms;
    assert_int_equal(run_child(immediate_mark, err, sizeof err, &ms), 0);
    assert_null(strstr(err, "did not complete"));
    assert_int_equal(run_child(deferred_mark, err, sizeof err, &ms), 1);
    assert_non_null(
        strstr(err, "allgather #1 of 8 bytes on stream \"allgather\" did not complete"));
}

static void async_error(void)
{
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "reducescatter", 0);
    struct fake_comm f;
    fake_init(&f, dev, s, 60);
    f.fail_check = 1;
    sleep_ms(60000);
}

static void test_watchdog_fires_on_hang(void **state)
{
    char err[4096];
    int64_t ms;
    assert_int_equal(run_child(hang_allreduce, err, sizeof err, &ms), 1);
    assert_non_null(strstr(err, "aorta: error: rank 1: allreduce #1 of 4096 bytes on stream "
                                "\"allreduce\" did not complete in 0.3 s\n"));
    /* The hint fits the backend: no NCCL advice for another one. */
    assert_null(strstr(err, "NCCL_DEBUG"));
    assert_non_null(strstr(err, "distributed.timeout_s"));
    /* Every communicator is aborted, the hung one first. */
    char *first = strstr(err, "fake abort of the allreduce communicator");
    char *second = strstr(err, "fake abort of the allgather communicator");
    assert_non_null(first);
    assert_non_null(second);
    assert_true(first < second);
    assert_true(ms >= 300);
    assert_true(ms < 30000); /* the hung op takes 60 s: a wide margin for load */
}

static void test_watchdog_fires_on_async_error(void **state)
{
    char err[4096];
    int64_t ms;
    assert_int_equal(run_child(async_error, err, sizeof err, &ms), 1);
    assert_non_null(strstr(err, "aorta: error: rank 1: communicator on stream \"reducescatter\" "
                                "failed: peer rank 3 went away"));
    assert_true(ms < 30000); /* the child would sleep 60 s: a wide margin for load */
}

static void bad_root(void)
{
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "broadcast", 0);
    struct fake_comm f;
    fake_init(&f, dev, s, 0);
    float buf[1];
    ao_broadcast((ao_comm *)&f, buf, buf, 1, AO_F32, 2);
}

static void test_bad_root_is_fatal(void **state)
{
    char err[4096];
    int64_t ms;
    assert_int_equal(run_child(bad_root, err, sizeof err, &ms), 1);
    assert_non_null(strstr(err, "broadcast: root 2 is not a rank of this 2-rank communicator"));
}

/* ---- calls made before, and watched host waits ------------------------------- */

/* ao_comm_seen: a signature is new until the call is made, whatever else was
 * made before; hundreds of them outgrow the first table. */
static void test_seen_signatures(void **state)
{
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "allgather", 0);
    struct fake_comm f;
    fake_init(&f, dev, s, 60);
    ao_comm *c = (ao_comm *)&f;
    float buf[2048];
    assert_false(ao_comm_seen(c, AO_ALLGATHER, 16, AO_F32, AO_SUM));
    ao_allgather(c, buf, buf, 16, AO_F32);
    assert_true(ao_comm_seen(c, AO_ALLGATHER, 16, AO_F32, AO_SUM));
    assert_false(ao_comm_seen(c, AO_ALLGATHER, 17, AO_F32, AO_SUM));
    assert_false(ao_comm_seen(c, AO_ALLGATHER, 16, AO_BF16, AO_SUM));
    assert_false(ao_comm_seen(c, AO_REDUCESCATTER, 16, AO_F32, AO_SUM));
    ao_allreduce(c, buf, buf, 16, AO_F32, AO_SUM);
    assert_true(ao_comm_seen(c, AO_ALLREDUCE, 16, AO_F32, AO_SUM));
    assert_false(ao_comm_seen(c, AO_ALLREDUCE, 16, AO_F32, AO_MAX));
    for (size_t n = 1; n <= 300; n++) ao_reducescatter(c, buf, buf, n, AO_F32, AO_SUM);
    for (size_t n = 1; n <= 300; n++)
        assert_true(ao_comm_seen(c, AO_REDUCESCATTER, n, AO_F32, AO_SUM));
    assert_false(ao_comm_seen(c, AO_REDUCESCATTER, 301, AO_F32, AO_SUM));
    assert_true(ao_comm_seen(c, AO_ALLGATHER, 16, AO_F32, AO_SUM));
    ao_stream_sync(s);
    ao_comm_destroy(c);
    ao_stream_destroy(s);
    ao_device_close(dev);
}

/* The host inside a collective's enqueue call (NCCL's set-up on first use,
 * issue 52): no op is in flight on the device yet, only the host wait. */
static void hang_in_enqueue(void)
{
    ao_wait_configure(1, 0.3);
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "allreduce", 0);
    struct fake_comm f;
    fake_init(&f, dev, s, 0.3);
    f.call_ms = 120000;
    float buf[1];
    ao_allreduce((ao_comm *)&f, buf, buf, 1024, AO_F32, AO_SUM);
}

static void test_wait_enqueue_call(void **state)
{
    char err[4096];
    int64_t ms;
    assert_int_equal(run_child(hang_in_enqueue, err, sizeof err, &ms), 1);
    assert_non_null(strstr(err, "aorta: error: rank 1: the host has been inside the enqueue call "
                                "of allreduce #1 of 4096 bytes on stream \"allreduce\": no "
                                "progress in 0.3 s\n"));
    assert_non_null(strstr(err, "fake abort of the allreduce communicator"));
    assert_true(ms < 60000); /* the call would take 120 s: a wide margin for load */
}

/* Waits nest: while waits inside the outer one keep ending it progresses;
 * once the inner one stalls, the message names the inner one, with its
 * stream and step. Each inner wait lasts 20 ms against a 2 s timeout (100
 * times its length), the loop 2.5 timeouts. */
static void nested_waits(void)
{
    ao_wait_configure(4, 2);
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    int outer = ao_wait_begin("the last iterations' timings", NULL, NULL);
    for (int i = 0; i < 250; i++) {
        int inner = ao_wait_begin("a short wait", NULL, NULL);
        sleep_ms(20);
        ao_wait_end(inner);
    }
    printf("outer progressed\n");
    fflush(stdout);
    ao_comm_set_step(7);
    ao_wait_begin("readback of a step's loss and grad norm", s, "look at the compute stream");
    sleep_ms(120000);
    ao_wait_end(outer);
}

static void test_wait_nested(void **state)
{
    char err[4096];
    int64_t ms;
    assert_int_equal(run_child(nested_waits, err, sizeof err, &ms), 1);
    assert_non_null(strstr(err, "aorta: error: rank 4: readback of a step's loss and grad norm "
                                "(step 7) on stream \"compute\": no progress in 2 s\n"
                                "hint: look at the compute stream\n"));
    assert_null(strstr(err, "the last iterations' timings"));
    assert_true(ms < 60000);
}

/* A wait with no stream, at start; one that ends in time is never named. */
static void plain_wait(void)
{
    ao_wait_configure(0, 0.3);
    int w = ao_wait_begin("bootstrap: the comm id from rank 0", NULL, NULL);
    ao_wait_end(w);
    w = ao_wait_begin("communicator init", NULL, NULL);
    sleep_ms(120000);
}

static void test_wait_plain(void **state)
{
    char err[4096];
    int64_t ms;
    assert_int_equal(run_child(plain_wait, err, sizeof err, &ms), 1);
    assert_non_null(
        strstr(err, "aorta: error: rank 0: communicator init (at start): no progress in 0.3 s\n"));
    assert_non_null(strstr(err, "distributed.timeout_s")); /* the generic hint */
    assert_null(strstr(err, "bootstrap"));
    assert_true(ms < 60000);
}

/* The collective watchdog's own query of the device never returns: the
 * monitor, which makes no device call, still ends the rank. */
static void stuck_query(void)
{
    ao_wait_configure(1, 0.3);
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "allgather", 0);
    struct fake_comm f;
    fake_init(&f, dev, s, 60);
    f.hang_check = 1;
    sleep_ms(120000);
}

static void test_wait_stuck_device_query(void **state)
{
    char err[4096];
    int64_t ms;
    assert_int_equal(run_child(stuck_query, err, sizeof err, &ms), 1);
    assert_non_null(strstr(err, "aorta: error: rank 1: the collective watchdog's query of the "
                                "device has not returned in 0.3 s"));
    assert_true(ms < 60000);
}

/* Unconfigured (a command without a timeout), nothing is watched. */
static void test_wait_unwatched(void **state)
{
    int w = ao_wait_begin("data loader", NULL, NULL);
    assert_int_equal(w, -1);
    ao_wait_end(w);
}

static void test_create_without_backend(void **state)
{
#ifdef AORTA_HAVE_MPI
    skip(); /* the cpu device has a backend in this build */
#else
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "allreduce", 0);
    ao_rank_info ri = {0, 1, 0, 1, 0};
    ao_comm_id id = {{0}};
    assert_null(ao_comm_create(dev, s, &ri, &id, NULL));
    ao_stream_destroy(s);
    ao_device_close(dev);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coll_names),
        cmocka_unit_test(test_redop_names),
        cmocka_unit_test(test_busbw_factors),
        cmocka_unit_test(test_coll_bytes),
        cmocka_unit_test(test_id_hex),
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_watchdog_quiet_when_ops_progress),
        cmocka_unit_test(test_watchdog_fires_on_hang),
        cmocka_unit_test(test_watchdog_deferred_mark),
        cmocka_unit_test(test_seen_signatures),
        cmocka_unit_test(test_wait_enqueue_call),
        cmocka_unit_test(test_wait_nested),
        cmocka_unit_test(test_wait_plain),
        cmocka_unit_test(test_wait_stuck_device_query),
        cmocka_unit_test(test_wait_unwatched),
        cmocka_unit_test(test_watchdog_fires_on_async_error),
        cmocka_unit_test(test_bad_root_is_fatal),
        cmocka_unit_test(test_create_without_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
