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
 * bytes), and the model's backward writes GFULL instead of adding to it
 * (ao_model_overwrite_grads), so nothing zeroes it; a backend that cannot
 * has GFULL := 0 once, first in the next training iteration (after the
 * update read it), instead of after each reduction. A shard group of one rank gathers in place:
 * each unit keeps its own buffer whose wire is its slice of Pw. The copies and memsets this saves
 * are device memory traffic the SMs would run beside the compute (bench/RESULTS.md).
 *
 * Pool slots and deferral: an all-gather into a slot waits on the device for
 * the compute stream to reach the point where the host issued it, which comes
 * after the slot's release, hence after its owner's last read. A prefetch
 * into a slot whose owner the host has not released yet is therefore
 * deferred (tried again when the unit is needed), the same decision on every
 * rank, so collectives stay in the same order everywhere. */
#include "engine/engine_impl.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

#include "comm/wait.h"
#include "core/error.h"
#include "engine/test_hooks.h"
#include "model/ops_ref.h"

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

/* ---- timeline helpers ---------------------------------------------------- */

static int op_begin(ao_engine *e, ao_stream_id sid, ao_op_class cls, ao_coll_kind kind,
                    const char *name, int unit, uint64_t bytes)
{
    return ao_timeline_op_begin(e->tl, sid, cls, kind, name, unit, bytes);
}

/* A collective's call, as its communicator sees it (ao_comm_seen). */
typedef struct coll_call {
    ao_coll op;
    size_t count;
    ao_dtype t;
    ao_redop r;
} coll_call;

/* A collective's event pair: the watchdog's completion record goes after the
 * pair's end event, not inside it (ao_comm_defer_mark). With timing on, the
 * stream is held until the call has returned (ao_stream_hold), so that the
 * pair brackets the kernel, not the library's launch path; but only where
 * the communicator has made this call before. A first call may set up
 * connections, and NCCL's network transport allocates pinned host memory
 * then, which waits for the device: for the held stream too, which waits for
 * the host to return from that very call. That was issue 52's hang (DESIGN
 * §4). The first call's pair includes its launch path; it is a warm-up step's. */
static int coll_begin(ao_engine *e, ao_comm *c, ao_stream_id sid, ao_coll_kind kind,
                      const char *name, int unit, uint64_t bytes, coll_call k)
{
    e->coll_held = e->timing && ao_comm_seen(c, k.op, k.count, k.t, k.r);
    if (e->coll_held) ao_stream_hold(ao_comm_stream(c));
    int op = op_begin(e, sid, AO_CLASS_COMM, kind, name, unit, bytes);
    ao_comm_defer_mark(c);
    return op;
}

static void coll_end(ao_engine *e, ao_comm *c, int op)
{
    ao_timeline_op_end(e->tl, op);
    if (e->coll_held) ao_stream_release(ao_comm_stream(c));
    e->coll_held = 0;
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

/* The communicator a unit's gather and reduce-scatter use. */
static ao_comm *shard_comm(ao_engine *e, int l)
{
    return e->hybrid ? e->lanes[l].group : e->lanes[l].world;
}

void ao_engine_finish(ao_engine *e)
{
    for (int i = 0; i < AO_NSTREAMS; i++)
        if (e->streams[i]) ao_wait_stream_sync(e->streams[i], "device synchronisation");
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
    int op = coll_begin(e, c, ln->sid, AO_KIND_ALLGATHER, "allgather", u, bytes,
                        (coll_call){AO_ALLGATHER, sp->shard, e->gather_type, AO_SUM});
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

/* The end of group g's chain on `last`, the stream its reduction ended on:
 * the squared sum of its final gradients (an op: compute, as the kernel
 * trace counts it), `done`, then GFULL := 0 and `zeroed`. */
static void finish_group(ao_engine *e, int g, ao_stream *last, ao_stream_id last_sid,
                         ao_phase phase, int final)
{
    rgroup *G = &e->groups[g];
    if (phase != AO_PHASE_COMM_ONLY && final) {
        int sq = op_begin(e, last_sid, AO_CLASS_COMPUTE, AO_KIND_NONE, "grad_sq", G->first_unit, 0);
        e->backend->sum_squares(last, &e->group_sq[g], e->ACC + G->shard_off, G->shard_len,
                                e->red_workspace);
        ao_timeline_op_end(e->tl, sq);
    }
    ao_event_record(G->done, last);
    /* solo: zeroed after the update (zero_solo) */
    if (e->solo && phase != AO_PHASE_COMM_ONLY) return;
    /* After `done`, so that the optimizer does not wait for it; timed, so
     * that the step's idle time is not this memset's. */
    size_t bytes = G->full_len * sizeof *e->GFULL;
    int op = op_begin(e, last_sid, AO_CLASS_COPY, AO_KIND_NONE, "zero_grad", G->first_unit, bytes);
    ao_memset_async(e->dev, e->GFULL + G->full_off, 0, bytes, last);
    ao_timeline_op_end(e->tl, op);
    ao_event_record(G->zeroed, last);
}

/* compute_only: no reduction, but the rest of the group's chain where a
 * train step runs it, on the stream its reduction would end on: beside the
 * backward, so that the baseline's compute and copies are the train step's
 * (DESIGN §7, baselines). */
static void alone_group(ao_engine *e, int g, int final)
{
    const lane *ln = &e->lanes[!e->sharded || (e->hybrid && e->replicas > 1) ? LANE_AR : LANE_RS];
    ao_stream_wait_event(ln->s, compute_point(e, e->groups[g].grad_ready));
    finish_group(e, g, ln->s, ln->sid, AO_PHASE_COMPUTE_ONLY, final);
}

/* final: the step's last reduction of the group (its ACC then complete). */
static void reduce_group(ao_engine *e, int g, ao_phase phase, int final)
{
    rgroup *G = &e->groups[g];
    if (phase == AO_PHASE_COMPUTE_ONLY) {
        alone_group(e, g, final);
        return;
    }
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
        int op = coll_begin(e, c, rs->sid, AO_KIND_REDUCESCATTER, "reducescatter", G->first_unit,
                            bytes, (coll_call){AO_REDUCESCATTER, G->shard_len, AO_F32, AO_SUM});
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
                            b2, (coll_call){AO_ALLREDUCE, G->shard_len, AO_F32, AO_SUM});
            ao_allreduce(ar->group, out, out, G->shard_len, AO_F32, AO_SUM);
            coll_end(e, ar->group, op);
            last = ar->s;
            last_sid = ar->sid;
        }
    } else {
        lane *ar = &e->lanes[LANE_AR];
        ao_stream_wait_event(ar->s, ready);
        uint64_t bytes = ao_coll_bytes(AO_ALLREDUCE, G->full_len, AO_F32, e->world);
        int op = coll_begin(e, ar->world, ar->sid, AO_KIND_ALLREDUCE, "allreduce", g, bytes,
                            (coll_call){AO_ALLREDUCE, G->full_len, AO_F32, AO_SUM});
        ao_allreduce(ar->world, gfull, out, G->full_len, AO_F32, AO_SUM);
        coll_end(e, ar->world, op);
        last = ar->s;
        last_sid = ar->sid;
    }
    if (phase == AO_PHASE_TRAIN && !first)
        e->backend->accumulate(last, e->ACC + G->shard_off, red, G->shard_len);
    finish_group(e, g, last, last_sid, phase, final);
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
    int w = ao_wait_begin("data loader", NULL,
                          "the loader's workers did not fill the batch (dataloader.num_workers, "
                          "dataset.placement)");
    if (ao_test_hang_at("loader", e->rank, ao_comm_step())) ao_test_block("loader");
    ao_loader_prepare(e->loader, step, micro);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    e->data_wait_ms +=
        (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    int op = op_begin(e, AO_STREAM_H2D, AO_CLASS_COPY, AO_KIND_NONE, "h2d", -1, e->batch_bytes);
    e->pend_batch = ao_loader_next(e->loader, step, micro, &e->pend_ready);
    ao_timeline_op_end(e->tl, op);
    ao_wait_end(w);
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
    if (e->predraw_pending && x->do_compute) {
        compute_wait(e, e->predrawn);
        e->predraw_pending = 0;
    }
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

/* One rank: the next step's dropout masks are drawn on the all-gather
 * stream (idle: its gathers are in place) beside the update, whose memory
 * traffic leaves the SMs' arithmetic free for Philox; the next forward
 * reads them instead of drawing them. Its batch was fetched during this
 * step, so its samples (the masks' keys) are known. */
static void predraw(ao_engine *e)
{
    if (!e->predraw || e->pend_step < 0 || e->pend_micro != 0 || !e->pend_batch) return;
    lane *ag = &e->lanes[LANE_AG];
    ao_stream_wait_event(ag->s, compute_point(e, e->predraw_go));
    int op = op_begin(e, ag->sid, AO_CLASS_COMPUTE, AO_KIND_NONE, "predraw", -1, 0);
    ao_model_predraw(e->model, ag->s, e->pend_step, e->pend_batch);
    ao_timeline_op_end(e->tl, op);
    ao_event_record(e->predrawn, ag->s);
    e->predraw_pending = 1;
}

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
        /* the squared norm of the unscaled gradients, summed over replicas
         * (each group's share summed by finish_group, compute_only too) */
        double unscale = 1.0 / ((double)loss_scale * loss_scale);
        e->backend->step_scalars(cs, sd->local, e->group_sq, e->ngroups, unscale / e->replicas,
                                 e->loss_dev + (size_t)slot * G, G, stop_vote ? 1.0 : 0.0);
        compute_end(e, op);
    }
    if (phase != AO_PHASE_COMPUTE_ONLY) {
        lane *ar = &e->lanes[LANE_AR];
        ao_stream_wait_event(ar->s, compute_point(e, e->sq_ready));
        uint64_t bytes = ao_coll_bytes(AO_ALLREDUCE, 3, AO_F64, e->world);
        int op = coll_begin(e, ar->world, ar->sid, AO_KIND_ALLREDUCE, "allreduce", -1, bytes,
                            (coll_call){AO_ALLREDUCE, 3, AO_F64, AO_SUM});
        ao_allreduce(ar->world, sd->local, sd->global, 3, AO_F64, AO_SUM);
        coll_end(e, ar->world, op);
        ao_event_record(e->sum_ready, ar->s);
        compute_wait(e, e->sum_ready);
    }
    if (phase == AO_PHASE_COMM_ONLY) return;
    float *p = e->P, *m = e->M, *v = e->V;
    const double *global = sd->global;
    /* compute_only: the same update on the scratch copies (made from P, M and
     * V once, at set-up: a copy per step would be device work the train step
     * does not have, on the compute stream, where the kernel trace counts it
     * as compute) */
    if (phase == AO_PHASE_COMPUTE_ONLY) {
        p = e->scratch[0];
        m = e->scratch[1];
        v = e->scratch[2];
        global = sd->local;
    }
    if (phase == AO_PHASE_TRAIN) predraw(e);
    int op = compute_begin(e, "optimizer", -1);
    /* the wire copy written by the update itself: a cast would read p again */
    e->backend->adamw(cs, p, phase == AO_PHASE_TRAIN ? e->Pw : NULL, e->gather_type, m, v, e->ACC,
                      S, &e->hp, lr, (float)cfg->training.grad_clip_norm, 1.0f / loss_scale,
                      data_step + 1, global, sd->result, e->workspace);
    compute_end(e, op);
}

/* solo: GFULL (= ACC) := 0 once the previous update has read it, first in a
 * training or compute-only iteration (so that the op is this step's, not a
 * tail of the previous one), on the reduction stream beside the forward; each group's
 * `zeroed` marks it for the backward that writes the gradients. */
static void zero_solo(ao_engine *e)
{
    if (e->overwrite) return; /* the backward writes every gradient */
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
        ao_wait_event_sync(e->slot_ev[slot], e->compute, "readback of a step's grad norm",
                           e->slot_step[slot]);
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
    if (phase == AO_PHASE_TRAIN && e->test_late_ms) ao_test_late_host(e->compute, e->test_late_ms);
    ao_comm_set_step(data_step); /* a timeout names the step of the op that hung */
    compute_moved(e);            /* whatever ran before */
    /* Gathers read the shards the previous update wrote. */
    ao_stream_wait_event(e->lanes[LANE_AG].s, e->opt_done);
    if (e->solo && phase != AO_PHASE_COMM_ONLY) zero_solo(e);
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
    e->slot_step[slot] = data_step;
    e->slot_train[slot] = phase == AO_PHASE_TRAIN;
    e->slot_lr[slot] = lr;
    e->slot_scale[slot] = scale;
    if (phase == AO_PHASE_TRAIN) {
        if (ao_test_hang_at("readback", e->rank, data_step)) {
            static const char *const where = "readback";
            ao_launch_host(e->compute, ao_test_block_fn, &where, sizeof where);
        }
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
    ao_wait_event_sync(e->slot_ev[slot], e->compute, "readback of a step's loss and grad norm",
                       e->slot_step[slot]);
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
    ao_wait_stream_sync(ar->s, "the barrier at the end of the run");
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
             "elements, %d gathered buffers, %d reduction groups; collectives: %s%s",
             strategy, e->world, e->sharded ? e->group_size : 1, e->nunits, params,
             e->synced ? " broadcast from rank 0" : "", e->lay.shard_total, e->lay.full_total,
             e->nbufs, e->ngroups, lanes, e->groups_desc);
}
