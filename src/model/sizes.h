/* The device buffers each model backend allocates, sized without a device.
 * The backends allocate exactly these sizes (model_cpu.c, model_cuda.c,
 * operand16_cuda.c and the kernels' workspaces) and `aorta plan`
 * (engine/memory.c) adds them up, so the plan cannot drift from the code.
 * Plain C; the kernels (.cu) include it for the inline layouts below. */
#ifndef AORTA_MODEL_SIZES_H
#define AORTA_MODEL_SIZES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ao_model_shape;

/* Doubles of workspace the kernels' two-pass reductions need
 * (kernels_cuda.h's ao_cuda_sum_squares; the engine's workspace). */
#define AO_CUDA_REDUCE_PARTIALS 1024

/* 16-bit operand copies start on 128-byte boundaries: n elements rounded up
 * to a multiple of AO_OP16_ALIGN. */
#define AO_OP16_ALIGN 64
static inline size_t ao_op16_align(size_t n)
{
    return (n + AO_OP16_ALIGN - 1) / AO_OP16_ALIGN * AO_OP16_ALIGN;
}

/* A dropout mask: 2 bits an element, each row padded to whole bytes. */
static inline size_t ao_dropout_mask_bytes(int rows, size_t per_row)
{
    return (size_t)(rows > 0 ? rows : 0) * ((per_row + 3) / 4);
}

static inline size_t ao_align256(size_t n)
{
    return (n + 255) / 256 * 256;
}

/* The embedding backward's sort of its `count` ids: keys and positions, in
 * and out (uint32 each, 256-byte aligned), before CUB's temporary storage. */
static inline size_t ao_embedding_sort_arrays_bytes(size_t count)
{
    return 4 * ao_align256(count * sizeof(uint32_t));
}

/* The cuda backend's buffers for one shape (model_cuda.c's cuda_create and
 * ao_model_cuda_set_compute). */
typedef struct ao_model_cuda_sizes {
    size_t extra_floats;   /* the arena's own part: every layer's dropped attention probabilities */
    size_t scratch_floats; /* the arena's backward scratch (the largest backward's) */
    size_t arena_floats;   /* the whole fp32 arena (ao_model_acts_floats) */
    size_t attn_scratch_floats; /* attention backward: dqkv, dctx, dP */
    size_t hidden_mask_bytes;   /* a layer's FFN hidden dropout mask (0: no dropout) */
    size_t probs_mask_bytes;    /* a layer's attention-probability dropout mask */
    size_t stats_bytes;         /* every layer's softmax statistics (max, sum) */
    size_t sort_count;          /* ids the embedding backward sorts */
    size_t w16_elements;        /* 16-bit modes: the largest pass's staged weights */
    size_t outside_elements;    /* 16-bit modes: operands outside the arena (dense input) */
} ao_model_cuda_sizes;

void ao_model_cuda_sizes_of(const struct ao_model_shape *s, ao_model_cuda_sizes *z);

/* The model's device bytes by part. */
typedef struct ao_model_bytes {
    size_t activations; /* the fp32 arena: saved activations, the backend's own, scratch */
    size_t half;        /* the 16-bit operand copies: the arena's twin, weights, others */
    size_t other;       /* dropout masks, softmax statistics, the embedding sort's workspace */
} ao_model_bytes;

/* What ao_model_create (and, with compute16, the first 16-bit
 * ao_model_cuda_set_compute) allocates on the cpu backend, or with gpu the
 * gpu backend. CUB's sort storage is known only on the device: sort_temp
 * bytes of it, or (SIZE_MAX) ao_embedding_sort_temp_estimate's. */
void ao_model_device_bytes(const struct ao_model_shape *s, int gpu, int compute16, size_t sort_temp,
                           ao_model_bytes *out);

/* CUB's radix sort of `count` key/value pairs: its alternate key and value
 * buffers (its histograms and tile counters are small beside them). */
size_t ao_embedding_sort_temp_estimate(size_t count);

#ifdef __cplusplus
}
#endif

#endif
