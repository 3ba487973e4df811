/* Per-rank progress of an MPI communicator; see progress_mpi.h. */
#include "comm/progress_mpi.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/text.h"

/* One rank's counters, a cache line each: written by that rank's stream
 * thread, read by any rank's watchdog. Lock-free atomics work across
 * processes on shared memory. */
struct slot {
    _Atomic uint64_t started, completed;
    _Atomic int64_t last_step; /* step of the op started last; -1 none */
    _Atomic int last_op;       /* ao_coll of the op started last */
    int rank;                  /* in MPI_COMM_WORLD: the number the ranks' output uses */
    char pad[64 - 2 * sizeof(uint64_t) - sizeof(int64_t) - 2 * sizeof(int)];
};
_Static_assert(sizeof(struct slot) == 64, "one slot, one cache line");

struct ao_mpi_progress {
    MPI_Comm node;       /* the communicator's ranks on this node */
    MPI_Win win;         /* one slot per rank of `node` */
    struct slot **peers; /* by rank in `node` */
    struct slot *mine;
    int npeers, me;
    int hidden; /* the communicator's ranks on other nodes */
};

struct ao_mpi_progress *ao_mpi_progress_create(MPI_Comm comm)
{
    int rank = 0, size = 0, world_rank = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm node;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return NULL;
    struct ao_mpi_progress *p = ao_calloc(1, sizeof *p);
    p->node = node;
    MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN);
    MPI_Comm_rank(node, &p->me);
    MPI_Comm_size(node, &p->npeers);
    p->hidden = size - p->npeers;
    struct slot *base = NULL;
    /* Every rank of `node` gets the same answer, so all of them return
     * NULL together or none does. */
    if (MPI_Win_allocate_shared((MPI_Aint)sizeof(struct slot), (int)sizeof(struct slot),
                                MPI_INFO_NULL, node, &base, &p->win) != MPI_SUCCESS) {
        ao_debug("MPI: no shared window for progress counters; a timeout will not name ranks");
        MPI_Comm_free(&p->node);
        free(p);
        return NULL;
    }
    p->peers = ao_calloc((size_t)p->npeers, sizeof *p->peers);
    for (int i = 0; i < p->npeers; i++) {
        MPI_Aint bytes = 0;
        int unit = 0;
        MPI_Win_shared_query(p->win, i, &bytes, &unit, &p->peers[i]);
    }
    p->mine = p->peers[p->me];
    atomic_store(&p->mine->started, 0);
    atomic_store(&p->mine->completed, 0);
    atomic_store(&p->mine->last_step, -1);
    atomic_store(&p->mine->last_op, -1);
    p->mine->rank = world_rank;
    /* Every slot is filled in before anyone can read it. */
    MPI_Barrier(node);
    return p;
}

void ao_mpi_progress_free(struct ao_mpi_progress *p)
{
    if (!p) return;
    MPI_Win_free(&p->win);
    MPI_Comm_free(&p->node);
    free(p->peers);
    free(p);
}

void ao_mpi_progress_start(struct ao_mpi_progress *p, ao_coll op, int64_t step)
{
    if (!p) return;
    atomic_store(&p->mine->last_op, (int)op);
    atomic_store(&p->mine->last_step, step);
    atomic_fetch_add(&p->mine->started, 1);
}

void ao_mpi_progress_done(struct ao_mpi_progress *p)
{
    if (p) atomic_fetch_add(&p->mine->completed, 1);
}

/* "last completed allgather #36 (step 11)" and the like, after `who`. */
static void last_op(char *buf, size_t n, const char *who, const struct slot *s)
{
    uint64_t started = atomic_load(&s->started), completed = atomic_load(&s->completed);
    int op = atomic_load(&s->last_op);
    int64_t step = atomic_load(&s->last_step);
    if (started == 0 || op < 0 || op >= AO_NCOLLS) {
        ao_appendf(buf, n, "%s has run no op on this communicator", who);
        return;
    }
    ao_appendf(buf, n, "%s %s %s #%llu", who,
               completed >= started ? "last completed" : "is still in", ao_coll_name((ao_coll)op),
               (unsigned long long)started);
    if (step >= 0) ao_appendf(buf, n, " (step %lld)", (long long)step);
}

int ao_mpi_progress_describe(const struct ao_mpi_progress *p, uint64_t seq, int *self_started,
                             char *buf, size_t n)
{
    if (!p || n == 0) return -1;
    *self_started = atomic_load(&p->mine->started) >= seq;
    enum { NAMED = 8 };
    int late[NAMED], nlate = 0;
    for (int i = 0; i < p->npeers; i++) {
        if (atomic_load(&p->peers[i]->started) >= seq) continue;
        if (nlate < NAMED) late[nlate] = i;
        nlate++;
    }
    buf[0] = '\0';
    if (nlate == 0) {
        ao_appendf(buf, n, "every rank%s has reached it",
                   p->hidden ? " on this node" : " (it stalls inside MPI)");
    } else {
        ao_appendf(buf, n, "rank%s ", nlate > 1 ? "s" : "");
        for (int k = 0; k < nlate && k < NAMED; k++)
            ao_appendf(buf, n, "%s%d%s", k ? ", " : "", p->peers[late[k]]->rank,
                       late[k] == p->me ? " (this rank)" : "");
        if (nlate > NAMED) ao_appendf(buf, n, " and %d more", nlate - NAMED);
        ao_appendf(buf, n, " %s not reached it", nlate > 1 ? "have" : "has");
        for (int k = 0; k < nlate && k < NAMED; k++) {
            char who[32];
            snprintf(who, sizeof who, "rank %d", p->peers[late[k]]->rank);
            ao_appendf(buf, n, "; ");
            last_op(buf, n, nlate > 1 ? who : "it", p->peers[late[k]]);
        }
    }
    if (p->hidden)
        ao_appendf(buf, n, "; %d rank%s on other nodes cannot be seen from here", p->hidden,
                   p->hidden > 1 ? "s" : "");
    return 0;
}
