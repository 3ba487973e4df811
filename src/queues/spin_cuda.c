#include "queues/spin_cuda.h"
#include "runtime/device_cuda.h"

void ao_qspin_cuda(ao_stream *s, double us);

void ao_qspin_cuda(ao_stream *s, double us)
{
    AO_CUDA_CHECK(ao_queues_spin_launch((unsigned long long)(us * 1e3), ao_cuda_stream(s)));
}
