/* A program for tests/e2e/launch.sh: the launcher's parent and its ranks in
 * one binary, as in aorta (ao_launch_spawn runs /proc/self/exe).
 *
 *   launch_helper spawn BACKEND NPROC ALL MODE   run NPROC ranks of `rank MODE`
 *   launch_helper rank MODE                      one rank:
 *     report  print who it is and the start of the comm id it got (by MPI
 *             broadcast under mpirun, through AORTA_COMM_ID from the spawner)
 *     fail    rank 1 exits 3, the others wait to be stopped (60 s at least;
 *             "never stopped" when they were not)
 *     stop    print "ready", stop on Ctrl-C (the stop handler), print "stopped" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "launch/launch.h"

/* The comm backend whose id the ranks share: "mpi" when built in, else the
 * first, else none. */
static const char *id_backend(void)
{
    for (int i = 0; i < ao_comm_backend_count(); i++)
        if (strcmp(ao_comm_backend_name(i), "mpi") == 0) return "mpi";
    return ao_comm_backend_count() ? ao_comm_backend_name(0) : NULL;
}

static int rank_main(const char *mode)
{
    ao_rank_info ri;
    const char *launcher;
    if (ao_launch_detect(&ri, &launcher) < 0) return AO_EXIT_USAGE;
    ao_launch_install_stop_handler();
    struct timespec tick = {0, 10000000L};
    if (strcmp(mode, "report") == 0) {
        ao_comm_id id;
        if (ao_launch_bootstrap_id(&ri, id_backend(), NULL, 10.0, &id) != 0) return AO_EXIT_FAIL;
        char hex[2 * AO_COMM_ID_BYTES + 1];
        ao_comm_id_to_hex(&id, hex);
        printf("rank %d of %d via %s, local %d/%d, id %.16s\n", ri.rank, ri.world_size, launcher,
               ri.local_rank, ri.local_world_size, hex);
        return AO_EXIT_OK;
    }
    if (strcmp(mode, "fail") == 0) {
        if (ri.rank == 1) return 3;
        for (int i = 0; i < 6000 && !ao_launch_stop_requested(); i++) nanosleep(&tick, NULL);
        if (!ao_launch_stop_requested()) printf("rank %d was never stopped\n", ri.rank);
        return AO_EXIT_OK;
    }
    if (strcmp(mode, "stop") == 0) {
        printf("ready\n");
        fflush(stdout);
        for (int i = 0; i < 6000 && !ao_launch_stop_requested(); i++) nanosleep(&tick, NULL);
        printf("stopped=%d\n", ao_launch_stop_requested());
        return ao_launch_stop_requested() ? AO_EXIT_OK : AO_EXIT_FAIL;
    }
    ao_error("launch_helper", "unknown mode '%s'", mode);
    return AO_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "rank") == 0) return rank_main(argv[2]);
    if (argc == 6 && strcmp(argv[1], "spawn") == 0) {
        char *rank_argv[] = {"rank", argv[5], NULL};
        ao_launch_opts o = {.nproc = atoi(argv[3]),
                            .backend = argv[2],
                            /* made here for the local spawner; broadcast under mpirun */
                            .comm_backend = strcmp(argv[2], "cpu") ? id_backend() : NULL,
                            .all_ranks_output = atoi(argv[4]),
                            .grace_s = 2.0};
        return ao_launch_spawn(2, rank_argv, &o);
    }
    ao_error("launch_helper", "usage: launch_helper spawn BACKEND NPROC ALL MODE | rank MODE");
    return AO_EXIT_USAGE;
}
