/* Rank discovery, the spawner and its supervision, output prefixing and the
 * comm id bootstrap.
 *
 * ao_launch_spawn runs /proc/self/exe, so this binary is also the ranks it
 * spawns: `test_launch child MODE` behaves as one rank (see child_main) and
 * never reaches cmocka. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "launch/env.h"
#include "launch/internal.h"
#include "launch/launch.h"
#include "launch/rank.h"

/* ---- the rank side ------------------------------------------------------------ */

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int child_main(const char *mode)
{
    const char *rank_s = getenv("AORTA_RANK");
    int rank = rank_s ? atoi(rank_s) : -1;
    if (strcmp(mode, "ok") == 0) {
        printf("hello from rank %d\n", rank);
        return 0;
    }
    if (strcmp(mode, "usage") == 0) return AO_EXIT_USAGE;
    if (strcmp(mode, "fail") == 0) { /* rank 1 fails, rank 0 would sleep long */
        if (rank == 1) {
            sleep_s(0.1);
            return 3;
        }
        sleep_s(60);
        return 0;
    }
    if (strcmp(mode, "stuck") == 0) { /* like fail, but rank 0 ignores SIGTERM's request */
        ao_launch_install_stop_handler();
        if (rank == 1) {
            sleep_s(0.1);
            return 3;
        }
        for (int i = 0; i < 12000; i++) sleep_s(0.01);
        return 0;
    }
    if (strcmp(mode, "segv") == 0) {
        if (rank == 1) {
            struct sigaction dfl = {.sa_handler = SIG_DFL};
            sigaction(SIGSEGV, &dfl, NULL);
            raise(SIGSEGV);
        }
        sleep_s(60);
        return 0;
    }
    if (strcmp(mode, "stop") == 0) { /* Ctrl-C: finish the "iteration", exit 0 */
        ao_launch_install_stop_handler();
        printf("ready\n"); /* the test sends Ctrl-C once both ranks said this */
        fflush(stdout);
        for (int i = 0; i < 12000 && !ao_launch_stop_requested(); i++) sleep_s(0.01);
        printf("stopped=%d\n", ao_launch_stop_requested());
        return ao_launch_stop_requested() ? 0 : 5;
    }
    if (strcmp(mode, "output") == 0) {
        if (rank == 0) {
            write(1, "par", 3);
            sleep_s(0.05);
            write(1, "tial\n", 5);
            write(1, "a\0b\n", 4);
            write(2, "rank0 err\n", 10);
            write(1, "last", 4);
        } else {
            write(1, "hidden\n", 7);
            write(2, "rank1 err\n", 10);
        }
        return 0;
    }
    if (strcmp(mode, "env") == 0) {
        const char *x = getenv("AORTA_TEST_EXTRA");
        const char *ws = getenv("AORTA_WORLD_SIZE");
        const char *lr = getenv("AORTA_LOCAL_RANK");
        int ok = x && strcmp(x, "yes") == 0 && ws && strcmp(ws, "2") == 0 && lr &&
                 atoi(lr) == rank && !getenv("AORTA_COMM_ID");
        return ok ? 0 : 4;
    }
    if (strcmp(mode, "commid") == 0) {
        const char *hex = getenv("AORTA_COMM_ID");
        ao_comm_id id;
        if (!hex || ao_comm_id_from_hex(hex, &id) != 0) return 4;
        printf("id=%s\n", hex);
        return 0;
    }
    fprintf(stderr, "test_launch: unknown child mode %s\n", mode);
    return 9;
}

/* ---- helpers ------------------------------------------------------------------- */

static const char *launcher_vars[] = {"AORTA_RANK",
                                      "AORTA_WORLD_SIZE",
                                      "AORTA_LOCAL_RANK",
                                      "AORTA_LOCAL_WORLD_SIZE",
                                      "OMPI_COMM_WORLD_RANK",
                                      "OMPI_COMM_WORLD_SIZE",
                                      "OMPI_COMM_WORLD_LOCAL_RANK",
                                      "OMPI_COMM_WORLD_LOCAL_SIZE",
                                      "PMI_RANK",
                                      "PMI_SIZE",
                                      "MPI_LOCALRANKID",
                                      "MPI_LOCALNRANKS",
                                      "SLURM_PROCID",
                                      "SLURM_NTASKS",
                                      "SLURM_LOCALID",
                                      "SLURM_NTASKS_PER_NODE",
                                      "SLURM_TASKS_PER_NODE",
                                      "SLURM_NODEID",
                                      "RANK",
                                      "WORLD_SIZE",
                                      "LOCAL_RANK",
                                      "LOCAL_WORLD_SIZE",
                                      "TORCHELASTIC_RUN_ID",
                                      "AORTA_COMM_ID",
                                      "AORTA_TEST_EXTRA"};

static int clean_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++)
        unsetenv(launcher_vars[i]);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Capture this process's stdout and stderr in files while a test runs code. */
struct capture {
    int saved[2];
    FILE *file[2];
    char *text[2];
    size_t len[2];
};

static void capture_begin(struct capture *c)
{
    fflush(NULL);
    for (int k = 0; k < 2; k++) {
        c->file[k] = tmpfile();
        assert_non_null(c->file[k]);
        c->saved[k] = dup(1 + k);
        dup2(fileno(c->file[k]), 1 + k);
    }
}

static void capture_end(struct capture *c)
{
    fflush(NULL);
    for (int k = 0; k < 2; k++) {
        dup2(c->saved[k], 1 + k);
        close(c->saved[k]);
        long n = ftell(c->file[k]) >= 0 ? lseek(fileno(c->file[k]), 0, SEEK_END) : 0;
        c->text[k] = calloc((size_t)n + 1, 1);
        c->len[k] = (size_t)pread(fileno(c->file[k]), c->text[k], (size_t)n, 0);
        fclose(c->file[k]);
    }
}

static void capture_free(struct capture *c)
{
    free(c->text[0]);
    free(c->text[1]);
}

static int spawn_child(const char *mode, int nproc, int all, double grace, char **extra,
                       const char *comm_backend, struct capture *c)
{
    char *argv[] = {"child", (char *)mode, NULL};
    ao_launch_opts o = {.nproc = nproc,
                        .backend = "test",
                        .comm_backend = comm_backend,
                        .all_ranks_output = all,
                        .grace_s = grace,
                        .extra_env = extra};
    capture_begin(c);
    int rc = ao_launch_spawn(2, argv, &o);
    capture_end(c);
    return rc;
}

/* A comm backend built into this binary whose id rank 0 can make: "mpi" when
 * there, else the first; NULL in a build with none. */
static const char *id_backend(void)
{
    for (int i = 0; i < ao_comm_backend_count(); i++)
        if (strcmp(ao_comm_backend_name(i), "mpi") == 0) return "mpi";
    return ao_comm_backend_count() ? ao_comm_backend_name(0) : NULL;
}

/* ---- detect -------------------------------------------------------------------- */

static void test_detect_none(void **state)
{
    ao_rank_info ri;
    const char *l;
    assert_int_equal(ao_launch_detect(&ri, &l), 0);
    assert_string_equal(l, "none");
    assert_int_equal(ri.rank, 0);
    assert_int_equal(ri.world_size, 1);
    assert_int_equal(ri.local_world_size, 1);
}

static void expect_detect(const char *launcher, int rank, int size, int lrank, int lsize, int node)
{
    ao_rank_info ri;
    const char *l;
    assert_int_equal(ao_launch_detect(&ri, &l), 1);
    assert_string_equal(l, launcher);
    assert_int_equal(ri.rank, rank);
    assert_int_equal(ri.world_size, size);
    assert_int_equal(ri.local_rank, lrank);
    assert_int_equal(ri.local_world_size, lsize);
    assert_int_equal(ri.node, node);
}

static void set4(const char *a, const char *va, const char *b, const char *vb, const char *c,
                 const char *vc, const char *d, const char *vd)
{
    setenv(a, va, 1);
    setenv(b, vb, 1);
    setenv(c, vc, 1);
    if (d) setenv(d, vd, 1);
}

static void test_detect_each_launcher(void **state)
{
    set4("AORTA_RANK", "3", "AORTA_WORLD_SIZE", "4", "AORTA_LOCAL_RANK", "1",
         "AORTA_LOCAL_WORLD_SIZE", "2");
    expect_detect("aorta", 3, 4, 1, 2, 1);
    clean_env(NULL);
    set4("OMPI_COMM_WORLD_RANK", "5", "OMPI_COMM_WORLD_SIZE", "8", "OMPI_COMM_WORLD_LOCAL_RANK",
         "1", "OMPI_COMM_WORLD_LOCAL_SIZE", "4");
    expect_detect("openmpi", 5, 8, 1, 4, 1);
    clean_env(NULL);
    set4("PMI_RANK", "2", "PMI_SIZE", "3", "MPI_LOCALRANKID", "2", "MPI_LOCALNRANKS", "3");
    expect_detect("pmi", 2, 3, 2, 3, 0);
    clean_env(NULL);
    set4("SLURM_PROCID", "6", "SLURM_NTASKS", "8", "SLURM_LOCALID", "2", "SLURM_NTASKS_PER_NODE",
         "4");
    expect_detect("slurm", 6, 8, 2, 4, 1);
    clean_env(NULL);
    /* Without --ntasks-per-node: 2 tasks on each of nodes 0-2, 1 on node 3. */
    set4("SLURM_PROCID", "6", "SLURM_NTASKS", "7", "SLURM_LOCALID", "0", "SLURM_TASKS_PER_NODE",
         "2(x3),1");
    setenv("SLURM_NODEID", "3", 1);
    expect_detect("slurm", 6, 7, 0, 1, 6);
    setenv("SLURM_NODEID", "1", 1);
    expect_detect("slurm", 6, 7, 0, 2, 3);
    clean_env(NULL);
    set4("RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "2");
    expect_detect("torchrun", 1, 2, 1, 2, 0);
    /* Our own spawner wins over variables inherited from an outer launcher. */
    set4("AORTA_RANK", "0", "AORTA_WORLD_SIZE", "2", "AORTA_LOCAL_RANK", "0",
         "AORTA_LOCAL_WORLD_SIZE", "2");
    expect_detect("aorta", 0, 2, 0, 2, 0);
}

/* torchrun inside a Slurm or MPI allocation (srun torchrun ...): its agent
 * is the Slurm task; its workers inherit the agent's SLURM_* and OMPI_*,
 * and only they have TORCHELASTIC_RUN_ID: their rank is torchrun's. */
static void test_detect_torchrun_inside_slurm(void **state)
{
    (void)state;
    set4("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_LOCALID", "0", "SLURM_NTASKS_PER_NODE",
         "1");
    expect_detect("slurm", 1, 2, 0, 1, 1); /* the agent on the second node */
    set4("RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4");
    expect_detect("slurm", 1, 2, 0, 1, 1); /* RANK without torchrun's mark: Slurm's first */
    setenv("TORCHELASTIC_RUN_ID", "none", 1);
    expect_detect("torchrun", 5, 8, 1, 4, 1);
    set4("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK",
         "0", "OMPI_COMM_WORLD_LOCAL_SIZE", "1");
    expect_detect("torchrun", 5, 8, 1, 4, 1);
}

/* detect fails and its message names `var`. */
static void expect_detect_error(const char *var)
{
    ao_rank_info ri;
    const char *l;
    struct capture c;
    capture_begin(&c);
    int rc = ao_launch_detect(&ri, &l);
    capture_end(&c);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(c.text[1], "aorta: error: "));
    if (!strstr(c.text[1], var)) fail_msg("message '%s' does not name %s", c.text[1], var);
    capture_free(&c);
}

static void test_detect_inconsistent(void **state)
{
    set4("OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK",
         "0", "OMPI_COMM_WORLD_LOCAL_SIZE", "1");
    expect_detect_error("OMPI_COMM_WORLD_RANK"); /* rank >= size */
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "two", 1);
    expect_detect_error("OMPI_COMM_WORLD_SIZE"); /* not a number */
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    expect_detect_error("OMPI_COMM_WORLD_LOCAL_RANK"); /* local rank >= local size */
    clean_env(NULL);
    setenv("RANK", "-1", 1);
    setenv("WORLD_SIZE", "2", 1);
    expect_detect_error("RANK");
    setenv("RANK", "0", 1);
    expect_detect_error("LOCAL_RANK"); /* missing */
    clean_env(NULL);
    set4("PMI_RANK", "0", "PMI_SIZE", "0", "MPI_LOCALRANKID", "0", "MPI_LOCALNRANKS", "1");
    expect_detect_error("PMI_SIZE");
    clean_env(NULL);
    set4("SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_LOCALID", "0", NULL, NULL);
    expect_detect_error("SLURM_TASKS_PER_NODE");
}

static void test_device_ordinal(void **state)
{
    assert_int_equal(ao_launch_device_ordinal(1, 2), 1);
    struct capture c;
    capture_begin(&c);
    int wrapped = ao_launch_device_ordinal(3, 2);
    int none = ao_launch_device_ordinal(0, 0);
    capture_end(&c);
    assert_int_equal(wrapped, 1);
    assert_int_equal(none, -1);
    assert_non_null(strstr(c.text[1], "aorta: warning: local rank 3"));
    assert_non_null(strstr(c.text[1], "aorta: error: "));
    capture_free(&c);
}

/* ---- output -------------------------------------------------------------------- */

static char *read_fd_file(FILE *f, size_t *len)
{
    fflush(f);
    long n = lseek(fileno(f), 0, SEEK_END);
    char *s = calloc((size_t)n + 1, 1);
    *len = (size_t)pread(fileno(f), s, (size_t)n, 0);
    return s;
}

static void test_prefixer_lines(void **state)
{
    FILE *f = tmpfile();
    ao_prefixer p;
    ao_prefixer_init(&p, fileno(f), 1, "[rank 0] ");
    ao_prefixer_feed(&p, "ab", 2);
    ao_prefixer_feed(&p, "c\nde", 4);
    ao_prefixer_feed(&p, "f\n\nx\0y\n", 7);
    ao_prefixer_feed(&p, "tail", 4);
    ao_prefixer_finish(&p);
    ao_prefixer_free(&p);
    size_t n;
    char *s = read_fd_file(f, &n);
    static const char want[] =
        "[rank 0] abc\n[rank 0] def\n[rank 0] \n[rank 0] x\0y\n[rank 0] tail\n";
    assert_int_equal(n, sizeof want - 1);
    assert_memory_equal(s, want, n);
    free(s);
    fclose(f);

    /* Hidden: read and dropped. */
    f = tmpfile();
    ao_prefixer_init(&p, fileno(f), 0, "[rank 1] ");
    ao_prefixer_feed(&p, "x\n", 2);
    ao_prefixer_finish(&p);
    ao_prefixer_free(&p);
    s = read_fd_file(f, &n);
    assert_int_equal(n, 0);
    free(s);
    fclose(f);
}

static void test_prefixer_long_line(void **state)
{
    FILE *f = tmpfile();
    ao_prefixer p;
    ao_prefixer_init(&p, fileno(f), 1, "P ");
    size_t big = 200 * 1024;
    char *line = malloc(big);
    memset(line, 'z', big);
    ao_prefixer_feed(&p, line, big);
    ao_prefixer_feed(&p, "\nnext\n", 6);
    ao_prefixer_finish(&p);
    ao_prefixer_free(&p);
    size_t n;
    char *s = read_fd_file(f, &n);
    assert_int_equal(n, 2 + big + 1 + 7);
    assert_memory_equal(s, "P zz", 4);
    assert_memory_equal(s + 2 + big, "\nP next\n", 8);
    free(s);
    free(line);
    fclose(f);
}

static void test_mpirun_demux(void **state)
{
    /* A rank's unterminated last piece is followed by another tag on the
     * same line; a '[' in the data is data. */
    static const char stream[] = "[1,0]<stdout>:a\n"
                                 "mpirun says hi\n"
                                 "[1,1]<stdout>:c[x]\n"
                                 "[12,1]<stderr>:err\n"
                                 "[1,0]<stdout>:par"
                                 "[1,1]<stdout>:[1,9]<stdout>:d\n"
                                 "[1,0]<stdout>:tial\n"
                                 "[1,0]<stdout>:b[1,1]<stderr>:e2\n";
    /* Every way of cutting the stream into two reads, and byte by byte. */
    for (size_t cut = 0; cut <= sizeof stream; cut++) {
        FILE *f[5];
        ao_prefixer pf[4], un;
        for (int i = 0; i < 5; i++) f[i] = tmpfile();
        for (int i = 0; i < 4; i++)
            ao_prefixer_init(&pf[i], fileno(f[i]), 1, i < 2 ? "R0 " : "R1 ");
        ao_prefixer_init(&un, fileno(f[4]), 1, "");
        ao_mpirun_demux d;
        ao_mpirun_demux_init(&d, pf, 2, &un);
        size_t n = sizeof stream - 1;
        if (cut == sizeof stream) {
            for (size_t i = 0; i < n; i++) ao_mpirun_demux_feed(&d, stream + i, 1);
        } else {
            ao_mpirun_demux_feed(&d, stream, cut);
            ao_mpirun_demux_feed(&d, stream + cut, n - cut);
        }
        ao_mpirun_demux_finish(&d);
        const char *want[5] = {"R0 a\nR0 partial\nR0 b\n", "", "R1 c[x]\nR1 [1,9]<stdout>:d\n",
                               "R1 err\nR1 e2\n", "mpirun says hi\n"};
        for (int i = 0; i < 5; i++) {
            if (i < 4) {
                ao_prefixer_finish(&pf[i]);
                ao_prefixer_free(&pf[i]);
            }
            size_t len;
            char *s = read_fd_file(f[i], &len);
            if (strcmp(s, want[i]) != 0)
                fail_msg("cut %zu, stream %d: got '%s', want '%s'", cut, i, s, want[i]);
            free(s);
            fclose(f[i]);
        }
        ao_prefixer_free(&un);
    }
}

static void test_env_merge(void **state)
{
    char *base[] = {"A=1", "B=2", "C", NULL};
    char *set[] = {"B=3", "D=4", NULL};
    char **env = ao_env_merge(base, set);
    assert_string_equal(env[0], "A=1");
    assert_string_equal(env[1], "C");
    assert_string_equal(env[2], "B=3");
    assert_string_equal(env[3], "D=4");
    assert_null(env[4]);
    free(env);
}

/* ---- spawn --------------------------------------------------------------------- */

static void test_spawn_ok(void **state)
{
    struct capture c;
    assert_int_equal(spawn_child("ok", 2, 0, 1.0, NULL, NULL, &c), 0);
    assert_string_equal(c.text[0], "[rank 0] hello from rank 0\n");
    capture_free(&c);
    assert_int_equal(spawn_child("ok", 2, 1, 1.0, NULL, NULL, &c), 0);
    assert_non_null(strstr(c.text[0], "[rank 0] hello from rank 0\n"));
    assert_non_null(strstr(c.text[0], "[rank 1] hello from rank 1\n"));
    capture_free(&c);
}

static void test_spawn_failure_stops_others(void **state)
{
    struct capture c;
    double t0 = now_s();
    int rc = spawn_child("fail", 2, 0, 1.0, NULL, NULL, &c);
    double took = now_s() - t0;
    assert_int_equal(rc, AO_EXIT_FAIL);
    if (!strstr(c.text[1], "aorta: error: rank 1 failed: exited with code 3\n"))
        fail_msg("stderr: %s", c.text[1]);
    assert_null(strstr(c.text[1], "rank 0 failed"));
    /* rank 0 waits 60 s unless stopped: 30 s tells the two apart under load */
    if (took > 30.0) fail_msg("rank 0 was stopped after %.1f s", took);
    capture_free(&c);
}

static void test_spawn_sigkill_after_grace(void **state)
{
    struct capture c;
    double t0 = now_s();
    int rc = spawn_child("stuck", 2, 0, 0.5, NULL, NULL, &c);
    double took = now_s() - t0;
    assert_int_equal(rc, AO_EXIT_FAIL);
    assert_non_null(strstr(c.text[1], "rank 1 failed: exited with code 3"));
    /* rank 0 runs 120 s unless killed: 60 s tells the two apart under load */
    if (took < 0.5 || took > 60.0) fail_msg("took %.1f s with a 0.5 s grace period", took);
    capture_free(&c);
}

static void test_spawn_signal_named(void **state)
{
    struct capture c;
    int rc = spawn_child("segv", 2, 0, 1.0, NULL, NULL, &c);
    assert_int_equal(rc, AO_EXIT_FAIL);
    if (!strstr(c.text[1], "rank 1 failed: killed by signal 11 (Segmentation fault)"))
        fail_msg("stderr: %s", c.text[1]);
    capture_free(&c);
}

static void test_spawn_usage_error_kept(void **state)
{
    struct capture c;
    assert_int_equal(spawn_child("usage", 2, 0, 1.0, NULL, NULL, &c), AO_EXIT_USAGE);
    assert_non_null(strstr(c.text[1], "exited with code 2"));
    capture_free(&c);
    assert_int_equal(spawn_child("no-such-mode", 1, 0, 1.0, NULL, NULL, &c), AO_EXIT_FAIL);
    assert_non_null(strstr(c.text[1], "rank 0 failed: exited with code 9"));
    capture_free(&c);
}

/* Ctrl-C once both ranks say they are ready (their stop handler is in):
 * ordered by their output, not by a timer, so a loaded machine cannot send it
 * early. The ranks' lines land in the capture file behind fd 1. */
static void *sigint_when_ready(void *arg)
{
    (void)arg;
    sigset_t all; /* the spawner takes SIGINT through its own mask: never this thread */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    struct timespec tick = {0, 10000000L};
    char buf[8192];
    for (int i = 0; i < 12000; i++) { /* 120 s: a guard against a hang only */
        ssize_t n = pread(1, buf, sizeof buf - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            if (strstr(buf, "[rank 0] ready\n") && strstr(buf, "[rank 1] ready\n")) {
                kill(getpid(), SIGINT);
                return NULL;
            }
        }
        nanosleep(&tick, NULL);
    }
    return NULL;
}

static void test_spawn_sigint_forwarded(void **state)
{
    pthread_t watcher;
    assert_int_equal(pthread_create(&watcher, NULL, sigint_when_ready, NULL), 0);
    struct capture c;
    int rc = spawn_child("stop", 2, 1, 1.0, NULL, NULL, &c);
    pthread_join(watcher, NULL);
    if (rc != 0) fail_msg("rc %d, stderr: %s", rc, c.text[1]);
    assert_non_null(strstr(c.text[0], "[rank 0] stopped=1\n"));
    assert_non_null(strstr(c.text[0], "[rank 1] stopped=1\n"));
    assert_non_null(strstr(c.text[1], "interrupted"));
    capture_free(&c);
}

static void test_spawn_output(void **state)
{
    struct capture c;
    assert_int_equal(spawn_child("output", 2, 0, 1.0, NULL, NULL, &c), 0);
    static const char want_out[] = "[rank 0] partial\n[rank 0] a\0b\n[rank 0] last\n";
    assert_int_equal(c.len[0], sizeof want_out - 1);
    assert_memory_equal(c.text[0], want_out, c.len[0]);
    assert_non_null(strstr(c.text[1], "[rank 0] rank0 err\n"));
    assert_non_null(strstr(c.text[1], "[rank 1] rank1 err\n"));
    capture_free(&c);
    assert_int_equal(spawn_child("output", 2, 1, 1.0, NULL, NULL, &c), 0);
    /* memmem: rank 0's output holds a NUL byte. */
    assert_non_null(memmem(c.text[0], c.len[0], "[rank 1] hidden\n", 16));
    capture_free(&c);
}

static void test_spawn_extra_env(void **state)
{
    char *extra[] = {"AORTA_TEST_EXTRA=yes", NULL};
    struct capture c;
    assert_int_equal(spawn_child("env", 2, 0, 1.0, extra, NULL, &c), 0);
    assert_null(getenv("AORTA_TEST_EXTRA"));
    assert_null(getenv("AORTA_RANK"));
    capture_free(&c);
    /* Without it the ranks see no such variable, and say so by failing. */
    assert_int_equal(spawn_child("env", 2, 0, 1.0, NULL, NULL, &c), AO_EXIT_FAIL);
    assert_non_null(strstr(c.text[1], "exited with code 4"));
    capture_free(&c);
}

static void test_spawn_comm_id(void **state)
{
    if (!id_backend()) skip();
    struct capture c;
    assert_int_equal(spawn_child("commid", 2, 1, 1.0, NULL, id_backend(), &c), 0);
    const char *a = strstr(c.text[0], "[rank 0] id="), *b = strstr(c.text[0], "[rank 1] id=");
    assert_non_null(a);
    assert_non_null(b);
    assert_memory_equal(a + 12, b + 12, 2 * AO_COMM_ID_BYTES + 1);
    capture_free(&c);
}

static void test_spawn_bad_nproc(void **state)
{
    struct capture c;
    assert_int_equal(spawn_child("ok", 0, 0, 1.0, NULL, NULL, &c), AO_EXIT_USAGE);
    assert_non_null(strstr(c.text[1], "--nproc"));
    capture_free(&c);
}

/* ---- bootstrap ----------------------------------------------------------------- */

static void pattern_id(ao_comm_id *id)
{
    for (int i = 0; i < AO_COMM_ID_BYTES; i++) id->bytes[i] = (unsigned char)(i * 7 + 3);
}

static void test_bootstrap_env(void **state)
{
    ao_comm_id want, got;
    pattern_id(&want);
    char hex[2 * AO_COMM_ID_BYTES + 1];
    ao_comm_id_to_hex(&want, hex);
    setenv("AORTA_COMM_ID", hex, 1);
    ao_rank_info ri = {1, 2, 1, 2, 0};
    assert_int_equal(ao_launch_bootstrap_id(&ri, "mpi", NULL, 1.0, &got), 0);
    assert_memory_equal(got.bytes, want.bytes, AO_COMM_ID_BYTES);

    setenv("AORTA_COMM_ID", "zz", 1);
    struct capture c;
    capture_begin(&c);
    int rc = ao_launch_bootstrap_id(&ri, "mpi", NULL, 1.0, &got);
    capture_end(&c);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(c.text[1], "AORTA_COMM_ID"));
    capture_free(&c);
}

static char *temp_path(const char *name)
{
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    return ao_asprintf("%s/aorta-test-launch-%d-%s", dir, (int)getpid(), name);
}

static void test_bootstrap_rdzv_two_processes(void **state)
{
    const char *backend = id_backend();
    if (!backend) skip();
    char *path = temp_path("rdzv");
    unlink(path);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* rank 1: sends back the id it read */
        close(fds[0]);
        ao_rank_info ri = {1, 2, 1, 2, 0};
        ao_comm_id id;
        memset(&id, 0xa5, sizeof id);
        int rc = ao_launch_bootstrap_id(&ri, backend, path, 10.0, &id);
        ssize_t w = write(fds[1], id.bytes, sizeof id.bytes);
        _exit(rc == 0 && w == (ssize_t)sizeof id.bytes ? 0 : 1);
    }
    close(fds[1]);
    sleep_s(0.2); /* rank 1 is polling by now */
    ao_rank_info ri = {0, 2, 0, 2, 0};
    ao_comm_id id, got;
    assert_int_equal(ao_launch_bootstrap_id(&ri, backend, path, 10.0, &id), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(read(fds[0], got.bytes, sizeof got.bytes), (ssize_t)sizeof got.bytes);
    close(fds[0]);
    assert_memory_equal(got.bytes, id.bytes, AO_COMM_ID_BYTES);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 2 * AO_COMM_ID_BYTES + 1);
    char *tmp = ao_asprintf("%s.tmp.%d", path, (int)getpid());
    assert_int_not_equal(access(tmp, F_OK), 0); /* renamed away */
    free(tmp);
    unlink(path);
    free(path);
}

static void test_bootstrap_rdzv_reads_id(void **state)
{
    char *path = temp_path("rdzv-read");
    ao_comm_id want, got;
    pattern_id(&want);
    char hex[2 * AO_COMM_ID_BYTES + 1];
    ao_comm_id_to_hex(&want, hex);
    FILE *f = fopen(path, "w");
    fprintf(f, "%s\n", hex);
    fclose(f);
    ao_rank_info ri = {3, 4, 1, 2, 1};
    assert_int_equal(ao_launch_bootstrap_id(&ri, "mpi", path, 1.0, &got), 0);
    assert_memory_equal(got.bytes, want.bytes, AO_COMM_ID_BYTES);

    /* The right size but not an id. */
    f = fopen(path, "w");
    for (int i = 0; i < 2 * AO_COMM_ID_BYTES; i++) fputc('g', f);
    fputc('\n', f);
    fclose(f);
    struct capture c;
    capture_begin(&c);
    int rc = ao_launch_bootstrap_id(&ri, "mpi", path, 1.0, &got);
    capture_end(&c);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(c.text[1], "does not hold a comm id"));
    capture_free(&c);
    unlink(path);
    free(path);
}

static void test_bootstrap_rdzv_timeout(void **state)
{
    char *path = temp_path("never");
    unlink(path);
    ao_rank_info ri = {3, 4, 1, 2, 1};
    ao_comm_id id;
    struct capture c;
    double t0 = now_s();
    capture_begin(&c);
    int rc = ao_launch_bootstrap_id(&ri, "mpi", path, 0.5, &id);
    capture_end(&c);
    double took = now_s() - t0;
    assert_int_equal(rc, -1);
    char *want = ao_asprintf("aorta: error: rank 3: no rendezvous file %s after 0.5 s (rank 0 "
                             "writes it; is it on a shared filesystem?)\n",
                             path);
    assert_string_equal(c.text[1], want);
    if (took < 0.5 || took > 30.0) fail_msg("took %.2f s with a 0.5 s timeout", took);
    free(want);
    capture_free(&c);
    free(path);
}

static void test_bootstrap_no_way(void **state)
{
    ao_comm_id id;
    ao_rank_info one = {0, 1, 0, 1, 0};
    if (id_backend())
        assert_int_equal(ao_launch_bootstrap_id(&one, id_backend(), NULL, 1.0, &id), 0);
    ao_rank_info two = {1, 2, 1, 2, 0};
    struct capture c;
    capture_begin(&c);
    int rc = ao_launch_bootstrap_id(&two, "mpi", NULL, 1.0, &id);
    capture_end(&c);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(c.text[1], "aorta: error: rank 1: "));
    assert_non_null(strstr(c.text[1], "hint: pass --rdzv-file"));
    capture_free(&c);
    /* No comm backend: nothing to share, no error. */
    assert_int_equal(ao_launch_bootstrap_id(&two, NULL, NULL, 1.0, &id), 0);
}

/* ---- the one bring-up (launch/rank.h) ------------------------------------------- */

struct check_log {
    int calls, world, launched, rc;
};

static int record_check(void *ctx, int world_size, int launched)
{
    struct check_log *c = ctx;
    c->calls++;
    c->world = world_size;
    c->launched = launched;
    return c->rc;
}

static void test_launch_ranks_roles(void **state)
{
    (void)state;
    struct check_log c = {0};
    ao_launch_req req = {
        .backend = "cpu", .cpu_nproc = 1, .spawn = 1, .check = record_check, .ctx = &c};
    ao_rank_info ri;
    ao_launch_role role;
    /* No launcher, one rank: the check sees 1 rank, then this process is rank 0 of 1. */
    assert_int_equal(ao_launch_ranks(0, NULL, &req, &ri, &role), 0);
    assert_int_equal(role, AO_ROLE_SOLO);
    assert_int_equal(ri.rank, 0);
    assert_int_equal(ri.world_size, 1);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.world, 1);
    assert_int_equal(c.launched, 0);
    /* A failing check ends the command with its code; nothing runs. */
    c.rc = AO_EXIT_USAGE;
    assert_int_equal(ao_launch_ranks(0, NULL, &req, &ri, &role), AO_EXIT_USAGE);
    assert_int_equal(role, AO_ROLE_DONE);
    /* Under a launcher: its rank and size; a --nproc that disagrees is named and ignored. */
    c.rc = 0;
    set4("AORTA_RANK", "1", "AORTA_WORLD_SIZE", "3", "AORTA_LOCAL_RANK", "1",
         "AORTA_LOCAL_WORLD_SIZE", "3");
    req.nproc = 5;
    struct capture cap;
    capture_begin(&cap);
    int rc = ao_launch_ranks(0, NULL, &req, &ri, &role);
    capture_end(&cap);
    assert_int_equal(rc, 0);
    assert_int_equal(role, AO_ROLE_RANK);
    assert_int_equal(ri.rank, 1);
    assert_int_equal(ri.world_size, 3);
    assert_int_equal(c.world, 3);
    assert_int_equal(c.launched, 1);
    assert_non_null(strstr(cap.text[1], "--nproc 5 ignored: the launcher started 3 ranks"));
    capture_free(&cap);
    /* A broken launcher environment is a usage error before any check. */
    setenv("AORTA_RANK", "7", 1);
    c.calls = 0;
    capture_begin(&cap);
    rc = ao_launch_ranks(0, NULL, &req, &ri, &role);
    capture_end(&cap);
    capture_free(&cap);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_int_equal(role, AO_ROLE_DONE);
    assert_int_equal(c.calls, 0);
}

static void test_rank_open_cpu(void **state)
{
    (void)state;
    ao_rank r;
    ao_rank_info far = {.rank = 5, .world_size = 8, .local_rank = 5, .local_world_size = 8};
    ao_rank_opts o = {.cmd = "test", .backend = "cpu", .ordinal = 3};
    /* An explicit ordinal beyond the devices: a usage error naming --device. */
    struct capture cap;
    capture_begin(&cap);
    int rc = ao_rank_open(&r, &far, &o);
    capture_end(&cap);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_non_null(strstr(cap.text[1], "--device: device 3 does not exist"));
    capture_free(&cap);
    ao_rank_close(&r); /* safe on a half-opened rank */
    /* From the local rank: every cpu rank shares the one device, without a
     * wrap-around warning. */
    o.ordinal = -1;
    capture_begin(&cap);
    rc = ao_rank_open(&r, &far, &o);
    capture_end(&cap);
    assert_int_equal(rc, 0);
    assert_string_equal(cap.text[1], "");
    capture_free(&cap);
    assert_non_null(r.dev);
    assert_int_equal(r.info.ordinal, 0);
    assert_int_equal(r.ri.rank, 5);
    assert_true(r.ndevices >= 1);
    assert_null(r.comm);
    ao_rank_close(&r);
    assert_null(r.dev);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "child") == 0) return child_main(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_detect_none, clean_env),
        cmocka_unit_test_setup_teardown(test_detect_torchrun_inside_slurm, clean_env, clean_env),
        cmocka_unit_test_setup_teardown(test_detect_each_launcher, clean_env, clean_env),
        cmocka_unit_test_setup_teardown(test_detect_inconsistent, clean_env, clean_env),
        cmocka_unit_test(test_device_ordinal),
        cmocka_unit_test(test_prefixer_lines),
        cmocka_unit_test(test_prefixer_long_line),
        cmocka_unit_test(test_mpirun_demux),
        cmocka_unit_test(test_env_merge),
        cmocka_unit_test_setup(test_spawn_ok, clean_env),
        cmocka_unit_test_setup(test_spawn_failure_stops_others, clean_env),
        cmocka_unit_test_setup(test_spawn_sigkill_after_grace, clean_env),
        cmocka_unit_test_setup(test_spawn_signal_named, clean_env),
        cmocka_unit_test_setup(test_spawn_usage_error_kept, clean_env),
        cmocka_unit_test_setup(test_spawn_sigint_forwarded, clean_env),
        cmocka_unit_test_setup(test_spawn_output, clean_env),
        cmocka_unit_test_setup(test_spawn_extra_env, clean_env),
        cmocka_unit_test_setup(test_spawn_comm_id, clean_env),
        cmocka_unit_test_setup(test_spawn_bad_nproc, clean_env),
        cmocka_unit_test_setup_teardown(test_bootstrap_env, clean_env, clean_env),
        cmocka_unit_test_setup(test_bootstrap_rdzv_two_processes, clean_env),
        cmocka_unit_test_setup(test_bootstrap_rdzv_reads_id, clean_env),
        cmocka_unit_test_setup(test_bootstrap_rdzv_timeout, clean_env),
        cmocka_unit_test_setup(test_bootstrap_no_way, clean_env),
        cmocka_unit_test_setup_teardown(test_launch_ranks_roles, clean_env, clean_env),
        cmocka_unit_test_setup_teardown(test_rank_open_cpu, clean_env, clean_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
