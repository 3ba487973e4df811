#include <mpi.h>
#include <pthread.h>
#include <stdlib.h>

#include "comm/mpi_init.h"
#include "core/error.h"

/* MPI itself is process-wide state; the lock keeps two threads from both
 * initialising it. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static void finalize_at_exit(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

static const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:
        return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
        return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
        return "MPI_THREAD_SERIALIZED";
    default:
        return "MPI_THREAD_MULTIPLE";
    }
}

int ao_mpi_ensure_init(void)
{
    pthread_mutex_lock(&init_lock);
    int rc = 0, initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized) {
        ao_error("MPI", "already finalised: it cannot be used again in this process");
        rc = -1;
    } else if (!initialized) {
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
            ao_error("MPI", "MPI_Init_thread failed");
            rc = -1;
        } else {
            atexit(finalize_at_exit);
        }
    } else {
        MPI_Query_thread(&provided);
    }
    if (rc == 0 && provided < MPI_THREAD_MULTIPLE) {
        ao_error("MPI", "the library gives %s, aorta needs MPI_THREAD_MULTIPLE",
                 thread_level_name(provided));
        ao_hint("use an MPI built with thread support (OpenMPI is by default)");
        rc = -1;
    }
    pthread_mutex_unlock(&init_lock);
    return rc;
}
