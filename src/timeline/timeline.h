/* The device timeline of one rank (DESIGN §7): an event pair around every op,
 * recorded on the stream that executes it, read one iteration late so that no
 * iteration waits for the device, turned into ao_op intervals relative to one
 * anchor event.
 *
 *     ao_timeline *t = ao_timeline_create(dev, streams, enabled);
 *     ao_timeline_anchor(t, streams[AO_STREAM_COMPUTE]);  // once, at start
 *     for each iteration:
 *         ao_timeline_begin(t, step, phase);
 *         int op = ao_timeline_op_begin(t, AO_STREAM_ALLGATHER, AO_CLASS_COMM,
 *                                       AO_KIND_ALLGATHER, "allgather", unit, bytes);
 *         ... enqueue the op on that stream ...
 *         ao_timeline_op_end(t, op);
 *         ao_timeline_end(t);                 // closes it
 *         ao_timeline_collect(t, 0, cb, ctx); // delivers iterations now complete
 *     ao_timeline_collect(t, 1, cb, ctx);     // at the end: wait for the rest
 *
 * Events are pooled (three iterations' worth; more slots when the host runs
 * further ahead of the device, more events per slot when an iteration has more
 * ops than ever before), never created per op in steady state. With enabled == 0
 * (profiling.timing: false) no event is recorded and iterations are delivered
 * with no ops: the cost of timing can then be measured. The step time is still
 * measured then, by one event pair per iteration on the compute stream (its
 * "frame", see ao_timeline_frame). */
#ifndef AORTA_TIMELINE_TIMELINE_H
#define AORTA_TIMELINE_TIMELINE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/metrics.h"
#include "runtime/device.h"

typedef struct ao_timeline ao_timeline;

/* streams[AO_NSTREAMS]: the rank's named streams (NULL where unused). */
ao_timeline *ao_timeline_create(ao_device *dev, ao_stream *const *streams, int enabled);
void ao_timeline_destroy(ao_timeline *t);
/* profiling.nvtx: with on != 0, every iteration ("train step 12") and every
 * op (its name) is also an NVTX / roctx range, for nsys and rocprof. The
 * ranges mark the host thread while it *enqueues* the work, not the device
 * while it runs it: the tools draw the GPU side of each range by following
 * the launches made inside it. Off by default. */
void ao_timeline_set_nvtx(ao_timeline *t, int on);
/* Events this timeline has created, anchor included: constant in steady state
 * (for tests and debug logs). */
size_t ao_timeline_event_count(const ao_timeline *t);

/* Records the anchor event on `s` (once per timeline, before any timed op),
 * makes the other streams wait for it (so no op time is negative), and reads
 * CLOCK_REALTIME right after (the host side of the anchor, for run.json; the
 * event completes on the device up to the enqueue latency later). */
void ao_timeline_anchor(ao_timeline *t, ao_stream *s);
struct timespec ao_timeline_anchor_realtime(const ao_timeline *t);
/* µs from the anchor to e, both complete (an event of the caller's, timed
 * on the timeline's axis). */
double ao_timeline_event_us(const ao_timeline *t, ao_event *e);

/* `phase` is a static string ("train", "compute_only", "comm_only"). */
void ao_timeline_begin(ao_timeline *t, int64_t step, const char *phase);
/* Records the start event on stream `sid`; returns a handle for op_end
 * (-1 when timing is off). `name` must be a static string. */
int ao_timeline_op_begin(ao_timeline *t, ao_stream_id sid, ao_op_class cls, ao_coll_kind kind,
                         const char *name, int unit, uint64_t bytes);
/* The op's start event (NULL when timing is off), for a wait enqueued right
 * away, as op_end's. */
ao_event *ao_timeline_op_start(ao_timeline *t, int op);
/* Records the end event; returns it (NULL when timing is off) for the caller
 * to make another stream wait for this point right away: it is recorded
 * again only nslots (>= 3) iterations later, so a wait enqueued before the
 * next iteration ends waits for this op. */
ao_event *ao_timeline_op_end(ao_timeline *t, int op);
void ao_timeline_end(ao_timeline *t);

/* One finished iteration: its ops (µs from the anchor), in issue order. */
typedef void (*ao_timeline_cb)(void *ctx, int64_t step, const char *phase, const ao_op *ops,
                               size_t nops);
/* Delivers, in order and once each, every closed iteration whose events are
 * complete, stopping at the first that is not; with wait != 0, waits for all
 * closed iterations. With wait == 0 it never blocks. cb must not call back
 * into the timeline. */
void ao_timeline_collect(ao_timeline *t, int wait, ao_timeline_cb cb, void *ctx);
/* Inside the callback, timing off: the delivered iteration's frame, from
 * its begin to its end on the compute stream, in µs from the anchor; returns
 * 1. Returns 0 when timing is on (the ops are the record) or there is no
 * frame (no compute stream or no anchor). */
int ao_timeline_frame(const ao_timeline *t, double *start_us, double *end_us);

/* profiling.wait/warmup/active/repeat (torch.profiler's schedule): whether
 * step (0-based, counted from the first step) falls in an active window.
 * repeat 0 = cycles forever. enabled == 0 -> never. */
typedef struct ao_profile_schedule {
    int enabled, wait, warmup, active, repeat;
} ao_profile_schedule;
int ao_profile_active(const ao_profile_schedule *ps, int64_t step);

#endif
