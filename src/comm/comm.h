/* The collective API: all_gather, reduce_scatter, all_reduce, broadcast (and
 * reduce, alltoall, sendrecv for `aorta coll`), each enqueued on a named
 * stream of the device API. No NCCL or MPI header is included here.
 *
 * A communicator is bound to one stream for its whole life: the engine makes
 * one per comm stream (distributed.comm_per_stream) so that an all-gather and a
 * reduce-scatter can really run at the same time. Backends: NCCL/RCCL on GPU
 * devices, MPI on the cpu device (each op runs on the stream's worker thread,
 * on a communicator duplicated for that stream).
 *
 * Counts are in elements, nccl-tests style: all_gather and reduce_scatter take
 * the per-rank count (send count of all_gather, receive count of
 * reduce_scatter); all_reduce, broadcast and reduce the whole buffer; alltoall
 * the count sent to each peer; sendrecv the count sent to (and received from)
 * the peer.
 *
 * Every op is registered with a watchdog (comm/watchdog.c): if one is not
 * complete `timeout_s` after it was enqueued, the rank prints which op hung
 * (rank, op and its number on the communicator, step, stream, bytes) and,
 * where the backend can tell (MPI), which ranks have not reached it; then it
 * aborts its communicators and exits 1. */
#ifndef AORTA_COMM_COMM_H
#define AORTA_COMM_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/device.h"

typedef struct ao_comm ao_comm;

typedef enum ao_coll {
    AO_ALLGATHER,
    AO_REDUCESCATTER,
    AO_ALLREDUCE,
    AO_BROADCAST,
    AO_REDUCE,
    AO_ALLTOALL,
    AO_SENDRECV,
    AO_NCOLLS
} ao_coll;

/* "allgather", "reducescatter", ... (DESIGN: one name per thing). */
const char *ao_coll_name(ao_coll c);
/* Accepts "allgather", "all_gather", "all-gather" and so on. */
int ao_coll_parse(const char *s, ao_coll *out);

typedef enum ao_redop { AO_SUM, AO_PROD, AO_MAX, AO_MIN, AO_AVG, AO_NREDOPS } ao_redop;
const char *ao_redop_name(ao_redop op);
int ao_redop_parse(const char *s, ao_redop *out);

/* Who this process is in the job (filled by launch/). */
typedef struct ao_rank_info {
    int rank, world_size;
    int local_rank, local_world_size;
    int node; /* index of this node, rank / local_world_size */
} ao_rank_info;

/* Communicator settings (distributed.* keys; 0 = the library's default). */
typedef struct ao_comm_opts {
    int min_ctas, max_ctas, cga_cluster_size;
    double timeout_s;  /* init and per-op; 0 = no timeout */
    int blocking_init; /* 0: non-blocking init polled against timeout_s */
} ao_comm_opts;

/* Bootstrap id: opaque bytes rank 0 creates and every rank receives (through
 * the launcher's environment, MPI or a rendezvous file). */
#define AO_COMM_ID_BYTES 128
typedef struct ao_comm_id {
    unsigned char bytes[AO_COMM_ID_BYTES];
} ao_comm_id;

/* Backends compiled in: "mpi", "nccl" (or "rccl"). */
int ao_comm_backend_count(void);
const char *ao_comm_backend_name(int i);
void ao_comm_backend_version(int i, char *buf, size_t n);
/* The comm backend that serves devices of this device backend, or NULL. */
const char *ao_comm_backend_for(const char *device_backend);
/* Load the plugin of the comm backend for device_backend: 0, or -1 after one
 * error line naming the library that is missing (0 when the build has none:
 * the caller says so in its words). The launcher calls it before it starts
 * ranks, so a missing MPI is said once, not once per rank. */
int ao_comm_backend_load(const char *device_backend);

/* Rank 0 only: make a fresh id for `backend` ("nccl"); the mpi backend needs
 * none and leaves it zeroed. Returns 0 or -1 after printing why. */
int ao_comm_make_id(const char *backend, ao_comm_id *id);
/* Hex encoding for the AORTA_COMM_ID environment variable. */
void ao_comm_id_to_hex(const ao_comm_id *id, char hex[2 * AO_COMM_ID_BYTES + 1]);
int ao_comm_id_from_hex(const char *hex, ao_comm_id *id);

/* Create a communicator over all ranks, bound to stream `s` of `dev`. Every
 * rank passes the same id. Returns NULL after printing why. */
ao_comm *ao_comm_create(ao_device *dev, ao_stream *s, const ao_rank_info *ri, const ao_comm_id *id,
                        const ao_comm_opts *opts);
/* A communicator over the ranks that pass the same color, ordered by key,
 * bound to stream `s` (hybrid sharding). Collective over `parent`'s ranks. */
ao_comm *ao_comm_split(ao_comm *parent, ao_stream *s, int color, int key);
void ao_comm_destroy(ao_comm *c);
/* Abort outstanding work (after an error or a timeout); the comm is then only
 * good for ao_comm_destroy. */
void ao_comm_abort(ao_comm *c);
int ao_comm_rank(ao_comm *c);
int ao_comm_size(ao_comm *c);
ao_stream *ao_comm_stream(ao_comm *c);
/* The watchdog records a completion event on c's stream right after each op.
 * A caller that times an op with an event pair of its own defers that record
 * past its pair's end event: ao_comm_defer_mark(c) before the op, then
 * ao_comm_mark(c) after the end event. Otherwise the pair would hold the
 * watchdog's record too: an event record, ~3 us of device time on an H200
 * (bench/api_cost's device table), counted as communication while compute
 * runs. c's next op or its destroy marks what was left unmarked. */
void ao_comm_defer_mark(ao_comm *c);
void ao_comm_mark(ao_comm *c);

/* Whether c has enqueued this collective (kind, count, dtype, reduction)
 * before. A library's first call of a kind on a communicator may set up
 * connections and wait for the device meanwhile (NCCL connects lazily, and
 * its network transport allocates pinned host memory then, an implicit
 * synchronisation of the device): nothing may hold a stream that such a wait
 * waits for across that call (DESIGN §4). */
int ao_comm_seen(ao_comm *c, ao_coll op, size_t count, ao_dtype t, ao_redop r);

/* The step (a metrics record's "step") that ops enqueued from now on belong
 * to, process-wide, for the watchdog's message; -1 (the start) for none. */
void ao_comm_set_step(int64_t step);
int64_t ao_comm_step(void);

void ao_allgather(ao_comm *c, const void *send, void *recv, size_t count, ao_dtype t);
void ao_reducescatter(ao_comm *c, const void *send, void *recv, size_t recv_count, ao_dtype t,
                      ao_redop op);
void ao_allreduce(ao_comm *c, const void *send, void *recv, size_t count, ao_dtype t, ao_redop op);
void ao_broadcast(ao_comm *c, const void *send, void *recv, size_t count, ao_dtype t, int root);
void ao_reduce(ao_comm *c, const void *send, void *recv, size_t count, ao_dtype t, ao_redop op,
               int root);
void ao_alltoall(ao_comm *c, const void *send, void *recv, size_t count, ao_dtype t);
void ao_sendrecv(ao_comm *c, const void *send, int send_peer, void *recv, int recv_peer,
                 size_t count, ao_dtype t);

/* Bytes an op moves in nccl-tests' sense (the "size" column) and its bus
 * bandwidth factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter and
 * alltoall (n-1)/n; broadcast, reduce and sendrecv 1. */
size_t ao_coll_bytes(ao_coll c, size_t count, ao_dtype t, int nranks);
double ao_coll_busbw_factor(ao_coll c, int nranks);

/* ---- for backends only --------------------------------------------------- */

struct ao_comm_ops {
    const char *name;
    const char *device_backend; /* the device backend whose memory it moves */
    void (*version)(char *buf, size_t n);
    int (*make_id)(ao_comm_id *id);
    ao_comm *(*create)(ao_device *, ao_stream *, const ao_rank_info *, const ao_comm_id *,
                       const ao_comm_opts *);
    ao_comm *(*split)(ao_comm *, ao_stream *, int color, int key);
    void (*destroy)(ao_comm *);
    void (*abort)(ao_comm *);
    /* Enqueue one collective on the comm's stream. */
    void (*coll)(ao_comm *, ao_coll, const void *send, void *recv, size_t count, ao_dtype, ao_redop,
                 int root_or_peer, int recv_peer);
    /* 0 when healthy; else -1 with a message in buf (ncclCommGetAsyncError). */
    int (*check)(ao_comm *, char *buf, size_t n);
    /* Optional: after op `seq` (1-based, in enqueue order on this comm) timed
     * out, which ranks have not reached it, in words, and whether this rank
     * has (*self_started); 0, or -1 if unknown. */
    int (*stalled)(ao_comm *, uint64_t seq, int *self_started, char *buf, size_t n);
};

/* Every backend's comm struct begins with this header. */
struct ao_comm_base {
    const struct ao_comm_ops *ops;
    ao_device *dev;
    ao_stream *stream;
    int rank, size;
    double timeout_s;
    struct ao_watch *watch; /* set and cleared by comm.c (the watchdog), not by backends */
    int defer_mark;         /* ao_comm_defer_mark: the next op is marked by ao_comm_mark */
    uint64_t *seen;         /* ao_comm_seen's signatures (comm.c): open addressing */
    size_t seen_cap, seen_n;
};

#ifdef AORTA_HAVE_MPI
extern const struct ao_comm_ops ao_mpi_comm_ops;
#endif
#ifdef AORTA_HAVE_NCCL
extern const struct ao_comm_ops ao_nccl_comm_ops;
#endif

#endif
