/* Host generator of the synthetic samples; the values are defined in data.h. */
#include "data/data.h"

#include <stdlib.h>

#include "core/error.h"

int ao_data_shape_check(const ao_data_shape *shape)
{
    const struct {
        const char *name;
        int value;
    } fields[] = {
        {"seq_len (T)", shape->seq_len},     {"num_dense (F)", shape->num_dense},
        {"dense_dim (D)", shape->dense_dim}, {"num_sparse (S)", shape->num_sparse},
        {"vocab (V)", shape->vocab},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (fields[i].value < 1) {
            ao_error("data shape", "%s is %d; it must be at least 1", fields[i].name,
                     fields[i].value);
            return AO_EXIT_USAGE;
        }
    }
    int64_t dense = (int64_t)shape->seq_len * shape->num_dense * shape->dense_dim;
    int64_t ids = (int64_t)shape->seq_len * shape->num_sparse;
    if (dense >= INT32_MAX || ids >= INT32_MAX) {
        ao_error("data shape",
                 "one sample has %lld dense values and %lld ids; each must be below 2^31",
                 (long long)dense, (long long)ids);
        return AO_EXIT_USAGE;
    }
    return 0;
}

int ao_data_fill(const ao_data_shape *shape, uint64_t seed, int target_kind,
                 uint64_t first_global_index, int batch, float *dense, int32_t *ids, float *target,
                 float *weight)
{
    int rc = ao_data_shape_check(shape);
    if (rc) return rc;
    if (target_kind != AO_TARGET_RANDOM && target_kind != AO_TARGET_TEACHER) {
        ao_error("dataset.target", "unknown target kind %d; allowed: random, teacher", target_kind);
        return AO_EXIT_USAGE;
    }
    if (batch < 0) {
        ao_error("data batch", "batch size is %d; it must not be negative", batch);
        return AO_EXIT_USAGE;
    }
    const int T = shape->seq_len, F = shape->num_dense, D = shape->dense_dim;
    const int S = shape->num_sparse;
    const size_t dense_per_sample = (size_t)T * F * D, ids_per_sample = (size_t)T * S;
    float *u = NULL; /* the teacher's dense weights: the same for every token */
    if (target_kind == AO_TARGET_TEACHER && batch > 0) {
        u = ao_malloc((size_t)D * sizeof *u);
        ao_rng_normals(u, (size_t)D, ao_rng_root(seed, AO_RNG_TEACHER_DENSE), 0);
    }
    for (int b = 0; b < batch; b++) {
        const uint64_t g = first_global_index + (uint64_t)b;
        float *dn = dense + (size_t)b * dense_per_sample;
        int32_t *id = ids + (size_t)b * ids_per_sample;
        float *tg = target + (size_t)b * T, *wt = weight + (size_t)b * T;

        ao_rng_stream s = ao_data_stream(seed, AO_RNG_DATA_DENSE, g);
        ao_rng_normals(dn, dense_per_sample, s, 0);
        s = ao_data_stream(seed, AO_RNG_DATA_IDS, g);
        for (size_t e = 0; e < ids_per_sample; e++)
            id[e] = ao_data_id_from_word(ao_rng_u32(s, e), shape->vocab);
        s = ao_data_stream(seed, AO_RNG_DATA_WEIGHT, g);
        for (int t = 0; t < T; t++) wt[t] = ao_data_weight_from_uniform(ao_rng_uniform(s, t));
        if (target_kind == AO_TARGET_RANDOM) {
            s = ao_data_stream(seed, AO_RNG_DATA_TARGET, g);
            for (int t = 0; t < T; t++) tg[t] = ao_rng_uniform(s, t);
        } else {
            for (int t = 0; t < T; t++)
                tg[t] = ao_data_teacher_target_u(u, seed, F, D, S, dn + (size_t)t * F * D,
                                                 id + (size_t)t * S);
        }
    }
    free(u);
    return 0;
}
