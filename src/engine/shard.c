/* Flat padded unit buffers and shards: the arithmetic, in one place. */
#include "engine/shard.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int ao_shard_layout_init(ao_shard_layout *l, const size_t *numel, const int *order, int nunits,
                         int nshards, int shard_index, size_t align)
{
    memset(l, 0, sizeof *l);
    if (nunits < 1 || nshards < 1 || shard_index < 0 || shard_index >= nshards || align == 0) {
        ao_error("shard layout", "%d units over %d shards (index %d, align %zu) is not a layout",
                 nunits, nshards, shard_index, align);
        return AO_EXIT_USAGE;
    }
    char *seen = ao_calloc((size_t)nunits, 1);
    for (int i = 0; i < nunits; i++) {
        if (order[i] < 0 || order[i] >= nunits || seen[order[i]]) {
            free(seen);
            ao_error("shard layout", "the unit order is not a permutation of 0..%d", nunits - 1);
            return AO_EXIT_USAGE;
        }
        seen[order[i]] = 1;
    }
    free(seen);
    l->nunits = nunits;
    l->nshards = nshards;
    l->shard_index = shard_index;
    l->align = align;
    l->units = ao_calloc((size_t)nunits, sizeof *l->units);
    size_t quantum = (size_t)nshards * align;
    for (int i = 0; i < nunits; i++) {
        ao_unit_span *u = &l->units[order[i]];
        u->numel = numel[order[i]];
        size_t padded = (u->numel + quantum - 1) / quantum * quantum;
        u->padded = padded ? padded : quantum; /* an empty unit still has a shard */
        u->shard = u->padded / (size_t)nshards;
        u->full_offset = l->full_total;
        u->shard_offset = l->shard_total;
        l->full_total += u->padded;
        l->shard_total += u->shard;
    }
    return 0;
}

void ao_shard_layout_free(ao_shard_layout *l)
{
    free(l->units);
    l->units = NULL;
}

void ao_shard_extract(const ao_shard_layout *l, int unit, const float *full, float *dst)
{
    const ao_unit_span *u = &l->units[unit];
    size_t begin = (size_t)l->shard_index * u->shard;
    size_t have = begin < u->numel ? u->numel - begin : 0;
    if (have > u->shard) have = u->shard;
    memcpy(dst, full + begin, have * sizeof *dst);
    memset(dst + have, 0, (u->shard - have) * sizeof *dst);
}
