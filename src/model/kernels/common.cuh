/* What every kernel file of the model (src/model/kernels/, one file per op
 * family) shares: launch plumbing, warp and block reductions, and the run
 * length of the row-walking kernels. Each .cu file includes it (or
 * dtype.cuh / dropout.cuh, which include it) first; everything here is in
 * an unnamed namespace, so each file compiles its own copy.
 *
 * The kernels' contract is in kernels_cuda.h, the math in ops_ref.c (each
 * kernel names the reference function it mirrors).
 *
 * Reductions accumulate in double (as the reference): softmax rows are one
 * warp each, layernorm rows one block each (a warp each where they are not
 * float4-aligned), column sums are split over row chunks and combined by a
 * second pass. Every reduction keeps a fixed order that depends
 * only on the shape, never on the device. The hot element-wise kernels move
 * float4s when every pointer is 16-byte aligned (cudaMalloc'd buffers and
 * row offsets that are multiples of 4 floats) and fall back to scalars
 * otherwise; the per-element math is the same either way. */
#ifndef AORTA_MODEL_KERNELS_COMMON_CUH
#define AORTA_MODEL_KERNELS_COMMON_CUH

#include <math.h>
#include <stdint.h>

#define AO_GPU_KERNELS_ONLY
#include "model/kernels_cuda.h"
#include "model/ops_ref.h"
#include "model/sizes.h"

/* A "warp" here is AO_LANES = 32 lanes: a CUDA warp, half of a 64-lane AMD
 * wavefront (gfx90a, gfx942). Every shuffle goes through these macros, which
 * on HIP pass the width 32, so each half of a wavefront exchanges only
 * within itself and reduces its own row, whatever the hardware's width
 * (tests/e2e/gpu_lanes.sh keeps raw shuffles, ballots and warpSize out of
 * the kernels). A CUDA warp's 32 lanes are the full mask. AO_LDCG: a load
 * of what other blocks wrote, after a __threadfence (which on AMD also
 * invalidates the CU's L1, so a plain load sees it). */
#define AO_LANES 32
#if defined(AO_GPU_HIP)
#include <hip/hip_fp16.h>
#define AO_SHFL_XOR(v, o) __shfl_xor((v), (o), AO_LANES)
#define AO_SHFL(v, src)   __shfl((v), (src), AO_LANES)
#define AO_LDCG(p)        (*(p))
#else
#include <cuda_fp16.h>
#define AO_SHFL_XOR(v, o) __shfl_xor_sync(0xffffffffu, (v), (o))
#define AO_SHFL(v, src)   __shfl_sync(0xffffffffu, (v), (src))
#define AO_LDCG(p)        __ldcg(p)
#endif

/* ao_cuda_set_dependent_launch's switch (launch.cu), read by launch(). */
namespace ao_kernels
{
extern int dependent_launch;
}

namespace
{

constexpr int kThreads = 256;
constexpr int kMaxGrid = 65535;   /* grid.y bound; loops cover more rows */
constexpr int kElemBlocks = 4096; /* grid-stride element-wise kernels */
constexpr int kWarpsPerBlock = kThreads / AO_LANES;

/* Programmatic dependent launch (sm_90): a kernel launched through launch()
 * may be scheduled while the kernel before it on its stream still runs, and
 * waits at its first statement (pdl_wait) until that kernel has finished and
 * its writes are visible. It saves the device's latency between two kernels
 * of one stream (~2-3 us each on an H200 under a kernel trace,
 * bench/RESULTS.md): idle time in a small step, and time an op's event pair
 * spans beyond its kernels. Every kernel here waits first, so a kernel
 * never sees an older kernel's output unfinished. After anything that is not
 * a kernel (an event record, a memset, a wait) a launch is ordered as usual.
 * HIP launches plainly. */
__device__ __forceinline__ void pdl_wait()
{
#if !defined(AO_GPU_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            Args... args)
{
#if defined(AO_GPU_HIP)
    kernel<<<grid, block, smem, stream>>>(args...);
#else
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = ao_kernels::dependent_launch;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    /* an error is left for the caller's cudaGetLastError, as a <<<>>> launch's */
    (void)cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
#endif
}

/* The current device's SM count, for launches sized to the machine. */
cudaError_t device_sms(int *sms)
{
    int dev = 0;
    *sms = 0;
    const cudaError_t e = cudaGetDevice(&dev);
    return e == cudaSuccess ? cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev) : e;
}

unsigned elem_blocks(size_t n, size_t per_thread = 1)
{
    size_t items = (n + per_thread - 1) / per_thread;
    size_t b = (items + kThreads - 1) / kThreads;
    if (b < 1) b = 1;
    return (unsigned)(b < (size_t)kElemBlocks ? b : (size_t)kElemBlocks);
}

unsigned row_warp_blocks(int rows)
{
    return (unsigned)((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

unsigned grid_y(size_t rows)
{
    return (unsigned)(rows < (size_t)kMaxGrid ? rows : (size_t)kMaxGrid);
}

__host__ __device__ bool aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

bool aligned8(const void *p)
{
    return ((uintptr_t)p & 7u) == 0;
}
/* 2^x on the special-function unit alone: results under 2^-126 flush to 0
 * (exp2f's denormal fix-ups cost ~3 instructions an element, where the
 * flash tile loops and GELU are bound by instruction issue). */
__device__ __forceinline__ float fast_exp2(float x)
{
#if defined(AO_GPU_HIP)
    return exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#endif
}

/* ---- reductions: fixed shapes, hence fixed orders ------------------------ */

__device__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += AO_SHFL_XOR(v, o);
    return v;
}

__device__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, AO_SHFL_XOR(v, o));
    return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); the result
 * is valid in thread 0. */
__device__ double block_sum(double v)
{
    __shared__ double warp_sums[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0.0;
        v = warp_sum(v);
    }
    __syncthreads(); /* warp_sums may be reused by a later call */
    return v;
}

/* Consecutive work items one worker takes in turn (softmax rows a warp,
 * dropout tiles a block), so that a fused dropout derives a row's stream
 * (1 or 2 Philox calls) once per run instead of once an item, against 4
 * Philox blocks a lane an item: kRun where the launch keeps kMinRunBlocks
 * blocks, else 1: in launches of a few hundred blocks (the default config's)
 * runs of 4 leave SMs idle (bench/RESULTS.md). */
constexpr int kRun = 4;
constexpr size_t kMinRunBlocks = 2048;

int run_length(size_t blocks_of_one)
{
    return blocks_of_one >= (size_t)kRun * kMinRunBlocks ? kRun : 1;
}

} // namespace

#endif
