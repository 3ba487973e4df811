/* The measurement of `aorta coll`, as nccl-tests does it: per size, warm-up
 * ops, a barrier, a host timer around `iters` back-to-back ops, the ranks'
 * times combined by an allreduce on the same communicator, then (with -c) one
 * more op on freshly filled data whose every output element is checked. */
#include "bench/coll.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/table.h"
#include "bench/values.h"
#include "core/error.h"
#include "launch/launch.h"
#include "launch/rank.h"

#define CTL_MAX       16   /* doubles one control allreduce carries */
#define DESC_BYTES    512  /* one rank's "Using devices" line */
#define GEMM_EV_CAP   8192 /* GEMMs one collective window may see */
#define POLL_SLEEP_NS 20000L

/* ---- the GEMM loop beside the collective (--with-compute) ---------------- */

typedef struct gemm_loop {
    ao_device *dev;
    ao_stream *s;
    ao_gemm_desc d;
    void *a, *b, *c;
    double flops;
    ao_event *start;
    ao_event **ends; /* one per launched GEMM, created on first use */
    int created, launched, completed;
    int batch;       /* GEMMs the host keeps queued ahead of the device */
    double alone_us; /* one GEMM with nothing beside it */
    int warned_gap;
} gemm_loop;

static void gemm_launch(gemm_loop *g, int n)
{
    for (int i = 0; i < n && g->launched < GEMM_EV_CAP; i++) {
        if (g->launched == g->created) g->ends[g->created++] = ao_event_create(g->dev);
        ao_gemm(g->dev, g->s, &g->d);
        ao_event_record(g->ends[g->launched++], g->s);
    }
}

static gemm_loop *gemm_create(ao_device *dev, const ao_device_info *info,
                              const ao_coll_bench_opts *o, int *rc)
{
    ao_dtype t =
        o->gemm_dtype_set ? o->gemm_dtype : (strcmp(info->backend, "cpu") == 0 ? AO_F32 : AO_BF16);
    if (!ao_device_supports(dev, t)) {
        ao_error("--with-compute", "the %s backend cannot run %s GEMMs", info->backend,
                 ao_dtype_name(t));
        ao_hint("name a dtype it supports, e.g. --with-compute %d,%d,%d,float", o->gemm_m,
                o->gemm_n, o->gemm_k);
        *rc = AO_EXIT_USAGE;
        return NULL;
    }
    gemm_loop *g = ao_calloc(1, sizeof *g);
    g->dev = dev;
    /* The lowest priority the device has: the collective must win. */
    g->s = ao_stream_create(dev, "compute", info->priority_least);
    size_t m = (size_t)o->gemm_m, n = (size_t)o->gemm_n, k = (size_t)o->gemm_k;
    g->a = ao_dev_alloc(dev, m * k * ao_dtype_size(t));
    g->b = ao_dev_alloc(dev, k * n * ao_dtype_size(t));
    g->c = ao_dev_alloc(dev, m * n * ao_dtype_size(t));
    ao_bench_fill_random(dev, g->s, g->a, m * k, t, 1);
    ao_bench_fill_random(dev, g->s, g->b, k * n, t, 2);
    g->d = (ao_gemm_desc){.m = o->gemm_m,
                          .n = o->gemm_n,
                          .k = o->gemm_k,
                          .alpha = 1.0f,
                          .beta = 0.0f,
                          .a = g->a,
                          .lda = o->gemm_k,
                          .b = g->b,
                          .ldb = o->gemm_n,
                          .c = g->c,
                          .ldc = o->gemm_n,
                          .ab_type = t,
                          .c_type = t,
                          .compute = AO_COMPUTE_DEFAULT,
                          .batch_count = 1};
    g->flops = 2.0 * (double)m * (double)n * (double)k;
    g->ends = ao_calloc(GEMM_EV_CAP, sizeof *g->ends);
    g->start = ao_event_create(dev);

    /* Alone: two warm-up GEMMs, then ten timed back to back. */
    gemm_launch(g, 2);
    ao_stream_sync(g->s);
    g->launched = 0;
    ao_event_record(g->start, g->s);
    gemm_launch(g, 10);
    ao_stream_sync(g->s);
    g->alone_us = ao_event_elapsed_us(g->start, g->ends[9]) / 10.0;
    /* Keep about 2 ms of GEMMs queued: enough to never starve the device
     * between host polls, little enough to stop soon after the window. */
    double b = g->alone_us > 0 ? ceil(2000.0 / g->alone_us) : 64;
    g->batch = b < 2 ? 2 : b > 64 ? 64 : (int)b;
    return g;
}

static void gemm_destroy(gemm_loop *g)
{
    if (!g) return;
    for (int i = 0; i < g->created; i++) ao_event_destroy(g->ends[i]);
    ao_event_destroy(g->start);
    free(g->ends);
    ao_dev_free(g->dev, g->a);
    ao_dev_free(g->dev, g->b);
    ao_dev_free(g->dev, g->c);
    ao_stream_destroy(g->s);
    free(g);
}

static double gemm_tflops(double flops, double us)
{
    return us > 0 ? flops / us * 1e-6 : NAN;
}

static void gemm_begin(gemm_loop *g)
{
    g->launched = g->completed = 0;
    gemm_launch(g, 2 * g->batch);
}

/* Called while the collective runs: launch more once the queue runs short.
 * Events complete in stream order, so `completed` only moves forward. */
static void gemm_top_up(gemm_loop *g)
{
    while (g->completed < g->launched && ao_event_query(g->ends[g->completed])) g->completed++;
    if (g->launched - g->completed < g->batch) gemm_launch(g, g->batch);
}

/* Stop launching, let the queue drain, and return the GEMM rate inside the
 * collective window [ws, we] in TFLOP/s: GEMMs that ended in the window,
 * counted between the first and the last of them (no partial GEMMs). */
static double gemm_end(gemm_loop *g, ao_event *ws, ao_event *we)
{
    ao_stream_sync(g->s);
    double window = ao_event_elapsed_us(ws, we);
    int first = -1, last = -1;
    double t_first = 0, t_last = 0;
    for (int i = 0; i < g->launched; i++) {
        double t = ao_event_elapsed_us(ws, g->ends[i]);
        if (t < 0 || t > window) continue;
        if (first < 0) {
            first = i;
            t_first = t;
        }
        last = i;
        t_last = t;
    }
    double last_end = g->launched ? ao_event_elapsed_us(ws, g->ends[g->launched - 1]) : 0;
    if (last_end < window && !g->warned_gap) {
        ao_warn("--with-compute: the GEMM loop ended %.0f us before the collective window "
                "(GEMMs per window capped at %d); the compute numbers undercount",
                window - last_end, GEMM_EV_CAP);
        g->warned_gap = 1;
    }
    if (last <= first) return NAN; /* one GEMM outlasts the window: no rate inside it */
    return gemm_tflops(g->flops * (last - first), t_last - t_first);
}

/* ---- the benchmark's state ------------------------------------------------ */

typedef struct bench {
    const ao_coll_bench_opts *o;
    int rank, nranks;
    ao_rank r;      /* the device and the communicator */
    ao_device *dev; /* r.dev */
    ao_device_info info;
    ao_stream *s;
    ao_comm *comm; /* r.comm */
    void *send, *recv, *host;
    size_t buf_bytes;
    void *ctl_dev;
    double *ctl_host;
    ao_event *win_start, *win_end;
    ao_event **iter_ev; /* 2 per timed op with --per-iter */
    double *iter_us;
    gemm_loop *gemm;
    ao_table *table;
    ao_column *cols;
    int ncols;
    long long wrong_total;
} bench;

/* An allreduce of a few doubles on the benchmark's own communicator: the
 * ranks' times, wrong counts, and (one value) a barrier. */
static void ctl_allreduce(bench *b, double *v, int n, ao_redop op)
{
    memcpy(b->ctl_host, v, (size_t)n * sizeof(double));
    double *dev = b->ctl_dev;
    ao_copy_async(b->dev, dev, b->ctl_host, (size_t)n * sizeof(double), AO_H2D, b->s);
    ao_allreduce(b->comm, dev, dev + CTL_MAX, (size_t)n, AO_F64, op);
    ao_copy_async(b->dev, b->ctl_host, dev + CTL_MAX, (size_t)n * sizeof(double), AO_D2H, b->s);
    ao_stream_sync(b->s);
    memcpy(v, b->ctl_host, (size_t)n * sizeof(double));
}

static void barrier(bench *b)
{
    double one = 1;
    ctl_allreduce(b, &one, 1, AO_SUM);
}

static void combine_times(bench *b, double *t, int n)
{
    /* Absent values (NAN) are absent on every rank; keep them out of MIN/MAX,
     * whose NaN handling MPI leaves undefined. */
    int absent[CTL_MAX];
    for (int i = 0; i < n; i++) {
        absent[i] = isnan(t[i]);
        if (absent[i]) t[i] = 0;
    }
    switch (b->o->combine) {
    case AO_COMBINE_RANK0:
        break; /* only rank 0 prints, and it has its own */
    case AO_COMBINE_AVG:
        ctl_allreduce(b, t, n, AO_SUM);
        for (int i = 0; i < n; i++) t[i] /= b->nranks;
        break;
    case AO_COMBINE_MIN:
        ctl_allreduce(b, t, n, AO_MIN);
        break;
    case AO_COMBINE_MAX:
        ctl_allreduce(b, t, n, AO_MAX);
        break;
    }
    for (int i = 0; i < n; i++)
        if (absent[i]) t[i] = NAN;
}

/* ---- ops and their data --------------------------------------------------- */

static void op_buffers(const bench *b, ao_coll c, const ao_coll_shape *sh, int inplace,
                       const void **send, void **recv)
{
    size_t ws = ao_dtype_size(b->o->dtype);
    char *r = b->recv;
    *send = b->send;
    *recv = b->recv;
    if (!inplace) return;
    /* nccl-tests' in-place layouts: a rank's own slice of the big buffer. */
    if (c == AO_ALLGATHER) {
        *send = r + (size_t)b->rank * sh->count * ws;
    } else if (c == AO_REDUCESCATTER) {
        *send = r;
        *recv = r + (size_t)b->rank * sh->count * ws;
    } else {
        *send = r;
    }
}

static void enqueue(bench *b, ao_coll c, const ao_coll_shape *sh, const void *send, void *recv)
{
    const ao_coll_bench_opts *o = b->o;
    switch (c) {
    case AO_ALLGATHER:
        ao_allgather(b->comm, send, recv, sh->count, o->dtype);
        break;
    case AO_REDUCESCATTER:
        ao_reducescatter(b->comm, send, recv, sh->count, o->dtype, o->op);
        break;
    case AO_ALLREDUCE:
        ao_allreduce(b->comm, send, recv, sh->count, o->dtype, o->op);
        break;
    case AO_BROADCAST:
        ao_broadcast(b->comm, send, recv, sh->count, o->dtype, o->root);
        break;
    case AO_REDUCE:
        ao_reduce(b->comm, send, recv, sh->count, o->dtype, o->op, o->root);
        break;
    case AO_ALLTOALL:
        ao_alltoall(b->comm, send, recv, sh->count, o->dtype);
        break;
    case AO_SENDRECV:
        ao_sendrecv(b->comm, send, (b->rank + 1) % b->nranks, recv,
                    (b->rank + b->nranks - 1) % b->nranks, sh->count, o->dtype);
        break;
    case AO_NCOLLS:
        break;
    }
}

static uint32_t mix(size_t i, int r)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)r * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 29;
    return (uint32_t)x;
}

/* Rank r's input element i: small integers, exact in every dtype, chosen so
 * every reduction of up to dozens of ranks stays exact (sum <= 5 n, products
 * are powers of two, the avg inputs of a position sum to n times an integer). */
static double input_value(ao_coll c, ao_redop op, int r, int n, size_t i)
{
    if (!ao_coll_reduces(c)) return 1 + mix(i, r) % 100;
    switch (op) {
    case AO_SUM:
        return 1 + mix(i, r) % 5;
    case AO_PROD:
        return 1 + mix(i, r) % 2;
    case AO_MAX:
    case AO_MIN:
        return 1 + mix(i, r) % 100;
    case AO_AVG: {
        double delta = (n % 2 && r == n - 1) ? 0 : (r % 2 ? -1 : 1);
        return 2 + mix(i, 0) % 5 + delta;
    }
    case AO_NREDOPS:
        break;
    }
    return 0;
}

static double reduced_value(ao_coll c, ao_redop op, int n, size_t i)
{
    double acc = input_value(c, op, 0, n, i);
    for (int r = 1; r < n; r++) {
        double v = input_value(c, op, r, n, i);
        switch (op) {
        case AO_SUM:
        case AO_AVG:
            acc += v;
            break;
        case AO_PROD:
            acc *= v;
            break;
        case AO_MAX:
            acc = v > acc ? v : acc;
            break;
        case AO_MIN:
            acc = v < acc ? v : acc;
            break;
        case AO_NREDOPS:
            break;
        }
    }
    return op == AO_AVG ? acc / n : acc;
}

/* Element j of this rank's correct output. */
static double expected_value(const bench *b, ao_coll c, const ao_coll_shape *sh, size_t j)
{
    ao_redop op = b->o->op;
    int n = b->nranks, me = b->rank;
    switch (c) {
    case AO_ALLREDUCE:
    case AO_REDUCE:
        return reduced_value(c, op, n, j);
    case AO_REDUCESCATTER:
        return reduced_value(c, op, n, (size_t)me * sh->count + j);
    case AO_ALLGATHER:
        return input_value(c, op, (int)(j / sh->count), n, j % sh->count);
    case AO_BROADCAST:
        return input_value(c, op, b->o->root, n, j);
    case AO_ALLTOALL:
        return input_value(c, op, (int)(j / sh->count), n, (size_t)me * sh->count + j % sh->count);
    case AO_SENDRECV:
        return input_value(c, op, (me + n - 1) % n, n, j);
    case AO_NCOLLS:
        break;
    }
    return NAN;
}

/* Fill the op's input with this rank's values and the output with a value no
 * correct result has (all-ones bytes: NaN or -1 or 255), so an op that writes
 * nothing cannot pass. */
static void fill_for_check(bench *b, ao_coll c, const ao_coll_shape *sh, int inplace)
{
    ao_dtype t = b->o->dtype;
    size_t ws = ao_dtype_size(t);
    memset(b->host, 0xff, b->buf_bytes);
    ao_copy_async(b->dev, b->recv, b->host, b->buf_bytes, AO_H2D, b->s);
    ao_stream_sync(b->s); /* the staging buffer is rewritten next */
    const void *send;
    void *recv;
    op_buffers(b, c, sh, inplace, &send, &recv);
    for (size_t i = 0; i < sh->send_elems; i++)
        ao_value_store(t, b->host, i, input_value(c, b->o->op, b->rank, b->nranks, i));
    ao_copy_async(b->dev, (void *)send, b->host, sh->send_elems * ws, AO_H2D, b->s);
    ao_stream_sync(b->s);
}

static long long check_output(bench *b, ao_coll c, const ao_coll_shape *sh, int inplace)
{
    const ao_coll_bench_opts *o = b->o;
    if (c == AO_REDUCE && b->rank != o->root) return 0; /* only the root gets a result */
    const void *send;
    void *recv;
    op_buffers(b, c, sh, inplace, &send, &recv);
    size_t n = sh->recv_elems, ws = ao_dtype_size(o->dtype);
    ao_copy_async(b->dev, b->host, recv, n * ws, AO_D2H, b->s);
    ao_stream_sync(b->s);
    /* Exact, except a float avg: NCCL may multiply each input by 1/n first. */
    int fuzzy =
        o->op == AO_AVG && ao_coll_reduces(c) &&
        (o->dtype == AO_F32 || o->dtype == AO_F16 || o->dtype == AO_BF16 || o->dtype == AO_F64);
    double tol = o->dtype == AO_F16 ? 1e-2 : o->dtype == AO_BF16 ? 2e-2 : 1e-5;
    long long wrong = 0;
    for (size_t j = 0; j < n; j++) {
        double want = ao_value_round(o->dtype, expected_value(b, c, sh, j));
        double got = ao_value_load(o->dtype, b->host, j);
        if (fuzzy ? !(fabs(got - want) <= tol * fabs(want)) : got != want) wrong++;
    }
    return wrong;
}

/* ---- timing ---------------------------------------------------------------- */

typedef struct timing {
    double wall_us;                /* host timer / iters: the nccl-tests time */
    double event_us;               /* device events around the same window / iters */
    double min_us, p50_us, p99_us; /* --per-iter */
    double gemm_tflops;            /* with a GEMM loop beside it */
} timing;

static void sleep_poll(void)
{
    struct timespec ts = {0, POLL_SLEEP_NS};
    nanosleep(&ts, NULL);
}

static void time_op(bench *b, ao_coll c, const ao_coll_shape *sh, int inplace, gemm_loop *g,
                    timing *out)
{
    const ao_coll_bench_opts *o = b->o;
    const void *send;
    void *recv;
    op_buffers(b, c, sh, inplace, &send, &recv);
    for (int i = 0; i < o->warmup; i++) enqueue(b, c, sh, send, recv);
    ao_stream_sync(b->s);
    if (g) gemm_begin(g);
    barrier(b);
    ao_event_record(b->win_start, b->s);
    double t0 = ao_bench_now_us();
    for (int i = 0; i < o->iters; i++) {
        if (o->per_iter) ao_event_record(b->iter_ev[2 * i], b->s);
        enqueue(b, c, sh, send, recv);
        if (o->per_iter) ao_event_record(b->iter_ev[2 * i + 1], b->s);
    }
    ao_event_record(b->win_end, b->s);
    if (g)
        while (!ao_event_query(b->win_end)) {
            gemm_top_up(g);
            sleep_poll();
        }
    ao_stream_sync(b->s);
    out->wall_us = (ao_bench_now_us() - t0) / o->iters;
    out->event_us = ao_event_elapsed_us(b->win_start, b->win_end) / o->iters;
    out->min_us = out->p50_us = out->p99_us = NAN;
    if (o->per_iter) {
        for (int i = 0; i < o->iters; i++)
            b->iter_us[i] = ao_event_elapsed_us(b->iter_ev[2 * i], b->iter_ev[2 * i + 1]);
        out->p99_us = ao_bench_quantile(b->iter_us, (size_t)o->iters, 0.99);
        out->p50_us = ao_bench_quantile(b->iter_us, (size_t)o->iters, 0.50);
        out->min_us = b->iter_us[0]; /* sorted by the quantile */
    }
    out->gemm_tflops = g ? gemm_end(g, b->win_start, b->win_end) : NAN;
}

/* ---- the table ---------------------------------------------------------- */

enum { COL_COLL, COL_NRANKS, COL_SIZE, COL_COUNT, COL_TYPE, COL_REDOP, COL_ROOT, COL_FIXED };

static const ao_column fixed_cols[COL_FIXED] = {
    {"coll", "coll", "", 14, 0, AO_COL_NO_TEXT},
    {"nranks", "nranks", "", 6, 0, AO_COL_NO_TEXT},
    {"size", "size", "(B)", 12, 0, 0},
    {"count", "count", "(elements)", 12, 0, 0},
    {"type", "type", "", 8, 0, 0},
    {"redop", "redop", "", 6, 0, 0},
    {"root", "root", "", 6, 0, 0},
};

/* Per placement: time (or min/p50/p99), algbw, busbw, #wrong. */
static const ao_column place_cols[2][7] = {
    {{"oop_time_us", "time", "(us)", 8, 2, 0},
     {"oop_min_us", "min", "(us)", 8, 2, 0},
     {"oop_p50_us", "p50", "(us)", 8, 2, 0},
     {"oop_p99_us", "p99", "(us)", 8, 2, 0},
     {"oop_algbw_gbps", "algbw", "(GB/s)", 7, 2, 0},
     {"oop_busbw_gbps", "busbw", "(GB/s)", 7, 2, 0},
     {"oop_wrong", "#wrong", "", 6, 0, 0}},
    {{"ip_time_us", "time", "(us)", 8, 2, 0},
     {"ip_min_us", "min", "(us)", 8, 2, 0},
     {"ip_p50_us", "p50", "(us)", 8, 2, 0},
     {"ip_p99_us", "p99", "(us)", 8, 2, 0},
     {"ip_algbw_gbps", "algbw", "(GB/s)", 7, 2, 0},
     {"ip_busbw_gbps", "busbw", "(GB/s)", 7, 2, 0},
     {"ip_wrong", "#wrong", "", 6, 0, 0}},
};
enum { P_TIME, P_MIN, P_P50, P_P99, P_ALGBW, P_BUSBW, P_WRONG, P_N };

static const ao_column compute_cols[] = {
    {"comp_time_us", "time", "(us)", 8, 2, 0},
    {"comp_busbw_gbps", "busbw", "(GB/s)", 7, 2, 0},
    {"coll_slowdown", "cslow", "(x)", 6, 2, 0},
    {"gemm_tflops_alone", "gemm", "(TF/s)", 8, 2, 0},
    {"gemm_tflops_comp", "gemm+c", "(TF/s)", 8, 2, 0},
    {"gemm_slowdown", "gslow", "(x)", 6, 2, 0},
};
enum { C_TIME, C_BUSBW, C_CSLOW, C_GEMM, C_GEMMC, C_GSLOW, C_N };

typedef struct col_map {
    int place[2][P_N]; /* table column, or -1 when not shown */
    int comp[C_N];
} col_map;

static void build_columns(bench *b, col_map *map)
{
    b->cols = ao_calloc(COL_FIXED + 2 * P_N + C_N, sizeof *b->cols);
    int n = 0;
    for (int i = 0; i < COL_FIXED; i++) b->cols[n++] = fixed_cols[i];
    for (int p = 0; p < 2; p++) {
        for (int k = 0; k < P_N; k++) {
            int shown = b->o->per_iter ? k != P_TIME : (k != P_MIN && k != P_P50 && k != P_P99);
            map->place[p][k] = shown ? n : -1;
            if (shown) b->cols[n++] = place_cols[p][k];
        }
    }
    for (int k = 0; k < C_N; k++) {
        map->comp[k] = b->o->with_compute ? n : -1;
        if (b->o->with_compute) b->cols[n++] = compute_cols[k];
    }
    b->ncols = n;
    b->table = ao_table_new(b->cols, n);
}

static int text_width(const bench *b, int from, int to)
{
    int w = 0;
    for (int i = from; i < to; i++)
        if (!(b->cols[i].flags & AO_COL_NO_TEXT)) w += b->cols[i].width + 1;
    return w;
}

static void print_centered(const char *label, int width)
{
    int len = (int)strlen(label), left = (width - len) / 2;
    printf("%*s%s%*s", left > 0 ? left : 0, "", label,
           width - len - left > 0 ? width - len - left : 0, "");
}

static void print_table_header(const bench *b, ao_coll c, const col_map *map)
{
    int group = text_width(b, map->place[0][P_ALGBW] - (b->o->per_iter ? 3 : 1),
                           map->place[0][P_WRONG] + 1);
    printf("#\n# %s\n#", ao_coll_name(c));
    print_centered("", text_width(b, 0, COL_FIXED));
    print_centered("out-of-place", group);
    print_centered("in-place", group);
    if (b->o->with_compute)
        print_centered("under compute (out-of-place)", text_width(b, map->comp[0], b->ncols));
    printf("\n");
    ao_table_print_header(b->table, stdout);
}

/* ---- header: who runs where ------------------------------------------------ */

static void print_devices(bench *b)
{
    char mine[DESC_BYTES];
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    snprintf(mine, sizeof mine, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s", b->rank,
             (int)getpid(), host, b->info.ordinal, b->info.pci_bus_id[0] ? b->info.pci_bus_id : "-",
             b->info.name);
    char *send = ao_dev_alloc(b->dev, DESC_BYTES);
    char *recv = ao_dev_alloc(b->dev, (size_t)DESC_BYTES * (size_t)b->nranks);
    char *all = ao_host_alloc(b->dev, (size_t)DESC_BYTES * (size_t)b->nranks);
    memcpy(all, mine, DESC_BYTES);
    ao_copy_async(b->dev, send, all, DESC_BYTES, AO_H2D, b->s);
    ao_allgather(b->comm, send, recv, DESC_BYTES, AO_U8);
    ao_copy_async(b->dev, all, recv, (size_t)DESC_BYTES * (size_t)b->nranks, AO_D2H, b->s);
    ao_stream_sync(b->s);
    if (b->rank == 0) {
        printf("#\n# Using devices\n");
        for (int r = 0; r < b->nranks; r++) {
            char *line = all + (size_t)r * DESC_BYTES;
            line[DESC_BYTES - 1] = 0;
            printf("%s\n", line);
        }
    }
    ao_host_free(b->dev, all);
    ao_dev_free(b->dev, recv);
    ao_dev_free(b->dev, send);
}

static void print_header(const bench *b, int nsizes)
{
    const ao_coll_bench_opts *o = b->o;
    char step[64];
    if (o->factor)
        snprintf(step, sizeof step, "%ld(factor)", o->factor);
    else
        snprintf(step, sizeof step, "%zu(bytes)", o->step);
    printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d "
           "agg iters: 1 validation: %d graph: 0\n",
           o->min_bytes, o->max_bytes, step, o->warmup, o->iters, o->check);
    printf("# aorta coll: nranks %d backend %s comm %s sizes %d combine %s%s\n", b->nranks,
           b->info.backend, ao_comm_backend_for(b->info.backend), nsizes,
           ao_time_combine_name(o->combine), o->per_iter ? " per-iter" : "");
    if (b->gemm)
        printf("# with compute: GEMM %dx%dx%d %s on stream priority %d, collective on %d; "
               "GEMM alone %.1f us = %.1f TFLOP/s\n",
               o->gemm_m, o->gemm_n, o->gemm_k, ao_dtype_name(b->gemm->d.ab_type),
               ao_stream_priority(b->gemm->s), ao_stream_priority(b->s), b->gemm->alone_us,
               gemm_tflops(b->gemm->flops, b->gemm->alone_us));
}

/* ---- one size ---------------------------------------------------------------- */

static void run_size(bench *b, ao_coll c, size_t size, const col_map *map, double *bw_sum,
                     int *bw_n)
{
    const ao_coll_bench_opts *o = b->o;
    ao_coll_shape sh;
    ao_coll_shape_for(c, size, o->dtype, b->nranks, &sh);
    double factor = ao_coll_busbw_factor(c, b->nranks);

    /* Per placement: time columns (or NAN), then wrong counts. */
    double times[2][4], wrong[2];
    timing alone[2];
    for (int p = 0; p < 2; p++) {
        wrong[p] = 0;
        if (p == 1 && !ao_coll_has_inplace(c)) {
            for (int k = 0; k < 4; k++) times[p][k] = NAN;
            wrong[p] = NAN;
            continue;
        }
        time_op(b, c, &sh, p, NULL, &alone[p]);
        times[p][0] = alone[p].wall_us;
        times[p][1] = alone[p].min_us;
        times[p][2] = alone[p].p50_us;
        times[p][3] = alone[p].p99_us;
        if (o->check) {
            fill_for_check(b, c, &sh, p);
            const void *send;
            void *recv;
            op_buffers(b, c, &sh, p, &send, &recv);
            enqueue(b, c, &sh, send, recv);
            ao_stream_sync(b->s);
            wrong[p] = (double)check_output(b, c, &sh, p);
        }
    }
    double comp[3] = {NAN, NAN, NAN}; /* time under compute, its alone twin, GEMM TFLOP/s */
    if (b->gemm) {
        timing under;
        time_op(b, c, &sh, 0, b->gemm, &under);
        comp[0] = under.event_us;
        comp[1] = alone[0].event_us;
        comp[2] = under.gemm_tflops;
    }

    double v[CTL_MAX];
    int n = 0;
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 4; k++) v[n++] = times[p][k];
    for (int k = 0; k < 3; k++) v[n++] = comp[k];
    combine_times(b, v, n);
    if (o->check) {
        double w[2] = {isnan(wrong[0]) ? 0 : wrong[0], isnan(wrong[1]) ? 0 : wrong[1]};
        ctl_allreduce(b, w, 2, AO_SUM);
        b->wrong_total += (long long)(w[0] + w[1]);
        wrong[0] = w[0];
        if (!isnan(wrong[1])) wrong[1] = w[1];
    }
    if (b->rank != 0) return;

    ao_table *t = b->table;
    int row = ao_table_add_row(t);
    ao_table_set_str(t, row, COL_COLL, ao_coll_name(c));
    ao_table_set_int(t, row, COL_NRANKS, b->nranks);
    ao_table_set_int(t, row, COL_SIZE, (long long)sh.bytes);
    ao_table_set_int(t, row, COL_COUNT, (long long)sh.count);
    ao_table_set_str(t, row, COL_TYPE, ao_dtype_name(o->dtype));
    ao_table_set_str(t, row, COL_REDOP, ao_coll_reduces(c) ? ao_redop_name(o->op) : "none");
    ao_table_set_int(t, row, COL_ROOT, ao_coll_has_root(c) ? o->root : -1);
    for (int p = 0; p < 2; p++) {
        double *tv = &v[4 * p];
        for (int k = 0; k < 4; k++)
            if (map->place[p][P_TIME + k] >= 0)
                ao_table_set_num(t, row, map->place[p][P_TIME + k], tv[k]);
        /* The bandwidth time: the mean, or the median with --per-iter. */
        double tu = o->per_iter ? tv[2] : tv[0];
        double algbw = ao_algbw_gbps(sh.bytes, tu);
        ao_table_set_num(t, row, map->place[p][P_ALGBW], algbw);
        ao_table_set_num(t, row, map->place[p][P_BUSBW], algbw * factor);
        if (isfinite(algbw)) {
            *bw_sum += algbw * factor;
            (*bw_n)++;
        }
        if (o->check && !isnan(wrong[p]))
            ao_table_set_int(t, row, map->place[p][P_WRONG], (long long)wrong[p]);
    }
    if (b->gemm) {
        double under = v[8], alone_ev = v[9], tf = v[10];
        double alone_tf = gemm_tflops(b->gemm->flops, b->gemm->alone_us);
        ao_table_set_num(t, row, map->comp[C_TIME], under);
        ao_table_set_num(t, row, map->comp[C_BUSBW], ao_algbw_gbps(sh.bytes, under) * factor);
        ao_table_set_num(t, row, map->comp[C_CSLOW], alone_ev > 0 ? under / alone_ev : NAN);
        ao_table_set_num(t, row, map->comp[C_GEMM], alone_tf);
        ao_table_set_num(t, row, map->comp[C_GEMMC], tf);
        ao_table_set_num(t, row, map->comp[C_GSLOW], tf > 0 ? alone_tf / tf : NAN);
    }
    ao_table_print_row(t, row, stdout);
}

/* ---- setup and the run ------------------------------------------------------ */

static size_t buffer_elems(const ao_coll_bench_opts *o, int nranks)
{
    size_t elems = 1;
    for (int i = 0; i < o->ncolls; i++) {
        ao_coll_shape sh;
        ao_coll_shape_for(o->colls[i], o->max_bytes, o->dtype, nranks, &sh);
        if (sh.send_elems > elems) elems = sh.send_elems;
        if (sh.recv_elems > elems) elems = sh.recv_elems;
    }
    return elems;
}

static int open_comm(bench *b, const ao_rank_opts *ro)
{
    int rc = ao_rank_connect(&b->r, b->s, ro);
    if (rc) return rc;
    b->comm = b->r.comm;
    b->rank = ao_comm_rank(b->comm);
    b->nranks = ao_comm_size(b->comm);
    return 0;
}

static void teardown(bench *b)
{
    gemm_destroy(b->gemm);
    if (b->iter_ev)
        for (int i = 0; i < 2 * b->o->iters; i++) ao_event_destroy(b->iter_ev[i]);
    free(b->iter_ev);
    free(b->iter_us);
    if (b->win_start) ao_event_destroy(b->win_start);
    if (b->win_end) ao_event_destroy(b->win_end);
    if (b->ctl_dev) ao_dev_free(b->dev, b->ctl_dev);
    if (b->ctl_host) ao_host_free(b->dev, b->ctl_host);
    if (b->send) ao_dev_free(b->dev, b->send);
    if (b->recv) ao_dev_free(b->dev, b->recv);
    if (b->host) ao_host_free(b->dev, b->host);
    ao_rank_disconnect(&b->r);
    if (b->s) ao_stream_destroy(b->s);
    ao_table_free(b->table);
    free(b->cols);
    ao_rank_close(&b->r);
}

static int run_all(bench *b, const size_t *sizes, int nsizes)
{
    const ao_coll_bench_opts *o = b->o;
    col_map map;
    build_columns(b, &map);
    print_devices(b);
    if (b->rank == 0) print_header(b, nsizes);
    for (int ci = 0; ci < o->ncolls; ci++) {
        ao_coll c = o->colls[ci];
        if (b->rank == 0) print_table_header(b, c, &map);
        double bw_sum = 0;
        int bw_n = 0;
        long long wrong_before = b->wrong_total;
        for (int i = 0; i < nsizes; i++) {
            if (ao_launch_stop_requested()) {
                if (b->rank == 0) ao_warn("coll: stopped by a signal; the table is partial");
                return AO_EXIT_FAIL;
            }
            run_size(b, c, sizes[i], &map, &bw_sum, &bw_n);
        }
        if (b->rank == 0) {
            if (o->check)
                printf("# Out of bounds values : %lld %s\n", b->wrong_total - wrong_before,
                       b->wrong_total > wrong_before ? "FAILED" : "OK");
            printf("# Avg bus bandwidth    : %g\n", bw_n ? bw_sum / bw_n : 0.0);
            fflush(stdout);
        }
    }
    if (b->rank == 0) {
        printf("#\n");
        fflush(stdout);
        if (o->json_path && ao_table_write_json(b->table, o->json_path) != 0) return AO_EXIT_FAIL;
        if (o->csv_path && ao_table_write_csv(b->table, o->csv_path) != 0) return AO_EXIT_FAIL;
    }
    if (b->wrong_total) {
        if (b->rank == 0)
            ao_error("coll", "%lld wrong elements across all ranks and sizes", b->wrong_total);
        return AO_EXIT_FAIL;
    }
    return AO_EXIT_OK;
}

int ao_coll_bench_run(const ao_coll_bench_opts *o, const ao_rank_info *ri)
{
    bench b;
    memset(&b, 0, sizeof b);
    b.o = o;
    ao_rank_opts ro = {.cmd = "coll",
                       .backend = o->backend,
                       .ordinal = -1,
                       .rdzv_file = o->rdzv_file,
                       .bootstrap_timeout_s = 120.0,
                       .comm = {.min_ctas = o->min_ctas,
                                .max_ctas = o->max_ctas,
                                .timeout_s = 600.0,
                                .blocking_init = 0}};
    int rc = ao_rank_open(&b.r, ri, &ro);
    if (rc == 0) {
        b.dev = b.r.dev;
        b.info = b.r.info;
        b.s = ao_stream_create(b.dev, "coll", o->with_compute ? b.info.priority_greatest : 0);
        rc = open_comm(&b, &ro);
    }
    if (rc == 0 && ao_coll_bench_validate(o, b.nranks) != 0) rc = AO_EXIT_USAGE;
    size_t *sizes = NULL;
    int nsizes = 0;
    if (rc == 0) {
        nsizes = ao_coll_size_list(o->min_bytes, o->max_bytes, o->factor, o->step, &sizes);
        if (nsizes < 0) rc = AO_EXIT_USAGE;
    }
    if (rc == 0 && o->with_compute) b.gemm = gemm_create(b.dev, &b.info, o, &rc);
    if (rc == 0) {
        b.buf_bytes = buffer_elems(o, b.nranks) * ao_dtype_size(o->dtype);
        b.send = ao_dev_alloc(b.dev, b.buf_bytes);
        b.recv = ao_dev_alloc(b.dev, b.buf_bytes);
        if (o->check) b.host = ao_host_alloc(b.dev, b.buf_bytes); /* -c staging only */
        b.ctl_dev = ao_dev_alloc(b.dev, 2 * CTL_MAX * sizeof(double));
        b.ctl_host = ao_host_alloc(b.dev, CTL_MAX * sizeof(double));
        /* Inputs for timing: the same bytes on every rank are fine for speed. */
        ao_memset_async(b.dev, b.send, 0, b.buf_bytes, b.s);
        ao_memset_async(b.dev, b.recv, 0, b.buf_bytes, b.s);
        b.win_start = ao_event_create(b.dev);
        b.win_end = ao_event_create(b.dev);
        if (o->per_iter) {
            b.iter_ev = ao_calloc((size_t)o->iters * 2, sizeof *b.iter_ev);
            for (int i = 0; i < 2 * o->iters; i++) b.iter_ev[i] = ao_event_create(b.dev);
            b.iter_us = ao_calloc((size_t)o->iters, sizeof *b.iter_us);
        }
        ao_stream_sync(b.s);
        rc = run_all(&b, sizes, nsizes);
    }
    free(sizes);
    teardown(&b);
    return rc;
}

static int check_world(void *o, int world_size, int launched)
{
    (void)launched;
    return ao_coll_bench_validate(o, world_size) != 0 ? AO_EXIT_USAGE : 0;
}

int ao_coll_bench(int argc, char **argv, const ao_coll_bench_opts *o, int nproc)
{
    ao_launch_req req = {.backend = o->backend,
                         .nproc = nproc,
                         .cpu_nproc = 2,
                         .spawn = 1,
                         .stop_handler = 1,
                         .check = check_world,
                         .ctx = (void *)o};
    ao_rank_info ri;
    ao_launch_role role;
    int rc = ao_launch_ranks(argc, argv, &req, &ri, &role);
    return role == AO_ROLE_DONE ? rc : ao_coll_bench_run(o, &ri);
}
