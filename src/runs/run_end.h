/* What a run's driver (train/) takes from runs/: the one runs/ header
 * train/ includes (DESIGN §3). At the end of a run rank 0 writes summary.json
 * with its table and, when asked, the Chrome trace; during the run the
 * profiler stores kernels in each record's "extra" in the form the trace
 * reads back. Everything else in runs/ reads run files and never runs
 * beside the engine. */
#ifndef AORTA_RUNS_RUN_END_H
#define AORTA_RUNS_RUN_END_H

#include <stddef.h>
#include <stdio.h>

#include <yajl/yajl_gen.h>

#include "core/metrics.h"

/* Load run_dir, summarize (skip_steps < 0: from run.json), write
 * run_dir/summary.json and print the table to `table` (NULL: no table).
 * Returns 0, AO_EXIT_USAGE (no usable records) or AO_EXIT_FAIL (cannot
 * write), after printing why. (runs/summary.h) */
int ao_summary_for_run(const char *run_dir, long long skip_steps, FILE *table);

/* The Chrome trace of a finished run directory, written to out_path; see
 * runs/trace.h for what it holds. Returns 0, AO_EXIT_USAGE (missing or
 * malformed run.json or records) or AO_EXIT_FAIL (I/O), after printing why. */
int ao_trace_from_run(const char *run_dir, const char *out_path);

/* For a record's extra hook: writes the key "kernels" and the ops as an array
 * of {"lane","name","class","kind","start_us","end_us","bytes"}, the form
 * ao_trace_from_run reads back. Returns the yajl status. */
yajl_gen_status ao_trace_gen_kernels(yajl_gen g, const ao_op *ops, size_t n);

/* A record's kernel trace (profiling.kernel_trace): the key "overlap_kernels"
 * with the §7 fields of the kernels (m, no per-stream fields) and, when ops
 * is not NULL (the iteration is in an active profiling window), "kernels" as
 * ao_trace_gen_kernels writes them. The one writer of this format: train
 * writes it, the report's top-kernels table and the trace read it back
 * (runs/trace.h: ao_trace_record_kernels), the tests' fixtures use it. */
yajl_gen_status ao_trace_gen_kernel_extra(yajl_gen g, const ao_overlap *m, const ao_op *ops,
                                          size_t n);

#endif
