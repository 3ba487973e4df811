/* coll_nccl.c on NCCL APIs older than it is written for: RCCL 2.13 (ROCm
 * 5.x, Debian 13's librccl 5.4, the one `make rocm-check` builds against)
 * has no ncclConfig_t, no non-blocking init, no ncclCommFinalize (2.14) and
 * no ncclCommSplit (2.18). Here each is what that library can do, said
 * where it differs: init blocks (distributed.timeout_s cannot bound it, and
 * the CTA settings are NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS there), a
 * destroy waits for the communicator's work itself, and a split fails with
 * ncclInvalidUsage, which nccl_split reports with the version it needs.
 * Included by coll_nccl.c only, after gpu_compat.h. */
#ifndef AORTA_COMM_NCCL_COMPAT_H
#define AORTA_COMM_NCCL_COMPAT_H

#include "core/error.h"
#include "runtime/gpu_compat.h"

#define AO_NCCL_HAS_SPLIT (NCCL_VERSION_CODE >= 21800)

#if NCCL_VERSION_CODE < 21400
/* never returned by these libraries: settle() returns at once */
#define ncclInProgress ncclNumResults

typedef struct ncclConfig_t {
    int blocking, minCTAs, maxCTAs, cgaClusterSize;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER                                                                    \
    {                                                                                              \
        1, 0, 0, 0                                                                                 \
    }

static inline ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                                  int rank, ncclConfig_t *config)
{
    if (!config->blocking || config->minCTAs || config->maxCTAs || config->cgaClusterSize)
        ao_warn("%s %d.%d: communicator init blocks (distributed.timeout_s does not bound it) "
                "and takes no CTA settings (set NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS)",
                AO_GPU_COMM, NCCL_MAJOR, NCCL_MINOR);
    config->blocking = 1;
    return ncclCommInitRank(comm, nranks, id, rank);
}

/* ncclCommDestroy of these versions waits for the communicator's work */
static inline ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    (void)comm;
    return ncclSuccess;
}
#endif

#if !AO_NCCL_HAS_SPLIT
static inline ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                         ncclConfig_t *config)
{
    (void)comm, (void)color, (void)key, (void)config;
    *newcomm = NULL;
    return ncclInvalidUsage;
}
#endif

#endif
