/* Philox blocks and normals, several counters at once (host side).
 *
 * The lane loops below are plain C that the compiler vectorises (uint32
 * lanes, mulhi through 64-bit products). The same body is compiled for the
 * baseline ISA and, under target attributes, for AVX2 and AVX-512; the
 * widest one the CPU supports is chosen at run time. Every variant computes
 * the same bits as the scalar ao_philox4x32 and ao_rng_box_muller (the
 * tests compare them). */
#include "data/rng_simd.h"

#include "data/normal_fast.h"
#include "data/simd_target.h"

#define AO_LANES 16 /* blocks per group: one AVX-512 vector of uint32 */

/* Philox4x32-10 of AO_LANES blocks of stream s, word j of block l in cj[l]:
 * blocks first .. first + AO_LANES - 1, or with `element` given, blocks
 * element[l] / 2 (the blocks of those normals). The plain C version is the one the compiler
 * vectorises; the x86 ones spell the 32x32->64 products with vpmuludq on even
 * and odd lanes, which the compiler does not find by itself (it widens to
 * 64-bit lanes and multiplies those). */
typedef void philox_fn(uint32_t c0[AO_LANES], uint32_t c1[AO_LANES], uint32_t c2[AO_LANES],
                       uint32_t c3[AO_LANES], ao_rng_stream s, uint64_t first,
                       const uint32_t *element);

AO_INLINE void philox_lanes(uint32_t c0[AO_LANES], uint32_t c1[AO_LANES], uint32_t c2[AO_LANES],
                            uint32_t c3[AO_LANES], ao_rng_stream s, uint64_t first,
                            const uint32_t *element)
{
    for (int l = 0; l < AO_LANES; l++) {
        uint64_t b = element ? element[l] >> 1 : first + (uint64_t)l;
        c0[l] = (uint32_t)b;
        c1[l] = (uint32_t)(b >> 32);
        c2[l] = s.hi[0];
        c3[l] = s.hi[1];
    }
    uint32_t k0 = s.key[0], k1 = s.key[1];
    for (int round = 0; round < 10; round++) {
        for (int l = 0; l < AO_LANES; l++) {
            uint64_t p0 = (uint64_t)AO_PHILOX_M0 * c0[l];
            uint64_t p1 = (uint64_t)AO_PHILOX_M1 * c2[l];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0;
            uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
            c1[l] = (uint32_t)p1;
            c3[l] = (uint32_t)p0;
            c0[l] = n0;
            c2[l] = n2;
        }
        k0 += AO_PHILOX_W0;
        k1 += AO_PHILOX_W1;
    }
}

#ifdef AO_HAVE_X86_VARIANTS
/* hi and lo halves of the 8 products x[l] * m (vpmuludq on even, then odd lanes) */
AO_TARGET_AVX2 AO_INLINE void mulhilo_avx2(__m256i x, __m256i m, __m256i *hi, __m256i *lo)
{
    __m256i pe = _mm256_mul_epu32(x, m), po = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
    *lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
}

AO_TARGET_AVX2 AO_INLINE void philox_avx2(uint32_t c0[AO_LANES], uint32_t c1[AO_LANES],
                                          uint32_t c2[AO_LANES], uint32_t c3[AO_LANES],
                                          ao_rng_stream s, uint64_t first, const uint32_t *element)
{
    const __m256i m0 = _mm256_set1_epi32((int)AO_PHILOX_M0),
                  m1 = _mm256_set1_epi32((int)AO_PHILOX_M1);
    const __m256i sign = _mm256_set1_epi32(INT32_MIN);
    for (int h = 0; h < AO_LANES; h += 8) {
        __m256i x0, x1;
        if (element) {
            x0 = _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(element + h)), 1);
            x1 = _mm256_setzero_si256();
        } else {
            uint64_t b = first + (uint64_t)h;
            __m256i lo32 = _mm256_set1_epi32((int)(uint32_t)b);
            x0 = _mm256_add_epi32(lo32, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            /* a lane whose low word wrapped carries into word 1 (unsigned x0 < lo32) */
            __m256i carry =
                _mm256_cmpgt_epi32(_mm256_xor_si256(lo32, sign), _mm256_xor_si256(x0, sign));
            x1 = _mm256_sub_epi32(_mm256_set1_epi32((int)(uint32_t)(b >> 32)), carry);
        }
        __m256i x2 = _mm256_set1_epi32((int)s.hi[0]), x3 = _mm256_set1_epi32((int)s.hi[1]);
        uint32_t k0 = s.key[0], k1 = s.key[1];
        for (int round = 0; round < 10; round++) {
            __m256i hi0, lo0, hi1, lo1;
            mulhilo_avx2(x0, m0, &hi0, &lo0);
            mulhilo_avx2(x2, m1, &hi1, &lo1);
            x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32((int)k0));
            x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32((int)k1));
            x1 = lo1;
            x3 = lo0;
            k0 += AO_PHILOX_W0;
            k1 += AO_PHILOX_W1;
        }
        _mm256_storeu_si256((__m256i *)(c0 + h), x0);
        _mm256_storeu_si256((__m256i *)(c1 + h), x1);
        _mm256_storeu_si256((__m256i *)(c2 + h), x2);
        _mm256_storeu_si256((__m256i *)(c3 + h), x3);
    }
}

AO_TARGET_AVX512 AO_INLINE void mulhilo_avx512(__m512i x, __m512i m, __m512i *hi, __m512i *lo)
{
    __m512i pe = _mm512_mul_epu32(x, m), po = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
    *lo = _mm512_mask_blend_epi32(0xAAAA, pe, _mm512_slli_epi64(po, 32));
}

AO_TARGET_AVX512 AO_INLINE void philox_avx512(uint32_t c0[AO_LANES], uint32_t c1[AO_LANES],
                                              uint32_t c2[AO_LANES], uint32_t c3[AO_LANES],
                                              ao_rng_stream s, uint64_t first,
                                              const uint32_t *element)
{
    const __m512i m0 = _mm512_set1_epi32((int)AO_PHILOX_M0),
                  m1 = _mm512_set1_epi32((int)AO_PHILOX_M1);
    __m512i x0, x1;
    if (element) {
        x0 = _mm512_srli_epi32(_mm512_loadu_si512(element), 1);
        x1 = _mm512_setzero_si512();
    } else {
        __m512i lo32 = _mm512_set1_epi32((int)(uint32_t)first);
        x0 = _mm512_add_epi32(
            lo32, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
        __mmask16 carry = _mm512_cmplt_epu32_mask(x0, lo32);
        __m512i hi32 = _mm512_set1_epi32((int)(uint32_t)(first >> 32));
        x1 = _mm512_mask_add_epi32(hi32, carry, hi32, _mm512_set1_epi32(1));
    }
    __m512i x2 = _mm512_set1_epi32((int)s.hi[0]), x3 = _mm512_set1_epi32((int)s.hi[1]);
    uint32_t k0 = s.key[0], k1 = s.key[1];
    for (int round = 0; round < 10; round++) {
        __m512i hi0, lo0, hi1, lo1;
        mulhilo_avx512(x0, m0, &hi0, &lo0);
        mulhilo_avx512(x2, m1, &hi1, &lo1);
        x0 = _mm512_ternarylogic_epi32(hi1, x1, _mm512_set1_epi32((int)k0), 0x96);
        x2 = _mm512_ternarylogic_epi32(hi0, x3, _mm512_set1_epi32((int)k1), 0x96);
        x1 = lo1;
        x3 = lo0;
        k0 += AO_PHILOX_W0;
        k1 += AO_PHILOX_W1;
    }
    _mm512_storeu_si512(c0, x0);
    _mm512_storeu_si512(c1, x1);
    _mm512_storeu_si512(c2, x2);
    _mm512_storeu_si512(c3, x3);
}
#endif

AO_INLINE void blocks_body(ao_u32x4 *out, size_t n, ao_rng_stream s, uint64_t first,
                           philox_fn *philox)
{
    size_t i = 0;
    for (; i + AO_LANES <= n; i += AO_LANES) {
        uint32_t c0[AO_LANES], c1[AO_LANES], c2[AO_LANES], c3[AO_LANES];
        philox(c0, c1, c2, c3, s, first + i, NULL);
        for (int l = 0; l < AO_LANES; l++) {
            out[i + (size_t)l].v[0] = c0[l];
            out[i + (size_t)l].v[1] = c1[l];
            out[i + (size_t)l].v[2] = c2[l];
            out[i + (size_t)l].v[3] = c3[l];
        }
    }
    for (; i < n; i++) out[i] = ao_rng_block(s, first + i);
}

/* Normals 2 first .. 2 (first + nblocks) - 1 of s: block j gives normals 2j
 * (words 0, 1) and 2j + 1 (words 2, 3), as ao_rng_normal pairs them. */
AO_INLINE void normals_body(float *out, size_t nblocks, ao_rng_stream s, uint64_t first,
                            philox_fn *philox)
{
    size_t i = 0;
    for (; i + AO_LANES <= nblocks; i += AO_LANES) {
        uint32_t c0[AO_LANES], c1[AO_LANES], c2[AO_LANES], c3[AO_LANES];
        philox(c0, c1, c2, c3, s, first + i, NULL);
        double ye[AO_LANES], yo[AO_LANES];
        uint64_t fe[AO_LANES], fo[AO_LANES];
        uint64_t any = 0; /* the fallback is rare: test once for the whole group */
        for (int l = 0; l < AO_LANES; l++) ye[l] = ao_bm_fast(c0[l], c1[l], &fe[l]);
        for (int l = 0; l < AO_LANES; l++) yo[l] = ao_bm_fast(c2[l], c3[l], &fo[l]);
        for (int l = 0; l < AO_LANES; l++) any |= fe[l] | fo[l];
        float *o = out + 2 * i;
        for (int l = 0; l < AO_LANES; l++) {
            o[2 * l] = (float)ye[l];
            o[2 * l + 1] = (float)yo[l];
        }
        if (any) {
            for (int l = 0; l < AO_LANES; l++) {
                if (fe[l]) o[2 * l] = ao_rng_box_muller(c0[l], c1[l]);
                if (fo[l]) o[2 * l + 1] = ao_rng_box_muller(c2[l], c3[l]);
            }
        }
    }
    for (; i < nblocks; i++) {
        ao_u32x4 r = ao_rng_block(s, first + i);
        out[2 * i] = ao_rng_box_muller(r.v[0], r.v[1]);
        out[2 * i + 1] = ao_rng_box_muller(r.v[2], r.v[3]);
    }
}

/* out[i] = ao_rng_normal(s, element[i]): the blocks element / 2 in any
 * order, words 0, 1 or 2, 3 of each by the element's parity. */
AO_INLINE void normals_at_body(float *out, const uint32_t *element, size_t n, ao_rng_stream s,
                               philox_fn *philox)
{
    size_t i = 0;
    for (; i + AO_LANES <= n; i += AO_LANES) {
        uint32_t c0[AO_LANES], c1[AO_LANES], c2[AO_LANES], c3[AO_LANES], a[AO_LANES], b[AO_LANES];
        philox(c0, c1, c2, c3, s, 0, element + i);
        for (int l = 0; l < AO_LANES; l++) {
            int odd = (int)(element[i + (size_t)l] & 1u);
            a[l] = odd ? c2[l] : c0[l];
            b[l] = odd ? c3[l] : c1[l];
        }
        double y[AO_LANES];
        uint64_t fb[AO_LANES];
        uint64_t any = 0;
        for (int l = 0; l < AO_LANES; l++) y[l] = ao_bm_fast(a[l], b[l], &fb[l]);
        for (int l = 0; l < AO_LANES; l++) any |= fb[l];
        for (int l = 0; l < AO_LANES; l++) out[i + (size_t)l] = (float)y[l];
        if (any)
            for (int l = 0; l < AO_LANES; l++)
                if (fb[l]) out[i + (size_t)l] = ao_rng_box_muller(a[l], b[l]);
    }
    for (; i < n; i++) out[i] = ao_rng_normal(s, element[i]);
}

static void blocks_generic(ao_u32x4 *out, size_t n, ao_rng_stream s, uint64_t first)
{
    blocks_body(out, n, s, first, philox_lanes);
}

static void normals_generic(float *out, size_t nblocks, ao_rng_stream s, uint64_t first)
{
    normals_body(out, nblocks, s, first, philox_lanes);
}

static void normals_at_generic(float *out, const uint32_t *element, size_t n, ao_rng_stream s)
{
    normals_at_body(out, element, n, s, philox_lanes);
}

#ifdef AO_HAVE_X86_VARIANTS
AO_TARGET_AVX2 static void blocks_avx2(ao_u32x4 *out, size_t n, ao_rng_stream s, uint64_t first)
{
    blocks_body(out, n, s, first, philox_avx2);
}

AO_TARGET_AVX2 static void normals_avx2(float *out, size_t nblocks, ao_rng_stream s, uint64_t first)
{
    normals_body(out, nblocks, s, first, philox_avx2);
}

AO_TARGET_AVX2 static void normals_at_avx2(float *out, const uint32_t *element, size_t n,
                                           ao_rng_stream s)
{
    normals_at_body(out, element, n, s, philox_avx2);
}

AO_TARGET_AVX512 static void blocks_avx512(ao_u32x4 *out, size_t n, ao_rng_stream s, uint64_t first)
{
    blocks_body(out, n, s, first, philox_avx512);
}

AO_TARGET_AVX512 static void normals_avx512(float *out, size_t nblocks, ao_rng_stream s,
                                            uint64_t first)
{
    normals_body(out, nblocks, s, first, philox_avx512);
}

AO_TARGET_AVX512 static void normals_at_avx512(float *out, const uint32_t *element, size_t n,
                                               ao_rng_stream s)
{
    normals_at_body(out, element, n, s, philox_avx512);
}
#endif

const char *ao_rng_simd_name(enum ao_rng_simd v)
{
    static const char *const names[AO_RNG_SIMD_COUNT] = {"generic", "avx2", "avx512"};
    return v >= 0 && v < AO_RNG_SIMD_COUNT ? names[v] : "unknown";
}

int ao_rng_simd_supported(enum ao_rng_simd v)
{
    switch (v) {
    case AO_RNG_SIMD_GENERIC:
        return 1;
#ifdef AO_HAVE_X86_VARIANTS
    case AO_RNG_SIMD_AVX2:
        return __builtin_cpu_supports("avx2");
    case AO_RNG_SIMD_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
#endif
    default:
        return 0;
    }
}

/* Not cached: __builtin_cpu_supports reads a flag set at start-up, and loader
 * workers call this concurrently. */
enum ao_rng_simd ao_rng_simd_best(void)
{
    enum ao_rng_simd best = AO_RNG_SIMD_GENERIC;
    for (int v = AO_RNG_SIMD_GENERIC + 1; v < AO_RNG_SIMD_COUNT; v++)
        if (ao_rng_simd_supported((enum ao_rng_simd)v)) best = (enum ao_rng_simd)v;
    return best;
}

/* Each variant's entry points, indexed by enum ao_rng_simd; variants this
 * build lacks are never called (ao_rng_simd_supported is 0 for them). */
static const struct {
    void (*blocks)(ao_u32x4 *out, size_t n, ao_rng_stream s, uint64_t first);
    void (*normals)(float *out, size_t nblocks, ao_rng_stream s, uint64_t first);
    void (*normals_at)(float *out, const uint32_t *element, size_t n, ao_rng_stream s);
} variants[AO_RNG_SIMD_COUNT] = {
    [AO_RNG_SIMD_GENERIC] = {blocks_generic, normals_generic, normals_at_generic},
#ifdef AO_HAVE_X86_VARIANTS
    [AO_RNG_SIMD_AVX2] = {blocks_avx2, normals_avx2, normals_at_avx2},
    [AO_RNG_SIMD_AVX512] = {blocks_avx512, normals_avx512, normals_at_avx512},
#endif
};

int ao_rng_blocks_simd(enum ao_rng_simd v, ao_u32x4 *out, size_t n, ao_rng_stream s, uint64_t first)
{
    if (!ao_rng_simd_supported(v)) return -1;
    variants[v].blocks(out, n, s, first);
    return 0;
}

int ao_rng_normal_pairs_simd(enum ao_rng_simd v, float *out, size_t nblocks, ao_rng_stream s,
                             uint64_t first)
{
    if (!ao_rng_simd_supported(v)) return -1;
    variants[v].normals(out, nblocks, s, first);
    return 0;
}

int ao_rng_normals_at_simd(enum ao_rng_simd v, float *out, const uint32_t *element, size_t n,
                           ao_rng_stream s)
{
    if (!ao_rng_simd_supported(v)) return -1;
    variants[v].normals_at(out, element, n, s);
    return 0;
}
