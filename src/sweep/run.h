/* Running a sweep plan: one child process of this binary per launch, with
 * the launch group's environment given to the child's execve only (the
 * sweep's own environment never changes), its output in
 * WORK_DIR/launch_NNN/output.log, its results read back from the JSON it
 * writes (coll/sdma --json) or the run's summary.json (train).
 *
 * The results are one row per point (coll: per point and message size):
 * axis columns (leading dashes dropped: "--op" -> "op"), environment
 * columns, the command's metric columns, run_dir and error. A failing launch
 * records its points with the error (the last "error:" line of its output)
 * and the sweep goes on, unless fail_fast. With an output file the results
 * are rewritten after every launch, so an interrupted sweep can --resume. */
#ifndef AORTA_SWEEP_RUN_H
#define AORTA_SWEEP_RUN_H

#include "sweep/plan.h"

typedef enum ao_sweep_format { AO_SWEEP_TABLE, AO_SWEEP_CSV, AO_SWEEP_JSON } ao_sweep_format;

typedef struct ao_sweep_run_opts {
    const char *exe; /* program each launch runs; NULL: this binary */
    const char *out; /* results file; NULL: print to stdout at the end */
    ao_sweep_format format;
    const char *work_dir;  /* launch directories; NULL: "artifacts/sweeps/<name>" */
    const char *chart_dir; /* NULL: the directory of `out`, else work_dir */
    int fail_fast;         /* stop at the first failed launch */
    int resume;            /* skip points with a successful row in `out` */
} ao_sweep_run_opts;

/* Run the plan. Returns 0 when every point ran, AO_EXIT_FAIL when one
 * failed (the results still hold the others), AO_EXIT_USAGE for bad options
 * (e.g. --resume without a csv/json --out). */
int ao_sweep_run(const ao_sweep_plan *p, const ao_sweep_run_opts *o);

#endif
