#define AO_GPU_KERNELS_ONLY
#include "queues/spin_cuda.h"

/* %globaltimer counts nanoseconds on every SM alike, so the kernel lasts the
 * same wall time whatever clock the SM runs at. */
static __device__ unsigned long long global_ns()
{
#ifdef AO_GPU_HIP
    /* HIP's constant-rate counter: 100 MHz on MI200/MI300 (the rate is
     * hipDeviceAttributeWallClockRate; not measured here). */
    return wall_clock64() * 10ull;
#else
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#endif
}

__global__ void queues_spin_kernel(unsigned long long ns)
{
    unsigned long long until = global_ns() + ns;
    while (global_ns() < until) {
    }
}

extern "C" cudaError_t ao_queues_spin_launch(unsigned long long ns, cudaStream_t stream)
{
    queues_spin_kernel<<<1, 32, 0, stream>>>(ns);
    return cudaGetLastError();
}
