/* Launchers of the CUDA device backend's own kernels (kernels_cuda.cu). They
 * return the launch's error; the caller checks it with AO_CUDA_CHECK. */
#ifndef AORTA_RUNTIME_KERNELS_CUDA_H
#define AORTA_RUNTIME_KERNELS_CUDA_H

#include <stddef.h>

#include "runtime/gpu_compat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies `bytes` from src to dst with SM threads (16-byte vector loads and
 * stores, grid-stride) on `stream`. Any sizes and alignments: when dst and src
 * share their offset modulo 16 the unaligned head and tail go bytewise and the
 * body by vectors; when they do not, the whole copy goes bytewise (slow, but
 * correct). `sm_count` bounds the grid (4 blocks per SM). */
cudaError_t ao_cuda_copy_sm(void *dst, const void *src, size_t bytes, int sm_count,
                            cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
