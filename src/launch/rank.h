/* One rank's bring-up, written once for every command that runs on ranks
 * (train, coll, sdma, queues; analyze and attach next). DESIGN §5.
 *
 * Parent side, ao_launch_ranks: detect a launcher; without one, choose the
 * rank count (--nproc, else the visible devices) and spawn this binary as
 * that many ranks (launch.h), or go on as rank 0 of 1. Rank side:
 * ao_rank_open picks this rank's device (its local rank modulo the devices,
 * or an explicit ordinal) and opens it; ao_rank_connect agrees on the comm id
 * (made here for one rank, else the bootstrap) and makes the communicator.
 *
 *     ao_launch_role role;
 *     ao_rank_info ri;
 *     int rc = ao_launch_ranks(argc, argv, &req, &ri, &role);
 *     if (role == AO_ROLE_DONE) return rc;
 *     ao_rank r;
 *     if ((rc = ao_rank_open(&r, &ri, &ro)) == 0 && (rc = ao_rank_connect(&r, s, &ro)) == 0)
 *         ... r.dev, r.comm ...
 *     ao_rank_close(&r);
 */
#ifndef AORTA_LAUNCH_RANK_H
#define AORTA_LAUNCH_RANK_H

#include "comm/comm.h"
#include "launch/launch.h"
#include "runtime/device.h"

/* ---- parent side -------------------------------------------------------------- */

typedef enum ao_launch_role {
    AO_ROLE_DONE, /* the parent: its ranks ended (or a check failed); exit with the code */
    AO_ROLE_RANK, /* a launcher started this process as one rank of a job */
    AO_ROLE_SOLO  /* no launcher and one rank: rank 0 of 1, owning the terminal */
} ao_launch_role;

typedef struct ao_launch_req {
    const char *backend;  /* the resolved device backend ("cpu" spawns through mpirun) */
    int nproc;            /* --nproc; 0: the visible devices, cpu_nproc on the cpu backend */
    int cpu_nproc;        /* the default rank count on the cpu backend */
    int spawn;            /* 0: never start ranks (one process, or one per launcher slot) */
    int all_ranks_output; /* show every spawned rank's output (default: rank 0's) */
    int stop_handler;     /* a rank stops after its current step on Ctrl-C (launch.h) */
    /* Before any rank starts, with the job's rank count and whether a
     * launcher started it: 0 to go on, else the exit code. May be NULL. */
    int (*check)(void *ctx, int world_size, int launched);
    /* In the parent, after its ranks ended: how (launch.h), and the exit code
     * it will return. May be NULL. */
    void (*ended)(void *ctx, const ao_launch_outcome *o, int rc);
    void *ctx;
} ao_launch_req;

/* Returns the exit code when *role is AO_ROLE_DONE, else 0 with *ri this
 * process's place in the job (AO_ROLE_SOLO: rank 0 of 1). A bad launcher
 * environment, or no device on a backend that needs one, is AO_EXIT_USAGE. */
int ao_launch_ranks(int argc, char **argv, const ao_launch_req *req, ao_rank_info *ri,
                    ao_launch_role *role);

/* ---- rank side ------------------------------------------------------------------- */

typedef struct ao_rank_opts {
    const char *cmd;     /* names errors: "train", "coll" */
    const char *backend; /* the resolved device backend */
    int ordinal;         /* -1: from the local rank (cpu: its one device); else --device */
    const char *rdzv_file;
    double bootstrap_timeout_s;
    ao_comm_opts comm;
} ao_rank_opts;

typedef struct ao_rank {
    ao_rank_info ri;
    int ndevices; /* what the backend sees */
    ao_device *dev;
    ao_device_info info;
    ao_comm *comm; /* after ao_rank_connect: the one communicator made from the id */
} ao_rank;

/* The device: 0, or the exit code after printing why (AO_EXIT_USAGE: no
 * device, an ordinal beyond them, or one that does not open). */
int ao_rank_open(ao_rank *r, const ao_rank_info *ri, const ao_rank_opts *o);
/* The communicator on stream s: collective over the job's ranks. An NCCL id
 * serves one ncclCommInitRank, so every other communicator is split from
 * this one. 0, AO_EXIT_USAGE (no comm backend for this device backend) or
 * AO_EXIT_FAIL (bootstrap or init failed). */
int ao_rank_connect(ao_rank *r, ao_stream *s, const ao_rank_opts *o);
/* Destroy the communicator, before the stream it was made on. */
void ao_rank_disconnect(ao_rank *r);
/* The communicator if still there, then the device (its streams destroyed
 * first by the caller). Safe on a zeroed or half-opened ao_rank. */
void ao_rank_close(ao_rank *r);

#endif
