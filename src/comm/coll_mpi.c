/* The MPI comm backend: collectives for the cpu device.
 *
 * Each communicator is a duplicate of MPI_COMM_WORLD (or a split of one) owned
 * by one stream, and each collective runs as a blocking MPI call on that
 * stream's worker thread (ao_launch_host). Two streams therefore never share
 * an MPI communicator, and an all-gather and a reduce-scatter on two streams
 * really run at the same time; that needs MPI_THREAD_MULTIPLE.
 *
 * Semantics follow NCCL where MPI differs:
 * - in place: all_gather when send == recv + rank * count; reduce_scatter when
 *   recv == send + rank * recv_count (or recv == send); the others when
 *   send == recv.
 * - broadcast takes separate send (root) and receive buffers.
 * - AVG is SUM divided by the rank count afterwards; for integer types that
 *   division truncates toward zero (NCCL's integer ncclAvg does the same).
 * - fp16 and bf16 can be moved (all_gather, broadcast, alltoall, sendrecv: as
 *   16-bit words) but not reduced: MPI has no such arithmetic types.
 *
 * MPI is process-wide, so its initialisation is too: the first communicator
 * initialises it (unless the program already did), and MPI_Finalize runs at
 * exit once every communicator has been destroyed. If a rank exits with
 * communicators still open, it is failing; finalizing then could block on a
 * peer, so it is skipped and mpirun reports the failure.
 *
 * Each communicator publishes its ranks' progress (comm/progress_mpi.h), so
 * that a timeout names the ranks that have not reached the op. */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/mpi_init.h"
#include "comm/progress_mpi.h"
#include "core/error.h"

struct mpi_comm {
    struct ao_comm_base base;
    MPI_Comm comm;
    struct ao_mpi_progress *progress; /* NULL: not available */
};

static void mpi_version(char *buf, size_t n)
{
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) len = 0;
    text[len < (int)sizeof text ? len : (int)sizeof text - 1] = '\0';
    snprintf(buf, n, "%.*s", (int)strcspn(text, "\n"), text);
}

static void mpi_failed(const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
    msg[len] = '\0';
    ao_fatal(AO_EXIT_FAIL, what, "MPI error: %s", len ? msg : "unknown");
}

static ao_comm *wrap(MPI_Comm comm, ao_device *dev, ao_stream *s, double timeout_s)
{
    struct mpi_comm *c = ao_calloc(1, sizeof *c);
    c->base.ops = &ao_mpi_comm_ops;
    c->base.dev = dev;
    c->base.stream = s;
    c->base.timeout_s = timeout_s;
    c->comm = comm;
    /* Errors come back as codes, so they are reported as aorta errors. */
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &c->base.rank);
    MPI_Comm_size(comm, &c->base.size);
    c->progress = ao_mpi_progress_create(comm);
    ao_mpi_comm_opened();
    return (ao_comm *)c;
}

static ao_comm *mpi_create(ao_device *dev, ao_stream *s, const ao_rank_info *ri,
                           const ao_comm_id *id, const ao_comm_opts *opts)
{
    if (ao_mpi_ensure_init() != 0) return NULL;
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != ri->rank || size != ri->world_size) {
        ao_error("MPI", "this process is rank %d of %d to aorta but rank %d of %d to MPI", ri->rank,
                 ri->world_size, rank, size);
        ao_hint("on the cpu device, start the ranks with mpirun (aorta train --nproc N does)");
        return NULL;
    }
    MPI_Comm comm;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (rc != MPI_SUCCESS) mpi_failed("MPI_Comm_dup", rc);
    return wrap(comm, dev, s, opts->timeout_s);
}

static ao_comm *mpi_split(ao_comm *parent, ao_stream *s, int color, int key)
{
    struct mpi_comm *p = (struct mpi_comm *)parent;
    if (color < 0) {
        ao_error("MPI", "communicator split color %d is negative", color);
        return NULL;
    }
    MPI_Comm comm;
    int rc = MPI_Comm_split(p->comm, color, key, &comm);
    if (rc != MPI_SUCCESS) mpi_failed("MPI_Comm_split", rc);
    return wrap(comm, p->base.dev, s, p->base.timeout_s);
}

static void mpi_destroy(ao_comm *comm)
{
    struct mpi_comm *c = (struct mpi_comm *)comm;
    ao_stream_sync(c->base.stream);
    ao_mpi_progress_free(c->progress);
    MPI_Comm_free(&c->comm);
    ao_mpi_comm_closed();
    free(c);
}

static void mpi_abort(ao_comm *comm)
{
    MPI_Abort(((struct mpi_comm *)comm)->comm, AO_EXIT_FAIL);
}

/* ---- collectives --------------------------------------------------------- */

struct coll_args {
    struct mpi_comm *c;
    ao_coll coll;
    const void *send;
    void *recv;
    size_t count;
    ao_dtype t;
    ao_redop op;
    int peer, recv_peer;
    int64_t step; /* ao_comm_step() when it was enqueued */
};

static int reduces(ao_coll c)
{
    return c == AO_REDUCESCATTER || c == AO_ALLREDUCE || c == AO_REDUCE;
}

static MPI_Datatype mpi_type(ao_dtype t)
{
    switch (t) {
    case AO_F32:
        return MPI_FLOAT;
    case AO_F64:
        return MPI_DOUBLE;
    case AO_F16:
    case AO_BF16:
        return MPI_UINT16_T; /* moved, never reduced */
    case AO_I32:
        return MPI_INT32_T;
    case AO_I8:
        return MPI_INT8_T;
    case AO_U8:
        return MPI_UINT8_T;
    case AO_I64:
        return MPI_INT64_T;
    case AO_U32:
        return MPI_UINT32_T;
    default:
        return MPI_UINT64_T;
    }
}

static MPI_Op mpi_op(ao_redop op)
{
    switch (op) {
    case AO_PROD:
        return MPI_PROD;
    case AO_MAX:
        return MPI_MAX;
    case AO_MIN:
        return MPI_MIN;
    default:
        return MPI_SUM; /* AVG: divided afterwards */
    }
}

#define DIVIDE(type)                                                                               \
    do {                                                                                           \
        type *x = buf;                                                                             \
        for (size_t i = 0; i < count; i++) x[i] = (type)(x[i] / (type)n);                          \
    } while (0)

static void divide(void *buf, size_t count, ao_dtype t, int n)
{
    switch (t) {
    case AO_F32:
        DIVIDE(float);
        break;
    case AO_F64:
        DIVIDE(double);
        break;
    case AO_I32:
        DIVIDE(int32_t);
        break;
    case AO_I8:
        DIVIDE(int8_t);
        break;
    case AO_U8:
        DIVIDE(uint8_t);
        break;
    case AO_I64:
        DIVIDE(int64_t);
        break;
    case AO_U32:
        DIVIDE(uint32_t);
        break;
    case AO_U64:
        DIVIDE(uint64_t);
        break;
    default:
        break; /* fp16/bf16 never reach a reduction */
    }
}

static void run_coll(void *arg)
{
    const struct coll_args *a = arg;
    MPI_Comm comm = a->c->comm;
    int rank = a->c->base.rank, size = a->c->base.size;
    int n = (int)a->count;
    MPI_Datatype dt = mpi_type(a->t);
    MPI_Op op = mpi_op(a->op);
    size_t bytes = a->count * ao_dtype_size(a->t);
    const char *send = a->send;
    char *recv = a->recv;
    void *averaged = NULL; /* where an AVG's sum lands, to divide */
    int rc = MPI_SUCCESS;

    ao_mpi_progress_start(a->c->progress, a->coll, a->step);
    switch (a->coll) {
    case AO_ALLGATHER:
        rc = MPI_Allgather(send == recv + (size_t)rank * bytes ? MPI_IN_PLACE : send, n, dt, recv,
                           n, dt, comm);
        break;
    case AO_REDUCESCATTER:
        if (recv == send || recv == send + (size_t)rank * bytes) {
            /* MPI leaves an in-place result at the start of the buffer. */
            rc = MPI_Reduce_scatter_block(MPI_IN_PLACE, (void *)send, n, dt, op, comm);
            if (rc == MPI_SUCCESS && recv != send) memmove(recv, send, bytes);
        } else {
            rc = MPI_Reduce_scatter_block(send, recv, n, dt, op, comm);
        }
        averaged = recv;
        break;
    case AO_ALLREDUCE:
        rc = MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, n, dt, op, comm);
        averaged = recv;
        break;
    case AO_BROADCAST:
        if (rank == a->peer && send != recv) memcpy(recv, send, bytes);
        rc = MPI_Bcast(recv, n, dt, a->peer, comm);
        break;
    case AO_REDUCE:
        if (rank == a->peer) {
            rc = MPI_Reduce(send == recv ? MPI_IN_PLACE : send, recv, n, dt, op, a->peer, comm);
            averaged = recv;
        } else {
            rc = MPI_Reduce(send, NULL, n, dt, op, a->peer, comm);
        }
        break;
    case AO_ALLTOALL:
        rc = MPI_Alltoall(send == recv ? MPI_IN_PLACE : send, n, dt, recv, n, dt, comm);
        break;
    case AO_SENDRECV:
        if (send == recv)
            rc = MPI_Sendrecv_replace(recv, n, dt, a->peer, 0, a->recv_peer, 0, comm,
                                      MPI_STATUS_IGNORE);
        else
            rc = MPI_Sendrecv(send, n, dt, a->peer, 0, recv, n, dt, a->recv_peer, 0, comm,
                              MPI_STATUS_IGNORE);
        break;
    default:
        break;
    }
    if (rc != MPI_SUCCESS) mpi_failed(ao_coll_name(a->coll), rc);
    ao_mpi_progress_done(a->c->progress);
    if (a->op == AO_AVG && averaged) divide(averaged, a->count, a->t, size);
}

static void mpi_coll(ao_comm *comm, ao_coll coll, const void *send, void *recv, size_t count,
                     ao_dtype t, ao_redop op, int peer, int recv_peer)
{
    struct mpi_comm *c = (struct mpi_comm *)comm;
    if (reduces(coll) && (t == AO_F16 || t == AO_BF16))
        ao_fatal(AO_EXIT_FAIL, ao_coll_name(coll),
                 "the mpi backend cannot reduce %s (MPI has no such arithmetic type); use float",
                 ao_dtype_name(t));
    if (count > INT_MAX)
        ao_fatal(AO_EXIT_FAIL, ao_coll_name(coll),
                 "%zu elements is more than MPI's limit of %d per call", count, INT_MAX);
    struct coll_args a = {c, coll, send, recv, count, t, op, peer, recv_peer, ao_comm_step()};
    ao_launch_host(c->base.stream, run_coll, &a, sizeof a);
}

static int mpi_stalled(ao_comm *comm, uint64_t seq, int *self_started, char *buf, size_t n)
{
    return ao_mpi_progress_describe(((struct mpi_comm *)comm)->progress, seq, self_started, buf, n);
}

const struct ao_comm_ops ao_mpi_comm_ops = {
    .name = "mpi",
    .device_backend = "cpu",
    .version = mpi_version,
    .make_id = NULL, /* ranks find each other through MPI_COMM_WORLD */
    .create = mpi_create,
    .split = mpi_split,
    .destroy = mpi_destroy,
    .abort = mpi_abort,
    .coll = mpi_coll,
    .check = NULL, /* an MPI error is reported by the call that got it, on its stream */
    .stalled = mpi_stalled,
};
