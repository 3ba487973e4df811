/* The SIMD generator (rng_simd.c) against the scalar reference of rng.h, bit
 * for bit, for every variant this CPU runs; and the exhaustive error bound
 * that makes the libm-free normals exact (normal_fast.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "data/normal_fast.h"
#include "data/rng_simd.h"

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A random stream and first block; some firsts sit just below 2^32 so the
 * group crosses into counter word 1; all below 2^62 so that 2 first (a
 * normal's index) does not wrap. */
static void random_case(uint64_t *x, int i, ao_rng_stream *s, uint64_t *first)
{
    uint64_t a = splitmix(x), b = splitmix(x);
    ao_rng_stream r = {{(uint32_t)a, (uint32_t)(a >> 32)}, {(uint32_t)b, (uint32_t)(b >> 32)}};
    *s = r;
    uint64_t f = splitmix(x);
    *first = (i % 3 == 0) ? 0xFFFFFFF0ull + (f & 7u) : (i % 3 == 1) ? f >> 2 : (f & 0xFFFFu);
}

static void test_blocks_match_reference(void **state)
{
    (void)state;
    uint64_t x = 1;
    enum { N = 83 }; /* groups plus a tail */
    ao_u32x4 got[N];
    for (int v = 0; v < AO_RNG_SIMD_COUNT; v++) {
        if (!ao_rng_simd_supported((enum ao_rng_simd)v)) {
            assert_int_equal(ao_rng_blocks_simd((enum ao_rng_simd)v, got, N, (ao_rng_stream){0}, 0),
                             -1);
            continue;
        }
        for (int c = 0; c < 200; c++) {
            ao_rng_stream s;
            uint64_t first;
            random_case(&x, c, &s, &first);
            assert_int_equal(ao_rng_blocks_simd((enum ao_rng_simd)v, got, N, s, first), 0);
            for (size_t i = 0; i < N; i++) {
                ao_u32x4 want = ao_rng_block(s, first + i);
                assert_memory_equal(got[i].v, want.v, sizeof want.v);
            }
        }
    }
    assert_true(ao_rng_simd_supported(AO_RNG_SIMD_GENERIC));
    assert_true(ao_rng_simd_supported(ao_rng_simd_best()));
}

static void test_normals_match_reference(void **state)
{
    (void)state;
    uint64_t x = 2;
    enum { PAIRS = 517 };
    float got[2 * PAIRS];
    for (int v = 0; v < AO_RNG_SIMD_COUNT; v++) {
        if (!ao_rng_simd_supported((enum ao_rng_simd)v)) continue;
        for (int c = 0; c < 300; c++) {
            ao_rng_stream s;
            uint64_t first;
            random_case(&x, c, &s, &first);
            assert_int_equal(ao_rng_normal_pairs_simd((enum ao_rng_simd)v, got, PAIRS, s, first),
                             0);
            for (size_t i = 0; i < 2 * PAIRS; i++) {
                float want = ao_rng_normal(s, 2 * first + i);
                assert_memory_equal(&got[i], &want, sizeof want);
            }
        }
    }
    /* the bulk fill over odd starts and lengths */
    ao_rng_stream s = ao_rng_root(7, AO_RNG_DATA_DENSE);
    for (uint64_t first = 0; first < 3; first++)
        for (size_t n = 0; n < 70; n += 23) {
            ao_rng_normals(got, n, s, first);
            for (size_t i = 0; i < n; i++) {
                float want = ao_rng_normal(s, first + i);
                assert_memory_equal(&got[i], &want, sizeof want);
            }
        }
}

/* Normals at scattered elements (ids picking rows of a table), including
 * both parities, repeats and elements near 2^32. */
static void test_normals_at_match_reference(void **state)
{
    (void)state;
    uint64_t x = 3;
    enum { N = 83 };
    uint32_t element[N];
    float got[N];
    for (int v = 0; v < AO_RNG_SIMD_COUNT; v++) {
        for (int c = 0; c < 300; c++) {
            ao_rng_stream s;
            uint64_t first;
            random_case(&x, c, &s, &first);
            for (size_t i = 0; i < N; i++) {
                uint32_t r = (uint32_t)splitmix(&x);
                element[i] = c % 3 == 0 ? r : c % 3 == 1 ? r % 60000u : 0xFFFFFFFFu - (r & 15u);
            }
            element[N / 2] = element[0]; /* a repeat */
            int rc = ao_rng_normals_at_simd((enum ao_rng_simd)v, got, element, N, s);
            if (!ao_rng_simd_supported((enum ao_rng_simd)v)) {
                assert_int_equal(rc, -1);
                break;
            }
            assert_int_equal(rc, 0);
            for (size_t i = 0; i < N; i++) {
                float want = ao_rng_normal(s, element[i]);
                assert_memory_equal(&got[i], &want, sizeof want);
            }
        }
    }
}

/* Inputs that take the fallback are flagged: u1 = 1 (log 0, a signed
 * zero) and u2 where cos is near a zero take it; an ordinary pair does not. */
static void test_fallback_cases(void **state)
{
    (void)state;
    uint64_t fb;
    (void)ao_bm_fast(0xFFFFFFFFu, 0, &fb); /* u1 = 1 */
    assert_true(fb);
    (void)ao_bm_fast(0, 1u << 30, &fb); /* u2 = 1/4 */
    assert_true(fb);
    (void)ao_bm_fast(0x12345678u, 0, &fb); /* cos 1, log far from 0: the fast path */
    assert_false(fb);
}

/* The proof behind AO_BM_MARGIN_ULPS: over every possible u1 and u2 (2^24
 * each), the fast factors are within AO_BM_FACTOR_REL_ERR of libm's wherever
 * the fast path is taken. */
static void test_factor_error_bound_exhaustive(void **state)
{
    (void)state;
    double worst_r = 0.0, worst_c = 0.0;
    for (uint32_t k = 0; k < (1u << 24); k++) {
        uint32_t w = k << 8 | (k & 0xFFu);
        double u1 = ((double)(w >> 8) + 1.0) * (1.0 / 16777216.0);
        double ref_r = sqrt(-2.0 * log(u1));
        double l = ao_bm_log(w);
        if (l != 0.0) {
            double e = fabs(sqrt(-2.0 * l) - ref_r) / ref_r;
            if (e > worst_r) worst_r = e;
        }
        double u2 = (double)(w >> 8) * (1.0 / 16777216.0);
        double ref_c = cos(6.283185307179586476925 * u2);
        double c = ao_bm_cos(w);
        if (fabs(c) >= AO_BM_COS_MIN) {
            double e = fabs(c - ref_c) / fabs(ref_c);
            if (e > worst_c) worst_c = e;
        }
    }
    print_message("worst relative error: radius %.3g, cos %.3g (bound %.3g)\n", worst_r, worst_c,
                  AO_BM_FACTOR_REL_ERR);
    assert_true(worst_r <= AO_BM_FACTOR_REL_ERR);
    assert_true(worst_c <= AO_BM_FACTOR_REL_ERR);
    /* (1 + e)^2 (1 + 2^-53)^2 - 1 in double ulps of the product stays inside the margin */
    double rel = 2.0 * AO_BM_FACTOR_REL_ERR + AO_BM_FACTOR_REL_ERR * AO_BM_FACTOR_REL_ERR + 0x1p-51;
    assert_true(rel * 0x1p53 < (double)AO_BM_MARGIN_ULPS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_match_reference),
        cmocka_unit_test(test_normals_match_reference),
        cmocka_unit_test(test_normals_at_match_reference),
        cmocka_unit_test(test_fallback_cases),
        cmocka_unit_test(test_factor_error_bound_exhaustive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
