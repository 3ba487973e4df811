/* Box-Muller without a libm call per element, giving exactly ao_rng_box_muller's floats.
 *
 * ao_rng_box_muller rounds sqrt(-2 log u1) cos(2 pi u2), evaluated in double
 * with libm, to float. Here log and cos are fdlibm-style polynomials in plain
 * double arithmetic (no contraction, so every SIMD width computes the same
 * bits). Their error against libm is bounded by an exhaustive test over all
 * 2^24 values of each input (tests/unit/test_rng_simd.c), so the double
 * product lies within AO_BM_MARGIN_ULPS of libm's; when a float rounding
 * boundary could lie inside that interval, or cos is near a zero (relative
 * error unbounded), the caller falls back to ao_rng_box_muller. The float is
 * therefore always libm's float. Host only. */
#ifndef AORTA_DATA_NORMAL_FAST_H
#define AORTA_DATA_NORMAL_FAST_H

#include <stdint.h>
#include <math.h>
#include <string.h>

/* The tests prove |error| <= 2^-46 relative for each factor, so the product
 * is within 2^-44.9 relative, i.e. 2^8.1 double ulps; 2^10 leaves slack. */
#define AO_BM_FACTOR_REL_ERR 0x1p-46
#define AO_BM_MARGIN_ULPS    1024u
/* |cos| below this falls back: its relative error is not bounded there. */
#define AO_BM_COS_MIN 0x1p-10

static inline uint64_t ao_f64_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double ao_f64_from_bits(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* log(u1), u1 = ((a >> 8) + 1) 2^-24 as ao_rng_box_muller forms it: fdlibm's
 * e_log reduction (u1 = 2^k m, m in [sqrt(1/2), sqrt(2))) and polynomial. */
static inline double ao_bm_log(uint32_t a)
{
    /* k = (a >> 8) + 1 <= 2^24 is exact in float; 32-bit lanes vectorise best */
    float fk = (float)(int32_t)((a >> 8) + 1u);
    uint32_t fbits;
    memcpy(&fbits, &fk, sizeof fbits);
    int32_t e = (int32_t)(fbits >> 23) - 127 - 24;
    uint32_t mbits = (fbits & 0x007FFFFFu) | 0x3F800000u;
    float mf;
    memcpy(&mf, &mbits, sizeof mf);
    double m = (double)mf;
    /* selects of values computed on both sides: a conditional FP operation
     * would keep the compiler from vectorising (it might trap) */
    double half = m * 0.5;
    int big = m > 1.4142135623730951;
    m = big ? half : m;
    e += big;
    double k = (double)e;
    double f = m - 1.0;
    double hfsq = 0.5 * f * f;
    double s = f / (2.0 + f);
    double z = s * s, w = z * z;
    double t1 = w * (3.999999999940941908e-01 +
                     w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01));
    double t2 = z * (6.666666666666735130e-01 +
                     w * (2.857142874366239149e-01 +
                          w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
    double r = t2 + t1;
    return k * 6.93147180369123816490e-01 -
           ((hfsq - (s * (hfsq + r) + k * 1.90821492927058770002e-10)) - f);
}

/* cos(2 pi u2), u2 = (b >> 8) 2^-24, with ao_rng_box_muller's rounded argument:
 * Cody-Waite reduction by pi/2 (fdlibm's two-part constant) and fdlibm's
 * kernel polynomials. */
static inline double ao_bm_cos(uint32_t b)
{
    double x = 6.283185307179586476925 * ((double)(int32_t)(b >> 8) * (1.0 / 16777216.0));
    double t = x * 6.36619772367581382433e-01 + 0x1.8p52; /* round(x 2/pi) */
    uint64_t q = ao_f64_bits(t) & 3u;
    double n = t - 0x1.8p52;
    double r = (x - n * 1.57079632673412561417e+00) - n * 6.07710050650619224932e-11;
    double z = r * r;
    double sn =
        r +
        r * z *
            (-1.66666666666666324348e-01 +
             z * (8.33333333332248946124e-03 +
                  z * (-1.98412698298579493134e-04 +
                       z * (2.75573137070700676789e-06 +
                            z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))));
    double cs =
        1.0 - 0.5 * z +
        z * z *
            (4.16666666666666019037e-02 +
             z * (-1.38888888888741095749e-03 +
                  z * (2.48015872894767294178e-05 +
                       z * (-2.75573143513906633035e-07 +
                            z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))));
    double v = (q & 1u) ? sn : cs;
    return ao_f64_from_bits(ao_f64_bits(v) ^ (((q + 1u) & 2u) << 62)); /* negative in q 1, 2 */
}

/* The fast candidate for ao_rng_box_muller(a, b) as a double; *fallback is
 * set when the float it rounds to might differ from libm's. */
static inline double ao_bm_fast(uint32_t a, uint32_t b, uint64_t *fallback)
{
    double l = ao_bm_log(a), c = ao_bm_cos(b);
    double y = sqrt(-2.0 * l) * c;
    uint64_t low = ao_f64_bits(y) & 0x1FFFFFFFu; /* the bits below float precision */
    uint64_t near_mid = low - (0x10000000u - AO_BM_MARGIN_ULPS) <= 2u * AO_BM_MARGIN_ULPS;
    uint64_t small_cos = (c < AO_BM_COS_MIN) & (c > -AO_BM_COS_MIN);
    *fallback = near_mid | small_cos | (uint64_t)(l == 0.0);
    return y;
}

#endif
