/* The sharding engine's setup: the configuration checks, the communicators
 * of each lane, the shard layout, reduction groups and gathered buffers, and
 * create / destroy. The schedule of an iteration is engine.c. */
#include <stdlib.h>
#include <string.h>

#include "comm/wait.h"
#include "core/error.h"
#include "core/text.h"
#include "engine/engine_impl.h"
#include "engine/memory.h"
#include "engine/test_hooks.h"
#include "launch/launch.h"
#include "runtime/backend_table.h"

/* ---- configuration ------------------------------------------------------- */

static int group_size_for(const struct ao_config *cfg, int world, int local_world)
{
    int g = cfg->fsdp.shard_group_size ? cfg->fsdp.shard_group_size : local_world;
    return g < 1 ? 1 : g;
}

static int is_sharded(const struct ao_config *cfg)
{
    return cfg->distributed.mode == AO_MODE_FSDP && cfg->fsdp.sharding_strategy != AO_SHARD_NONE;
}

int ao_engine_compute_alone(const struct ao_config *cfg, int world_size)
{
    return world_size == 1 || !cfg->distributed.enable_overlap;
}

int ao_engine_check_config(const struct ao_config *cfg, int world, int local_world)
{
    if (is_sharded(cfg) && cfg->fsdp.sharding_strategy == AO_SHARD_HYBRID) {
        int g = group_size_for(cfg, world, local_world);
        if (g > world || world % g != 0) {
            ao_error("fsdp.shard_group_size",
                     "hybrid_shard needs a group size that divides the %d ranks; %d does not%s",
                     world, g, cfg->fsdp.shard_group_size ? "" : " (0 = the ranks of one node)");
            return AO_EXIT_USAGE;
        }
    }
    return 0;
}

/* ---- hybrid groups ------------------------------------------------------- */

/* Each rank's node (launch/nodes.c: NCCL's host), gathered over the root
 * communicator: node_of[r] numbers the nodes in the order of their lowest
 * rank. Returns the number of nodes. */
static int gather_nodes(ao_engine *e, ao_comm *root, int *node_of)
{
    const int W = e->world;
    uint64_t *dev = ao_dev_alloc(e->dev, (size_t)(W + 1) * sizeof *dev);
    uint64_t *host = ao_host_alloc(e->dev, (size_t)(W + 1) * sizeof *host);
    host[W] = ao_launch_node_key();
    ao_stream *s = ao_comm_stream(root);
    ao_copy_async(e->dev, dev + W, host + W, sizeof *dev, AO_H2D, s);
    ao_allgather(root, dev + W, dev, 1, AO_U64);
    ao_copy_async(e->dev, host, dev, (size_t)W * sizeof *host, AO_D2H, s);
    ao_wait_stream_sync(s, "gathering each rank's node");
    int nodes = 0;
    for (int r = 0; r < W; r++) {
        node_of[r] = -1;
        for (int q = 0; q < r && node_of[r] < 0; q++)
            if (host[q] == host[r]) node_of[r] = node_of[q];
        if (node_of[r] < 0) node_of[r] = nodes++;
    }
    ao_host_free(e->dev, host);
    ao_dev_free(e->dev, dev);
    return nodes;
}

/* "0,1" into buf: the ranks r with in(r) (at most n bytes). */
static void list_ranks(const int *color, int W, int want, char *buf, size_t n)
{
    buf[0] = '\0';
    for (int r = 0; r < W; r++)
        if (color[r] == want) ao_appendf(buf, n, "%s%d", buf[0] ? "," : "", r);
}

/* The colors of hybrid_shard's splits. fsdp.shard_group_size 0 (the ranks of
 * one node) makes each node a shard group and the ranks at the same place
 * in every node a replica group, so that only the replica all-reduce crosses
 * the link between nodes, whatever order the launcher numbered the ranks in.
 * An explicit size groups consecutive ranks. Fills e->group_size, replicas,
 * shard_index and groups_desc; AO_EXIT_USAGE when the nodes differ in size. */
static int hybrid_colors(ao_engine *e, const ao_engine_setup *s, int *shard, int *replica)
{
    const int W = e->world;
    int *node_of = ao_calloc((size_t)W, sizeof *node_of);
    int nodes = gather_nodes(e, s->root, node_of);
    int *place = ao_calloc((size_t)W, sizeof *place),
        *size = ao_calloc((size_t)nodes, sizeof *size);
    for (int r = 0; r < W; r++) place[r] = size[node_of[r]]++;
    int rc = 0, g = e->cfg->fsdp.shard_group_size;
    if (g == 0) {
        for (int n = 1; n < nodes && !rc; n++)
            if (size[n] != size[0]) {
                ao_error("fsdp.shard_group_size",
                         "0 (the ranks of one node) needs as many ranks on every node: node 0 "
                         "has %d, node %d has %d",
                         size[0], n, size[n]);
                rc = AO_EXIT_USAGE;
            }
        g = size[0];
        if (!rc && g != s->ri->local_world_size && e->rank == 0)
            ao_warn("the launcher puts %d ranks on a node, their hosts %d: hybrid_shard's groups "
                    "follow the hosts (NCCL_HOSTID, else the host name)",
                    s->ri->local_world_size, g);
        for (int r = 0; r < W; r++) {
            shard[r] = node_of[r];
            replica[r] = place[r];
        }
        e->shard_index = place[e->rank];
    } else {
        int spans = 0;
        for (int r = 0; r < W; r++) {
            shard[r] = r / g;
            replica[r] = r % g;
            spans |= node_of[r] != node_of[r / g * g];
        }
        e->shard_index = e->rank % g;
        if (spans && e->rank == 0)
            ao_warn("fsdp.shard_group_size %d puts ranks of different nodes in one shard group: "
                    "its all-gathers and reduce-scatters cross the link between nodes (0: the "
                    "ranks of one node)",
                    g);
    }
    e->group_size = g;
    e->replicas = W / g;
    char sg[64], rg[64];
    list_ranks(shard, W, shard[e->rank], sg, sizeof sg);
    list_ranks(replica, W, replica[e->rank], rg, sizeof rg);
    snprintf(e->groups_desc, sizeof e->groups_desc,
             "; shard group ranks %s (node %d of %d), replica group ranks %s", sg, node_of[e->rank],
             nodes, rg);
    free(node_of);
    free(place);
    free(size);
    return rc;
}

/* ---- communicators ------------------------------------------------------- */

static ao_comm *keep_comm(ao_engine *e, ao_comm *c)
{
    if (c) e->comms[e->ncomms++] = c;
    return c;
}

static int make_comms(ao_engine *e, const ao_engine_setup *s)
{
    const struct ao_config *cfg = e->cfg;
    ao_stream_id sids[NLANES] = {AO_STREAM_ALLGATHER, AO_STREAM_REDUCESCATTER, AO_STREAM_ALLREDUCE};
    if (!cfg->distributed.enable_overlap)
        for (int l = 0; l < NLANES; l++) sids[l] = AO_STREAM_COMPUTE;
    else if (!cfg->distributed.comm_per_stream)
        for (int l = 0; l < NLANES; l++) sids[l] = AO_STREAM_ALLGATHER;
    for (int l = 0; l < NLANES; l++) {
        lane *ln = &e->lanes[l];
        ln->sid = sids[l];
        ln->s = e->streams[sids[l]];
        for (int k = 0; k < l; k++)
            if (e->lanes[k].sid == sids[l]) ln->world = e->lanes[k].world;
        /* Splits inherit the root's settings (CTAs, timeout). */
        if (!ln->world) ln->world = keep_comm(e, ao_comm_split(s->root, ln->s, 0, e->rank));
        if (!ln->world) return AO_EXIT_FAIL;
    }
    e->shard_index = e->sharded ? e->rank : 0;
    if (!e->hybrid) return 0;
    int *colors = ao_calloc(2 * (size_t)e->world, sizeof *colors);
    int rc = hybrid_colors(e, s, colors, colors + e->world);
    /* Splits are collective over the world: every rank makes them in the same
     * order (shard groups of AG then RS, then the replica group of AR). */
    for (int l = 0; l < NLANES && !rc; l++) {
        lane *ln = &e->lanes[l];
        int replica = l == LANE_AR;
        for (int k = 0; k < l; k++)
            if (e->lanes[k].sid == ln->sid && (k == LANE_AR) == replica)
                ln->group = e->lanes[k].group;
        if (ln->group) continue;
        int color = colors[(replica ? e->world : 0) + e->rank];
        ln->group = keep_comm(e, ao_comm_split(ln->world, ln->s, color, e->rank));
        if (!ln->group) rc = AO_EXIT_FAIL;
    }
    free(colors);
    return rc;
}

/* ---- layout and buffers -------------------------------------------------- */

static void make_groups(ao_engine *e)
{
    int n = e->nunits;
    e->groups = ao_calloc((size_t)n, sizeof *e->groups);
    /* Placement order: L, L-1, ..., 1, root. */
    double cap = e->cfg->distributed.bucket_cap_mb * 1048576.0;
    int g = -1;
    double bytes = 0;
    for (int i = 0; i < n; i++) {
        int u = i < e->nlayers ? e->nlayers - i : 0;
        const ao_unit_span *sp = &e->lay.units[u];
        double ub = (double)sp->padded * sizeof(float);
        int open_new = g < 0 || e->sharded || bytes + ub > cap || u == 0;
        if (open_new) {
            g++;
            e->groups[g].first_unit = u;
            e->groups[g].full_off = sp->full_offset;
            e->groups[g].shard_off = sp->shard_offset;
            bytes = 0;
        }
        rgroup *G = &e->groups[g];
        G->last_unit = u;
        G->trigger = u;
        G->full_len += sp->padded;
        G->shard_len += sp->shard;
        bytes += ub;
        e->units[u].group = g;
    }
    e->ngroups = g + 1;
    for (int i = 0; i < e->ngroups; i++) {
        e->groups[i].grad_ready = ao_event_create(e->dev);
        e->groups[i].mid = ao_event_create(e->dev);
        e->groups[i].done = ao_event_create(e->dev);
        e->groups[i].zeroed = ao_event_create(e->dev);
    }
}

static float *dev_zeros(ao_engine *e, size_t n)
{
    size_t bytes = (n ? n : 1) * sizeof(float);
    float *p = ao_dev_alloc(e->dev, bytes);
    ao_memset_async(e->dev, p, 0, bytes, e->compute);
    return p;
}

static void make_buffers(ao_engine *e)
{
    const struct ao_config *cfg = e->cfg;
    size_t S = e->lay.shard_total, F = e->lay.full_total;
    e->P = dev_zeros(e, S);
    e->M = dev_zeros(e, S);
    e->V = dev_zeros(e, S);
    e->GFULL = dev_zeros(e, F);
    e->ACC = e->solo ? e->GFULL : dev_zeros(e, S); /* solo: S == F, offsets alike */
    e->RED = dev_zeros(e, S);
    if (cfg->training.baseline_steps > 0)
        for (int i = 0; i < 3; i++) e->scratch[i] = dev_zeros(e, S);

    /* Initial weights: the full unit on the host, this rank's shard to P.
     * With fsdp.sync_module_states (as FSDP's) rank 0 draws each unit and
     * broadcasts it to every rank; without, every rank draws it from
     * dataset.seed itself, which gives the same values. */
    size_t maxn = 0;
    for (int u = 0; u < e->nunits; u++)
        if (e->lay.units[u].padded > maxn) maxn = e->lay.units[u].padded;
    const lane *ar = &e->lanes[LANE_AR];
    float *full = ao_host_alloc(e->dev, maxn * sizeof *full);
    float *shard = ao_host_alloc(e->dev, maxn * sizeof *shard);
    float *full_dev = e->synced ? ao_dev_alloc(e->dev, maxn * sizeof *full_dev) : NULL;
    for (int u = 0; u < e->nunits; u++) {
        const ao_unit_span *sp = &e->lay.units[u];
        memset(full, 0, maxn * sizeof *full);
        if (!e->synced || e->rank == 0) ao_model_init_unit(&e->shape, u, full);
        if (e->synced) {
            size_t bytes = sp->padded * sizeof *full;
            ao_copy_async(e->dev, full_dev, full, bytes, AO_H2D, ar->s);
            ao_broadcast(ar->world, full_dev, full_dev, sp->padded, AO_F32, 0);
            ao_copy_async(e->dev, full, full_dev, bytes, AO_D2H, ar->s);
            ao_wait_stream_sync(ar->s, "fsdp.sync_module_states: rank 0's initial weights");
        }
        ao_shard_extract(&e->lay, u, full, shard);
        ao_copy_async(e->dev, e->P + sp->shard_offset, shard, sp->shard * sizeof *shard, AO_H2D,
                      e->compute);
        /* the staging buffer is reused */
        ao_wait_stream_sync(e->compute, "device synchronisation (initial weights)");
    }
    ao_host_free(e->dev, full);
    ao_host_free(e->dev, shard);
    if (full_dev) ao_dev_free(e->dev, full_dev);
    /* compute_only's update runs on copies of P, M and V (zero here), made
     * once: engine.c, optimizer */
    if (e->scratch[0])
        ao_copy_async(e->dev, e->scratch[0], e->P, (S ? S : 1) * sizeof *e->P, AO_D2D, e->compute);

    for (int u = 0; u < e->nunits; u++) {
        e->units[u].own_buf = -1;
        e->units[u].cur_buf = -1;
        e->units[u].ag_done = ao_event_create(e->dev);
    }
    if (!e->sharded) {
        for (int u = 0; u < e->nunits; u++)
            e->units[u].params = e->P + e->lay.units[u].shard_offset;
        return;
    }
    /* Gathered buffers (memory.h, as `aorta plan` counts them): the root's
     * own; the layers' own or a pool. */
    ao_gather_bufs g;
    ao_gather_bufs_of(&e->lay, cfg->fsdp.limit_all_gathers, e->reshard_after_forward,
                      e->gather_type != AO_F32, &g);
    const int in_place = g.in_place, pooled = g.pool > 0;
    e->nbufs = g.nbufs;
    e->bufs = ao_calloc((size_t)e->nbufs, sizeof *e->bufs);
    if (e->gather_type != AO_F32)
        e->Pw = ao_dev_alloc(e->dev, (S ? S : 1) * ao_dtype_size(e->gather_type));
    for (int b = 0; b < e->nbufs; b++) {
        size_t n = ao_gather_buf_floats(&g, &e->lay, b);
        e->bufs[b].buf = dev_zeros(e, n);
        if (e->gather_type != AO_F32) {
            /* in place: buffer b is unit b's, its wire that unit's shard */
            e->bufs[b].wire_in_pw = in_place;
            e->bufs[b].wire = in_place ? (char *)e->Pw + e->lay.units[b].shard_offset *
                                                             ao_dtype_size(e->gather_type)
                                       : ao_dev_alloc(e->dev, n * ao_dtype_size(e->gather_type));
            /* buf is cast from wire before each unit's compute and both are
             * freed together (release): the model's 16-bit GEMMs read wire */
            if (e->backend->share_params16)
                e->backend->share_params16(e->model, e->bufs[b].buf, e->bufs[b].wire,
                                           e->gather_type, n);
        }
    }
    if (e->gather_type != AO_F32) {
        /* the wire copy of the initial shards; each optimizer step then
         * writes it with the update (the backend's adamw) */
        const size_t all[1][2] = {{0, S}};
        e->backend->cast(e->compute, e->Pw, e->gather_type, e->P, AO_F32, all, 1);
    }
    e->units[0].own_buf = 0;
    for (int u = 1; u < e->nunits; u++) e->units[u].own_buf = pooled ? -1 : u;
    e->pool_first = 1;
    e->pool_size = g.pool;
    e->pool_next = 0;
}

/* ---- create / destroy ---------------------------------------------------- */

_Static_assert(offsetof(struct ao_engine_backend, device_backend) == 0, "backend_table.h");

static const struct ao_engine_backend *backend_for(ao_device *dev)
{
    const struct ao_engine_backend *backend = AO_BACKEND_FIND(ao_engine, dev);
    if (backend) return backend;
    ao_error("train", "the sharding engine has no kernels for the %s backend in this build",
             ao_device_backend(dev));
    ao_hint("use --backend cpu");
    return NULL;
}

/* Precision (DESIGN §6). Storage, master weights, optimizer state and
 * reductions are fp32. training.mixed_precision bf16/fp16 makes the model's
 * GEMMs multiply bf16/fp16 copies of their operands with fp32 accumulation
 * and output (autocast's GEMM numerics, model_cuda.c; training.tf32 runs fp32
 * operands through TF32 when mixed_precision is none), and fp16 adds dynamic
 * loss scaling. fsdp.param_dtype bf16/fp16 gathers the parameters in that
 * type (half the all-gather bytes) and casts them back to fp32 for compute,
 * as FSDP's MixedPrecision does. What the backend cannot do runs as fp32 with
 * one warning; fsdp.reduce_dtype other than fp32 is not in this build
 * (warned). Sets e->gather_type and the loss scaler. */
static void apply_precision(ao_engine *e)
{
    const struct ao_config *cfg = e->cfg;
    const struct ao_engine_backend *be = e->backend;
    char fp32[256] = "", other[256] = "";
    enum ao_precision mp = cfg->training.mixed_precision;
    ao_compute_mode mode = mp == AO_PRECISION_BF16   ? AO_COMPUTE_BF16
                           : mp == AO_PRECISION_FP16 ? AO_COMPUTE_F16
                           : cfg->training.tf32      ? AO_COMPUTE_TF32
                                                     : AO_COMPUTE_DEFAULT;
    if (mode != AO_COMPUTE_DEFAULT) {
        if (be->set_compute)
            be->set_compute(e->model, mode);
        else if (mode == AO_COMPUTE_TF32)
            ao_appendf(fp32, sizeof fp32, " training.tf32=true");
        else
            ao_appendf(fp32, sizeof fp32, " training.mixed_precision=%s", ao_precision_name(mp));
    }
    /* fp16's dynamic loss scaling runs on every backend (exact on fp32
     * storage: the scale is a power of two), so the cpu backend tests it. */
    e->scaling = mp == AO_PRECISION_FP16;
    ao_loss_scaler_init(&e->scaler, (float)cfg->training.loss_scale);
    e->scaler_iter = -1;
    e->gather_type = AO_F32;
    enum ao_precision pd = ao_config_param_dtype(cfg);
    if (pd != AO_PRECISION_FP32) {
        if (be->cast)
            e->gather_type = pd == AO_PRECISION_BF16 ? AO_BF16 : AO_F16;
        else
            ao_appendf(fp32, sizeof fp32, " fsdp.param_dtype=%s", ao_precision_name(pd));
    }
    if (cfg->fsdp.reduce_dtype != AO_PRECISION_FP32)
        ao_appendf(other, sizeof other,
                   " fsdp.reduce_dtype=%s runs as fp32 (reductions are fp32 in this build)",
                   ao_precision_name(cfg->fsdp.reduce_dtype));
    if (e->rank != 0) return;
    if (fp32[0])
        ao_warn("the %s backend computes and communicates in fp32 only:%s run as fp32",
                be->device_backend, fp32);
    if (other[0]) ao_warn("precision:%s", other);
}

ao_engine *ao_engine_create(const ao_engine_setup *s, int *rc)
{
    const struct ao_config *cfg = s->cfg;
    *rc = ao_engine_check_config(cfg, s->ri->world_size, s->ri->local_world_size);
    if (*rc) return NULL;
    const struct ao_engine_backend *backend = backend_for(s->dev);
    if (!backend) {
        *rc = AO_EXIT_USAGE;
        return NULL;
    }
    ao_engine *e = ao_calloc(1, sizeof *e);
    e->cfg = cfg;
    e->dev = s->dev;
    e->backend = backend;
    for (int i = 0; i < AO_NSTREAMS; i++) e->streams[i] = s->streams[i];
    e->compute = s->streams[AO_STREAM_COMPUTE];
    e->model = s->model;
    e->shape = *s->shape;
    e->loader = s->loader;
    e->tl = s->timeline;
    e->rank = s->ri->rank;
    e->world = s->ri->world_size;
    e->sharded = is_sharded(cfg);
    e->solo = e->world == 1 && cfg->training.gradient_accumulation == 1;
    e->overwrite = e->solo && ao_model_overwrite_grads(e->model);
    e->predraw = e->solo && ao_model_predraws(e->model);
    e->synced = cfg->fsdp.sync_module_states && e->world > 1;
    e->hybrid = e->sharded && cfg->fsdp.sharding_strategy == AO_SHARD_HYBRID;
    e->reshard_after_forward = e->sharded && cfg->fsdp.sharding_strategy != AO_SHARD_GRAD_OP;
    e->group_size = e->hybrid ? group_size_for(cfg, e->world, s->ri->local_world_size) : e->world;
    e->replicas = e->sharded ? e->world / e->group_size : e->world;
    e->nunits = ao_model_units(&e->shape);
    e->nlayers = e->nunits - 1;
    e->pend_step = -1;
    e->timing = cfg->profiling.timing;
    e->test_slow_ms = ao_test_slow_rank_ms(e->rank);
    e->test_late_ms = ao_test_late_host_ms(e->rank);
    e->test_hang_step = ao_test_hang_rank_step(e->rank);
    if (e->backend->set_dependent_launch)
        e->backend->set_dependent_launch(ao_engine_compute_alone(cfg, e->world));
    e->hp = (ao_adamw_hparams){.beta1 = (float)cfg->optimizer.betas[0],
                               .beta2 = (float)cfg->optimizer.betas[1],
                               .eps = (float)cfg->optimizer.eps,
                               .weight_decay = (float)cfg->optimizer.weight_decay};
    apply_precision(e);
    if (backend->workspace_bytes) {
        e->workspace = ao_dev_alloc(e->dev, backend->workspace_bytes);
        e->red_workspace = ao_dev_alloc(e->dev, backend->workspace_bytes);
    }

    *rc = make_comms(e, s);
    if (*rc) {
        ao_engine_destroy(e);
        return NULL;
    }
    size_t *numel = ao_calloc((size_t)e->nunits, sizeof *numel);
    int *order = ao_calloc((size_t)e->nunits, sizeof *order);
    for (int u = 0; u < e->nunits; u++) numel[u] = ao_model_unit_params(&e->shape, u);
    for (int i = 0; i < e->nunits; i++) order[i] = i < e->nlayers ? e->nlayers - i : 0;
    int nshards = e->sharded ? e->group_size : 1;
    *rc = ao_shard_layout_init(&e->lay, numel, order, e->nunits, nshards, e->shard_index,
                               AO_SHARD_ALIGN);
    free(numel);
    free(order);
    if (*rc) {
        ao_engine_destroy(e);
        return NULL;
    }
    e->units = ao_calloc((size_t)e->nunits, sizeof *e->units);
    make_buffers(e);
    make_groups(e);
    e->group_sq = ao_dev_alloc(e->dev, (size_t)e->ngroups * sizeof *e->group_sq);
    e->opt_done = ao_event_create(e->dev);
    e->fetch_go = ao_event_create(e->dev);
    e->gather_go = ao_event_create(e->dev);
    e->gather_mark = ao_event_create(e->dev);
    e->sq_ready = ao_event_create(e->dev);
    e->sum_ready = ao_event_create(e->dev);
    e->predraw_go = ao_event_create(e->dev);
    e->predrawn = ao_event_create(e->dev);
    int G = cfg->training.gradient_accumulation;
    e->scal_dev = ao_dev_alloc(e->dev, AO_ENGINE_SCALAR_SLOTS * sizeof *e->scal_dev);
    e->scal_host = ao_host_alloc(e->dev, AO_ENGINE_SCALAR_SLOTS * sizeof *e->scal_host);
    e->loss_dev = dev_zeros(e, (size_t)AO_ENGINE_SCALAR_SLOTS * (size_t)G);
    ao_memset_async(e->dev, e->scal_dev, 0, AO_ENGINE_SCALAR_SLOTS * sizeof *e->scal_dev,
                    e->compute);
    for (int i = 0; i < AO_ENGINE_SCALAR_SLOTS; i++) {
        e->slot_ev[i] = ao_event_create(e->dev);
        e->slot_iter[i] = -1;
    }
    e->batch_bytes = ao_loader_batch_bytes(e->loader);
    ao_wait_stream_sync(e->compute, "device synchronisation (the engine's set-up)");
    *rc = 0;
    return e;
}

void ao_engine_destroy(ao_engine *e)
{
    if (!e) return;
    ao_engine_finish(e);
    for (int i = e->ncomms - 1; i >= 0; i--) ao_comm_destroy(e->comms[i]);
    float *arenas[] = {e->P,          e->M,       e->V,          e->ACC != e->GFULL ? e->ACC : NULL,
                       e->RED,        e->GFULL,   e->scratch[0], e->scratch[1],
                       e->scratch[2], e->loss_dev};
    for (size_t i = 0; i < sizeof arenas / sizeof arenas[0]; i++)
        if (arenas[i]) ao_dev_free(e->dev, arenas[i]);
    for (int b = 0; b < e->nbufs; b++) {
        ao_dev_free(e->dev, e->bufs[b].buf);
        if (e->bufs[b].wire && !e->bufs[b].wire_in_pw) ao_dev_free(e->dev, e->bufs[b].wire);
    }
    if (e->Pw) ao_dev_free(e->dev, e->Pw);
    free(e->bufs);
    if (e->units)
        for (int u = 0; u < e->nunits; u++)
            if (e->units[u].ag_done) ao_event_destroy(e->units[u].ag_done);
    free(e->units);
    for (int g = 0; g < e->ngroups; g++) {
        ao_event_destroy(e->groups[g].grad_ready);
        ao_event_destroy(e->groups[g].mid);
        ao_event_destroy(e->groups[g].done);
        ao_event_destroy(e->groups[g].zeroed);
    }
    free(e->groups);
    ao_event *evs[] = {e->opt_done,  e->sq_ready,    e->sum_ready,  e->fetch_go,
                       e->gather_go, e->gather_mark, e->predraw_go, e->predrawn};
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i]) ao_event_destroy(evs[i]);
    for (int i = 0; i < AO_ENGINE_SCALAR_SLOTS; i++)
        if (e->slot_ev[i]) ao_event_destroy(e->slot_ev[i]);
    if (e->scal_dev) ao_dev_free(e->dev, e->scal_dev);
    if (e->scal_host) ao_host_free(e->dev, e->scal_host);
    if (e->workspace) ao_dev_free(e->dev, e->workspace);
    if (e->red_workspace) ao_dev_free(e->dev, e->red_workspace);
    if (e->group_sq) ao_dev_free(e->dev, e->group_sq);
    ao_shard_layout_free(&e->lay);
    free(e);
}
