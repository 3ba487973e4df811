/* Every rank gets the same comm id: from the spawner's environment, by MPI
 * broadcast, or through a rendezvous file on a shared filesystem.
 *
 * The rendezvous file must not exist from an earlier run (a rank could read
 * the old id before rank 0 replaces it): give each run its own path, e.g. one
 * with the job id in it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/plugin.h"
#include "launch/internal.h"

#define HEX_LEN    (2 * AO_COMM_ID_BYTES)
#define RDZV_BYTES (HEX_LEN + 1) /* the hex digits and a newline */
#define POLL_NS    50000000L

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Rank 0: write to a private name, then rename: readers see all or nothing. */
static int rdzv_publish(const char *path, const ao_comm_id *id)
{
    char text[RDZV_BYTES + 1];
    ao_comm_id_to_hex(id, text);
    text[HEX_LEN] = '\n';
    char *tmp = ao_asprintf("%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = fd >= 0 && write_all(fd, text, RDZV_BYTES) == 0;
    int e = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        ao_error("--rdzv-file", "rank 0 cannot write %s: %s", path, strerror(e));
        if (fd >= 0) unlink(tmp);
    }
    free(tmp);
    return ok ? 0 : -1;
}

/* Others: poll until the file is there and whole, or time out. */
static int rdzv_wait(const char *path, int rank, double timeout_s, ao_comm_id *id)
{
    double deadline = now_s() + timeout_s;
    for (;;) {
        struct stat st;
        if (stat(path, &st) == 0 && st.st_size == RDZV_BYTES) break;
        if (now_s() >= deadline) {
            char who[32];
            snprintf(who, sizeof who, "rank %d", rank);
            ao_error(who,
                     "no rendezvous file %s after %g s (rank 0 writes it; is it on a shared "
                     "filesystem?)",
                     path, timeout_s);
            return -1;
        }
        nanosleep(&(struct timespec){0, POLL_NS}, NULL);
    }
    char text[RDZV_BYTES + 1];
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(text, 1, RDZV_BYTES, f) : 0;
    if (f) fclose(f);
    text[HEX_LEN] = '\0';
    if (n != RDZV_BYTES || ao_comm_id_from_hex(text, id) != 0) {
        ao_error("--rdzv-file", "%s does not hold a comm id (%d hex digits and a newline)", path,
                 HEX_LEN);
        return -1;
    }
    return 0;
}

static int under_mpi_launcher(void)
{
    ao_rank_info ri;
    const char *launcher;
    if (ao_launch_detect(&ri, &launcher) != 1) return 0;
    return strcmp(launcher, "openmpi") == 0 || strcmp(launcher, "pmi") == 0 ||
           strcmp(launcher, "slurm") == 0;
}

int ao_launch_bootstrap_id(const ao_rank_info *ri, const char *comm_backend, const char *rdzv_file,
                           double timeout_s, ao_comm_id *id)
{
    memset(id, 0, sizeof *id);
    const char *hex = getenv("AORTA_COMM_ID");
    if (hex) {
        if (ao_comm_id_from_hex(hex, id) != 0) {
            ao_error("AORTA_COMM_ID", "not a comm id (%d hex digits)", HEX_LEN);
            return -1;
        }
        return 0;
    }
    if (!comm_backend) return 0; /* nothing to share */
#ifdef AORTA_HAVE_MPI
    if (under_mpi_launcher()) {
        const struct ao_launch_mpi *mpi = ao_plugin_sym("mpi", "ao_launch_mpi", 0);
        return mpi ? mpi->bootstrap(ri, comm_backend, id) : -1;
    }
#else
    (void)under_mpi_launcher;
#endif
    if (rdzv_file) {
        if (ri->rank != 0) return rdzv_wait(rdzv_file, ri->rank, timeout_s, id);
        if (ao_comm_make_id(comm_backend, id) != 0) return -1;
        return rdzv_publish(rdzv_file, id);
    }
    if (ri->world_size == 1) return ao_comm_make_id(comm_backend, id);
    char who[32];
    snprintf(who, sizeof who, "rank %d", ri->rank);
    ao_error(who, "no way to get the comm id from rank 0 (%d ranks, not started by aorta)",
             ri->world_size);
    ao_hint("pass --rdzv-file PATH on a filesystem all ranks share, or use an aorta built with "
            "MPI under mpirun or srun");
    return -1;
}
