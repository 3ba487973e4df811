/* The spin kernel's launcher (spin_cuda.cu). */
#ifndef AORTA_QUEUES_SPIN_CUDA_H
#define AORTA_QUEUES_SPIN_CUDA_H

#include "runtime/gpu_compat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One block of 32 threads busy for `ns` nanoseconds of the GPU's global
 * timer on `stream`. */
cudaError_t ao_queues_spin_launch(unsigned long long ns, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
