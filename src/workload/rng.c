/* Bulk fills over the counter-based streams of rng.h (host side). */
#include "workload/rng.h"

void ao_rng_fill_uniform(float *out, size_t n, ao_rng_stream s, uint64_t first, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) out[i] = lo + (hi - lo) * ao_rng_uniform(s, first + i);
}

void ao_rng_fill_normal(float *out, size_t n, ao_rng_stream s, uint64_t first, float mean,
                        float stddev)
{
    for (size_t i = 0; i < n; i++) out[i] = mean + stddev * ao_rng_normal(s, first + i);
}
