/* The collective watchdog (internal to comm/): comm.c registers every
 * communicator with a timeout and every op enqueued on it; one thread per
 * process polls the oldest pending op of each communicator (and the backend's
 * async-error check) and, when one hangs, names it, aborts every communicator
 * and exits 1. */
#ifndef AORTA_COMM_WATCHDOG_H
#define AORTA_COMM_WATCHDOG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"

struct ao_watch;

/* Start watching `c` (its base's timeout_s, which must be > 0); starts the
 * watchdog thread on first use. */
struct ao_watch *ao_watch_add(ao_comm *c);
/* Register the op just enqueued on c's stream; `mark`: record its completion
 * event now, else at the next ao_watch_mark. */
void ao_watch_op(struct ao_watch *w, ao_coll op, size_t bytes, int mark);
/* Record the completion events of the ops registered unmarked. */
void ao_watch_mark(struct ao_watch *w);
/* Stop watching; stops the thread when it was the last communicator. */
void ao_watch_remove(struct ao_watch *w);
/* Every watched communicator's timeout from now on (ao_test_timeout_apply). */
void ao_watch_set_timeout(double timeout_s);
/* The number the next op registered on w will get (issuing thread only). */
uint64_t ao_watch_next_seq(const struct ao_watch *w);

/* `allgather #12 (step 3) of 4096 bytes on stream "comm0"`: how every message
 * names an op (seq 0: not numbered; step -1: none). */
void ao_watch_name_op(ao_coll op, uint64_t seq, int64_t step, size_t bytes, ao_stream *s, char *buf,
                      size_t n);
/* When the watchdog thread began the device queries it is still inside
 * (CLOCK_MONOTONIC ns), 0 when it is not inside one: wait.c's monitor ends
 * the rank when a query never returns. */
int64_t ao_watch_busy_since(void);
/* Collectives not yet seen complete at the watchdog thread's last poll, over
 * every communicator: while any is, a host wait for the device is left to
 * the collective's own timeout, whose message names the op and the ranks
 * that have not reached it (wait.c). */
size_t ao_watch_pending(void);
/* The end of a rank that hung: prints `aorta: error: WHO: MSG` and the hint,
 * aborts `first` (the hung one, or NULL), then every other watched
 * communicator (with wd's lock held already when `locked`, else taken within
 * a few seconds or not at all) and exits 1. An
 * abort that itself hangs cannot keep the process alive: it exits anyway
 * after AO_WATCH_ABORT_GRACE_S. Only the first caller prints. */
_Noreturn void ao_watch_die(const char *who, const char *msg, const char *hint, int locked,
                            ao_comm *first);
#define AO_WATCH_ABORT_GRACE_S 10

/* How often the thread polls, in milliseconds. */
#define AO_WATCH_POLL_MS 100
/* A condition variable whose timed waits use CLOCK_MONOTONIC, and one poll
 * interval's wait on it (m held): the watchdog's and wait.c's threads. */
void ao_watch_cond_init(pthread_cond_t *c);
void ao_watch_poll_wait(pthread_cond_t *c, pthread_mutex_t *m);

#endif
