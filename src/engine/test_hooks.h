/* Planted faults for the tests of `aorta diagnose` (tests/e2e/diagnose_cpu.sh,
 * bench/diagnose.sh): test-only, never a tuning knob, read from the
 * environment so that no config key exposes them.
 *
 * AORTA_TEST_SLOW_RANK=R[:MS]: rank R's compute stream sleeps MS ms (default
 * 20) inside its first forward op of every micro-batch, so that one rank is
 * slower on the device and the others wait for it in collectives.
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
/* The step this rank stops at (-1: none); warns once when set for it. */
int64_t ao_test_hang_rank_step(int rank);
/* Never returns: waits for the signal that ends the job. */
_Noreturn void ao_test_hang(int rank, int64_t step);

#endif
