/* MPI is initialised once per process, by whoever needs it first (the
 * bootstrap broadcast or the MPI comm backend), with MPI_THREAD_MULTIPLE:
 * the cpu backend runs collectives on several stream threads at once. */
#ifndef AORTA_COMM_MPI_INIT_H
#define AORTA_COMM_MPI_INIT_H

/* Initialise MPI if nobody has (MPI_Finalize then runs at exit). Returns 0,
 * or -1 after printing why: the library gives less than
 * MPI_THREAD_MULTIPLE, or MPI was already finalised. Thread-safe. */
int ao_mpi_ensure_init(void);

/* Communicators count themselves in and out. MPI_Finalize runs at exit only
 * when none is open: a rank exiting with communicators still open is
 * failing, and finalizing then could block on a peer, so it is skipped and
 * mpirun reports the failure. */
void ao_mpi_comm_opened(void);
void ao_mpi_comm_closed(void);

#endif
