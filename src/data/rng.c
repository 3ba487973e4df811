/* Bulk fills over the counter-based streams of rng.h (host side). */
#include "data/rng.h"

#include "data/rng_simd.h"

void ao_rng_fill_uniform(float *out, size_t n, ao_rng_stream s, uint64_t first, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) out[i] = lo + (hi - lo) * ao_rng_uniform(s, first + i);
}

/* One Philox block serves two consecutive normals (ao_rng_normal's pairing);
 * whole pairs go through the SIMD generator, which gives the same values. */
void ao_rng_normals(float *out, size_t n, ao_rng_stream s, uint64_t first)
{
    size_t i = 0;
    if (n > 0 && (first & 1u)) { /* first is the second of its pair */
        out[0] = ao_rng_normal(s, first);
        i = 1;
    }
    size_t pairs = (n - i) / 2;
    ao_rng_normal_pairs_simd(ao_rng_simd_best(), out + i, pairs, s, (first + i) >> 1);
    i += 2 * pairs;
    if (i < n) out[i] = ao_rng_normal(s, first + i);
}

void ao_rng_fill_normal(float *out, size_t n, ao_rng_stream s, uint64_t first, float mean,
                        float stddev)
{
    ao_rng_normals(out, n, s, first);
    for (size_t i = 0; i < n; i++) out[i] = mean + stddev * out[i];
}
