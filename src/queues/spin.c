/* The short kernel of the queues workloads: busy for a set time. On the cpu
 * backend the stream's thread spins (a sleep would let another stream's
 * thread take the core, which no GPU kernel does). */
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "queues/internal.h"
#include "runtime/backend_table.h"

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

static void spin_cpu(ao_stream *s, double us)
{
    ao_launch_host(s, spin_host, &us, sizeof us);
}

const struct ao_qspin_backend ao_qspin_cpu_backend = {.device_backend = "cpu", .spin = spin_cpu};

const struct ao_qspin_backend *ao_qspin_for(ao_device *dev)
{
    const struct ao_qspin_backend *b = AO_BACKEND_FIND(ao_qspin, dev);
    if (!b) ao_error("queues", "no spin kernel for the %s backend", ao_device_backend(dev));
    return b;
}
