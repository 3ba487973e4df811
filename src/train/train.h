/* `aorta train` after its flags: the launcher parent through launch/rank.h,
 * then on each rank the device, streams, model, data loader, engine,
 * timeline, the run's files, the steps, and at the end (rank 0) summary.json
 * and the summary table (DESIGN §5-§8).
 *
 * The run directory exists before the ranks start when a launcher parent made
 * it (AORTA_RUN_ID set): every rank joins it. Under an external launcher
 * without one, rank 0 makes the id (or takes run_name), creates the directory
 * and broadcasts the id; the others join.
 *
 * Iterations: training.summary_skip_steps warm-up train steps, then
 * training.baseline_steps compute-only and as many comm-only iterations (when
 * > 0), then the remaining train steps; ao_config_total_steps train steps in
 * all. A stop request (Ctrl-C, SIGTERM) is agreed on by all ranks through the
 * per-step all-reduce, so every rank ends after the same iteration with its
 * files complete. */
#ifndef AORTA_TRAIN_TRAIN_H
#define AORTA_TRAIN_TRAIN_H

#include "comm/comm.h"
#include "core/config.h"

typedef struct ao_train_opts {
    const char *backend;   /* resolved: "cpu", "cuda" */
    const char *run_name;  /* --run-name, or NULL */
    const char *rdzv_file; /* --rdzv-file, or NULL */
    int nproc;             /* --nproc, 0: the default (launch/rank.h) */
    int all_ranks;         /* --all-ranks: every spawned rank's output */
    int progress;          /* set by ao_train: a progress line updated in place */
    int argc;              /* the command line, for run.json and the spawned ranks */
    char **argv;
} ao_train_opts;

/* `aorta train` after its flags and config: the launcher parent (the config
 * checked for the rank count and the run directory made before any rank
 * starts, then the ranks spawned) or, under a launcher or for one rank, the
 * rank itself. Returns the exit code: 0, AO_EXIT_USAGE (a setting this
 * backend cannot run) or AO_EXIT_FAIL. */
int ao_train(const struct ao_config *cfg, ao_train_opts *o);

#endif
