/* Pieces the local spawner (spawn.c) and the mpirun path (mpirun.c) share:
 * output prefixing and the supervisor that starts and watches child processes.
 * Not part of the public launch API (child environments and this binary's
 * path are: launch/env.h). */
#ifndef AORTA_LAUNCH_INTERNAL_H
#define AORTA_LAUNCH_INTERNAL_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "launch/launch.h"

/* ---- output (output.c) ------------------------------------------------------
 * A prefixer turns one child stream into whole lines "PREFIX line\n" written to
 * fd with one writev each, so lines of different ranks never interleave. Bytes
 * are copied as they are (no string functions): output may be binary. A line
 * longer than the buffer is written in pieces, prefixed once. */
typedef struct ao_prefixer {
    int fd;   /* where lines go (1 or 2) */
    int show; /* 0: read and drop */
    /* Also given every whole line (without its newline), when set: the
     * parent reads mpirun's own messages so. */
    void (*tap)(void *ctx, const char *line, size_t n);
    void *tap_ctx;
    char prefix[32];
    char *buf;
    size_t len;
    int at_line_start;
} ao_prefixer;

void ao_prefixer_init(ao_prefixer *p, int fd, int show, const char *prefix);
void ao_prefixer_feed(ao_prefixer *p, const char *data, size_t n);
/* End of stream: an unterminated last line is written with a newline added. */
void ao_prefixer_finish(ao_prefixer *p);
void ao_prefixer_free(ao_prefixer *p);

/* Show a rank's stream? stderr always; stdout of rank 0, or of all ranks. */
int ao_output_shown(int rank, int is_stderr, int all_ranks_output);

/* Undo mpirun --tag-output: its streams carry "[JOB,RANK]<stdout>:" before
 * every piece of a rank's output (also in the middle of a line, after a rank's
 * unterminated last line). The demux routes each piece to the prefixer of that
 * rank and stream, and mpirun's own untagged messages to `untagged`. */
typedef struct ao_mpirun_demux {
    ao_prefixer *ranks; /* 2 * nranks: [2*rank] stdout, [2*rank+1] stderr */
    int nranks;
    ao_prefixer *untagged;
    ao_prefixer *cur; /* target of the bytes being read, NULL at line start */
    char carry[64];   /* a tag cut by a read boundary */
    size_t ncarry;
} ao_mpirun_demux;

void ao_mpirun_demux_init(ao_mpirun_demux *d, ao_prefixer *ranks, int nranks,
                          ao_prefixer *untagged);
void ao_mpirun_demux_feed(ao_mpirun_demux *d, const char *data, size_t n);
void ao_mpirun_demux_finish(ao_mpirun_demux *d);

/* ---- supervisor (supervise.c) ---------------------------------------------- */

typedef struct ao_proc {
    pid_t pid;
    char name[32]; /* "rank 1", "mpirun": names it in messages */
    int fd[2];     /* read ends of its stdout and stderr, -1 once closed */
    int running;
    int status; /* wait status once it ended */
} ao_proc;

typedef struct ao_supervisor {
    ao_proc *procs;
    int nprocs;
    double grace_s;
    int interrupt_signal; /* what the first Ctrl-C sends: SIGINT, or SIGUSR1
                             for mpirun (which kills its job on SIGINT but
                             forwards SIGUSR1 to the ranks) */
    /* Called with every chunk a child writes (stream 0 stdout, 1 stderr) and
     * with n == 0 at the end of a stream. */
    void (*output)(void *ctx, int proc, int stream, const char *data, size_t n);
    void *ctx;
    int interrupts; /* out: the Ctrl-Cs ao_supervisor_run saw */
    int failed;     /* out: the proc that failed first on its own, -1: none */
    /* private */
    sigset_t old_mask;
    struct sigaction old_pipe, old_chld;
    int sigfd;
    pid_t parent;
} ao_supervisor;

/* Block SIGINT/SIGTERM/SIGCHLD (read through a signalfd instead) and ignore
 * SIGPIPE in this process until ao_supervisor_end. Returns 0 or -1. */
int ao_supervisor_begin(ao_supervisor *s, ao_proc *procs, int nprocs);
/* Fork procs[i]: its own process group, stdin from /dev/null, stdout/stderr
 * to pipes, SIGTERM when the parent dies, then execve(path, argv, envp).
 * Returns 0 or -1 after printing why. */
int ao_supervisor_start(ao_supervisor *s, int i, const char *path, char *const argv[],
                        char *const envp[]);
/* Forward output, reap, stop the others after the first failure, pass on
 * Ctrl-C, until every child has ended. Returns the command's exit code. */
int ao_supervisor_run(ao_supervisor *s);
/* Stop and reap children still running (after a failed start), restore the
 * signal state. */
void ao_supervisor_end(ao_supervisor *s);

/* Describe a wait status: "exited with code 3", "killed by signal 11
 * (Segmentation fault)". */
void ao_describe_status(int status, char *buf, size_t n);

/* ---- backends ---------------------------------------------------- */

int ao_launch_mpirun(int argc, char **argv, const ao_launch_opts *o);

#ifdef AORTA_HAVE_MPI
/* Rank 0 makes the id, MPI_Bcast gives it to the others: bootstrap_mpi.c,
 * in libaorta_mpi.so as ao_launch_mpi (core/plugin.h). */
struct ao_launch_mpi {
    int (*bootstrap)(const ao_rank_info *ri, const char *comm_backend, ao_comm_id *id);
};
#endif

#endif
