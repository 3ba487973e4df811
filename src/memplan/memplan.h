/* `aorta plan`: device memory per rank for each sharding strategy x
 * precision x gradient accumulation, by part (engine/memory.h), which fit a
 * given device memory, and the largest batch each allows. The ZeRO stage
 * arithmetic of seed 004 with this engine's own buffer sizes: parameters
 * (shard, 16-bit copy, gathered buffers with limit_all_gathers' slots),
 * gradients, optimizer state, activations at peak, data and communication
 * buffers. */
#ifndef AORTA_MEMPLAN_MEMPLAN_H
#define AORTA_MEMPLAN_MEMPLAN_H

#include <stddef.h>
#include <stdio.h>

#include "core/config.h"

typedef struct ao_memplan_opts {
    int world;         /* ranks */
    int local_world;   /* ranks per node (hybrid_shard's default group) */
    int cuda;          /* plan the cuda backend (16-bit gathers and activations) */
    size_t device_mem; /* bytes per device; 0: no fit column */
    int json;
    FILE *out;
} ao_memplan_opts;

/* cfg is the base (its model, batch, data and fsdp settings); the rows vary
 * strategy, precision and accumulation on a copy. Returns 0 or AO_EXIT_USAGE
 * after one error. */
int ao_memplan_run(struct ao_config *cfg, const ao_memplan_opts *o);

#endif
