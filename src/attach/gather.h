/* The parent's view of the processes an attached job ran (DESIGN §15):
 * after the command, aorta attach reads every STEM_attach.json in the run
 * directory (rank_NN_* and pid_N_*, attach/claim.h), counts the lines of
 * each STEM_metrics.jsonl, and lists the processes in run.json. */
#ifndef AORTA_ATTACH_GATHER_H
#define AORTA_ATTACH_GATHER_H

typedef struct ao_attach_gathered {
    /* JSON array, a member a process by rank then pid: pid, rank (null
     * when unknown), world_size, launcher, device, steps (its lines),
     * files, finished, note, and "info" (its whole info file) */
    char *processes;
    char used[256];      /* the step sources: "nvtx", or "rank 0: nvtx, rank 1: window" */
    int world_size;      /* the largest of the rank-named processes; 0: none */
    int nranks, npids;   /* processes with rank-named and pid-named files */
    long long min_lines; /* lines of the rank file with the fewest; -1 when none */
} ao_attach_gathered;

/* Gather dir. Prints one note for each pid-named process (why), each that
 * did not finish, and the ranks below world_size that have no files. */
void ao_attach_gather(const char *dir, ao_attach_gathered *g);
void ao_attach_gathered_free(ao_attach_gathered *g);

#endif
