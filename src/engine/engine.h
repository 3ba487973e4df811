/* The sharding engine (DESIGN §6): FSDP (full_shard, shard_grad_op,
 * hybrid_shard) and DDP / no_shard schedules of the model's units over the
 * rank's named streams, the gradient reductions, global-norm clipping and the
 * AdamW update on fp32 shards.
 *
 * Everything is ENQUEUED: an iteration issues its work and returns; the host
 * waits for nothing inside it. Cross-stream order is only through events. The
 * scalars of an iteration (global loss, local loss, global grad norm) are read
 * later with ao_engine_scalars, one iteration late in the training loop.
 *
 * Streams and communicators: collectives run on the allgather, reducescatter
 * and allreduce streams, one communicator each (distributed.comm_per_stream);
 * with comm_per_stream false all three share one communicator on the
 * allgather stream; with distributed.enable_overlap false every collective
 * runs on the compute stream (the serialized baseline). hybrid_shard splits
 * the ranks into shard groups and replica groups across them: with
 * fsdp.shard_group_size 0 each node is a shard group (the ranks' nodes are
 * gathered at set-up, launch/nodes.c), else consecutive ranks of that size
 * (DESIGN §5).
 *
 * Precision (engine.c's apply_precision): parameters, gradients, optimizer
 * state and reductions are fp32. training.mixed_precision bf16/fp16 makes the
 * model's GEMMs multiply 16-bit copies of their operands (cuda), and fp16
 * adds dynamic loss scaling (every backend); fsdp.param_dtype gathers the
 * parameters in 16 bits (cuda); training.tf32 runs fp32 GEMMs through TF32
 * (cuda). What a backend cannot do runs as fp32, with one warning. The small kernels of the engine
 * (accumulation, norm, AdamW) come from the device backend's table
 * (engine_backend.h: cpu closures, cuda kernels); a backend without one is
 * refused at create. */
#ifndef AORTA_ENGINE_ENGINE_H
#define AORTA_ENGINE_ENGINE_H

#include <stdint.h>

#include "comm/comm.h"
#include "core/config.h"
#include "data/loader.h"
#include "model/model.h"
#include "runtime/device.h"
#include "timeline/timeline.h"

typedef enum ao_phase { AO_PHASE_TRAIN, AO_PHASE_COMPUTE_ONLY, AO_PHASE_COMM_ONLY } ao_phase;
/* "train", "compute_only", "comm_only" (static strings, the JSONL phase). */
const char *ao_phase_name(ao_phase p);

typedef struct ao_engine ao_engine;

typedef struct ao_engine_setup {
    const struct ao_config *cfg;
    const ao_rank_info *ri;
    /* A communicator over all ranks; the engine splits its own from it (one
     * per comm stream, and the hybrid groups), so one bootstrap id serves
     * them all. The caller keeps and destroys it after the engine. */
    ao_comm *root;
    ao_device *dev;
    ao_stream *const *streams; /* [AO_NSTREAMS], every one created */
    ao_model *model;
    const ao_model_shape *shape;
    ao_loader *loader;
    ao_timeline *timeline;
} ao_engine_setup;

/* The checks that need the world size (hybrid group size divides it, ...):
 * used by the launcher parent before spawning and by every rank. Returns 0 or
 * AO_EXIT_USAGE after one error naming the key. */
int ao_engine_check_config(const struct ao_config *cfg, int world_size, int local_world_size);

/* Whether the compute stream has the device to itself: no collective runs
 * beside it (one rank, or distributed.enable_overlap off). Kernels that
 * assume every SM (dependent launches, cuBLASLt's static-schedule GEMMs)
 * are used only then: beside a collective they hold SMs it waits for, or
 * wait for the SMs it holds (bench/RESULTS.md, sessions 5 and 8). */
int ao_engine_compute_alone(const struct ao_config *cfg, int world_size);

/* Creates the communicators, lays out and initializes the shards (a pure
 * function of dataset.seed; with fsdp.sync_module_states rank 0's values,
 * broadcast to every rank, as FSDP does), allocates the buffers. Returns NULL with *rc set
 * (AO_EXIT_USAGE for a configuration this backend cannot run, AO_EXIT_FAIL otherwise) after
 * printing why. */
ao_engine *ao_engine_create(const ao_engine_setup *s, int *rc);
/* Waits for outstanding work, then frees everything (NULL: no-op). */
void ao_engine_destroy(ao_engine *e);

/* Enqueue one iteration; the caller has opened it on the timeline
 * (ao_timeline_begin) and closes it after. data_step is the optimizer step
 * whose samples, dropout masks and learning rate it uses; next_data_step the
 * step whose first micro-batch is prefetched at the end (-1: none).
 * - AO_PHASE_TRAIN: forward, backward, reductions, clipping, AdamW.
 * - AO_PHASE_COMPUTE_ONLY: the same compute on the same streams, every
 *   collective skipped (gathered buffers reused as they are; each group's
 *   squared sum and gradient zeroing where its reduction would have ended);
 *   the AdamW update runs on scratch copies, so the model does not change.
 * - AO_PHASE_COMM_ONLY: the same collectives in the same order, no compute,
 *   no data; the model does not change.
 * stop_vote: this rank asks to stop (a signal); summed over ranks in the
 * train iteration's scalar all-reduce, so all ranks learn it together. */
void ao_engine_iteration(ao_engine *e, int64_t iter, ao_phase phase, int64_t data_step,
                         int64_t next_data_step, int stop_vote);

typedef struct ao_step_scalars {
    double loss;       /* mean over the global batch */
    double loss_local; /* mean over this rank's samples */
    double grad_norm;  /* global, before clipping */
    double clip_coef;  /* what the gradients were multiplied by */
    double lr;
    double loss_scale; /* fp16's dynamic loss scale the step ran with; NAN otherwise */
    int skipped;       /* the gradients were not finite: no update (loss scaling backs off) */
    int stop;          /* some rank voted to stop in this iteration */
} ao_step_scalars;

/* Waits for the scalars of train iteration `iter` (one of the last
 * AO_ENGINE_SCALAR_SLOTS - 1 iterations issued). */
#define AO_ENGINE_SCALAR_SLOTS 4
void ao_engine_scalars(ao_engine *e, int64_t iter, ao_step_scalars *out);

/* Waits until every stream of the rank has finished its work. */
void ao_engine_finish(ao_engine *e);
/* All ranks meet (a small all-reduce), after ao_engine_finish. */
void ao_engine_barrier(ao_engine *e);

/* Host milliseconds spent waiting for the data loader since the last call
 * (the iterations issued since then); resets the count. */
double ao_engine_take_data_wait_ms(ao_engine *e);

/* Global samples and tokens of one step (ranks x batch x accumulation (x T)). */
int64_t ao_engine_step_samples(const ao_engine *e);
int64_t ao_engine_step_tokens(const ao_engine *e);
/* One line: strategy, units, shard and gathered sizes, streams in use. */
void ao_engine_describe(const ao_engine *e, char *buf, size_t n);

#endif
