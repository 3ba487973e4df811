/* Descriptive statistics over per-iteration and per-rank numbers.
 *
 * Every function skips NAN entries (a metric that is undefined for an
 * iteration, e.g. overlap_ratio with no communication, is NAN) and returns NAN
 * when no value is left. Infinities are values like any other.
 *
 * Percentiles use linear interpolation between closest ranks, numpy's default
 * (Hyndman & Fan method 7): with the m kept values sorted as x[0..m),
 * h = (m - 1) * p / 100 and the result is x[floor h] + (h - floor h) *
 * (x[floor h + 1] - x[floor h]). The median is the 50th percentile. */
#ifndef AORTA_CORE_STATS_H
#define AORTA_CORE_STATS_H

#include <stddef.h>
#include <stdint.h>

size_t ao_stats_count(const double *x, size_t n); /* non-NAN entries */
double ao_stats_mean(const double *x, size_t n);
double ao_stats_min(const double *x, size_t n);
double ao_stats_max(const double *x, size_t n);
double ao_stats_median(const double *x, size_t n);
/* p in [0, 100]; NAN for p outside it. */
double ao_stats_percentile(const double *x, size_t n, double p);

typedef struct ao_stats_summary {
    size_t n; /* non-NAN entries; all other fields NAN when 0 */
    double mean, min, max, p50, p90, p99;
} ao_stats_summary;

/* One sort for all fields. */
void ao_stats_summarize(const double *x, size_t n, ao_stats_summary *out);

/* Percentile bootstrap confidence interval for median(b) - median(a).
 * Draws `resamples` resamples of each sample (with replacement, after dropping
 * NANs) from a xoshiro256** stream seeded by `seed` through splitmix64, so the
 * same inputs and seed always give the same interval. `level` is the coverage,
 * e.g. 0.95: lo and hi are the (1-level)/2 and (1+level)/2 percentiles (method
 * 7 as above) of the resampled differences. */
typedef struct ao_stats_ci {
    double estimate; /* median(b) - median(a) on the full samples */
    double lo, hi;
} ao_stats_ci;

/* Returns 0, or -1 with all fields NAN when either sample has no non-NAN
 * value, resamples < 1, or level is not in (0, 1). */
int ao_stats_bootstrap_median_diff(const double *a, size_t na, const double *b, size_t nb,
                                   int resamples, double level, uint64_t seed, ao_stats_ci *out);

/* Rank skew from per-rank medians (NAN ranks skipped): slowest / fastest. */
typedef struct ao_stats_skew {
    double ratio;     /* NAN when the fastest median is <= 0 */
    int slowest_rank; /* index of the largest median */
    int fastest_rank; /* index of the smallest median */
} ao_stats_skew;

/* Returns 0, or -1 with ratio NAN and ranks -1 when no rank has a median. */
int ao_stats_rank_skew(const double *rank_medians, size_t nranks, ao_stats_skew *out);

#endif
