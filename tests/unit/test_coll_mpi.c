/* The MPI comm backend on 2 ranks. Run by ctest as a plain test, this binary
 * starts itself under mpirun twice: once ("--ranks") to check every
 * collective, bit-exact on integer-valued data, out of place and in place, plus
 * two communicators running at the same time on two streams (ordered by
 * events, never by durations); once
 * ("--watchdog") with rank 1 skipping an all-reduce, which the watchdog on
 * rank 0 must report and abort within its timeout. */
#include <setjmp.h>
#include <stdatomic.h>
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

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int env_int(const char *name)
{
    const char *v = getenv(name);
    return v ? atoi(v) : -1;
}

static ao_rank_info rank_info(void)
{
    ao_rank_info ri = {env_int("OMPI_COMM_WORLD_RANK"), env_int("OMPI_COMM_WORLD_SIZE"),
                       env_int("OMPI_COMM_WORLD_LOCAL_RANK"), env_int("OMPI_COMM_WORLD_LOCAL_SIZE"),
                       0};
    return ri;
}

/* ---- inside the ranks ----------------------------------------------------- */

struct rank_ctx {
    ao_device *dev;
    ao_stream *s;
    ao_comm *c;
    int rank, n;
};

static int rank_setup(void **state)
{
    static struct rank_ctx x;
    ao_rank_info ri = rank_info();
    x.dev = ao_device_open("cpu", 0);
    x.s = ao_stream_create(x.dev, "comm", -1);
    ao_comm_id id;
    if (ao_comm_make_id("mpi", &id) != 0) return -1;
    /* A hang fails the run instead of blocking ctest. */
    ao_comm_opts opts = {.timeout_s = 60};
    x.c = ao_comm_create(x.dev, x.s, &ri, &id, &opts);
    if (!x.c) return -1;
    x.rank = ao_comm_rank(x.c);
    x.n = ao_comm_size(x.c);
    *state = &x;
    return 0;
}

static int rank_teardown(void **state)
{
    struct rank_ctx *x = *state;
    ao_comm_destroy(x->c);
    ao_stream_destroy(x->s);
    ao_device_close(x->dev);
    return 0;
}

/* Integer-valued floats: every sum of two is exact. */
static float val(int rank, size_t i)
{
    return (float)((rank + 1) * 1000 + (int)(i % 997));
}

static const size_t sizes[] = {1, 7, 1000, 65539};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

static float *alloc_f(struct rank_ctx *x, size_t n)
{
    float *p = ao_dev_alloc(x->dev, n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = -1.0f;
    return p;
}

static void expect(const float *got, size_t i, float want, const char *what, size_t count)
{
    if (got[i] != want)
        fail_msg("%s count %zu: element %zu is %g, expected %g", what, count, i, got[i], want);
}

static void test_allgather(void **state)
{
    struct rank_ctx *x = *state;
    for (int inplace = 0; inplace < 2; inplace++) {
        for (int z = 0; z < NSIZES; z++) {
            size_t c = sizes[z];
            float *recv = alloc_f(x, c * (size_t)x->n);
            float *send = inplace ? recv + (size_t)x->rank * c : alloc_f(x, c);
            for (size_t i = 0; i < c; i++) send[i] = val(x->rank, i);
            ao_allgather(x->c, send, recv, c, AO_F32);
            ao_stream_sync(x->s);
            for (int r = 0; r < x->n; r++)
                for (size_t i = 0; i < c; i++)
                    expect(recv, (size_t)r * c + i, val(r, i), "allgather", c);
            if (!inplace) ao_dev_free(x->dev, send);
            ao_dev_free(x->dev, recv);
        }
    }
}

static void test_reducescatter(void **state)
{
    struct rank_ctx *x = *state;
    for (int inplace = 0; inplace < 2; inplace++) {
        for (int z = 0; z < NSIZES; z++) {
            size_t c = sizes[z], total = c * (size_t)x->n;
            float *send = alloc_f(x, total);
            float *recv = inplace ? send + (size_t)x->rank * c : alloc_f(x, c);
            for (size_t i = 0; i < total; i++) send[i] = val(x->rank, i);
            ao_reducescatter(x->c, send, recv, c, AO_F32, AO_SUM);
            ao_stream_sync(x->s);
            for (size_t i = 0; i < c; i++) {
                float want = 0;
                for (int r = 0; r < x->n; r++) want += val(r, (size_t)x->rank * c + i);
                expect(recv, i, want, "reducescatter", c);
            }
            if (!inplace) ao_dev_free(x->dev, recv);
            ao_dev_free(x->dev, send);
        }
    }
}

static void test_allreduce(void **state)
{
    struct rank_ctx *x = *state;
    static const ao_redop ops[] = {AO_SUM, AO_MAX, AO_MIN, AO_AVG};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            for (int z = 0; z < NSIZES; z++) {
                size_t c = sizes[z];
                float *recv = alloc_f(x, c);
                float *send = inplace ? recv : alloc_f(x, c);
                for (size_t i = 0; i < c; i++) send[i] = val(x->rank, i);
                ao_allreduce(x->c, send, recv, c, AO_F32, ops[o]);
                ao_stream_sync(x->s);
                for (size_t i = 0; i < c; i++) {
                    float sum = 0;
                    for (int r = 0; r < x->n; r++) sum += val(r, i);
                    float want = ops[o] == AO_SUM   ? sum
                                 : ops[o] == AO_MAX ? val(x->n - 1, i)
                                 : ops[o] == AO_MIN ? val(0, i)
                                                    : sum / (float)x->n;
                    expect(recv, i, want, ao_redop_name(ops[o]), c);
                }
                if (!inplace) ao_dev_free(x->dev, send);
                ao_dev_free(x->dev, recv);
            }
        }
    }
}

static void test_integer_avg_truncates(void **state)
{
    struct rank_ctx *x = *state;
    int32_t v[3] = {x->rank == 0 ? 1 : 2, -(x->rank == 0 ? 1 : 2), 7};
    ao_allreduce(x->c, v, v, 3, AO_I32, AO_AVG);
    ao_stream_sync(x->s);
    assert_int_equal(v[0], 1);  /* 3 / 2 */
    assert_int_equal(v[1], -1); /* -3 / 2, toward zero */
    assert_int_equal(v[2], 7);
}

static void test_broadcast_and_reduce(void **state)
{
    struct rank_ctx *x = *state;
    for (int inplace = 0; inplace < 2; inplace++) {
        for (int z = 0; z < NSIZES; z++) {
            size_t c = sizes[z];
            for (int root = 0; root < x->n; root++) {
                float *recv = alloc_f(x, c);
                float *send = inplace ? recv : alloc_f(x, c);
                for (size_t i = 0; i < c; i++) send[i] = val(x->rank, i);
                ao_broadcast(x->c, send, recv, c, AO_F32, root);
                ao_stream_sync(x->s);
                for (size_t i = 0; i < c; i++) expect(recv, i, val(root, i), "broadcast", c);

                for (size_t i = 0; i < c; i++) send[i] = val(x->rank, i);
                ao_reduce(x->c, send, recv, c, AO_F32, AO_SUM, root);
                ao_stream_sync(x->s);
                if (x->rank == root) {
                    for (size_t i = 0; i < c; i++) {
                        float want = 0;
                        for (int r = 0; r < x->n; r++) want += val(r, i);
                        expect(recv, i, want, "reduce", c);
                    }
                }
                if (!inplace) ao_dev_free(x->dev, send);
                ao_dev_free(x->dev, recv);
            }
        }
    }
}

static void test_alltoall_and_sendrecv(void **state)
{
    struct rank_ctx *x = *state;
    for (int inplace = 0; inplace < 2; inplace++) {
        for (int z = 0; z < NSIZES; z++) {
            size_t c = sizes[z], total = c * (size_t)x->n;
            float *recv = alloc_f(x, total);
            float *send = inplace ? recv : alloc_f(x, total);
            for (size_t i = 0; i < total; i++) send[i] = val(x->rank, i);
            ao_alltoall(x->c, send, recv, c, AO_F32);
            ao_stream_sync(x->s);
            for (int p = 0; p < x->n; p++)
                for (size_t i = 0; i < c; i++)
                    expect(recv, (size_t)p * c + i, val(p, (size_t)x->rank * c + i), "alltoall", c);

            int to = (x->rank + 1) % x->n, from = (x->rank + x->n - 1) % x->n;
            for (size_t i = 0; i < c; i++) send[i] = val(x->rank, i);
            ao_sendrecv(x->c, send, to, recv, from, c, AO_F32);
            ao_stream_sync(x->s);
            for (size_t i = 0; i < c; i++) expect(recv, i, val(from, i), "sendrecv", c);
            if (!inplace) ao_dev_free(x->dev, send);
            ao_dev_free(x->dev, recv);
        }
    }
}

static void test_split(void **state)
{
    struct rank_ctx *x = *state;
    ao_stream *s = ao_stream_create(x->dev, "split", 0);
    ao_comm *alone = ao_comm_split(x->c, s, x->rank, 0);
    ao_comm *reversed = ao_comm_split(x->c, s, 0, -x->rank);
    assert_non_null(alone);
    assert_non_null(reversed);
    assert_int_equal(ao_comm_size(alone), 1);
    assert_int_equal(ao_comm_rank(alone), 0);
    assert_int_equal(ao_comm_size(reversed), x->n);
    assert_int_equal(ao_comm_rank(reversed), x->n - 1 - x->rank);
    float v = val(x->rank, 0);
    ao_allreduce(alone, &v, &v, 1, AO_F32, AO_SUM);
    ao_stream_sync(s);
    assert_true(v == val(x->rank, 0));
    ao_comm_destroy(reversed);
    ao_comm_destroy(alone);
    ao_stream_destroy(s);
}

/* Ordering between two host closures on two streams (rank 1's). */
static void wait_flag(void *p)
{
    atomic_int *flag = *(atomic_int **)p;
    while (!atomic_load(flag)) sleep_ms(1);
}

static void set_flag(void *p)
{
    atomic_store(*(atomic_int **)p, 1);
}

/* An all-gather and a reduce-scatter on two communicators bound to two
 * streams run at once. Rank 1 holds its all-gather until its reduce-scatter
 * has completed, while rank 0 enqueues the all-gather first: the reduce-
 * scatter can only complete if rank 0 runs it while its all-gather waits, so
 * on rank 0 it starts before the all-gather that began first ends (a causal
 * chain: rank 0's reduce-scatter starts, rank 1's completes, rank 1 joins the
 * all-gather, rank 0's all-gather ends). One communicator
 * or one thread for both would deadlock (the 60 s watchdog then fails the
 * test). Ordering only, no durations: it holds on a loaded machine. */
static void test_two_streams_overlap(void **state)
{
    struct rank_ctx *x = *state;
    ao_rank_info ri = rank_info();
    ao_comm_id id;
    ao_comm_make_id("mpi", &id);
    ao_comm_opts opts = {.timeout_s = 60};
    ao_stream *sa = ao_stream_create(x->dev, "allgather", 0);
    ao_stream *sb = ao_stream_create(x->dev, "reducescatter", 0);
    ao_comm *ca = ao_comm_create(x->dev, sa, &ri, &id, &opts);
    ao_comm *cb = ao_comm_create(x->dev, sb, &ri, &id, &opts);
    assert_non_null(ca);
    assert_non_null(cb);
    ao_event *ev[4];
    for (int i = 0; i < 4; i++) ev[i] = ao_event_create(x->dev);
    size_t c = 1 << 18, total = c * (size_t)x->n;
    float *ag_send = alloc_f(x, c), *ag_recv = alloc_f(x, total);
    float *rs_send = alloc_f(x, total), *rs_recv = alloc_f(x, c);
    for (size_t i = 0; i < c; i++) ag_send[i] = val(x->rank, i);
    for (size_t i = 0; i < total; i++) rs_send[i] = val(x->rank, i);

    atomic_int rs_done = 0;
    atomic_int *flag = &rs_done;
    if (x->rank == 1) ao_launch_host(sa, wait_flag, &flag, sizeof flag);
    ao_event_record(ev[0], sa);
    ao_allgather(ca, ag_send, ag_recv, c, AO_F32);
    ao_event_record(ev[1], sa);
    ao_event_record(ev[2], sb);
    ao_reducescatter(cb, rs_send, rs_recv, c, AO_F32, AO_SUM);
    ao_event_record(ev[3], sb);
    if (x->rank == 1) ao_launch_host(sb, set_flag, &flag, sizeof flag);
    ao_stream_sync(sa);
    ao_stream_sync(sb);

    for (size_t i = 0; i < total; i++) expect(ag_recv, i, val((int)(i / c), i % c), "ag", c);
    for (size_t i = 0; i < c; i++)
        expect(rs_recv, i, val(0, x->rank * c + i) + val(1, x->rank * c + i), "rs", c);
    if (x->rank == 0) {
        /* Both intervals measured from the all-gather's start. */
        double ag_end = ao_event_elapsed_us(ev[0], ev[1]);
        double rs_start = ao_event_elapsed_us(ev[0], ev[2]);
        double rs_end = ao_event_elapsed_us(ev[0], ev[3]);
        if (!(rs_start < ag_end))
            fail_msg("not concurrent: allgather [0, %.0f] us, reducescatter [%.0f, %.0f] us",
                     ag_end, rs_start, rs_end);
    }
    for (int i = 0; i < 4; i++) ao_event_destroy(ev[i]);
    ao_comm_destroy(ca);
    ao_comm_destroy(cb);
    ao_stream_destroy(sa);
    ao_stream_destroy(sb);
    ao_dev_free(x->dev, ag_send);
    ao_dev_free(x->dev, ag_recv);
    ao_dev_free(x->dev, rs_send);
    ao_dev_free(x->dev, rs_recv);
}

static int rank_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allgather),
        cmocka_unit_test(test_reducescatter),
        cmocka_unit_test(test_allreduce),
        cmocka_unit_test(test_integer_avg_truncates),
        cmocka_unit_test(test_broadcast_and_reduce),
        cmocka_unit_test(test_alltoall_and_sendrecv),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_two_streams_overlap),
    };
    return cmocka_run_group_tests(tests, rank_setup, rank_teardown);
}

/* Rank 1 never joins the all-reduce; rank 0's watchdog (1 s) must abort. */
static int watchdog_rank(void)
{
    ao_rank_info ri = rank_info();
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "allreduce", 0);
    ao_comm_id id;
    ao_comm_make_id("mpi", &id);
    ao_comm_opts opts = {.timeout_s = 1};
    ao_comm *c = ao_comm_create(dev, s, &ri, &id, &opts);
    if (!c) return 3;
    size_t count = 1 << 20;
    float *buf = ao_dev_alloc(dev, count * sizeof(float));
    memset(buf, 0, count * sizeof(float));
    if (ri.rank == 1) {
        sleep_ms(120000);
        return 4; /* the abort should have ended this process long ago */
    }
    printf("armed at %lld ms\n", (long long)now_ms());
    fflush(stdout);
    ao_allreduce(c, buf, buf, count, AO_F32, AO_SUM);
    ao_stream_sync(s);
    return 5;
}

/* ---- the driver ----------------------------------------------------------- */

/* mpirun -np 2 <this binary> MODE; output (both streams) into out. */
static int run_under_mpirun(const char *mode, char *out, size_t n)
{
    const char *mpirun = getenv("AORTA_MPIRUN");
    if (!mpirun || !*mpirun) mpirun = "mpirun";
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(len > 0);
    self[len] = '\0';
    char path[] = "/tmp/test_coll_mpi.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* OpenMPI unloads its plugins at MPI_Finalize, so their leaks show as
         * "<unknown module>" one frame deep; the slow unwinder reaches the
         * libmpi/libopen-pal frames that tests/lsan.supp names. */
        const char *asan = getenv("ASAN_OPTIONS");
        char *opts = NULL;
        if (asprintf(&opts, "%s%sfast_unwind_on_malloc=0", asan ? asan : "", asan ? ":" : "") > 0)
            setenv("ASAN_OPTIONS", opts, 1);
        dup2(fd, 1);
        dup2(fd, 2);
        execlp(mpirun, mpirun, "-np", "2", "--allow-run-as-root", "--oversubscribe", self, mode,
               (char *)NULL);
        perror("exec mpirun");
        _exit(126);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ssize_t r = pread(fd, out, n - 1, 0);
    out[r > 0 ? r : 0] = '\0';
    close(fd);
    unlink(path);
    fputs(out, stdout); /* so a failure shows what the ranks said */
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (rc == 126 && strstr(out, "exec mpirun")) skip(); /* built with MPI, but no launcher */
    return rc;
}

static char output[1 << 16];

static void test_collectives_on_2_ranks(void **state)
{
    assert_int_equal(run_under_mpirun("--ranks", output, sizeof output), 0);
    int passed = 0; /* one line per rank */
    for (const char *p = output; (p = strstr(p, "[  PASSED  ] 8 test(s).")); p++) passed++;
    assert_int_equal(passed, 2);
}

static void test_watchdog_on_2_ranks(void **state)
{
    int rc = run_under_mpirun("--watchdog", output, sizeof output);
    int64_t done = now_ms();
    assert_int_equal(rc, 1);
    /* It names the op by its number on the communicator, and the rank that
     * has not reached it (read from the ranks' shared progress counters). */
    assert_non_null(strstr(output, "aorta: error: rank 0: allreduce #1 of 4194304 bytes on stream "
                                   "\"allreduce\" did not complete in 1 s; rank 1 has not reached "
                                   "it; it has run no op on this communicator"));
    assert_null(strstr(output, "NCCL_DEBUG")); /* advice for MPI, not NCCL */
    assert_non_null(strstr(output, "hint: an MPI collective waits for every rank"));
    const char *armed = strstr(output, "armed at ");
    assert_non_null(armed);
    long long t = atoll(armed + 9);
    /* The abort ended rank 1's 120 s sleep: a margin of minutes over the
     * 1 s timeout, so a loaded machine cannot fail it. */
    if (done - t > 60000) fail_msg("the watchdog took %lld ms for a 1 s timeout", done - t);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--ranks") == 0) return rank_tests();
    if (argc > 1 && strcmp(argv[1], "--watchdog") == 0) return watchdog_rank();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collectives_on_2_ranks),
        cmocka_unit_test(test_watchdog_on_2_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
