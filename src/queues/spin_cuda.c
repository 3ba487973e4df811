#include "queues/internal.h"
#include "queues/spin_cuda.h"
#include "runtime/device_cuda.h"

static void spin(ao_stream *s, double us)
{
    AO_CUDA_CHECK(ao_queues_spin_launch((unsigned long long)(us * 1e3), ao_cuda_stream(s)));
}

const struct ao_qspin_backend ao_qspin_cuda_backend = {.device_backend = AO_GPU_BACKEND,
                                                       .spin = spin};
