/* Philox4x32-10 known answers, statistical sanity of the derived uniforms and
 * normals, stream derivation, dropout factors and the bulk fills. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <cmocka.h>

#include "data/rng.h"

/* Known-answer vectors of Random123 (kat_vectors, philox4x32_10). */
static void test_philox_known_answers(void **state)
{
    (void)state;
    static const struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        ao_u32x4 r = ao_philox4x32(kat[i].ctr, kat[i].key);
        for (int l = 0; l < 4; l++) assert_int_equal(r.v[l], kat[i].out[l]);
    }
}

/* Each output bit of consecutive counters is set about half the time, and a
 * one-bit change of counter or key flips about half the output bits. */
static void test_philox_bit_balance_and_avalanche(void **state)
{
    (void)state;
    enum { N = 1 << 14 };
    long ones[128] = {0};
    long flips = 0;
    const uint32_t key[2] = {0x12345678, 0x9abcdef0};
    for (uint32_t i = 0; i < N; i++) {
        uint32_t ctr[4] = {i, 0, 0, 0};
        ao_u32x4 r = ao_philox4x32(ctr, key);
        for (int b = 0; b < 128; b++) ones[b] += (r.v[b / 32] >> (b % 32)) & 1u;
        ctr[2] ^= 1u << (i % 32);
        ao_u32x4 r2 = ao_philox4x32(ctr, key);
        uint32_t key2[2] = {key[0] ^ (1u << (i % 32)), key[1]};
        ao_u32x4 r3 = ao_philox4x32((uint32_t[4]){i, 0, 0, 0}, key2);
        for (int l = 0; l < 4; l++)
            flips += __builtin_popcount(r.v[l] ^ r2.v[l]) + __builtin_popcount(r.v[l] ^ r3.v[l]);
    }
    /* binomial(N, 1/2): sd = 64; 6 sd */
    for (int b = 0; b < 128; b++) assert_true(labs(ones[b] - N / 2) < 6 * 64);
    const double mean_flips = (double)flips / (2.0 * N);
    assert_true(fabs(mean_flips - 64.0) < 0.5);
}

static void test_uniform_conversion_edges(void **state)
{
    (void)state;
    assert_true(ao_rng_u32_to_uniform(0) == 0.0f);
    assert_true(ao_rng_u32_to_uniform(0xffffffffu) == 1.0f - 1.0f / 16777216.0f);
    assert_true(ao_rng_u32_to_uniform(0x80000000u) == 0.5f);
    assert_true(ao_rng_u32_to_uniform(0xff) == 0.0f); /* the low 8 bits are dropped */
    assert_int_equal(ao_rng_u32_below(0, 7), 0);
    assert_int_equal(ao_rng_u32_below(0xffffffffu, 7), 6);
    /* extreme words still give finite normals */
    assert_true(isfinite(ao_rng_box_muller(0xffffffffu, 0)));
    assert_true(isfinite(ao_rng_box_muller(0, 0xffffffffu)));
}

static void test_uniform_distribution(void **state)
{
    (void)state;
    enum { N = 1 << 16, BINS = 16 };
    ao_rng_stream s = ao_rng_child(ao_rng_root(42, AO_RNG_DATA_TARGET), 7);
    long bins[BINS] = {0};
    double sum = 0, sum2 = 0;
    for (uint64_t i = 0; i < N; i++) {
        float u = ao_rng_uniform(s, i);
        assert_true(u >= 0.0f && u < 1.0f);
        bins[(int)(u * BINS)]++;
        sum += u;
        sum2 += (double)u * u;
    }
    const double mean = sum / N, var = sum2 / N - mean * mean;
    assert_true(fabs(mean - 0.5) < 0.005);
    assert_true(fabs(var - 1.0 / 12.0) < 0.003);
    double chi2 = 0;
    for (int b = 0; b < BINS; b++) {
        const double e = (double)N / BINS;
        chi2 += (bins[b] - e) * (bins[b] - e) / e;
    }
    assert_true(chi2 < 40.0); /* 15 dof: p ~ 5e-4 */
}

static void test_normal_distribution(void **state)
{
    (void)state;
    enum { N = 40000 };
    ao_rng_stream s = ao_rng_root(3, AO_RNG_DATA_DENSE);
    double sum = 0, sum2 = 0, sum4 = 0;
    long within1 = 0;
    for (uint64_t i = 0; i < N; i++) {
        const double z = ao_rng_normal(s, i);
        sum += z;
        sum2 += z * z;
        sum4 += z * z * z * z;
        within1 += fabs(z) < 1.0;
    }
    const double mean = sum / N, var = sum2 / N - mean * mean;
    assert_true(fabs(mean) < 0.03);
    assert_true(fabs(var - 1.0) < 0.03);
    assert_true(fabs(sum4 / N - 3.0) < 0.2); /* kurtosis of a normal */
    assert_true(fabs((double)within1 / N - 0.6827) < 0.01);
}

static void test_stream_layout_and_derivation(void **state)
{
    (void)state;
    ao_rng_stream s = ao_rng_child(ao_rng_root(9, AO_RNG_DROPOUT), 1);
    for (uint64_t k = 0; k < 8; k++) {
        ao_u32x4 b = ao_rng_block(s, k);
        for (unsigned l = 0; l < 4; l++) assert_int_equal(ao_rng_u32(s, 4 * k + l), b.v[l]);
    }
    /* element index beyond 2^32 reaches the counter's second word */
    assert_true(ao_rng_u32(s, 0) != ao_rng_u32(s, (uint64_t)1 << 34));

    /* derivation is a pure function: same path, same stream */
    ao_rng_stream a = ao_rng_child(ao_rng_child(ao_rng_root(5, 2), 10), 20);
    ao_rng_stream b = ao_rng_child(ao_rng_child(ao_rng_root(5, 2), 10), 20);
    assert_memory_equal(&a, &b, sizeof a);
    /* any change in seed, purpose or path gives another stream */
    const ao_rng_stream others[] = {
        ao_rng_child(ao_rng_child(ao_rng_root(6, 2), 10), 20),
        ao_rng_child(ao_rng_child(ao_rng_root(5, 3), 10), 20),
        ao_rng_child(ao_rng_child(ao_rng_root(5, 2), 20), 10),
        ao_rng_child(ao_rng_child(ao_rng_root(5, 2), 10), 21),
        ao_rng_child(ao_rng_root(5, 2), 10),
        ao_rng_root((uint64_t)5 << 32, 2),
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        assert_true(ao_rng_u32(a, 0) != ao_rng_u32(others[i], 0));

    /* two sibling streams are uncorrelated */
    ao_rng_stream s1 = ao_rng_child(ao_rng_root(1, 1), 0), s2 = ao_rng_child(ao_rng_root(1, 1), 1);
    double sxy = 0;
    enum { N = 20000 };
    for (uint64_t i = 0; i < N; i++)
        sxy += (ao_rng_uniform(s1, i) - 0.5) * (ao_rng_uniform(s2, i) - 0.5);
    const double corr = sxy / N * 12.0;
    assert_true(fabs(corr) < 0.03);
}

static void test_dropout_factor(void **state)
{
    (void)state;
    ao_rng_stream s = ao_dropout_stream(1, 2, 3, AO_DROP_FFN_HIDDEN, 4);
    for (uint64_t e = 0; e < 100; e++) {
        assert_true(ao_dropout_factor(s, e, 0.0f) == 1.0f);
        assert_true(ao_dropout_factor(s, e, 1.0f) == 0.0f);
    }
    enum { N = 20000 };
    const float p = 0.25f;
    long dropped = 0;
    for (uint64_t e = 0; e < N; e++) {
        const float f = ao_dropout_factor(s, e, p);
        assert_true(f == 0.0f || f == 1.0f / (1.0f - p));
        dropped += f == 0.0f;
        /* a drop decision is the uniform of the same element compared with p */
        assert_true((f == 0.0f) == (ao_rng_uniform(s, e) < p));
    }
    assert_true(fabs((double)dropped / N - p) < 0.015);
    /* every key level matters */
    const ao_rng_stream keys[] = {
        ao_dropout_stream(0, 2, 3, AO_DROP_FFN_HIDDEN, 4),
        ao_dropout_stream(1, 0, 3, AO_DROP_FFN_HIDDEN, 4),
        ao_dropout_stream(1, 2, 0, AO_DROP_FFN_HIDDEN, 4),
        ao_dropout_stream(1, 2, 3, AO_DROP_FFN_OUT, 4),
        ao_dropout_stream(1, 2, 3, AO_DROP_FFN_HIDDEN, 5),
    };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        int differ = 0;
        for (uint64_t e = 0; e < 64; e++)
            differ |= ao_dropout_factor(s, e, 0.5f) != ao_dropout_factor(keys[k], e, 0.5f);
        assert_true(differ);
    }
}

/* The integer threshold decides as the float comparison it replaces, for
 * words on both sides of every p's boundary and for p at its extremes. */
static void test_dropout_threshold(void **state)
{
    (void)state;
    const float ps[] = {1e-30f, 1e-7f, 5.9604645e-08f, 0.1f, 0.25f, 1.0f / 3.0f,
                        0.5f,   0.9f,  0.99999994f,    0.3f, 0.7f};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        const float p = ps[i];
        const uint32_t t = ao_dropout_threshold(p);
        const uint32_t words[] = {0u, 1u,     255u,     256u,     t - 257u,    t - 256u,   t - 1u,
                                  t,  t + 1u, t + 255u, t + 256u, 0xFFFFFFFFu, 0x80000000u};
        for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
            const int drop_float = ao_rng_u32_to_uniform(words[w]) < p;
            assert_int_equal(words[w] < t, drop_float);
        }
    }
    ao_rng_stream s = ao_rng_root(3, AO_RNG_DROPOUT);
    for (uint64_t e = 0; e < 4096; e++) {
        const uint32_t w = ao_rng_u32(s, e);
        const float p = (float)(e % 97) / 97.0f + 1e-3f;
        assert_int_equal(w < ao_dropout_threshold(p), ao_rng_u32_to_uniform(w) < p);
    }
}

static void test_bulk_fills(void **state)
{
    (void)state;
    enum { N = 37 };
    float u[N], z[N];
    ao_rng_stream s = ao_rng_root(77, AO_RNG_PARAM_INIT);
    ao_rng_fill_uniform(u, N, s, 5, -2.0f, 3.0f);
    ao_rng_fill_normal(z, N, s, 11, 1.0f, 0.5f);
    for (int i = 0; i < N; i++) {
        assert_true(u[i] >= -2.0f && u[i] < 3.0f);
        assert_true(u[i] == -2.0f + 5.0f * ao_rng_uniform(s, 5 + (uint64_t)i));
        assert_true(z[i] == 1.0f + 0.5f * ao_rng_normal(s, 11 + (uint64_t)i));
    }
    /* The pairwise fill equals the element function for every start parity
     * and length (a pair split at either end included). */
    for (uint64_t first = 0; first < 4; first++)
        for (size_t n = 0; n <= 6; n++) {
            float w[6];
            ao_rng_normals(w, n, s, first);
            for (size_t i = 0; i < n; i++) assert_true(w[i] == ao_rng_normal(s, first + i));
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_known_answers),
        cmocka_unit_test(test_philox_bit_balance_and_avalanche),
        cmocka_unit_test(test_uniform_conversion_edges),
        cmocka_unit_test(test_uniform_distribution),
        cmocka_unit_test(test_normal_distribution),
        cmocka_unit_test(test_stream_layout_and_derivation),
        cmocka_unit_test(test_dropout_factor),
        cmocka_unit_test(test_dropout_threshold),
        cmocka_unit_test(test_bulk_fills),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
