/* MPI is initialised once per process, by whoever needs it first (the
 * bootstrap broadcast or the MPI comm backend), with MPI_THREAD_MULTIPLE:
 * the cpu backend runs collectives on several stream threads at once. */
#ifndef AORTA_COMM_MPI_INIT_H
#define AORTA_COMM_MPI_INIT_H

/* Initialise MPI if nobody has (MPI_Finalize then runs at exit). Returns 0,
 * or -1 after printing why: the library gives less than
 * MPI_THREAD_MULTIPLE, or MPI was already finalised. Thread-safe. */
int ao_mpi_ensure_init(void);

#endif
