/* The device timeline of one rank (DESIGN §7).
 *
 * Pool: a ring of iteration slots. A slot owns the event pairs of one
 * iteration's ops and keeps them when it is recycled, so in steady state no
 * event is created: with the engine collecting right after each end, three
 * slots are in use (k-1 waiting for the device, k just closed, k+1 open). When
 * the host runs further ahead of the device than that, begin finds every slot
 * holding an undelivered iteration and adds slots instead of waiting: collect
 * with wait == 0 never blocks. The ring only grows as deep as the host runs
 * ahead, which the runtime's launch queue bounds (CUDA blocks the host once
 * about a thousand launches are queued). A slot opened for a new iteration is
 * first sized to the most ops any iteration had; an iteration with more ops
 * than that grows its slot (doubling) inside op_begin, the only allocation on
 * the hot path and one that stops once the largest iteration has been seen.
 *
 * Completion: events on one stream complete in the order they were recorded,
 * so an iteration is complete when the newest end event recorded on each of its
 * streams is: collect queries at most AO_NSTREAMS events per iteration (plus
 * the anchor until it has been seen complete), never each op.
 *
 * Host cost per op: op_begin fills one ao_op and records one event; op_end
 * records one event. No lock beyond the device API's own, no allocation in
 * steady state. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "timeline/timeline.h"

enum { TIMELINE_INITIAL_SLOTS = 3, TIMELINE_INITIAL_OPS = 32 };

struct slot {
    int64_t step;
    const char *phase;
    ao_op *ops; /* metadata at issue; start_us/end_us filled at delivery */
    ao_event **start, **end;
    unsigned char *ended;
    size_t nops, cap;
    int newest_end[AO_NSTREAMS]; /* op whose end event was recorded last on each stream; -1 */
    /* Timing off: the iteration's frame, an event pair on the compute stream
     * at begin and at end (the engine ends every iteration there). */
    ao_event *frame[2];
    double frame_us[2];
};

struct ao_timeline {
    ao_device *dev;
    ao_stream *streams[AO_NSTREAMS];
    int enabled;
    ao_event *anchor;
    int anchor_complete;
    struct timespec anchor_realtime;
    double anchor_mono_us; /* the host's monotonic clock at the anchor's record */
    /* Ring: `closed` undelivered iterations from `head`, then the open one. */
    struct slot *slots;
    size_t nslots, head, closed;
    struct slot *open;       /* NULL between end and begin */
    struct slot *delivering; /* inside ao_timeline_collect's callback */
    size_t max_ops;          /* most ops any iteration had */
    size_t nevents;          /* events created, anchor included */
    /* profiling.nvtx: the op ranges open, innermost last (op -1: untimed) */
    int nvtx;
    int step_range_open;
    struct nvtx_range {
        int op;
        const char *name;
    } * ranges;
    size_t nranges, ranges_cap;
};

ao_timeline *ao_timeline_create(ao_device *dev, ao_stream *const *streams, int enabled)
{
    ao_timeline *t = ao_calloc(1, sizeof *t);
    t->dev = dev;
    for (int i = 0; i < AO_NSTREAMS; i++) t->streams[i] = streams[i];
    t->enabled = enabled != 0;
    t->nslots = TIMELINE_INITIAL_SLOTS;
    t->slots = ao_calloc(t->nslots, sizeof *t->slots);
    t->max_ops = TIMELINE_INITIAL_OPS;
    return t;
}

static void slot_free(struct slot *s)
{
    for (int i = 0; i < 2; i++)
        if (s->frame[i]) ao_event_destroy(s->frame[i]);
    for (size_t i = 0; i < s->cap; i++) {
        ao_event_destroy(s->start[i]);
        ao_event_destroy(s->end[i]);
    }
    free(s->ops);
    free(s->start);
    free(s->end);
    free(s->ended);
}

/* Undelivered iterations are dropped: call ao_timeline_collect(t, 1, ...)
 * first to keep them. Events with work still queued may be destroyed (CUDA
 * and the cpu backend both allow it). */
void ao_timeline_destroy(ao_timeline *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->nslots; i++) slot_free(&t->slots[i]);
    free(t->slots);
    if (t->anchor) ao_event_destroy(t->anchor);
    free(t->ranges);
    free(t);
}

void ao_timeline_set_nvtx(ao_timeline *t, int on)
{
    if (t->open)
        ao_fatal(AO_EXIT_FAIL, "timeline", "NVTX ranges are switched between iterations only");
    t->nvtx = on != 0;
}

static void nvtx_open(ao_timeline *t, int op, const char *name)
{
    if (t->nranges == t->ranges_cap) {
        t->ranges_cap = t->ranges_cap ? 2 * t->ranges_cap : 8;
        t->ranges = ao_realloc(t->ranges, t->ranges_cap * sizeof *t->ranges);
    }
    t->ranges[t->nranges++] = (struct nvtx_range){op, name};
    ao_range_push(t->dev, name);
}

/* Push/pop ranges nest, ops need not (the engine may end an op after one
 * begun later): closing op's range closes the ones opened after it and
 * reopens them, so every range keeps its name. An untimed op (-1: no handle
 * to tell ops apart) closes the innermost range. */
static void nvtx_close(ao_timeline *t, int op)
{
    size_t n = t->nranges, at = n; /* 1 + the index of op's range */
    if (op >= 0)
        while (at > 0 && t->ranges[at - 1].op != op) at--;
    if (at == 0) return;
    for (size_t i = at - 1; i < n; i++) ao_range_pop(t->dev);
    for (size_t i = at; i < n; i++) {
        t->ranges[i - 1] = t->ranges[i];
        ao_range_push(t->dev, t->ranges[i].name);
    }
    t->nranges = n - 1;
}

size_t ao_timeline_event_count(const ao_timeline *t)
{
    return t->nevents;
}

static double mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Time zero for every stream: the other streams wait for the anchor (once, at
 * start), so that no op issued after it can start before it, even on a stream
 * that nothing else orders after `s`; times are then never negative.
 *
 * The host clock is read right after the anchor is enqueued; the event itself
 * completes on the device a little later (once the stream reaches it: the
 * enqueue latency when the stream is idle, as it is at start). Aligning with
 * nsys/rocprof through anchor_realtime is therefore good to about that
 * latency, microseconds on an idle GPU. */
void ao_timeline_anchor(ao_timeline *t, ao_stream *s)
{
    if (t->anchor)
        ao_fatal(AO_EXIT_FAIL, "timeline", "the anchor is recorded once per timeline, at start");
    t->anchor = ao_event_create(t->dev);
    t->nevents++;
    ao_event_record(t->anchor, s);
    clock_gettime(CLOCK_REALTIME, &t->anchor_realtime);
    t->anchor_mono_us = mono_us();
    for (int i = 0; i < AO_NSTREAMS; i++)
        if (t->streams[i] && t->streams[i] != s) ao_stream_wait_event(t->streams[i], t->anchor);
}

struct timespec ao_timeline_anchor_realtime(const ao_timeline *t)
{
    return t->anchor_realtime;
}

double ao_timeline_event_us(const ao_timeline *t, ao_event *e)
{
    if (!t->anchor) ao_fatal(AO_EXIT_FAIL, "timeline", "no anchor to time an event from");
    return ao_event_elapsed_us(t->anchor, e);
}

static void slot_reserve(ao_timeline *t, struct slot *s, size_t cap)
{
    if (cap <= s->cap) return;
    s->ops = ao_realloc(s->ops, cap * sizeof *s->ops);
    s->start = ao_realloc(s->start, cap * sizeof *s->start);
    s->end = ao_realloc(s->end, cap * sizeof *s->end);
    s->ended = ao_realloc(s->ended, cap * sizeof *s->ended);
    for (size_t i = s->cap; i < cap; i++) {
        s->start[i] = ao_event_create(t->dev);
        s->end[i] = ao_event_create(t->dev);
    }
    t->nevents += 2 * (cap - s->cap);
    s->cap = cap;
}

/* Every slot holds an undelivered iteration: add slots rather than wait for
 * the device. The ring is unrolled so that head is 0 again. */
static void ring_grow(ao_timeline *t)
{
    size_t n = t->nslots * 2;
    struct slot *slots = ao_calloc(n, sizeof *slots);
    for (size_t i = 0; i < t->nslots; i++) slots[i] = t->slots[(t->head + i) % t->nslots];
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    t->head = 0;
}

/* Timing off: where frames are recorded (NULL: no compute stream, or no
 * anchor yet, so no frame). */
static ao_stream *frame_stream(const ao_timeline *t)
{
    return t->anchor ? t->streams[AO_STREAM_COMPUTE] : NULL;
}

void ao_timeline_begin(ao_timeline *t, int64_t step, const char *phase)
{
    if (t->open)
        ao_fatal(AO_EXIT_FAIL, "timeline", "iteration %lld begun before iteration %lld ended",
                 (long long)step, (long long)t->open->step);
    if (t->closed == t->nslots) ring_grow(t);
    struct slot *s = &t->slots[(t->head + t->closed) % t->nslots];
    s->step = step;
    s->phase = phase;
    s->nops = 0;
    for (int i = 0; i < AO_NSTREAMS; i++) s->newest_end[i] = -1;
    if (t->enabled) {
        slot_reserve(t, s, t->max_ops);
    } else {
        ao_stream *cs = frame_stream(t);
        for (int i = 0; i < 2 && cs; i++)
            if (!s->frame[i]) {
                s->frame[i] = ao_event_create(t->dev);
                t->nevents++;
            }
        if (cs) ao_event_record(s->frame[0], cs);
    }
    t->open = s;
    if (t->nvtx) {
        char name[64]; /* NVTX copies the message */
        snprintf(name, sizeof name, "%s step %lld", phase, (long long)step);
        ao_range_push(t->dev, name);
        t->step_range_open = 1;
    }
}

static struct slot *open_slot(ao_timeline *t, const char *call)
{
    if (!t->open)
        ao_fatal(AO_EXIT_FAIL, "timeline", "%s outside an iteration (call ao_timeline_begin first)",
                 call);
    return t->open;
}

int ao_timeline_op_begin(ao_timeline *t, ao_stream_id sid, ao_op_class cls, ao_coll_kind kind,
                         const char *name, int unit, uint64_t bytes)
{
    struct slot *s = open_slot(t, "op_begin");
    if (!t->enabled) {
        if (t->nvtx) nvtx_open(t, -1, name);
        return -1;
    }
    if ((unsigned)sid >= AO_NSTREAMS || !t->streams[sid])
        ao_fatal(AO_EXIT_FAIL, "timeline", "op \"%s\" on stream %d, which this rank does not have",
                 name, (int)sid);
    if (!t->anchor)
        ao_fatal(AO_EXIT_FAIL, "timeline",
                 "op \"%s\" timed before the anchor (call ao_timeline_anchor first)", name);
    if (s->nops == s->cap) {
        slot_reserve(t, s, s->cap * 2);
        if (s->cap > t->max_ops) t->max_ops = s->cap;
    }
    size_t i = s->nops++;
    s->ops[i] = (ao_op){.bytes = bytes,
                        .name = name,
                        .unit = (int16_t)unit,
                        .stream = (uint8_t)sid,
                        .cls = (uint8_t)cls,
                        .kind = (int8_t)(cls == AO_CLASS_COMM ? kind : AO_KIND_NONE),
                        /* The host clock read on the device's axis: the anchor
                         * completes on the device the enqueue latency after
                         * its record (µs on an idle stream), so an op looks
                         * enqueued that much early (host_wait_ms errs low). */
                        .issue_us = mono_us() - t->anchor_mono_us,
                        .has_issue = 1};
    s->ended[i] = 0;
    if (t->nvtx) nvtx_open(t, (int)i, name);
    ao_event_record(s->start[i], t->streams[sid]);
    return (int)i;
}

ao_event *ao_timeline_op_start(ao_timeline *t, int op)
{
    struct slot *s = open_slot(t, "op_start");
    if (op < 0 && !t->enabled) return NULL;
    if (op < 0 || (size_t)op >= s->nops)
        ao_fatal(AO_EXIT_FAIL, "timeline", "op_start(%d): not an op of iteration %lld", op,
                 (long long)s->step);
    return s->start[op];
}

ao_event *ao_timeline_op_end(ao_timeline *t, int op)
{
    struct slot *s = open_slot(t, "op_end");
    if (op < 0 && !t->enabled) {
        if (t->nvtx) nvtx_close(t, -1);
        return NULL;
    }
    if (op < 0 || (size_t)op >= s->nops || s->ended[op])
        ao_fatal(AO_EXIT_FAIL, "timeline", "op_end(%d): not an open op of iteration %lld", op,
                 (long long)s->step);
    s->ended[op] = 1;
    int sid = s->ops[op].stream;
    ao_event_record(s->end[op], t->streams[sid]);
    s->newest_end[sid] = op;
    if (t->nvtx) nvtx_close(t, op);
    return s->end[op];
}

void ao_timeline_end(ao_timeline *t)
{
    struct slot *s = open_slot(t, "end");
    for (size_t i = 0; i < s->nops; i++)
        if (!s->ended[i])
            ao_fatal(AO_EXIT_FAIL, "timeline", "iteration %lld ended with op \"%s\" still open",
                     (long long)s->step, s->ops[i].name);
    if (!t->enabled && frame_stream(t)) ao_event_record(s->frame[1], frame_stream(t));
    t->open = NULL;
    t->closed++;
    if (t->step_range_open) {
        ao_range_pop(t->dev);
        t->step_range_open = 0;
    }
}

/* Whether the slot's events are complete; with wait, makes them so. */
static int slot_complete(ao_timeline *t, struct slot *s, int wait)
{
    ao_event *frame_end = !t->enabled && t->anchor ? s->frame[1] : NULL;
    if (s->nops == 0 && !frame_end) return 1;
    if (!t->anchor_complete) {
        if (wait)
            ao_event_sync(t->anchor);
        else if (!ao_event_query(t->anchor))
            return 0;
        t->anchor_complete = 1;
    }
    if (frame_end) {
        if (wait)
            ao_event_sync(frame_end);
        else if (!ao_event_query(frame_end))
            return 0;
    }
    for (int sid = 0; sid < AO_NSTREAMS; sid++) {
        int op = s->newest_end[sid];
        if (op < 0) continue;
        if (wait)
            ao_event_sync(s->end[op]);
        else if (!ao_event_query(s->end[op]))
            return 0;
    }
    return 1;
}

/* Times in two steps, anchor -> the iteration's first start event -> each
 * event: CUDA reports elapsed time as a float of milliseconds, whose
 * resolution from the anchor decays with run time (0.25 ms after an hour).
 * Read from a reference inside the iteration, durations and the overlaps
 * between ops keep the timer's own resolution; only the iteration's offset
 * from the anchor is rounded, the same for all its ops. */
static void slot_read_times(ao_timeline *t, struct slot *s)
{
    s->frame_us[0] = s->frame_us[1] = NAN;
    if (!t->enabled && t->anchor && s->frame[1]) {
        s->frame_us[0] = ao_event_elapsed_us(t->anchor, s->frame[0]);
        s->frame_us[1] = ao_event_elapsed_us(t->anchor, s->frame[1]);
    }
    if (s->nops == 0) return;
    ao_event *ref = s->start[0];
    double offset_us = ao_event_elapsed_us(t->anchor, ref);
    for (size_t i = 0; i < s->nops; i++) {
        ao_op *op = &s->ops[i];
        op->start_us = offset_us + ao_event_elapsed_us(ref, s->start[i]);
        op->end_us = offset_us + ao_event_elapsed_us(ref, s->end[i]);
        if (op->end_us < op->start_us) op->end_us = op->start_us; /* timer resolution */
    }
}

/* cb must not call back into this timeline. */
void ao_timeline_collect(ao_timeline *t, int wait, ao_timeline_cb cb, void *ctx)
{
    while (t->closed > 0) {
        struct slot *s = &t->slots[t->head];
        if (!slot_complete(t, s, wait)) return;
        slot_read_times(t, s);
        t->delivering = s;
        cb(ctx, s->step, s->phase, s->ops, s->nops);
        t->delivering = NULL;
        t->head = (t->head + 1) % t->nslots;
        t->closed--;
    }
}

int ao_timeline_frame(const ao_timeline *t, double *start_us, double *end_us)
{
    const struct slot *s = t->delivering;
    if (!s || !(s->frame_us[1] >= s->frame_us[0])) return 0;
    *start_us = s->frame_us[0];
    *end_us = s->frame_us[1];
    return 1;
}

/* torch.profiler.schedule(wait, warmup, active, repeat) with skip_first = 0:
 *
 *     num_steps = wait + warmup + active
 *     if repeat > 0 and step // num_steps >= repeat: NONE
 *     mod = step % num_steps
 *     mod < wait            -> NONE
 *     mod < wait + warmup   -> WARMUP
 *     otherwise             -> RECORD (RECORD_AND_SAVE on the cycle's last step)
 *
 * "Active" here is RECORD or RECORD_AND_SAVE. torch rejects active <= 0 and
 * negative fields; the config does too, and this function answers "never" for
 * them rather than dividing by zero. */
int ao_profile_active(const ao_profile_schedule *ps, int64_t step)
{
    if (!ps->enabled || ps->active <= 0 || ps->wait < 0 || ps->warmup < 0 || ps->repeat < 0 ||
        step < 0)
        return 0;
    int64_t cycle = (int64_t)ps->wait + ps->warmup + ps->active;
    if (ps->repeat > 0 && step / cycle >= ps->repeat) return 0;
    return step % cycle >= (int64_t)ps->wait + ps->warmup;
}
