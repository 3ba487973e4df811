/* The parent of aorta attach (attach/attach.h): run directory, run.json, the
 * command with the injection library, the exit status passed through, and
 * the ranks' files folded into run.json and summary.json afterwards. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attach/attach.h"
#include "attach/gather.h"
#include "attach/steps.h"
#include "core/error.h"
#include "core/jsonl.h"
#include "core/plugin.h"
#include "core/rundir.h"
#include "core/version.h"
#include "export/export.h"
#include "launch/env.h"
#include "launch/launch.h"
#include "runs/summary.h"

extern char **environ;

/* ---- signals: forwarded to the command ------------------------------------ */

static volatile sig_atomic_t child_pid;
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

static void forward(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    /* The terminal sends its signals to the whole foreground group, the
     * command included: pass on only what a process sent to us. */
    if (child_pid > 0 && si && si->si_code <= 0) kill((pid_t)child_pid, sig);
}

static void install_forwarding(struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
        sigaction(forwarded[i], &sa, &old[i]);
}

static void restore_signals(const struct sigaction *old)
{
    for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
        sigaction(forwarded[i], &old[i], NULL);
}

/* ---- the command ------------------------------------------------------------ */

/* fork + execvp with envp; exec failures come back through a close-on-exec
 * pipe. Returns the wait status, or -1 after printing why it did not start
 * (*exec_errno set). */
static int run_command(char **argv, char **envp, int *exec_errno)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        *exec_errno = errno;
        return -1;
    }
    struct sigaction old[sizeof forwarded / sizeof *forwarded];
    install_forwarding(old);
    pid_t pid = fork();
    if (pid < 0) {
        *exec_errno = errno;
        restore_signals(old);
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid == 0) {
        restore_signals(old);
        close(pfd[0]);
        environ = envp;
        execvp(argv[0], argv);
        int e = errno;
        if (write(pfd[1], &e, sizeof e) < 0) _exit(127);
        _exit(127);
    }
    child_pid = pid;
    close(pfd[1]);
    int e = 0;
    ssize_t n;
    while ((n = read(pfd[0], &e, sizeof e)) < 0 && errno == EINTR) {
    }
    close(pfd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    child_pid = 0;
    restore_signals(old);
    if (n == (ssize_t)sizeof e) {
        *exec_errno = e;
        return -1;
    }
    return status;
}

/* ---- run.json --------------------------------------------------------------- */

typedef struct attach_config {
    const ao_attach_opts *o;
    const char *used; /* the ranks' step sources, "" before the run */
    char *procs;      /* JSON array of the processes (attach/gather.h), or NULL */
    long long skip;
} attach_config;

static void visit(const void *cfg, ao_config_emit_fn emit, void *ctx)
{
    const attach_config *c = cfg;
    const ao_attach_opts *o = c->o;
    const char *flag = "--step-nvtx/--step-kernel/--window-ms";
    char win[32];
    snprintf(win, sizeof win, "%g", o->window_ms > 0 ? o->window_ms : AO_STEP_WINDOW_MS_DEFAULT);
    ao_config_entry e[] = {
        {"attach.step_request", ao_json_str(o->source), "string", flag},
        {"attach.step_nvtx", ao_json_str(o->step_nvtx ? o->step_nvtx : AO_STEP_NVTX_DEFAULT),
         "string", o->step_nvtx ? "--step-nvtx" : "default"},
        {"attach.step_kernel",
         ao_json_str(o->step_kernel ? o->step_kernel : AO_STEP_KERNEL_DEFAULT), "string",
         o->step_kernel ? "--step-kernel" : "default"},
        {"attach.window_ms", ao_json_raw(win), "float",
         o->window_ms > 0 ? "--window-ms" : "default"},
        {"attach.comm", o->comm ? ao_json_str(o->comm) : ao_json_raw("null"), "string",
         o->comm ? "--comm" : "default (NCCL/RCCL kernel names)"},
        {"attach.step_source", ao_json_str(c->used), "string", "the ranks (rank_NN_attach.json)"},
        {"attach.processes", ao_json_raw(c->procs ? c->procs : "[]"), "list",
         "every process that did GPU work (rank_NN_attach.json, pid_N_attach.json)"},
        {"training.summary_skip_steps", ao_json_int(c->skip), "int", "aorta attach"},
    };
    for (size_t i = 0; i < sizeof e / sizeof *e; i++) emit(ctx, &e[i]);
}

static int write_run_json(const ao_rundir *rd, int argc, char **argv, char **envp, int world_size,
                          const attach_config *cfg, const struct timespec *rt,
                          const struct timespec *mono)
{
    ao_json_field versions[] = {{"aorta", ao_json_str(AORTA_VERSION)},
                                {"git_commit", ao_json_str(ao_git_commit)}};
    ao_run_header h = {.run_id = rd->run_id,
                       .command = "attach",
                       .argc = argc,
                       .argv = argv,
                       .world_size = world_size,
                       .config_visit = visit,
                       .config = cfg,
                       .envp = envp,
                       .versions = versions,
                       .nversions = sizeof versions / sizeof *versions,
                       .anchor_realtime = *rt,
                       .anchor_monotonic = *mono};
    char *path = ao_rundir_file(rd, AO_RUN_JSON);
    int rc = ao_run_json_write(path, &h);
    free(path);
    return rc;
}

/* ---- after the command ------------------------------------------------------- */

static int exit_code(int status)
{
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}

/* ROCP_TOOL_LIBRARIES with the rocprofiler-sdk tool first: the SDK runs
 * every tool listed, each in its own contexts. rocprofiler-sdk 0.5.0 drops
 * the entry after the last ':', hence the ':' that ends a list of two. */
static char *rocm_tools(const char *lib)
{
    const char *pre = getenv("ROCP_TOOL_LIBRARIES");
    return pre && *pre ? ao_asprintf("ROCP_TOOL_LIBRARIES=%s:%s%s", lib, pre,
                                     pre[strlen(pre) - 1] == ':' ? "" : ":")
                       : ao_asprintf("ROCP_TOOL_LIBRARIES=%s", lib);
}

int ao_attach_run(const ao_attach_opts *o, int argc, char **argv)
{
    const char *preset = getenv("CUDA_INJECTION64_PATH");
    /* beside the binary (build tree), or in ../lib/aorta (an install) */
    char *cuda = ao_lib_find(AO_ATTACH_LIBRARY, NULL, NULL, 0);
    char *rocm = ao_lib_find(AO_ATTACH_ROCM_LIBRARY, NULL, NULL, 0);
    int aside = cuda && preset && *preset;
    if (aside) {
        ao_warn("attach: CUDA_INJECTION64_PATH is already set (%s: another tool injects into "
                "this job); its CUDA processes run untraced",
                preset);
        free(cuda);
        cuda = NULL;
    }
    int lib = cuda || rocm;
    if (!lib && !aside)
        ao_warn("attach: no %s or %s beside this aorta (a build without CUDA or rocprofiler-sdk "
                "headers); running the command untraced",
                AO_ATTACH_LIBRARY, AO_ATTACH_ROCM_LIBRARY);

    ao_rundir rd = {0};
    char **envp = NULL;
    char *set[10] = {0};
    attach_config cfg = {o, "", NULL, o->skip_steps};
    struct timespec rt, mono;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    ao_rank_info ri = {0, 1, 0, 1, 0};
    if (ao_launch_detect(&ri, NULL) < 0) ri.world_size = 1;
    /* --prometheus: the run directory served while the job runs (a port
     * that is taken stops attach before anything is made) */
    ao_exporter *ex = NULL;
    if (o->prometheus && !lib)
        ao_warn("attach: --prometheus serves nothing: no run directory without an attach library");
    else if (o->prometheus && !(ex = ao_export_open(o->listen_addr, o->prometheus_port, "--listen",
                                                    "--prometheus"))) {
        free(cuda);
        free(rocm);
        return AO_EXIT_USAGE;
    }
    if (lib) {
        char id[AO_RUN_ID_MAX];
        if (o->run_name)
            snprintf(id, sizeof id, "%s", o->run_name);
        else
            ao_rundir_make_id(id, sizeof id);
        int rc = ao_rundir_create(o->output_dir, id, &rd);
        if (rc == 0 && ex && ao_export_start(ex, rd.path) != 0) {
            ao_rundir_free(&rd);
            rc = AO_EXIT_FAIL;
        }
        if (rc != 0) {
            ao_export_close(ex);
            free(cuda);
            free(rocm);
            return rc;
        }
        char abs[PATH_MAX];
        if (!realpath(rd.path, abs)) snprintf(abs, sizeof abs, "%s", rd.path);
        const char *pre = getenv("LD_PRELOAD");
        char win[32];
        snprintf(win, sizeof win, "%g", o->window_ms);
        size_t k = 0;
        if (cuda) {
            set[k++] = ao_asprintf("CUDA_INJECTION64_PATH=%s", cuda);
            set[k++] = pre && *pre ? ao_asprintf("LD_PRELOAD=%s:%s", cuda, pre)
                                   : ao_asprintf("LD_PRELOAD=%s", cuda);
        }
        if (rocm) set[k++] = rocm_tools(rocm);
        set[k++] = ao_asprintf("%s=%s", AO_ATTACH_ENV_DIR, abs);
        set[k++] = ao_asprintf("%s=%s", AO_ATTACH_ENV_SOURCE, o->source);
        if (o->step_nvtx) set[k++] = ao_asprintf("%s=%s", AO_ATTACH_ENV_STEP_NVTX, o->step_nvtx);
        if (o->step_kernel)
            set[k++] = ao_asprintf("%s=%s", AO_ATTACH_ENV_STEP_KERNEL, o->step_kernel);
        if (o->window_ms > 0) set[k++] = ao_asprintf("%s=%s", AO_ATTACH_ENV_WINDOW_MS, win);
        if (o->comm) set[k++] = ao_asprintf("%s=%s", AO_ATTACH_ENV_COMM, o->comm);
        envp = ao_env_merge(environ, set);
        if (write_run_json(&rd, argc, argv, environ, ri.world_size, &cfg, &rt, &mono) != 0) {
            for (size_t i = 0; i < k; i++) free(set[i]);
            free(envp);
            ao_export_close(ex);
            ao_rundir_free(&rd);
            free(cuda);
            free(rocm);
            return AO_EXIT_FAIL;
        }
    }

    int exec_errno = 0;
    int status = run_command(argv, envp ? envp : environ, &exec_errno);
    ao_export_close(ex);
    int code;
    if (status < 0) {
        ao_error(argv[0], "cannot run the command: %s", strerror(exec_errno));
        code = exec_errno == ENOENT ? 127 : 126;
    } else {
        code = exit_code(status);
    }

    if (lib && status >= 0) {
        ao_attach_gathered g;
        ao_attach_gather(rd.path, &g);
        if (g.nranks + g.npids == 0)
            fprintf(stderr,
                    "aorta: note: attach: %s did no GPU work that attach saw (not a GPU program, "
                    "or it never ran a kernel or copy): no metrics\n",
                    argv[0]);
        cfg.used = g.used;
        cfg.procs = g.processes;
        if (g.min_lines >= 0 && cfg.skip >= g.min_lines) cfg.skip = 0;
        if (g.nranks + g.npids)
            write_run_json(&rd, argc, argv, environ,
                           g.world_size > 0 ? g.world_size : ri.world_size, &cfg, &rt, &mono);
        if (g.min_lines > 0) {
            if (ao_summary_for_run(rd.path, cfg.skip, NULL) == 0)
                fprintf(stderr, "aorta: attach: %d rank%s, steps from %s; %s/%s\n", g.nranks,
                        g.nranks == 1 ? "" : "s", g.used[0] ? g.used : "none", rd.path,
                        AO_RUN_SUMMARY);
        } else if (g.nranks) {
            fprintf(stderr,
                    "aorta: note: attach: no complete step was seen (%s); the rank files are in "
                    "%s\n",
                    g.used[0] ? g.used : "no rank finished", rd.path);
        } else if (g.npids) {
            fprintf(stderr,
                    "aorta: note: attach: every process's files are pid-named (above): no "
                    "summary; the files are in %s\n",
                    rd.path);
        }
        ao_attach_gathered_free(&g);
    }
    for (size_t i = 0; i < sizeof set / sizeof *set; i++) free(set[i]);
    free(envp);
    ao_rundir_free(&rd);
    free(cuda);
    free(rocm);
    if (status >= 0 && WIFSIGNALED(status)) {
        /* die the same way, so the caller's shell sees the signal */
        fflush(NULL);
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
    }
    return code;
}
