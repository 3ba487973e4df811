/* Watched host waits (DESIGN §4): every place where a rank's host thread
 * blocks (communicator init, a library's enqueue call, device
 * synchronisation, the data loader, the one-iteration-late readback) is
 * bracketed by ao_wait_begin / ao_wait_end. A monitor thread that never calls
 * into the device checks them: a wait that made no progress for the
 * configured timeout (distributed.timeout_s) ends the rank with one message
 * naming the rank, the wait, the step and the stream, then aborts its
 * communicators and exits 1. Collectives still in flight on the device are
 * watched by the collective watchdog (comm/watchdog.c); the monitor also
 * watches that watchdog's own device queries.
 *
 * Waits nest per thread (a collection of timings that reads back scalars):
 * an inner wait that ends counts as progress of the waits around it, and a
 * stalled wait is named by the innermost wait open inside it, which is what
 * the thread is blocked in. */
#ifndef AORTA_COMM_WAIT_H
#define AORTA_COMM_WAIT_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "runtime/device.h"

/* This process's rank and the timeout of its host waits (0: unwatched);
 * starts the monitor thread. Called by the rank bring-up (launch/rank.h)
 * before anything can block; again to change the timeout. */
void ao_wait_configure(int rank, double timeout_s);
/* Stops the monitor thread (the rank's close); waits begun later are not
 * watched. */
void ao_wait_shutdown(void);

/* Begin a watched wait: `what` names it in words ("device synchronisation",
 * "data loader"), `s` the stream it waits on (NULL: none), `hint` what to do
 * about it (NULL: the generic one); static strings. Returns a token for
 * ao_wait_end, -1 when unwatched (then ao_wait_end(-1) does nothing). */
int ao_wait_begin(const char *what, ao_stream *s, const char *hint);
/* A wait for the device (a stream or event synchronisation): while a
 * collective is in flight the collective watchdog names what hangs, since
 * its message tells which rank has not reached the op. `step` names the step
 * the wait is for (AO_WAIT_STEP_NOW: the current one, ao_comm_step). */
int ao_wait_begin_device(const char *what, ao_stream *s, const char *hint, int64_t step);
#define AO_WAIT_STEP_NOW INT64_MIN
/* The host inside a collective's enqueue call: named as the collective
 * watchdog names the op (its number on its communicator, bytes, stream);
 * left, like a device wait, to collectives already in flight. */
int ao_wait_begin_coll(ao_coll op, uint64_t seq, size_t bytes, ao_stream *s);
void ao_wait_end(int token);

/* Watched forms of the device API's blocking calls. */
void ao_wait_stream_sync(ao_stream *s, const char *what);
void ao_wait_event_sync(ao_event *e, ao_stream *s, const char *what, int64_t step);

/* ---- planted hangs, for the watchdog's tests ---------------------------------
 * AORTA_TEST_HANG=WHERE:RANK[:STEP] (test-only, read from the environment so
 * that no config key exposes it; DESIGN §4 lists the places): rank RANK
 * blocks for good at WHERE: the first time it gets there in train step STEP
 * (the process-wide step of ao_comm_step, -1 at start), or the first time at
 * all when STEP is left out. */
/* Whether the hang is planted here; warns once when it is. */
int ao_test_hang_at(const char *where, int rank, int64_t step);
/* Blocks the calling thread until the process ends. */
_Noreturn void ao_test_block(const char *where);
/* A host function for a stream that never returns: the device's wait that
 * never ends (arg: the place's name, a static string). */
void ao_test_block_fn(void *arg);
/* AORTA_TEST_TIMEOUT_S=T (test-only): from here on this rank's waits and
 * collectives time out after T s instead of distributed.timeout_s. Train
 * applies it at its first step, a planted hang on its rank: a start-up that
 * a loaded test machine makes slow keeps the configured timeout, and the
 * watchdog's tests still end in seconds. */
void ao_test_timeout_apply(void);

#endif
