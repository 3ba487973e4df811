/* Rank discovery, the local spawner and the bootstrap (DESIGN §5).
 *
 * A command that can run on several ranks (train, coll, sdma p2p) does:
 *
 *     ao_rank_info ri;
 *     if (!ao_launch_detect(&ri, NULL) && nproc > 1)
 *         return ao_launch_spawn(argc, argv, &opts);   // parent: supervise
 *     ... run as rank ri.rank ...
 *
 * The parent never touches a device. On the cpu backend it runs
 * `mpirun -np N` (with the flags a root user and a 2-core machine need);
 * otherwise it forks N ranks itself with AORTA_RANK, AORTA_WORLD_SIZE,
 * AORTA_LOCAL_RANK, AORTA_LOCAL_WORLD_SIZE and AORTA_COMM_ID (hex) set,
 * prefixes their output with "[rank K] ", and supervises them: the first rank
 * that fails makes it stop the others (SIGTERM, then SIGKILL after a grace
 * period) and return non-zero, saying which rank failed and how. Ctrl-C is
 * passed on to the ranks, which stop after their current iteration. */
#ifndef AORTA_LAUNCH_LAUNCH_H
#define AORTA_LAUNCH_LAUNCH_H

#include <stdint.h>

#include "comm/comm.h"

/* Fill *ri from the environment: our own spawner (AORTA_*), OpenMPI
 * (OMPI_COMM_WORLD_*), MPICH/Intel MPI (PMI_RANK/PMI_SIZE, MPI_LOCALRANKID),
 * Slurm (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID), torchrun
 * (RANK/WORLD_SIZE/LOCAL_RANK; ahead of MPI's and Slurm's where
 * TORCHELASTIC_RUN_ID says a torchrun worker inherited theirs). Returns 1 when a launcher was found
 * (this process is one rank of a job), 0 when none (rank 0 of 1), -1 after printing why when the
 * variables are inconsistent. *launcher gets "aorta", "openmpi", "pmi", "slurm", "torchrun" or
 * "none". */
int ao_launch_detect(ao_rank_info *ri, const char **launcher);

/* How a job's ranks ended, as the parent saw it: the first rank that failed
 * on its own (not stopped by the parent after it) and how. Under mpirun the
 * rank and signal come from mpirun's own message, when it gives one. */
typedef struct ao_launch_outcome {
    int rank;      /* -1: none failed, or the launcher did not say which */
    char how[128]; /* "killed by signal 9 (Killed)", "exited with code 1"; "" */
} ao_launch_outcome;

typedef struct ao_launch_opts {
    int nproc;                  /* ranks to start */
    const char *backend;        /* device backend: "cpu" goes through mpirun */
    const char *comm_backend;   /* whose id the parent makes ("nccl"), or NULL */
    int all_ranks_output;       /* show every rank's output (default: rank 0's) */
    double grace_s;             /* SIGTERM -> SIGKILL, default 5 s */
    char **extra_env;           /* NULL-terminated NAME=VALUE, set only in ranks */
    ao_launch_outcome *outcome; /* filled when not NULL */
} ao_launch_opts;

/* Parent side: run `aorta argv[0] argv[1] ...` (this same binary) as
 * o->nproc ranks and supervise them. Returns the exit code for the command:
 * 0 when every rank exited 0. */
int ao_launch_spawn(int argc, char **argv, const ao_launch_opts *o);

/* Rank side: every rank gets the same comm id: from AORTA_COMM_ID, else by
 * MPI broadcast from rank 0 (built with MPI under an MPI launcher), else
 * through `rdzv_file` (rank 0 writes it atomically, the others poll it until
 * timeout_s; use a fresh path for every run). With comm_backend NULL no id is
 * needed and *id is zeroed. Returns 0 or -1 after printing why. */
int ao_launch_bootstrap_id(const ao_rank_info *ri, const char *comm_backend, const char *rdzv_file,
                           double timeout_s, ao_comm_id *id);

/* The node this process is on, as a 64-bit key equal on the ranks of one
 * node: NCCL's notion of a host (NCCL_HOSTID, else host name and boot id),
 * since NCCL's transport between two ranks follows it (launch/nodes.c). */
uint64_t ao_launch_node_key(void);
/* AORTA_EMULATE_NODES: 0 when unset, N, or -1 when it is not a count. */
int ao_launch_emulated_nodes(void);
/* 0 when AORTA_EMULATE_NODES is unset or divides world_size, else -1 after
 * printing why. */
int ao_launch_check_emulation(int world_size);
/* With AORTA_EMULATE_NODES=N, *ri becomes a rank of an N-node job of
 * consecutive ranks on this one host (local rank and size, node), and
 * NCCL_HOSTID names its node. 0, or -1 after printing why. */
int ao_launch_emulate_nodes(ao_rank_info *ri);

/* The device ordinal for a local rank: local_rank modulo ndevices, with a
 * warning when it wraps. */
int ao_launch_device_ordinal(int local_rank, int ndevices);

/* Set by SIGINT/SIGTERM (or SIGUSR1, which mpirun forwards to its ranks) in a
 * rank: stop after the current iteration. A second such signal ends the rank
 * at once. */
int ao_launch_stop_requested(void);
void ao_launch_install_stop_handler(void);

#endif
