/* The cpu backend's ranks talk through MPI, so the parent runs `mpirun -np N`
 * on this binary instead of forking the ranks itself.
 *
 * mpirun runs with --tag-output and its streams piped to the parent, which
 * takes the "[1,K]<stdout>:" tags off again and prints "[rank K] " lines with
 * the same rules as the local spawner (rank 0's stdout, every rank's stderr).
 * mpirun stops the whole job when a rank fails and says which one; the
 * parent supervises mpirun like one rank. The first Ctrl-C is passed on as
 * SIGUSR1, which mpirun forwards to the ranks (a SIGINT would make it kill
 * them); the rank's stop handler takes SIGUSR1 like SIGINT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "launch/env.h"
#include "launch/internal.h"

extern char **environ;

/* `name` if it holds a '/', else the first executable `name` in PATH. */
static char *find_program(const char *name)
{
    if (strchr(name, '/')) return access(name, X_OK) == 0 ? ao_strdup(name) : NULL;
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t len = strcspn(path, ":");
        char *cand = ao_asprintf("%.*s/%s", (int)len, len ? path : ".", name);
        if (access(cand, X_OK) == 0) return cand;
        free(cand);
        path += len + (path[len] == ':');
    }
    return NULL;
}

struct mpirun_output {
    ao_prefixer *ranks; /* 2 * nproc */
    ao_prefixer untagged[2];
    ao_mpirun_demux demux[2]; /* mpirun's stdout and stderr */
    int closed[2];
    ao_launch_outcome *outcome;
};

/* OpenMPI's word on a rank that died of a signal ("mpirun noticed that
 * process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."): the
 * rank and how, for the outcome. A rank that failed on its own says why
 * itself. */
static void mpirun_line(void *ctx, const char *line, size_t n)
{
    struct mpirun_output *mo = ctx;
    if (!mo->outcome || mo->outcome->rank >= 0 || n > 512) return;
    char text[513];
    memcpy(text, line, n);
    text[n] = '\0';
    const char *at = strstr(text, "process rank ");
    int rank, sig, end = 0;
    char name[64] = "";
    if (at && sscanf(at, "process rank %d with PID %*d on node %*s exited on signal %d (%63[^)])%n",
                     &rank, &sig, name, &end) >= 2) {
        mo->outcome->rank = rank;
        snprintf(mo->outcome->how, sizeof mo->outcome->how, "killed by signal %d%s%s%s", sig,
                 name[0] ? " (" : "", name, name[0] ? ")" : "");
    }
}

static void mpirun_output(void *ctx, int proc, int stream, const char *data, size_t n)
{
    struct mpirun_output *mo = ctx;
    if (data) {
        ao_mpirun_demux_feed(&mo->demux[stream], data, n);
        return;
    }
    ao_mpirun_demux_finish(&mo->demux[stream]);
    ao_prefixer_finish(&mo->untagged[stream]);
    mo->closed[stream] = 1;
    /* The last of mpirun's streams: end every rank's unterminated line. */
    if (mo->closed[0] && mo->closed[1])
        for (int i = 0; i < 2 * mo->demux[0].nranks; i++) ao_prefixer_finish(&mo->ranks[i]);
}

/* argv for mpirun; *np_arg is the one string it allocates. */
static char **mpirun_argv(const char *mpirun, const char *exe, int argc, char **argv, int nproc,
                          char **np_arg)
{
    char **a = ao_calloc((size_t)argc + 24, sizeof *a);
    int n = 0;
    a[n++] = (char *)mpirun;
    a[n++] = "-np";
    a[n++] = *np_arg = ao_asprintf("%d", nproc);
    if (geteuid() == 0) a[n++] = "--allow-run-as-root";
    /* More ranks than cores is normal here (a 2-core CI machine). */
    a[n++] = "--oversubscribe";
    a[n++] = "--bind-to";
    a[n++] = "none";
    a[n++] = "--tag-output";
    /* Shared memory without cross-memory attach, which containers forbid;
     * settings the user made through OMPI_MCA_* win. */
    if (!getenv("OMPI_MCA_btl")) {
        a[n++] = "--mca";
        a[n++] = "btl";
        a[n++] = "self,vader";
    }
    if (!getenv("OMPI_MCA_btl_vader_single_copy_mechanism")) {
        a[n++] = "--mca";
        a[n++] = "btl_vader_single_copy_mechanism";
        a[n++] = "none";
    }
    a[n++] = (char *)exe;
    for (int i = 0; i < argc; i++) a[n++] = argv[i];
    a[n] = NULL;
    return a;
}

int ao_launch_mpirun(int argc, char **argv, const ao_launch_opts *o)
{
#ifndef AORTA_HAVE_MPI
    ao_error("--nproc", "%d ranks on the cpu backend need MPI, and this aorta was built without it",
             o->nproc);
    ao_hint("install OpenMPI (scripts/install-deps.sh) and rebuild");
    return AO_EXIT_FAIL;
#endif
    const char *want = getenv("AORTA_MPIRUN");
    if (!want || !*want) want = "mpirun";
    char *mpirun = find_program(want);
    if (!mpirun) {
        ao_error("mpirun", "cannot find %s%s, which runs the ranks of the cpu backend", want,
                 strchr(want, '/') ? "" : " in PATH");
        ao_hint("install OpenMPI (scripts/install-deps.sh), or set AORTA_MPIRUN to its mpirun");
        return AO_EXIT_FAIL;
    }
    char *exe = ao_self_exe();
    if (!exe) {
        free(mpirun);
        return AO_EXIT_FAIL;
    }
    char *np_arg = NULL;
    char **args = mpirun_argv(mpirun, exe, argc, argv, o->nproc, &np_arg);
    char **env = ao_env_merge(environ, o->extra_env);

    struct mpirun_output mo = {.ranks = ao_calloc((size_t)(2 * o->nproc), sizeof *mo.ranks)};
    for (int r = 0; r < o->nproc; r++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "[rank %d] ", r);
        for (int k = 0; k < 2; k++)
            ao_prefixer_init(&mo.ranks[2 * r + k], k ? STDERR_FILENO : STDOUT_FILENO,
                             ao_output_shown(r, k, o->all_ranks_output), prefix);
    }
    mo.outcome = o->outcome;
    for (int k = 0; k < 2; k++) {
        ao_prefixer_init(&mo.untagged[k], k ? STDERR_FILENO : STDOUT_FILENO, 1, "");
        mo.untagged[k].tap = mpirun_line;
        mo.untagged[k].tap_ctx = &mo;
        ao_mpirun_demux_init(&mo.demux[k], mo.ranks, o->nproc, &mo.untagged[k]);
    }

    ao_proc proc;
    ao_supervisor s = {.grace_s = o->grace_s > 0 ? o->grace_s : 5.0,
                       .interrupt_signal = SIGUSR1,
                       .output = mpirun_output,
                       .ctx = &mo};
    int rc = AO_EXIT_FAIL;
    if (ao_supervisor_begin(&s, &proc, 1) == 0) {
        snprintf(proc.name, sizeof proc.name, "mpirun");
        if (ao_supervisor_start(&s, 0, mpirun, args, env) == 0) {
            rc = ao_supervisor_run(&s);
            /* Not after Ctrl-C: then the ranks were stopped, none failed. */
            if (rc != AO_EXIT_OK && rc != AO_EXIT_INTERRUPTED && WIFEXITED(proc.status) &&
                !s.interrupts)
                ao_hint("mpirun's message above names the rank that failed");
        }
        ao_supervisor_end(&s);
    }

    for (int i = 0; i < 2 * o->nproc; i++) ao_prefixer_free(&mo.ranks[i]);
    for (int k = 0; k < 2; k++) ao_prefixer_free(&mo.untagged[k]);
    free(mo.ranks);
    free(env);
    free(args);
    free(np_arg);
    free(exe);
    free(mpirun);
    return rc;
}
