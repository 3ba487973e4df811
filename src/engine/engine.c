/* The sharding engine: the schedule of one iteration over the named streams.
 *
 * Buffers (fp32, device memory; arenas laid out by shard.h in backward-
 * completion order L, L-1, ..., 1, root):
 *   P, M, V   master weights and AdamW moments: this rank's shards
 *   ACC       reduced gradient shard, accumulated over micro-batches
 *   RED       output of the latest reduction (reduce-scatter / all-reduce)
 *   GFULL     full padded gradients the model accumulates into
 *   gathered  full parameters: the root's own buffer, the layers' either one
 *             each or a pool of fsdp.limit_all_gathers slots used in turn
 * With no_shard / ddp the shards are the whole units: P is read directly and
 * nothing is gathered.
 *
 * Reductions are "groups": one unit each when sharded, buckets of consecutive
 * units (up to bucket_cap_mb) with no_shard. A group's chain (reduce-scatter,
 * then the cross-replica all-reduce for hybrid_shard; the first reduction of
 * a step writes ACC itself, a later one RED, then ACC += RED) ends with its
 * `done` event, which the optimizer and the next reduction writing RED wait
 * on; then GFULL := 0 (op "zero_grad", a copy) and its `zeroed` event, which
 * the next backward writing the same gradients waits on.
 *
 * One rank (world 1, one micro-batch: `solo`) reduces nothing: ACC is GFULL
 * itself, each reduction is issued in place (the collective then moves no
 * bytes), and GFULL := 0 once, first in the next training iteration (after
 * the update read it), instead of after each reduction. A shard group of one rank gathers in place:
 * each unit keeps its own buffer whose wire is its slice of Pw. The copies and memsets this saves
 * are device memory traffic the SMs would run beside the compute (bench/RESULTS.md).
 *
 * Pool slots and deferral: an all-gather into a slot waits on the device for
 * the compute stream to reach the point where the host issued it, which comes
 * after the slot's release, hence after its owner's last read. A prefetch
 * into a slot whose owner the host has not released yet is therefore
 * deferred (tried again when the unit is needed), the same decision on every
 * rank, so collectives stay in the same order everywhere. */
#include "engine/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/text.h"
#include "engine/engine_backend.h"
#include "engine/memory.h"
#include "engine/shard.h"
#include "engine/test_hooks.h"
#include "model/ops_ref.h"
#include "runtime/backend_table.h"

enum { LANE_AG, LANE_RS, LANE_AR, NLANES };

typedef struct lane {
    ao_stream_id sid;
    ao_stream *s;
    ao_comm *world; /* every rank */
    ao_comm *group; /* hybrid: the shard group (AG, RS) or the replica group (AR) */
} lane;

typedef struct gbuf {
    float *buf;     /* the unit's full parameters, fp32, what compute reads */
    void *wire;     /* gather_type != fp32: what the all-gather writes, cast into buf */
    int wire_in_pw; /* wire is the unit's slice of Pw (a shard group of one rank) */
    int busy;       /* host: the owner has not been released */
    int fresh;      /* host: gathered into wire, not yet cast into buf */
} gbuf;

typedef struct unit_state {
    float *params;     /* where compute reads the unit's full parameters */
    int own_buf;       /* index into e->bufs of a dedicated buffer, or -1 (pool / none) */
    int cur_buf;       /* buffer holding the current gather, -1 when none */
    int valid;         /* host: a gather for the current use was issued */
    ao_event *ag_done; /* recorded after the unit's latest all-gather */
    int group;         /* reduction group */
} unit_state;

typedef struct rgroup {
    int first_unit, last_unit; /* placement order: first is completed first in backward */
    int trigger;               /* the unit whose backward completes the group */
    size_t full_off, full_len, shard_off, shard_len;
    ao_event *grad_ready, *mid, *done, *zeroed;
    int reductions; /* host: reductions issued in the current step */
} rgroup;

/* Device scalars of one iteration. */
typedef struct scal {
    double local[3];  /* this rank's share of the squared norm, its loss sum, stop vote */
    double global[3]; /* summed over ranks */
    double result[2]; /* grad norm, clip coefficient */
} scal;

struct ao_engine {
    const struct ao_config *cfg;
    ao_device *dev;
    const struct ao_engine_backend *backend;
    void *workspace;     /* the backend's, backend->workspace_bytes (NULL when 0) */
    void *red_workspace; /* another, for the squared sums on a reduction stream */
    ao_stream *streams[AO_NSTREAMS];
    ao_stream *compute;
    ao_model *model;
    ao_model_shape shape;
    ao_loader *loader;
    ao_timeline *tl;
    int rank, world;
    int sharded; /* full/grad_op/hybrid */
    int solo;    /* one rank, one micro-batch: ACC is GFULL (file comment) */
    int synced;  /* fsdp.sync_module_states over more than one rank: rank 0's init broadcast */
    int reshard_after_forward;
    int hybrid, group_size, replicas;
    int nunits, nlayers;
    lane lanes[NLANES];
    ao_comm *comms[8]; /* every distinct communicator, for destroy */
    int ncomms;
    ao_shard_layout lay;
    float *P, *M, *V, *ACC, *RED, *GFULL;
    /* fsdp.param_dtype for the gathers: P rounded to it after every update
     * (Pw, NULL when fp32), gathered into each buffer's wire, cast to fp32 on
     * the compute stream before the unit's compute. */
    ao_dtype gather_type;
    void *Pw;
    float *scratch[3]; /* compute_only AdamW: P, M, V copies */
    gbuf *bufs;
    int nbufs, pool_first, pool_size, pool_next;
    unit_state *units;
    rgroup *groups;
    int ngroups;
    /* [ngroups]: each group's share of the squared gradient norm, summed on
     * its reduction stream once final, beside the backward: the clip then
     * adds ngroups numbers instead of reading every gradient on the
     * critical path (bench/RESULTS.md). */
    double *group_sq;
    ao_event *opt_done, *sq_ready, *sum_ready;
    ao_event *fetch_go;  /* compute's point where the next batch is fetched */
    ao_event *gather_go; /* compute's point where an all-gather is issued */
    /* The start of the latest all-gather issued since the compute stream's
     * last op begin, NULL when none: the next op waits for it (compute_begin).
     * The gathers share one stream, so it follows every earlier one's start. */
    ao_event *gather_started;
    ao_event *gather_mark; /* what gather_started is when timing is off */
    /* The event recorded at the compute stream's current point, NULL once
     * anything is enqueued there after it (compute_point). */
    ao_event *here;
    scal *scal_dev;
    scal *scal_host;
    float *loss_dev; /* [SLOTS][accumulation] */
    ao_event *slot_ev[AO_ENGINE_SCALAR_SLOTS];
    double slot_lr[AO_ENGINE_SCALAR_SLOTS];
    float slot_scale[AO_ENGINE_SCALAR_SLOTS]; /* the loss scale each slot's step ran with */
    /* fp16 dynamic loss scaling (training.mixed_precision fp16): the host's
     * scale, updated from each train step's grad norm one step late (the
     * host never waits inside a step), so an overflow skips that step and
     * the next, already enqueued (learn_scale). */
    int scaling;
    ao_loss_scaler scaler;
    int64_t scaler_iter; /* the last train iteration the scaler has seen */
    int64_t slot_iter[AO_ENGINE_SCALAR_SLOTS];
    int slot_train[AO_ENGINE_SCALAR_SLOTS]; /* whether the slot's iteration was a train step */
    ao_adamw_hparams hp;
    /* data */
    int64_t pend_step;
    int pend_micro;
    const ao_batch *pend_batch;
    ao_event *pend_ready;
    size_t batch_bytes;
    double data_wait_ms;    /* host wait for the loader since ao_engine_take_data_wait_ms */
    int test_slow_ms;       /* AORTA_TEST_SLOW_RANK: this rank's planted delay (tests only) */
    int64_t test_hang_step; /* AORTA_TEST_HANG_RANK: the train step this rank stops at; -1 */
};

const char *ao_phase_name(ao_phase p)
{
    switch (p) {
    case AO_PHASE_COMPUTE_ONLY:
        return "compute_only";
    case AO_PHASE_COMM_ONLY:
        return "comm_only";
    default:
        return "train";
    }
}

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

/* ---- timeline helpers ---------------------------------------------------- */

static int op_begin(ao_engine *e, ao_stream_id sid, ao_op_class cls, ao_coll_kind kind,
                    const char *name, int unit, uint64_t bytes)
{
    return ao_timeline_op_begin(e->tl, sid, cls, kind, name, unit, bytes);
}

/* A collective's event pair: the watchdog's completion record goes after the
 * pair's end event, not inside it (ao_comm_defer_mark). */
static int coll_begin(ao_engine *e, ao_comm *c, ao_stream_id sid, ao_coll_kind kind,
                      const char *name, int unit, uint64_t bytes)
{
    int op = op_begin(e, sid, AO_CLASS_COMM, kind, name, unit, bytes);
    ao_comm_defer_mark(c);
    return op;
}

static void coll_end(ao_engine *e, ao_comm *c, int op)
{
    ao_timeline_op_end(e->tl, op);
    ao_comm_mark(c);
}

/* A compute op begins only once the all-gathers issued at its boundary have
 * reached their kernels. The forward's first kernels are GEMMs whose
 * persistent grid fills every SM; an all-gather launched a few µs after one
 * (its stream has a wait, the hold and its start event to get through) can
 * wait for SMs while its event pair runs (bench/RESULTS.md). The compute stream waits for what it
 * waited for anyway, the previous gather on that stream (wait_gather), plus
 * those few µs. Not inside the op's event pair. */
static int compute_begin(ao_engine *e, const char *name, int unit)
{
    if (e->gather_started) ao_stream_wait_event(e->compute, e->gather_started);
    e->gather_started = NULL;
    e->here = NULL;
    return op_begin(e, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE, name, unit, 0);
}

/* ---- points on the compute stream --------------------------------------- */

/* Between two compute ops the engine tells other streams that compute got
 * there: gradients are ready, a gather or a fetch may go, the clip's sums
 * are ready. One event marks one point for all of them: each further record
 * there would add ~3 us to the op boundary on the device (bench/api_cost's
 * device table) while the GPU idles. `own` is recorded unless an event
 * already marks the point; the event returned may be re-recorded later, so
 * only a wait enqueued right away may use it. */
static ao_event *compute_point(ao_engine *e, ao_event *own)
{
    if (!e->here) {
        ao_event_record(own, e->compute);
        e->here = own;
    }
    return e->here;
}

/* A compute op's end event marks the point after it (NULL: timing off). */
static void compute_end(ao_engine *e, int op)
{
    e->here = ao_timeline_op_end(e->tl, op);
}

/* Anything enqueued on the compute stream outside an op moves its point. */
static void compute_moved(ao_engine *e)
{
    e->here = NULL;
}

static void compute_wait(ao_engine *e, ao_event *ev)
{
    ao_stream_wait_event(e->compute, ev);
    compute_moved(e);
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
    if (!e->hybrid) return 0;
    /* Splits are collective over the world: every rank makes them in the same
     * order (shard groups of AG then RS, then the replica group of AR). */
    for (int l = 0; l < NLANES; l++) {
        lane *ln = &e->lanes[l];
        int replica = l == LANE_AR;
        for (int k = 0; k < l; k++)
            if (e->lanes[k].sid == ln->sid && (k == LANE_AR) == replica)
                ln->group = e->lanes[k].group;
        if (ln->group) continue;
        int color = replica ? e->rank % e->group_size : e->rank / e->group_size;
        ln->group = keep_comm(e, ao_comm_split(ln->world, ln->s, color, e->rank));
        if (!ln->group) return AO_EXIT_FAIL;
    }
    return 0;
}

/* The communicator a unit's gather and reduce-scatter use. */
static ao_comm *shard_comm(ao_engine *e, int l)
{
    return e->hybrid ? e->lanes[l].group : e->lanes[l].world;
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
            ao_stream_sync(ar->s);
        }
        ao_shard_extract(&e->lay, u, full, shard);
        ao_copy_async(e->dev, e->P + sp->shard_offset, shard, sp->shard * sizeof *shard, AO_H2D,
                      e->compute);
        ao_stream_sync(e->compute); /* the staging buffer is reused */
    }
    ao_host_free(e->dev, full);
    ao_host_free(e->dev, shard);
    if (full_dev) ao_dev_free(e->dev, full_dev);

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

/* The backends with engine kernels. */
static const struct ao_engine_backend *const engine_backends[] = AO_BACKEND_LIST(ao_engine);
_Static_assert(offsetof(struct ao_engine_backend, device_backend) == 0, "backend_table.h");

static const struct ao_engine_backend *backend_for(ao_device *dev)
{
    const struct ao_engine_backend *backend = AO_BACKEND_FIND(engine_backends, dev);
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
    e->synced = cfg->fsdp.sync_module_states && e->world > 1;
    e->hybrid = e->sharded && cfg->fsdp.sharding_strategy == AO_SHARD_HYBRID;
    e->reshard_after_forward = e->sharded && cfg->fsdp.sharding_strategy != AO_SHARD_GRAD_OP;
    e->group_size = e->hybrid ? group_size_for(cfg, e->world, s->ri->local_world_size) : e->world;
    e->replicas = e->sharded ? e->world / e->group_size : e->world;
    e->nunits = ao_model_units(&e->shape);
    e->nlayers = e->nunits - 1;
    e->pend_step = -1;
    e->test_slow_ms = ao_test_slow_rank_ms(e->rank);
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
    int index = e->sharded ? e->rank % e->group_size : 0;
    *rc = ao_shard_layout_init(&e->lay, numel, order, e->nunits, nshards, index, AO_SHARD_ALIGN);
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
    ao_stream_sync(e->compute);
    *rc = 0;
    return e;
}

void ao_engine_finish(ao_engine *e)
{
    for (int i = 0; i < AO_NSTREAMS; i++)
        if (e->streams[i]) ao_stream_sync(e->streams[i]);
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
    ao_event *evs[] = {e->opt_done, e->sq_ready,  e->sum_ready,
                       e->fetch_go, e->gather_go, e->gather_mark};
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

/* One micro-batch's pass (run_micro): what it runs, and on what. */
typedef struct micro_ctx {
    ao_phase phase;
    int do_comm, do_compute;
    int64_t data_step;
    int micro, last_micro;
    int64_t next_step; /* what to prefetch after the forward: step, micro */
    int next_micro;
    float *loss_slot;
    double normalizer;      /* the loss's: global tokens of the step */
    double grad_normalizer; /* backward's: normalizer / loss scale */
} micro_ctx;

/* ---- gathers ------------------------------------------------------------- */

/* Issue unit u's all-gather for its next use unless one is valid. Returns 0
 * when deferred (its pool slot's owner is not released yet). */
static int try_gather(ao_engine *e, int u, const micro_ctx *x)
{
    unit_state *us = &e->units[u];
    if (!e->sharded || us->valid) return 1;
    int b = us->own_buf;
    if (b < 0) {
        b = e->pool_first + e->pool_next;
        if (e->bufs[b].busy) return 0;
        e->pool_next = (e->pool_next + 1) % e->pool_size;
    }
    gbuf *g = &e->bufs[b];
    g->busy = 1;
    g->fresh = 1; /* compute_only too: its compute includes the cast */
    us->cur_buf = b;
    us->params = g->buf;
    us->valid = 1;
    if (!x->do_comm) return 1; /* compute_only: the buffer is reused as it is */
    lane *ln = &e->lanes[LANE_AG];
    const ao_unit_span *sp = &e->lay.units[u];
    /* Not before the compute stream reaches the point where the gather is
     * issued: the host runs far ahead of the device, and a gather free to
     * start whenever a buffer is would be prefetched whatever the prefetch
     * settings say. This makes them mean on the device what they say on
     * the host: with prefetch, unit u's gather runs beside the compute
     * before its use; without, it starts when that compute is done. It also
     * frees g: its previous owner was released earlier in the host's order,
     * so the compute stream is past that owner's last read. */
    ao_stream_wait_event(ln->s, compute_point(e, e->gather_go));
    ao_comm *c = shard_comm(e, LANE_AG);
    uint64_t bytes = ao_coll_bytes(AO_ALLGATHER, sp->shard, e->gather_type, ao_comm_size(c));
    int op = coll_begin(e, c, ln->sid, AO_KIND_ALLGATHER, "allgather", u, bytes);
    /* comm_only: no op follows to wait. A one-rank gather is a copy on a
     * copy engine, which needs no SMs: nothing to make room for, and waiting
     * for its start would hold each layer's compute until the copy has
     * finished. */
    if (x->do_compute && ao_comm_size(c) > 1) {
        e->gather_started = ao_timeline_op_start(e->tl, op);
        if (!e->gather_started) {
            e->gather_started = e->gather_mark;
            ao_event_record(e->gather_mark, ln->s);
        }
    }
    if (e->gather_type == AO_F32)
        ao_allgather(c, e->P + sp->shard_offset, g->buf, sp->shard, AO_F32);
    else
        ao_allgather(c, (char *)e->Pw + sp->shard_offset * ao_dtype_size(e->gather_type), g->wire,
                     sp->shard, e->gather_type);
    coll_end(e, c, op);
    ao_event_record(us->ag_done, ln->s);
    return 1;
}

/* Unit u's gather issued unless prefetched (need_gather), then, once the
 * gathers to prefetch are issued too, waited for on the compute stream
 * (wait_gather): before the op that uses it begins, so that the wait is not
 * in its event pair, and after every gather's go, so that they share the op
 * boundary's point (compute_point). */
static void need_gather(ao_engine *e, int u, const micro_ctx *x)
{
    if (!try_gather(e, u, x))
        ao_fatal(AO_EXIT_FAIL, "engine", "unit %d has no free gathered buffer (schedule error)", u);
}

static void wait_gather(ao_engine *e, int u)
{
    if (e->sharded) compute_wait(e, e->units[u].ag_done);
}

/* Inside the compute op that uses unit u, first thing: a unit gathered in a
 * 16-bit param_dtype is cast back to fp32 once per gather, only what the
 * model reads in fp32 (with 16-bit GEMMs the weight matrices are multiplied
 * in their wire copy). Part of that op, as FSDP's copy-out is part of the
 * layer: an op of its own would add an event pair and the device's latency
 * between two ops to every unit, while a collective runs beside it. */
static void cast_gathered(ao_engine *e, int u)
{
    if (!e->sharded || e->gather_type == AO_F32) return;
    gbuf *g = &e->bufs[e->units[u].cur_buf];
    if (!g->fresh) return;
    size_t parts[AO_ENGINE_CAST_PARTS][2] = {{0, e->lay.units[u].padded}};
    int nparts = e->backend->fp32_parts
                     ? e->backend->fp32_parts(e->model, u, g->buf, parts, AO_ENGINE_CAST_PARTS)
                     : 1;
    if (nparts < 0)
        ao_fatal(AO_EXIT_FAIL, "engine", "unit %d has more than %d fp32 parts", u,
                 AO_ENGINE_CAST_PARTS);
    e->backend->cast(e->compute, g->buf, AO_F32, g->wire, e->gather_type, (const size_t(*)[2])parts,
                     nparts);
    g->fresh = 0;
}

static void release(ao_engine *e, int u)
{
    unit_state *us = &e->units[u];
    if (!e->sharded || !us->valid) return;
    gbuf *g = &e->bufs[us->cur_buf];
    /* No event: the next gather into g waits for the compute stream to reach
     * the point where it is issued (try_gather), which comes after this
     * release in the host's order, hence after the owner's last read. */
    g->busy = 0;
    us->valid = 0;
    us->cur_buf = -1;
}

/* ---- reductions ---------------------------------------------------------- */

/* final: the step's last reduction of the group (its ACC then complete). */
static void reduce_group(ao_engine *e, int g, ao_phase phase, int final)
{
    rgroup *G = &e->groups[g];
    if (phase == AO_PHASE_COMPUTE_ONLY) return;
    ao_event *ready = compute_point(e, G->grad_ready);
    int first = G->reductions++ == 0;
    float *gfull = e->GFULL + G->full_off, *red = e->RED + G->shard_off;
    /* the step's first sum goes straight into ACC: no copy after it */
    float *out = phase == AO_PHASE_TRAIN && first ? e->ACC + G->shard_off : red;
    ao_stream *last;
    ao_stream_id last_sid;
    if (e->sharded) {
        lane *rs = &e->lanes[LANE_RS];
        ao_stream_wait_event(rs->s, ready);
        ao_stream_wait_event(rs->s, G->done); /* RED is free again */
        ao_comm *c = shard_comm(e, LANE_RS);
        uint64_t bytes = ao_coll_bytes(AO_REDUCESCATTER, G->shard_len, AO_F32, ao_comm_size(c));
        int op =
            coll_begin(e, c, rs->sid, AO_KIND_REDUCESCATTER, "reducescatter", G->first_unit, bytes);
        ao_reducescatter(c, gfull, out, G->shard_len, AO_F32, AO_SUM);
        coll_end(e, c, op);
        last = rs->s;
        last_sid = rs->sid;
        if (e->hybrid && e->replicas > 1) {
            lane *ar = &e->lanes[LANE_AR];
            ao_event_record(G->mid, rs->s);
            ao_stream_wait_event(ar->s, G->mid);
            uint64_t b2 = ao_coll_bytes(AO_ALLREDUCE, G->shard_len, AO_F32, e->replicas);
            op = coll_begin(e, ar->group, ar->sid, AO_KIND_ALLREDUCE, "allreduce", G->first_unit,
                            b2);
            ao_allreduce(ar->group, out, out, G->shard_len, AO_F32, AO_SUM);
            coll_end(e, ar->group, op);
            last = ar->s;
            last_sid = ar->sid;
        }
    } else {
        lane *ar = &e->lanes[LANE_AR];
        ao_stream_wait_event(ar->s, ready);
        uint64_t bytes = ao_coll_bytes(AO_ALLREDUCE, G->full_len, AO_F32, e->world);
        int op = coll_begin(e, ar->world, ar->sid, AO_KIND_ALLREDUCE, "allreduce", g, bytes);
        ao_allreduce(ar->world, gfull, out, G->full_len, AO_F32, AO_SUM);
        coll_end(e, ar->world, op);
        last = ar->s;
        last_sid = ar->sid;
    }
    if (phase == AO_PHASE_TRAIN && !first)
        e->backend->accumulate(last, e->ACC + G->shard_off, red, G->shard_len);
    if (phase == AO_PHASE_TRAIN && final) { /* an op: compute, as the kernel trace counts it */
        int sq = op_begin(e, last_sid, AO_CLASS_COMPUTE, AO_KIND_NONE, "grad_sq", G->first_unit, 0);
        e->backend->sum_squares(last, &e->group_sq[g], e->ACC + G->shard_off, G->shard_len,
                                e->red_workspace);
        ao_timeline_op_end(e->tl, sq);
    }
    ao_event_record(G->done, last);
    if (e->solo && phase == AO_PHASE_TRAIN) return; /* zeroed after the update (zero_solo) */
    /* After `done`, so that the optimizer does not wait for it; timed, so
     * that the step's idle time is not this memset's. */
    size_t bytes = G->full_len * sizeof *gfull;
    int op = op_begin(e, last_sid, AO_CLASS_COPY, AO_KIND_NONE, "zero_grad", G->first_unit, bytes);
    ao_memset_async(e->dev, gfull, 0, bytes, last);
    ao_timeline_op_end(e->tl, op);
    ao_event_record(G->zeroed, last);
}

/* ---- data ---------------------------------------------------------------- */

/* The h2d stream waits for the compute stream to reach the point of the
 * fetch: otherwise the fetch, issued while the host runs ahead of the
 * device, would run during an earlier iteration, and the iteration's window
 * (first op start .. last op end) would reach back into it. */
static void fetch(ao_engine *e, int64_t step, int micro)
{
    ao_stream_wait_event(e->streams[AO_STREAM_H2D], compute_point(e, e->fetch_go));
    /* The host's wait for the loader is its own number (data_wait_ms), and
     * outside the copy's event pair: the h2d op times the copy only. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ao_loader_prepare(e->loader, step, micro);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    e->data_wait_ms +=
        (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    int op = op_begin(e, AO_STREAM_H2D, AO_CLASS_COPY, AO_KIND_NONE, "h2d", -1, e->batch_bytes);
    e->pend_batch = ao_loader_next(e->loader, step, micro, &e->pend_ready);
    ao_timeline_op_end(e->tl, op);
    e->pend_step = step;
    e->pend_micro = micro;
}

static const ao_batch *take_batch(ao_engine *e, int64_t step, int micro)
{
    if (e->pend_step != step || e->pend_micro != micro) fetch(e, step, micro);
    const ao_batch *b = e->pend_batch;
    if (e->pend_ready) compute_wait(e, e->pend_ready);
    e->pend_step = -1;
    return b;
}

/* ---- one micro-batch ----------------------------------------------------- */

static void run_micro(ao_engine *e, const micro_ctx *x)
{
    const struct ao_config *cfg = e->cfg;
    int L = e->nlayers, fwd_pf = cfg->fsdp.forward_prefetch;
    enum ao_backward_prefetch bp = cfg->fsdp.backward_prefetch;
    const ao_batch *b = x->do_compute ? take_batch(e, x->data_step, x->micro) : NULL;
    e->gather_started = NULL;
    ao_stream *cs = e->compute;
    int op;

    /* forward */
    need_gather(e, 0, x);
    if (fwd_pf && L >= 1) try_gather(e, 1, x);
    wait_gather(e, 0);
    if (x->do_compute) {
        op = compute_begin(e, "forward", 0);
        if (e->test_slow_ms) ao_test_slow_enqueue(cs, e->test_slow_ms);
        cast_gathered(e, 0);
        ao_model_forward_input(e->model, cs, e->units[0].params, b, x->data_step);
        compute_end(e, op);
    }
    for (int l = 1; l <= L; l++) {
        need_gather(e, l, x);
        if (fwd_pf && l < L) try_gather(e, l + 1, x);
        wait_gather(e, l);
        if (x->do_compute) {
            op = compute_begin(e, "forward", l);
            cast_gathered(e, l);
            ao_model_forward_layer(e->model, cs, l, e->units[l].params, b, x->data_step);
            compute_end(e, op);
        }
        if (e->reshard_after_forward) release(e, l);
    }
    if (x->do_compute) {
        op = compute_begin(e, "forward", 0);
        ao_model_forward_head(e->model, cs, e->units[0].params, b, x->normalizer, x->loss_slot);
        compute_end(e, op);
    }
    if (x->do_compute && x->next_step >= 0) fetch(e, x->next_step, x->next_micro);

    /* backward: head, layers L..1, input; unit i-1's gather as prefetch says */
    int reduce_now = cfg->fsdp.reduce_every_microbatch || x->last_micro;
    if (bp == AO_PREFETCH_BACKWARD_PRE && L >= 1) try_gather(e, L, x);
    compute_wait(e, e->groups[e->units[0].group].zeroed);
    if (x->do_compute) {
        op = compute_begin(e, "backward", 0);
        ao_model_backward_head(e->model, cs, e->units[0].params,
                               e->GFULL + e->lay.units[0].full_offset, b, x->grad_normalizer);
        compute_end(e, op);
    }
    if (bp == AO_PREFETCH_BACKWARD_POST && L >= 1) try_gather(e, L, x);
    for (int l = L; l >= 1; l--) {
        need_gather(e, l, x);
        if (bp == AO_PREFETCH_BACKWARD_PRE && l > 1) try_gather(e, l - 1, x);
        wait_gather(e, l);
        int g = e->units[l].group;
        compute_wait(e, e->groups[g].zeroed);
        if (x->do_compute) {
            op = compute_begin(e, "backward", l);
            cast_gathered(e, l);
            ao_model_backward_layer(e->model, cs, l, e->units[l].params,
                                    e->GFULL + e->lay.units[l].full_offset, b, x->data_step);
            compute_end(e, op);
        }
        release(e, l);
        if (bp == AO_PREFETCH_BACKWARD_POST && l > 1) try_gather(e, l - 1, x);
        if (reduce_now && e->groups[g].trigger == l) reduce_group(e, g, x->phase, x->last_micro);
    }
    if (x->do_compute) {
        op = compute_begin(e, "backward", 0);
        ao_model_backward_input(e->model, cs, e->units[0].params,
                                e->GFULL + e->lay.units[0].full_offset, b);
        compute_end(e, op);
    }
    if (x->last_micro) release(e, 0);
    if (reduce_now) reduce_group(e, e->units[0].group, x->phase, x->last_micro);
    if (x->do_compute) { /* after the reduction's go, which shares the op's end event */
        ao_loader_release(e->loader, b, cs);
        compute_moved(e);
    }
}

/* ---- the optimizer ------------------------------------------------------- */

static void optimizer(ao_engine *e, ao_phase phase, int slot, int64_t data_step, float lr,
                      float loss_scale, int stop_vote)
{
    const struct ao_config *cfg = e->cfg;
    ao_stream *cs = e->compute;
    scal *sd = &e->scal_dev[slot];
    int G = cfg->training.gradient_accumulation;
    size_t S = e->lay.shard_total;
    if (phase != AO_PHASE_COMM_ONLY) {
        for (int g = 0; g < e->ngroups; g++) compute_wait(e, e->groups[g].done);
        int op = compute_begin(e, "clip", -1);
        /* the squared norm of the unscaled gradients, summed over replicas */
        double unscale = 1.0 / ((double)loss_scale * loss_scale);
        /* compute_only (no reductions): the sum over ACC here, as one group */
        if (phase != AO_PHASE_TRAIN)
            e->backend->sum_squares(cs, e->group_sq, e->ACC, S, e->workspace);
        e->backend->step_scalars(cs, sd->local, e->group_sq,
                                 phase == AO_PHASE_TRAIN ? e->ngroups : 1, unscale / e->replicas,
                                 e->loss_dev + (size_t)slot * G, G, stop_vote ? 1.0 : 0.0);
        compute_end(e, op);
    }
    if (phase != AO_PHASE_COMPUTE_ONLY) {
        lane *ar = &e->lanes[LANE_AR];
        ao_stream_wait_event(ar->s, compute_point(e, e->sq_ready));
        uint64_t bytes = ao_coll_bytes(AO_ALLREDUCE, 3, AO_F64, e->world);
        int op = coll_begin(e, ar->world, ar->sid, AO_KIND_ALLREDUCE, "allreduce", -1, bytes);
        ao_allreduce(ar->world, sd->local, sd->global, 3, AO_F64, AO_SUM);
        coll_end(e, ar->world, op);
        ao_event_record(e->sum_ready, ar->s);
        compute_wait(e, e->sum_ready);
    }
    if (phase == AO_PHASE_COMM_ONLY) return;
    float *p = e->P, *m = e->M, *v = e->V;
    const double *global = sd->global;
    if (phase == AO_PHASE_COMPUTE_ONLY) { /* the same update on copies */
        p = e->scratch[0];
        m = e->scratch[1];
        v = e->scratch[2];
        ao_copy_async(e->dev, p, e->P, S * sizeof *p, AO_D2D, cs);
        ao_copy_async(e->dev, m, e->M, S * sizeof *m, AO_D2D, cs);
        ao_copy_async(e->dev, v, e->V, S * sizeof *v, AO_D2D, cs);
        compute_moved(e);
        global = sd->local;
    }
    int op = compute_begin(e, "optimizer", -1);
    /* the wire copy written by the update itself: a cast would read p again */
    e->backend->adamw(cs, p, phase == AO_PHASE_TRAIN ? e->Pw : NULL, e->gather_type, m, v, e->ACC,
                      S, &e->hp, lr, (float)cfg->training.grad_clip_norm, 1.0f / loss_scale,
                      data_step + 1, global, sd->result, e->workspace);
    compute_end(e, op);
    if (phase == AO_PHASE_COMPUTE_ONLY) {
        ao_memset_async(e->dev, e->GFULL, 0, e->lay.full_total * sizeof(float), cs);
        compute_moved(e);
    }
}

/* solo: GFULL (= ACC) := 0 once the previous update has read it, first in a
 * training iteration (so that the op is this step's, not a tail of the
 * previous one), on the reduction stream beside the forward; each group's
 * `zeroed` marks it for the backward that writes the gradients. */
static void zero_solo(ao_engine *e)
{
    lane *rs = &e->lanes[LANE_RS];
    ao_stream_wait_event(rs->s, e->opt_done);
    size_t bytes = e->lay.full_total * sizeof *e->GFULL;
    int op = op_begin(e, rs->sid, AO_CLASS_COPY, AO_KIND_NONE, "zero_grad", -1, bytes);
    ao_memset_async(e->dev, e->GFULL, 0, bytes, rs->s);
    ao_timeline_op_end(e->tl, op);
    for (int g = 0; g < e->ngroups; g++) ao_event_record(e->groups[g].zeroed, rs->s);
}

/* As iteration iter is issued, the scaler learns each train iteration up to
 * iter - 2 (read by then: the host reads one after issuing the next), never
 * one read early, or the scale would depend on how far the device ran ahead. */
static void learn_scale(ao_engine *e, int64_t iter)
{
    for (int64_t j = e->scaler_iter + 1; j <= iter - 2; j++) {
        int slot = (int)(j % AO_ENGINE_SCALAR_SLOTS);
        if (e->slot_iter[slot] != j || !e->slot_train[slot]) continue;
        ao_event_sync(e->slot_ev[slot]);
        ao_loss_scaler_update(&e->scaler, !isfinite(e->scal_host[slot].result[0]));
    }
    if (iter - 2 > e->scaler_iter) e->scaler_iter = iter - 2;
}

void ao_engine_iteration(ao_engine *e, int64_t iter, ao_phase phase, int64_t data_step,
                         int64_t next_data_step, int stop_vote)
{
    const struct ao_config *cfg = e->cfg;
    int G = cfg->training.gradient_accumulation;
    int slot = (int)(iter % AO_ENGINE_SCALAR_SLOTS);
    float lr = ao_lr_at((float)cfg->optimizer.lr, data_step, cfg->scheduler.warmup_steps,
                        cfg->scheduler.total_steps);
    for (int g = 0; g < e->ngroups; g++) e->groups[g].reductions = 0;
    if (phase == AO_PHASE_TRAIN && data_step == e->test_hang_step) ao_test_hang(e->rank, data_step);
    ao_comm_set_step(data_step); /* a timeout names the step of the op that hung */
    compute_moved(e);            /* whatever ran before */
    /* Gathers read the shards the previous update wrote. */
    ao_stream_wait_event(e->lanes[LANE_AG].s, e->opt_done);
    if (e->solo && phase == AO_PHASE_TRAIN) zero_solo(e);
    micro_ctx x = {.phase = phase,
                   .do_comm = phase != AO_PHASE_COMPUTE_ONLY,
                   .do_compute = phase != AO_PHASE_COMM_ONLY,
                   .data_step = data_step,
                   .normalizer = (double)ao_engine_step_tokens(e)};
    if (e->scaling) learn_scale(e, iter);
    const float scale = e->scaling ? e->scaler.scale : 1.0f;
    x.grad_normalizer = x.normalizer / scale;
    for (int j = 0; j < G; j++) {
        x.micro = j;
        x.last_micro = j == G - 1;
        x.next_step = x.last_micro ? next_data_step : data_step;
        x.next_micro = x.last_micro ? 0 : j + 1;
        x.loss_slot = e->loss_dev + (size_t)slot * G + j;
        run_micro(e, &x);
    }
    optimizer(e, phase, slot, data_step, lr, scale, stop_vote);
    ao_event_record(e->opt_done, e->compute);
    compute_moved(e);
    e->slot_iter[slot] = iter;
    e->slot_train[slot] = phase == AO_PHASE_TRAIN;
    e->slot_lr[slot] = lr;
    e->slot_scale[slot] = scale;
    if (phase == AO_PHASE_TRAIN) {
        ao_copy_async(e->dev, &e->scal_host[slot], &e->scal_dev[slot], sizeof(scal), AO_D2H,
                      e->compute);
        ao_event_record(e->slot_ev[slot], e->compute);
    }
}

void ao_engine_scalars(ao_engine *e, int64_t iter, ao_step_scalars *out)
{
    int slot = (int)(iter % AO_ENGINE_SCALAR_SLOTS);
    if (e->slot_iter[slot] != iter)
        ao_fatal(AO_EXIT_FAIL, "engine", "the scalars of iteration %lld are gone (slot reused)",
                 (long long)iter);
    ao_event_sync(e->slot_ev[slot]);
    const scal *h = &e->scal_host[slot];
    out->loss = h->global[1];
    out->loss_local = h->local[1] * e->world;
    out->grad_norm = h->result[0];
    out->clip_coef = h->result[1];
    out->lr = e->slot_lr[slot];
    out->loss_scale = e->scaling ? e->slot_scale[slot] : NAN;
    out->skipped = !isfinite(h->result[0]);
    out->stop = h->global[2] > 0;
}

void ao_engine_barrier(ao_engine *e)
{
    lane *ar = &e->lanes[LANE_AR];
    double *d = ao_dev_alloc(e->dev, 2 * sizeof *d);
    ao_memset_async(e->dev, d, 0, 2 * sizeof *d, ar->s);
    ao_allreduce(ar->world, d, d + 1, 1, AO_F64, AO_SUM);
    ao_stream_sync(ar->s);
    ao_dev_free(e->dev, d);
}

double ao_engine_take_data_wait_ms(ao_engine *e)
{
    double ms = e->data_wait_ms;
    e->data_wait_ms = 0;
    return ms;
}

int64_t ao_engine_step_samples(const ao_engine *e)
{
    return (int64_t)e->world * e->shape.batch * e->cfg->training.gradient_accumulation;
}

int64_t ao_engine_step_tokens(const ao_engine *e)
{
    return ao_engine_step_samples(e) * e->shape.seq;
}

void ao_engine_describe(const ao_engine *e, char *buf, size_t n)
{
    const struct ao_config *cfg = e->cfg;
    const char *strategy = cfg->distributed.mode == AO_MODE_DDP ? "ddp"
                           : e->hybrid                          ? "hybrid_shard"
                           : !e->sharded                        ? "no_shard"
                           : e->reshard_after_forward           ? "full_shard"
                                                                : "shard_grad_op";
    size_t params = 0;
    for (int u = 0; u < e->nunits; u++) params += e->lay.units[u].numel;
    const char *lanes = !cfg->distributed.enable_overlap    ? "all on compute (no overlap)"
                        : !cfg->distributed.comm_per_stream ? "one communicator on allgather"
                                                            : "allgather/reducescatter/allreduce";
    snprintf(buf, n,
             "%s over %d ranks (shard group %d): %d units, %zu parameters%s, shard %zu of %zu "
             "elements, %d gathered buffers, %d reduction groups; collectives: %s",
             strategy, e->world, e->sharded ? e->group_size : 1, e->nunits, params,
             e->synced ? " broadcast from rank 0" : "", e->lay.shard_total, e->lay.full_total,
             e->nbufs, e->ngroups, lanes);
}
