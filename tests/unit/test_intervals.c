/* Interval sets: hand-made edge cases for every operation, then a randomized
 * comparison against a discretized reference (unit cells in a 64-bit map). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/intervals.h"

#define MAXIV 64

/* Checks out[0..n) equals want[0..nw) exactly (endpoints are exact here). */
static void expect_set(const ao_ival *out, size_t n, const ao_ival *want, size_t nw)
{
    assert_int_equal(n, nw);
    for (size_t i = 0; i < n; i++) {
        assert_true(out[i].start == want[i].start);
        assert_true(out[i].end == want[i].end);
    }
}

static void assert_normalized(const ao_ival *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        assert_true(v[i].end > v[i].start);
        if (i > 0) assert_true(v[i].start > v[i - 1].end);
    }
}

static void test_normalize_empty_and_zero_length(void **state)
{
    (void)state;
    ao_ival v[4] = {{5, 5}, {3, 3}, {7, 2}, {NAN, 1}};
    assert_int_equal(ao_iv_normalize(v, 0), 0);
    assert_int_equal(ao_iv_normalize(v, 4), 0);
    assert_true(ao_iv_length(v, 0) == 0);
}

static void test_normalize_touching_nested_identical_unsorted(void **state)
{
    (void)state;
    ao_ival v[] = {{10, 12}, {0, 1}, {1, 2}, {3, 9}, {4, 5}, {3, 9}, {2, 2}, {12, 12}, {12, 13}};
    size_t n = ao_iv_normalize(v, sizeof v / sizeof v[0]);
    ao_ival want[] = {{0, 2}, {3, 9}, {10, 13}};
    expect_set(v, n, want, 3);
    assert_true(ao_iv_length(v, n) == 11);
}

static void test_normalize_negative_and_huge(void **state)
{
    (void)state;
    ao_ival v[] = {{1e15, 1e15 + 8}, {-5, -1}, {-3, 2}, {-1e15, -1e15 + 1}, {1e15 + 8, 1e15 + 16}};
    size_t n = ao_iv_normalize(v, 5);
    ao_ival want[] = {{-1e15, -1e15 + 1}, {-5, 2}, {1e15, 1e15 + 16}};
    expect_set(v, n, want, 3);
    assert_true(ao_iv_length(v, n) == 1 + 7 + 16);
}

static void test_normalize_large_unsorted_uses_full_sort(void **state)
{
    (void)state;
    /* More than the insertion-sort threshold, in reverse order, every other
     * one touching its neighbour. */
    ao_ival v[100];
    for (int i = 0; i < 100; i++) v[i] = (ao_ival){(99 - i) * 2.0, (99 - i) * 2.0 + 1 + (i % 2)};
    size_t n = ao_iv_normalize(v, 100);
    assert_normalized(v, n);
    /* i odd gives [2k, 2k+2) which touches the next: pairs k even/odd merge. */
    assert_true(ao_iv_length(v, n) == 50 * 2 + 50 * 1);
}

static void test_union_cases(void **state)
{
    (void)state;
    ao_ival out[MAXIV];
    ao_ival a[] = {{0, 2}, {5, 7}}, b[] = {{2, 3}, {4, 6}, {10, 11}};
    ao_ival want[] = {{0, 3}, {4, 7}, {10, 11}};
    expect_set(out, ao_iv_union(a, 2, b, 3, out), want, 3);
    /* with an empty side */
    expect_set(out, ao_iv_union(a, 2, b, 0, out), a, 2);
    expect_set(out, ao_iv_union(a, 0, b, 3, out), b, 3);
    assert_int_equal(ao_iv_union(a, 0, b, 0, out), 0);
    /* identical and nested */
    ao_ival c[] = {{-4, 9}};
    expect_set(out, ao_iv_union(a, 2, a, 2, out), a, 2);
    expect_set(out, ao_iv_union(a, 2, c, 1, out), c, 1);
}

static void test_intersect_cases(void **state)
{
    (void)state;
    ao_ival out[MAXIV];
    ao_ival a[] = {{0, 2}, {5, 7}}, b[] = {{2, 3}, {4, 6}, {6.5, 11}};
    /* touching [0,2) and [2,3) share nothing */
    ao_ival want[] = {{5, 6}, {6.5, 7}};
    expect_set(out, ao_iv_intersect(a, 2, b, 3, out), want, 2);
    assert_true(ao_iv_intersect_length(a, 2, b, 3) == 1.5);
    assert_int_equal(ao_iv_intersect(a, 2, b, 0, out), 0);
    assert_true(ao_iv_intersect_length(a, 0, b, 3) == 0);
    expect_set(out, ao_iv_intersect(a, 2, a, 2, out), a, 2);
    ao_ival c[] = {{-1e15, 1e15}};
    expect_set(out, ao_iv_intersect(c, 1, b, 3, out), b, 3);
    ao_ival neg[] = {{-9, -3}, {-2, -1}}, d[] = {{-4, -1.5}};
    ao_ival want_neg[] = {{-4, -3}, {-2, -1.5}};
    expect_set(out, ao_iv_intersect(neg, 2, d, 1, out), want_neg, 2);
}

static void test_subtract_cases(void **state)
{
    (void)state;
    ao_ival out[MAXIV];
    ao_ival a[] = {{0, 10}, {20, 30}};
    /* holes in the middle, one reaching across the gap into the next a */
    ao_ival b[] = {{2, 3}, {5, 6}, {8, 22}, {25, 26}};
    ao_ival want[] = {{0, 2}, {3, 5}, {6, 8}, {22, 25}, {26, 30}};
    expect_set(out, ao_iv_subtract(a, 2, b, 4, out), want, 5);
    /* nothing removed, everything removed, identical */
    expect_set(out, ao_iv_subtract(a, 2, b, 0, out), a, 2);
    assert_int_equal(ao_iv_subtract(a, 0, b, 4, out), 0);
    assert_int_equal(ao_iv_subtract(a, 2, a, 2, out), 0);
    ao_ival all[] = {{-1, 31}};
    assert_int_equal(ao_iv_subtract(a, 2, all, 1, out), 0);
    /* touching b removes nothing; b covering exact edges */
    ao_ival touch[] = {{-5, 0}, {10, 20}, {30, 40}};
    expect_set(out, ao_iv_subtract(a, 2, touch, 3, out), a, 2);
    ao_ival edges[] = {{0, 1}, {9, 21}, {29, 30}};
    ao_ival want_edges[] = {{1, 9}, {21, 29}};
    expect_set(out, ao_iv_subtract(a, 2, edges, 3, out), want_edges, 2);
}

static void test_clip_cases(void **state)
{
    (void)state;
    ao_ival out[MAXIV];
    ao_ival a[] = {{-5, 0}, {2, 4}, {6, 9}};
    ao_ival want[] = {{-1, 0}, {2, 4}, {6, 7}};
    expect_set(out, ao_iv_clip(a, 3, -1, 7, out), want, 3);
    /* empty and reversed windows, window touching an interval */
    assert_int_equal(ao_iv_clip(a, 3, 5, 5, out), 0);
    assert_int_equal(ao_iv_clip(a, 3, 7, 1, out), 0);
    assert_int_equal(ao_iv_clip(a, 3, 4, 6, out), 0);
    assert_int_equal(ao_iv_clip(a, 3, NAN, 6, out), 0);
    /* in place */
    ao_ival b[] = {{-5, 0}, {2, 4}, {6, 9}};
    ao_ival want_b[] = {{3, 4}, {6, 9}};
    expect_set(b, ao_iv_clip(b, 3, 3, 1e15, b), want_b, 2);
}

/* ---- randomized comparison with a discretized reference ------------------ */

static uint64_t rng_state;

static uint64_t splitmix64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static unsigned rnd(unsigned n)
{
    return (unsigned)(splitmix64() % n);
}

/* Random raw intervals with integer endpoints in [0,64): zero-length,
 * reversed, touching and duplicate ones all occur. Returns the cell map. */
static size_t random_raw(ao_ival *v, uint64_t *cells)
{
    size_t n = rnd(9);
    *cells = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned s = rnd(64), len = rnd(4) == 0 ? 0 : rnd(20);
        unsigned e = s + len > 64 ? 64 : s + len;
        if (rnd(16) == 0) { /* reversed: empty */
            v[i] = (ao_ival){e, s};
            continue;
        }
        if (i > 0 && rnd(5) == 0) { /* duplicate or touching the previous one */
            v[i] = rnd(2) ? v[i - 1] : (ao_ival){v[i - 1].end, v[i - 1].end + len};
            if (v[i].end > 64) v[i].end = 64;
        } else {
            v[i] = (ao_ival){s, e};
        }
        for (unsigned c = (unsigned)v[i].start; c < (unsigned)v[i].end; c++) *cells |= 1ULL << c;
    }
    return n;
}

static uint64_t cells_of(const ao_ival *v, size_t n)
{
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(v[i].start == floor(v[i].start) && v[i].end == floor(v[i].end));
        assert_true(v[i].start >= 0 && v[i].end <= 64);
        for (unsigned c = (unsigned)v[i].start; c < (unsigned)v[i].end; c++) m |= 1ULL << c;
    }
    return m;
}

static void check_result(const ao_ival *out, size_t n, uint64_t want)
{
    assert_normalized(out, n);
    assert_true(cells_of(out, n) == want);
    assert_true(ao_iv_length(out, n) == (double)__builtin_popcountll(want));
}

static void test_random_against_cells(void **state)
{
    (void)state;
    rng_state = 20261122;
    ao_ival a[16], b[16], out[32];
    for (int iter = 0; iter < 100000; iter++) {
        uint64_t ca, cb;
        size_t na = ao_iv_normalize(a, random_raw(a, &ca));
        size_t nb = ao_iv_normalize(b, random_raw(b, &cb));
        check_result(a, na, ca);
        check_result(b, nb, cb);

        check_result(out, ao_iv_union(a, na, b, nb, out), ca | cb);
        check_result(out, ao_iv_intersect(a, na, b, nb, out), ca & cb);
        assert_true(ao_iv_intersect_length(a, na, b, nb) == (double)__builtin_popcountll(ca & cb));
        check_result(out, ao_iv_subtract(a, na, b, nb, out), ca & ~cb);
        check_result(out, ao_iv_subtract(b, nb, a, na, out), cb & ~ca);

        unsigned lo = rnd(65), hi = rnd(65);
        uint64_t window = 0;
        for (unsigned c = lo; c < hi; c++) window |= 1ULL << c;
        check_result(out, ao_iv_clip(a, na, lo, hi, out), ca & window);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize_empty_and_zero_length),
        cmocka_unit_test(test_normalize_touching_nested_identical_unsorted),
        cmocka_unit_test(test_normalize_negative_and_huge),
        cmocka_unit_test(test_normalize_large_unsorted_uses_full_sort),
        cmocka_unit_test(test_union_cases),
        cmocka_unit_test(test_intersect_cases),
        cmocka_unit_test(test_subtract_cases),
        cmocka_unit_test(test_clip_cases),
        cmocka_unit_test(test_random_against_cells),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
