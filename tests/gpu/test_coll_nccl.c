/* The NCCL comm backend with 2 GPUs and 2 processes.
 *
 * The parent never touches CUDA (a process that forks after CUDA init gives
 * children an unusable runtime): a probe child counts the devices, then two
 * rank children run. Rank 0 makes the NCCL id and passes it to rank 1 through
 * a pipe; rank 0 stays alive while the comms exist, as NCCL's bootstrap root
 * requires. Each rank:
 * - runs allgather, reducescatter, allreduce (sum, max, avg), broadcast,
 *   reduce, alltoall and sendrecv on integer-valued fp32 and bf16 data (odd
 *   counts) and checks the results bit-exact;
 * - splits the communicator (one color, then one color per rank) and checks it;
 * - issues a 256 MiB allgather and a 256 MiB reducescatter back-to-back on two
 *   communicators bound to two streams; their event intervals must intersect.
 * The parent combines the exit codes (any failure: 1; kills a rank that is
 * left hanging after the other failed). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "comm/comm.h"
#include "runtime/device.h"

#define NRANKS 2

static float value(int rank, size_t i)
{
    /* even integers <= 26: sums, maxima and averages of two stay exact in bf16 */
    return (float)(2 * (int)((i + 5u * (size_t)rank) % 13u) + 2 * rank);
}

static uint16_t f32_to_bf16_exact(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact for the small integers used here */
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

struct ctx {
    int rank;
    ao_device *dev;
    ao_stream *s;
    ao_comm *comm;
    float *host; /* staging, large enough for every buffer */
    void *staging;
};

static void upload(struct ctx *x, void *dev_buf, ao_dtype t, size_t n, float (*f)(int, size_t),
                   int rank, size_t offset)
{
    for (size_t i = 0; i < n; i++) {
        const float v = f(rank, offset + i);
        if (t == AO_BF16)
            ((uint16_t *)x->staging)[i] = f32_to_bf16_exact(v);
        else
            ((float *)x->staging)[i] = v;
    }
    ao_copy_async(x->dev, dev_buf, x->staging, n * ao_dtype_size(t), AO_H2D, x->s);
    ao_stream_sync(x->s);
}

static void download(struct ctx *x, const void *dev_buf, ao_dtype t, size_t n)
{
    ao_copy_async(x->dev, x->staging, dev_buf, n * ao_dtype_size(t), AO_D2H, x->s);
    ao_stream_sync(x->s);
    for (size_t i = 0; i < n; i++)
        x->host[i] =
            t == AO_BF16 ? bf16_to_f32(((uint16_t *)x->staging)[i]) : ((float *)x->staging)[i];
}

/* Expected value of element i of the result, per collective. */
typedef float (*expect_fn)(int rank, size_t i, size_t n);

static void verify(struct ctx *x, const char *what, ao_dtype t, size_t n, size_t count,
                   expect_fn want)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        if (x->host[i] != want(x->rank, i, count)) {
            if (!bad) first = i;
            bad++;
        }
    }
    CHECK(bad == 0, "rank %d %s %s: %zu of %zu wrong (first at %zu: got %g want %g)", x->rank, what,
          ao_dtype_name(t), bad, n, first, bad ? x->host[first] : 0.0,
          bad ? want(x->rank, first, count) : 0.0);
    printf("rank %d: %s %s: %s\n", x->rank, what, ao_dtype_name(t), bad ? "WRONG" : "exact");
}

static float want_allgather(int rank, size_t i, size_t n)
{
    (void)rank;
    return value((int)(i / n), i % n);
}

static float want_reducescatter(int rank, size_t i, size_t n)
{
    return value(0, (size_t)rank * n + i) + value(1, (size_t)rank * n + i);
}

static float want_sum(int rank, size_t i, size_t n)
{
    (void)rank, (void)n;
    return value(0, i) + value(1, i);
}

static float want_max(int rank, size_t i, size_t n)
{
    (void)rank, (void)n;
    return value(0, i) > value(1, i) ? value(0, i) : value(1, i);
}

static float want_avg(int rank, size_t i, size_t n)
{
    (void)rank, (void)n;
    return (value(0, i) + value(1, i)) / 2;
}

static float want_bcast_root1(int rank, size_t i, size_t n)
{
    (void)rank, (void)n;
    return value(1, i);
}

static float want_alltoall(int rank, size_t i, size_t n)
{
    /* block p came from rank p's block `rank` */
    return value((int)(i / n), (size_t)rank * n + i % n);
}

static float want_peer(int rank, size_t i, size_t n)
{
    (void)n;
    return value(1 - rank, i);
}

static void test_collectives(struct ctx *x, ao_dtype t)
{
    const size_t n = ((size_t)1 << 20) + 7; /* per-rank count, odd on purpose */
    const size_t esz = ao_dtype_size(t);
    void *send = ao_dev_alloc(x->dev, NRANKS * n * esz);
    void *recv = ao_dev_alloc(x->dev, NRANKS * n * esz);
    const int r = x->rank;

    upload(x, send, t, n, value, r, 0);
    ao_allgather(x->comm, send, recv, n, t);
    download(x, recv, t, NRANKS * n);
    verify(x, "allgather", t, NRANKS * n, n, want_allgather);

    upload(x, send, t, NRANKS * n, value, r, 0);
    ao_reducescatter(x->comm, send, recv, n, t, AO_SUM);
    download(x, recv, t, n);
    verify(x, "reducescatter sum", t, n, n, want_reducescatter);

    upload(x, send, t, n, value, r, 0);
    ao_allreduce(x->comm, send, recv, n, t, AO_SUM);
    download(x, recv, t, n);
    verify(x, "allreduce sum", t, n, n, want_sum);
    ao_allreduce(x->comm, send, recv, n, t, AO_MAX);
    download(x, recv, t, n);
    verify(x, "allreduce max", t, n, n, want_max);
    ao_allreduce(x->comm, send, recv, n, t, AO_AVG);
    download(x, recv, t, n);
    verify(x, "allreduce avg", t, n, n, want_avg);

    ao_broadcast(x->comm, send, recv, n, t, 1);
    download(x, recv, t, n);
    verify(x, "broadcast root 1", t, n, n, want_bcast_root1);

    ao_reduce(x->comm, send, recv, n, t, AO_SUM, 0);
    if (r == 0) {
        download(x, recv, t, n);
        verify(x, "reduce sum root 0", t, n, n, want_sum);
    } else {
        ao_stream_sync(x->s);
    }

    upload(x, send, t, NRANKS * n, value, r, 0);
    ao_alltoall(x->comm, send, recv, n, t);
    download(x, recv, t, NRANKS * n);
    verify(x, "alltoall", t, NRANKS * n, n, want_alltoall);

    upload(x, send, t, n, value, r, 0);
    ao_sendrecv(x->comm, send, 1 - r, recv, 1 - r, n, t);
    download(x, recv, t, n);
    verify(x, "sendrecv", t, n, n, want_peer);

    ao_dev_free(x->dev, send);
    ao_dev_free(x->dev, recv);
}

static void test_split(struct ctx *x)
{
    const size_t n = 4099;
    void *send = ao_dev_alloc(x->dev, n * 4), *recv = ao_dev_alloc(x->dev, n * 4);
    ao_stream *s2 = ao_stream_create(x->dev, "split", 0);

    ao_comm *all = ao_comm_split(x->comm, s2, 0, x->rank);
    CHECK(all != NULL, "split with one color failed");
    if (all) {
        CHECK(ao_comm_size(all) == NRANKS && ao_comm_rank(all) == x->rank, "split: rank %d of %d",
              ao_comm_rank(all), ao_comm_size(all));
        upload(x, send, AO_F32, n, value, x->rank, 0);
        ao_allreduce(all, send, recv, n, AO_F32, AO_SUM);
        ao_stream_sync(s2);
        download(x, recv, AO_F32, n);
        verify(x, "allreduce on split comm", AO_F32, n, n, want_sum);
        ao_comm_destroy(all);
    }
    ao_comm *alone = ao_comm_split(x->comm, s2, x->rank, 0);
    CHECK(alone != NULL, "split with a color per rank failed");
    if (alone) {
        CHECK(ao_comm_size(alone) == 1 && ao_comm_rank(alone) == 0, "lone split: rank %d of %d",
              ao_comm_rank(alone), ao_comm_size(alone));
        ao_comm_destroy(alone);
    }
    ao_stream_destroy(s2);
    ao_dev_free(x->dev, send);
    ao_dev_free(x->dev, recv);
}

/* allgather on one comm/stream, reducescatter on another, 256 MiB each. */
static void test_overlap(struct ctx *x)
{
    const size_t bytes = (size_t)256 << 20;
    const size_t count = bytes / 4 / NRANKS;
    ao_stream *s_rs = ao_stream_create(x->dev, "reducescatter", 0);
    ao_comm *c_rs = ao_comm_split(x->comm, s_rs, 0, x->rank);
    CHECK(c_rs != NULL, "second communicator");
    if (!c_rs) {
        ao_stream_destroy(s_rs);
        return;
    }
    void *ag_send = ao_dev_alloc(x->dev, bytes / NRANKS), *ag_recv = ao_dev_alloc(x->dev, bytes);
    void *rs_send = ao_dev_alloc(x->dev, bytes), *rs_recv = ao_dev_alloc(x->dev, bytes / NRANKS);
    ao_memset_async(x->dev, ag_send, 0, bytes / NRANKS, x->s);
    ao_memset_async(x->dev, rs_send, 0, bytes, x->s);
    ao_stream_sync(x->s);
    ao_event *ag0 = ao_event_create(x->dev), *ag1 = ao_event_create(x->dev);
    ao_event *rs0 = ao_event_create(x->dev), *rs1 = ao_event_create(x->dev);

    double best = -1e30, a1 = 0, b0 = 0, b1 = 0;
    for (int iter = 0; iter < 3; iter++) { /* the first sets up connections */
        ao_event_record(ag0, x->s);
        ao_allgather(x->comm, ag_send, ag_recv, count, AO_F32);
        ao_event_record(ag1, x->s);
        ao_event_record(rs0, s_rs);
        ao_reducescatter(c_rs, rs_send, rs_recv, count, AO_F32, AO_SUM);
        ao_event_record(rs1, s_rs);
        ao_stream_sync(x->s);
        ao_stream_sync(s_rs);
        if (iter == 0) continue;
        /* times relative to the allgather's start */
        const double e1 = ao_event_elapsed_us(ag0, ag1), f0 = ao_event_elapsed_us(ag0, rs0);
        const double f1 = ao_event_elapsed_us(ag0, rs1);
        const double lo = f0 > 0 ? f0 : 0, hi = e1 < f1 ? e1 : f1;
        if (hi - lo > best) best = hi - lo, a1 = e1, b0 = f0, b1 = f1;
    }
    printf("rank %d: allgather [0, %.1f] us, reducescatter [%.1f, %.1f] us: overlap %.1f us\n",
           x->rank, a1, b0, b1, best);
    CHECK(best > 0, "rank %d: the two collectives did not overlap (overlap %.1f us)", x->rank,
          best);

    ao_event_destroy(ag0), ao_event_destroy(ag1), ao_event_destroy(rs0), ao_event_destroy(rs1);
    ao_dev_free(x->dev, ag_send), ao_dev_free(x->dev, ag_recv);
    ao_dev_free(x->dev, rs_send), ao_dev_free(x->dev, rs_recv);
    ao_comm_destroy(c_rs);
    ao_stream_destroy(s_rs);
}

static int run_rank(int rank, int id_pipe[2])
{
    ao_comm_id id;
    if (rank == 0) {
        close(id_pipe[0]);
        if (ao_comm_make_id("nccl", &id) != 0) return 1;
        if (write(id_pipe[1], &id, sizeof id) != (ssize_t)sizeof id) return 1;
        close(id_pipe[1]);
    } else {
        close(id_pipe[1]);
        size_t got = 0;
        while (got < sizeof id) {
            ssize_t k = read(id_pipe[0], (char *)&id + got, sizeof id - got);
            if (k <= 0) {
                fprintf(stderr, "rank 1: rank 0 sent no id\n");
                return 1;
            }
            got += (size_t)k;
        }
        close(id_pipe[0]);
    }

    struct ctx x = {.rank = rank};
    x.dev = ao_device_open("cuda", rank);
    if (!x.dev) return 1;
    x.s = ao_stream_create(x.dev, "allgather", 0);
    ao_rank_info ri = {rank, NRANKS, rank, NRANKS, 0};
    ao_comm_opts opts = {.timeout_s = 120, .blocking_init = 0};
    x.comm = ao_comm_create(x.dev, x.s, &ri, &id, &opts);
    CHECK(x.comm != NULL, "rank %d: ao_comm_create failed", rank);
    if (!x.comm) return check_result("test_coll_nccl");
    CHECK(ao_comm_rank(x.comm) == rank && ao_comm_size(x.comm) == NRANKS, "rank %d of %d",
          ao_comm_rank(x.comm), ao_comm_size(x.comm));
    CHECK(ao_comm_stream(x.comm) == x.s, "comm bound to another stream");
    char ver[64];
    ao_nccl_comm_ops.version(ver, sizeof ver);
    printf("rank %d: %s\n", rank, ver);
    CHECK(strncmp(ver, "nccl 2.", 7) == 0, "version string %s", ver);

    const size_t stage = (NRANKS * (((size_t)1 << 20) + 7)) * sizeof(float);
    x.host = malloc(stage);
    x.staging = ao_host_alloc(x.dev, stage);
    test_collectives(&x, AO_F32);
    test_collectives(&x, AO_BF16);
    test_split(&x);
    test_overlap(&x);

    char why[256] = "";
    CHECK(ao_nccl_comm_ops.check(x.comm, why, sizeof why) == 0, "async error: %s", why);
    free(x.host);
    ao_host_free(x.dev, x.staging);
    ao_comm_destroy(x.comm);
    ao_stream_destroy(x.s);
    ao_device_close(x.dev);
    return check_result("test_coll_nccl");
}

/* Counts devices in a child, so that the parent stays CUDA-free. */
static int probe_device_count(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        int n = ao_device_count("cuda");
        _exit(n > 100 ? 100 : n);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 0;
    return WEXITSTATUS(st);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    GPU_SKIP_UNLESS(probe_device_count() >= NRANKS, "needs 2 CUDA devices");

    int id_pipe[2];
    if (pipe(id_pipe) != 0) {
        perror("pipe");
        return 1;
    }
    pid_t pids[NRANKS];
    for (int r = 0; r < NRANKS; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("fork");
            return 1;
        }
        if (pids[r] == 0) {
            int rc = run_rank(r, id_pipe);
            fflush(NULL);
            exit(rc);
        }
    }
    close(id_pipe[0]);
    close(id_pipe[1]);

    int codes[NRANKS] = {-1, -1}, left = NRANKS;
    const time_t deadline = time(NULL) + 480;
    time_t kill_at = 0;
    while (left > 0) {
        int st = 0;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < NRANKS; r++) {
                if (pids[r] != p) continue;
                codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                printf("rank %d exited with %d\n", r, codes[r]);
                if (codes[r] != 0 && !kill_at) kill_at = time(NULL) + 30;
                left--;
            }
            continue;
        }
        if (time(NULL) > deadline || (kill_at && time(NULL) > kill_at)) {
            for (int r = 0; r < NRANKS; r++)
                if (codes[r] < 0) {
                    fprintf(stderr, "rank %d hung: killed\n", r);
                    kill(pids[r], SIGKILL);
                }
            kill_at = 0;
        }
        usleep(50 * 1000);
    }
    int rc = 0;
    for (int r = 0; r < NRANKS; r++)
        if (codes[r] != 0) rc = 1;
    printf("test_coll_nccl: %s\n", rc ? "FAIL" : "PASS");
    return rc;
}
