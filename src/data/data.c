/* Host generator of the synthetic samples; the values are defined in data.h. */
#include "data/data.h"

#include <stdlib.h>

#include "core/error.h"
#include "data/rng_simd.h"
#include "data/teacher.h"

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

/* out[e] = ao_data_id_from_word(ao_rng_u32(s, e), vocab) for e < n, a stack
 * chunk at a time and a Philox block per 4 words (SIMD generator). */
#define WORD_CHUNK 256
static void int_words(int32_t *out, size_t n, ao_rng_stream s, int vocab)
{
    ao_u32x4 blk[WORD_CHUNK / 4];
    for (size_t at = 0; at < n; at += WORD_CHUNK) {
        size_t k = n - at < WORD_CHUNK ? n - at : WORD_CHUNK;
        ao_rng_blocks_simd(ao_rng_simd_best(), blk, (k + 3) / 4, s, at / 4);
        for (size_t j = 0; j < k; j++)
            out[at + j] = ao_data_id_from_word(blk[j / 4].v[j % 4], vocab);
    }
}

/* out[t] = lo + (hi - lo) uniform(s, t) for t < n, as ao_rng_fill_uniform,
 * a Philox block per 4 values. */
static void uniform_words(float *out, size_t n, ao_rng_stream s, int weight)
{
    ao_u32x4 blk[WORD_CHUNK / 4];
    for (size_t at = 0; at < n; at += WORD_CHUNK) {
        size_t k = n - at < WORD_CHUNK ? n - at : WORD_CHUNK;
        ao_rng_blocks_simd(ao_rng_simd_best(), blk, (k + 3) / 4, s, at / 4);
        for (size_t j = 0; j < k; j++) {
            float u = ao_rng_u32_to_uniform(blk[j / 4].v[j % 4]);
            out[at + j] = weight ? ao_data_weight_from_uniform(u) : u;
        }
    }
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
    const enum ao_rng_simd simd = ao_rng_simd_best();
    /* the teacher's dense weights (the same for every token), one sample's
     * id scores, and the vectorised sums' scratch: allocated once a batch */
    float *u = NULL, *score = NULL;
    double *scratch = NULL;
    const ao_rng_stream score_stream = ao_rng_root(seed, AO_RNG_TEACHER_ID);
    if (target_kind == AO_TARGET_TEACHER && batch > 0) {
        u = ao_malloc((size_t)D * sizeof *u);
        ao_rng_normals(u, (size_t)D, ao_rng_root(seed, AO_RNG_TEACHER_DENSE), 0);
        score = ao_malloc(ids_per_sample * sizeof *score);
        scratch = ao_malloc(ao_teacher_scratch_doubles(D, S) * sizeof *scratch);
    }
    for (int b = 0; b < batch; b++) {
        const uint64_t g = first_global_index + (uint64_t)b;
        float *dn = dense + (size_t)b * dense_per_sample;
        int32_t *id = ids + (size_t)b * ids_per_sample;
        float *tg = target + (size_t)b * T, *wt = weight + (size_t)b * T;

        ao_rng_stream s = ao_data_stream(seed, AO_RNG_DATA_DENSE, g);
        ao_rng_normals(dn, dense_per_sample, s, 0);
        int_words(id, ids_per_sample, ao_data_stream(seed, AO_RNG_DATA_IDS, g), shape->vocab);
        uniform_words(wt, (size_t)T, ao_data_stream(seed, AO_RNG_DATA_WEIGHT, g), 1);
        if (target_kind == AO_TARGET_RANDOM) {
            uniform_words(tg, (size_t)T, ao_data_stream(seed, AO_RNG_DATA_TARGET, g), 0);
        } else { /* ids are in [0, V), V < 2^31: the same elements read as uint32 */
            ao_rng_normals_at_simd(simd, score, (const uint32_t *)id, ids_per_sample, score_stream);
            ao_teacher_targets_simd(simd, shape, u, dn, score, scratch, tg, NULL);
        }
    }
    free(u);
    free(score);
    free(scratch);
    return 0;
}
