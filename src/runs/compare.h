/* Reference vs candidate: for each headline metric, both medians, their
 * ratio and difference, a seeded bootstrap 95 % confidence interval of the
 * difference of medians, and a verdict; plus the configuration and
 * environment differences between the two labels' first runs.
 *
 * Samples are per step: the mean over ranks of the metric at that step, so
 * that the ranks of one step (which move together) do not count as
 * independent observations; for step_ms the max over ranks (the slowest
 * rank is what the user waits for: AO_STEP_MS_DEFINITION, used by the
 * summary too). Several runs of a label are concatenated.
 *
 * Verdict: "no significant difference" when the interval contains 0, or when
 * the difference is smaller than AO_COMPARE_MIN_REL (1 %) of the larger
 * median: a real but tiny change is not worth acting on, and run-to-run
 * drift of that size is common on shared machines. Otherwise better or worse
 * by the metric's direction (ao_metric_def.better), or "different" for a
 * metric with no direction. */
#ifndef AORTA_RUNS_COMPARE_H
#define AORTA_RUNS_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>

#include "core/stats.h"
#include "runs/rundata.h"

#define AO_COMPARE_MIN_REL   0.01
#define AO_COMPARE_LEVEL     0.95
#define AO_COMPARE_RESAMPLES 1000
#define AO_COMPARE_SEED      0x5eed2024ULL

typedef enum ao_verdict {
    AO_VERDICT_BETTER,
    AO_VERDICT_WORSE,
    AO_VERDICT_SAME,      /* no significant difference */
    AO_VERDICT_DIFFERENT, /* significant, the metric has no better direction */
    AO_VERDICT_NA,        /* a label has no value */
} ao_verdict;
const char *ao_verdict_name(ao_verdict v);

typedef struct ao_metric_cmp {
    size_t metric; /* ao_metric index */
    size_t nref, ncand;
    double ref_median, cand_median;
    double ratio; /* cand / ref; NAN when ref is 0 */
    double diff;  /* cand - ref */
    ao_stats_ci ci;
    ao_verdict verdict;
} ao_metric_cmp;

typedef struct ao_setting_diff {
    char *key;       /* "fsdp.sharding_strategy", "env.NCCL_ALGO", "world_size" */
    char *reference; /* NULL: not set */
    char *candidate;
} ao_setting_diff;

typedef struct ao_comparison {
    char *reference, *candidate; /* labels */
    ao_metric_cmp *metrics;
    size_t nmetrics;
    ao_setting_diff *diffs;
    size_t ndiffs;
} ao_comparison;

/* The verdict rule on its own (tested directly). */
ao_verdict ao_compare_verdict(ao_better better, double ref_median, double cand_median,
                              const ao_stats_ci *ci);

/* The one definition of a run's step time, printed beside it. */
#define AO_STEP_MS_DEFINITION "per-step max over ranks"

/* Per-step samples of metric m (mean over ranks; step_ms: max over ranks),
 * heap array, *n of them. */
double *ao_step_samples(const ao_run_data *runs, size_t nruns, size_t m, size_t *n);

/* A metric across configs (the chart per matrix column, DESIGN §17): the
 * reference and each candidate with its median, the seeded bootstrap 95 %
 * CI of that median (of its own per-step samples), its ratio to the
 * reference and its verdict, all medians and verdicts the comparisons'. */
typedef struct ao_config_value {
    const char *label;
    int reference;
    double median; /* NAN: the config has no value */
    ao_stats_ci ci;
    double ratio;
    ao_verdict verdict; /* AO_VERDICT_NA for the reference */
} ao_config_value;

/* Rows for metric m over ncmps comparisons against one reference: out[0]
 * the reference, out[1 + c] candidate c. runs[0]/nruns[0] are the
 * reference's runs, runs[1 + c]/nruns[1 + c] candidate c's (for the CIs).
 * Returns ncmps + 1. */
size_t ao_compare_across(const ao_comparison *cmps, size_t ncmps, size_t m,
                         const ao_run_data *const *runs, const size_t *nruns, ao_config_value *out);
/* The rows as CSV (config,role,median,ci_low,ci_high,ratio,verdict), the
 * data behind the chart. 0 or AO_EXIT_FAIL after printing why. */
int ao_config_values_write_csv(const char *path, const ao_config_value *v, size_t n);

void ao_compare(const char *ref_label, const ao_run_data *ref, size_t nref, const char *cand_label,
                const ao_run_data *cand, size_t ncand, ao_comparison *out);
void ao_comparison_free(ao_comparison *c);

yajl_gen_status ao_comparison_gen(yajl_gen g, const ao_comparison *c);

#endif
