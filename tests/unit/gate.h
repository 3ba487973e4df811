/* A gate for ordering tests without wall-clock thresholds: a stream blocks on
 * it (gate_wait as a host closure) until the test opens it. A call that must
 * not wait for the stream is proven not to by returning while the gate is
 * still shut; should it wait, the gate gives up after 30 s and says so
 * (timed_out), so the test fails instead of hanging. */
#ifndef AORTA_TESTS_GATE_H
#define AORTA_TESTS_GATE_H

#include <stdatomic.h>
#include <time.h>

struct gate {
    atomic_int open;
    atomic_int timed_out;
};

/* Host closure: arg is a struct gate ** (ao_launch_host copies the pointer). */
static void gate_wait(void *arg)
{
    struct gate *g = *(struct gate **)arg;
    struct timespec ms = {0, 1000000L};
    for (int i = 0; i < 30000 && !atomic_load(&g->open); i++) nanosleep(&ms, NULL);
    if (!atomic_load(&g->open)) atomic_store(&g->timed_out, 1);
}

static void gate_open(struct gate *g)
{
    atomic_store(&g->open, 1);
}

#endif
