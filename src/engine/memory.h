/* The device memory one rank of `aorta train` allocates, by part, without a
 * device: the engine's arenas and gathered buffers as engine.c lays them out
 * (shard.h's layout; ao_gather_bufs_of, which make_buffers calls too), the
 * model's buffers on the backend (model/sizes.h, which the model backends
 * allocate from) and the loader's device buffers (loader.h). `aorta plan` tabulates it over
 * strategies, precisions and accumulation; tests/e2e/plan_cpu.sh checks it against the high-water
 * mark a cpu run measures (mem_peak_mb), within 10 %. */
#ifndef AORTA_ENGINE_MEMORY_H
#define AORTA_ENGINE_MEMORY_H

#include <stddef.h>

#include "core/config.h"
#include "engine/shard.h"
#include "model/sizes.h"

/* The gpu engine's workspace, one for each stream its reductions run on (the
 * compute and the reduction streams): the sum of squares' partials, then the
 * clip coefficient (engine_cuda.c). */
#define AO_ENGINE_GPU_WORKSPACE_BYTES (AO_CUDA_REDUCE_PARTIALS * sizeof(double) + sizeof(float))

typedef struct ao_engine_memory {
    /* bytes per rank */
    size_t params;        /* P: this rank's fp32 shard (the whole model unsharded) */
    size_t params16;      /* Pw: the 16-bit copy the gathers read (param_dtype) */
    size_t gathered;      /* gathered buffers: the root's and the layers' (fp32 + wire) */
    int gather_slots;     /* layer buffers: limit_all_gathers' pool, or one per layer */
    size_t grads;         /* GFULL (full gradients) + ACC + RED */
    size_t optimizer;     /* M, V (AdamW moments) */
    size_t baseline;      /* compute-only steps' scratch copies of P, M, V */
    size_t activations;   /* the model's fp32 activations, scratch, dropout masks, workspaces */
    size_t activations16; /* its 16-bit operand copies (gpu backend, 16-bit compute) */
    size_t data;          /* the loader's device buffers */
    size_t comm;          /* workspaces, scalars, the init broadcast's staging */
    size_t total;         /* the sum of the parts: the high-water mark */
} ao_engine_memory;

/* For cfg over world ranks (local_world per node, for hybrid_shard's default
 * group) on the cpu backend or, with gpu, the gpu backend (16-bit gathers in
 * fsdp.param_dtype, 16-bit GEMM operands with training.mixed_precision).
 * Returns 0, or AO_EXIT_USAGE after one error (a group size that does not
 * divide the ranks). */
int ao_engine_memory_plan(const struct ao_config *cfg, int world, int local_world, int gpu,
                          ao_engine_memory *out);

/* A sharded engine's gathered buffers: buffer 0 the root's, then each
 * layer's own (shard_grad_op keeps them from forward to backward; no
 * limit_all_gathers) or a pool of `limit` slots of the largest layer's size. */
typedef struct ao_gather_bufs {
    int nbufs;    /* 1 + pool, or 1 + layers */
    int pool;     /* pooled slots (0: each layer its own) */
    int in_place; /* one rank a group gathering in 16 bits: a unit's wire is its slice of Pw */
    size_t layer_max;
} ao_gather_bufs;

void ao_gather_bufs_of(const ao_shard_layout *lay, int limit_all_gathers, int reshard_after_forward,
                       int sixteen_bit_gathers, ao_gather_bufs *g);
/* Buffer b's elements. */
size_t ao_gather_buf_floats(const ao_gather_bufs *g, const ao_shard_layout *lay, int b);

#endif
