/* The host data generator's rate (dataset.placement: host): ms per batch of
 * ao_data_fill on one thread, the work one loader worker does per batch.
 *     data_bench T F D S V B [random|teacher] [repeats]
 *     data_bench normals N [repeats]
 * Prints one JSON object; the second form prints one per SIMD variant the CPU
 * runs (N dense normals each). bench/data.sh runs both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "data/data.h"
#include "data/rng_simd.h"

static double now_s(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The normal draws alone, per variant: what vectorising buys on this CPU. */
static int bench_normals(size_t n, int repeats)
{
    float *out = ao_malloc(n * sizeof *out);
    ao_rng_stream s = ao_rng_root(42, AO_RNG_DATA_DENSE);
    for (int v = 0; v < AO_RNG_SIMD_COUNT; v++) {
        if (!ao_rng_simd_supported((enum ao_rng_simd)v)) continue;
        ao_rng_normal_pairs_simd((enum ao_rng_simd)v, out, n / 2, s, 0); /* warm-up */
        double c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
        for (int r = 0; r < repeats; r++)
            ao_rng_normal_pairs_simd((enum ao_rng_simd)v, out, n / 2, s, (uint64_t)r * n);
        double cpu_s = (now_s(CLOCK_THREAD_CPUTIME_ID) - c0) / repeats;
        printf("{\"simd\": \"%s\", \"normals\": %zu, \"cpu_ms\": %.3f, \"normals_per_s\": %.4g}\n",
               ao_rng_simd_name((enum ao_rng_simd)v), n, cpu_s * 1e3, (double)n / cpu_s);
    }
    free(out);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "normals") == 0) {
        long n = atol(argv[2]);
        int repeats = argc > 3 ? atoi(argv[3]) : 10;
        if (n < 2 || repeats < 1) return AO_EXIT_USAGE;
        return bench_normals((size_t)n, repeats);
    }
    if (argc < 7) {
        fprintf(stderr, "usage: data_bench T F D S V B [random|teacher] [repeats]\n");
        return AO_EXIT_USAGE;
    }
    ao_data_shape sh = {.seq_len = atoi(argv[1]),
                        .num_dense = atoi(argv[2]),
                        .dense_dim = atoi(argv[3]),
                        .num_sparse = atoi(argv[4]),
                        .vocab = atoi(argv[5])};
    int batch = atoi(argv[6]);
    int teacher = argc > 7 && strcmp(argv[7], "teacher") == 0;
    int repeats = argc > 8 ? atoi(argv[8]) : 10;
    if (ao_data_shape_check(&sh) || batch < 1 || repeats < 1) return AO_EXIT_USAGE;
    size_t T = (size_t)sh.seq_len, dn = (size_t)batch * T * sh.num_dense * sh.dense_dim;
    float *dense = ao_malloc(dn * sizeof *dense);
    int32_t *ids = ao_malloc((size_t)batch * T * sh.num_sparse * sizeof *ids);
    float *target = ao_malloc((size_t)batch * T * sizeof *target);
    float *weight = ao_malloc((size_t)batch * T * sizeof *weight);
    int kind = teacher ? AO_TARGET_TEACHER : AO_TARGET_RANDOM;
    ao_data_fill(&sh, 42, kind, 0, batch, dense, ids, target, weight); /* warm-up */
    /* CPU time as well as wall: on a loaded machine the thread's CPU time is
     * the generator's cost, the wall time includes waiting for a core */
    double t0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    for (int r = 0; r < repeats; r++)
        ao_data_fill(&sh, 42, kind, (uint64_t)(r + 1) * batch, batch, dense, ids, target, weight);
    double ms = (now_s(CLOCK_MONOTONIC) - t0) * 1e3 / repeats;
    double cpu_ms = (now_s(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e3 / repeats;
    printf("{\"T\": %d, \"F\": %d, \"D\": %d, \"S\": %d, \"batch\": %d, \"target\": \"%s\", "
           "\"ms_per_batch\": %.3f, \"cpu_ms_per_batch\": %.3f, \"dense_values_per_s\": %.4g, "
           "\"simd\": \"%s\"}\n",
           sh.seq_len, sh.num_dense, sh.dense_dim, sh.num_sparse, batch,
           teacher ? "teacher" : "random", ms, cpu_ms, (double)dn / (cpu_ms * 1e-3),
           ao_rng_simd_name(ao_rng_simd_best()));
    free(dense);
    free(ids);
    free(target);
    free(weight);
    return 0;
}
