/* CUPTI activity tracing for timeline/cupti.h, with libcupti loaded at run time
 * (dlopen): the binary links no CUPTI, and a machine without it only loses
 * the kernel trace. The header gives the record layouts; every function comes
 * through dlsym. The library must be at least the CUPTI API version of the
 * header (checked with cuptiGetVersion), since the record structs are the
 * header's.
 *
 * Global state: CUPTI's buffer callbacks carry no user pointer, so the one
 * active tracer of the process is reached through `active` (CUPTI itself
 * allows one activity client per process). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "core/error.h"
#include "timeline/cupti.h"
#include "timeline/cupti_lib_cuda.h"

#define BUFFER_BYTES    (8u << 20)
#define WINDOW_SLACK_NS 50000
#define ALIGN           8

struct ao_cupti {
    ao_cupti_fns f;
    pthread_mutex_t mu; /* records, names, dropped: the callbacks run on CUPTI's thread */
    ao_cupti_record *recs;
    size_t nrecs, cap;
    ao_cupti_names names;
    size_t dropped;
    uint64_t anchor_ns;
    ao_cupti_lanes lanes;
    ao_op *ops;
    size_t ops_cap;
};

static ao_cupti *active;

static void push(ao_cupti *c, const ao_cupti_record *r)
{
    if (c->nrecs == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 4096;
        c->recs = ao_realloc(c->recs, c->cap * sizeof *c->recs);
    }
    c->recs[c->nrecs++] = *r;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(ALIGN, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    (void)size;
    ao_cupti *c = active;
    if (!c) {
        free(buffer);
        return;
    }
    pthread_mutex_lock(&c->mu);
    CUpti_Activity *a = NULL;
    while (c->f.next_record(buffer, valid, &a) == CUPTI_SUCCESS) {
        ao_cupti_record r;
        if (ao_cupti_decode(a, &c->names, &r)) push(c, &r);
    }
    size_t dropped = 0;
    if (c->f.dropped && c->f.dropped(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
        c->dropped += dropped;
    pthread_mutex_unlock(&c->mu);
    free(buffer);
}

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                           CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

static void free_cupti(ao_cupti *c)
{
    ao_cupti_names_free(&c->names);
    free(c->recs);
    free(c->ops);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static ao_cupti *session_start(void)
{
    if (active) {
        ao_warn("profiling.kernel_trace: CUPTI is already tracing in this process; "
                "kernel trace disabled");
        return NULL;
    }
    ao_cupti *c = ao_calloc(1, sizeof *c);
    const char *why = NULL;
    if (ao_cupti_fns_load(&c->f, &why) != 0) {
        ao_warn("profiling.kernel_trace: %s; kernel trace disabled", why);
        ao_hint("set CUDA_HOME to the toolkit (extras/CUPTI/lib64) or add CUPTI to "
                "LD_LIBRARY_PATH");
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    const ao_cupti_fns *f = &c->f;
    active = c;
    CUptiResult r = f->register_callbacks(buffer_requested, buffer_completed);
    for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof kinds / sizeof kinds[0]; i++)
        r = f->enable(kinds[i]);
    if (r != CUPTI_SUCCESS) {
        ao_warn("profiling.kernel_trace: CUPTI refused activity tracing (%s); kernel trace "
                "disabled",
                ao_cupti_result_text(&c->f, r));
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) f->disable(kinds[i]);
        f->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        active = NULL;
        free_cupti(c);
        return NULL;
    }
    return c;
}

static uint64_t session_now_ns(ao_cupti *c)
{
    uint64_t t = 0;
    if (c) c->f.timestamp(&t);
    return t;
}

static void session_set_anchor(ao_cupti *c, uint64_t anchor_ns)
{
    if (c) c->anchor_ns = anchor_ns;
}

static void session_set_compute_stream(ao_cupti *c, uint32_t stream_id)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->lanes.compute_known = 1;
    c->lanes.compute_stream = stream_id;
    pthread_mutex_unlock(&c->mu);
}

static int session_marker(ao_cupti *c, const char *name_part, uint64_t *start_ns, uint64_t *end_ns,
                          uint32_t *stream_id)
{
    if (!c) return 0;
    c->f.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    size_t at = 0;
    int found = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nrecs; i++) {
        const ao_cupti_record *r = &c->recs[i];
        if (r->kind != AO_CUPTI_KERNEL || !strstr(r->name, name_part) || r->end_ns < r->start_ns)
            continue;
        if (found && r->start_ns <= *start_ns) continue;
        *start_ns = r->start_ns;
        *end_ns = r->end_ns;
        *stream_id = r->stream_id;
        at = i;
        found = 1;
    }
    /* The marker is the tracer's own work, not the run's: consumed here. */
    if (found) c->recs[at] = c->recs[--c->nrecs];
    pthread_mutex_unlock(&c->mu);
    return found;
}

static size_t session_take(ao_cupti *c, uint64_t t0_ns, uint64_t t1_ns, ao_op **ops)
{
    *ops = NULL;
    if (!c) return 0;
    /* Forced: every buffer, full or not. Unforced, CUPTI hands back only
     * full buffers (8 MiB, tens of thousands of kernels), so a window's
     * records would arrive many iterations late. Forced, a record of work
     * still running would come back incomplete and be lost, hence the
     * caller's contract (cupti.h): the device is idle. */
    c->f.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    /* The window opens WINDOW_SLACK_NS early: no kernel starts before the
     * window's first start event, but the two clocks agree only to a few µs,
     * and the first kernel of a window starts right after that event. */
    uint64_t from = t0_ns > WINDOW_SLACK_NS ? t0_ns - WINDOW_SLACK_NS : 0;
    pthread_mutex_lock(&c->mu);
    size_t n = ao_cupti_split(c->recs, &c->nrecs, from, t1_ns, c->anchor_ns, &c->lanes, &c->ops,
                              &c->ops_cap);
    pthread_mutex_unlock(&c->mu);
    *ops = c->ops;
    return n;
}

static size_t session_dropped(ao_cupti *c)
{
    if (!c) return 0;
    pthread_mutex_lock(&c->mu);
    size_t d = c->dropped;
    pthread_mutex_unlock(&c->mu);
    return d;
}

static void session_stop(ao_cupti *c)
{
    if (!c) return;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) c->f.disable(kinds[i]);
    c->f.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* hand back every buffer */
    if (c->dropped) ao_warn("kernel trace: CUPTI dropped %zu activity records", c->dropped);
    active = NULL;
    free_cupti(c);
}

const struct ao_cupti_ops ao_cupti_cuda_ops = {
    .start = session_start,
    .now_ns = session_now_ns,
    .set_anchor = session_set_anchor,
    .marker = session_marker,
    .set_compute_stream = session_set_compute_stream,
    .take = session_take,
    .dropped = session_dropped,
    .stop = session_stop,
};
