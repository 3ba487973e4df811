/* One rank's device memory by part (memory.h): the same sizes engine.c's
 * ao_engine_create and make_buffers allocate, in the same order, so that the
 * high-water mark is the one a run measures. */
#include "engine/memory.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "data/loader.h"
#include "engine/engine.h"
#include "engine/shard.h"
#include "model/model.h"
#include "model/sizes.h"

static size_t f32(size_t n)
{
    return (n ? n : 1) * sizeof(float); /* engine.c's dev_zeros */
}

void ao_gather_bufs_of(const ao_shard_layout *lay, int limit, int reshard, int sixteen,
                       ao_gather_bufs *g)
{
    const int nlayers = lay->nunits - 1;
    *g = (ao_gather_bufs){.in_place = lay->nshards == 1 && sixteen};
    if (reshard && limit > 0 && !g->in_place) g->pool = limit < nlayers ? limit : nlayers;
    g->nbufs = 1 + (g->pool ? g->pool : nlayers);
    for (int u = 1; u < lay->nunits; u++)
        if (lay->units[u].padded > g->layer_max) g->layer_max = lay->units[u].padded;
}

size_t ao_gather_buf_floats(const ao_gather_bufs *g, const ao_shard_layout *lay, int b)
{
    return b == 0 ? lay->units[0].padded : g->pool ? g->layer_max : lay->units[b].padded;
}

int ao_engine_memory_plan(const struct ao_config *cfg, int world, int local_world, int gpu,
                          ao_engine_memory *out)
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
    /* the gpu engine casts to param_dtype (engine.c's apply_precision); its
     * model computes with 16-bit operands in bf16 / fp16 mixed precision */
    const int sixteen = gpu && sharded && ao_config_param_dtype(cfg) != AO_PRECISION_FP32;
    const enum ao_precision mp = cfg->training.mixed_precision;
    const int compute16 = gpu && (mp == AO_PRECISION_BF16 || mp == AO_PRECISION_FP16);

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

    ao_model_bytes mb;
    ao_model_device_bytes(&shape, gpu, compute16, SIZE_MAX, &mb);
    out->activations = mb.activations + mb.other;
    out->activations16 = mb.half;
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
    size_t maxn = 0;
    for (int u = 0; u < nunits; u++)
        if (lay.units[u].padded > maxn) maxn = lay.units[u].padded;
    size_t staging = synced ? maxn * sizeof(float) : 0;
    if (sharded) {
        ao_gather_bufs g;
        ao_gather_bufs_of(&lay, cfg->fsdp.limit_all_gathers, reshard, sixteen, &g);
        out->gather_slots = g.nbufs - 1;
        if (sixteen) out->params16 = (S ? S : 1) * 2;
        for (int b = 0; b < g.nbufs; b++) {
            size_t n = ao_gather_buf_floats(&g, &lay, b);
            out->gathered += f32(n) + (sixteen && !g.in_place ? n * 2 : 0);
        }
    }
    /* scalars, per-group squared norms, per-micro-batch losses */
    out->comm = 4 * 64 + (size_t)nunits * sizeof(double) + f32(4 * (size_t)G);
    /* gpu: the engine's two workspaces, and cuBLASLt's for the compute stream,
     * where every GEMM of a step runs */
    if (gpu) out->comm += 2 * AO_ENGINE_GPU_WORKSPACE_BYTES + AO_GEMM_WORKSPACE_BYTES;
    size_t after = out->gathered + out->params16;
    if (staging > after) out->comm += staging - after; /* the peak is at the staging */
    out->total = out->activations + out->activations16 + out->data + out->params + out->optimizer +
                 out->grads + out->baseline + out->comm + after;
    ao_shard_layout_free(&lay);
    return 0;
}
