/* The numbers of one or more run directories, loaded for summaries, charts
 * and comparisons (DESIGN §7, §8).
 *
 * A run directory holds run.json and rank_NN_metrics.jsonl. Loading keeps,
 * per rank, one row of metric values per `train` record after the warm-up
 * (the first skip_steps train records of that rank), the §7 fields of the
 * `compute_only` and `comm_only` baseline records, the numeric members of
 * "extra.telemetry" when records carry it, and the per-op intervals of up to
 * AO_RUNDATA_MAX_PROFILED records that have an "ops" array (profiling
 * windows; the stream chart needs one), and the kernels of those with
 * "extra.kernels" aggregated by name (runs/kernels.h); with aorta train's
 * kernel trace, the kernel-level view of every record ("extra.overlap_kernels":
 * metrics kernel_*_ms, and the baselines' own) and the price of overlap
 * ("extra.contention": metric contention_ms and its evidence,
 * runs/contention.h). Ranks are read in parallel (one
 * thread per core): the files are independent. */
#ifndef AORTA_RUNS_RUNDATA_H
#define AORTA_RUNS_RUNDATA_H

#include <stddef.h>

#include <yajl/yajl_tree.h>

#include "core/jsonl.h"
#include "runs/contention.h"
#include "runs/collectives.h"
#include "runs/kernels.h"

/* ---- the metrics a summary reports ---------------------------------------- */

typedef enum ao_better { AO_BETTER_LOWER, AO_BETTER_HIGHER, AO_BETTER_NEITHER } ao_better;

typedef struct ao_metric_def {
    const char *name; /* "step_ms", "busbw_allgather_gbps", "busy_compute_ms" */
    const char *unit; /* "ms", "tokens/s", "GB/s", "ratio" */
    ao_better better;
    int headline; /* compared and charted by `aorta report` */
} ao_metric_def;

/* Every §7 field of a record, tokens/s, per-collective busbw and per-stream
 * busy time, in one fixed order. */
size_t ao_metric_count(void);
const ao_metric_def *ao_metric(size_t i);
/* Index of the metric named `name`, or -1. */
int ao_metric_find(const char *name);
/* The value of metric i in record r (NAN when undefined: busbw of a
 * collective kind the step did not run; and for the metrics a record keeps
 * in its "extra", which the loader reads from the line: kernel_*_ms,
 * contention_ms). */
double ao_metric_value(size_t i, const ao_iter_record *r);

/* ---- one rank, one run ---------------------------------------------------- */

#define AO_RUNDATA_MAX_PROFILED 256

/* A record's kernel-level view (extra.overlap_kernels), NAN when absent. */
typedef struct ao_kernel_view {
    double step_ms, compute_ms, comm_ms;
} ao_kernel_view;

typedef struct ao_telemetry_series {
    char *key;      /* "gpu_util", "power_w" (a nested member: "gpu0.power_w") */
    double *values; /* in record order */
    size_t n, cap;
} ao_telemetry_series;

typedef struct ao_rank_data {
    int rank;
    size_t n;         /* train records kept */
    long long *steps; /* [n] */
    double *rows;     /* [n][ao_metric_count()], row-major */
    double *wall;     /* [n] wall_time of each kept record */
    size_t cap;
    size_t skipped;   /* train records dropped as warm-up */
    size_t truncated; /* unterminated last line skipped by the reader */
    /* Baseline phases: the §7 fields of each record, and the same record's
     * kernel-level view (NAN fields without profiling.kernel_trace). */
    ao_overlap *compute_only, *comm_only;
    ao_kernel_view *compute_only_k, *comm_only_k;
    size_t ncompute_only, ncomm_only, cap_compute_only, cap_comm_only;
    /* Kept train records with per-op intervals (ops owned here). */
    ao_iter_record *profiled;
    size_t nprofiled, profiled_dropped;
    ao_telemetry_series *telemetry;
    size_t ntelemetry;
    /* aorta train's kernel trace (profiling.kernel_trace): the kernels of
     * the kept records that carry "extra.kernels", sorted; empty without. */
    ao_kernel_table kernels;
    /* The kept train records' contention evidence (extra.contention). */
    ao_contention_evidence contention;
} ao_rank_data;

/* A rank's column of metric m into out[0..rd->n). */
void ao_rank_column(const ao_rank_data *rd, size_t m, double *out);

typedef struct ao_run_data {
    char *dir;        /* as given */
    char *run_id;     /* run.json's run_id, else the directory's base name */
    yajl_val run;     /* parsed run.json, NULL when the directory has none */
    yajl_val summary; /* parsed summary.json when it has aorta analyze's "analyze" block */
    int world_size;   /* from run.json, else the records */
    int nranks;       /* metrics files read (rank_0 .. rank_{nranks-1}) */
    ao_rank_data *ranks;
    long long skip_steps;
    const char *skip_origin; /* "--skip-steps", "run.json", "default" */
    /* collectives.jsonl and who waited for whom in it; NULL without the
     * file (one rank, no op lists, an older run). Every step of it, the
     * warm-up included. */
    ao_coll_set *coll;
    ao_coll_summary *coll_sum;
} ao_run_data;

/* Load a run directory. skip_steps < 0 takes training.summary_skip_steps from
 * run.json, else the config default (5). Returns 0, or AO_EXIT_USAGE after
 * one error line (not a directory, no metrics files, a malformed line or
 * schema mismatch, ranks that disagree on world_size). */
int ao_run_load(const char *dir, long long skip_steps, ao_run_data *out);
/* The same without the records' op lists (ranks' `profiled` empty, counted
 * in profiled_dropped): what a summary needs, in memory that does not grow
 * with the ops of thousands of ranks. */
int ao_run_load_summary(const char *dir, long long skip_steps, ao_run_data *out);
void ao_run_free(ao_run_data *r);
/* 0 when a rank of r kept a train record after the warm-up; else
 * AO_EXIT_USAGE after "WHAT: no train step is left after skipping N warm-up
 * step(s) per rank" (every reader of the numbers refuses such a run alike). */
int ao_run_require_steps(const ao_run_data *r, const char *what);
/* That error on its own, for a set of runs with none in all. */
int ao_run_no_steps_error(const char *what, long long skip_steps);

/* The slowest rank, one definition for summary, report and diagnose (DESIGN
 * §7): the rank the others waited for most in collectives
 * (collectives.jsonl: the time their arrivals preceded its own, summed over
 * the steps); without matched collectives, the rank with the most time of
 * its own (median compute_ms + host_wait_ms). Returns an index into
 * run->ranks; *by (when not NULL) says which rule decided: "waited_for" or
 * "own_time". */
int ao_run_slowest_rank(const ao_run_data *run, const char **by);
/* The median of metric `name` over a rank's kept steps; NAN when absent. */
double ao_rank_metric_median(const ao_rank_data *rd, const char *name);
/* A rank's own time a step: median compute_ms plus median host_wait_ms
 * (0 when unknown). */
double ao_rank_own_ms(const ao_rank_data *rd);

/* collectives.jsonl from the records' op lists (aorta train's profiling
 * windows, aorta attach's steps), written into the run directory and
 * attached to run (coll, coll_sum) when the run has two ranks or more with
 * ops and no such file yet (runs/coll_records.c). 0, or AO_EXIT_FAIL when
 * it cannot be written. */
int ao_coll_from_records(ao_run_data *run);

/* The profiled step (one every rank recorded ops for) whose slowest rank's
 * step time is the median of those steps: the step the report's timeline
 * shows. -1 when no step has ops on every rank. */
long long ao_run_median_profiled_step(const ao_run_data *run);
/* The record of `step` among a rank's profiled records, or NULL. */
const ao_iter_record *ao_run_profiled_step(const ao_rank_data *rd, long long step);

/* A --log-dir argument: a run directory (it has run.json or metrics files)
 * or an output directory, whose `latest` run is taken, or with all_runs every
 * run directory in it (sorted by name). Heap array of heap strings in *dirs.
 * Returns 0 or AO_EXIT_USAGE after one error line. */
int ao_run_dirs_resolve(const char *log_dir, int all_runs, char ***dirs, size_t *n);
void ao_run_dirs_free(char **dirs, size_t n);

/* A string from run.json: the top-level member `key` when it has no dot,
 * else config[key].value. NULL when absent. */
yajl_val ao_run_config_value(const ao_run_data *r, const char *key);

/* A JSON value as short text ("full_shard", "2", "true", "[0.9,0.95]") into
 * buf; "" for NULL. */
void ao_json_value_text(yajl_val v, char *buf, size_t n);

#endif
