/* The profiling side of `aorta train` on one rank (DESIGN §7-§8):
 * - profiling windows (profiling.enabled/wait/warmup/active/repeat): which
 *   iterations keep their per-op intervals in the record, and the external
 *   profiler's capture range (cudaProfilerStart/Stop, for nsys
 *   --capture-range=cudaProfilerApi) around exactly those iterations;
 * - GPU telemetry (telemetry.*) aggregated over each iteration's window;
 * - kernel-level ground truth (profiling.kernel_trace, cuda backend): the
 *   kernels CUPTI saw in each iteration's window, their overlap computed like
 *   the event timeline's, and during active windows the kernels themselves.
 * - the price of overlap (timeline/contention.h) of each train step from its
 *   kernels, against the same kernels alone in the counted iterations (the
 *   compute-only baselines first).
 * The last three go into the record's "extra" ("telemetry", "overlap_kernels",
 * "kernels", "contention").
 *
 *     p = ao_train_profile_start(cfg, dev, &info, rank, world_size);
 *     ao_timeline_anchor(tl, s);
 *     ao_train_profile_anchored(p, tl, s);
 *     before issuing iteration k:      ao_train_profile_issue(p, k);
 *     for delivered iteration k:       ao_train_profile_record(p, k, ops, n, &rec);
 *                                      ao_jsonl_append(w, &rec);
 *     ao_train_profile_stop(p);
 *
 * Iterations are counted as the run issues them (0-based, baselines
 * included), the way torch.profiler counts prof.step() calls. */
#ifndef AORTA_TRAIN_TRAIN_PROFILE_H
#define AORTA_TRAIN_TRAIN_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/jsonl.h"
#include "core/metrics.h"
#include "runtime/device.h"
#include "timeline/timeline.h"

struct ao_config;
typedef struct ao_train_profile ao_train_profile;

/* Before the timeline's anchor, so that CUPTI sees everything after it.
 * Starts telemetry (one warning when unavailable) and, with
 * profiling.kernel_trace, CUPTI: on a backend other than cuda rank 0 warns
 * once and the run goes on without it. Always returns a handle. */
ao_train_profile *ao_train_profile_start(const struct ao_config *cfg, ao_device *dev,
                                         const ao_device_info *info, int rank, int world_size);
/* The schedule's skip_first: profiling.skip_first, or for -1 the first counted
 * train iteration (`counted`), moved earlier when the windows would not fit in
 * the run's n_iter iterations. */
void ao_train_profile_skip(ao_train_profile *p, const struct ao_config *cfg, int64_t counted,
                           int64_t n_iter);
/* Right after ao_timeline_anchor(tl, s), s the compute stream: the host and
 * CUPTI clocks of the anchor (with CUPTI, waits for s so that the anchor has
 * completed), and CUPTI's id of the compute stream (cupti.h: classes). */
void ao_train_profile_anchored(ao_train_profile *p, const ao_timeline *tl, ao_stream *s);
/* Opens or closes the capture range when iteration `iter` enters or leaves
 * an active window. */
void ao_train_profile_issue(ao_train_profile *p, int64_t iter);
/* For a delivered iteration whose r->m is computed from ops: sets r->ops
 * during active windows and r->extra when there is telemetry or a kernel
 * trace to write. What r->extra_ctx points to stays valid until the next
 * call. */
void ao_train_profile_record(ao_train_profile *p, int64_t iter, const ao_op *ops, size_t nops,
                             ao_iter_record *r);
/* Closes an open capture range, stops telemetry and CUPTI; NULL is a no-op. */
void ao_train_profile_stop(ao_train_profile *p);

#endif
