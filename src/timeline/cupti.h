/* Kernel-level ground truth (DESIGN §11): every kernel, memcpy and memset the
 * device ran, from the CUPTI activity API, as ao_op intervals on the same
 * time axis as the event timeline, so the overlap measured with events can be
 * checked against what the GPU really did.
 *
 *     ao_cupti *c = ao_cupti_start();           // NULL after one warning
 *     ao_timeline_anchor(...); sync the anchor's stream;
 *     ao_cupti_set_anchor(c, ao_cupti_now_ns(c));
 *     every iteration, once its window [w0, w1) (µs from the anchor) is known,
 *     with the device synchronized:
 *         ao_op *k;
 *         size_t n = ao_cupti_take(c, anchor + w0*1000, anchor + w1*1000, &k);
 *     ao_cupti_stop(c);
 *
 * Clock alignment: CUPTI stamps activity records with its own nanosecond
 * clock, the one cuptiGetTimestamp reads (by default derived from the GPU's
 * global timer, calibrated against the host's CLOCK_REALTIME). The event
 * timeline counts from the anchor event. Reading ao_cupti_now_ns right after
 * the anchor event has completed (the stream is idle at start, so it completes
 * at once; synchronize it first) gives the CUPTI time of the anchor, and an
 * activity at CUPTI time T is at (T − anchor) / 1000 µs on the timeline. The
 * offset error is the latency between the anchor event and that read: a few
 * microseconds, which the GPU test measures by comparing the two timelines.
 *
 * Classes: kernels whose name starts with ncclDevKernel or ncclKernel
 * (mangled or not) are communication, with the collective read from the name;
 * memcpy and memset are copies, except on the compute stream, where they are
 * compute; everything else is compute. The exception is what makes the two
 * views comparable: every activity on the compute stream between a compute
 * op's events is that op's (cuBLASLt issues a 4-byte memset of its
 * workspace, its dynamic schedule's tile counter, before most GEMMs;
 * bench/RESULTS.md),
 * while copies and memsets on other streams are issued outside any
 * collective's event pair (the engine's zero_grad, a copy op of its own,
 * after a reduction) and stay copies. A kernel's lane (ao_op.stream) numbers the CUDA
 * streams in the order they first appear. */
#ifndef AORTA_TIMELINE_CUPTI_H
#define AORTA_TIMELINE_CUPTI_H

#include <stddef.h>
#include <stdint.h>

#include "core/metrics.h"

typedef struct ao_cupti ao_cupti;

/* Load libcupti, enable kernel, memcpy and memset activity. NULL after ONE
 * warning when CUPTI cannot be loaded (or the build has no CUDA). */
ao_cupti *ao_cupti_start(void);
/* cuptiGetTimestamp. */
uint64_t ao_cupti_now_ns(ao_cupti *c);
/* The CUPTI time of the timeline's anchor event. */
void ao_cupti_set_anchor(ao_cupti *c, uint64_t anchor_ns);
/* The latest kernel whose name contains `name_part` that CUPTI recorded,
 * after a forced flush (the device must be idle): its start and end (CUPTI
 * clock) and its stream; returns 0 when there is none; the record is
 * consumed. A marker kernel bracketed by an event pair, like any timed op,
 * ties the two clocks together (train_profile.c); run on the compute stream,
 * it also names that stream (ao_cupti_set_compute_stream). */
int ao_cupti_marker(ao_cupti *c, const char *name_part, uint64_t *start_ns, uint64_t *end_ns,
                    uint32_t *stream_id);
/* The anchor's time on CUPTI's clock, from a marker kernel (name_part) that
 * an event pair timed at [a_us, b_us] on the event timeline, the device idle
 * since: the kernel sits in the middle of the pair's slack (the pair
 * brackets it with the launch overheads every timed op has, so the clocks
 * align the way the ops are compared). `fallback` (CUPTI's clock read after
 * a sync) when CUPTI saw no such kernel. The marker's stream becomes the
 * compute stream (ao_cupti_set_compute_stream). */
uint64_t ao_cupti_anchor_from_marker(ao_cupti *c, const char *name_part, double a_us, double b_us,
                                     uint64_t fallback);
/* CUPTI's id of the compute stream: its memcpys and memsets are compute. */
void ao_cupti_set_compute_stream(ao_cupti *c, uint32_t stream_id);
/* Flush CUPTI and hand out the activities whose midpoint lies in
 * [t0_ns, t1_ns) (opened 50 µs early, for the clocks' residual disagreement).
 * The midpoint, not the start: the clocks agree to a few µs, and where one
 * iteration's work follows the last one's at once, its first kernel starts
 * µs after the window's end and could, by its start, fall into the window
 * before; by its midpoint only when it is shorter than that disagreement
 * (the device must be idle: synchronize it first, or records of work still
 * running are lost)
 * (CUPTI clock) as ops relative to the anchor, ordered by start. Earlier
 * activities are dropped, later ones kept for the next call, so call it once
 * per iteration in order. *ops stays valid until the next call or stop.
 * NULL c: 0. */
size_t ao_cupti_take(ao_cupti *c, uint64_t t0_ns, uint64_t t1_ns, ao_op **ops);
/* Records CUPTI dropped for want of buffer space so far. */
size_t ao_cupti_dropped(ao_cupti *c);
/* Disable activity, flush, unload; NULL is a no-op. */
void ao_cupti_stop(ao_cupti *c);

/* The session functions above as libaorta_cuda.so exports them
 * (ao_cupti_cuda_ops, cupti_cuda.c); cupti_session.c forwards to them. */
struct ao_cupti_ops {
    ao_cupti *(*start)(void);
    uint64_t (*now_ns)(ao_cupti *c);
    void (*set_anchor)(ao_cupti *c, uint64_t anchor_ns);
    int (*marker)(ao_cupti *c, const char *name_part, uint64_t *start_ns, uint64_t *end_ns,
                  uint32_t *stream_id);
    void (*set_compute_stream)(ao_cupti *c, uint32_t stream_id);
    size_t (*take)(ao_cupti *c, uint64_t t0_ns, uint64_t t1_ns, ao_op **ops);
    size_t (*dropped)(ao_cupti *c);
    void (*stop)(ao_cupti *c);
};

/* ---- plain C parts, shared by the CUDA backend and the tests ---------------------- */

typedef enum ao_cupti_kind { AO_CUPTI_KERNEL, AO_CUPTI_MEMCPY, AO_CUPTI_MEMSET } ao_cupti_kind;

/* One activity, as the backend copies it out of a CUPTI record. */
typedef struct ao_cupti_record {
    ao_cupti_kind kind;
    uint64_t start_ns, end_ns; /* CUPTI clock */
    uint32_t stream_id;        /* CUPTI's stream id */
    uint64_t bytes;            /* memcpy/memset; 0 for kernels */
    const char *name;          /* kernel name (interned), or "memcpy HtoD", "memset", ... */
    int64_t correlation;       /* CUPTI's id of the API call that issued it (aorta attach) */
} ao_cupti_record;

/* The class of a kernel by its name; *kind gets the collective of an NCCL
 * kernel (AO_KIND_NONE when the name does not say, or not NCCL). */
ao_op_class ao_cupti_classify(const char *kernel_name, ao_coll_kind *kind);

/* CUDA streams to lanes 0, 1, ... in order of first appearance; streams past
 * AO_CUPTI_MAX_LANES share the last lane. */
#define AO_CUPTI_MAX_LANES 64
typedef struct ao_cupti_lanes {
    uint32_t stream_ids[AO_CUPTI_MAX_LANES];
    int n;
    int compute_known; /* compute_stream is set */
    uint32_t compute_stream;
} ao_cupti_lanes;
int ao_cupti_lane(ao_cupti_lanes *l, uint32_t stream_id);

/* The record as an op relative to anchor_ns, on lane `lane`; on_compute: it
 * ran on the compute stream. */
void ao_cupti_record_to_op(const ao_cupti_record *r, uint64_t anchor_ns, int lane, int on_compute,
                           ao_op *op);

/* Keep the records whose midpoint is in [t0, t1): the ones before t0 are
 * dropped, the ones at or after t1 move to the front of recs (order kept), and
 * the ones in the window become ops (lane per stream, ordered by start)
 * appended to *ops (capacity *cap, grown as needed). Returns how many ops;
 * *n becomes the number of records kept. */
size_t ao_cupti_split(ao_cupti_record *recs, size_t *n, uint64_t t0, uint64_t t1,
                      uint64_t anchor_ns, ao_cupti_lanes *lanes, ao_op **ops, size_t *cap);

#endif
