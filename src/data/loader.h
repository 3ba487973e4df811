/* The data loader of one rank: the micro-batches it trains on, delivered into
 * device buffers ahead of use (DESIGN §6).
 *
 * Which samples. Micro-batch j of step s on rank r of W ranks, B samples per
 * rank and G micro-batches per step, holds the B consecutive positions of the
 * sample stream starting at
 *   first = ((s*G + j)*W + r)*B
 * so within one micro-batch slot the W ranks hold W adjacent blocks: rank r's
 * block of step s (G = 1) sits at s*W*B + r*B, and W ranks x B see exactly the
 * samples of 1 rank x W*B. Position p holds sample p mod num_samples (the
 * dataset is num_samples long and wraps; a batch may straddle the wrap). The
 * batch's `first_sample` is the unwrapped position `first`, which keys the
 * dropout masks, so masks are a function of the position in the run, not of
 * which epoch a sample is in.
 *
 * Where the samples are made (dataset.placement):
 * - AO_PLACEMENT_HOST: `workers` threads (dataloader.num_workers; 0 = fill in
 *   the caller's thread on demand) run ao_data_fill into a ring of `depth` host
 *   buffers (page-locked through ao_host_alloc when `pinned`, else malloc), in
 *   the order the batches are expected (step-major, micro-batch minor,
 *   following the last request). The consumer takes a filled buffer, enqueues
 *   its copy into the device buffers on the `h2d` stream and records the
 *   batch's ready event there. A host buffer is refilled only after the event
 *   of the copy that reads it completed.
 * - AO_PLACEMENT_DEVICE: the samples are generated on the device by work
 *   enqueued on `h2d` (loader_backend.h: on the cpu backend a closure calling
 *   ao_data_fill, on cuda the data-fill kernel, the same samples); nothing is
 *   copied and no worker runs. A backend without a generator is refused at
 *   create.
 *
 * Device buffers: `depth` sets of them, used in turn. The compute stream must
 * wait on the ready event before reading a batch (ao_stream_wait_event), and
 * should call ao_loader_release once its last use of the batch is enqueued:
 * the generation or copy that later reuses the same device buffers (the
 * depth-th next call after this one) then waits for that point on the device.
 * Without a release, the buffers are overwritten as soon as `h2d` reaches that
 * later copy. */
#ifndef AORTA_DATA_LOADER_H
#define AORTA_DATA_LOADER_H

#include <stdint.h>

#include "core/config.h"
#include "data/data.h"
#include "runtime/device.h"

typedef struct ao_loader_config {
    ao_data_shape data;  /* dataset shape (T, F, D, S, V) */
    uint64_t seed;       /* dataset.seed */
    int target_kind;     /* enum ao_target_kind */
    int batch;           /* B: samples per micro-batch on this rank */
    int world;           /* W */
    int rank;            /* r, 0 <= r < W */
    int accum;           /* G: micro-batches per step (gradient_accumulation) */
    int64_t num_samples; /* dataset.num_samples: positions wrap modulo this */
    int placement;       /* enum ao_data_placement */
    int workers;         /* dataloader.num_workers, >= 0 (host placement) */
    int pinned;          /* dataloader.pin_memory (host placement) */
    int depth;           /* batches in flight, >= 1 (2 double-buffers) */
} ao_loader_config;

typedef struct ao_loader ao_loader;

/* The unwrapped stream position of micro-batch `micro` of `step` (the formula
 * above). */
int64_t ao_loader_first_sample(const ao_loader_config *cfg, int64_t step, int micro);

/* Checks cfg, allocates the buffers and starts the workers. Returns NULL after
 * one error line naming the offending key (or the backend that cannot do the
 * placement). */
ao_loader *ao_loader_create(ao_device *dev, ao_stream *h2d, const ao_loader_config *cfg);
/* Stops the workers (also those waiting for a free buffer), waits for the
 * work it enqueued on `h2d` (ao_stream_sync) and frees everything. NULL is a
 * no-op. */
void ao_loader_destroy(ao_loader *l);

/* Waits on the host until the batch of (step, micro) is ready to copy (host
 * placement: filled by a worker, or filled here without workers; device
 * placement: returns at once), so that the caller can time that wait apart
 * from the copy (data_wait_ms) and start the copy's interval after it. The
 * next ao_loader_next for the same batch takes it without waiting. */
void ao_loader_prepare(ao_loader *l, int64_t step, int micro);
/* The batch of (step, micro), in device memory, with its copy or generation
 * enqueued on `h2d`; *ready (when non-NULL) is the event recorded after it.
 * The batch and the event stay valid until the depth-th next call after this
 * one. Requests normally come in order; any other order is served too (the
 * prefetched buffers are dropped and prefetching restarts at the request). */
const ao_batch *ao_loader_next(ao_loader *l, int64_t step, int micro, ao_event **ready);
/* Records on `consumer` the point after the last use of b (a batch of this
 * loader); the work that reuses b's device buffers waits for it. */
void ao_loader_release(ao_loader *l, const ao_batch *b, ao_stream *consumer);

/* Batches in flight for a placement and worker count: the batch in use, the
 * prefetched one, and one being filled per host worker (with fewer slots
 * than workers, workers sit idle and the host fill paces the step);
 * generated on the device, one being filled is enough. */
int ao_loader_depth_for(int placement, int workers);
/* Device bytes of one batch's buffers (dense, ids, target, weight). */
size_t ao_loader_slot_bytes(const ao_loader_config *cfg);

/* Bytes one batch moves host to device (its h2d copy), 0 for device
 * placement: B*T*(F*D*4 + S*4 + 4 + 4). */
size_t ao_loader_batch_bytes(const ao_loader *l);

#endif
