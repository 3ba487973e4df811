/* Running a queues workload on the device: every stream count in turn, each
 * op bracketed by an event pair on its stream, the times read once the
 * device is done, then turned into a result (qmetrics.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/intervals.h"
#include "launch/rank.h"
#include "queues/internal.h"
#include "timeline/cupti.h"

/* The anchor's marker: the SM copy kernel, which no workload launches. */
#define MARKER_BYTES  4096
#define MARKER_KERNEL "copy_sm_kernel"
/* Ops enqueued before a held iteration is let go: enough for the device to
 * run ahead of the host on every pattern up to 8 streams, few enough (with
 * their event records) to stay well below the ~1024 launches CUDA queues
 * before a launch blocks the host, which would never release the hold. */
#define HOLD_OPS 192
/* Events a stream count may hold (2 per op and 1 per iteration, for every
 * measured iteration): beyond this, fewer iterations. */
#define MAX_EVENTS (1L << 22)

typedef struct qdev {
    const ao_queues_opts *o;
    ao_device *dev;
    const struct ao_qspin_backend *spin;
    int cpu;
    ao_dtype dt;
    ao_stream *streams[AO_QUEUES_MAX_STREAMS];
    int nstreams;
    ao_event *anchor;
    ao_cupti *cupti;
    char *marker;
    ao_event *mk[2];
    uint64_t anchor_ns;
} qdev;

typedef struct buffers {
    void *a, *b, *hsrc, *dsrc;
    void *c[AO_QUEUES_MAX_STREAMS], *dst[AO_QUEUES_MAX_STREAMS];
} buffers;

static void alloc_buffers(qdev *q, const ao_qplan *p, buffers *bf)
{
    memset(bf, 0, sizeof *bf);
    size_t es = ao_dtype_size(q->dt), amax = 0, bmax = 0, hmax = 0, dmax = 0;
    size_t cmax[AO_QUEUES_MAX_STREAMS] = {0}, cpmax[AO_QUEUES_MAX_STREAMS] = {0};
    for (int j = 0; j < p->nops; j++) {
        const ao_qplan_op *op = &p->ops[j];
        if (op->kind == AO_Q_GEMM) {
            const ao_qshape *sh = &p->shapes[op->shape];
            size_t a = (size_t)sh->m * (size_t)sh->k * es, b = (size_t)sh->k * (size_t)sh->n * es,
                   c = (size_t)sh->m * (size_t)sh->n * es;
            amax = a > amax ? a : amax;
            bmax = b > bmax ? b : bmax;
            cmax[op->stream] = c > cmax[op->stream] ? c : cmax[op->stream];
        } else if (op->kind == AO_Q_COPY) {
            size_t *src = op->copy == AO_H2D ? &hmax : &dmax;
            *src = op->bytes > *src ? op->bytes : *src;
            if (op->bytes > cpmax[op->stream]) cpmax[op->stream] = op->bytes;
        }
    }
    ao_stream *s0 = q->streams[0];
    /* Finite, non-zero inputs (0x3c bytes: about 0.0115 in bf16 and fp32):
     * the GEMMs' time does not depend on the values, but all-zero data runs
     * cooler than real data on some GPUs. */
#define ALLOC(ptr, bytes)                                                                          \
    do {                                                                                           \
        if (bytes) {                                                                               \
            ptr = ao_dev_alloc(q->dev, bytes);                                                     \
            ao_memset_async(q->dev, ptr, 0x3c, bytes, s0);                                         \
        }                                                                                          \
    } while (0)
    ALLOC(bf->a, amax);
    ALLOC(bf->b, bmax);
    ALLOC(bf->dsrc, dmax);
    for (int s = 0; s < p->nstreams; s++) {
        ALLOC(bf->c[s], cmax[s]);
        ALLOC(bf->dst[s], cpmax[s]);
    }
#undef ALLOC
    if (hmax) {
        bf->hsrc = ao_host_alloc(q->dev, hmax);
        memset(bf->hsrc, 0x3c, hmax);
    }
    ao_stream_sync(s0);
}

static void free_buffers(qdev *q, buffers *bf)
{
    void *all[] = {bf->a, bf->b, bf->dsrc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i]) ao_dev_free(q->dev, all[i]);
    for (int s = 0; s < AO_QUEUES_MAX_STREAMS; s++) {
        if (bf->c[s]) ao_dev_free(q->dev, bf->c[s]);
        if (bf->dst[s]) ao_dev_free(q->dev, bf->dst[s]);
    }
    if (bf->hsrc) ao_host_free(q->dev, bf->hsrc);
}

static void enqueue(qdev *q, const ao_qplan *p, const buffers *bf, const ao_qplan_op *op)
{
    ao_stream *s = q->streams[op->stream];
    switch (op->kind) {
    case AO_Q_GEMM: {
        const ao_qshape *sh = &p->shapes[op->shape];
        ao_gemm_desc d = {.m = sh->m,
                          .n = sh->n,
                          .k = sh->k,
                          .alpha = 1,
                          .beta = 0,
                          .a = bf->a,
                          .lda = sh->k,
                          .b = bf->b,
                          .ldb = sh->n,
                          .c = bf->c[op->stream],
                          .ldc = sh->n,
                          .ab_type = q->dt,
                          .c_type = q->dt,
                          .batch_count = 1};
        ao_gemm(q->dev, s, &d);
        break;
    }
    case AO_Q_SPIN:
        q->spin->spin(s, op->spin_us);
        break;
    case AO_Q_COPY:
        ao_copy_async(q->dev, bf->dst[op->stream], op->copy == AO_H2D ? bf->hsrc : bf->dsrc,
                      op->bytes, op->copy, s);
        break;
    }
}

/* Events of measured iteration k: [0] its go, [1 + 2j] and [2 + 2j] op j's
 * pair. Warm-up iterations record into iteration 0's. */
static ao_event **iter_events(ao_event **ev, const ao_qplan *p, int k)
{
    return ev + (size_t)k * (size_t)(2 * p->nops + 1);
}

/* Holding: the device starts nothing of the iteration until the host has
 * enqueued its first HOLD_OPS ops, as when a framework's host runs ahead;
 * without it every event pair also holds the host's launch path. With a go,
 * holding the stream that records it holds them all. */
static void hold(qdev *q, const ao_qplan *p, int may_hold)
{
    if (!may_hold) return;
    if (q->o->sync != AO_QSYNC_NONE)
        ao_stream_hold(q->streams[0]);
    else
        for (int s = 0; s < p->nstreams; s++) ao_stream_hold(q->streams[s]);
}

static void release(qdev *q, const ao_qplan *p, int may_hold)
{
    if (!may_hold) return;
    for (int s = 0; s < p->nstreams; s++) ao_stream_release(q->streams[s]);
}

/* may_hold: never on a count's first iteration, which loads kernels and
 * makes GEMM plans and workspaces: a lazily loaded module or a workspace
 * allocation waits for the device, which would wait for the held stream. */
static void issue(qdev *q, const ao_qplan *p, const buffers *bf, ao_event **e, ao_event **last_end,
                  int may_hold)
{
    ao_qsync sync = q->o->sync;
    ao_stream *s0 = q->streams[0];
    if (sync != AO_QSYNC_NONE) {
        /* The go of this iteration: after every stream's last op of the one
         * before (end_only; per_iteration's host wait already ensures it). */
        for (int s = 1; s < p->nstreams; s++)
            if (last_end[s]) ao_stream_wait_event(s0, last_end[s]);
    }
    hold(q, p, may_hold);
    if (sync != AO_QSYNC_NONE) {
        ao_event_record(e[0], s0);
        for (int s = 1; s < p->nstreams; s++) ao_stream_wait_event(q->streams[s], e[0]);
    }
    for (int j = 0; j < p->nops; j++) {
        const ao_qplan_op *op = &p->ops[j];
        ao_stream *s = q->streams[op->stream];
        for (int d = 0; d < op->ndeps; d++)
            ao_stream_wait_event(s, e[2 + 2 * p->deps[op->dep0 + d]]);
        ao_event_record(e[1 + 2 * j], s);
        enqueue(q, p, bf, op);
        ao_event_record(e[2 + 2 * j], s);
        last_end[op->stream] = e[2 + 2 * j];
        if (j + 1 == HOLD_OPS) release(q, p, may_hold);
    }
    release(q, p, may_hold);
    if (sync == AO_QSYNC_PER_ITERATION) ao_device_sync(q->dev);
}

/* CUPTI's time of the anchor: a marker kernel timed by an event pair. */
static void align_cupti(qdev *q)
{
    ao_stream *s = q->streams[0];
    ao_stream_sync(s);
    uint64_t fallback = ao_cupti_now_ns(q->cupti);
    ao_memset_async(q->dev, q->marker, 0, 2 * MARKER_BYTES, s);
    ao_event_record(q->mk[0], s);
    ao_copy_sm_async(q->dev, q->marker + MARKER_BYTES, q->marker, MARKER_BYTES, s);
    ao_event_record(q->mk[1], s);
    ao_stream_sync(s);
    double a = ao_event_elapsed_us(q->anchor, q->mk[0]),
           b = ao_event_elapsed_us(q->anchor, q->mk[1]);
    q->anchor_ns = ao_cupti_anchor_from_marker(q->cupti, MARKER_KERNEL, a, b, fallback);
    ao_cupti_set_anchor(q->cupti, q->anchor_ns);
}

static void summarize(double *v, size_t n, ao_stats_summary *s, double *p95)
{
    ao_stats_summarize(v, n, s);
    *p95 = ao_stats_percentile(v, n, 95);
}

/* Times of every measured op -> the result. */
static void measure(qdev *q, const ao_qplan *p, ao_event **ev, ao_qresult *r)
{
    int iters = q->o->iterations, nops = p->nops;
    size_t total = (size_t)iters * (size_t)nops;
    ao_qop *ops = ao_malloc((total ? total : 1) * sizeof *ops);
    ao_ival *win = ao_malloc((size_t)iters * sizeof *win);
    double *intra = ao_malloc((size_t)(nops + 1) * sizeof *intra);
    double *inter = ao_malloc((size_t)(nops + 1) * sizeof *inter);
    double *all_intra = ao_malloc((total + 1) * sizeof *all_intra);
    double *all_inter = ao_malloc((total + 1) * sizeof *all_inter);
    double *dur[AO_QMAX_NAMES], *lat[AO_QMAX_NAMES];
    size_t nname[AO_QMAX_NAMES] = {0};
    for (int i = 0; i < p->nnames; i++) {
        dur[i] = ao_malloc((total + 1) * sizeof *dur[i]);
        lat[i] = ao_malloc((total + 1) * sizeof *lat[i]);
    }
    double prev_end[AO_QUEUES_MAX_STREAMS];
    for (int s = 0; s < AO_QUEUES_MAX_STREAMS; s++) prev_end[s] = NAN;
    r->latency_us = ao_malloc((size_t)iters * sizeof *r->latency_us);
    r->concurrency = ao_malloc((size_t)iters * sizeof *r->concurrency);
    r->iterations = iters;
    r->ops_per_iter = nops;
    for (int k = 0; k < iters; k++) {
        ao_event **e = iter_events(ev, p, k);
        ao_qop *it = ops + (size_t)k * (size_t)nops;
        double go = q->o->sync != AO_QSYNC_NONE ? ao_event_elapsed_us(q->anchor, e[0]) : NAN;
        if (q->o->sync != AO_QSYNC_NONE)
            for (int s = 0; s < p->nstreams; s++) prev_end[s] = NAN;
        double w0 = isnan(go) ? INFINITY : go, w1 = -INFINITY;
        for (int j = 0; j < nops; j++) {
            const ao_qplan_op *op = &p->ops[j];
            ao_qop *o = &it[j];
            o->stream = op->stream;
            o->start_us = ao_event_elapsed_us(q->anchor, e[1 + 2 * j]);
            o->end_us = ao_event_elapsed_us(q->anchor, e[2 + 2 * j]);
            double ready = isnan(go) ? -INFINITY : go;
            if (!isnan(prev_end[op->stream])) ready = fmax(ready, prev_end[op->stream]);
            for (int d = 0; d < op->ndeps; d++)
                ready = fmax(ready, it[p->deps[op->dep0 + d]].end_us);
            /* Nothing held it back that we know of (the first op of a free-
             * running stream): its latency is its duration. The event timer's
             * resolution can put a start a hair before its ready. */
            o->ready_us = isinf(ready) ? o->start_us : fmin(ready, o->start_us);
            prev_end[op->stream] = o->end_us;
            w0 = fmin(w0, o->start_us);
            w1 = fmax(w1, o->end_us);
            int ni = ao_qplan_name_index(p, op->name);
            dur[ni][nname[ni]] = o->end_us - o->start_us;
            lat[ni][nname[ni]++] = o->end_us - o->ready_us;
        }
        win[k] = (ao_ival){w0, w1};
        r->latency_us[k] = w1 - w0;
        ao_qunion u;
        ao_qunion_compute(it, (size_t)nops, p->nstreams, &u);
        r->concurrency[k] = u.concurrency;
        size_t ni, nx;
        ao_qgaps(it, (size_t)nops, intra, &ni, inter, &nx);
        memcpy(all_intra + r->nintra, intra, ni * sizeof *intra);
        memcpy(all_inter + r->ninter, inter, nx * sizeof *inter);
        r->nintra += ni;
        r->ninter += nx;
    }
    summarize(r->latency_us, (size_t)iters, &r->lat, &r->lat_p95);
    summarize(all_intra, r->nintra, &r->intra, &r->intra_p95);
    summarize(all_inter, r->ninter, &r->inter, &r->inter_p95);
    r->conc_iter_mean = ao_stats_mean(r->concurrency, (size_t)iters);
    ao_qunion_compute(ops, total, p->nstreams, &r->u);
    size_t nw = ao_iv_normalize(win, (size_t)iters);
    r->span_us = ao_iv_length(win, nw);
    r->throughput = r->span_us > 0 ? (double)total / (r->span_us * 1e-6) : NAN;
    r->per_stream = r->throughput / p->nstreams;
    r->nnames = p->nnames;
    for (int i = 0; i < p->nnames; i++) {
        ao_qname_stats *ns = &r->names[i];
        ns->name = p->names[i];
        ns->n = nname[i];
        ao_stats_summarize(dur[i], nname[i], &ns->dur);
        ao_stats_summarize(lat[i], nname[i], &ns->lat);
        ns->lat_p95 = ao_stats_percentile(lat[i], nname[i], 95);
        free(dur[i]);
        free(lat[i]);
    }
    if (q->cupti && nw > 0) {
        /* The measured span on CUPTI's clock; the device is idle. */
        ao_op *k = NULL;
        int64_t t0 = (int64_t)q->anchor_ns + llround(win[0].start * 1e3);
        int64_t t1 = (int64_t)q->anchor_ns + llround(win[nw - 1].end * 1e3);
        size_t n =
            ao_cupti_take(q->cupti, (uint64_t)(t0 > 0 ? t0 : 0), (uint64_t)(t1 > 0 ? t1 : 0), &k);
        ao_qop *kops = ao_malloc((n ? n : 1) * sizeof *kops);
        for (size_t i = 0; i < n; i++)
            kops[i] = (ao_qop){k[i].start_us, k[i].start_us, k[i].end_us, k[i].stream};
        ao_qunion_compute(kops, n, AO_CUPTI_MAX_LANES, &r->ku);
        free(kops);
        r->have_kernels = 1;
        r->kernels = n;
        r->conc_diff_pct = (r->ku.concurrency - r->u.concurrency) / r->u.concurrency * 100;
    }
    free(ops);
    free(win);
    free(intra);
    free(inter);
    free(all_intra);
    free(all_inter);
}

static int run_count(qdev *q, int streams, ao_qresult *r)
{
    const ao_queues_opts *o = q->o;
    ao_qplan p;
    ao_qplan_make(o->workload, streams, q->cpu, &p);
    size_t per = (size_t)(2 * p.nops + 1), nev = per * (size_t)o->iterations;
    if (nev > (size_t)MAX_EVENTS) {
        ao_error("--iterations",
                 "%d iterations of %s on %d streams need %zu events (%d ops an iteration); at "
                 "most %ld: give fewer iterations",
                 o->iterations, o->workload, streams, nev, p.nops, MAX_EVENTS);
        ao_qplan_free(&p);
        return AO_EXIT_USAGE;
    }
    buffers bf;
    alloc_buffers(q, &p, &bf);
    ao_event **ev = ao_malloc(nev * sizeof *ev);
    for (size_t i = 0; i < nev; i++) ev[i] = ao_event_create(q->dev);
    ao_event *last_end[AO_QUEUES_MAX_STREAMS] = {0};
    for (int w = 0; w < o->warmup; w++)
        issue(q, &p, &bf, iter_events(ev, &p, 0), last_end, o->hold && w > 0);
    /* Measured iterations start on an idle device (lazy module loading and
     * GEMM plans belong to the warm-up), and CUPTI's clock is aligned here. */
    ao_device_sync(q->dev);
    memset(last_end, 0, sizeof last_end);
    if (q->cupti) align_cupti(q);
    for (int k = 0; k < o->iterations; k++)
        issue(q, &p, &bf, iter_events(ev, &p, k), last_end, o->hold && (o->warmup > 0 || k > 0));
    ao_device_sync(q->dev);
    memset(r, 0, sizeof *r);
    r->streams = streams;
    measure(q, &p, ev, r);
    for (size_t i = 0; i < nev; i++) ao_event_destroy(ev[i]);
    free(ev);
    free_buffers(q, &bf);
    ao_qplan_free(&p);
    return 0;
}

void ao_qresult_free(ao_qresult *r)
{
    free(r->latency_us);
    free(r->concurrency);
    memset(r, 0, sizeof *r);
}

int ao_queues_run(const ao_queues_opts *o)
{
    /* Never spawned: one process, or one per slot of an external launcher,
     * each measuring its own device; rank 0 prints and writes the files. */
    ao_launch_req req = {.backend = o->backend};
    ao_rank_info ri;
    ao_launch_role role;
    int rc = ao_launch_ranks(0, NULL, &req, &ri, &role);
    if (role == AO_ROLE_DONE) return rc;
    ao_rank rank;
    ao_rank_opts ro = {.cmd = "queues", .backend = o->backend, .ordinal = o->device};
    if ((rc = ao_rank_open(&rank, &ri, &ro)) != 0) {
        ao_rank_close(&rank);
        return rc;
    }
    FILE *out = ri.rank == 0 ? stdout : fopen("/dev/null", "w");
    if (!out) out = stdout;
    ao_qrun run = {.o = o};
    qdev q = {.o = o, .dev = rank.dev, .spin = ao_qspin_for(rank.dev)};
    if (!q.spin) rc = AO_EXIT_FAIL;
    ao_qenv_effective(o->env_user_mask, &run.env);
    const ao_device_info info = rank.info;
    q.cpu = strcmp(info.backend, "cpu") == 0;
    q.dt = q.cpu ? AO_F32 : AO_BF16;
    run.device_name = info.name;
    run.backend = info.backend;
    int maxs = 0;
    for (int i = 0; i < o->nstreams; i++) maxs = o->streams[i] > maxs ? o->streams[i] : maxs;
    /* One set of streams for every count: CUPTI tells streams apart by the
     * order it first sees them, and new streams per count would run out of
     * its lanes. */
    for (int s = 0; s < maxs; s++) {
        char name[16];
        snprintf(name, sizeof name, "q%d", s);
        q.streams[s] = ao_stream_create(q.dev, name, 0);
    }
    q.nstreams = maxs;
    q.anchor = ao_event_create(q.dev);
    if (o->kernel_trace) {
        if (!q.cpu) q.cupti = ao_cupti_start();
        if (q.cupti) {
            q.marker = ao_dev_alloc(q.dev, 2 * MARKER_BYTES);
            q.mk[0] = ao_event_create(q.dev);
            q.mk[1] = ao_event_create(q.dev);
        } else if (q.cpu) {
            ao_warn("--kernel-trace needs a GPU on the cuda backend (CUPTI), not the cpu "
                    "backend; kernel trace disabled");
        }
    }
    ao_event_record(q.anchor, q.streams[0]);
    ao_device_sync(q.dev);

    ao_qplan p;
    ao_qplan_make(o->workload, 1, q.cpu, &p);
    run.note = p.note;
    run.nnames = p.nnames;
    memcpy(run.names, p.names, sizeof run.names);
    ao_qplan_free(&p);
    run.res = ao_calloc((size_t)o->nstreams, sizeof *run.res);
    ao_qtable_header(&run, out);
    double thr1 = NAN;
    int ops1 = 0;
    for (int i = 0; i < o->nstreams && rc == 0; i++) {
        rc = run_count(&q, o->streams[i], &run.res[i]);
        if (rc) break;
        ao_qresult *r = &run.res[run.nres++];
        /* The counts are ascending (ao_queues_parse_streams): 1 comes first. */
        if (r->streams == 1) {
            thr1 = r->throughput;
            ops1 = r->ops_per_iter;
        }
        r->efficiency = ao_qefficiency(r->throughput, r->ops_per_iter, thr1, ops1);
        ao_qtable_row(&run, r, out);
        fflush(out);
    }
    if (rc == 0) {
        ao_qtable_footer(&run, out);
        if (ri.rank == 0 && o->json_path && ao_qwrite_json(&run, o->json_path)) rc = AO_EXIT_FAIL;
        if (ri.rank == 0 && o->csv_path && ao_qwrite_csv(&run, o->csv_path)) rc = AO_EXIT_FAIL;
    }
    if (out != stdout) fclose(out);
    ao_qtable_free(&run);
    for (int i = 0; i < run.nres; i++) ao_qresult_free(&run.res[i]);
    free(run.res);
    ao_qenv_free(&run.env);
    ao_cupti_stop(q.cupti);
    if (q.marker) {
        ao_dev_free(q.dev, q.marker);
        ao_event_destroy(q.mk[0]);
        ao_event_destroy(q.mk[1]);
    }
    ao_event_destroy(q.anchor);
    for (int s = 0; s < maxs; s++) ao_stream_destroy(q.streams[s]);
    ao_rank_close(&rank);
    return rc;
}
