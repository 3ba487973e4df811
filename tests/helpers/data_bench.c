/* The host data generator's rate (dataset.placement: host): ms per batch of
 * ao_data_fill on one thread, the work one loader worker does per batch.
 *     data_bench T F D S V B [random|teacher] [repeats]
 * Prints one JSON object. bench/data.sh runs it at the configs' shapes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "data/data.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
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
    double t0 = now_s();
    for (int r = 0; r < repeats; r++)
        ao_data_fill(&sh, 42, kind, (uint64_t)(r + 1) * batch, batch, dense, ids, target, weight);
    double ms = (now_s() - t0) * 1e3 / repeats;
    printf("{\"T\": %d, \"F\": %d, \"D\": %d, \"S\": %d, \"batch\": %d, \"target\": \"%s\", "
           "\"ms_per_batch\": %.3f, \"dense_values_per_s\": %.4g}\n",
           sh.seq_len, sh.num_dense, sh.dense_dim, sh.num_sparse, batch,
           teacher ? "teacher" : "random", ms, (double)dn / (ms * 1e-3));
    free(dense);
    free(ids);
    free(target);
    free(weight);
    return 0;
}
