/* Summaries of runs (DESIGN §7): per-rank and cross-rank statistics of
 * every metric, rank skew, the baseline decomposition, telemetry, and the
 * knobs that matter; written as summary.json and printed as a table.
 *
 * `aorta train` calls ao_summary_for_run at the end of a run; `aorta report`
 * builds one summary per label from one or more runs.
 *
 * Cross-rank statistics pool every kept (rank, step) record, except step_ms:
 * its statistics are over the per-step max over ranks (compare.h,
 * AO_STEP_MS_DEFINITION), one step time on every page; and a metric on
 * which the ranks disagree is the slowest rank's alone. Per-rank medians
 * give the rank skew (largest median step_ms / smallest). */
#ifndef AORTA_RUNS_SUMMARY_H
#define AORTA_RUNS_SUMMARY_H

#include <stdio.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "core/metrics.h"
#include "core/stats.h"
#include "runs/decompose.h"
#include "runs/run_end.h"
#include "runs/rundata.h"

typedef struct ao_metric_summary {
    /* Pooled over ranks and kept steps, unless the ranks disagree
     * (AO_RANKS_DISAGREE): then the slowest rank's alone (rank >= 0), since
     * a median pooled over ranks that differ describes none of them. */
    ao_stats_summary all;
    int rank;            /* -1: pooled over every rank; else the rank `all` is of */
    double *rank_median; /* [nranks]; NAN where a rank has no value */
} ao_metric_summary;

/* Ranks disagree on a metric when their medians spread by more than this
 * share of the largest (and, for times, 2 % of the median step; for ratios,
 * by more than 0.1). */
#define AO_RANKS_DISAGREE 0.25

typedef struct ao_knob {
    char *key;   /* "fsdp.sharding_strategy", "env.NCCL_ALGO" */
    char *value; /* as text */
} ao_knob;

typedef struct ao_telemetry_summary {
    char *key;
    ao_stats_summary s;
} ao_telemetry_summary;

#define AO_BREAKDOWN_PARTS 5
extern const char *const ao_breakdown_names[AO_BREAKDOWN_PARTS];

typedef struct ao_summary {
    char *label;
    size_t nruns;
    char **run_ids; /* [nruns] */
    int nranks;     /* the most ranks of any run */
    int world_size;
    long long skip_steps;
    const char *skip_origin;
    size_t steps;               /* kept train records of the rank with the most */
    size_t records;             /* kept train records, all ranks */
    size_t skipped;             /* warm-up records dropped, all ranks */
    size_t truncated;           /* incomplete last lines skipped, all ranks */
    ao_metric_summary *metrics; /* [ao_metric_count()] */
    ao_stats_skew skew;         /* of per-rank median step_ms */
    /* From train and baseline medians, in kernel time when the kernel trace
     * is on (runs/decompose.h). dec.flag: why it cannot be taken as measured
     * (achieved outside 0..1, communication faster under contention than
     * alone), printed instead of those numbers; NULL when plausible. */
    ao_decomp dec;
    const char *slowest_by; /* "waited_for" or "own_time" (ao_run_slowest_rank) */
    /* The median step (AO_STEP_MS_DEFINITION) split into overlapped,
     * exposed comm, compute alone, idle, and the rest (copies alone): each
     * part's share of the pooled step time times the median step, so the
     * parts add up to the step by construction. All 0 without ops. */
    double breakdown_ms[AO_BREAKDOWN_PARTS];
    ao_telemetry_summary *telemetry;
    size_t ntelemetry;
    ao_knob *knobs; /* of the first run */
    size_t nknobs;
    /* How the first run ended, from its run.json: train steps run (kept
     * and warm-up, the rank with the most), those planned (-1 unknown),
     * completed (1, 0, or -1 when nothing says), and why not (or NULL). */
    size_t steps_run;
    long long planned_steps;
    int completed;
    char *end;
    /* Borrowed from the first run (lives as long as it): summary.json's
     * "analyze" block of an `aorta analyze` run, else NULL. */
    yajl_val analyze;
    /* Borrowed from the first run: its ranks when one has aorta train's
     * kernel trace (their ao_rank_data.kernels), else NULL. */
    const ao_rank_data *kernel_ranks;
    int nkernel_ranks;
    /* Borrowed from the first run: its ranks when one has contention
     * evidence (ao_rank_data.contention), else NULL. */
    const ao_rank_data *contention_ranks;
    int ncontention_ranks;
    /* Borrowed from the first run: its collectives.jsonl and who waited for
     * whom (NULL without). */
    const ao_coll_set *coll;
    const ao_coll_summary *coll_sum;
} ao_summary;

/* Sanity of a decomposition: NULL, or why its achieved overlap and comm
 * slowdown are impossible (achieved outside [-tol, 1 + tol], slowdown
 * below 1 - slowdown tol). */
/* Kernels summary.json names per rank as contention evidence. */
#define AO_CONTENTION_EVIDENCE_TOP 5

#define AO_DECOMP_TOL          0.05
#define AO_DECOMP_SLOWDOWN_TOL 0.5
const char *ao_decomposition_flag(const ao_decomposition *d);

/* Summarize the runs of one label. Returns 0, or AO_EXIT_USAGE after one
 * error line when no run has a kept train record. */
int ao_summary_build(const char *label, const ao_run_data *runs, size_t nruns, ao_summary *out);
void ao_summary_free(ao_summary *s);

/* The summary as one JSON object into g. */
yajl_gen_status ao_summary_gen(yajl_gen g, const ao_summary *s);

/* {"schema": 1, "summary": {...}} to path, atomically. 0 or AO_EXIT_FAIL. */
int ao_summary_write(const char *path, const ao_summary *s);

/* A compact table: steps, step ms, tokens/s, the §7 fields, busbw, skew,
 * decomposition (with its source and the baselines' events against
 * kernels), contention. */
void ao_summary_print(FILE *out, const ao_summary *s);

/* For `aorta train`, ao_summary_for_run: declared in runs/run_end.h. */

#endif
