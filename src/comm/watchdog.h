/* The collective watchdog (internal to comm/): comm.c registers every
 * communicator with a timeout and every op enqueued on it; one thread per
 * process polls the oldest pending op of each communicator (and the backend's
 * async-error check) and, when one hangs, names it, aborts every communicator
 * and exits 1. */
#ifndef AORTA_COMM_WATCHDOG_H
#define AORTA_COMM_WATCHDOG_H

#include <stddef.h>

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

/* How often the thread polls, in milliseconds. */
#define AO_WATCH_POLL_MS 100

#endif
