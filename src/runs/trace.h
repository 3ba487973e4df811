/* Chrome trace (Trace Event Format, JSON object form) of a run: every rank a
 * process, every named stream a thread, every op a complete event, one
 * complete event per iteration on an "iterations" thread, kernel-level ops
 * (CUPTI) on "kernels" threads, telemetry as counter tracks, and a flow
 * ("s"/"f", cat "waits_on") from each collective to the compute op that waits
 * on it (the first of its unit to start after the collective ends). Loads in
 * Perfetto (ui.perfetto.dev), chrome://tracing and HTA.
 *
 * Time: "ts" and "dur" are microseconds. ts 0 is the earliest rank's anchor;
 * a rank's events are shifted by (its anchor's CLOCK_REALTIME − the earliest
 * anchor), so ranks line up on the host wall clock, and otherData holds
 * time_origin_realtime_ns to line the trace up with nsys or rocprof.
 *
 * The writer streams: events go to a temporary file as they come (memory stays
 * bounded), and ao_trace_close renames it over `path`, so a reader never sees
 * half a trace. Every rank must be added before the first event, because the
 * time origin depends on all of them.
 *
 *     ao_trace *t = ao_trace_open("run/trace.json");
 *     for each rank: ao_trace_add_rank(t, rank, anchor_realtime_ns);
 *     for each record: ao_trace_add_iteration(t, rank, &rec);
 *     ao_trace_close(t, NULL);
 *
 * Threads (tid) of a rank: the stream's ao_stream_id, AO_TRACE_TID_ITERATIONS,
 * AO_TRACE_TID_KERNELS + lane. */
#ifndef AORTA_RUNS_TRACE_H
#define AORTA_RUNS_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "core/json.h"
#include "core/jsonl.h"
#include "core/metrics.h"
#include "runs/run_end.h"

#define AO_TRACE_TID_ITERATIONS 50
#define AO_TRACE_TID_KERNELS    100
#define AO_TRACE_MAX_LANES      256

typedef struct ao_trace ao_trace;

/* Create the temporary file beside `path`. NULL after printing why. */
ao_trace *ao_trace_open(const char *path);
/* Declare a rank and the CLOCK_REALTIME (ns) of its anchor event. Returns 0,
 * or -1 after printing why (negative or repeated rank, events already
 * written). */
int ao_trace_add_rank(ao_trace *t, int rank, int64_t anchor_realtime_ns);
/* One iteration of `rank`: its marker on the iterations thread and, when
 * r->ops is set, every op on its stream's thread (args: bytes, unit, kind,
 * step). Returns 0 or -1 after printing why (an undeclared rank, I/O). */
int ao_trace_add_iteration(ao_trace *t, int rank, const ao_iter_record *r);
/* Kernel-level ops of `rank` (CUPTI): op.stream is the kernel lane
 * (< AO_TRACE_MAX_LANES); a lane's thread is named after its first op's
 * class ("kernels 0: compute", "kernels 1: allgather", ...). */
int ao_trace_add_kernels(ao_trace *t, int rank, const ao_op *ops, size_t n);
/* A counter sample on `rank`'s track `name` at rel_us (µs from the rank's
 * anchor); NAN values are skipped (a metric the device did not report). */
int ao_trace_add_counter(ao_trace *t, int rank, const char *name, double rel_us, double value);
/* A record's (`line`, step `step` of file `path`) "extra.kernels", as
 * ao_trace_gen_kernels writes it, back into ops: a heap array in *ops (names
 * point into line's tree), *n of them; *ops NULL when the record has no
 * kernel list. Returns 0, or AO_EXIT_USAGE after one error naming the file,
 * the step and the entry. */
int ao_trace_record_kernels(yajl_val line, const char *path, long long step, ao_op **ops,
                            size_t *n);
/* Finish the document (otherData: `other`'s fields plus the time origin),
 * write it and rename it over the path; frees t. Returns 0, or AO_EXIT_FAIL
 * after printing why (the temporary file is removed). */
int ao_trace_close(ao_trace *t, const ao_json_object *other);
/* Drop an unfinished trace (the temporary file is removed); NULL is a no-op. */
void ao_trace_abort(ao_trace *t);

/* ao_trace_from_run(run_dir, out_path) (declared in runs/run_end.h): the
 * trace of a finished run directory: run.json (world size, run id, anchor)
 * and every rank_NN_metrics.jsonl, with kernels and telemetry from each
 * record's "extra" ("kernels" as ao_trace_gen_kernels writes them,
 * "telemetry" as ao_telemetry_write_json writes it; each metric's mean
 * becomes a counter sample at the iteration's start).
 *
 * A rank's anchor is recovered from its own records (wall_time is the anchor's
 * realtime + window_start_us; exact to ~0.3 µs, the precision of a double
 * holding UNIX seconds), so ranks whose anchors were taken at different
 * moments still line up; a rank with no timed record falls back to run.json's
 * anchor. A rank without a metrics file is left out with a warning. */

#endif
