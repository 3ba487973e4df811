/* The local spawner: this same binary as N ranks on this node, each with
 * AORTA_RANK & co. and the comm id in its environment, their output prefixed
 * with "[rank K] ". The cpu backend goes through mpirun instead (mpirun.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "launch/env.h"
#include "launch/internal.h"

extern char **environ;

struct local_output {
    ao_prefixer *streams; /* [2*rank + stream] */
};

static void local_output(void *ctx, int proc, int stream, const char *data, size_t n)
{
    struct local_output *lo = ctx;
    ao_prefixer *p = &lo->streams[2 * proc + stream];
    if (data)
        ao_prefixer_feed(p, data, n);
    else
        ao_prefixer_finish(p);
}

static int spawn_local(int argc, char **argv, const ao_launch_opts *o)
{
    int nproc = o->nproc;
    char *exe = ao_self_exe();
    if (!exe) return AO_EXIT_FAIL;

    /* argv of a rank: this binary, then the command's own arguments. */
    char **rank_argv = ao_calloc((size_t)argc + 2, sizeof *rank_argv);
    rank_argv[0] = exe;
    for (int i = 0; i < argc; i++) rank_argv[i + 1] = argv[i];

    size_t nextra = 0;
    while (o->extra_env && o->extra_env[nextra]) nextra++;

    ao_proc *procs = ao_calloc((size_t)nproc, sizeof *procs);
    struct local_output lo = {ao_calloc((size_t)(2 * nproc), sizeof *lo.streams)};
    for (int r = 0; r < nproc; r++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "[rank %d] ", r);
        snprintf(procs[r].name, sizeof procs[r].name, "rank %d", r);
        for (int k = 0; k < 2; k++)
            ao_prefixer_init(&lo.streams[2 * r + k], k ? STDERR_FILENO : STDOUT_FILENO,
                             ao_output_shown(r, k, o->all_ranks_output), prefix);
    }

    ao_supervisor s = {.grace_s = o->grace_s > 0 ? o->grace_s : 5.0,
                       .interrupt_signal = SIGINT,
                       .output = local_output,
                       .ctx = &lo};
    int rc = AO_EXIT_FAIL;
    char *id_var = NULL;
    if (ao_supervisor_begin(&s, procs, nproc) == 0) {
        /* The id is made once here, so no rank needs a rendezvous. Only now,
         * with SIGCHLD/SIGINT/SIGTERM blocked: making an NCCL id starts a
         * bootstrap thread in this process, and a thread that does not block
         * them would take the signals meant for the supervisor's signalfd
         * (seen on 2xH200: a rank's exit went unnoticed and the run hung). */
        int started = 1;
        if (o->comm_backend) {
            ao_comm_id id;
            started = ao_comm_make_id(o->comm_backend, &id) == 0;
            if (started) {
                char hex[2 * AO_COMM_ID_BYTES + 1];
                ao_comm_id_to_hex(&id, hex);
                id_var = ao_asprintf("AORTA_COMM_ID=%s", hex);
            }
        }
        for (int r = 0; r < nproc && started; r++) {
            /* Extra variables first: the rank's own cannot be overridden. */
            char **set = ao_calloc(nextra + 6, sizeof *set);
            size_t n = 0;
            for (size_t j = 0; j < nextra; j++) set[n++] = o->extra_env[j];
            char *mine[4] = {ao_asprintf("AORTA_RANK=%d", r),
                             ao_asprintf("AORTA_WORLD_SIZE=%d", nproc),
                             ao_asprintf("AORTA_LOCAL_RANK=%d", r),
                             ao_asprintf("AORTA_LOCAL_WORLD_SIZE=%d", nproc)};
            for (int j = 0; j < 4; j++) set[n++] = mine[j];
            if (id_var) set[n++] = id_var;
            char **env = ao_env_merge(environ, set);
            started = ao_supervisor_start(&s, r, exe, rank_argv, env) == 0;
            free(env);
            for (int j = 0; j < 4; j++) free(mine[j]);
            free(set);
        }
        if (started) rc = ao_supervisor_run(&s);
        if (started && o->outcome && s.failed >= 0) {
            o->outcome->rank = s.failed;
            ao_describe_status(procs[s.failed].status, o->outcome->how, sizeof o->outcome->how);
        }
        ao_supervisor_end(&s);
    }

    for (int i = 0; i < 2 * nproc; i++) ao_prefixer_free(&lo.streams[i]);
    free(lo.streams);
    free(procs);
    free(rank_argv);
    free(id_var);
    free(exe);
    return rc;
}

int ao_launch_spawn(int argc, char **argv, const ao_launch_opts *o)
{
    if (o->nproc < 1) {
        ao_error("--nproc", "must be at least 1, not %d", o->nproc);
        return AO_EXIT_USAGE;
    }
    if (o->backend && strcmp(o->backend, "cpu") == 0) return ao_launch_mpirun(argc, argv, o);
    return spawn_local(argc, argv, o);
}
