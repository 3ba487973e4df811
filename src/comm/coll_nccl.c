/* The NCCL comm backend (RCCL through gpu_compat.h): one ncclComm_t per
 * ao_comm, every op enqueued on the CUDA stream the comm is bound to.
 *
 * Init is non-blocking, bounded by opts->timeout_s (blocking with
 * opts->blocking_init); the ops then run on a blocking child communicator
 * (see blocking_child). A call on a non-blocking communicator may answer
 * ncclInProgress, "still working on the host side", which is polled with
 * ncclCommGetAsyncError until it settles (NCCL's documented protocol). */
#include <assert.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/comm.h"
#include "comm/nccl_compat.h"
#include "core/error.h"
#include "runtime/device_cuda.h"

static_assert(sizeof(ncclUniqueId) <= AO_COMM_ID_BYTES, "ncclUniqueId does not fit ao_comm_id");

struct ao_comm {
    struct ao_comm_base base;
    ncclComm_t comm;
    int aborted;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Turns a call's ncclInProgress into its final result by polling; returns
 * ncclInProgress only when timeout_s (> 0) passed first. */
static ncclResult_t settle(ncclComm_t comm, ncclResult_t r, double timeout_s)
{
    const double t0 = now_s();
    while (r == ncclInProgress) {
        if (timeout_s > 0 && now_s() - t0 > timeout_s) return ncclInProgress;
        sched_yield();
        ncclResult_t state = ncclSuccess;
        ncclResult_t q = ncclCommGetAsyncError(comm, &state);
        r = q != ncclSuccess ? q : state;
    }
    return r;
}

static void abort_comm(ao_comm *c)
{
    if (c->aborted) return;
    c->aborted = 1;
    (void)ncclCommAbort(c->comm);
}

/* A failed or timed-out enqueue is a run failure: abort and exit 1. */
static void op_check(ao_comm *c, ncclResult_t r, const char *what)
{
    r = settle(c->comm, r, c->base.timeout_s);
    if (r == ncclSuccess) return;
    if (r == ncclInProgress) {
        abort_comm(c);
        ao_fatal(AO_EXIT_FAIL, what,
                 "rank %d: not enqueued on stream %s after %.1f s; communicator aborted",
                 c->base.rank, ao_stream_name(c->base.stream), c->base.timeout_s);
    }
    const char *last = ncclGetLastError(c->comm);
    abort_comm(c);
    ao_fatal(AO_EXIT_FAIL, what, "rank %d: %s%s%s", c->base.rank, ncclGetErrorString(r),
             last && *last ? ": " : "", last ? last : "");
}

static void nccl_version(char *buf, size_t n)
{
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) {
        snprintf(buf, n, "%s (version unknown)", AO_GPU_COMM);
        return;
    }
    /* 2.9 changed the code from 1000*major+100*minor+patch to 10000*major+... */
    if (v >= 20900)
        snprintf(buf, n, "%s %d.%d.%d", AO_GPU_COMM, v / 10000, (v % 10000) / 100, v % 100);
    else
        snprintf(buf, n, "%s %d.%d.%d", AO_GPU_COMM, v / 1000, (v % 1000) / 100, v % 100);
}

static int nccl_make_id(ao_comm_id *id)
{
    ncclUniqueId uid;
    ncclResult_t r = ncclGetUniqueId(&uid);
    if (r != ncclSuccess) {
        ao_error("ncclGetUniqueId", "%s: %s", ncclGetErrorString(r), ncclGetLastError(NULL));
        ao_hint("NCCL needs a usable network interface for its bootstrap (see NCCL_SOCKET_IFNAME)");
        return -1;
    }
    memset(id, 0, sizeof *id);
    memcpy(id->bytes, &uid, sizeof uid);
    return 0;
}

static ao_comm *wrap(ao_device *dev, ao_stream *s, ncclComm_t comm, double timeout_s)
{
    ao_comm *c = ao_calloc(1, sizeof *c);
    c->base.ops = &ao_nccl_comm_ops;
    c->base.dev = dev;
    c->base.stream = s;
    c->base.timeout_s = timeout_s;
    c->comm = comm;
    int rank = 0, size = 0;
    if (ncclCommUserRank(comm, &rank) != ncclSuccess || ncclCommCount(comm, &size) != ncclSuccess)
        ao_fatal(AO_EXIT_FAIL, "nccl", "cannot read rank and size of a new communicator: %s",
                 ncclGetLastError(comm));
    c->base.rank = rank;
    c->base.size = size;
    return c;
}

static int check_stream(ao_device *dev, ao_stream *s)
{
    if (!ao_cuda_is_device(dev)) {
        ao_error(AO_GPU_COMM, "needs a " AO_GPU_BACKEND " device, got a %s device",
                 ao_device_backend(dev));
        return -1;
    }
    if (!s || ao_cuda_stream_device(s) != dev) {
        ao_error(AO_GPU_COMM, "the communicator's stream must be a stream of its device");
        return -1;
    }
    return 0;
}

/* Init is non-blocking so that a rank that never joins times out instead of
 * hanging. But every call on a non-blocking communicator pays for NCCL's
 * asynchronous enqueue and our polling: measured on 2xH200, NCCL 2.28, an
 * 8-byte all-reduce took 70 us per op against 10 us on a blocking one
 * (bench/RESULTS.md). So once init has settled, the hot path moves to a
 * blocking child (a split with one color, the same ranks and CTAs) and the
 * non-blocking parent is finalized. Returns NULL after printing why. */
static ncclComm_t blocking_child(ncclComm_t parent, const ncclConfig_t *parent_config,
                                 const ao_rank_info *ri, double timeout_s)
{
    ncclConfig_t config = *parent_config;
    config.blocking = 1;
    ncclComm_t child = NULL;
    ncclResult_t r = ncclCommSplit(parent, 0, ri->rank, &child, &config);
    if (r == ncclSuccess || r == ncclInProgress) r = settle(parent, ncclInProgress, timeout_s);
    if (r != ncclSuccess || !child) {
        ao_error("ncclCommSplit", "rank %d of %d: blocking communicator: %s", ri->rank,
                 ri->world_size, r == ncclInProgress ? "timed out" : ncclGetErrorString(r));
        if (child) (void)ncclCommAbort(child);
        (void)ncclCommAbort(parent);
        return NULL;
    }
    r = settle(parent, ncclCommFinalize(parent), timeout_s);
    if (r == ncclSuccess)
        (void)ncclCommDestroy(parent);
    else
        (void)ncclCommAbort(parent);
    return child;
}

static ao_comm *nccl_create(ao_device *dev, ao_stream *s, const ao_rank_info *ri,
                            const ao_comm_id *id, const ao_comm_opts *opts)
{
    if (check_stream(dev, s)) return NULL;
    if (ri->world_size < 1 || ri->rank < 0 || ri->rank >= ri->world_size) {
        ao_error(AO_GPU_COMM, "rank %d is outside a world of %d", ri->rank, ri->world_size);
        return NULL;
    }
    /* The lent GPU machines must run with NVLink SHARP (multicast) off; NCCL
     * would otherwise pick NVLS where the hardware advertises it. A value the
     * user set, 1 included, is kept. */
    if (!getenv("NCCL_NVLS_ENABLE")) setenv("NCCL_NVLS_ENABLE", "0", 0);
    /* aorta captures no CUDA graph, so NCCL's support for mixing graph and
     * eager launches only adds launch latency: with it, the event pair
     * around an all-gather on an H200 spanned the kernel by ~35 µs, 16% of
     * large.yaml's communication time; without it 11% (bench/RESULTS.md).
     * The user's setting wins. */
    setenv("NCCL_GRAPH_MIXING_SUPPORT", "0", 0);

    const double timeout_s = opts ? opts->timeout_s : 0;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = opts && opts->blocking_init ? 1 : 0;
    if (opts && opts->min_ctas > 0) config.minCTAs = opts->min_ctas;
    if (opts && opts->max_ctas > 0) config.maxCTAs = opts->max_ctas;
    if (opts && opts->cga_cluster_size > 0) config.cgaClusterSize = opts->cga_cluster_size;

    ncclUniqueId uid;
    memcpy(&uid, id->bytes, sizeof uid);
    AO_CUDA_CHECK(cudaSetDevice(ao_cuda_ordinal(dev)));
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&comm, ri->world_size, uid, ri->rank, &config);
    if (comm && (r == ncclSuccess || r == ncclInProgress)) r = settle(comm, r, timeout_s);
    if (r == ncclInProgress) {
        (void)ncclCommAbort(comm);
        ao_error("ncclCommInitRankConfig", "rank %d of %d: communicator not ready after %.1f s",
                 ri->rank, ri->world_size, timeout_s);
        ao_hint("every rank must start and use the same id; raise distributed.timeout_s on a "
                "slow cluster");
        return NULL;
    }
    if (r != ncclSuccess) {
        ao_error("ncclCommInitRankConfig", "rank %d of %d: %s: %s", ri->rank, ri->world_size,
                 ncclGetErrorString(r), ncclGetLastError(comm));
        if (comm) (void)ncclCommAbort(comm);
        return NULL;
    }
    if (!config.blocking) comm = blocking_child(comm, &config, ri, timeout_s);
    return comm ? wrap(dev, s, comm, timeout_s) : NULL;
}

/* The new communicator inherits the parent's config (blocking mode, CTAs). */
static ao_comm *nccl_split(ao_comm *parent, ao_stream *s, int color, int key)
{
    if (check_stream(parent->base.dev, s)) return NULL;
    if (color < 0) {
        ao_error("ncclCommSplit", "color %d: must be >= 0", color);
        return NULL;
    }
    AO_CUDA_CHECK(cudaSetDevice(ao_cuda_ordinal(parent->base.dev)));
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommSplit(parent->comm, color, key, &comm, NULL);
    /* With a non-blocking parent the split runs as an async job of the
     * parent: the new handle is written only once the parent's state settles
     * (seen on NCCL 2.28: success with a NULL handle, then "Attempt to use
     * communicator before the previous operation returned ncclSuccess").
     * So settle the parent first, then the child. */
    if (r == ncclSuccess || r == ncclInProgress)
        r = settle(parent->comm, ncclInProgress, parent->base.timeout_s);
    if (r == ncclSuccess && comm) r = settle(comm, ncclInProgress, parent->base.timeout_s);
    if (r != ncclSuccess || !comm) {
        ao_error("ncclCommSplit", "rank %d (color %d, key %d): %s", parent->base.rank, color, key,
                 r == ncclInProgress ? "timed out" : ncclGetErrorString(r));
        if (!AO_NCCL_HAS_SPLIT)
            ao_hint("%s %d.%d has no ncclCommSplit (NCCL 2.18, RCCL of ROCm 6.0 and later)",
                    AO_GPU_COMM, NCCL_MAJOR, NCCL_MINOR);
        if (comm) (void)ncclCommAbort(comm);
        return NULL;
    }
    return wrap(parent->base.dev, s, comm, parent->base.timeout_s);
}

static void nccl_destroy(ao_comm *c)
{
    if (!c) return;
    if (!c->aborted) {
        AO_CUDA_CHECK(cudaSetDevice(ao_cuda_ordinal(c->base.dev)));
        /* Finalize waits for the comm's outstanding work; if that fails or
         * hangs past the timeout there is nothing left to flush: abort. */
        ncclResult_t r = settle(c->comm, ncclCommFinalize(c->comm), c->base.timeout_s);
        if (r != ncclSuccess) {
            ao_warn("rank %d: ncclCommFinalize: %s; aborting the communicator", c->base.rank,
                    r == ncclInProgress ? "timed out" : ncclGetErrorString(r));
            abort_comm(c);
        } else {
            r = ncclCommDestroy(c->comm);
            if (r != ncclSuccess)
                ao_warn("rank %d: ncclCommDestroy: %s", c->base.rank, ncclGetErrorString(r));
        }
    }
    free(c);
}

static void nccl_abort(ao_comm *c)
{
    abort_comm(c);
}

static ncclDataType_t nccl_type(ao_dtype t)
{
    switch (t) {
    case AO_F32:
        return ncclFloat32;
    case AO_F16:
        return ncclFloat16;
    case AO_BF16:
        return ncclBfloat16;
    case AO_F64:
        return ncclFloat64;
    case AO_I32:
        return ncclInt32;
    case AO_I8:
        return ncclInt8;
    case AO_U8:
        return ncclUint8;
    case AO_I64:
        return ncclInt64;
    case AO_U32:
        return ncclUint32;
    case AO_U64:
        return ncclUint64;
    default:
        break;
    }
    ao_fatal(AO_EXIT_USAGE, AO_GPU_COMM, "dtype %d has no NCCL equivalent", (int)t);
}

static ncclRedOp_t nccl_op(ao_redop op)
{
    switch (op) {
    case AO_SUM:
        return ncclSum;
    case AO_PROD:
        return ncclProd;
    case AO_MAX:
        return ncclMax;
    case AO_MIN:
        return ncclMin;
    case AO_AVG:
        return ncclAvg;
    default:
        break;
    }
    ao_fatal(AO_EXIT_USAGE, AO_GPU_COMM, "reduction %d has no NCCL equivalent", (int)op);
}

/* A call inside a group only queues; an error there is still final. */
static void group_call(ao_comm *c, ncclResult_t r, const char *what)
{
    if (r != ncclSuccess && r != ncclInProgress) op_check(c, r, what);
}

static void nccl_coll(ao_comm *c, ao_coll coll, const void *send, void *recv, size_t count,
                      ao_dtype t, ao_redop op, int root_or_peer, int recv_peer)
{
    if (c->aborted)
        ao_fatal(AO_EXIT_FAIL, ao_coll_name(coll), "rank %d: the communicator was aborted",
                 c->base.rank);
    const ncclDataType_t dt = nccl_type(t);
    cudaStream_t st = ao_cuda_stream(c->base.stream);
    ncclComm_t comm = c->comm;
    const size_t bytes = count * ao_dtype_size(t);
    AO_CUDA_CHECK(cudaSetDevice(ao_cuda_ordinal(c->base.dev)));
    switch (coll) {
    case AO_ALLGATHER:
        op_check(c, ncclAllGather(send, recv, count, dt, comm, st), "ncclAllGather");
        break;
    case AO_REDUCESCATTER:
        op_check(c, ncclReduceScatter(send, recv, count, dt, nccl_op(op), comm, st),
                 "ncclReduceScatter");
        break;
    case AO_ALLREDUCE:
        op_check(c, ncclAllReduce(send, recv, count, dt, nccl_op(op), comm, st), "ncclAllReduce");
        break;
    case AO_BROADCAST:
        op_check(c, ncclBroadcast(send, recv, count, dt, root_or_peer, comm, st), "ncclBroadcast");
        break;
    case AO_REDUCE:
        op_check(c, ncclReduce(send, recv, count, dt, nccl_op(op), root_or_peer, comm, st),
                 "ncclReduce");
        break;
    case AO_ALLTOALL:
        op_check(c, ncclGroupStart(), "ncclGroupStart");
        for (int p = 0; p < c->base.size; p++) {
            group_call(c, ncclSend((const char *)send + (size_t)p * bytes, count, dt, p, comm, st),
                       "ncclSend (alltoall)");
            group_call(c, ncclRecv((char *)recv + (size_t)p * bytes, count, dt, p, comm, st),
                       "ncclRecv (alltoall)");
        }
        op_check(c, ncclGroupEnd(), "ncclGroupEnd (alltoall)");
        break;
    case AO_SENDRECV:
        op_check(c, ncclGroupStart(), "ncclGroupStart");
        group_call(c, ncclSend(send, count, dt, root_or_peer, comm, st), "ncclSend");
        group_call(c, ncclRecv(recv, count, dt, recv_peer, comm, st), "ncclRecv");
        op_check(c, ncclGroupEnd(), "ncclGroupEnd (sendrecv)");
        break;
    default:
        ao_fatal(AO_EXIT_USAGE, AO_GPU_COMM, "unknown collective %d", (int)coll);
    }
}

static int nccl_check(ao_comm *c, char *buf, size_t n)
{
    if (c->aborted) {
        snprintf(buf, n, "communicator aborted");
        return -1;
    }
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(c->comm, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess || state == ncclInProgress) return 0;
    snprintf(buf, n, "%s: %s", ncclGetErrorString(state), ncclGetLastError(c->comm));
    return -1;
}

const struct ao_comm_ops ao_nccl_comm_ops = {
    .name = AO_GPU_COMM,
    .device_backend = AO_GPU_BACKEND,
    .version = nccl_version,
    .make_id = nccl_make_id,
    .create = nccl_create,
    .split = nccl_split,
    .destroy = nccl_destroy,
    .abort = nccl_abort,
    .coll = nccl_coll,
    .check = nccl_check,
};
