/* Flat padded unit buffers and their shards (DESIGN §6).
 *
 * Every FSDP unit's parameters are one flat fp32 buffer of `numel` elements,
 * padded to `padded` so that each of the `nshards` ranks of a sharding group
 * owns an equal shard of `shard` elements whose start is aligned to `align`
 * elements. All units of a rank live in arenas laid out identically: a "full"
 * arena (full-size gradients; padded elements per unit) and a "shard" arena
 * (master weights, AdamW m and v, reduced gradients; shard elements per unit).
 * Units are placed in the order given (the engine uses backward-completion
 * order, so that DDP buckets of consecutive units are contiguous), which lets
 * one optimizer call or one all-reduce cover several units.
 *
 * Padding elements are zero in parameters and gradients at start; the model
 * never writes them, so they stay zero through reductions and AdamW updates,
 * and a norm or update over a whole arena equals one over the real elements. */
#ifndef AORTA_ENGINE_SHARD_H
#define AORTA_ENGINE_SHARD_H

#include <stddef.h>

#define AO_SHARD_ALIGN 64 /* elements: 256 bytes of fp32, enough for any vector load */

typedef struct ao_unit_span {
    size_t numel;       /* real parameters */
    size_t padded;      /* numel rounded up to a multiple of nshards * align */
    size_t shard;       /* padded / nshards */
    size_t full_offset; /* elements from the start of the full arena */
    size_t shard_offset;
} ao_unit_span;

typedef struct ao_shard_layout {
    int nunits;
    int nshards;     /* ranks a unit is split over (1: replicated) */
    int shard_index; /* this rank's shard within its group */
    size_t align;
    size_t full_total, shard_total; /* arena lengths in elements */
    ao_unit_span *units;            /* indexed by unit id, not by placement order */
} ao_shard_layout;

/* Lay out units with the given element counts (numel[unit]) in the order
 * order[0..nunits) (a permutation of unit ids). Returns 0, or AO_EXIT_USAGE
 * after printing why (nshards < 1, shard_index out of range, align 0, or an
 * order that is not a permutation). */
int ao_shard_layout_init(ao_shard_layout *l, const size_t *numel, const int *order, int nunits,
                         int nshards, int shard_index, size_t align);
void ao_shard_layout_free(ao_shard_layout *l);

/* Copy this rank's shard of a unit's full host buffer (numel elements, the
 * padding being zero) into dst[shard]. */
void ao_shard_extract(const ao_shard_layout *l, int unit, const float *full, float *dst);

#endif
