/* The comm id by MPI broadcast, for ranks started by mpirun or srun. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "comm/mpi_init.h"
#include "core/error.h"
#include "launch/internal.h"

static int bootstrap(const ao_rank_info *ri, const char *comm_backend, ao_comm_id *id)
{
    if (ao_mpi_ensure_init() != 0) return -1;
    char who[32];
    snprintf(who, sizeof who, "rank %d", ri->rank);
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != ri->world_size) {
        ao_error(who, "MPI has %d ranks but the launcher's environment says %d", size,
                 ri->world_size);
        return -1;
    }
    /* The first byte says whether rank 0 made an id, so the others do not
     * go on with a zero id when it could not. */
    unsigned char msg[1 + AO_COMM_ID_BYTES] = {0};
    if (ri->rank == 0 && ao_comm_make_id(comm_backend, id) == 0) {
        msg[0] = 1;
        memcpy(msg + 1, id->bytes, AO_COMM_ID_BYTES);
    }
    int rc = MPI_Bcast(msg, (int)sizeof msg, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) {
        ao_error(who, "MPI_Bcast of the comm id failed (MPI error %d)", rc);
        return -1;
    }
    if (!msg[0]) {
        if (ri->rank != 0) ao_error(who, "rank 0 could not make the comm id");
        return -1;
    }
    memcpy(id->bytes, msg + 1, AO_COMM_ID_BYTES);
    return 0;
}

const struct ao_launch_mpi ao_launch_mpi = {.bootstrap = bootstrap};
