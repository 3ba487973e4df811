/* Who this process is: rank discovery from the launcher's environment, and
 * the device a local rank uses. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "launch/launch.h"

struct launcher {
    const char *name;
    const char *rank, *size, *local_rank, *local_size;
    const char *marker; /* set too, or the entry does not apply; NULL: rank alone */
};

/* In order of precedence: the launchers that start processes inside another
 * one's allocation first, since their ranks inherit the outer variables: our
 * own spawner, then torchrun's workers (TORCHELASTIC_RUN_ID is set in them
 * alone, not in its agent), whose SLURM_PROCID or OMPI_* are their agent's;
 * the generic RANK/WORLD_SIZE names last. */
static const struct launcher launchers[] = {
    {"aorta", "AORTA_RANK", "AORTA_WORLD_SIZE", "AORTA_LOCAL_RANK", "AORTA_LOCAL_WORLD_SIZE", NULL},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", NULL},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", NULL},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", NULL},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", NULL},
};

/* A non-negative int, the whole string. */
static int parse_count(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

static int read_var(const struct launcher *l, const char *name, int *out)
{
    const char *s = getenv(name);
    if (!s) {
        ao_error(name, "not set, but %s is: the %s launcher sets both", l->rank, l->name);
        return -1;
    }
    if (parse_count(s, out) != 0) {
        ao_error(name, "'%s' is not a non-negative integer", s);
        return -1;
    }
    return 0;
}

/* Slurm sets SLURM_NTASKS_PER_NODE only with --ntasks-per-node; otherwise the
 * tasks on this node are in SLURM_TASKS_PER_NODE ("2(x3),1": 2 on each of the
 * first 3 nodes, 1 on the 4th) at SLURM_NODEID. */
static int slurm_local_size(const struct launcher *l, int *out)
{
    if (getenv("SLURM_NTASKS_PER_NODE")) return read_var(l, "SLURM_NTASKS_PER_NODE", out);
    const char *spec = getenv("SLURM_TASKS_PER_NODE");
    int node;
    if (!spec) {
        ao_error("SLURM_TASKS_PER_NODE", "not set, nor SLURM_NTASKS_PER_NODE: cannot tell how "
                                         "many ranks share this node");
        return -1;
    }
    if (read_var(l, "SLURM_NODEID", &node) != 0) return -1;
    const char *p = spec;
    while (*p) {
        char *end;
        long tasks = strtol(p, &end, 10), repeat = 1;
        if (end == p || tasks < 1 || tasks > INT_MAX) break;
        p = end;
        if (strncmp(p, "(x", 2) == 0) {
            repeat = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || repeat < 1) break;
            p = end + 1;
        }
        if (node < repeat) {
            *out = (int)tasks;
            return 0;
        }
        node -= (int)repeat;
        if (*p == ',')
            p++;
        else if (*p)
            break;
    }
    ao_error("SLURM_TASKS_PER_NODE", "cannot find node %s in '%s'", getenv("SLURM_NODEID"), spec);
    return -1;
}

int ao_launch_detect(ao_rank_info *ri, const char **launcher)
{
    *ri = (ao_rank_info){0, 1, 0, 1, 0};
    if (launcher) *launcher = "none";
    const struct launcher *l = NULL;
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0] && !l; i++)
        if (getenv(launchers[i].rank) && (!launchers[i].marker || getenv(launchers[i].marker)))
            l = &launchers[i];
    if (!l) return 0;

    ao_rank_info r;
    if (read_var(l, l->rank, &r.rank) || read_var(l, l->size, &r.world_size) ||
        read_var(l, l->local_rank, &r.local_rank))
        return -1;
    if (strcmp(l->name, "slurm") == 0 ? slurm_local_size(l, &r.local_world_size)
                                      : read_var(l, l->local_size, &r.local_world_size))
        return -1;
    if (r.world_size < 1) {
        ao_error(l->size, "%d: a job has at least 1 rank", r.world_size);
        return -1;
    }
    if (r.rank >= r.world_size) {
        ao_error(l->rank, "%d is not below %s=%d", r.rank, l->size, r.world_size);
        return -1;
    }
    if (r.local_world_size < 1 || r.local_world_size > r.world_size) {
        ao_error(l->local_size, "%d is not between 1 and %s=%d", r.local_world_size, l->size,
                 r.world_size);
        return -1;
    }
    if (r.local_rank >= r.local_world_size) {
        ao_error(l->local_rank, "%d is not below the ranks on this node (%d)", r.local_rank,
                 r.local_world_size);
        return -1;
    }
    r.node = r.rank / r.local_world_size;
    *ri = r;
    if (launcher) *launcher = l->name;
    return 1;
}

int ao_launch_device_ordinal(int local_rank, int ndevices)
{
    if (ndevices <= 0) {
        ao_error("device", "local rank %d: no device is visible", local_rank);
        return -1;
    }
    int ordinal = local_rank % ndevices;
    if (local_rank >= ndevices)
        ao_warn("local rank %d: only %d devices are visible; it shares device %d with local rank "
                "%d",
                local_rank, ndevices, ordinal, ordinal);
    return ordinal;
}
