/* The data loader (loader.h): a ring of host buffers filled ahead by worker
 * threads and copied on the h2d stream, or generation on the device.
 *
 * Host buffers move FREE -> FILLING (a worker, or the caller with no workers)
 * -> FILLED -> COPYING (the consumer enqueued the copy reading it) -> FREE
 * (the copy's event completed; only the consumer checks, so workers never
 * call the device API). Batches are numbered by their ordinal q = step*G +
 * micro; workers fill ordinals from `next_fill` upwards. A request for an
 * ordinal that is neither buffered nor next starts a new generation: buffers
 * of older generations are dropped (a worker still filling one frees it when
 * done). One mutex guards the ring; fills and device calls run outside it
 * except the non-blocking event queries. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/error.h"
#include "data/loader.h"
#include "data/loader_backend.h"
#include "runtime/backend_table.h"

_Static_assert((int)AO_DATASET_TARGET_RANDOM == (int)AO_TARGET_RANDOM &&
                   (int)AO_DATASET_TARGET_TEACHER == (int)AO_TARGET_TEACHER,
               "dataset.target values pass to ao_data_fill as they are");

enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_FILLED, SLOT_COPYING };

/* One batch's arrays in one block, in this order: dense, ids, target,
 * weight (all 4-byte elements), so a batch is copied with one call. */
typedef struct {
    float *dense;
    int32_t *ids;
    float *target, *weight;
} batch_arrays;

/* Each slot on cache lines of its own (64-byte aligned and padded): the
 * workers filling neighbouring slots update their states without sharing a
 * line. */
typedef struct {
    _Alignas(64) enum slot_state state;
    int64_t ordinal;
    uint64_t generation;
    uint64_t copy_order; /* when its copy was enqueued: the oldest is recycled first */
    void *mem;
    batch_arrays arr;
    ao_event *copied;
} host_slot;

typedef struct {
    void *mem;
    ao_batch batch;
    ao_event *ready;
    ao_event *released;
    int release_pending;
} dev_slot;

struct ao_loader {
    ao_device *dev;
    ao_stream *h2d;
    const struct ao_loader_backend *gen; /* device placement: the device's generator */
    ao_loader_config cfg;
    size_t bytes; /* one batch's block */
    int64_t calls;
    dev_slot *dev_slots; /* [depth] */

    /* host placement */
    host_slot *host; /* [depth] */
    pthread_t *threads;
    int nthreads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t next_fill;
    uint64_t generation;
    uint64_t copies;
    int shutdown;
    /* ao_loader_prepare's slot, taken by the next ao_loader_next of its ordinal */
    host_slot *prepared;
    int64_t prepared_q;
    int test_slow_ms; /* AORTA_TEST_SLOW_INPUT, 0: none */
};

/* AORTA_TEST_SLOW_INPUT=MS (tests only, never a tuning knob; as the engine's
 * test_hooks.h plants a slow rank): every host batch fill takes MS ms more,
 * so that an input-bound run is planted, whatever this machine's data
 * generator makes of its compute (tests/e2e/diagnose_cpu.sh). */
static int test_slow_input_ms(void)
{
    const char *v = getenv("AORTA_TEST_SLOW_INPUT");
    long ms = v && *v ? strtol(v, NULL, 10) : 0;
    if (ms <= 0) return 0;
    if (ms > 10000) ms = 10000;
    ao_warn("AORTA_TEST_SLOW_INPUT: every host batch fill takes %ld ms more (a planted fault for "
            "tests)",
            ms);
    return (int)ms;
}

int64_t ao_loader_first_sample(const ao_loader_config *cfg, int64_t step, int micro)
{
    return ((step * cfg->accum + micro) * cfg->world + cfg->rank) * (int64_t)cfg->batch;
}

static batch_arrays arrays_of(const ao_loader_config *cfg, void *mem)
{
    const ao_data_shape *d = &cfg->data;
    const size_t tokens = (size_t)cfg->batch * d->seq_len;
    batch_arrays a;
    a.dense = mem;
    a.ids = (int32_t *)(a.dense + tokens * d->num_dense * d->dense_dim);
    a.target = (float *)(a.ids + tokens * d->num_sparse);
    a.weight = a.target + tokens;
    return a;
}

/* One run of consecutive samples into arrays at sample offset `at` (what
 * ao_data_fill's arguments are, on the host or enqueued on a device). */
typedef void (*fill_run_fn)(void *ctx, const ao_loader_config *cfg, uint64_t sample, int count,
                            const batch_arrays *a, int at);

/* Positions first .. first+B-1, position p holding sample p mod num_samples:
 * one fill per run of consecutive samples. */
static void for_each_run(const ao_loader_config *cfg, int64_t first, const batch_arrays *a,
                         fill_run_fn fill, void *ctx)
{
    for (int i = 0; i < cfg->batch;) {
        int64_t g = (first + i) % cfg->num_samples;
        int64_t run = cfg->num_samples - g;
        if (run > cfg->batch - i) run = cfg->batch - i;
        fill(ctx, cfg, (uint64_t)g, (int)run, a, i);
        i += (int)run;
    }
}

/* The arrays of `a` from sample offset `at` on. */
static batch_arrays arrays_at(const ao_loader_config *cfg, const batch_arrays *a, int at)
{
    const ao_data_shape *d = &cfg->data;
    const size_t dense_per = (size_t)d->seq_len * d->num_dense * d->dense_dim;
    const size_t ids_per = (size_t)d->seq_len * d->num_sparse, tok_per = (size_t)d->seq_len;
    batch_arrays r = {a->dense + at * dense_per, a->ids + at * ids_per, a->target + at * tok_per,
                      a->weight + at * tok_per};
    return r;
}

static void fill_run_host(void *ctx, const ao_loader_config *cfg, uint64_t sample, int count,
                          const batch_arrays *a, int at)
{
    (void)ctx;
    batch_arrays r = arrays_at(cfg, a, at);
    /* shape, kind and batch were checked at create: this cannot fail */
    (void)ao_data_fill(&cfg->data, cfg->seed, cfg->target_kind, sample, count, r.dense, r.ids,
                       r.target, r.weight);
}

static void fill_positions(const ao_loader_config *cfg, int64_t first, const batch_arrays *a)
{
    for_each_run(cfg, first, a, fill_run_host, NULL);
}

static int64_t first_of_ordinal(const ao_loader_config *cfg, int64_t q)
{
    return (q * cfg->world + cfg->rank) * (int64_t)cfg->batch;
}

/* ---- host placement: the ring ---------------------------------------------------- */

/* Claims a FREE slot for ordinal next_fill (lock held); NULL when none. */
static host_slot *claim_free(ao_loader *l)
{
    for (int i = 0; i < l->cfg.depth; i++) {
        host_slot *h = &l->host[i];
        if (h->state != SLOT_FREE) continue;
        h->state = SLOT_FILLING;
        h->ordinal = l->next_fill++;
        h->generation = l->generation;
        return h;
    }
    return NULL;
}

/* Fills a claimed slot with the lock released, then publishes it. */
static void fill_claimed(ao_loader *l, host_slot *h)
{
    int64_t q = h->ordinal;
    pthread_mutex_unlock(&l->mu);
    fill_positions(&l->cfg, first_of_ordinal(&l->cfg, q), &h->arr);
    if (l->test_slow_ms) {
        struct timespec ts = {l->test_slow_ms / 1000, (long)(l->test_slow_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    pthread_mutex_lock(&l->mu);
    h->state = h->generation == l->generation ? SLOT_FILLED : SLOT_FREE;
    pthread_cond_broadcast(&l->cv);
}

static void *worker_main(void *arg)
{
    ao_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->shutdown) {
        host_slot *h = claim_free(l);
        if (h)
            fill_claimed(l, h);
        else
            pthread_cond_wait(&l->cv, &l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Frees the slots whose copy completed (lock held; never blocks). */
static void recycle_copied(ao_loader *l)
{
    int freed = 0;
    for (int i = 0; i < l->cfg.depth; i++) {
        host_slot *h = &l->host[i];
        if (h->state == SLOT_COPYING && ao_event_query(h->copied)) {
            h->state = SLOT_FREE;
            freed = 1;
        }
    }
    if (freed) pthread_cond_broadcast(&l->cv);
}

static host_slot *oldest_copying(ao_loader *l)
{
    host_slot *oldest = NULL;
    for (int i = 0; i < l->cfg.depth; i++) {
        host_slot *h = &l->host[i];
        if (h->state == SLOT_COPYING && (!oldest || h->copy_order < oldest->copy_order)) oldest = h;
    }
    return oldest;
}

/* The FILLED slot of ordinal q, waiting for (or doing) its fill. */
static host_slot *host_slot_for(ao_loader *l, int64_t q)
{
    pthread_mutex_lock(&l->mu);
    for (;;) {
        recycle_copied(l);
        host_slot *found = NULL;
        int free_slots = 0;
        for (int i = 0; i < l->cfg.depth; i++) {
            host_slot *h = &l->host[i];
            int current = h->generation == l->generation;
            /* batches skipped over or of an abandoned prediction */
            if (h->state == SLOT_FILLED && (!current || h->ordinal < q)) {
                h->state = SLOT_FREE;
                pthread_cond_broadcast(&l->cv);
            }
            if ((h->state == SLOT_FILLING || h->state == SLOT_FILLED) && current && h->ordinal == q)
                found = h;
            free_slots += h->state == SLOT_FREE;
        }
        if (!found && q != l->next_fill) {
            l->generation++;
            l->next_fill = q;
            continue; /* drops the FILLED slots of the old generation */
        }
        if (found && found->state == SLOT_FILLED) {
            pthread_mutex_unlock(&l->mu);
            return found;
        }
        if (!found && l->nthreads == 0 && free_slots > 0) {
            host_slot *h = claim_free(l);
            fill_claimed(l, h);
            continue;
        }
        if (!found && free_slots == 0) {
            /* every buffer is being copied: wait for the oldest copy */
            host_slot *h = oldest_copying(l);
            if (h) {
                pthread_mutex_unlock(&l->mu);
                ao_event_sync(h->copied);
                pthread_mutex_lock(&l->mu);
                h->state = SLOT_FREE;
                pthread_cond_broadcast(&l->cv);
                continue;
            }
        }
        pthread_cond_wait(&l->cv, &l->mu);
    }
}

/* ---- device placement ------------------------------------------------------------ */

/* The cpu device generates with ao_data_fill in a closure on the stream. */
typedef struct {
    ao_data_shape shape;
    uint64_t seed, first;
    int kind, batch;
    batch_arrays arr;
} cpu_fill_args;

static void cpu_fill_closure(void *arg)
{
    const cpu_fill_args *a = arg;
    (void)ao_data_fill(&a->shape, a->seed, a->kind, a->first, a->batch, a->arr.dense, a->arr.ids,
                       a->arr.target, a->arr.weight);
}

static void cpu_fill(ao_stream *s, const ao_data_shape *shape, uint64_t seed, int target_kind,
                     uint64_t first_global_index, int batch, float *dense, int32_t *ids,
                     float *target, float *weight)
{
    cpu_fill_args a = {*shape,      seed,  first_global_index,
                       target_kind, batch, {dense, ids, target, weight}};
    ao_launch_host(s, cpu_fill_closure, &a, sizeof a);
}

const struct ao_loader_backend ao_loader_cpu_backend = {.device_backend = "cpu", .fill = cpu_fill};

_Static_assert(offsetof(struct ao_loader_backend, device_backend) == 0, "backend_table.h");

static const struct ao_loader_backend *loader_backend_for(ao_device *dev)
{
    return AO_BACKEND_FIND(ao_loader, dev);
}

static void fill_run_device(void *ctx, const ao_loader_config *cfg, uint64_t sample, int count,
                            const batch_arrays *a, int at)
{
    const ao_loader *l = ctx;
    batch_arrays r = arrays_at(cfg, a, at);
    l->gen->fill(l->h2d, &cfg->data, cfg->seed, cfg->target_kind, sample, count, r.dense, r.ids,
                 r.target, r.weight);
}

/* ---- the API --------------------------------------------------------------------- */

static int check_config(ao_device *dev, const ao_loader_config *c)
{
    const char *what = "data loader";
    if (ao_data_shape_check(&c->data)) return AO_EXIT_USAGE;
    if (c->target_kind != AO_TARGET_RANDOM && c->target_kind != AO_TARGET_TEACHER) {
        ao_error(what, "dataset.target: unknown kind %d (allowed: random, teacher)",
                 c->target_kind);
        return AO_EXIT_USAGE;
    }
    if (c->batch < 1) {
        ao_error(what, "training.batch_size must be at least 1, got %d", c->batch);
        return AO_EXIT_USAGE;
    }
    if (c->accum < 1) {
        ao_error(what, "training.gradient_accumulation must be at least 1, got %d", c->accum);
        return AO_EXIT_USAGE;
    }
    if (c->world < 1 || c->rank < 0 || c->rank >= c->world) {
        ao_error(what, "rank %d of %d ranks does not exist", c->rank, c->world);
        return AO_EXIT_USAGE;
    }
    if (c->num_samples < 1) {
        ao_error(what, "dataset.num_samples must be at least 1, got %lld",
                 (long long)c->num_samples);
        return AO_EXIT_USAGE;
    }
    if (c->workers < 0) {
        ao_error(what, "dataloader.num_workers must be at least 0, got %d", c->workers);
        return AO_EXIT_USAGE;
    }
    if (c->depth < 1) {
        ao_error(what, "the prefetch depth must be at least 1, got %d", c->depth);
        return AO_EXIT_USAGE;
    }
    if (c->placement != AO_PLACEMENT_HOST && c->placement != AO_PLACEMENT_DEVICE) {
        ao_error(what, "dataset.placement: unknown value %d (allowed: host, device)", c->placement);
        return AO_EXIT_USAGE;
    }
    if (c->placement == AO_PLACEMENT_DEVICE && !loader_backend_for(dev)) {
        ao_error(what, "dataset.placement: device has no %s generator in this build",
                 ao_device_backend(dev));
        ao_hint("set dataset.placement: host");
        return AO_EXIT_USAGE;
    }
    return 0;
}

static void free_loader(ao_loader *l)
{
    for (int i = 0; i < l->cfg.depth; i++) {
        dev_slot *d = &l->dev_slots[i];
        if (d->mem) ao_dev_free(l->dev, d->mem);
        if (d->ready) ao_event_destroy(d->ready);
        if (d->released) ao_event_destroy(d->released);
        if (!l->host) continue;
        host_slot *h = &l->host[i];
        if (h->copied) ao_event_destroy(h->copied);
        if (!h->mem) continue;
        if (l->cfg.pinned)
            ao_host_free(l->dev, h->mem);
        else
            free(h->mem);
    }
    free(l->dev_slots);
    free(l->host);
    free(l->threads);
    free(l);
}

static void stop_workers(ao_loader *l)
{
    pthread_mutex_lock(&l->mu);
    l->shutdown = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nthreads; i++) pthread_join(l->threads[i], NULL);
    l->nthreads = 0;
}

ao_loader *ao_loader_create(ao_device *dev, ao_stream *h2d, const ao_loader_config *cfg)
{
    if (check_config(dev, cfg)) return NULL;
    ao_loader *l = ao_calloc(1, sizeof *l);
    l->dev = dev;
    l->h2d = h2d;
    l->cfg = *cfg;
    l->gen = cfg->placement == AO_PLACEMENT_DEVICE ? loader_backend_for(dev) : NULL;
    if (!l->gen) l->test_slow_ms = test_slow_input_ms();
    l->bytes = ao_loader_slot_bytes(cfg);
    l->dev_slots = ao_calloc((size_t)cfg->depth, sizeof *l->dev_slots);
    for (int i = 0; i < cfg->depth; i++) {
        dev_slot *s = &l->dev_slots[i];
        s->mem = ao_dev_alloc(dev, l->bytes);
        s->ready = ao_event_create(dev);
        s->released = ao_event_create(dev);
        batch_arrays a = arrays_of(cfg, s->mem);
        s->batch = (ao_batch){a.dense, a.ids, a.target, a.weight, 0};
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (cfg->placement == AO_PLACEMENT_DEVICE) return l;

    size_t slots_bytes = (size_t)cfg->depth * sizeof *l->host; /* a multiple of 64 */
    l->host = aligned_alloc(64, slots_bytes);
    if (!l->host) l->host = ao_calloc(1, slots_bytes); /* reports the out-of-memory */
    memset(l->host, 0, slots_bytes);
    for (int i = 0; i < cfg->depth; i++) {
        host_slot *h = &l->host[i];
        h->mem = cfg->pinned ? ao_host_alloc(dev, l->bytes) : ao_malloc(l->bytes);
        h->arr = arrays_of(cfg, h->mem);
        h->copied = ao_event_create(dev);
    }
    l->threads = ao_calloc((size_t)(cfg->workers ? cfg->workers : 1), sizeof *l->threads);
    for (int i = 0; i < cfg->workers; i++) {
        int rc = pthread_create(&l->threads[i], NULL, worker_main, l);
        if (rc) {
            ao_error("data loader", "cannot start worker thread %d of %d: %s", i + 1, cfg->workers,
                     strerror(rc));
            ao_hint("lower dataloader.num_workers");
            stop_workers(l);
            pthread_mutex_destroy(&l->mu);
            pthread_cond_destroy(&l->cv);
            free_loader(l);
            return NULL;
        }
        l->nthreads++;
    }
    return l;
}

void ao_loader_destroy(ao_loader *l)
{
    if (!l) return;
    stop_workers(l);
    ao_stream_sync(l->h2d);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free_loader(l);
}

static int64_t ordinal_of(const ao_loader *l, int64_t step, int micro)
{
    if (step < 0 || micro < 0 || micro >= l->cfg.accum)
        ao_fatal(AO_EXIT_FAIL, "data loader",
                 "asked for micro-batch %d of step %lld (steps from 0, micro-batches 0..%d)", micro,
                 (long long)step, l->cfg.accum - 1);
    return step * l->cfg.accum + micro;
}

void ao_loader_prepare(ao_loader *l, int64_t step, int micro)
{
    const int64_t q = ordinal_of(l, step, micro);
    if (l->cfg.placement != AO_PLACEMENT_HOST) return;
    l->prepared = host_slot_for(l, q);
    l->prepared_q = q;
}

const ao_batch *ao_loader_next(ao_loader *l, int64_t step, int micro, ao_event **ready)
{
    const int64_t q = ordinal_of(l, step, micro);
    dev_slot *d = &l->dev_slots[l->calls++ % l->cfg.depth];
    d->batch.first_sample = first_of_ordinal(&l->cfg, q);

    host_slot *h = NULL;
    if (l->cfg.placement == AO_PLACEMENT_HOST)
        h = l->prepared && l->prepared_q == q ? l->prepared : host_slot_for(l, q);
    l->prepared = NULL;
    if (d->release_pending) {
        ao_stream_wait_event(l->h2d, d->released);
        d->release_pending = 0;
    }
    if (h) {
        ao_copy_async(l->dev, d->mem, h->mem, l->bytes, AO_H2D, l->h2d);
        ao_event_record(h->copied, l->h2d);
        pthread_mutex_lock(&l->mu);
        h->state = SLOT_COPYING;
        h->copy_order = l->copies++;
        pthread_mutex_unlock(&l->mu);
    } else {
        batch_arrays a = arrays_of(&l->cfg, d->mem);
        for_each_run(&l->cfg, d->batch.first_sample, &a, fill_run_device, l);
    }
    ao_event_record(d->ready, l->h2d);
    if (ready) *ready = d->ready;
    return &d->batch;
}

void ao_loader_release(ao_loader *l, const ao_batch *b, ao_stream *consumer)
{
    for (int i = 0; i < l->cfg.depth; i++) {
        dev_slot *d = &l->dev_slots[i];
        if (&d->batch != b) continue;
        ao_event_record(d->released, consumer);
        d->release_pending = 1;
        return;
    }
    ao_fatal(AO_EXIT_FAIL, "data loader", "released a batch this loader did not make");
}

int ao_loader_depth_for(int placement, int workers)
{
    return 2 + (placement == AO_PLACEMENT_HOST && workers > 1 ? workers : 1);
}

size_t ao_loader_slot_bytes(const ao_loader_config *cfg)
{
    const ao_data_shape *d = &cfg->data;
    const size_t tokens = (size_t)cfg->batch * d->seq_len;
    return 4 * tokens * ((size_t)d->num_dense * d->dense_dim + (size_t)d->num_sparse + 2);
}

size_t ao_loader_batch_bytes(const ao_loader *l)
{
    return l->cfg.placement == AO_PLACEMENT_HOST ? l->bytes : 0;
}
