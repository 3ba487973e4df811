/* The §7 decomposition of a run's train steps against its baselines
 * (DESIGN §7, "Decomposition"): one implementation for summary.json, the
 * report and diagnose.
 *
 * Source: kernel time when every baseline and kept train record of the ranks
 * carries the kernel trace's view ("extra.overlap_kernels",
 * profiling.kernel_trace), else the events. Events and kernels differ by
 * what an event pair holds besides its kernels (DESIGN §7 says what), and
 * that differs between a baseline step and a train step, so the kernel view
 * is the one whose baselines measure what they say.
 *
 * Train medians: step over the per-step max over ranks (rank -1) or the
 * rank's own; compute and communication pooled over the ranks' kept records.
 * Baseline medians pooled over the ranks' baseline records. */
#ifndef AORTA_RUNS_DECOMPOSE_H
#define AORTA_RUNS_DECOMPOSE_H

#include <stddef.h>

#include "core/metrics.h"
#include "runs/rundata.h"

/* Which quantity each check pair holds: events against kernels. */
enum {
    AO_DECOMP_CHECK_COMPUTE_ONLY, /* compute of the compute-only baselines */
    AO_DECOMP_CHECK_COMM_ONLY,    /* communication of the comm-only baselines */
    AO_DECOMP_CHECK_COMPUTE,      /* compute of the train steps */
    AO_DECOMP_CHECK_COMM,         /* communication of the train steps */
    AO_DECOMP_NCHECKS
};
extern const char *const ao_decomp_check_names[AO_DECOMP_NCHECKS];

typedef struct ao_decomp {
    int have;    /* baseline records of both kinds */
    int kernels; /* 1: kernel time, 0: events */
    size_t ncompute_only, ncomm_only;
    ao_decomposition d;
    double step_ms, compute_ms, comm_ms; /* the train medians it used */
    /* step - ideal: what overlap has not won back. When compute alone is
     * the ideal it is contention + exposed communication + idle + copies
     * nothing ran beside (the step's window is made of those, §7). */
    double gap_ms;
    double compute_only_step_ms, comm_only_step_ms; /* the baselines' windows */
    /* Medians, events against kernels (NAN without the kernel trace). */
    double events_ms[AO_DECOMP_NCHECKS], kernels_ms[AO_DECOMP_NCHECKS];
    const char *flag; /* ao_decomposition_flag of d */
} ao_decomp;

/* rank: an index into each run's ranks, or -1 for all ranks. */
void ao_decomp_of(const ao_run_data *runs, size_t nruns, int rank, ao_decomp *out);
/* "kernel time (profiling.kernel_trace)" or "events". */
const char *ao_decomp_source(const ao_decomp *d);

#endif
