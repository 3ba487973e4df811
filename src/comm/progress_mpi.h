/* Per-rank progress of an MPI communicator, so that a rank whose collective
 * timed out can name the ranks that have not reached it (internal to comm/).
 *
 * Each rank publishes, in a window of memory shared by the communicator's
 * ranks on its node (MPI_Win_allocate_shared), how many of the
 * communicator's ops it has started and completed and which one it started
 * last. The watchdog reads its peers' counters with plain loads: no MPI call,
 * so a peer that hangs, sleeps or spins cannot keep them from being read.
 * Ranks on other nodes are not visible and are counted as such. */
#ifndef AORTA_COMM_PROGRESS_MPI_H
#define AORTA_COMM_PROGRESS_MPI_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"

struct ao_mpi_progress;

/* Collective over comm. NULL when the library offers no shared window (the
 * timeout message then names no rank). */
struct ao_mpi_progress *ao_mpi_progress_create(MPI_Comm comm);
/* Collective over the ranks that created it (NULL: no-op). */
void ao_mpi_progress_free(struct ao_mpi_progress *p);
/* On the stream's thread, around each op's MPI call, in enqueue order. */
void ao_mpi_progress_start(struct ao_mpi_progress *p, ao_coll op, int64_t step);
void ao_mpi_progress_done(struct ao_mpi_progress *p);
/* Which ranks have not started op `seq` (1-based, in enqueue order) and
 * what each did last, in words, into buf; *self_started: whether this rank
 * has. Returns 0, or -1 (nothing written) when p is NULL. */
int ao_mpi_progress_describe(const struct ao_mpi_progress *p, uint64_t seq, int *self_started,
                             char *buf, size_t n);

#endif
