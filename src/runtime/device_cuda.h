/* What other GPU-side backend code (the NCCL comm backend, kernels) needs from
 * the CUDA device backend: the raw stream and device ordinal behind the opaque
 * device API handles, and the one checked-call path. Includes gpu_compat.h,
 * so only backend files (_cuda.c, _nccl.c, .cu) may include this header. */
#ifndef AORTA_RUNTIME_DEVICE_CUDA_H
#define AORTA_RUNTIME_DEVICE_CUDA_H

#include "runtime/device.h"
#include "runtime/gpu_compat.h"

/* ao_fatal(1) naming the call, file:line and the runtime's error string when
 * `err` is not cudaSuccess. */
void ao_cuda_check(cudaError_t err, const char *call, const char *file, int line);
#define AO_CUDA_CHECK(call) ao_cuda_check((call), #call, __FILE__, __LINE__)

/* Whether `dev` belongs to this backend (a comm backend checks what it gets). */
int ao_cuda_is_device(ao_device *dev);
int ao_cuda_ordinal(ao_device *dev);
cudaStream_t ao_cuda_stream(ao_stream *s);
ao_device *ao_cuda_stream_device(ao_stream *s);

#endif
