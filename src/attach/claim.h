/* Which files an attached GPU process writes (DESIGN §15), whatever started
 * it: torchrun's agent, aorta's spawner, mpirun, srun, a plain program that
 * starts processes, or none.
 *
 * A process claims files only once it does GPU work (the tracer's first
 * activity record), so a launcher that merely initializes CUDA writes
 * nothing. Its rank is the launcher's (launch/detect.c): such a process
 * takes rank_NN_*. A process without launcher variables takes rank 0 of 1
 * provisionally (a single-process job is one), until a process with a
 * launcher rank 0 or a second process without one comes: the provisional
 * files are then moved to pid_N_*. A second process of a rank, or one whose
 * variables are inconsistent, gets pid_N_* at once. Each pid-named claim
 * carries a note that says why, and a warning is printed.
 *
 * Every decision is made under an flock(2) of the run directory's
 * .attach.lock, which also holds the pid of the first process that claimed
 * without launcher variables. Pure file logic: unit-tested without a GPU. */
#ifndef AORTA_ATTACH_CLAIM_H
#define AORTA_ATTACH_CLAIM_H

#include <sys/types.h>

#include "core/jsonl.h"

#define AO_ATTACH_LOCK ".attach.lock"
/* A provisional claim's note once its files were moved aside. */
#define AO_ATTACH_NOTE_MOVED                                                                       \
    "no launcher variables: it held rank 0 of 1 until a process with a launcher rank 0, or a "     \
    "second one without launcher variables, did GPU work"

typedef struct ao_attach_who {
    int pid;
    int ranked;           /* 1: launcher variables; 0: none; -1: inconsistent ones */
    int rank, world_size; /* ranked: the launcher's; else 0 of 1 */
    const char *launcher; /* detect's name ("torchrun", "aorta", ..., "none"); a literal */
} ao_attach_who;

/* This process, from the launcher's variables (ao_launch_detect, which
 * prints why when they are inconsistent). */
void ao_attach_who_detect(ao_attach_who *w);

typedef struct ao_attach_claim {
    int pid;              /* the claiming process (ao_attach_who's) */
    char stem[48];        /* "rank_00", "pid_4242": STEM_metrics.jsonl and STEM_attach.json */
    int rank, world_size; /* what the records say */
    int provisional;      /* rank 0 of 1 without launcher variables (above) */
    char note[320];       /* why the files are named by pid; "" when by rank */
    dev_t dev;            /* the metrics file's, to see at the end whether it was moved */
    ino_t ino;
} ao_attach_claim;

/* Writes dir/STEM_attach.json for the claim: the caller's format, which
 * must hold "pid" and "provisional" (read back when a claim is contested).
 * 0 or -1. */
typedef int (*ao_attach_info_fn)(void *ctx, const ao_attach_claim *c);

/* Under the lock: choose the stem, move a provisional holder of rank 0
 * aside where this process outranks it, create dir/STEM_metrics.jsonl and
 * write the info file through info(). The writer, or NULL after a warning
 * (c->stem is then ""). */
ao_jsonl_writer *ao_attach_claim_files(const char *dir, const ao_attach_who *w, ao_attach_claim *c,
                                       ao_attach_info_fn info, void *ctx);

/* At the end, under the lock: the stem the files have now (a provisional
 * claim that was moved aside becomes pid_N, with AO_ATTACH_NOTE_MOVED), then
 * info() once more. 0 or -1 after a warning. */
int ao_attach_claim_finish(const char *dir, ao_attach_claim *c, ao_attach_info_fn info, void *ctx);

#endif
