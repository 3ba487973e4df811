/* The profiling side of aorta train on one rank: windows, capture range,
 * telemetry and kernel-level ground truth per iteration. */
#include "train/train_profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "runs/run_end.h"
#include "telemetry/telemetry.h"
#include "timeline/contention.h"
#include "timeline/cupti.h"

/* The anchor's marker: the SM copy kernel (ao_copy_sm_async), which nothing
 * else in a training run launches, over a few bytes. */
#define MARKER_BYTES  4096
#define MARKER_KERNEL "copy_sm_kernel"

struct ao_train_profile {
    ao_device *dev;
    ao_profile_schedule sched;
    int64_t skip_first; /* iterations before the schedule's step 0 */
    int64_t warmup;     /* train iterations before the counted ones (summary_skip_steps) */
    int capturing;      /* between ao_profiler_start and ao_profiler_stop */
    int world_size;
    ao_telemetry *tel;
    ao_cupti *cupti;
    const ao_timeline *tl; /* the kernel trace's clock: its anchor, re-aligned per iteration */
    ao_stream *anchor_stream;
    char *marker; /* 2 x MARKER_BYTES: the marker kernel copies one half to the other */
    ao_event *marker_ev[2];
    int64_t anchor_realtime_ns;
    uint64_t anchor_cupti_ns;
    /* What the current record's extra hook writes. */
    int have_tel, have_kernels, with_kernel_ops;
    ao_tel_agg tel_agg;
    ao_overlap kernel_overlap;
    const ao_op *kernel_ops;
    size_t nkernel_ops;
    /* The price of overlap (timeline/contention.h): references learned from
     * the counted iterations' alone kernels (the compute-only baselines'
     * first), each train step's beside kernels priced against them. */
    ao_contention *contention;
    int have_contention;
    ao_contention_step contention_step;
};

ao_train_profile *ao_train_profile_start(const struct ao_config *cfg, ao_device *dev,
                                         const ao_device_info *info, int rank, int world_size)
{
    ao_train_profile *p = ao_calloc(1, sizeof *p);
    p->dev = dev;
    p->world_size = world_size;
    p->sched = (ao_profile_schedule){.enabled = cfg->profiling.enabled,
                                     .wait = cfg->profiling.wait,
                                     .warmup = cfg->profiling.warmup,
                                     .active = cfg->profiling.active,
                                     .repeat = cfg->profiling.repeat};
    if (cfg->profiling.chrome_trace && !cfg->profiling.enabled && rank == 0)
        ao_warn("profiling.chrome_trace without profiling.enabled: the trace shows iterations "
                "only (ops are recorded in the profiling windows)");
    p->tel = ao_telemetry_start(info, cfg->telemetry.enabled, cfg->telemetry.interval_ms);
    if (cfg->profiling.kernel_trace) {
        /* CUPTI traces CUDA devices only; the check is the backend's, not
         * the build's, since a CUDA build may still run --backend cpu. */
        if (strcmp(info->backend, "cuda") == 0) p->cupti = ao_cupti_start();
        if (p->cupti) {
            p->contention = ao_contention_create();
            p->marker = ao_dev_alloc(dev, 2 * MARKER_BYTES);
            p->marker_ev[0] = ao_event_create(dev);
            p->marker_ev[1] = ao_event_create(dev);
        } else if (rank == 0)
            ao_warn("profiling.kernel_trace needs a GPU on the cuda backend (CUPTI), not the %s "
                    "backend; kernel trace disabled",
                    info->backend);
    }
    return p;
}

/* The anchor's time on CUPTI's clock. A marker kernel timed like any op, an
 * event pair around it, is seen on both clocks: on the event timeline from
 * a to b (µs from the anchor), and by CUPTI from k0 to k1 (ns). The pair
 * brackets the kernel with the same launch overheads as every timed op, so
 * centring the kernel inside it aligns the clocks the way the ops will be
 * compared (to a few µs). A kernel, because CUPTI's memset records came out
 * milliseconds off the kernels' on an H200; reading CUPTI's clock on the host
 * after a sync lags by the sync's wake-up (~40 µs there): the fallback. */
static uint64_t cupti_anchor(ao_train_profile *p, const ao_timeline *tl, ao_stream *s)
{
    ao_stream_sync(s);
    uint64_t fallback = ao_cupti_now_ns(p->cupti);
    char *marker = p->marker;
    ao_event *a = p->marker_ev[0], *b = p->marker_ev[1];
    ao_memset_async(p->dev, marker, 0, 2 * MARKER_BYTES, s);
    ao_event_record(a, s);
    ao_copy_sm_async(p->dev, marker + MARKER_BYTES, marker, MARKER_BYTES, s);
    ao_event_record(b, s);
    ao_stream_sync(s);
    double a_us = ao_timeline_event_us(tl, a), b_us = ao_timeline_event_us(tl, b);
    /* s is the compute stream (ao_train_profile_anchored) */
    return ao_cupti_anchor_from_marker(p->cupti, MARKER_KERNEL, a_us, b_us, fallback);
}

void ao_train_profile_skip(ao_train_profile *p, const struct ao_config *cfg, int64_t counted,
                           int64_t n_iter)
{
    p->warmup = cfg->training.summary_skip_steps;
    if (cfg->profiling.skip_first >= 0) {
        p->skip_first = cfg->profiling.skip_first;
        return;
    }
    /* Windows inside the warm-up or the baselines are dropped by every
     * summary, and the report's stream chart would have nothing to show. */
    int64_t cycle = (int64_t)cfg->profiling.wait + cfg->profiling.warmup + cfg->profiling.active;
    int64_t last = n_iter - cycle;
    p->skip_first = counted < last ? counted : (last > 0 ? last : 0);
}

void ao_train_profile_anchored(ao_train_profile *p, const ao_timeline *tl, ao_stream *s)
{
    struct timespec a = ao_timeline_anchor_realtime(tl);
    p->anchor_realtime_ns = (int64_t)a.tv_sec * 1000000000LL + a.tv_nsec;
    p->tl = tl;
    p->anchor_stream = s;
    if (p->cupti) p->anchor_cupti_ns = cupti_anchor(p, tl, s);
    ao_cupti_set_anchor(p->cupti, p->anchor_cupti_ns);
}

void ao_train_profile_issue(ao_train_profile *p, int64_t iter)
{
    int active = ao_profile_active(&p->sched, iter - p->skip_first);
    if (active == p->capturing) return;
    if (active)
        ao_profiler_start(p->dev);
    else
        ao_profiler_stop(p->dev);
    p->capturing = active;
}

static int write_extra(void *ctx, yajl_gen g)
{
    const ao_train_profile *p = ctx;
    if (p->have_tel && ao_telemetry_write_json(g, &p->tel_agg) != yajl_gen_status_ok) return -1;
    if (p->have_kernels &&
        ao_trace_gen_kernel_extra(g, &p->kernel_overlap, p->with_kernel_ops ? p->kernel_ops : NULL,
                                  p->nkernel_ops) != yajl_gen_status_ok)
        return -1;
    if (p->have_contention && ao_contention_step_gen(g, &p->contention_step) != yajl_gen_status_ok)
        return -1;
    return 0;
}

/* µs from the anchor to ns on a clock whose anchor is at `anchor_ns`. */
static int64_t at_ns(int64_t anchor_ns, double us)
{
    return anchor_ns + (int64_t)llround(us * 1e3);
}

void ao_train_profile_record(ao_train_profile *p, int64_t iter, const ao_op *ops, size_t nops,
                             ao_iter_record *r)
{
    int active = ao_profile_active(&p->sched, iter - p->skip_first);
    if (active) {
        r->ops = ops;
        r->nops = nops;
    }
    p->have_tel = p->have_kernels = p->with_kernel_ops = p->have_contention = 0;
    /* No ops (profiling.timing off): no window to look at. */
    if (nops == 0) return;
    const ao_overlap *m = &r->m;
    if (ao_telemetry_active(p->tel)) {
        ao_telemetry_window(p->tel, at_ns(p->anchor_realtime_ns, m->window_start_us),
                            at_ns(p->anchor_realtime_ns, m->window_end_us), &p->tel_agg);
        p->have_tel = 1;
    }
    if (p->cupti) {
        /* Every delivered iteration takes its window, in order, so that
         * ao_cupti_take drops what ran between windows. CUPTI hands out
         * complete records only of finished work: the device is drained
         * here, once per iteration, so the next iteration starts on an idle
         * device (its first ops wait for the host). That is the price of
         * the kernel trace; the overlap inside an iteration, what the trace
         * checks, is unaffected. */
        ao_device_sync(p->dev);
        /* Re-anchored on every iteration: CUPTI's clock (the GPU's global
         * timer, kept in step with the host's) and the event timer drift
         * apart by tens of µs per second of run (measured on an H200). */
        p->anchor_cupti_ns = cupti_anchor(p, p->tl, p->anchor_stream);
        ao_cupti_set_anchor(p->cupti, p->anchor_cupti_ns);
        ao_op *k = NULL;
        int64_t anchor = (int64_t)p->anchor_cupti_ns;
        int64_t t0 = at_ns(anchor, m->window_start_us), t1 = at_ns(anchor, m->window_end_us);
        size_t n =
            ao_cupti_take(p->cupti, (uint64_t)(t0 > 0 ? t0 : 0), (uint64_t)(t1 > 0 ? t1 : 0), &k);
        /* The kernels' "stream" is a CUPTI lane (a CUDA stream), not one of
         * the named streams: the per-stream fields are left out, and the
         * lanes are in the kernels array. */
        ao_overlap_compute(k, n, p->world_size, &p->kernel_overlap);
        p->have_kernels = 1;
        p->with_kernel_ops = active;
        p->kernel_ops = k;
        p->nkernel_ops = n;
        /* The warm-up's first launches (cuBLASLt's first calls, cold
         * caches) would make poor references; comm-only steps run no
         * compute to learn. */
        int train = strcmp(r->phase, "train") == 0;
        if ((train && iter >= p->warmup) || strcmp(r->phase, "compute_only") == 0)
            ao_contention_learn(p->contention, k, n);
        if (train) {
            ao_contention_price(p->contention, k, n, &p->contention_step);
            p->have_contention = isfinite(p->contention_step.ms); /* a collective ran */
        }
    }
    if (p->have_tel || p->have_kernels) {
        r->extra = write_extra;
        r->extra_ctx = p;
    }
}

void ao_train_profile_stop(ao_train_profile *p)
{
    if (!p) return;
    if (p->capturing) ao_profiler_stop(p->dev);
    ao_telemetry_stop(p->tel);
    ao_cupti_stop(p->cupti);
    ao_contention_destroy(p->contention);
    if (p->marker) {
        ao_dev_free(p->dev, p->marker);
        ao_event_destroy(p->marker_ev[0]);
        ao_event_destroy(p->marker_ev[1]);
    }
    free(p);
}
