/* The CUDA device backend's kernels, behind extern "C" launchers. */
#include <stdint.h>

#define AO_GPU_KERNELS_ONLY
#include "runtime/kernels_cuda.h"

namespace
{

constexpr int kThreads = 512;
constexpr int kUnroll = 4; /* vectors in flight per thread: hides load latency */
constexpr int kBlocksPerSm = 4;

/* head bytes at [0, head), nvec 16-byte vectors after them, tail bytes after
 * those; dst + head and src + head are 16-byte aligned whenever nvec > 0. */
__global__ void copy_sm_kernel(unsigned char *__restrict__ dst,
                               const unsigned char *__restrict__ src, size_t head, size_t nvec,
                               size_t tail)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

    for (size_t i = tid; i < head; i += stride) dst[i] = src[i];

    uint4 *__restrict__ vdst = reinterpret_cast<uint4 *>(dst + head);
    const uint4 *__restrict__ vsrc = reinterpret_cast<const uint4 *>(src + head);
    size_t i = tid;
    for (; i + (kUnroll - 1) * stride < nvec; i += kUnroll * stride) {
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) v[u] = vsrc[i + u * stride];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) vdst[i + u * stride] = v[u];
    }
    for (; i < nvec; i += stride) vdst[i] = vsrc[i];

    const size_t tail_at = head + nvec * 16;
    for (size_t j = tid; j < tail; j += stride) dst[tail_at + j] = src[tail_at + j];
}

} // namespace

extern "C" cudaError_t ao_cuda_copy_sm(void *dst, const void *src, size_t bytes, int sm_count,
                                       cudaStream_t stream)
{
    if (bytes == 0) return cudaSuccess;
    const uintptr_t d = reinterpret_cast<uintptr_t>(dst);
    const uintptr_t s = reinterpret_cast<uintptr_t>(src);
    size_t head = bytes, nvec = 0, tail = 0;
    if ((d & 15) == (s & 15)) {
        head = (16 - (d & 15)) & 15;
        if (head > bytes) head = bytes;
        nvec = (bytes - head) / 16;
        tail = bytes - head - nvec * 16;
    }
    /* Enough threads for every vector (or byte) once, no more than the
     * device can keep resident. */
    const size_t items = nvec ? (nvec + kUnroll - 1) / kUnroll : head;
    size_t blocks = (items + kThreads - 1) / kThreads;
    const size_t max_blocks = (size_t)(sm_count > 0 ? sm_count : 1) * kBlocksPerSm;
    if (blocks > max_blocks) blocks = max_blocks;
    if (blocks == 0) blocks = 1;
    copy_sm_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>(
        static_cast<unsigned char *>(dst), static_cast<const unsigned char *>(src), head, nvec,
        tail);
    return cudaGetLastError();
}
