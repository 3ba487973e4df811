/* The teacher's targets, AO_TEACHER_GROUP tokens at once (host side).
 *
 * Per token, m_i = sum_f dense[f, i] and lin = sum_i u_i (m_i / F) and
 * emb = sum_s score[s], each a double accumulated from 0.0 in index order as
 * data.h's scalar loop does. The D sums m_i are independent, so they run
 * across i, a chunk of accumulators held in registers over f; the
 * u_i (m_i / F) terms and the scores are stored token-interleaved so that the
 * lin and emb chains of the group's tokens advance side by side. No sum is
 * reassociated: every variant and the scalar loop give the same bits. */
#include "data/teacher.h"

#include "data/data.h"
#include "data/simd_target.h"

#define G  AO_TEACHER_GROUP
#define CH 32 /* dense accumulators per chunk: 4 AVX-512 vectors of doubles */

size_t ao_teacher_scratch_doubles(int dense_dim, int num_sparse)
{
    return (size_t)G * ((size_t)dense_dim + (size_t)num_sparse);
}

/* p[i G + l] = u_i (m_i / F) of the token at x ([F, D]). */
AO_INLINE void dense_terms(double *p, int l, const float *x, const float *u, int F, int D)
{
    const double fd = (double)F;
    int i0 = 0;
    for (; i0 + CH <= D; i0 += CH) {
        double acc[CH];
        for (int j = 0; j < CH; j++) acc[j] = 0.0;
        for (int f = 0; f < F; f++) {
            const float *row = x + (size_t)f * D + i0;
            for (int j = 0; j < CH; j++) acc[j] += (double)row[j];
        }
        for (int j = 0; j < CH; j++)
            p[(size_t)(i0 + j) * G + l] = (double)u[i0 + j] * (acc[j] / fd);
    }
    for (int i = i0; i < D; i++) {
        double m = 0.0;
        for (int f = 0; f < F; f++) m += (double)x[(size_t)f * D + i];
        p[(size_t)i * G + l] = (double)u[i] * (m / fd);
    }
}

/* The targets (and sums, when asked) of one sample: see teacher.h. */
AO_INLINE void teacher_body(const ao_data_shape *shape, const float *u, const float *dense,
                            const float *score, double *scratch, float *target, double *sums)
{
    const int T = shape->seq_len, F = shape->num_dense, D = shape->dense_dim;
    const int S = shape->num_sparse;
    double *p = scratch, *e = scratch + (size_t)G * D; /* [D][G], [S][G] */
    for (int t0 = 0; t0 < T; t0 += G) {
        const int n = T - t0 < G ? T - t0 : G;
        for (int l = 0; l < G; l++) {
            if (l < n) {
                dense_terms(p, l, dense + (size_t)(t0 + l) * F * D, u, F, D);
                const float *c = score + (size_t)(t0 + l) * S;
                for (int s = 0; s < S; s++) e[(size_t)s * G + l] = (double)c[s];
            } else { /* lanes past the last token: summed, never used */
                for (int i = 0; i < D; i++) p[(size_t)i * G + l] = 0.0;
                for (int s = 0; s < S; s++) e[(size_t)s * G + l] = 0.0;
            }
        }
        double lin[G], emb[G];
        for (int l = 0; l < G; l++) lin[l] = emb[l] = 0.0;
        for (int i = 0; i < D; i++)
            for (int l = 0; l < G; l++) lin[l] += p[(size_t)i * G + l];
        for (int s = 0; s < S; s++)
            for (int l = 0; l < G; l++) emb[l] += e[(size_t)s * G + l];
        for (int l = 0; l < n; l++) {
            target[t0 + l] = ao_data_teacher_finish(lin[l], emb[l], F, D, S);
            if (sums) {
                sums[2 * (t0 + l)] = lin[l];
                sums[2 * (t0 + l) + 1] = emb[l];
            }
        }
    }
}

#define TEACHER_PARAMS                                                                             \
    const ao_data_shape *shape, const float *u, const float *dense, const float *score,            \
        double *scratch, float *target, double *sums
#define TEACHER_ARGS shape, u, dense, score, scratch, target, sums

static void teacher_generic(TEACHER_PARAMS)
{
    teacher_body(TEACHER_ARGS);
}

#ifdef AO_HAVE_X86_VARIANTS
AO_TARGET_AVX2 static void teacher_avx2(TEACHER_PARAMS)
{
    teacher_body(TEACHER_ARGS);
}

AO_TARGET_AVX512 static void teacher_avx512(TEACHER_PARAMS)
{
    teacher_body(TEACHER_ARGS);
}
#endif

static void (*const variants[AO_RNG_SIMD_COUNT])(TEACHER_PARAMS) = {
    [AO_RNG_SIMD_GENERIC] = teacher_generic,
#ifdef AO_HAVE_X86_VARIANTS
    [AO_RNG_SIMD_AVX2] = teacher_avx2,
    [AO_RNG_SIMD_AVX512] = teacher_avx512,
#endif
};

int ao_teacher_targets_simd(enum ao_rng_simd v, TEACHER_PARAMS)
{
    if (!ao_rng_simd_supported(v)) return -1;
    variants[v](TEACHER_ARGS);
    return 0;
}
