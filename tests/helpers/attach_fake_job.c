/* A multi-process "GPU" job for aorta attach's rank ownership on the CPU
 * (tests/e2e/attach_ranks.sh): each process runs attach's tracer
 * (attach/tracer.h, the core both vendor libraries share) over a stand-in
 * backend, as libaorta_attach.so does when CUDA initializes in it, and plays
 * NVTX-like steps of known overlap through it; the root is a launcher that
 * starts ranks with a launcher's variables, as torchrun, aorta train,
 * mpirun, srun or a plain program would.
 *
 *     attach_fake_job [--launcher L] [--nproc N] [--steps S] [--parent P]
 *                     [--dup-rank] [--bad-rank K] [--idle-rank K]
 *     attach_fake_job --child [--steps S]   (a rank; mpirun starts these)
 * L: aorta, torchrun, torchrun-slurm (torchrun's workers inside a Slurm
 * task: they inherit SLURM_*), openmpi, slurm, plain (no variables).
 * P, the launcher's own GPU use: none, init (the tracer starts, no work:
 * what cuInit alone does), work (one step before it starts the ranks, and
 * it waits until its files are claimed), late (one step after the ranks).
 * --dup-rank: rank 1 gets rank 0's variables; --bad-rank K: rank K gets a
 * rank past the world size; --idle-rank K: rank K initializes, no work.
 * Each step: compute [0,10) ms on stream 1, an NCCL all-reduce [6,14) on
 * stream 2, inside a range "step", steps 20 ms apart on a virtual clock.
 * Each process prints {"pid": P, "role": "rank"|"launcher", "rank": K}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attach/tracer.h"

#define MS   1000000ull
#define BASE (1000 * 1000 * MS)

static uint64_t clock_ns = BASE;
static int64_t corr;
static int started;

static uint64_t fake_now(void)
{
    return __atomic_load_n(&clock_ns, __ATOMIC_RELAXED);
}

static int fake_decode(void *buf, size_t valid, int tag, int final)
{
    (void)tag;
    (void) final;
    const ao_cupti_record *r = buf;
    for (size_t i = 0; i < valid; i++) ao_tracer_add(&r[i]);
    free(buf);
    return 1;
}

static const ao_tracer_backend backend = {fake_now, fake_decode, NULL};

/* What CUDA's initialization does with the injection library in it. */
static void gpu_init(void)
{
    if (ao_tracer_open(&backend) != 0) return;
    if (ao_tracer_run() != 0) {
        ao_tracer_abandon();
        return;
    }
    started = 1;
}

static void gpu_steps(int n)
{
    if (!started) return;
    for (int i = 0; i < n; i++) {
        uint64_t t = fake_now() + MS;
        ao_tracer_range_push("step", corr);
        ao_cupti_record *r = calloc(2, sizeof *r);
        if (!r) exit(1);
        r[0] = (ao_cupti_record){AO_CUPTI_KERNEL, t, t + 10 * MS, 1, 0, "gemm", ++corr};
        r[1] = (ao_cupti_record){AO_CUPTI_KERNEL,
                                 t + 6 * MS,
                                 t + 14 * MS,
                                 2,
                                 0,
                                 "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                                 ++corr};
        ao_tracer_push(r, 2, 0, 0);
        ao_tracer_range_pop(corr);
        __atomic_add_fetch(&clock_ns, 20 * MS, __ATOMIC_RELAXED);
    }
}

static void gpu_exit(void)
{
    if (started) ao_tracer_finish();
    started = 0;
}

static void say(const char *role, int rank)
{
    printf("{\"pid\": %d, \"role\": \"%s\", \"rank\": %d}\n", (int)getpid(), role, rank);
    fflush(stdout);
}

/* Wait (polling) until this process's files exist: its worker claims them
 * on its next round, after the records arrive. */
static void wait_claimed(void)
{
    const char *dir = ao_tracer_dir();
    if (!dir || !started) return;
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/rank_00_attach.json", dir);
    snprintf(b, sizeof b, "%s/pid_%d_attach.json", dir, (int)getpid());
    for (int i = 0; i < 30000 && access(a, F_OK) != 0 && access(b, F_OK) != 0; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void set_int(const char *name, int v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%d", v);
    setenv(name, buf, 1);
}

/* The variables launcher l gives rank k of n. */
static void launcher_env(const char *l, int k, int n)
{
    const char *names[4];
    if (!strcmp(l, "aorta")) {
        const char *v[4] = {"AORTA_RANK", "AORTA_WORLD_SIZE", "AORTA_LOCAL_RANK",
                            "AORTA_LOCAL_WORLD_SIZE"};
        memcpy(names, v, sizeof v);
    } else if (!strncmp(l, "torchrun", 8)) {
        const char *v[4] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
        memcpy(names, v, sizeof v);
        setenv("TORCHELASTIC_RUN_ID", "fake", 1);
    } else if (!strcmp(l, "openmpi")) {
        const char *v[4] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                            "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
        memcpy(names, v, sizeof v);
    } else if (!strcmp(l, "slurm")) {
        const char *v[4] = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                            "SLURM_NTASKS_PER_NODE"};
        memcpy(names, v, sizeof v);
    } else {
        return; /* plain: nothing */
    }
    set_int(names[0], k);
    set_int(names[1], n);
    set_int(names[2], k);
    set_int(names[3], n);
}

int main(int argc, char **argv)
{
    const char *launcher = "torchrun", *parent = "none";
    int nproc = 2, steps = 3, child = 0, dup = 0, bad = -1, idle = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--child"))
            child = 1;
        else if (!strcmp(a, "--dup-rank"))
            dup = 1;
        else if (!strcmp(a, "--launcher") && ++i)
            launcher = v;
        else if (!strcmp(a, "--parent") && ++i)
            parent = v;
        else if (!strcmp(a, "--nproc") && ++i)
            nproc = atoi(v);
        else if (!strcmp(a, "--steps") && ++i)
            steps = atoi(v);
        else if (!strcmp(a, "--bad-rank") && ++i)
            bad = atoi(v);
        else if (!strcmp(a, "--idle-rank") && ++i)
            idle = atoi(v);
        else {
            fprintf(stderr, "attach_fake_job: unknown argument %s\n", a);
            return 2;
        }
    }
    if (child) {
        const char *k = getenv("AORTA_FAKE_RANK");
        int rank = k ? atoi(k) : -1;
        say("rank", rank);
        gpu_init();
        if (!getenv("AORTA_FAKE_IDLE")) gpu_steps(steps);
        gpu_exit();
        return 0;
    }
    say("launcher", -1);
    if (!strcmp(launcher, "torchrun-slurm")) launcher_env("slurm", 0, 1); /* the agent's task */
    if (strcmp(parent, "none") != 0) gpu_init();
    if (!strcmp(parent, "work")) {
        gpu_steps(1);
        wait_claimed();
    }
    pid_t *pids = calloc((size_t)nproc + 1, sizeof *pids);
    for (int k = 0; k < nproc; k++) {
        pids[k] = fork();
        if (pids[k] < 0) return 1;
        if (pids[k] == 0) {
            launcher_env(launcher, dup && k == 1 ? 0 : k, nproc);
            if (k == bad) set_int(strcmp(launcher, "aorta") ? "RANK" : "AORTA_RANK", nproc + 5);
            set_int("AORTA_FAKE_RANK", k);
            if (k == idle) setenv("AORTA_FAKE_IDLE", "1", 1);
            char s[16];
            snprintf(s, sizeof s, "%d", steps);
            execl("/proc/self/exe", argv[0], "--child", "--steps", s, (char *)NULL);
            _exit(127);
        }
    }
    int rc = 0;
    for (int k = 0; k < nproc; k++) {
        int st = 0;
        waitpid(pids[k], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
    }
    free(pids);
    if (!strcmp(parent, "late")) gpu_steps(1);
    gpu_exit();
    return rc;
}
