#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/stats.h"

/* Copies the non-NAN entries of x into out (room for n); returns how many. */
static size_t copy_kept(const double *x, size_t n, double *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i])) out[m++] = x[i];
    return m;
}

static double *kept_copy(const double *x, size_t n, size_t *m)
{
    double *v = ao_malloc((n ? n : 1) * sizeof *v);
    *m = copy_kept(x, n, v);
    return v;
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Method 7 between neighbouring order statistics lo <= hi. */
static double interpolate(double lo, double hi, double frac)
{
    return frac == 0 ? lo : lo + frac * (hi - lo);
}

/* The rank h = (m - 1) p / 100 split into its floor and fraction. */
static size_t percentile_rank(size_t m, double p, double *frac)
{
    double h = (double)(m - 1) * (p / 100.0);
    double fl = floor(h);
    size_t k = (size_t)fl;
    if (k >= m - 1) {
        *frac = 0;
        return m - 1;
    }
    *frac = h - fl;
    return k;
}

static double percentile_of_sorted(const double *s, size_t m, double p)
{
    double frac;
    size_t k = percentile_rank(m, p, &frac);
    return interpolate(s[k], frac > 0 ? s[k + 1] : s[k], frac);
}

static void swap(double *v, size_t i, size_t j)
{
    double t = v[i];
    v[i] = v[j];
    v[j] = t;
}

static double median_of_3(double a, double b, double c)
{
    if (a > b) {
        double t = a;
        a = b;
        b = t;
    }
    return c < a ? a : (c > b ? b : c);
}

/* Rearranges v[0..n) so that v[k] is the k-th smallest, everything before it
 * is <= v[k] and everything after it >= v[k]; returns v[k]. Three-way
 * partitioning keeps samples full of repeated values linear. */
static double select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        double pivot = median_of_3(v[lo], v[lo + (hi - lo) / 2], v[hi - 1]);
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (v[i] < pivot)
                swap(v, lt++, i++);
            else if (v[i] > pivot)
                swap(v, i, --gt);
            else
                i++;
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return pivot;
    }
    return v[k];
}

/* Percentile of v[0..m) (m > 0, no NANs), reordering v. */
static double percentile_by_selection(double *v, size_t m, double p)
{
    double frac;
    size_t k = percentile_rank(m, p, &frac);
    double lo = select_kth(v, m, k);
    if (frac == 0) return lo;
    double next = v[k + 1];
    for (size_t i = k + 2; i < m; i++)
        if (v[i] < next) next = v[i];
    return interpolate(lo, next, frac);
}

size_t ao_stats_count(const double *x, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += !isnan(x[i]);
    return m;
}

double ao_stats_mean(const double *x, size_t n)
{
    double sum = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i])) continue;
        sum += x[i];
        m++;
    }
    return m ? sum / (double)m : NAN;
}

double ao_stats_min(const double *x, size_t n)
{
    double best = NAN;
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i]) && (isnan(best) || x[i] < best)) best = x[i];
    return best;
}

double ao_stats_max(const double *x, size_t n)
{
    double best = NAN;
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i]) && (isnan(best) || x[i] > best)) best = x[i];
    return best;
}

double ao_stats_percentile(const double *x, size_t n, double p)
{
    if (!(p >= 0 && p <= 100)) return NAN;
    size_t m;
    double *v = kept_copy(x, n, &m);
    double r = m ? percentile_by_selection(v, m, p) : NAN;
    free(v);
    return r;
}

double ao_stats_median(const double *x, size_t n)
{
    return ao_stats_percentile(x, n, 50);
}

void ao_stats_summarize(const double *x, size_t n, ao_stats_summary *out)
{
    size_t m;
    double *v = kept_copy(x, n, &m);
    out->n = m;
    if (m == 0) {
        out->mean = out->min = out->max = out->p50 = out->p90 = out->p99 = NAN;
        free(v);
        return;
    }
    qsort(v, m, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < m; i++) sum += v[i];
    out->mean = sum / (double)m;
    out->min = v[0];
    out->max = v[m - 1];
    out->p50 = percentile_of_sorted(v, m, 50);
    out->p90 = percentile_of_sorted(v, m, 90);
    out->p99 = percentile_of_sorted(v, m, 99);
    free(v);
}

/* ---- bootstrap ------------------------------------------------------------ */

/* xoshiro256** seeded through splitmix64 (Blackman & Vigna): small, fast, and
 * the state lives on the caller's stack, so runs are reproducible. */
typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, range), range in [1, 2^32], unbiased (Lemire's
 * multiply-and-reject). */
static uint32_t rng_below(rng *r, uint64_t range)
{
    uint64_t prod = (rng_next(r) >> 32) * range;
    if ((uint32_t)prod < range) {
        uint32_t threshold = (uint32_t)((0x100000000ULL - range) % range);
        while ((uint32_t)prod < threshold) prod = (rng_next(r) >> 32) * range;
    }
    return (uint32_t)(prod >> 32);
}

/* Median of one resample of the sorted sample s[0..m). A resample is a
 * multiset of indices, so counting how often each index is drawn and walking
 * the counts to the middle rank gives its median without moving or sorting
 * any values. counts has room for m and is cleared here. */
static double resampled_median(rng *r, const double *s, uint32_t *counts, size_t m)
{
    memset(counts, 0, m * sizeof *counts);
    for (size_t i = 0; i < m; i++) counts[rng_below(r, m)]++;
    double frac;
    size_t k = percentile_rank(m, 50, &frac);
    size_t seen = 0, j = 0;
    while (seen + counts[j] <= k) seen += counts[j++];
    double lo = s[j];
    if (frac == 0) return lo;
    /* rank k + 1: the same value again unless rank k was its last copy */
    if (seen + counts[j] == k + 1) {
        j++;
        while (counts[j] == 0) j++;
    }
    return interpolate(lo, s[j], frac);
}

int ao_stats_bootstrap_median_diff(const double *a, size_t na, const double *b, size_t nb,
                                   int resamples, double level, uint64_t seed, ao_stats_ci *out)
{
    out->estimate = out->lo = out->hi = NAN;
    if (resamples < 1 || !(level > 0 && level < 1)) return -1;
    size_t ma, mb;
    double *sa = kept_copy(a, na, &ma), *sb = kept_copy(b, nb, &mb);
    if (ma == 0 || mb == 0 || ma > UINT32_MAX || mb > UINT32_MAX) {
        free(sa);
        free(sb);
        return -1;
    }
    qsort(sa, ma, sizeof *sa, cmp_double);
    qsort(sb, mb, sizeof *sb, cmp_double);
    out->estimate = percentile_of_sorted(sb, mb, 50) - percentile_of_sorted(sa, ma, 50);

    uint32_t *counts = ao_malloc((ma > mb ? ma : mb) * sizeof *counts);
    double *diffs = ao_malloc((size_t)resamples * sizeof *diffs);
    rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < resamples; i++) {
        double med_a = resampled_median(&r, sa, counts, ma);
        double med_b = resampled_median(&r, sb, counts, mb);
        diffs[i] = med_b - med_a;
    }
    qsort(diffs, (size_t)resamples, sizeof *diffs, cmp_double);
    out->lo = percentile_of_sorted(diffs, (size_t)resamples, 100 * (1 - level) / 2);
    out->hi = percentile_of_sorted(diffs, (size_t)resamples, 100 * (1 + level) / 2);
    free(diffs);
    free(counts);
    free(sa);
    free(sb);
    return 0;
}

int ao_stats_rank_skew(const double *rank_medians, size_t nranks, ao_stats_skew *out)
{
    out->ratio = NAN;
    out->slowest_rank = out->fastest_rank = -1;
    for (size_t i = 0; i < nranks; i++) {
        if (isnan(rank_medians[i])) continue;
        if (out->slowest_rank < 0 || rank_medians[i] > rank_medians[out->slowest_rank])
            out->slowest_rank = (int)i;
        if (out->fastest_rank < 0 || rank_medians[i] < rank_medians[out->fastest_rank])
            out->fastest_rank = (int)i;
    }
    if (out->slowest_rank < 0) return -1;
    double fastest = rank_medians[out->fastest_rank];
    if (fastest > 0) out->ratio = rank_medians[out->slowest_rank] / fastest;
    return 0;
}
