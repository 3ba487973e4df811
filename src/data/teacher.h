/* The teacher's targets of many tokens at once (host only; teacher.c): the
 * values of data.h's ao_data_teacher_target_u bit for bit. Each token's sums
 * keep their order (a double added in index order from 0.0); what runs side
 * by side is independent work: the dense_dim means of one token, and the
 * sums of AO_TEACHER_GROUP tokens. */
#ifndef AORTA_DATA_TEACHER_H
#define AORTA_DATA_TEACHER_H

#include <stddef.h>

#include "data/data.h"
#include "data/rng_simd.h"

#define AO_TEACHER_GROUP 8 /* tokens summed side by side: one AVX-512 vector of doubles */

/* The doubles of scratch ao_teacher_targets_simd needs for this shape. */
size_t ao_teacher_scratch_doubles(int dense_dim, int num_sparse);

/* The teacher's targets of one sample: target[t] for t < T, token t's dense
 * [F, D] at dense + t F D, its id scores c(ids[s]) (ao_rng_normal of stream
 * AO_RNG_TEACHER_ID at the id) at score + t S, u as data.h's u, scratch of
 * ao_teacher_scratch_doubles. With sums given, also sums[2t], sums[2t + 1]
 * = the token's lin and emb sums (ao_data_teacher_sums: what the tests
 * compare bit for bit, as the float target hides most differences in them).
 * Returns -1 when v is not supported, else 0. */
int ao_teacher_targets_simd(enum ao_rng_simd v, const ao_data_shape *shape, const float *u,
                            const float *dense, const float *score, double *scratch, float *target,
                            double *sums);

#endif
