/* Planted faults for tests (test_hooks.h). */
#include "engine/test_hooks.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"

/* R[:MS] of variable `name` for this rank: MS (def when absent, at most
 * 10 s), or 0 when it names another rank or is unset. */
static long rank_ms(const char *name, int rank, long def)
{
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    long r = strtol(v, &end, 10);
    long ms = *end == ':' ? strtol(end + 1, NULL, 10) : def;
    if (r != rank || ms <= 0) return 0;
    return ms > 10000 ? 10000 : ms;
}

int ao_test_slow_rank_ms(int rank)
{
    long ms = rank_ms("AORTA_TEST_SLOW_RANK", rank, 20);
    if (ms)
        ao_warn("AORTA_TEST_SLOW_RANK: rank %d sleeps %ld ms a micro-batch on its compute stream "
                "(a planted fault for tests)",
                rank, ms);
    return (int)ms;
}

int ao_test_late_host_ms(int rank)
{
    long ms = rank_ms("AORTA_TEST_LATE_HOST", rank, 50);
    if (ms)
        ao_warn("AORTA_TEST_LATE_HOST: rank %d's host lets its compute stream run dry and sleeps "
                "%ld ms before each train step (a planted fault for tests)",
                rank, ms);
    return (int)ms;
}

static void sleep_ms(void *arg)
{
    int ms = *(const int *)arg;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

void ao_test_slow_enqueue(ao_stream *s, int ms)
{
    ao_launch_host(s, sleep_ms, &ms, sizeof ms);
}

void ao_test_late_host(ao_stream *compute, int ms)
{
    ao_stream_sync(compute);
    sleep_ms(&ms);
}

int64_t ao_test_hang_rank_step(int rank)
{
    const char *v = getenv("AORTA_TEST_HANG_RANK");
    if (!v || !*v) return -1;
    char *end;
    long r = strtol(v, &end, 10);
    long long step = *end == ':' ? strtoll(end + 1, NULL, 10) : 0;
    if (r != rank || step < 0) return -1;
    ao_warn("AORTA_TEST_HANG_RANK: rank %d stops before train step %lld (a planted fault for "
            "tests)",
            rank, step);
    return step;
}

_Noreturn void ao_test_hang(int rank, int64_t step)
{
    printf("rank %d hangs at step %lld (AORTA_TEST_HANG_RANK)\n", rank, (long long)step);
    fflush(stdout);
    for (;;) pause();
}
