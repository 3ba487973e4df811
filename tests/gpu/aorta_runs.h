/* For the GPU tests that drive the aorta binary ($AORTA; $AORTA_SOURCE_DIR is
 * the repository, ctest sets both): a scratch directory `tmp` for their runs,
 * each run's output in a log there (its tail printed when the run fails), and
 * the directory removed at the end unless a check failed (check.h). */
#ifndef AORTA_TESTS_GPU_AORTA_RUNS_H
#define AORTA_TESTS_GPU_AORTA_RUNS_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"

static const char *aorta, *srcdir;
static char tmp[256];

/* Reads $AORTA and $AORTA_SOURCE_DIR, keeps NVLink multicast off for the
 * ranks (shared machines) and makes tmp ($TMPDIR/aorta_<tag>_XXXXXX).
 * Returns 0, or 1 after printing why. */
static inline int runs_begin(const char *tag)
{
    aorta = getenv("AORTA");
    srcdir = getenv("AORTA_SOURCE_DIR");
    if (!aorta || !srcdir) {
        printf("FAIL: set AORTA (the binary) and AORTA_SOURCE_DIR (the repository); ctest does\n");
        return 1;
    }
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    snprintf(tmp, sizeof tmp, "%s/aorta_%s_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             tag);
    if (!mkdtemp(tmp)) {
        printf("FAIL: cannot create a temporary directory\n");
        return 1;
    }
    return 0;
}

/* Runs `'$AORTA' args` with its output in tmp/NAME.log. Returns its exit
 * status (128 + the signal when killed, -1 when it cannot start), and prints
 * the log's last 30 lines when that is not 0. *secs: its wall time. */
static inline int run_aorta(const char *name, const char *args, double *secs)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s/%s.log' 2>&1", aorta, args, tmp, name);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = system(cmd);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    int rc = st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (rc != 0) {
        printf("---- last lines of %s/%s.log\n", tmp, name);
        fflush(stdout);
        snprintf(cmd, sizeof cmd, "tail -n 30 '%s/%s.log'", tmp, name);
        if (system(cmd) != 0) printf("(cannot show the log)\n");
        printf("----\n");
    }
    fflush(stdout);
    return rc;
}

/* rm -rf tmp when every check passed; otherwise says where the runs are. */
static inline void runs_end(void)
{
    if (check_failures) {
        printf("the runs are kept under %s\n", tmp);
        return;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("(could not remove %s)\n", tmp);
}

#endif
