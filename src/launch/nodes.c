/* Which node a rank is on, and emulated nodes on one host (DESIGN §5).
 *
 * A node is what NCCL calls a host, since NCCL's choice of transport (NVLink
 * and shared memory inside a host, the network between hosts) is what the
 * layout is for: NCCL_HOSTID when it is set, else the host name and the boot
 * id (/proc/sys/kernel/random/boot_id), as NCCL's getHostHash reads them.
 *
 * AORTA_EMULATE_NODES=N splits the job's ranks (on one host) into N nodes
 * of consecutive ranks: each rank gets the local rank and local size a real
 * N-node job would give it, and an NCCL_HOSTID of its node, so that NCCL
 * connects ranks of different nodes through its network transport and ranks
 * of one node through NVLink, as between real hosts. The device stays the
 * one of the rank's slot on the host (its global rank). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "launch/launch.h"

#define EMULATE_VAR "AORTA_EMULATE_NODES"

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

uint64_t ao_launch_node_key(void)
{
    const char *id = getenv("NCCL_HOSTID");
    if (id && *id) return fnv1a(id);
    char name[512] = "";
    if (gethostname(name, sizeof name - 64) != 0) snprintf(name, sizeof name, "unknown");
    name[sizeof name - 65] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f) {
        size_t len = strlen(name);
        if (fgets(name + len, (int)(sizeof name - len), f)) name[strcspn(name, "\n")] = '\0';
        fclose(f);
    }
    return fnv1a(name);
}

int ao_launch_emulated_nodes(void)
{
    const char *v = getenv(EMULATE_VAR);
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    return errno || *end || n < 1 || n > INT_MAX ? -1 : (int)n;
}

int ao_launch_check_emulation(int world_size)
{
    int n = ao_launch_emulated_nodes();
    if (n == 0 || (n > 0 && world_size % n == 0)) return 0;
    ao_error(EMULATE_VAR, "'%s' is not a number of nodes that divides the %d ranks",
             getenv(EMULATE_VAR), world_size);
    return -1;
}

int ao_launch_emulate_nodes(ao_rank_info *ri)
{
    int n = ao_launch_emulated_nodes();
    if (n == 0) return 0;
    if (ao_launch_check_emulation(ri->world_size) != 0) return -1;
    int per = ri->world_size / n;
    ri->local_world_size = per;
    ri->local_rank = ri->rank % per;
    ri->node = ri->rank / per;
    /* NCCL reads it once, when this process's first communicator starts. */
    char host[256] = "";
    const char *base = getenv("NCCL_HOSTID");
    if (!base || !*base) {
        if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "host");
        base = host;
    }
    char id[400];
    snprintf(id, sizeof id, "%.300s.aorta-node%d", base, ri->node);
    if (setenv("NCCL_HOSTID", id, 1) != 0) {
        ao_error(EMULATE_VAR, "cannot set NCCL_HOSTID: %s", strerror(errno));
        return -1;
    }
    if (ri->rank == 0)
        ao_warn("%s=%d: %d nodes of %d ranks emulated on this host (NCCL_HOSTID %s for node %d)",
                EMULATE_VAR, n, n, per, id, ri->node);
    return 0;
}
