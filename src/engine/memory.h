/* The device memory one rank of `aorta train` allocates, by part, without a
 * device: the engine's arenas and gathered buffers as engine.c lays them out
 * (shard.h's layout), the model's activations (model.h) and the loader's
 * device buffers (loader.h). `aorta plan` tabulates it over strategies,
 * precisions and accumulation; tests/e2e/plan_cpu.sh checks it against the
 * high-water mark a cpu run measures (mem_peak_mb), within 10 %. */
#ifndef AORTA_ENGINE_MEMORY_H
#define AORTA_ENGINE_MEMORY_H

#include <stddef.h>

#include "core/config.h"

typedef struct ao_engine_memory {
    /* bytes per rank */
    size_t params;    /* P: this rank's fp32 shard (the whole model unsharded) */
    size_t params16;  /* Pw: the 16-bit copy the gathers read (param_dtype) */
    size_t gathered;  /* gathered buffers: the root's and the layers' (fp32 + wire) */
    int gather_slots; /* layer buffers: limit_all_gathers' pool, or one per layer */
    size_t grads;     /* GFULL (full gradients) + ACC + RED */
    size_t optimizer; /* M, V (AdamW moments) */
    size_t baseline;  /* compute-only steps' scratch copies of P, M, V */
    size_t activations;
    size_t data;  /* the loader's device buffers */
    size_t comm;  /* workspaces, scalars, the init broadcast's staging */
    size_t total; /* the sum of the parts: the high-water mark */
} ao_engine_memory;

/* For cfg over world ranks (local_world per node, for hybrid_shard's default
 * group) on a backend that gathers in 16 bits when sixteen_bit_gathers.
 * Returns 0, or AO_EXIT_USAGE after one error (a group size that does not
 * divide the ranks). */
int ao_engine_memory_plan(const struct ao_config *cfg, int world, int local_world,
                          int sixteen_bit_gathers, ao_engine_memory *out);

#endif
