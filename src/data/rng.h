/* Counter-based random numbers: Philox4x32-10 and the keyed streams built on it.
 *
 * Every random value in the workload (input samples, dropout masks, parameter
 * init) is a pure function of a key path such as (seed, purpose, step, layer,
 * global sample index) and an element index. Nothing depends on the order in
 * which values are drawn, on the number of ranks, or on the device, so W ranks
 * x batch B draw exactly what 1 rank x W*B draws, and a CUDA kernel computes the
 * same bits as this C code. This header compiles as C11 and as CUDA (the
 * functions are host+device there); the CPU and GPU paths include this one
 * definition rather than copies of it.
 *
 * Exactness across CPU and GPU: raw words, uniforms and everything derived from
 * them by comparison (dropout masks, ids) are bit-identical. Normals go through
 * log and cos, evaluated in double and rounded to float, so they agree except
 * when a double result lies within ~1e-16 of a float rounding boundary. */
#ifndef AORTA_DATA_RNG_H
#define AORTA_DATA_RNG_H

#include <stdint.h>
#include <math.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define AO_HD __host__ __device__
#else
#define AO_HD
#endif

/* Philox4x32 constants (Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11; the values Random123 and curand use). */
#define AO_PHILOX_M0 0xD2511F53u
#define AO_PHILOX_M1 0xCD9E8D57u
#define AO_PHILOX_W0 0x9E3779B9u /* key bump, golden ratio */
#define AO_PHILOX_W1 0xBB67AE85u /* key bump, sqrt(3) - 1 */

typedef struct {
    uint32_t v[4];
} ao_u32x4;

/* Philox4x32-10: 10 rounds, the key bumped between rounds. */
AO_HD static inline ao_u32x4 ao_philox4x32(const uint32_t counter[4], const uint32_t key[2])
{
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += AO_PHILOX_W0;
            k1 += AO_PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)AO_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)AO_PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    ao_u32x4 out = {{c0, c1, c2, c3}};
    return out;
}

/* Uniform float in [0, 1) from the top 24 bits: every value is an exact
 * multiple of 2^-24, so the same word gives the same float everywhere. */
AO_HD static inline float ao_rng_u32_to_uniform(uint32_t x)
{
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

/* One standard normal from two words by Box-Muller (the cosine branch).
 * u1 is taken in (0, 1] so that log never sees 0. */
AO_HD static inline float ao_rng_box_muller(uint32_t a, uint32_t b)
{
    double u1 = ((double)(a >> 8) + 1.0) * (1.0 / 16777216.0);
    double u2 = (double)(b >> 8) * (1.0 / 16777216.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2));
}

/* Uniform integer in [0, n) (multiply-shift; the bias is below n / 2^32). */
AO_HD static inline uint32_t ao_rng_u32_below(uint32_t x, uint32_t n)
{
    return (uint32_t)(((uint64_t)x * n) >> 32);
}

/* A stream: one Philox key plus the upper half of the counter. The lower half
 * of the counter is the element (block) index, so a stream yields 2^64 blocks
 * of 4 words. Streams are derived, never advanced: there is no state to
 * carry between draws. */
typedef struct {
    uint32_t key[2];
    uint32_t hi[2];
} ao_rng_stream;

/* Why a value is drawn. Each purpose is its own stream family, so adding a
 * consumer never shifts the values another one sees. Values are part of the
 * on-disk reproducibility contract: append, never renumber. */
enum ao_rng_purpose {
    AO_RNG_DATA_DENSE = 1,    /* (g) -> dense features, normal */
    AO_RNG_DATA_IDS = 2,      /* (g) -> categorical ids, uniform in [0, V) */
    AO_RNG_DATA_TARGET = 3,   /* (g) -> random soft labels, uniform */
    AO_RNG_DATA_WEIGHT = 4,   /* (g) -> importance weights, uniform */
    AO_RNG_TEACHER_DENSE = 5, /* () -> teacher projection of dense features, normal */
    AO_RNG_TEACHER_ID = 6,    /* () -> teacher score of each token id, normal */
    AO_RNG_DROPOUT = 7,       /* (step, layer, site, g[, head]) -> keep/drop */
    AO_RNG_PARAM_INIT = 8,    /* (unit, tensor) -> initial weights */
};

/* The root stream of a purpose under a run seed. */
AO_HD static inline ao_rng_stream ao_rng_root(uint64_t seed, uint32_t purpose)
{
    ao_rng_stream s = {{(uint32_t)seed, (uint32_t)(seed >> 32)}, {purpose, 0x61306f72u}};
    return s;
}

/* The child stream named `id` under `s`: one Philox call of the parent with
 * counter (id, parent.hi) whose output becomes the child's key and counter
 * half. Children of one parent are independent streams; a key path
 * (seed, purpose, a, b, c) is root -> child(a) -> child(b) -> child(c). */
AO_HD static inline ao_rng_stream ao_rng_child(ao_rng_stream s, uint64_t id)
{
    uint32_t ctr[4] = {(uint32_t)id, (uint32_t)(id >> 32), s.hi[0], s.hi[1]};
    ao_u32x4 r = ao_philox4x32(ctr, s.key);
    ao_rng_stream c = {{r.v[0], r.v[1]}, {r.v[2], r.v[3]}};
    return c;
}

/* Block `block` (4 words) of a stream. */
AO_HD static inline ao_u32x4 ao_rng_block(ao_rng_stream s, uint64_t block)
{
    uint32_t ctr[4] = {(uint32_t)block, (uint32_t)(block >> 32), s.hi[0], s.hi[1]};
    return ao_philox4x32(ctr, s.key);
}

/* Word `element` of a stream: lane element%4 of block element/4. */
AO_HD static inline uint32_t ao_rng_u32(ao_rng_stream s, uint64_t element)
{
    return ao_rng_block(s, element >> 2).v[element & 3u];
}

AO_HD static inline float ao_rng_uniform(ao_rng_stream s, uint64_t element)
{
    return ao_rng_u32_to_uniform(ao_rng_u32(s, element));
}

/* Normal number `element` of a stream: words 2*(element%2) and 2*(element%2)+1
 * of block element/2. Use a stream either for uniforms or for normals. */
AO_HD static inline float ao_rng_normal(ao_rng_stream s, uint64_t element)
{
    ao_u32x4 r = ao_rng_block(s, element >> 1);
    unsigned lane = (unsigned)(element & 1u) * 2u;
    return ao_rng_box_muller(r.v[lane], r.v[lane + 1]);
}

/* ---- dropout keying (shared by every dropout site, CPU and GPU) ---------- */

/* Where a dropout sits in an encoder layer. Values are part of the
 * reproducibility contract. */
enum ao_dropout_site {
    AO_DROP_ATTN_PROBS = 0, /* attention probabilities, element = i*T + j of head */
    AO_DROP_ATTN_OUT = 1,   /* after self-attention (TransformerEncoderLayer.dropout1) */
    AO_DROP_FFN_HIDDEN = 2, /* after GELU inside the FFN (TransformerEncoderLayer.dropout) */
    AO_DROP_FFN_OUT = 3,    /* after the FFN (TransformerEncoderLayer.dropout2) */
};

/* The mask stream of one sample at one site: key path
 * (seed, DROPOUT, step, layer, site, global sample index). Attention
 * probabilities add one more level: ao_rng_child(stream, head). */
AO_HD static inline ao_rng_stream ao_dropout_stream(uint64_t seed, uint64_t step, uint32_t layer,
                                                    uint32_t site, uint64_t sample)
{
    ao_rng_stream s = ao_rng_root(seed, AO_RNG_DROPOUT);
    s = ao_rng_child(s, step);
    s = ao_rng_child(s, layer);
    s = ao_rng_child(s, site);
    return ao_rng_child(s, sample);
}

/* Dropout's test uniform(word) < p, 0 < p < 1, as word < this threshold: the
 * uniform is (word >> 8) 2^-24 exactly, so the test is (word >> 8) < p 2^24
 * (exact in float), i.e. (word >> 8) < ceil(p 2^24) <= 2^24 - 1 for an
 * integer. The same decisions without a conversion per element, which had
 * GPU kernels waiting on the conversion unit. */
AO_HD static inline uint32_t ao_dropout_threshold(float p)
{
    return (uint32_t)ceilf(p * 16777216.0f) << 8;
}

/* The factor dropout applies to element `element`: 0 (dropped, probability p)
 * or 1/(1-p) (kept), as torch.nn.functional.dropout in training. p <= 0 keeps
 * everything without drawing; p >= 1 drops everything. */
AO_HD static inline float ao_dropout_factor_from_word(uint32_t word, float p)
{
    if (p <= 0.0f) return 1.0f;
    if (p >= 1.0f) return 0.0f;
    return word < ao_dropout_threshold(p) ? 0.0f : 1.0f / (1.0f - p);
}

AO_HD static inline float ao_dropout_factor(ao_rng_stream s, uint64_t element, float p)
{
    if (p <= 0.0f) return 1.0f;
    return ao_dropout_factor_from_word(ao_rng_u32(s, element), p);
}

/* ---- bulk fills (host only; rng.c) ------------------------------------- */
#ifndef __CUDACC__
#include <stddef.h>
/* out[i] = lo + (hi - lo) * uniform(s, first + i), i < n. */
void ao_rng_fill_uniform(float *out, size_t n, ao_rng_stream s, uint64_t first, float lo, float hi);
/* out[i] = ao_rng_normal(s, first + i), i < n, a Philox block per pair. */
void ao_rng_normals(float *out, size_t n, ao_rng_stream s, uint64_t first);
/* out[i] = mean + stddev * normal(s, first + i), i < n. */
void ao_rng_fill_normal(float *out, size_t n, ao_rng_stream s, uint64_t first, float mean,
                        float stddev);
#endif

#endif
