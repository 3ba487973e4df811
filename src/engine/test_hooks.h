/* Planted faults for the tests of `aorta diagnose` (tests/e2e/diagnose_cpu.sh,
 * bench/diagnose.sh): test-only, never a tuning knob, read from the
 * environment so that no config key exposes them.
 *
 * AORTA_TEST_SLOW_RANK=R[:MS]: rank R's compute stream sleeps MS ms (default
 * 20) inside its first forward op of every micro-batch, so that one rank is
 * slower on the device and the others wait for it in collectives.
 *
 * AORTA_TEST_LATE_HOST=R[:MS]: rank R's host thread, before it enqueues
 * anything of a train step, waits for its compute stream to finish the
 * previous step (the optimizer: its device runs dry) and sleeps MS ms
 * (default 50): a late host, so that the others, whose next step starts
 * when their optimizer is done, wait for it at the step's first all-gather
 * about MS, and its device's idle time is host wait
 * (tests/e2e/late_host_cpu.sh, bench/diagnose.sh).
 *
 * AORTA_TEST_HANG_RANK=R:STEP: rank R's host thread stops for good before it
 * enqueues anything of train step STEP (as in the metrics records), so that
 * the other ranks' collectives of that step time out (tests/e2e/
 * train_timeout.sh); mpirun's abort ends it. */
#ifndef AORTA_ENGINE_TEST_HOOKS_H
#define AORTA_ENGINE_TEST_HOOKS_H

#include <stdint.h>

#include "runtime/device.h"

/* The delay for this rank (0: none); warns once when set for it. */
int ao_test_slow_rank_ms(int rank);
/* Enqueues the sleep on s. */
void ao_test_slow_enqueue(ao_stream *s, int ms);
/* The delay for this rank's host (0: none); warns once when set for it. */
int ao_test_late_host_ms(int rank);
/* Waits for the compute stream (the previous step's optimizer), then
 * sleeps ms. */
void ao_test_late_host(ao_stream *compute, int ms);
/* The step this rank stops at (-1: none); warns once when set for it. */
int64_t ao_test_hang_rank_step(int rank);
/* Never returns: waits for the signal that ends the job. */
_Noreturn void ao_test_hang(int rank, int64_t step);

#endif
