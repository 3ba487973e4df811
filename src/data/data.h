/* The synthetic samples of the ranking workload (DESIGN §6).
 *
 * Sample g (its global index across all ranks and steps) is a pure function of
 * (seed, g): each field is drawn from its own stream (seed, purpose, g) at the
 * element's index within the sample, so any split of the global batch across
 * ranks, and the CPU and GPU generators, see the same numbers. Per sample:
 *   dense  [T, F, D] float, standard normal
 *   ids    [T, S]    int32, uniform in [0, V)
 *   target [T]       float in [0, 1]  (random soft label, or the teacher's)
 *   weight [T]       float, uniform in [0.5, 1.5)
 * A micro-batch of B samples stores them one after another: dense [B, T, F, D],
 * ids [B, T, S], target [B, T], weight [B, T], all row-major.
 *
 * The element functions below are host+device so a CUDA generator computes the
 * same values; ao_data_fill is the host generator built from them. */
#ifndef AORTA_DATA_DATA_H
#define AORTA_DATA_DATA_H

#include <stdint.h>

#include "data/rng.h"

typedef struct {
    int seq_len;    /* T: tokens per sample */
    int num_dense;  /* F: dense features per token */
    int dense_dim;  /* D: width of each dense feature */
    int num_sparse; /* S: categorical ids per token */
    int vocab;      /* V: ids are in [0, V) */
} ao_data_shape;

/* dataset.target */
enum ao_target_kind {
    AO_TARGET_RANDOM = 0,  /* uniform soft labels: nothing to learn (the seed's data) */
    AO_TARGET_TEACHER = 1, /* a fixed random function of the inputs: loss can fall */
};

#define AO_DATA_WEIGHT_LO 0.5f
#define AO_DATA_WEIGHT_HI 1.5f

/* The stream of one field (an AO_RNG_DATA_* purpose) of sample g. Generators
 * that fill a whole sample derive it once and draw element by element. */
AO_HD static inline ao_rng_stream ao_data_stream(uint64_t seed, uint32_t purpose, uint64_t g)
{
    return ao_rng_child(ao_rng_root(seed, purpose), g);
}

/* Dense element e in [0, T*F*D) of sample g. */
AO_HD static inline float ao_data_dense(uint64_t seed, uint64_t g, uint64_t e)
{
    return ao_rng_normal(ao_data_stream(seed, AO_RNG_DATA_DENSE, g), e);
}

AO_HD static inline int32_t ao_data_id_from_word(uint32_t x, int vocab)
{
    return (int32_t)ao_rng_u32_below(x, (uint32_t)vocab);
}

/* Id element e in [0, T*S) of sample g. */
AO_HD static inline int32_t ao_data_id(uint64_t seed, uint64_t g, uint64_t e, int vocab)
{
    return ao_data_id_from_word(ao_rng_u32(ao_data_stream(seed, AO_RNG_DATA_IDS, g), e), vocab);
}

AO_HD static inline float ao_data_weight_from_uniform(float u)
{
    return AO_DATA_WEIGHT_LO + (AO_DATA_WEIGHT_HI - AO_DATA_WEIGHT_LO) * u;
}

/* Importance weight of token t of sample g. */
AO_HD static inline float ao_data_weight(uint64_t seed, uint64_t g, uint64_t t)
{
    return ao_data_weight_from_uniform(
        ao_rng_uniform(ao_data_stream(seed, AO_RNG_DATA_WEIGHT, g), t));
}

/* Random soft label of token t of sample g (AO_TARGET_RANDOM). */
AO_HD static inline float ao_data_random_target(uint64_t seed, uint64_t g, uint64_t t)
{
    return ao_rng_uniform(ao_data_stream(seed, AO_RNG_DATA_TARGET, g), t);
}

/* The teacher's target for one token (AO_TARGET_TEACHER), given that token's
 * dense [F, D] and ids [S]:
 *   m      = mean over F of dense[f, :]                       (D values, each ~N(0, 1/F))
 *   lin    = sqrt(F/D) * sum_i u_i m_i, u_i ~ N(0,1) fixed    (~N(0, 1))
 *   emb    = sqrt(S) * mean_s c(ids[s]), c(id) ~ N(0,1) fixed (~N(0, 1))
 *   target = sigmoid(AO_TEACHER_GAIN * (lin + emb) / sqrt(2))
 * u and c depend on the seed only. Both terms are linear in what the model's
 * input stage computes (a linear map of dense, a mean of embeddings), so the
 * model can fit the teacher and the loss falls. Sums in double. */
#define AO_TEACHER_GAIN 2.0

/* The target from the token's two sums, each accumulated in double from 0.0
 * in index order: lin_sum = sum_i u_i (m_i / F), emb_sum = sum_s c(ids[s]).
 * The host's vectorised teacher (teacher.c) forms the sums alike and ends
 * here too. */
AO_HD static inline float ao_data_teacher_finish(double lin_sum, double emb_sum, int num_dense,
                                                 int dense_dim, int num_sparse)
{
    double lin = lin_sum * sqrt((double)num_dense / dense_dim);
    double emb = emb_sum / num_sparse * sqrt((double)num_sparse);
    double z = AO_TEACHER_GAIN * (lin + emb) * 0.70710678118654752440;
    return (float)(1.0 / (1.0 + exp(-z)));
}

/* The token's two sums (ao_data_teacher_finish), with u given
 * (u[i] = ao_rng_normal(stream AO_RNG_TEACHER_DENSE, i), drawn once per batch
 * by the host fill), or NULL: drawn here, per token. */
AO_HD static inline void ao_data_teacher_sums(const float *u, uint64_t seed, int num_dense,
                                              int dense_dim, int num_sparse, const float *dense_tok,
                                              const int32_t *ids_tok, double *lin_sum,
                                              double *emb_sum)
{
    ao_rng_stream us = ao_rng_root(seed, AO_RNG_TEACHER_DENSE);
    ao_rng_stream cs = ao_rng_root(seed, AO_RNG_TEACHER_ID);
    double lin = 0.0;
    for (int i = 0; i < dense_dim; i++) {
        double m = 0.0;
        for (int f = 0; f < num_dense; f++) m += dense_tok[(int64_t)f * dense_dim + i];
        lin += (double)(u ? u[i] : ao_rng_normal(us, (uint64_t)i)) * (m / num_dense);
    }
    double emb = 0.0;
    for (int s = 0; s < num_sparse; s++) emb += ao_rng_normal(cs, (uint64_t)ids_tok[s]);
    *lin_sum = lin;
    *emb_sum = emb;
}

AO_HD static inline float ao_data_teacher_target_u(const float *u, uint64_t seed, int num_dense,
                                                   int dense_dim, int num_sparse,
                                                   const float *dense_tok, const int32_t *ids_tok)
{
    double lin, emb;
    ao_data_teacher_sums(u, seed, num_dense, dense_dim, num_sparse, dense_tok, ids_tok, &lin, &emb);
    return ao_data_teacher_finish(lin, emb, num_dense, dense_dim, num_sparse);
}

AO_HD static inline float ao_data_teacher_target(uint64_t seed, int num_dense, int dense_dim,
                                                 int num_sparse, const float *dense_tok,
                                                 const int32_t *ids_tok)
{
    return ao_data_teacher_target_u(NULL, seed, num_dense, dense_dim, num_sparse, dense_tok,
                                    ids_tok);
}

#ifndef __CUDACC__
/* Checks a shape (every size >= 1, T*F*D and T*S below 2^31). On failure
 * prints one error naming the field and returns AO_EXIT_USAGE; else 0. */
int ao_data_shape_check(const ao_data_shape *shape);

/* Fills a micro-batch of `batch` consecutive samples, global indices
 * first_global_index .. first_global_index + batch - 1, into dense [B,T,F,D],
 * ids [B,T,S], target [B,T], weight [B,T] (caller-owned). Returns 0, or
 * AO_EXIT_USAGE with one error line for a bad shape, target kind or batch. */
int ao_data_fill(const ao_data_shape *shape, uint64_t seed, int target_kind,
                 uint64_t first_global_index, int batch, float *dense, int32_t *ids, float *target,
                 float *weight);
#endif

/* One micro-batch's inputs, device memory (ao_data_fill's layout). */
typedef struct ao_batch {
    const float *dense;   /* [B, T, F, D] */
    const int32_t *ids;   /* [B, T, S] */
    const float *target;  /* [B, T] in [0, 1] */
    const float *weight;  /* [B, T] importance */
    int64_t first_sample; /* global index of the batch's first sample */
} ao_batch;

#endif
