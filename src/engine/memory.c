/* One rank's device memory by part (memory.h): the same sizes engine.c's
 * ao_engine_create and make_buffers allocate, in the same order, so that the
 * high-water mark is the one a run measures. */
#include "engine/memory.h"

#include <stdlib.h>

#include "core/error.h"
#include "data/loader.h"
#include "engine/engine.h"
#include "engine/shard.h"
#include "model/model.h"

static size_t f32(size_t n)
{
    return (n ? n : 1) * sizeof(float); /* engine.c's dev_zeros */
}

int ao_engine_memory_plan(const struct ao_config *cfg, int world, int local_world,
                          int sixteen_bit_gathers, ao_engine_memory *out)
{
    *out = (ao_engine_memory){0};
    int rc = ao_engine_check_config(cfg, world, local_world);
    if (rc) return rc;
    const int sharded =
        cfg->distributed.mode == AO_MODE_FSDP && cfg->fsdp.sharding_strategy != AO_SHARD_NONE;
    const int hybrid = sharded && cfg->fsdp.sharding_strategy == AO_SHARD_HYBRID;
    int group = world;
    if (hybrid) {
        group = cfg->fsdp.shard_group_size ? cfg->fsdp.shard_group_size : local_world;
        if (group < 1) group = 1;
    }
    const int G = cfg->training.gradient_accumulation;
    const int solo = world == 1 && G == 1;
    const int synced = cfg->fsdp.sync_module_states && world > 1;
    const int reshard = sharded && cfg->fsdp.sharding_strategy != AO_SHARD_GRAD_OP;
    const int sixteen =
        sixteen_bit_gathers && sharded && ao_config_param_dtype(cfg) != AO_PRECISION_FP32;

    ao_model_shape shape;
    ao_model_shape_of(cfg, &shape);
    const int nunits = ao_model_units(&shape), nlayers = nunits - 1;
    size_t *numel = ao_calloc((size_t)nunits, sizeof *numel);
    int *order = ao_calloc((size_t)nunits, sizeof *order);
    for (int u = 0; u < nunits; u++) numel[u] = ao_model_unit_params(&shape, u);
    for (int i = 0; i < nunits; i++) order[i] = i < nlayers ? nlayers - i : 0;
    ao_shard_layout lay;
    rc = ao_shard_layout_init(&lay, numel, order, nunits, sharded ? group : 1, 0, AO_SHARD_ALIGN);
    free(numel);
    free(order);
    if (rc) return rc;
    const size_t S = lay.shard_total, F = lay.full_total;

    out->activations = ao_model_device_bytes(&shape);
    ao_loader_config lc = {.data = {.seq_len = cfg->dataset.sequence_length,
                                    .num_dense = cfg->dataset.num_dense_features,
                                    .dense_dim = cfg->dataset.dense_dim,
                                    .num_sparse = cfg->dataset.sparse_features},
                           .batch = cfg->training.batch_size};
    out->data = (size_t)ao_loader_depth_for(cfg->dataset.placement, cfg->dataloader.num_workers) *
                ao_loader_slot_bytes(&lc);
    out->params = f32(S);
    out->optimizer = 2 * f32(S);
    out->grads = f32(F) + (solo ? 0 : f32(S)) + f32(S);
    out->baseline = cfg->training.baseline_steps > 0 ? 3 * f32(S) : 0;
    /* rank 0's init broadcast stages the largest unit, freed before the
     * gathered buffers are made */
    size_t maxn = 0, layer_max = 0;
    for (int u = 0; u < nunits; u++) {
        if (lay.units[u].padded > maxn) maxn = lay.units[u].padded;
        if (u > 0 && lay.units[u].padded > layer_max) layer_max = lay.units[u].padded;
    }
    size_t staging = synced ? maxn * sizeof(float) : 0;
    if (sharded) {
        int limit = cfg->fsdp.limit_all_gathers;
        const int in_place = group == 1 && sixteen;
        const int pooled = reshard && limit > 0 && !in_place;
        const int pool = pooled ? (limit < nlayers ? limit : nlayers) : 0;
        out->gather_slots = pooled ? pool : nlayers;
        const int nbufs = 1 + out->gather_slots;
        if (sixteen) out->params16 = (S ? S : 1) * 2;
        for (int b = 0; b < nbufs; b++) {
            size_t n = b == 0 ? lay.units[0].padded : pooled ? layer_max : lay.units[b].padded;
            out->gathered += f32(n) + (sixteen && !in_place ? n * 2 : 0);
        }
    }
    /* scalars, per-group squared norms, per-micro-batch losses */
    out->comm = 4 * 64 + (size_t)nunits * sizeof(double) + f32(4 * (size_t)G);
    size_t after = out->gathered + out->params16;
    if (staging > after) out->comm += staging - after; /* the peak is at the staging */
    out->total = out->activations + out->data + out->params + out->optimizer + out->grads +
                 out->baseline + out->comm + after;
    ao_shard_layout_free(&lay);
    return 0;
}
