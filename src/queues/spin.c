/* The short kernel of the queues workloads: busy for a set time. On the cpu
 * backend the stream's thread spins (a sleep would let another stream's
 * thread take the core, which no GPU kernel does). */
#include <string.h>
#include <time.h>

#include "queues/internal.h"

#ifdef AORTA_HAVE_CUDA
void ao_qspin_cuda(ao_stream *s, double us);
#endif

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void spin_host(void *arg)
{
    double us;
    memcpy(&us, arg, sizeof us);
    double until = now_us() + us;
    while (now_us() < until) {
    }
}

void ao_qspin(ao_device *dev, ao_stream *s, double us)
{
#ifdef AORTA_HAVE_CUDA
    if (strcmp(ao_device_backend(dev), "cuda") == 0) {
        ao_qspin_cuda(s, us);
        return;
    }
#else
    (void)dev;
#endif
    ao_launch_host(s, spin_host, &us, sizeof us);
}
