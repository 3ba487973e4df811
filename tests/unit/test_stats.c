/* Descriptive statistics (numpy's default percentile), the seeded bootstrap
 * CI for a difference of medians, and rank skew. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "assert_close.h"
#include "core/stats.h"

#define N(a)          (sizeof(a) / sizeof((a)[0]))
#define NEAR(x, want) assert_close((x), (want), 1e-12)

static void test_percentiles_match_numpy(void **state)
{
    (void)state;
    /* numpy.percentile([15, 20, 35, 40, 50], p) for p = 0, 25, 40, 50, 75,
     * 90, 99, 100 */
    const double x[] = {50, 15, 40, 20, 35};
    const double p[] = {0, 25, 40, 50, 75, 90, 99, 100};
    const double want[] = {15, 20, 29, 35, 40, 46, 49.6, 50};
    for (size_t i = 0; i < N(p); i++) NEAR(ao_stats_percentile(x, N(x), p[i]), want[i]);
    NEAR(ao_stats_median(x, N(x)), 35);

    /* numpy.percentile([1, 2, 3, 4], [10, 50, 90, 99]) = 1.3, 2.5, 3.7, 3.97 */
    const double y[] = {4, 3, 2, 1};
    NEAR(ao_stats_percentile(y, 4, 10), 1.3);
    NEAR(ao_stats_median(y, 4), 2.5);
    NEAR(ao_stats_percentile(y, 4, 90), 3.7);
    NEAR(ao_stats_percentile(y, 4, 99), 3.97);

    const double one[] = {7.5};
    NEAR(ao_stats_percentile(one, 1, 0), 7.5);
    NEAR(ao_stats_percentile(one, 1, 37), 7.5);
    NEAR(ao_stats_percentile(one, 1, 100), 7.5);
}

static void test_nan_skipping_and_summary(void **state)
{
    (void)state;
    /* kept: [3, 1, 4, 1, 5, 9, 2, 6]; numpy: mean 3.875, median 3.5,
     * percentile 90 -> 6.9, 99 -> 8.79 */
    const double x[] = {3, NAN, 1, 4, 1, 5, NAN, 9, 2, 6};
    assert_int_equal(ao_stats_count(x, N(x)), 8);
    NEAR(ao_stats_mean(x, N(x)), 3.875);
    NEAR(ao_stats_min(x, N(x)), 1);
    NEAR(ao_stats_max(x, N(x)), 9);
    NEAR(ao_stats_median(x, N(x)), 3.5);
    NEAR(ao_stats_percentile(x, N(x), 90), 6.9);
    ao_stats_summary s;
    ao_stats_summarize(x, N(x), &s);
    assert_int_equal(s.n, 8);
    NEAR(s.mean, 3.875);
    NEAR(s.min, 1);
    NEAR(s.max, 9);
    NEAR(s.p50, 3.5);
    NEAR(s.p90, 6.9);
    NEAR(s.p99, 8.79);
    /* a leading NAN must not become min or max */
    const double lead[] = {NAN, 2, -1};
    NEAR(ao_stats_min(lead, 3), -1);
    NEAR(ao_stats_max(lead, 3), 2);
}

static void test_empty_and_invalid(void **state)
{
    (void)state;
    const double all_nan[] = {NAN, NAN};
    const double *inputs[] = {NULL, all_nan};
    const size_t sizes[] = {0, 2};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ao_stats_count(inputs[i], sizes[i]), 0);
        assert_true(isnan(ao_stats_mean(inputs[i], sizes[i])));
        assert_true(isnan(ao_stats_min(inputs[i], sizes[i])));
        assert_true(isnan(ao_stats_max(inputs[i], sizes[i])));
        assert_true(isnan(ao_stats_median(inputs[i], sizes[i])));
        ao_stats_summary s;
        ao_stats_summarize(inputs[i], sizes[i], &s);
        assert_int_equal(s.n, 0);
        assert_true(isnan(s.mean) && isnan(s.min) && isnan(s.max));
        assert_true(isnan(s.p50) && isnan(s.p90) && isnan(s.p99));
    }
    const double x[] = {1, 2};
    assert_true(isnan(ao_stats_percentile(x, 2, -1)));
    assert_true(isnan(ao_stats_percentile(x, 2, 100.5)));
    assert_true(isnan(ao_stats_percentile(x, 2, NAN)));
}

/* ---- test data ------------------------------------------------------------ */

static uint64_t rng_state;

static double uniform(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

/* Roughly normal (Irwin-Hall, 12 uniforms): mean mu, sd 1. */
static double normalish(double mu)
{
    double s = 0;
    for (int i = 0; i < 12; i++) s += uniform();
    return mu + s - 6;
}

static int cmp(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Method 7 on a sorted copy: the reference the selection path must match. */
static double reference_percentile(const double *x, size_t n, double p)
{
    double *s = malloc(n * sizeof *s);
    for (size_t i = 0; i < n; i++) s[i] = x[i];
    qsort(s, n, sizeof *s, cmp);
    double h = (double)(n - 1) * (p / 100.0);
    size_t k = (size_t)floor(h);
    double r = k + 1 < n ? s[k] + (h - floor(h)) * (s[k + 1] - s[k]) : s[n - 1];
    free(s);
    return r;
}

static void test_selection_matches_sorting(void **state)
{
    (void)state;
    rng_state = 99;
    double x[64];
    const double p[] = {0, 1, 10, 33.3, 50, 66.7, 90, 99, 100};
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = 1 + (size_t)(uniform() * 64);
        /* few distinct values: exercises equal-to-pivot runs */
        int distinct = 1 + (int)(uniform() * 8);
        for (size_t i = 0; i < n; i++) x[i] = floor(uniform() * distinct) - 2;
        for (size_t j = 0; j < N(p); j++)
            NEAR(ao_stats_percentile(x, n, p[j]), reference_percentile(x, n, p[j]));
    }
}

/* ---- bootstrap ------------------------------------------------------------ */

static void test_bootstrap_large_shift_excludes_zero(void **state)
{
    (void)state;
    rng_state = 1;
    double a[200], b[200];
    for (int i = 0; i < 200; i++) a[i] = normalish(10);
    for (int i = 0; i < 200; i++) b[i] = normalish(15);
    ao_stats_ci ci;
    assert_int_equal(ao_stats_bootstrap_median_diff(a, 200, b, 200, 2000, 0.95, 42, &ci), 0);
    assert_true(ci.lo > 0 && ci.hi > ci.lo);
    assert_true(ci.lo < ci.estimate && ci.estimate < ci.hi);
    assert_true(ci.lo > 4 && ci.hi < 6);
    NEAR(ci.estimate, ao_stats_median(b, 200) - ao_stats_median(a, 200));
    /* swapped: the same interval mirrored around 0 would exclude 0 too */
    assert_int_equal(ao_stats_bootstrap_median_diff(b, 200, a, 200, 2000, 0.95, 42, &ci), 0);
    assert_true(ci.hi < 0);
}

static void test_bootstrap_same_distribution_contains_zero(void **state)
{
    (void)state;
    rng_state = 2;
    double a[150], b[150];
    int contains = 0;
    for (int rep = 0; rep < 20; rep++) {
        for (int i = 0; i < 150; i++) a[i] = normalish(3);
        for (int i = 0; i < 150; i++) b[i] = normalish(3);
        ao_stats_ci ci;
        assert_int_equal(
            ao_stats_bootstrap_median_diff(a, 150, b, 150, 2000, 0.95, (uint64_t)rep, &ci), 0);
        assert_true(ci.lo <= ci.estimate && ci.estimate <= ci.hi);
        assert_true(ci.hi - ci.lo < 1.5); /* sd of a median diff here is ~0.18 */
        contains += ci.lo <= 0 && 0 <= ci.hi;
    }
    /* nominal 95%: 19 of 20 expected; far fewer would mean a biased interval */
    assert_true(contains >= 17);
}

static void test_bootstrap_is_deterministic(void **state)
{
    (void)state;
    rng_state = 3;
    double a[80], b[90];
    for (int i = 0; i < 80; i++) a[i] = normalish(0);
    for (int i = 0; i < 90; i++) b[i] = normalish(0.2);
    ao_stats_ci c1, c2, c3;
    ao_stats_bootstrap_median_diff(a, 80, b, 90, 1000, 0.95, 7, &c1);
    ao_stats_bootstrap_median_diff(a, 80, b, 90, 1000, 0.95, 7, &c2);
    ao_stats_bootstrap_median_diff(a, 80, b, 90, 1000, 0.95, 8, &c3);
    assert_true(c1.lo == c2.lo && c1.hi == c2.hi && c1.estimate == c2.estimate);
    assert_true(c1.lo != c3.lo || c1.hi != c3.hi);
    assert_true(c1.estimate == c3.estimate);
}

static void test_bootstrap_exact_small_samples(void **state)
{
    (void)state;
    ao_stats_ci ci;
    /* one value each: every resample gives the same difference */
    const double one_a[] = {1}, one_b[] = {5};
    assert_int_equal(ao_stats_bootstrap_median_diff(one_a, 1, one_b, 1, 500, 0.95, 1, &ci), 0);
    assert_true(ci.estimate == 4 && ci.lo == 4 && ci.hi == 4);

    /* a = {1,2,3}: a resample's median is 1 or 3 with probability 7/27 each,
     * 2 with 13/27; so the 2.5% and 97.5% points of 0 - median are -3 and -1. */
    const double three[] = {3, 1, 2}, zero[] = {0};
    assert_int_equal(ao_stats_bootstrap_median_diff(three, 3, zero, 1, 2000, 0.95, 5, &ci), 0);
    assert_true(ci.estimate == -2 && ci.lo == -3 && ci.hi == -1);

    /* a = {0, 10}: medians 0, 5 (interpolated), 10 with 1/4, 1/2, 1/4 */
    const double two[] = {10, NAN, 0};
    assert_int_equal(ao_stats_bootstrap_median_diff(two, 3, zero, 1, 2000, 0.95, 5, &ci), 0);
    assert_true(ci.estimate == -5 && ci.lo == -10 && ci.hi == 0);
    /* a 40% interval sits inside the middle mass */
    assert_int_equal(ao_stats_bootstrap_median_diff(two, 3, zero, 1, 2000, 0.4, 5, &ci), 0);
    assert_true(ci.lo == -5 && ci.hi == -5);
}

static void test_bootstrap_rejects_bad_input(void **state)
{
    (void)state;
    const double x[] = {1, 2, 3}, nan2[] = {NAN, NAN};
    ao_stats_ci ci;
    assert_int_equal(ao_stats_bootstrap_median_diff(NULL, 0, x, 3, 100, 0.95, 1, &ci), -1);
    assert_true(isnan(ci.estimate) && isnan(ci.lo) && isnan(ci.hi));
    assert_int_equal(ao_stats_bootstrap_median_diff(x, 3, nan2, 2, 100, 0.95, 1, &ci), -1);
    assert_int_equal(ao_stats_bootstrap_median_diff(x, 3, x, 3, 0, 0.95, 1, &ci), -1);
    assert_int_equal(ao_stats_bootstrap_median_diff(x, 3, x, 3, 100, 1.0, 1, &ci), -1);
    assert_int_equal(ao_stats_bootstrap_median_diff(x, 3, x, 3, 100, 0, 1, &ci), -1);
    assert_int_equal(ao_stats_bootstrap_median_diff(x, 3, x, 3, 100, NAN, 1, &ci), -1);
    assert_true(isnan(ci.lo));
}

static void test_rank_skew(void **state)
{
    (void)state;
    ao_stats_skew sk;
    const double med[] = {10, 12, NAN, 8};
    assert_int_equal(ao_stats_rank_skew(med, 4, &sk), 0);
    NEAR(sk.ratio, 1.5);
    assert_int_equal(sk.slowest_rank, 1);
    assert_int_equal(sk.fastest_rank, 3);

    const double single[] = {NAN, 4};
    assert_int_equal(ao_stats_rank_skew(single, 2, &sk), 0);
    NEAR(sk.ratio, 1);
    assert_int_equal(sk.slowest_rank, 1);
    assert_int_equal(sk.fastest_rank, 1);

    const double zero[] = {0, 3};
    assert_int_equal(ao_stats_rank_skew(zero, 2, &sk), 0);
    assert_true(isnan(sk.ratio));
    assert_int_equal(sk.slowest_rank, 1);

    const double none[] = {NAN};
    assert_int_equal(ao_stats_rank_skew(none, 1, &sk), -1);
    assert_true(isnan(sk.ratio));
    assert_int_equal(sk.slowest_rank, -1);
    assert_int_equal(ao_stats_rank_skew(NULL, 0, &sk), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentiles_match_numpy),
        cmocka_unit_test(test_nan_skipping_and_summary),
        cmocka_unit_test(test_empty_and_invalid),
        cmocka_unit_test(test_selection_matches_sorting),
        cmocka_unit_test(test_bootstrap_large_shift_excludes_zero),
        cmocka_unit_test(test_bootstrap_same_distribution_contains_zero),
        cmocka_unit_test(test_bootstrap_is_deterministic),
        cmocka_unit_test(test_bootstrap_exact_small_samples),
        cmocka_unit_test(test_bootstrap_rejects_bad_input),
        cmocka_unit_test(test_rank_skew),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
