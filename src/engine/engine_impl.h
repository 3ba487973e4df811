/* The sharding engine's state, shared by its two halves: setup.c (checks,
 * communicators, layout, buffers, create and destroy) and engine.c (the
 * schedule of an iteration, whose file comment says what the buffers and
 * events are for). Internal to src/engine. */
#ifndef AORTA_ENGINE_IMPL_H
#define AORTA_ENGINE_IMPL_H

#include "engine/engine.h"
#include "engine/engine_backend.h"
#include "engine/shard.h"

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
    int sharded;   /* full/grad_op/hybrid */
    int solo;      /* one rank, one micro-batch: ACC is GFULL (file comment) */
    int overwrite; /* solo, and the model's backward writes GFULL (nothing zeroes it) */
    int synced;    /* fsdp.sync_module_states over more than one rank: rank 0's init broadcast */
    int reshard_after_forward;
    int hybrid, group_size, replicas;
    int shard_index;       /* this rank's shard: its place in its shard group */
    char groups_desc[256]; /* hybrid: its groups' ranks, for ao_engine_describe */
    int timing;            /* profiling.timing: collectives' event pairs (and holds) */
    int coll_held;         /* the collective being issued holds its stream (coll_begin) */
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
    ao_event *fetch_go; /* compute's point where the next batch is fetched */
    /* predraw: the next step's dropout masks, drawn beside the update
     * (ao_model_predraw): compute's point before the update, and the end of
     * the draw, which the next forward waits for while predraw_pending */
    ao_event *predraw_go, *predrawn;
    int predraw; /* solo, and the model draws masks ahead (ao_model_predraws) */
    int predraw_pending;
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
    int64_t slot_step[AO_ENGINE_SCALAR_SLOTS]; /* its data step, what a wait for it names */
    int slot_train[AO_ENGINE_SCALAR_SLOTS];    /* whether the slot's iteration was a train step */
    ao_adamw_hparams hp;
    /* data */
    int64_t pend_step;
    int pend_micro;
    const ao_batch *pend_batch;
    ao_event *pend_ready;
    size_t batch_bytes;
    double data_wait_ms;    /* host wait for the loader since ao_engine_take_data_wait_ms */
    int test_slow_ms;       /* AORTA_TEST_SLOW_RANK: this rank's planted delay (tests only) */
    int test_late_ms;       /* AORTA_TEST_LATE_HOST: this rank's host's planted delay a step */
    int64_t test_hang_step; /* AORTA_TEST_HANG_RANK: the train step this rank stops at; -1 */
};

#endif
