/* The model's CUDA kernels; the contract is in kernels_cuda.h, the math in
 * ops_ref.c (each kernel names the reference function it mirrors).
 *
 * Reductions accumulate in double (as the reference): softmax rows are one
 * warp each, layernorm rows one block each (a warp each where they are not
 * float4-aligned), column sums are split over row chunks and combined by a
 * second pass. Every reduction keeps a fixed order that depends
 * only on the shape, never on the device. The hot element-wise kernels move
 * float4s when every pointer is 16-byte aligned (cudaMalloc'd buffers and
 * row offsets that are multiples of 4 floats) and fall back to scalars
 * otherwise; the per-element math is the same either way. */
#include <math.h>
#include <stdint.h>

#define AO_GPU_KERNELS_ONLY
#include "model/kernels_cuda.h"
#include "model/ops_ref.h"

/* Shuffles: HIP has no mask argument. Rows here are 32 lanes wide; on a
 * 64-lane AMD wavefront an xor below 32 stays within its half, so each half
 * still reduces its own row. */
#if defined(AO_GPU_HIP)
#include <hip/hip_fp16.h>
#include <hipcub/hipcub.hpp>
namespace cub = hipcub;
#define AO_SHFL_XOR(v, o) __shfl_xor((v), (o))
#define AO_SHFL(v, src)   __shfl((v), (src), 32)
#else
#include <cuda_fp16.h>
#include <cub/device/device_radix_sort.cuh>
#define AO_SHFL_XOR(v, o) __shfl_xor_sync(0xffffffffu, (v), (o))
#define AO_SHFL(v, src)   __shfl_sync(0xffffffffu, (v), (src))
#endif

namespace
{

constexpr int kThreads = 256;
constexpr int kMaxGrid = 65535;   /* grid.y bound; loops cover more rows */
constexpr int kElemBlocks = 4096; /* grid-stride element-wise kernels */
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kColTile = 32;       /* columns per block of a column sum: one warp per row */
constexpr int kColLanes = 8;       /* warps per block, each summing every 8th row of the chunk */
constexpr int kColChunkRows = 256; /* rows one block sums (before the cap below) */

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

int dependent_launch = 1; /* ao_cuda_set_dependent_launch */

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            Args... args)
{
#if defined(AO_GPU_HIP)
    kernel<<<grid, block, smem, stream>>>(args...);
#else
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = dependent_launch;
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

/* ---- column sums (bias and layernorm parameter gradients) ---------------- */

struct sum2 {
    double a, b;
};

/* Column partials of a split column sum, one double per (row chunk, column,
 * output). A static device buffer rather than a launcher argument so the
 * launchers keep their signatures and no call allocates: 2 MiB per device,
 * loaded with the module. The launcher shrinks the number of row chunks so
 * that a call fits. Two column sums must not run at the same time on one
 * device (different streams): the model issues them on its one compute
 * stream, in order. */
constexpr size_t kColPartials = (size_t)1 << 18;
__device__ double column_partials[kColPartials];

/* Per column tile, how many of its row-chunk blocks have written their
 * partials; the last one combines them and resets the count to 0. */
constexpr int kColDoneTiles = 4096;
__device__ unsigned int column_done[kColDoneTiles];

/* Block (kColTile, kColLanes) at (blockIdx.x, blockIdx.y) sums rows
 * [blockIdx.y * chunk, + chunk) of W columns per thread, columns
 * (blockIdx.x * kColTile + tx) * W + l: lane ty takes every kColLanes-th row
 * (a warp reads 32 * W consecutive floats of a row), then a fixed
 * shared-memory tree over ty. With one chunk the block adds straight into
 * out. Otherwise it writes the chunk's partial (output a at
 * column_partials[chunk_index * c + j], output b after all of a's), and the
 * tile's last block to finish (threadFenceReduction's pattern: integer
 * atomics, no float ones) adds the partials in chunk order, so the bits do
 * not depend on which block was last. W = 2 or 4 (wider loads, W independent
 * sums per thread: more bytes in flight) adds every column's terms in the
 * same order as W = 1, so the bits do not depend on W either. One launch per
 * column sum. */
template <class F, int W>
__device__ void column_partials_block(float *out_a, float *out_b, int n, int c, int col0, int chunk,
                                      const F &f, int tile, int part, int parts, int tx, int ty)
{
    __shared__ double sa[kColLanes][kColTile * W + 1], sb[kColLanes][kColTile * W + 1];
    __shared__ bool last;
    const int j = col0 + (tile * kColTile + tx) * W; /* c % W == 0 */
    const int r0 = part * chunk, r1 = min(n, r0 + chunk);
    sum2 acc[W];
#pragma unroll
    for (int l = 0; l < W; l++) acc[l] = sum2{0.0, 0.0};
    if (j < c) {
#pragma unroll 4
        for (int i = r0 + ty; i < r1; i += kColLanes) {
            sum2 v[W];
            f.get(i, j, v);
#pragma unroll
            for (int l = 0; l < W; l++) {
                acc[l].a += v[l].a;
                acc[l].b += v[l].b;
            }
        }
    }
#pragma unroll
    for (int l = 0; l < W; l++) {
        sa[ty][tx * W + l] = acc[l].a;
        sb[ty][tx * W + l] = acc[l].b;
    }
    __syncthreads();
    for (int s = kColLanes / 2; s > 0; s >>= 1) {
        if (ty < s) {
#pragma unroll
            for (int l = 0; l < W; l++) {
                sa[ty][tx * W + l] += sa[ty + s][tx * W + l];
                sb[ty][tx * W + l] += sb[ty + s][tx * W + l];
            }
        }
        __syncthreads();
    }
    if (parts == 1) {
        if (ty == 0 && j < c) {
            for (int l = 0; l < W; l++) {
                out_a[j + l] += (float)sa[0][tx * W + l];
                if (out_b) out_b[j + l] += (float)sb[0][tx * W + l];
            }
        }
        return;
    }
    if (ty == 0 && j < c) {
        for (int l = 0; l < W; l++) {
            column_partials[(size_t)part * c + j + l] = sa[0][tx * W + l];
            if (out_b) column_partials[((size_t)parts + part) * c + j + l] = sb[0][tx * W + l];
        }
    }
    __threadfence(); /* the partials are visible before the count says so */
    __syncthreads();
    if (tx == 0 && ty == 0) last = atomicAdd(&column_done[tile], 1u) == (unsigned)parts - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (ty == 0 && j < c) {
        for (int l = 0; l < W; l++) {
            double a = 0.0, b = 0.0;
            for (int k = 0; k < parts; k++) {
                a += __ldcg(&column_partials[(size_t)k * c + j + l]);
                if (out_b) b += __ldcg(&column_partials[((size_t)parts + k) * c + j + l]);
            }
            out_a[j + l] += (float)a;
            if (out_b) out_b[j + l] += (float)b;
        }
    }
    if (tx == 0 && ty == 0) column_done[tile] = 0;
}

template <class F, int W>
__global__ void column_partials_kernel(float *out_a, float *out_b, int n, int c, int col0,
                                       int chunk, F f)
{
    pdl_wait();
    column_partials_block<F, W>(out_a, out_b, n, c, col0, chunk, f, (int)blockIdx.x,
                                (int)blockIdx.y, (int)gridDim.y, (int)threadIdx.x,
                                (int)threadIdx.y);
}

/* How column_sums splits an [n, c] sum: `parts` row chunks of `chunk` rows,
 * `tiles` column tiles of kColTile * w columns per launch of at most `span`
 * columns. The chunks are a function of (n, c, outputs) only: the bits of
 * the sums. */
struct column_split {
    int chunk, parts, w, span;
};

column_split split_columns(int n, int c, size_t outputs, int w)
{
    size_t parts = ((size_t)n + kColChunkRows - 1) / kColChunkRows;
    const size_t fit = kColPartials / ((size_t)c * outputs);
    if (parts > fit) parts = fit > 0 ? fit : 1;
    if (parts > (size_t)kMaxGrid) parts = kMaxGrid;
    const int chunk = (int)(((size_t)n + parts - 1) / parts);
    parts = ((size_t)n + chunk - 1) / chunk; /* no empty chunk */
    return column_split{chunk, (int)parts, w, kColDoneTiles * kColTile * w};
}

/* out_a[j] += sum_i f(i, j).a and, when out_b is not NULL, out_b[j] += .b.
 * The chunking depends only on (n, c, outputs), so the order of the sums, and
 * hence the bits, are the same on every device and every run. f.get(i, j, v)
 * fills v[0..W) with the terms of columns j..j+W-1 of row i; f.width() is
 * the W it is read with (1, 2 or 4: c % W == 0, its pointers aligned for
 * it). */
template <class F>
cudaError_t column_sums(float *out_a, float *out_b, int n, int c, F f, cudaStream_t stream)
{
    if (n <= 0 || c <= 0) return cudaSuccess;
    const column_split sp = split_columns(n, c, out_b ? 2 : 1, f.width());
    const int chunk = sp.chunk, w = sp.w, span = sp.span;
    const size_t parts = (size_t)sp.parts;
    const dim3 block(kColTile, kColLanes);
    /* a launch per kColDoneTiles column tiles (one for any layer of the configs) */
    for (int col0 = 0; col0 < c; col0 += span) {
        const int cols = c - col0 < span ? c - col0 : span;
        const unsigned tiles = (unsigned)((cols + kColTile * w - 1) / (kColTile * w));
        const dim3 grid(tiles, (unsigned)parts);
        if (w == 4)
            launch(column_partials_kernel<F, 4>, grid, block, 0, stream, out_a, out_b, n, c, col0,
                   chunk, f);
        else if (w == 2)
            launch(column_partials_kernel<F, 2>, grid, block, 0, stream, out_a, out_b, n, c, col0,
                   chunk, f);
        else
            launch(column_partials_kernel<F, 1>, grid, block, 0, stream, out_a, out_b, n, c, col0,
                   chunk, f);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
}

/* Row i, columns j..j+W-1 of a row-major [*, c] matrix, as floats. */
template <int W> __device__ void load_row(const float *m, int c, int i, int j, float (&v)[W])
{
    const float *p = m + (size_t)i * c + j;
    if (W == 4) {
        const float4 q = *reinterpret_cast<const float4 *>(p);
        v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
        for (int l = 0; l < W; l++) v[l] = p[l];
    }
}

struct bias_grad_term {
    const float *dy;
    int c;
    template <int W> __device__ void get(int i, int j, sum2 (&v)[W]) const
    {
        float d[W];
        load_row<W>(dy, c, i, j, d);
        for (int l = 0; l < W; l++) v[l] = sum2{(double)d[l], 0.0};
    }
    /* One column a thread: float4s made the bias sums slower (large, 2
     * ranks: 2.45 against 2.13 ms a step, visit 6), a quarter of the blocks
     * for a single output; the LayerNorm sums (two outputs) got faster. */
    int width() const
    {
        return 1;
    }
};

/* ao_layernorm_backward's parameter gradients: (dy xhat, dy). */
struct layernorm_param_term {
    const float *dy, *x, *mean, *rstd;
    int c;
    template <int W> __device__ void get(int i, int j, sum2 (&v)[W]) const
    {
        float d[W], xs[W];
        load_row<W>(dy, c, i, j, d);
        load_row<W>(x, c, i, j, xs);
        const double m = mean[i], rs = rstd[i];
        for (int l = 0; l < W; l++) {
            const double xhat = (xs[l] - m) * rs;
            v[l] = sum2{(double)d[l] * xhat, (double)d[l]};
        }
    }
    int width() const
    {
        return c % 4 == 0 && aligned16(dy) && aligned16(x) ? 4 : 1;
    }
};

/* ---- element-wise ------------------------------------------------------- */

/* y[i] = op(a[i], b[i]) (b may be NULL: op sees a[i] twice). y may alias a
 * or b: each thread reads its elements before writing them. With vec, float4s
 * cover the first n / 4 * 4 elements and scalars the rest. */
template <class Op>
__global__ void map_kernel(float *y, const float *a, const float *b, size_t n, bool vec, Op op)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t tail = 0;
    if (vec) {
        const size_t n4 = n / 4;
        const float4 *a4 = reinterpret_cast<const float4 *>(a);
        const float4 *b4 = reinterpret_cast<const float4 *>(b);
        for (size_t i = tid; i < n4; i += stride) {
            const float4 va = a4[i], vb = b ? b4[i] : va;
            float4 r;
            r.x = op(va.x, vb.x);
            r.y = op(va.y, vb.y);
            r.z = op(va.z, vb.z);
            r.w = op(va.w, vb.w);
            reinterpret_cast<float4 *>(y)[i] = r;
        }
        tail = n4 * 4;
    }
    for (size_t i = tail + tid; i < n; i += stride) y[i] = op(a[i], b ? b[i] : a[i]);
}

template <class Op>
cudaError_t launch_map(float *y, const float *a, const float *b, size_t n, Op op,
                       cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    const bool vec = aligned16(y) && aligned16(a) && (b == nullptr || aligned16(b));
    launch(map_kernel<Op>, elem_blocks(n, vec ? 4 : 1), kThreads, 0, stream, y, a, b, n, vec, op);
    return cudaGetLastError();
}

struct add_op {
    __device__ float operator()(float a, float b) const
    {
        return a + b;
    }
};

struct scale_op {
    float alpha;
    __device__ float operator()(float x, float) const
    {
        return alpha * x;
    }
};

/* ao_gelu_forward / ao_gelu_backward, in float: erff and expf are within a
 * few ulp, far inside the fp32 tolerance. */
struct gelu_forward_op {
    __device__ float operator()(float v, float) const
    {
        return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
};

/* (dy, x) -> dx */
struct gelu_backward_op {
    __device__ float operator()(float dy, float v) const
    {
        const float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
        const float pdf = 0.39894228040143268f * expf(-0.5f * v * v);
        return dy * (cdf + v * pdf);
    }
};

/* ---- layernorm ------------------------------------------------------------ */

template <ao_dtype T> struct typed_store; /* the conversions, below */

/* One element of layernorm's output, as the reference computes it. */
__device__ float layernorm_out(float x, double m, double rs, float g, float b)
{
    return (float)((x - m) * rs) * g + b;
}

/* Rows with c % 4 == 0 and aligned pointers (the model's) go a block a row,
 * each thread holding K float4s of the row (and of dy in the backward) in
 * registers from one load: the row is read from memory once, where a warp a
 * row re-read it for each of its passes. On config/large.yaml's 2048-wide
 * rows (H200, bench/RESULTS.md session 9) the forward went from 72 to 42 us
 * a call; the backward, with two arrays a row and a block sync between its
 * passes, runs about as the warp-a-row kernel did (116 against ~106 us).
 * The per-element math is the reference's; only the order of the double
 * sums differs (their rounding). Other rows go a warp a row, scalar. */
constexpr int kRowMaxK = 8; /* so rows of up to kRowMaxK * 4 * kThreads floats */

template <int K> struct row_k {
    static constexpr int value = K;
};

/* f(row_k<K>{}) for the least K whose K * kThreads float4s cover a c-wide
 * row; false (nothing called) when c is wider than kRowMaxK allows. */
template <class F> bool with_row_k(int c, F &&f)
{
    const int c4 = c / 4;
    if (c4 <= kThreads) return f(row_k<1>{}), true;
    if (c4 <= 2 * kThreads) return f(row_k<2>{}), true;
    if (c4 <= 4 * kThreads) return f(row_k<4>{}), true;
    if (c4 <= kRowMaxK * kThreads) return f(row_k<kRowMaxK>{}), true;
    return false;
}

/* The block's sums of (a, b), in every thread (kThreads threads): each warp's
 * by shuffles, then the warps' in order. */
__device__ double2 block_sum2(double a, double b)
{
    __shared__ double2 part[kWarpsPerBlock];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    a = warp_sum(a);
    b = warp_sum(b);
    if (lane == 0) part[warp] = make_double2(a, b);
    __syncthreads();
    double2 t = part[0];
#pragma unroll
    for (int w = 1; w < kWarpsPerBlock; w++) {
        t.x += part[w].x;
        t.y += part[w].y;
    }
    __syncthreads(); /* part is reused by the next call */
    return t;
}

/* H != AO_F32: y's values are also stored in half type H at y16 (the next
 * GEMM's operand), from the same float (y16 8-byte aligned). */
template <ao_dtype H, int K>
__global__ void layernorm_forward_rows_kernel(float *y, void *y16, float *mean, float *rstd,
                                              const float *x, const float *gamma, const float *beta,
                                              int n, int c)
{
    pdl_wait();
    const int c4 = c / 4, t = (int)threadIdx.x;
    const float4 *g4 = reinterpret_cast<const float4 *>(gamma);
    const float4 *b4 = reinterpret_cast<const float4 *>(beta);
    for (int row = blockIdx.x; row < n; row += gridDim.x) {
        const float4 *x4 = reinterpret_cast<const float4 *>(x + (size_t)row * c);
        float4 v[K];
        double s = 0.0;
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int q = t + k * kThreads;
            if (q < c4) {
                v[k] = x4[q];
                s += (double)v[k].x + v[k].y + v[k].z + v[k].w;
            }
        }
        const double m = block_sum2(s, 0.0).x / c;
        double var = 0.0;
#pragma unroll
        for (int k = 0; k < K; k++) {
            if (t + k * kThreads < c4)
                var += (v[k].x - m) * (v[k].x - m) + (v[k].y - m) * (v[k].y - m) +
                       (v[k].z - m) * (v[k].z - m) + (v[k].w - m) * (v[k].w - m);
        }
        const double rs = 1.0 / sqrt(block_sum2(var, 0.0).x / c + (double)AO_LN_EPS);
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int q = t + k * kThreads;
            if (q >= c4) continue;
            const float4 g = g4[q], b = b4[q];
            const float4 o = make_float4(
                layernorm_out(v[k].x, m, rs, g.x, b.x), layernorm_out(v[k].y, m, rs, g.y, b.y),
                layernorm_out(v[k].z, m, rs, g.z, b.z), layernorm_out(v[k].w, m, rs, g.w, b.w));
            const size_t at = (size_t)row * c + 4 * (size_t)q;
            *reinterpret_cast<float4 *>(y + at) = o;
            if (H != AO_F32) typed_store<H>{y16}.put4(at, o);
        }
        if (t == 0) {
            mean[row] = (float)m;
            rstd[row] = (float)rs;
        }
    }
}

/* A warp a row, scalar: rows layernorm_forward_rows_kernel does not take. */
template <ao_dtype H>
__global__ void layernorm_forward_kernel(float *y, void *y16, float *mean, float *rstd,
                                         const float *x, const float *gamma, const float *beta,
                                         int n, int c)
{
    pdl_wait();
    const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= n) return;
    const float *xr = x + (size_t)row * c;
    float *yr = y + (size_t)row * c;
    double s = 0.0, var = 0.0;
    for (int j = lane; j < c; j += 32) s += xr[j];
    const double m = warp_sum(s) / c;
    for (int j = lane; j < c; j += 32) var += (xr[j] - m) * (xr[j] - m);
    const double rs = 1.0 / sqrt(warp_sum(var) / c + (double)AO_LN_EPS);
    for (int j = lane; j < c; j += 32) {
        const float v = layernorm_out(xr[j], m, rs, gamma[j], beta[j]);
        yr[j] = v;
        if (H != AO_F32) typed_store<H>{y16}.put((size_t)row * c + j, v);
    }
    if (lane == 0) {
        mean[row] = (float)m;
        rstd[row] = (float)rs;
    }
}

/* A backward's Tail gets every float4 of dx as it is stored: no_ln_tail, or
 * ln_dropout_tail (the dropout of dx, fused). */
struct no_ln_tail {
    __device__ int begin_row(int) const
    {
        return 0;
    }
    __device__ void put4(int, int, int, float4) const {}
};

/* dx of row `row`, by the whole block (layernorm_forward_rows_kernel's
 * layout: thread t holds float4s t + k * kThreads of x and dy). */
/* Blocks a backward kernel of K float4s a thread asks room for: 4 (64
 * registers) for the model's rows, 37.5 % occupancy at the 72 registers it
 * would take otherwise, too few rows in flight for the memory (Nsight
 * Compute, bench/RESULTS.md session 9); 2 where 64 would spill. */
template <int K> constexpr int kRowMinBlocks = K <= 2 ? 4 : 2;

template <int K, class Tail>
__device__ void layernorm_backward_block_row(float *dx, const float *dy, const float *x,
                                             const float *mean, const float *rstd,
                                             const float *gamma, int c, const Tail &tail, int row)
{
    const int c4 = c / 4, t = (int)threadIdx.x;
    const float4 *x4 = reinterpret_cast<const float4 *>(x + (size_t)row * c);
    const float4 *dy4 = reinterpret_cast<const float4 *>(dy + (size_t)row * c);
    const float4 *g4 = reinterpret_cast<const float4 *>(gamma);
    const double m = mean[row], rs = rstd[row];
    float4 xv[K], dv[K];
    double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int q = t + k * kThreads;
        if (q >= c4) continue;
        xv[k] = x4[q];
        dv[k] = dy4[q];
        const float4 gv = g4[q];
        const float xs[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
        const float ds[4] = {dv[k].x, dv[k].y, dv[k].z, dv[k].w};
        const float gs[4] = {gv.x, gv.y, gv.z, gv.w};
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const double xhat = (xs[l] - m) * rs, dxhat = (double)ds[l] * gs[l];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * xhat;
        }
    }
    const double2 sums = block_sum2(sum_dxhat, sum_dxhat_xhat);
    const double mean_dxhat = sums.x / c, mean_dxhat_xhat = sums.y / c;
    const auto row_state = tail.begin_row(row);
#pragma unroll
    for (int k = 0; k < K; k++) {
        const int q = t + k * kThreads;
        if (q >= c4) continue;
        const float4 gv = g4[q];
        const float xs[4] = {xv[k].x, xv[k].y, xv[k].z, xv[k].w};
        const float ds[4] = {dv[k].x, dv[k].y, dv[k].z, dv[k].w};
        const float gs[4] = {gv.x, gv.y, gv.z, gv.w};
        float out[4];
#pragma unroll
        for (int l = 0; l < 4; l++) {
            const double xhat = (xs[l] - m) * rs, dxhat = (double)ds[l] * gs[l];
            out[l] = (float)(rs * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
        }
        const float4 o4 = make_float4(out[0], out[1], out[2], out[3]);
        reinterpret_cast<float4 *>(dx + (size_t)row * c)[q] = o4;
        tail.put4(row_state, row, q, o4);
    }
}

template <int K, class Tail>
__global__ void __launch_bounds__(kThreads, kRowMinBlocks<K>)
    layernorm_backward_rows_kernel(float *dx, const float *dy, const float *x, const float *mean,
                                   const float *rstd, const float *gamma, int n, int c, Tail tail)
{
    pdl_wait();
    for (int row = blockIdx.x; row < n; row += gridDim.x)
        layernorm_backward_block_row<K>(dx, dy, x, mean, rstd, gamma, c, tail, row);
}

/* A warp a row, scalar: rows layernorm_backward_rows_kernel does not take. */
__global__ void layernorm_backward_dx_kernel(float *dx, const float *dy, const float *x,
                                             const float *mean, const float *rstd,
                                             const float *gamma, int n, int c)
{
    pdl_wait();
    const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= n) return;
    const float *xr = x + (size_t)row * c, *dyr = dy + (size_t)row * c;
    float *dxr = dx + (size_t)row * c;
    const double m = mean[row], rs = rstd[row];
    double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
    for (int j = lane; j < c; j += 32) {
        const double xhat = (xr[j] - m) * rs, dxhat = (double)dyr[j] * gamma[j];
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * xhat;
    }
    const double mean_dxhat = warp_sum(sum_dxhat) / c;
    const double mean_dxhat_xhat = warp_sum(sum_dxhat_xhat) / c;
    for (int j = lane; j < c; j += 32) {
        const double xhat = (xr[j] - m) * rs, dxhat = (double)dyr[j] * gamma[j];
        dxr[j] = (float)(rs * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
    }
}

/* LayerNorm backward whole, in one launch: dx (+ Tail) and the parameter
 * sums, by blocks of two roles. Row chunk p of column_split is blocks
 * p * (chunk + tiles) + r: r < chunk computes the dx of row p * chunk + r
 * (layernorm_backward_block_row); the others sum column tile r - chunk of
 * the chunk as column_sums does. The bits are those of the two launches it
 * replaces (the same functions in the same order); it saves a launch and the
 * device's latency between the two, and a chunk's sums run just after its
 * rows' dx blocks read the same dy and x (which L2 then still holds). */
template <int K, class Tail>
__global__ void __launch_bounds__(kThreads, kRowMinBlocks<K>)
    layernorm_backward_fused_kernel(float *dx, float *dgamma, float *dbeta, const float *dy,
                                    const float *x, const float *mean, const float *rstd,
                                    const float *gamma, int n, int c, int chunk, int parts,
                                    int tiles, Tail tail)
{
    pdl_wait();
    const int per = chunk + tiles;
    const int part = (int)blockIdx.x / per, r = (int)blockIdx.x % per;
    const int tid = (int)threadIdx.x;
    if (r < chunk) {
        const int row = part * chunk + r;
        if (row < n) layernorm_backward_block_row<K>(dx, dy, x, mean, rstd, gamma, c, tail, row);
        return;
    }
    column_partials_block<layernorm_param_term, 4>(dgamma, dbeta, n, c, 0, chunk,
                                                   layernorm_param_term{dy, x, mean, rstd, c},
                                                   r - chunk, part, parts, tid & 31, tid >> 5);
}

/* The blocks of a block-a-row kernel over n rows. */
unsigned row_blocks(int n)
{
    return (unsigned)(n < kMaxGrid ? n : kMaxGrid);
}

/* LayerNorm backward (the aligned c % 4 == 0 rows, checked by the caller)
 * as layernorm_backward_fused_kernel where the column sum is one launch,
 * else the block-a-row dx kernel and column_sums; false: c too wide (the
 * caller runs the scalar chain). */
template <class Tail>
bool launch_layernorm_backward_rows(float *dx, float *dgamma, float *dbeta, const float *dy,
                                    const float *x, const float *mean, const float *rstd,
                                    const float *gamma, int n, int c, const Tail &tail,
                                    cudaStream_t stream, cudaError_t *err)
{
    return with_row_k(c, [&](auto ktag) {
        constexpr int K = decltype(ktag)::value;
        const layernorm_param_term f{dy, x, mean, rstd, c};
        const column_split sp = split_columns(n, c, 2, 4);
        const int tiles = (c + kColTile * sp.w - 1) / (kColTile * sp.w);
        const size_t blocks = (size_t)sp.parts * (size_t)(sp.chunk + tiles);
        if (f.width() == 4 && c <= sp.span && blocks <= (size_t)INT32_MAX) {
            launch(layernorm_backward_fused_kernel<K, Tail>, (unsigned)blocks, kThreads, 0, stream,
                   dx, dgamma, dbeta, dy, x, mean, rstd, gamma, n, c, sp.chunk, sp.parts, tiles,
                   tail);
            *err = cudaGetLastError();
            return;
        }
        launch(layernorm_backward_rows_kernel<K, Tail>, row_blocks(n), kThreads, 0, stream, dx, dy,
               x, mean, rstd, gamma, n, c, tail);
        *err = cudaGetLastError();
        if (*err == cudaSuccess) *err = column_sums(dgamma, dbeta, n, c, f, stream);
    });
}

/* ---- softmax: one warp per row (in place: each lane rewrites what it read) */

/* Rows are walked in chunks of kChunk elements: lane l takes elements
 * j0 + l + 32 k (k < 4) of chunk j0, i.e. the same lane-strided order as a
 * plain `j = lane; j += 32` loop, so the double sums keep their order. The
 * chunks let a fused dropout hand each lane its 4 mask factors from one
 * Philox block per lane (drop_row::strided_factors). */
constexpr int kChunk = 128;

/* The plain softmax's output: y as floats. A softmax kernel asks its Out for
 * a writer per row: stats(lane, max, inv) (the row's max and the reciprocal
 * of its sum of exps, once per row; nothing kept here), factors() (chunk
 * j0's dropout factors, warp-collective; none here), put(j, v, factor) and
 * put4(q, v) (float4 q of the row). */
struct softmax_plain_out {
    float *y;
    struct cache {
    };
    struct writer {
        float *yr;
        __device__ void stats(int, float, float) const {}
        __device__ void factors(int, int, int, float *) const {}
        __device__ void put(int j, float v, float) const
        {
            yr[j] = v;
        }
        __device__ void put4(int q, float4 v) const
        {
            reinterpret_cast<float4 *>(yr)[q] = v;
        }
    };
    __device__ writer row(int r, int c, cache &) const
    {
        return writer{y + (size_t)r * c};
    }
};

/* exp(x - max) in float, the element-wise half of a softmax: the row's sum
 * of them accumulates in double and its reciprocal scales them. The
 * reference does all of it in double; float keeps each probability within a
 * few ulp of it (|x - max| is exact to half an ulp, expf within 2) while the
 * double version made the forward compute-bound (2x its memory time on the
 * large config's T x T rows, bench/RESULTS.md). A probability is
 * softmax_exp(x, max) * inv, nothing else, so that a backward given the
 * row's (max, inv) recomputes it bit for bit (softmax_recomputed_y). */
__device__ float softmax_exp(float x, float mx)
{
    return expf(x - mx);
}

/* Consecutive work items one worker takes in turn (softmax rows a warp,
 * dropout tiles a block), so that a fused dropout derives a row's stream
 * (1 or 2 Philox calls) once per run instead of once an item, against 4
 * Philox blocks a lane an item: kRun where the launch keeps kMinRunBlocks
 * blocks, else 1. The default config's launches are a few hundred blocks;
 * runs of 4 there left SMs idle (3.25 -> 3.40 ms a step on 1xH200,
 * bench/RESULTS.md, session 11). */
constexpr int kRun = 4;
constexpr size_t kMinRunBlocks = 2048;

int run_length(size_t blocks_of_one)
{
    return blocks_of_one >= (size_t)kRun * kMinRunBlocks ? kRun : 1;
}

/* x: the scores through a typed_load (fp32, or 16-bit widened exactly). */
template <class Out, class X>
__global__ void softmax_forward_kernel(Out out, X x, int n, int c, int run)
{
    pdl_wait();
    const int warp = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    typename Out::cache cache;
    for (int k = 0; k < run; k++) {
        const int row = warp * run + k;
        if (row >= n) return;
        const size_t off = (size_t)row * c;
        float mx = -INFINITY;
        for (int j = lane; j < c; j += 32) mx = fmaxf(mx, x.load(off + j));
        mx = warp_max(mx);
        double s = 0.0;
        for (int j = lane; j < c; j += 32) s += softmax_exp(x.load(off + j), mx);
        const float inv = (float)(1.0 / warp_sum(s));
        const auto w = out.row(row, c, cache);
        w.stats(lane, mx, inv);
        for (int j0 = 0; j0 < c; j0 += kChunk) {
            float f[4] = {1.0f, 1.0f, 1.0f, 1.0f};
            w.factors(j0, lane, c, f);
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int j = j0 + lane + 32 * q;
                if (j < c) w.put(j, softmax_exp(x.load(off + j), mx) * inv, f[q]);
            }
        }
    }
}

/* softmax_forward_kernel for rows of at most 128 * V elements with c % 4 == 0
 * and x's float4 loads, y's stores aligned (attention's T x T scores): lane l
 * keeps groups l, l + 32, ... of its row and their exps in registers, so the
 * row is read once and each exp is computed once. Each group's four exps
 * are summed in float, then the groups in double: one conversion per group,
 * not per element (the conversions had the kernel waiting on their unit);
 * the order differs from the generic kernel's, a few float ulp of a sum
 * that the output rounds to 16 bits or keeps as the float it is. */
template <int V, class Out, class X>
__global__ void softmax_forward_vec_kernel(Out out, X x, int n, int c, int run)
{
    pdl_wait();
    const int warp = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    const int c4 = c / 4;
    typename Out::cache cache;
    for (int k = 0; k < run; k++) {
        const int row = warp * run + k;
        if (row >= n) return;
        const size_t off = (size_t)row * c;
        float4 v[V];
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < V; i++) {
            const int q = lane + 32 * i;
            if (q < c4) {
                v[i] = x.load4(off + 4 * (size_t)q);
                mx = fmaxf(mx, fmaxf(fmaxf(v[i].x, v[i].y), fmaxf(v[i].z, v[i].w)));
            }
        }
        mx = warp_max(mx);
        double s = 0.0;
#pragma unroll
        for (int i = 0; i < V; i++) {
            if (lane + 32 * i < c4) {
                v[i] = make_float4(softmax_exp(v[i].x, mx), softmax_exp(v[i].y, mx),
                                   softmax_exp(v[i].z, mx), softmax_exp(v[i].w, mx));
                s += (double)__fadd_rn(__fadd_rn(v[i].x, v[i].y), __fadd_rn(v[i].z, v[i].w));
            }
        }
        const float inv = (float)(1.0 / warp_sum(s));
        const auto w = out.row(row, c, cache);
        w.stats(lane, mx, inv);
#pragma unroll
        for (int i = 0; i < V; i++) {
            const int q = lane + 32 * i;
            if (q < c4)
                w.put4(q, make_float4(v[i].x * inv, v[i].y * inv, v[i].z * inv, v[i].w * inv));
        }
    }
}

/* The kernel ao_cuda_softmax_forward picks for (x, y, c): the choice fixes
 * the order of the row sums, so a fused softmax must pick the same one.
 * x4: X may load float4 groups; y4: Out may store them. */
template <class Out, class X>
cudaError_t launch_softmax_forward(Out out, bool y4, X x, bool x4, int n, int c,
                                   cudaStream_t stream)
{
    if (n <= 0 || c <= 0) return cudaSuccess;
    const bool vec = c % 4 == 0 && x4 && y4;
    const int run = run_length(row_warp_blocks(n));
    const unsigned grid = row_warp_blocks((n + run - 1) / run);
    if (vec && c <= 128 * 4)
        launch(softmax_forward_vec_kernel<4, Out, X>, grid, kThreads, 0, stream, out, x, n, c, run);
    else if (vec && c <= 128 * 8)
        launch(softmax_forward_vec_kernel<8, Out, X>, grid, kThreads, 0, stream, out, x, n, c, run);
    else
        launch(softmax_forward_kernel<Out, X>, grid, kThreads, 0, stream, out, x, n, c, run);
    return cudaGetLastError();
}

/* The plain softmax backward's dropout: none (dy as given). */
struct no_drop_rows {
    struct row_t {
        static constexpr bool on = false;
        __device__ void strided_factors(int, int, int, float *) const {}
        __device__ void block_factors(uint64_t, float *) const {}
        __device__ float apply(float v, float) const
        {
            return v;
        }
    };
    __device__ row_t row(int) const
    {
        return row_t{};
    }
};

/* One element of softmax's backward, scale * y * (g - dot), in float: the
 * row's dot accumulates in double, as the reference's, and is rounded once.
 * __fsub_rn: a fused dropout's g is a product, which the compiler would
 * otherwise contract into the subtraction, and the fused kernel would no
 * longer match the unfused chain bit for bit. */
__device__ float softmax_grad(float y, float g, float dot, float scale)
{
    return __fmul_rn(__fmul_rn(y, __fsub_rn(g, dot)), scale);
}

/* The softmax output a backward reads, stored as floats. A backward asks its
 * Y for a reader per row: at(j), and at4(q) (float4 q of the row, where
 * vec_ok). softmax_recomputed_y (below) computes it again instead. */
struct softmax_stored_y {
    const float *y;
    struct reader {
        const float *yr;
        __device__ float at(int j) const
        {
            return yr[j];
        }
        __device__ float4 at4(int q) const
        {
            return reinterpret_cast<const float4 *>(yr)[q];
        }
    };
    __device__ reader row(int r, int c) const
    {
        return reader{y + (size_t)r * c};
    }
    bool vec_ok() const
    {
        return aligned16(y);
    }
};

/* dx = scale * y * (g - sum_j y_j g_j) with g = drop(dy) (Drop: no_drop_rows or
 * the fused drop_rows), y read through Y (softmax_stored_y or _recomputed_y),
 * dy through Dy (typed_load: fp32, or the 16-bit dP widened), stored through
 * Dx (typed_store; dx may alias dy, element for element). The factors are
 * drawn again for the second pass rather than kept: cheaper than registers
 * for a row of any length. */
template <class Dx, class Dy, class Y, class Drop>
__global__ void softmax_backward_kernel(Dx dx, Dy dy, Y y, float scale, int n, int c, Drop drop)
{
    pdl_wait();
    const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= n) return;
    const auto yr = y.row(row, c);
    const size_t off = (size_t)row * c;
    const auto d = drop.row(row);
    double dot = 0.0;
    for (int j0 = 0; j0 < c; j0 += kChunk) {
        float f[4] = {1.0f, 1.0f, 1.0f, 1.0f};
        d.strided_factors(j0, lane, c, f);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int j = j0 + lane + 32 * k;
            if (j < c) dot += (double)yr.at(j) * d.apply(dy.load(off + j), f[k]);
        }
    }
    const float dotf = (float)warp_sum(dot);
    for (int j0 = 0; j0 < c; j0 += kChunk) {
        float f[4] = {1.0f, 1.0f, 1.0f, 1.0f};
        d.strided_factors(j0, lane, c, f);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int j = j0 + lane + 32 * k;
            if (j < c)
                dx.put(off + j,
                       softmax_grad(yr.at(j), d.apply(dy.load(off + j), f[k]), dotf, scale));
        }
    }
}

/* softmax_backward_kernel for rows of at most 128 * V floats with c % 4 == 0
 * and dy, y aligned (attention's T x T): lane l keeps float4s l,
 * l + 32, ... of y and of the dropped dy in registers, so both are read once
 * and each mask block is drawn once (one Philox block per float4, no
 * shuffles). dx4: Dx may store float4 groups. Each group's four products
 * are summed in float and the groups in double (one conversion a group, as
 * the forward's sum), so the dot differs from the generic kernel's by a few
 * float ulp of the group sums. */
template <int V, class Dx, class Dy, class Y, class Drop>
__global__ void __launch_bounds__(kThreads, V <= 4 ? 4 : 2)
    softmax_backward_vec_kernel(Dx dx, bool dx4, Dy dy, Y y, float scale, int n, int c, Drop drop)
{
    pdl_wait();
    const int row = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= n) return;
    const int c4 = c / 4;
    const auto yr = y.row(row, c);
    const size_t off = (size_t)row * c;
    const auto d = drop.row(row);
    float4 yv[V], gv[V];
    double dot = 0.0;
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int q = lane + 32 * i;
        if (q < c4) {
            yv[i] = yr.at4(q);
            gv[i] = dy.load4(off + 4 * (size_t)q);
        }
    }
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int q = lane + 32 * i;
        if (q < c4) {
            float f[4] = {1.0f, 1.0f, 1.0f, 1.0f};
            if (d.on) d.block_factors((uint64_t)q, f);
            gv[i] = make_float4(d.apply(gv[i].x, f[0]), d.apply(gv[i].y, f[1]),
                                d.apply(gv[i].z, f[2]), d.apply(gv[i].w, f[3]));
            dot += (double)__fadd_rn(
                __fadd_rn(__fmul_rn(yv[i].x, gv[i].x), __fmul_rn(yv[i].y, gv[i].y)),
                __fadd_rn(__fmul_rn(yv[i].z, gv[i].z), __fmul_rn(yv[i].w, gv[i].w)));
        }
    }
    const float dotf = (float)warp_sum(dot);
#pragma unroll
    for (int i = 0; i < V; i++) {
        const int q = lane + 32 * i;
        if (q >= c4) continue;
        const float4 o = make_float4(softmax_grad(yv[i].x, gv[i].x, dotf, scale),
                                     softmax_grad(yv[i].y, gv[i].y, dotf, scale),
                                     softmax_grad(yv[i].z, gv[i].z, dotf, scale),
                                     softmax_grad(yv[i].w, gv[i].w, dotf, scale));
        const size_t at = off + 4 * (size_t)q;
        if (dx4) {
            dx.put4(at, o);
        } else {
            dx.put(at, o.x);
            dx.put(at + 1, o.y);
            dx.put(at + 2, o.z);
            dx.put(at + 3, o.w);
        }
    }
}

/* The kernel both softmax backwards pick for (dy, y, c): the choice fixes the
 * order of the dot, so the fused one matches the plain one bit for bit (and
 * one over a 16-bit dy the fp32 one over its widening). dy4: Dy may load
 * float4 groups. */
template <class Dx, class Dy, class Y, class Drop>
cudaError_t launch_softmax_backward(Dx dx, bool dx4, Dy dy, bool dy4, Y y, float scale, int n,
                                    int c, Drop drop, cudaStream_t stream)
{
    if (n <= 0 || c <= 0) return cudaSuccess;
    const bool vec = c % 4 == 0 && dy4 && y.vec_ok();
    if (vec && c <= 128 * 4)
        launch(softmax_backward_vec_kernel<4, Dx, Dy, Y, Drop>, row_warp_blocks(n), kThreads, 0,
               stream, dx, dx4, dy, y, scale, n, c, drop);
    else if (vec && c <= 128 * 8)
        launch(softmax_backward_vec_kernel<8, Dx, Dy, Y, Drop>, row_warp_blocks(n), kThreads, 0,
               stream, dx, dx4, dy, y, scale, n, c, drop);
    else
        launch(softmax_backward_kernel<Dx, Dy, Y, Drop>, row_warp_blocks(n), kThreads, 0, stream,
               dx, dy, y, scale, n, c, drop);
    return cudaGetLastError();
}

/* ---- dropout ------------------------------------------------------------- */

/* What a dropout kernel needs: the call's site stream, i.e. ao_dropout_stream
 * up to but excluding the sample level, which is the same for every row and
 * so is derived once on the host; rows then cost 1 (2 with heads) Philox
 * calls instead of 4 (5). */
/* A dropout probability in the forms the kernels use: p (on: p > 0); the
 * threshold a word is dropped below (ao_dropout_threshold, 0 < p < 1); the
 * kept elements' factor 1 / (1 - p), 0 when p >= 1, which then drops all.
 * drop_factor(word) is then ao_dropout_factor_from_word's, bit for bit. */
struct drop_rate {
    float p;
    uint32_t thr;
    float keep;
};

drop_rate drop_rate_of(float p)
{
    if (p >= 1.0f) return drop_rate{p, 0u, 0.0f};
    return drop_rate{p, p > 0.0f ? ao_dropout_threshold(p) : 0u, 1.0f / (1.0f - p)};
}

__device__ float drop_factor(uint32_t word, const drop_rate &r)
{
    return word < r.thr ? 0.0f : r.keep;
}

struct dropout_args {
    ao_rng_stream site;
    uint64_t first_sample;
    int heads;
    drop_rate r;
};

dropout_args dropout_args_of(const ao_cuda_dropout_key &k)
{
    /* ao_dropout_stream's key path without its last level (sample): the GPU
     * test compares the masks with ao_dropout_stream's bit for bit */
    ao_rng_stream s = ao_rng_root(k.seed, AO_RNG_DROPOUT);
    s = ao_rng_child(s, k.step);
    s = ao_rng_child(s, k.layer);
    s = ao_rng_child(s, k.site);
    return dropout_args{s, k.first_sample, k.heads, drop_rate_of(k.p)};
}

/* The stream of row r of a dropout call (ops_ref's keying). */
__device__ ao_rng_stream dropout_row_stream(const dropout_args &a, size_t r)
{
    const uint64_t b = a.heads > 0 ? r / (size_t)a.heads : r;
    ao_rng_stream s = ao_rng_child(a.site, a.first_sample + b);
    if (a.heads > 0) s = ao_rng_child(s, (uint64_t)(r % (size_t)a.heads));
    return s;
}

/* The mask of one group as a byte (bit l: element l kept), and back: the
 * factors are exactly ao_dropout_factor_from_word's (0 or 1 / (1 - p); p >= 1
 * keeps nothing), so a pass that reads the byte multiplies by the very
 * factors the Philox draw gave the pass that wrote it. */
__device__ uint8_t mask_byte(const float f[4])
{
    return (uint8_t)((f[0] != 0.0f) | (f[1] != 0.0f) << 1 | (f[2] != 0.0f) << 2 |
                     (f[3] != 0.0f) << 3);
}

__device__ void mask_factors(uint8_t m, const drop_rate &r, float f[4])
{
#pragma unroll
    for (int l = 0; l < 4; l++) f[l] = (m >> l) & 1 ? r.keep : 0.0f;
}

/* The factors of a group of four elements, block g of stream s: read from
 * its mask byte *mask_in when that is set, else drawn, and then stored to
 * *mask_out when that is set. Every dropout path gets its factors here. */
__device__ void group_factors(float f[4], ao_rng_stream s, uint64_t g, const drop_rate &r,
                              const uint8_t *mask_in, uint8_t *mask_out)
{
    if (mask_in) {
        mask_factors(*mask_in, r, f);
        return;
    }
    const ao_u32x4 w = ao_rng_block(s, g);
#pragma unroll
    for (int l = 0; l < 4; l++) f[l] = drop_factor(w.v[l], r);
    if (mask_out) *mask_out = mask_byte(f);
}

__device__ float4 times4(float4 v, const float f[4])
{
    return make_float4(v.x * f[0], v.y * f[1], v.z * f[2], v.w * f[3]);
}

/* v times the dropout factors of block g of stream s (drawn): group g's four
 * elements, the product every float4 dropout path makes. */
__device__ float4 drop4(float4 v, ao_rng_stream s, size_t g, const drop_rate &r)
{
    float f[4];
    group_factors(f, s, g, r, nullptr, nullptr);
    return times4(v, f);
}

/* Philox blocks (4 elements each) one dropout thread applies: their
 * independent Philox evaluations overlap, and they amortize the thread's
 * row-stream derivation (every thread derives it: cheaper than a shared
 * copy and a barrier). */
constexpr int kDropGroups = 4;

/* A dropout kernel reads its input through a Map (load / load4: the
 * value(s) at flat element i, i a multiple of 4 for load4), multiplies by
 * the mask and writes through the Map (store / store4), so the fused chains
 * put their element-wise op before or after the mask (dropout_out_map and
 * the GELU maps, with the fused kernels below). */

/* A block per `run` consecutive tiles (run_length): tile t covers groups
 * [chunk * blockDim.x * kDropGroups, + blockDim.x * kDropGroups) of row
 * t / tiles_per_row, thread i the groups
 * i, i + blockDim.x, ... of it (coalesced). Group g of a row is block g of
 * the row's stream and elements 4g .. 4g + 3, as ops_ref's dropout_apply.
 * Vec (per_row % 4 == 0, the Map's pointers aligned): a group is one float4.
 * With p <= 0 (only the fused chains launch that) no mask is drawn or
 * applied: the values pass through unchanged, as a skipped dropout.
 * mask_out: also store each group's mask byte (group_factors); mask_in: read
 * them instead of drawing (a backward after its forward: no Philox).
 * At most 64 registers (4 blocks an SM): GELU + dropout went from 72 to 62
 * and 238 to 214 µs a large layer, dropout + GELU backward from 64 and 278
 * to 303 µs, about a wash over a step (Nsight Compute, bench/RESULTS.md,
 * session 7); every GPU measurement since was taken with it. */
template <bool Vec, class Map>
__global__ void __launch_bounds__(kThreads, 4)
    dropout_kernel(Map m, size_t per_row, size_t tiles_per_row, size_t tiles, size_t run,
                   dropout_args k, const uint8_t *mask_in, uint8_t *mask_out)
{
    pdl_wait();
    const size_t groups = (per_row + 3) / 4;
    const size_t tile_groups = (size_t)blockDim.x * kDropGroups;
    const bool drop = k.r.p > 0.0f;
    size_t stream_row = SIZE_MAX; /* the row whose stream s is */
    ao_rng_stream s = k.site;
    for (size_t t0 = (size_t)blockIdx.x * run; t0 < tiles; t0 += (size_t)gridDim.x * run)
        for (size_t t = t0; t < t0 + run && t < tiles; t++) {
            const size_t r = t / tiles_per_row;
            const size_t first = (t % tiles_per_row) * tile_groups + threadIdx.x;
            if (drop && !mask_in && r != stream_row) {
                s = dropout_row_stream(k, r);
                stream_row = r;
            }
            const size_t off = r * per_row;
            if (Vec) {
                float4 v[kDropGroups];
#pragma unroll
                for (int i = 0; i < kDropGroups; i++) { /* all loads in flight first */
                    const size_t g = first + (size_t)i * blockDim.x;
                    v[i] = g < groups ? m.load4(off + 4 * g) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                }
#pragma unroll
                for (int i = 0; i < kDropGroups; i++) {
                    const size_t g = first + (size_t)i * blockDim.x;
                    if (g >= groups) break;
                    if (drop) {
                        float f[4];
                        const size_t at = r * groups + g; /* the group's mask byte */
                        group_factors(f, s, g, k.r, mask_in ? mask_in + at : nullptr,
                                      mask_out ? mask_out + at : nullptr);
                        v[i] = times4(v[i], f);
                    }
                    m.store4(off + 4 * g, v[i]);
                }
            } else {
#pragma unroll
                for (int i = 0; i < kDropGroups; i++) {
                    const size_t g = first + (size_t)i * blockDim.x;
                    if (g >= groups) break;
                    float f[4] = {1.0f, 1.0f, 1.0f, 1.0f};
                    const size_t at = r * groups + g;
                    if (drop)
                        group_factors(f, s, g, k.r, mask_in ? mask_in + at : nullptr,
                                      mask_out ? mask_out + at : nullptr);
                    for (int l = 0; l < 4; l++) {
                        const size_t e = g * 4 + l;
                        if (e >= per_row) break;
                        float v = m.load(off + e);
                        if (drop) v *= f[l];
                        m.store(off + e, v);
                    }
                }
            }
        }
}

/* Launches dropout_kernel over [rows, per_row] (rows as the key says) with
 * the plain dropout's tiling; vec: the Map's pointers allow float4 groups;
 * mask_in / mask_out as dropout_kernel's. */
template <class Map>
cudaError_t launch_dropout_map(Map m, bool vec, int batch, size_t per_row,
                               const ao_cuda_dropout_key &key, cudaStream_t stream,
                               const uint8_t *mask_in = nullptr, uint8_t *mask_out = nullptr)
{
    const size_t rows = (size_t)(batch > 0 ? batch : 0) * (size_t)(key.heads > 0 ? key.heads : 1);
    if (rows * per_row == 0) return cudaSuccess;
    /* The smallest block (a power of two from one warp to kThreads) whose tile
     * covers a whole row, so that short rows (per_row = d) do not leave most
     * of a block idle; long rows take kThreads and several tiles. */
    const size_t groups = (per_row + 3) / 4;
    unsigned threads = 32;
    while (threads < (unsigned)kThreads && (size_t)threads * kDropGroups < groups) threads *= 2;
    const size_t tile_groups = (size_t)threads * kDropGroups;
    const size_t tiles_per_row = (groups + tile_groups - 1) / tile_groups;
    const size_t tiles = rows * tiles_per_row;
    const size_t run = (size_t)run_length(tiles);
    const size_t runs = (tiles + run - 1) / run;
    const unsigned grid = (unsigned)(runs < (size_t)INT32_MAX ? runs : (size_t)INT32_MAX);
    const dropout_args args = dropout_args_of(key);
    if (vec && per_row % 4 == 0)
        launch(dropout_kernel<true, Map>, grid, threads, 0, stream, m, per_row, tiles_per_row,
               tiles, run, args, mask_in, mask_out);
    else
        launch(dropout_kernel<false, Map>, grid, threads, 0, stream, m, per_row, tiles_per_row,
               tiles, run, args, mask_in, mask_out);
    return cudaGetLastError();
}

/* ---- embedding bag ---------------------------------------------------------- */

__global__ void embedding_bag_forward_kernel(float *out, const int32_t *ids, const float *table,
                                             int n, int s, int e)
{
    pdl_wait();
    const size_t total = (size_t)n * e, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t at = (size_t)blockIdx.x * blockDim.x + threadIdx.x; at < total; at += stride) {
        const size_t i = at / (size_t)e, c = at % (size_t)e;
        double acc = 0.0;
        for (int k = 0; k < s; k++) acc += table[(size_t)ids[i * s + k] * e + c];
        out[at] = s > 0 ? (float)(acc / s) : 0.0f;
    }
}

/* keys = ids as unsigned (the sort key), positions = 0..count-1. */
__global__ void embedding_sort_input_kernel(uint32_t *keys, uint32_t *positions, const int32_t *ids,
                                            size_t count)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < count; p += stride) {
        keys[p] = (uint32_t)ids[p];
        positions[p] = (uint32_t)p;
    }
}

/* One warp per sorted position; the warp at the first position of a run of
 * equal ids adds the run's contributions to that table row, in position
 * order (stable sort), each as the reference does: row[c] += dout[c] * inv. */
__global__ void embedding_segment_add_kernel(float *dtable, const float *dout, const uint32_t *keys,
                                             const uint32_t *positions, size_t count, int s, int e)
{
    pdl_wait();
    const size_t p = (size_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (p >= count) return;
    const uint32_t id = keys[p];
    if (p > 0 && keys[p - 1] == id) return;
    const float inv = 1.0f / (float)s;
    float *row = dtable + (size_t)id * e;
    for (int c = lane; c < e; c += 32) {
        float acc = row[c];
        for (size_t q = p; q < count && keys[q] == id; q++) {
            const size_t token = positions[q] / (uint32_t)s;
            acc = __fadd_rn(acc, __fmul_rn(dout[token * e + c], inv));
        }
        row[c] = acc;
    }
}

size_t align256(size_t b)
{
    return (b + 255) & ~(size_t)255;
}

int key_bits(int vocab)
{
    int bits = 1;
    while (bits < 32 && (1ull << bits) < (unsigned long long)vocab) bits++;
    return bits;
}

/* ---- loss ------------------------------------------------------------------ */

constexpr int kLossThreads = 1024;

__global__ void bce_loss_kernel(float *loss, const float *z, const float *y, const float *w, int n,
                                double normalizer)
{
    pdl_wait();
    double acc = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const double zi = z[i];
        acc += (double)w[i] * (fmax(zi, 0.0) - zi * y[i] + log1p(exp(-fabs(zi))));
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0) loss[0] = (float)(acc / normalizer);
}

__global__ void bce_loss_backward_kernel(float *dz, const float *z, const float *y, const float *w,
                                         int n, double normalizer)
{
    pdl_wait();
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const double sig = 1.0 / (1.0 + exp(-(double)z[i]));
        dz[i] = (float)((double)w[i] * (sig - y[i]) / normalizer);
    }
}

/* ---- norms, flags, optimizer ------------------------------------------------ */

/* The first pass of a two-pass reduction: AO_CUDA_REDUCE_PARTIALS blocks of
 * this many threads, about one resident wave on an H100/H200 (132 SMs x 8
 * blocks), so no block starts after the others have finished. */
constexpr int kReduceThreads = 256;

/* Each thread sums the squares of float4s i, i + stride, ... two at a time
 * (two loads in flight: one scalar load per thread left this kernel waiting
 * on memory at under a third of its bandwidth), then the scalars of the
 * tail (all of x when it is not 16-byte aligned). The order depends only on
 * n, x's alignment and the grid, never on timing. */
__global__ void sum_squares_partial_kernel(double *partials, const float *x, size_t n)
{
    pdl_wait();
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t n4 = aligned16(x) ? n / 4 : 0;
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    double acc = 0.0;
    size_t i = tid;
    for (; i + stride < n4; i += 2 * stride) {
        const float4 a = x4[i], b = x4[i + stride];
        acc += (double)a.x * a.x + (double)a.y * a.y + (double)a.z * a.z + (double)a.w * a.w;
        acc += (double)b.x * b.x + (double)b.y * b.y + (double)b.z * b.z + (double)b.w * b.w;
    }
    if (i < n4) {
        const float4 a = x4[i];
        acc += (double)a.x * a.x + (double)a.y * a.y + (double)a.z * a.z + (double)a.w * a.w;
    }
    for (size_t j = 4 * n4 + tid; j < n; j += stride) acc += (double)x[j] * x[j];
    acc = block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void sum_partials_kernel(double *out, const double *partials, int count)
{
    pdl_wait();
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) out[0] = acc;
}

__global__ void has_nonfinite_kernel(int *flag, const float *x, size_t n)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    int found = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        found |= !isfinite(x[i]);
    if (__syncthreads_or(found) && threadIdx.x == 0) atomicOr(flag, 1);
}

__global__ void clip_coef_kernel(float *coef, const double *sq_norm, float max_norm, float extra)
{
    pdl_wait();
    if (!isfinite(sq_norm[0])) { /* overflow: 0 tells adamw_kernel to skip the step */
        coef[0] = 0.0f;
        return;
    }
    float c = 1.0f;
    if (max_norm > 0.0f) {
        const double v = (double)max_norm / (sqrt(sq_norm[0]) + 1e-6);
        c = v < 1.0 ? (float)v : 1.0f;
    }
    coef[0] = c * extra;
}

__global__ void step_scalars_kernel(double *out, const double *sq, int nsq, double norm_scale,
                                    const float *loss, int nloss, double stop)
{
    pdl_wait();
    double sum = 0.0, sq_sum = 0.0;
    for (int i = 0; i < nsq; i++) sq_sum += sq[i];
    for (int i = 0; i < nloss; i++) sum += loss[i];
    out[0] = sq_sum * norm_scale;
    out[1] = sum;
    out[2] = stop;
}

__global__ void norm_result_kernel(double *result, const double *sq_norm, const float *coef)
{
    pdl_wait();
    result[0] = sqrt(sq_norm[0]);
    result[1] = coef[0];
}

struct adamw_scalars {
    float step_size, bc2_sqrt, decay, one_minus_b1, one_minus_b2, beta2, eps, grad_scale;
};

/* ao_adamw_step, operation for operation, on one element; __f*_rn keep the
 * compiler from fusing multiply-adds the reference does not fuse, so the
 * update matches the reference bit for bit. */
struct adamw_elem {
    adamw_scalars k;
    float extra;
    bool has_extra;
    __device__ void operator()(float &param, float grad, float &m, float &v) const
    {
        float g = __fmul_rn(grad, k.grad_scale);
        if (has_extra) g = __fmul_rn(g, extra);
        float p = __fmul_rn(param, k.decay);
        const float mi = __fadd_rn(m, __fmul_rn(k.one_minus_b1, __fsub_rn(g, m)));
        const float vi =
            __fadd_rn(__fmul_rn(v, k.beta2), __fmul_rn(__fmul_rn(k.one_minus_b2, g), g));
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
        p = __fsub_rn(p, __fmul_rn(k.step_size, __fdiv_rn(mi, denom)));
        m = mi;
        v = vi;
        param = p;
    }
};

/* Float4s when all four arrays are 16-byte aligned (a 7-array stream at
 * ~77 % of the memory bandwidth with scalars), then the scalar tail. T !=
 * AO_F32: the parameters are also stored in type T at p16 (vec: 8-byte
 * aligned). */
template <ao_dtype T>
__global__ void adamw_kernel(float *param, void *p16, const float *grad, float *m, float *v,
                             size_t n, adamw_scalars k, const float *grad_scale_dev, bool vec)
{
    pdl_wait();
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const adamw_elem op{k, grad_scale_dev ? grad_scale_dev[0] : 1.0f, grad_scale_dev != nullptr};
    if (op.has_extra && op.extra == 0.0f) return; /* clip_coef_kernel's skip */
    const typed_store<T> out16{p16};
    const size_t n4 = vec ? n / 4 : 0;
    for (size_t i = tid; i < n4; i += stride) {
        float4 p = reinterpret_cast<float4 *>(param)[i], mm = reinterpret_cast<float4 *>(m)[i],
               vv = reinterpret_cast<float4 *>(v)[i];
        const float4 g = reinterpret_cast<const float4 *>(grad)[i];
        op(p.x, g.x, mm.x, vv.x);
        op(p.y, g.y, mm.y, vv.y);
        op(p.z, g.z, mm.z, vv.z);
        op(p.w, g.w, mm.w, vv.w);
        reinterpret_cast<float4 *>(param)[i] = p;
        reinterpret_cast<float4 *>(m)[i] = mm;
        reinterpret_cast<float4 *>(v)[i] = vv;
        if (T != AO_F32) out16.put4(4 * i, p);
    }
    for (size_t i = 4 * n4 + tid; i < n; i += stride) {
        op(param[i], grad[i], m[i], v[i]);
        if (T != AO_F32) out16.put(i, param[i]);
    }
}

/* ---- casts --------------------------------------------------------------------- */

__device__ float bf16_bits_to_float(uint16_t b)
{
    return __uint_as_float((uint32_t)b << 16);
}

/* Round to nearest even; NaN stays a (quiet) NaN. The host twin is
 * bench/values.c's float_to_bf16. */
__device__ uint16_t float_to_bf16_bits(float f)
{
    uint32_t bits = __float_as_uint(f);
    if (isnan(f)) return (uint16_t)((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* float -> T's 16 bits (T = AO_BF16 or AO_F16), round to nearest even. */
template <ao_dtype T> __device__ uint16_t narrow_bits(float f)
{
    return T == AO_BF16 ? float_to_bf16_bits(f) : __half_as_ushort(__float2half_rn(f));
}

/* 4 floats as 4 halves of T, packed low element first (8 bytes). */
template <ao_dtype T> __device__ uint2 narrow4(float4 v)
{
    return make_uint2((uint32_t)narrow_bits<T>(v.x) | (uint32_t)narrow_bits<T>(v.y) << 16,
                      (uint32_t)narrow_bits<T>(v.z) | (uint32_t)narrow_bits<T>(v.w) << 16);
}

/* Stores of type T (F32, BF16, F16) at element i of p; put4 stores elements
 * i .. i + 3 (i a multiple of 4, p 16-byte aligned for F32, 8 for 16 bits). */
template <ao_dtype T> struct typed_store {
    void *p;
    __device__ void put(size_t i, float v) const
    {
        if (T == AO_F32)
            static_cast<float *>(p)[i] = v;
        else
            static_cast<uint16_t *>(p)[i] = narrow_bits<T>(v);
    }
    __device__ void put4(size_t i, float4 v) const
    {
        if (T == AO_F32)
            *reinterpret_cast<float4 *>(static_cast<float *>(p) + i) = v;
        else
            *reinterpret_cast<uint2 *>(static_cast<uint16_t *>(p) + i) = narrow4<T>(v);
    }
};

/* Whether typed_store<T>::put4 may be used at multiples of 4 elements of p. */
template <ao_dtype T> bool store4_ok(const void *p)
{
    return T == AO_F32 ? aligned16(p) : aligned8(p);
}

__device__ float load_as_float(const void *src, ao_dtype t, size_t i)
{
    switch (t) {
    case AO_F16:
        return __half2float(__ushort_as_half(((const unsigned short *)src)[i]));
    case AO_BF16:
        return bf16_bits_to_float(((const uint16_t *)src)[i]);
    default:
        return ((const float *)src)[i];
    }
}

__device__ void store_from_float(void *dst, ao_dtype t, size_t i, float v)
{
    switch (t) {
    case AO_F16:
        typed_store<AO_F16>{dst}.put(i, v);
        break;
    case AO_BF16:
        typed_store<AO_BF16>{dst}.put(i, v);
        break;
    default:
        ((float *)dst)[i] = v;
        break;
    }
}

__global__ void cast_kernel(void *dst, ao_dtype dst_type, const void *src, ao_dtype src_type,
                            size_t n)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        store_from_float(dst, dst_type, i, load_as_float(src, src_type, i));
}

/* fp32 -> 16 bits, the GEMM operands' cast: 4 floats in (16 bytes), 4 halves
 * out (8 bytes) per thread and step, the same rounding as store_from_float.
 * The templated type keeps the inner loop free of the dtype switch. */
template <ao_dtype T>
__global__ void cast_down4_kernel(uint2 *__restrict__ dst, const float4 *__restrict__ src,
                                  size_t n4)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    /* two loads in flight per thread: one left it at ~70 % of the bandwidth */
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + stride < n4; i += 2 * stride) {
        const float4 a = src[i], b = src[i + stride];
        dst[i] = narrow4<T>(a);
        dst[i + stride] = narrow4<T>(b);
    }
    if (i < n4) dst[i] = narrow4<T>(src[i]);
}

/* 4 halves of T packed low element first (8 bytes) as 4 floats (exact:
 * every 16-bit value is a float); narrow4's inverse. */
template <ao_dtype T> __device__ float4 widen4(uint2 v)
{
    const uint16_t h[4] = {(uint16_t)(v.x & 0xffffu), (uint16_t)(v.x >> 16),
                           (uint16_t)(v.y & 0xffffu), (uint16_t)(v.y >> 16)};
    return make_float4(load_as_float(h, T, 0), load_as_float(h, T, 1), load_as_float(h, T, 2),
                       load_as_float(h, T, 3));
}

/* 16 bits -> fp32, the gathered parameters' cast: 4 halves in (8 bytes), 4
 * floats out per thread and step. */
template <ao_dtype T>
__global__ void cast_up4_kernel(float4 *__restrict__ dst, const uint2 *__restrict__ src, size_t n4)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride)
        dst[i] = widen4<T>(src[i]);
}

/* The parts of ao_cuda_cast_parts, by value: part p covers elements
 * [first[p], first[p + 1]) of the flattened parts, at offset off[p]. */
struct cast_parts_arg {
    size_t off[AO_CUDA_CAST_PARTS];
    size_t first[AO_CUDA_CAST_PARTS + 1];
    int n;
};

__global__ void cast_parts_kernel(void *dst, ao_dtype dst_type, const void *src, ao_dtype src_type,
                                  cast_parts_arg a)
{
    pdl_wait();
    const size_t total = a.first[a.n], stride = (size_t)gridDim.x * blockDim.x;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        int p = 0;
        while (t >= a.first[p + 1]) p++;
        const size_t i = a.off[p] + (t - a.first[p]);
        store_from_float(dst, dst_type, i, load_as_float(src, src_type, i));
    }
}

bool castable(ao_dtype t)
{
    return t == AO_F32 || t == AO_F16 || t == AO_BF16;
}

template <ao_dtype T> struct dtype_tag {
    static constexpr ao_dtype value = T;
};

/* f(dtype_tag<t>{}) for a castable t; cudaErrorInvalidValue otherwise. */
template <class F> cudaError_t with_dtype(ao_dtype t, F &&f)
{
    switch (t) {
    case AO_F32:
        return f(dtype_tag<AO_F32>{});
    case AO_BF16:
        return f(dtype_tag<AO_BF16>{});
    case AO_F16:
        return f(dtype_tag<AO_F16>{});
    default:
        return cudaErrorInvalidValue;
    }
}

/* ---- fused element-wise chains ---------------------------------------------------- */

/* Every fused chain computes each value with the same operations, in the same
 * order, as the chain of plain kernels it replaces (the mask a single float
 * multiply, the conversion typed_store's), so the results are bit-identical;
 * only the fp32 intermediates are never written. */

/* The attention-probabilities dropout of one softmax row: row i of
 * [B * heads * T, T] is elements base = (i % T) * T .. + T of dropout row
 * i / T (that is, (b, head)). Off (p <= 0): no mask, values pass unchanged.
 * mask_in / mask_out: the row's mask bytes (group q at [q], T % 4 == 0,
 * ao_cuda_dropout_mask_bytes' layout over the (b, head) rows), read instead
 * of drawn / stored as drawn (group_factors). */
struct drop_row {
    ao_rng_stream s;
    uint64_t base;
    drop_rate r;
    bool on;
    const uint8_t *mask_in;
    uint8_t *mask_out;

    __device__ float apply(float v, float factor) const
    {
        return on ? v * factor : v;
    }
    /* Factors of row elements 4q .. 4q + 3 (base % 4 == 0): one Philox block,
     * or the stored mask. */
    __device__ void block_factors(uint64_t q, float f[4]) const
    {
        group_factors(f, s, base / 4 + q, r, mask_in ? mask_in + q : nullptr,
                      mask_out ? mask_out + q : nullptr);
    }
    /* Warp-collective (all 32 lanes): f[k] = factor of row element
     * j0 + lane + 32 k, j0 a multiple of kChunk; elements past c are left.
     * With base % 4 == 0 lane m draws the block of chunk elements 4m .. 4m+3
     * and the words are transposed by 4 shuffles: in round r, lane a + 8 k'
     * sends word (k' - r) & 3 and lane 4a + b reads from lane a + 8((b + r) & 3)
     * its word b of block a + 8k, element 4a + b + 32k. Otherwise (rows of
     * odd length) each element draws its own word. */
    __device__ void strided_factors(int j0, int lane, int c, float f[4]) const
    {
        if (!on) return;
        if (base % 4 == 0) {
            float mine[4] = {1.0f, 1.0f, 1.0f, 1.0f};
            if (j0 + 4 * lane < c) block_factors((uint64_t)(j0 / 4 + lane), mine);
            const int a = lane >> 2, b = lane & 3;
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int sel = ((lane >> 3) - r) & 3;
                const float send = sel == 0   ? mine[0]
                                   : sel == 1 ? mine[1]
                                   : sel == 2 ? mine[2]
                                              : mine[3];
                const int k = (b + r) & 3;
                const float got = AO_SHFL(send, a + 8 * k);
#pragma unroll
                for (int kk = 0; kk < 4; kk++)
                    if (kk == k) f[kk] = got;
            }
        } else {
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int j = j0 + lane + 32 * k;
                if (j < c) f[k] = drop_factor(ao_rng_u32(s, base + j), r);
            }
        }
    }
};

/* The attention-probabilities dropout over softmax rows of length T; the
 * masks (drop_row) only where T % 4 == 0 (drop_rows_of). */
struct drop_rows {
    dropout_args a;
    int T;
    const uint8_t *mask_in;
    uint8_t *mask_out;
    /* The stream of the dropout row a run of softmax rows last used: rows
     * i / T alike share it. */
    struct cache {
        int key = -1;
        ao_rng_stream s;
    };
    __device__ drop_row row(int i, cache &k) const
    {
        drop_row r;
        r.r = a.r;
        r.on = a.r.p > 0.0f;
        r.base = (uint64_t)(i % T) * (uint64_t)T;
        const size_t at = (size_t)i * (size_t)(T / 4);
        r.mask_in = r.on && mask_in ? mask_in + at : nullptr;
        r.mask_out = r.on && mask_out && !mask_in ? mask_out + at : nullptr;
        r.s = a.site;
        if (r.on && !r.mask_in) {
            if (i / T != k.key) {
                k.s = dropout_row_stream(a, (size_t)(i / T));
                k.key = i / T;
            }
            r.s = k.s;
        }
        return r;
    }
    __device__ drop_row row(int i) const
    {
        cache k;
        return row(i, k);
    }
};

drop_rows drop_rows_of(const ao_cuda_dropout_key &key, int T, const uint8_t *mask_in,
                       uint8_t *mask_out)
{
    const bool masks = T % 4 == 0;
    return drop_rows{dropout_args_of(key), T, masks ? mask_in : nullptr,
                     masks ? mask_out : nullptr};
}

/* softmax_forward_kernel's Out for the fused forward: att (floats, unless
 * NULL), the rows' (max, 1/sum) at stats (unless NULL) and dropout(att) in
 * type T. out4: out allows typed_store<T>::put4. */
template <ao_dtype T> struct softmax_dropout_out {
    float *att;
    float2 *stats;
    typed_store<T> out;
    drop_rows drop;
    bool out4;
    using cache = drop_rows::cache;
    struct writer {
        float *ar;
        float2 *st;
        typed_store<T> out;
        size_t off;
        drop_row d;
        bool out4;
        __device__ void stats(int lane, float mx, float inv) const
        {
            if (st && lane == 0) *st = make_float2(mx, inv);
        }
        __device__ void factors(int j0, int lane, int c, float *f) const
        {
            d.strided_factors(j0, lane, c, f);
        }
        __device__ void put(int j, float v, float factor) const
        {
            if (ar) ar[j] = v;
            out.put(off + j, d.apply(v, factor));
        }
        __device__ void put4(int q, float4 v) const
        {
            if (ar) reinterpret_cast<float4 *>(ar)[q] = v;
            if (d.on) {
                float f[4];
                d.block_factors((uint64_t)q, f);
                v.x *= f[0];
                v.y *= f[1];
                v.z *= f[2];
                v.w *= f[3];
            }
            const size_t i = off + 4 * (size_t)q;
            if (out4) {
                out.put4(i, v);
            } else {
                out.put(i, v.x);
                out.put(i + 1, v.y);
                out.put(i + 2, v.z);
                out.put(i + 3, v.w);
            }
        }
    };
    __device__ writer row(int r, int c, cache &k) const
    {
        return writer{att ? att + (size_t)r * c : nullptr,
                      stats ? stats + r : nullptr,
                      out,
                      (size_t)r * c,
                      drop.row(r, k),
                      out4};
    }
};

/* The input of a Map of type T (F32, BF16, F16), widened to floats (exact):
 * the value(s) at flat element i, i a multiple of 4 for load4 (p 16-byte
 * aligned for F32, 8 for 16 bits: load4_ok). */
template <ao_dtype T> struct typed_load {
    const void *p;
    __device__ float load(size_t i) const
    {
        return load_as_float(p, T, i);
    }
    __device__ float4 load4(size_t i) const
    {
        if (T == AO_F32)
            return *reinterpret_cast<const float4 *>(static_cast<const float *>(p) + i);
        return widen4<T>(*reinterpret_cast<const uint2 *>(static_cast<const uint16_t *>(p) + i));
    }
};

template <ao_dtype T> bool load4_ok(const void *p)
{
    return store4_ok<T>(p);
}

/* The softmax output a backward reads, computed again from the scores the
 * forward read (type T) and each row's (max, 1/sum) it stored: the same
 * softmax_exp(x, max) * inv, so the same bits as the forward's y. Storing
 * 16-bit scores instead of float probabilities halves what the score GEMM
 * writes and softmax reads, and the backward reads 2 bytes a probability
 * instead of 4 (bench/RESULTS.md, session 9). */
template <ao_dtype T> struct softmax_recomputed_y {
    typed_load<T> x;
    const float2 *stats;
    struct reader {
        typed_load<T> x;
        size_t off;
        float mx, inv;
        __device__ float at(int j) const
        {
            return softmax_exp(x.load(off + j), mx) * inv;
        }
        __device__ float4 at4(int q) const
        {
            const float4 v = x.load4(off + 4 * (size_t)q);
            return make_float4(softmax_exp(v.x, mx) * inv, softmax_exp(v.y, mx) * inv,
                               softmax_exp(v.z, mx) * inv, softmax_exp(v.w, mx) * inv);
        }
    };
    __device__ reader row(int r, int c) const
    {
        const float2 st = stats[r];
        return reader{x, (size_t)r * c, st.x, st.y};
    }
    bool vec_ok() const
    {
        return load4_ok<T>(x.p);
    }
};

/* ... of ao_cuda_gelu_dropout: gelu(h) in (h of type TI), out in type T. */
template <ao_dtype T, ao_dtype TI> struct gelu_dropout_map {
    typed_store<T> out;
    typed_load<TI> h;
    __device__ float load(size_t i) const
    {
        return gelu_forward_op{}(h.load(i), 0.0f);
    }
    __device__ float4 load4(size_t i) const
    {
        const float4 v = h.load4(i);
        const gelu_forward_op g{};
        return make_float4(g(v.x, 0.0f), g(v.y, 0.0f), g(v.z, 0.0f), g(v.w, 0.0f));
    }
    __device__ void store(size_t i, float v) const
    {
        out.put(i, v);
    }
    __device__ void store4(size_t i, float4 v) const
    {
        out.put4(i, v);
    }
};

/* ... of ao_cuda_dropout_gelu_backward: dy in (type TI, as h), dx = gelu'(h)
 * * dropped dy out as floats unless dx is NULL and, when dx16 is set, in half
 * type T. */
template <ao_dtype T, ao_dtype TI> struct dropout_gelu_backward_map : typed_load<TI> {
    float *dx;
    typed_store<T> dx16;
    typed_load<TI> h;
    __device__ void store(size_t i, float v) const
    {
        const float g = gelu_backward_op{}(v, h.load(i));
        if (dx) dx[i] = g;
        if (dx16.p) dx16.put(i, g);
    }
    __device__ void store4(size_t i, float4 v) const
    {
        const float4 x = h.load4(i);
        const gelu_backward_op op{};
        const float4 g = make_float4(op(v.x, x.x), op(v.y, x.y), op(v.z, x.z), op(v.w, x.w));
        if (dx) *reinterpret_cast<float4 *>(dx + i) = g;
        if (dx16.p) dx16.put4(i, g);
    }
};

/* dropout_kernel's Map of the plain dropout and of its fused ends
 * (ao_cuda_dropout, _residual): x in (fp32); v = dropped x (+ res) out, as
 * floats at y unless y is NULL, and in type T at out unless out.p is NULL.
 * The add is __fadd_rn so that the compiler cannot contract the mask's
 * product into it: the sum is the one a dropout followed by ao_cuda_add
 * stores. */
template <ao_dtype T> struct dropout_out_map : typed_load<AO_F32> {
    float *y;
    typed_store<T> out;
    const float *res;
    __device__ void store(size_t i, float v) const
    {
        const float o = res ? __fadd_rn(v, res[i]) : v;
        if (y) y[i] = o;
        if (out.p) out.put(i, o);
    }
    __device__ void store4(size_t i, float4 v) const
    {
        if (res) {
            const float4 r = *reinterpret_cast<const float4 *>(res + i);
            v = make_float4(__fadd_rn(v.x, r.x), __fadd_rn(v.y, r.y), __fadd_rn(v.z, r.z),
                            __fadd_rn(v.w, r.w));
        }
        if (y) *reinterpret_cast<float4 *>(y + i) = v;
        if (out.p) out.put4(i, v);
    }
};

/* The dropout of LayerNorm backward's dx, fused (ao_cuda_layernorm_backward_
 * dropout): dx's row `row` of c is token row % tokens of sample row / tokens,
 * whose dropout row is tokens * c long, so float4 q of dx's row is group
 * ((row % tokens) * c) / 4 + q of the sample's mask stream (c % 4 == 0): the
 * mask, product and stores of dropout_kernel's Vec path with
 * dropout_out_map (its x unused: dx arrives as the kernel computes it). */
template <ao_dtype T> struct ln_dropout_tail {
    dropout_out_map<T> m;
    dropout_args k;
    int tokens, c;
    __device__ ao_rng_stream begin_row(int row) const
    {
        return k.r.p > 0.0f ? dropout_row_stream(k, (size_t)(row / tokens)) : k.site;
    }
    __device__ void put4(ao_rng_stream s, int row, int q, float4 v) const
    {
        if (k.r.p > 0.0f) v = drop4(v, s, (size_t)(row % tokens) * (size_t)c / 4 + (size_t)q, k.r);
        m.store4((size_t)row * (size_t)c + 4 * (size_t)q, v);
    }
};

/* ---- synthetic data ------------------------------------------------------------- */

/* grid.y walks the batch's samples; the block derives sample b's stream of
 * `purpose` once. Each thread then draws one Philox block (4 words: 4 ids,
 * weights or targets, or 2 normals). */
struct data_fill_args {
    uint64_t seed, first;
    int batch, vocab;
    size_t dense_per_sample, ids_per_sample, tokens;
    float *dense, *target, *weight;
    int32_t *ids;
};

__global__ void data_field_kernel(data_fill_args a, uint32_t purpose)
{
    pdl_wait();
    __shared__ ao_rng_stream sample_stream;
    const size_t per_sample = purpose == AO_RNG_DATA_DENSE ? a.dense_per_sample
                              : purpose == AO_RNG_DATA_IDS ? a.ids_per_sample
                                                           : a.tokens;
    const size_t per_block = purpose == AO_RNG_DATA_DENSE ? 2 : 4; /* values per Philox block */
    const size_t groups = (per_sample + per_block - 1) / per_block;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t b = blockIdx.y; b < (size_t)a.batch; b += gridDim.y) {
        if (threadIdx.x == 0) sample_stream = ao_data_stream(a.seed, purpose, a.first + b);
        __syncthreads();
        const ao_rng_stream s = sample_stream;
        for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
            const ao_u32x4 w = ao_rng_block(s, g);
            for (size_t l = 0; l < per_block; l++) {
                const size_t e = g * per_block + l;
                if (e >= per_sample) break;
                const size_t at = b * per_sample + e;
                switch (purpose) {
                case AO_RNG_DATA_DENSE: /* ao_rng_normal: lanes 2l, 2l+1 of block e/2 */
                    a.dense[at] = ao_rng_box_muller(w.v[2 * l], w.v[2 * l + 1]);
                    break;
                case AO_RNG_DATA_IDS:
                    a.ids[at] = ao_data_id_from_word(w.v[l], a.vocab);
                    break;
                case AO_RNG_DATA_WEIGHT:
                    a.weight[at] = ao_data_weight_from_uniform(ao_rng_u32_to_uniform(w.v[l]));
                    break;
                default: /* AO_RNG_DATA_TARGET */
                    a.target[at] = ao_rng_u32_to_uniform(w.v[l]);
                    break;
                }
            }
        }
        __syncthreads();
    }
}

/* The teacher's dense projection u (dense_dim normals, the same for every
 * token) is drawn once a block into shared memory when it fits (u_shared):
 * per token it cost 128 double-precision Box-Muller draws on the large
 * config, 0.8-1.3 ms a step of SMs taken from the compute stream's kernels
 * (bench/RESULTS.md, session 11). The same floats either way. */
__global__ void teacher_target_kernel(data_fill_args a, int num_dense, int dense_dim,
                                      int num_sparse, bool u_shared)
{
    extern __shared__ float u[];
    pdl_wait();
    if (u_shared) {
        const ao_rng_stream us = ao_rng_root(a.seed, AO_RNG_TEACHER_DENSE);
        for (int i = (int)threadIdx.x; i < dense_dim; i += (int)blockDim.x)
            u[i] = ao_rng_normal(us, (uint64_t)i);
        __syncthreads();
    }
    const size_t total = (size_t)a.batch * a.tokens, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t tok = (size_t)blockIdx.x * blockDim.x + threadIdx.x; tok < total; tok += stride)
        a.target[tok] = ao_data_teacher_target_u(
            u_shared ? u : nullptr, a.seed, num_dense, dense_dim, num_sparse,
            a.dense + tok * num_dense * dense_dim, a.ids + tok * num_sparse);
}

} // namespace

/* ---- launchers ------------------------------------------------------------------- */

extern "C" void ao_cuda_set_dependent_launch(int on)
{
    dependent_launch = on != 0;
}

/* The bias gradient's terms from a 16-bit dy (the copy the GEMMs read): two
 * columns a thread (one 4-byte load), so that a warp reads 128 bytes of a
 * row as the fp32 sums do, from half the bytes. */
template <ao_dtype T> struct bias_grad_term16 {
    const uint16_t *dy;
    int c;
    template <int W> __device__ void get(int i, int j, sum2 (&v)[W]) const
    {
        const uint16_t *p = dy + (size_t)i * c + j;
        uint16_t h[W];
        if (W == 2) {
            const uint32_t q = *reinterpret_cast<const uint32_t *>(p);
            h[0] = (uint16_t)(q & 0xffffu), h[W - 1] = (uint16_t)(q >> 16);
        } else {
            for (int l = 0; l < W; l++) h[l] = p[l];
        }
        for (int l = 0; l < W; l++) v[l] = sum2{(double)load_as_float(h, T, (size_t)l), 0.0};
    }
    int width() const
    {
        return c % 2 == 0 && ((uintptr_t)dy & 3u) == 0 ? 2 : 1;
    }
};

extern "C" cudaError_t ao_cuda_bias_grad(float *db, const void *dy, ao_dtype dy_type, int n, int c,
                                         cudaStream_t stream)
{
    switch (dy_type) {
    case AO_F32:
        return column_sums(db, (float *)nullptr, n, c, bias_grad_term{(const float *)dy, c},
                           stream);
    case AO_BF16:
        return column_sums(db, (float *)nullptr, n, c,
                           bias_grad_term16<AO_BF16>{(const uint16_t *)dy, c}, stream);
    case AO_F16:
        return column_sums(db, (float *)nullptr, n, c,
                           bias_grad_term16<AO_F16>{(const uint16_t *)dy, c}, stream);
    default:
        return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t ao_cuda_add(float *y, const float *a, const float *b, size_t n,
                                   cudaStream_t stream)
{
    return launch_map(y, a, b, n, add_op{}, stream);
}

extern "C" cudaError_t ao_cuda_scale(float *y, const float *x, float alpha, size_t n,
                                     cudaStream_t stream)
{
    return launch_map(y, x, (const float *)nullptr, n, scale_op{alpha}, stream);
}

extern "C" cudaError_t ao_cuda_gelu_forward(float *y, const float *x, size_t n, cudaStream_t stream)
{
    return launch_map(y, x, (const float *)nullptr, n, gelu_forward_op{}, stream);
}

extern "C" cudaError_t ao_cuda_gelu_backward(float *dx, const float *dy, const float *x, size_t n,
                                             cudaStream_t stream)
{
    return launch_map(dx, dy, x, n, gelu_backward_op{}, stream);
}

extern "C" cudaError_t ao_cuda_layernorm_forward(float *y, void *y16, ao_dtype half_type,
                                                 float *mean, float *rstd, const float *x,
                                                 const float *gamma, const float *beta, int n,
                                                 int c, cudaStream_t stream)
{
    if (y16 && half_type != AO_BF16 && half_type != AO_F16) return cudaErrorInvalidValue;
    if (n <= 0 || c <= 0) return cudaSuccess;
    return with_dtype(y16 ? half_type : AO_F32, [&](auto tag) {
        constexpr ao_dtype H = decltype(tag)::value;
        const bool vec = c % 4 == 0 && aligned16(x) && aligned16(y) && aligned16(gamma) &&
                         aligned16(beta) && (!y16 || aligned8(y16));
        if (!vec || !with_row_k(c, [&](auto ktag) {
                constexpr int K = decltype(ktag)::value;
                launch(layernorm_forward_rows_kernel<H, K>, row_blocks(n), kThreads, 0, stream, y,
                       y16, mean, rstd, x, gamma, beta, n, c);
            }))
            launch(layernorm_forward_kernel<H>, row_warp_blocks(n), kThreads, 0, stream, y, y16,
                   mean, rstd, x, gamma, beta, n, c);
        return cudaGetLastError();
    });
}

/* The rows of ao_cuda_layernorm_backward that its block-a-row kernels take. */
static bool layernorm_backward_vec(const float *dx, const float *dy, const float *x,
                                   const float *gamma, int c)
{
    return c % 4 == 0 && aligned16(dx) && aligned16(dy) && aligned16(x) && aligned16(gamma);
}

extern "C" cudaError_t ao_cuda_layernorm_backward(float *dx, float *dgamma, float *dbeta,
                                                  const float *dy, const float *x,
                                                  const float *mean, const float *rstd,
                                                  const float *gamma, int n, int c,
                                                  cudaStream_t stream)
{
    if (n <= 0 || c <= 0) return cudaSuccess;
    cudaError_t err = cudaSuccess;
    if (layernorm_backward_vec(dx, dy, x, gamma, c) &&
        launch_layernorm_backward_rows(dx, dgamma, dbeta, dy, x, mean, rstd, gamma, n, c,
                                       no_ln_tail{}, stream, &err))
        return err;
    launch(layernorm_backward_dx_kernel, row_warp_blocks(n), kThreads, 0, stream, dx, dy, x, mean,
           rstd, gamma, n, c);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    return column_sums(dgamma, dbeta, n, c, layernorm_param_term{dy, x, mean, rstd, c}, stream);
}

extern "C" cudaError_t ao_cuda_layernorm_backward_dropout(
    float *dx, float *dgamma, float *dbeta, const float *dy, const float *x, const float *mean,
    const float *rstd, const float *gamma, int n, int c, float *y, void *y16, ao_dtype half_type,
    int batch, const ao_cuda_dropout_key *key, cudaStream_t stream)
{
    if (y16 && half_type != AO_BF16 && half_type != AO_F16) return cudaErrorInvalidValue;
    if (n <= 0 || c <= 0) return cudaSuccess;
    if (batch <= 0 || n % batch != 0) return cudaErrorInvalidValue;
    const int tokens = n / batch;
    return with_dtype(y16 ? half_type : AO_F32, [&](auto tag) {
        constexpr ao_dtype T = decltype(tag)::value;
        cudaError_t err = cudaSuccess;
        const ln_dropout_tail<T> tail{dropout_out_map<T>{{dx}, y, typed_store<T>{y16}, NULL},
                                      dropout_args_of(*key), tokens, c};
        if (key->heads <= 0 && layernorm_backward_vec(dx, dy, x, gamma, c) &&
            (!y || aligned16(y)) && (!y16 || store4_ok<T>(y16)) &&
            launch_layernorm_backward_rows(dx, dgamma, dbeta, dy, x, mean, rstd, gamma, n, c, tail,
                                           stream, &err))
            return err;
        /* the chain it fuses */
        err = ao_cuda_layernorm_backward(dx, dgamma, dbeta, dy, x, mean, rstd, gamma, n, c, stream);
        if (err != cudaSuccess) return err;
        return ao_cuda_dropout_residual(y, y16, half_type, dx, NULL, batch,
                                        (size_t)tokens * (size_t)c, key, stream);
    });
}

extern "C" cudaError_t ao_cuda_softmax_forward(float *y, const float *x, int n, int c,
                                               cudaStream_t stream)
{
    return launch_softmax_forward(softmax_plain_out{y}, aligned16(y), typed_load<AO_F32>{x},
                                  aligned16(x), n, c, stream);
}

extern "C" cudaError_t ao_cuda_softmax_backward(float *dx, const float *dy, const float *y,
                                                float scale, int n, int c, cudaStream_t stream)
{
    return launch_softmax_backward(typed_store<AO_F32>{dx}, aligned16(dx), typed_load<AO_F32>{dy},
                                   aligned16(dy), softmax_stored_y{y}, scale, n, c, no_drop_rows{},
                                   stream);
}

extern "C" cudaError_t ao_cuda_dropout_residual(float *y, void *y16, ao_dtype half_type,
                                                const float *x, const float *res, int batch,
                                                size_t per_row, const ao_cuda_dropout_key *key,
                                                cudaStream_t stream)
{
    if (y16 && half_type != AO_BF16 && half_type != AO_F16) return cudaErrorInvalidValue;
    return with_dtype(y16 ? half_type : AO_F32, [&](auto tag) {
        constexpr ao_dtype T = decltype(tag)::value;
        const bool vec =
            aligned16(x) && aligned16(y) && (!res || aligned16(res)) && (!y16 || store4_ok<T>(y16));
        return launch_dropout_map(dropout_out_map<T>{{x}, y, typed_store<T>{y16}, res}, vec, batch,
                                  per_row, *key, stream);
    });
}

extern "C" cudaError_t ao_cuda_dropout(float *y, const float *x, int batch, size_t per_row,
                                       const ao_cuda_dropout_key *key, cudaStream_t stream)
{
    const size_t rows = (size_t)(batch > 0 ? batch : 0) * (size_t)(key->heads > 0 ? key->heads : 1);
    const size_t total = rows * per_row;
    if (total == 0) return cudaSuccess;
    if (key->p <= 0.0f) {
        if (y == x) return cudaSuccess;
        return cudaMemcpyAsync(y, x, total * sizeof(float), cudaMemcpyDeviceToDevice, stream);
    }
    return launch_dropout_map(dropout_out_map<AO_F32>{{x}, y, typed_store<AO_F32>{NULL}, NULL},
                              aligned16(x) && aligned16(y), batch, per_row, *key, stream);
}

extern "C" cudaError_t ao_cuda_embedding_bag_mean_forward(float *out, const int32_t *ids,
                                                          const float *table, int n, int s, int e,
                                                          cudaStream_t stream)
{
    const size_t total = (size_t)(n > 0 ? n : 0) * (size_t)(e > 0 ? e : 0);
    if (total == 0) return cudaSuccess;
    launch(embedding_bag_forward_kernel, elem_blocks(total), kThreads, 0, stream, out, ids, table,
           n, s, e);
    return cudaGetLastError();
}

/* Workspace: keys in/out, positions in/out (count uint32 each), then CUB's
 * temporary storage, each 256-byte aligned. */
static size_t embedding_sort_temp_bytes(size_t count, int vocab)
{
    size_t temp = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, temp, (const uint32_t *)nullptr, (uint32_t *)nullptr,
                                    (const uint32_t *)nullptr, (uint32_t *)nullptr, (int)count, 0,
                                    key_bits(vocab));
    return temp;
}

extern "C" size_t ao_cuda_embedding_bag_backward_workspace(int n, int s, int vocab)
{
    const size_t count = (size_t)(n > 0 ? n : 0) * (size_t)(s > 0 ? s : 0);
    if (count == 0) return 0;
    return 4 * align256(count * sizeof(uint32_t)) +
           align256(embedding_sort_temp_bytes(count, vocab));
}

extern "C" cudaError_t ao_cuda_embedding_bag_mean_backward(float *dtable, const float *dout,
                                                           const int32_t *ids, int n, int s, int e,
                                                           int vocab, void *workspace,
                                                           cudaStream_t stream)
{
    const size_t count = (size_t)(n > 0 ? n : 0) * (size_t)(s > 0 ? s : 0);
    if (count == 0 || e <= 0) return cudaSuccess;
    if (count > (size_t)INT32_MAX) return cudaErrorInvalidValue; /* CUB's item count is int */
    const size_t arr = align256(count * sizeof(uint32_t));
    unsigned char *ws = (unsigned char *)workspace;
    uint32_t *keys_in = (uint32_t *)ws, *keys_out = (uint32_t *)(ws + arr);
    uint32_t *pos_in = (uint32_t *)(ws + 2 * arr), *pos_out = (uint32_t *)(ws + 3 * arr);
    void *temp = ws + 4 * arr;
    size_t temp_bytes = embedding_sort_temp_bytes(count, vocab);

    launch(embedding_sort_input_kernel, elem_blocks(count), kThreads, 0, stream, keys_in, pos_in,
           ids, count);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    err = cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, pos_in, pos_out,
                                          (int)count, 0, key_bits(vocab), stream);
    if (err != cudaSuccess) return err;
    const unsigned blocks = (unsigned)((count + kWarpsPerBlock - 1) / kWarpsPerBlock);
    launch(embedding_segment_add_kernel, blocks, kThreads, 0, stream, dtable, dout, keys_out,
           pos_out, count, s, e);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_bce_loss(float *loss, const float *z, const float *y, const float *w,
                                        int n, double normalizer, cudaStream_t stream)
{
    launch(bce_loss_kernel, 1, kLossThreads, 0, stream, loss, z, y, w, n > 0 ? n : 0, normalizer);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_bce_loss_backward(float *dz, const float *z, const float *y,
                                                 const float *w, int n, double normalizer,
                                                 cudaStream_t stream)
{
    if (n <= 0) return cudaSuccess;
    launch(bce_loss_backward_kernel, elem_blocks((size_t)n), kThreads, 0, stream, dz, z, y, w, n,
           normalizer);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_sum_squares(double *out, const float *x, size_t n, double *partials,
                                           cudaStream_t stream)
{
    launch(sum_squares_partial_kernel, AO_CUDA_REDUCE_PARTIALS, kReduceThreads, 0, stream, partials,
           x, n);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    launch(sum_partials_kernel, 1, AO_CUDA_REDUCE_PARTIALS, 0, stream, out, partials,
           AO_CUDA_REDUCE_PARTIALS);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_has_nonfinite(int *flag, const float *x, size_t n,
                                             cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    launch(has_nonfinite_kernel, elem_blocks(n), kThreads, 0, stream, flag, x, n);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_clip_coef(float *coef, const double *sq_norm, float max_norm,
                                         float extra, cudaStream_t stream)
{
    launch(clip_coef_kernel, 1, 1, 0, stream, coef, sq_norm, max_norm, extra);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_step_scalars(double *out, const double *sq, int nsq,
                                            double norm_scale, const float *loss, int nloss,
                                            double stop, cudaStream_t stream)
{
    launch(step_scalars_kernel, 1, 1, 0, stream, out, sq, nsq, norm_scale, loss, nloss, stop);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_norm_result(double *result, const double *sq_norm, const float *coef,
                                           cudaStream_t stream)
{
    launch(norm_result_kernel, 1, 1, 0, stream, result, sq_norm, coef);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_adamw_step(float *param, void *param16, ao_dtype param16_type,
                                          const float *grad, float *m, float *v, size_t n,
                                          const ao_cuda_adamw *h, float lr, int64_t step,
                                          float grad_scale, const float *grad_scale_dev,
                                          cudaStream_t stream)
{
    if (param16 && param16_type != AO_BF16 && param16_type != AO_F16) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    /* ao_adamw_step's scalars, computed the same way on the host. */
    const double bc1 = 1.0 - pow((double)h->beta1, (double)step);
    const double bc2 = 1.0 - pow((double)h->beta2, (double)step);
    adamw_scalars k;
    k.step_size = (float)(lr / bc1);
    k.bc2_sqrt = (float)sqrt(bc2);
    k.decay = (float)(1.0 - (double)lr * h->weight_decay);
    k.one_minus_b1 = 1.0f - h->beta1;
    k.one_minus_b2 = 1.0f - h->beta2;
    k.beta2 = h->beta2;
    k.eps = h->eps;
    k.grad_scale = grad_scale;
    return with_dtype(param16 ? param16_type : AO_F32, [&](auto tag) {
        constexpr ao_dtype T = decltype(tag)::value;
        const bool vec = aligned16(param) && aligned16(grad) && aligned16(m) && aligned16(v) &&
                         (!param16 || store4_ok<T>(param16));
        launch(adamw_kernel<T>, elem_blocks(n, 4), kThreads, 0, stream, param, param16, grad, m, v,
               n, k, grad_scale_dev, vec);
        return cudaGetLastError();
    });
}

extern "C" cudaError_t ao_cuda_cast_parts(void *dst, ao_dtype dst_type, const void *src,
                                          ao_dtype src_type, const size_t (*parts)[2], int nparts,
                                          cudaStream_t stream)
{
    if (nparts < 0 || nparts > AO_CUDA_CAST_PARTS || !castable(dst_type) || !castable(src_type))
        return cudaErrorInvalidValue;
    if (nparts == 1) {
        const size_t o = parts[0][0];
        return ao_cuda_cast((char *)dst + o * (dst_type == AO_F32 ? 4 : 2), dst_type,
                            (const char *)src + o * (src_type == AO_F32 ? 4 : 2), src_type,
                            parts[0][1], stream);
    }
    cast_parts_arg a = {};
    a.n = nparts;
    for (int p = 0; p < nparts; p++) {
        a.off[p] = parts[p][0];
        a.first[p + 1] = a.first[p] + parts[p][1];
    }
    if (a.first[nparts] == 0) return cudaSuccess;
    launch(cast_parts_kernel, elem_blocks(a.first[nparts]), kThreads, 0, stream, dst, dst_type, src,
           src_type, a);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_cast(void *dst, ao_dtype dst_type, const void *src,
                                    ao_dtype src_type, size_t n, cudaStream_t stream)
{
    if (!castable(dst_type) || !castable(src_type)) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    if (dst_type == src_type)
        return cudaMemcpyAsync(dst, src, n * (src_type == AO_F32 ? 4 : 2), cudaMemcpyDeviceToDevice,
                               stream);
    /* fp32 <-> 16 bits, 4 elements a thread where both sides are aligned */
    const size_t n4 = n / 4;
    const void *wide = src_type == AO_F32 ? src : dst, *narrow = src_type == AO_F32 ? dst : src;
    if ((src_type == AO_F32) != (dst_type == AO_F32) && n4 > 0 && (uintptr_t)wide % 16 == 0 &&
        (uintptr_t)narrow % 8 == 0) {
        const size_t g = elem_blocks(n4);
        if (dst_type == AO_BF16)
            launch(cast_down4_kernel<AO_BF16>, g, kThreads, 0, stream, (uint2 *)dst,
                   (const float4 *)src, n4);
        else if (dst_type == AO_F16)
            launch(cast_down4_kernel<AO_F16>, g, kThreads, 0, stream, (uint2 *)dst,
                   (const float4 *)src, n4);
        else if (src_type == AO_BF16)
            launch(cast_up4_kernel<AO_BF16>, g, kThreads, 0, stream, (float4 *)dst,
                   (const uint2 *)src, n4);
        else
            launch(cast_up4_kernel<AO_F16>, g, kThreads, 0, stream, (float4 *)dst,
                   (const uint2 *)src, n4);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess || n4 * 4 == n) return e;
        /* the tail: fewer than 4 elements */
        const size_t done = n4 * 4;
        launch(cast_kernel, 1, kThreads, 0, stream,
               (char *)dst + done * (dst_type == AO_F32 ? 4 : 2), dst_type,
               (const char *)src + done * (src_type == AO_F32 ? 4 : 2), src_type, n - done);
        return cudaGetLastError();
    }
    launch(cast_kernel, elem_blocks(n), kThreads, 0, stream, dst, dst_type, src, src_type, n);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_data_fill(const ao_data_shape *shape, uint64_t seed, int target_kind,
                                         uint64_t first_global_index, int batch, float *dense,
                                         int32_t *ids, float *target, float *weight,
                                         cudaStream_t stream)
{
    if (batch <= 0) return cudaSuccess;
    data_fill_args a;
    a.seed = seed;
    a.first = first_global_index;
    a.batch = batch;
    a.vocab = shape->vocab;
    a.tokens = (size_t)shape->seq_len;
    a.dense_per_sample = a.tokens * shape->num_dense * shape->dense_dim;
    a.ids_per_sample = a.tokens * shape->num_sparse;
    a.dense = dense;
    a.ids = ids;
    a.target = target;
    a.weight = weight;

    const uint32_t fields[] = {AO_RNG_DATA_DENSE, AO_RNG_DATA_IDS, AO_RNG_DATA_WEIGHT,
                               AO_RNG_DATA_TARGET};
    const size_t values[] = {a.dense_per_sample, a.ids_per_sample, a.tokens, a.tokens};
    const size_t per_block[] = {2, 4, 4, 4};
    const int nfields = target_kind == AO_TARGET_RANDOM ? 4 : 3;
    for (int f = 0; f < nfields; f++) {
        const size_t groups = (values[f] + per_block[f] - 1) / per_block[f];
        const dim3 grid(elem_blocks(groups), grid_y((size_t)batch));
        launch(data_field_kernel, grid, kThreads, 0, stream, a, fields[f]);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
    }
    if (target_kind == AO_TARGET_TEACHER) {
        const bool u_shared = shape->dense_dim <= 8192; /* 32 KiB */
        launch(teacher_target_kernel, elem_blocks((size_t)batch * a.tokens), kThreads,
               u_shared ? (size_t)shape->dense_dim * sizeof(float) : 0, stream, a, shape->num_dense,
               shape->dense_dim, shape->num_sparse, u_shared);
        return cudaGetLastError();
    }
    return cudaSuccess;
}

/* ---- fused chains ------------------------------------------------------------------ */

/* f(tag of x_type) where x_type is AO_F32 or OT, a kernel's output type (an
 * input of its 16-bit type, widened exactly); cudaErrorInvalidValue
 * otherwise. */
template <ao_dtype OT, class F> cudaError_t with_input_dtype(ao_dtype x_type, F &&f)
{
    if (x_type == AO_F32) return f(dtype_tag<AO_F32>{});
    if (x_type == OT) return f(dtype_tag<OT>{});
    return cudaErrorInvalidValue;
}

extern "C" cudaError_t ao_cuda_softmax_dropout_forward(float *att, float *stats, void *out,
                                                       ao_dtype out_type, const void *scores,
                                                       ao_dtype scores_type, int batch, int heads,
                                                       int T, const ao_cuda_dropout_key *key,
                                                       uint8_t *mask_out, cudaStream_t stream)
{
    if (key->heads != heads) return cudaErrorInvalidValue;
    const drop_rows drop = drop_rows_of(*key, T, nullptr, mask_out);
    const int n = batch * heads * T;
    return with_dtype(out_type, [&](auto otag) {
        constexpr ao_dtype OT = decltype(otag)::value;
        const softmax_dropout_out<OT> o = {att, reinterpret_cast<float2 *>(stats),
                                           typed_store<OT>{out}, drop, store4_ok<OT>(out)};
        return with_input_dtype<OT>(scores_type, [&](auto xtag) {
            constexpr ao_dtype XT = decltype(xtag)::value;
            return launch_softmax_forward(o, !att || aligned16(att), typed_load<XT>{scores},
                                          load4_ok<XT>(scores), n, T, stream);
        });
    });
}

extern "C" cudaError_t ao_cuda_softmax_dropout_backward(void *out, ao_dtype out_type,
                                                        const void *dp, ao_dtype dp_type,
                                                        const ao_cuda_softmax_saved *saved,
                                                        float scale, int batch, int heads, int T,
                                                        const ao_cuda_dropout_key *key,
                                                        const uint8_t *mask_in, cudaStream_t stream)
{
    if (key->heads != heads) return cudaErrorInvalidValue;
    if (!saved->att && !saved->stats) return cudaErrorInvalidValue;
    const drop_rows drop = drop_rows_of(*key, T, mask_in, nullptr);
    const int n = batch * heads * T;
    /* every (out, dP, y) combination: y stored, or recomputed from scores of
     * the type dP may have */
    const ao_dtype y_type = saved->att ? AO_F32 : saved->scores_type;
    return with_dtype(out_type, [&](auto otag) {
        constexpr ao_dtype OT = decltype(otag)::value;
        const typed_store<OT> dx{out};
        return with_input_dtype<OT>(dp_type, [&](auto dtag) {
            constexpr ao_dtype DT = decltype(dtag)::value;
            const typed_load<DT> dy{dp};
            if (saved->att)
                return launch_softmax_backward(dx, store4_ok<OT>(out), dy, load4_ok<DT>(dp),
                                               softmax_stored_y{saved->att}, scale, n, T, drop,
                                               stream);
            return with_input_dtype<OT>(y_type, [&](auto ytag) {
                constexpr ao_dtype YT = decltype(ytag)::value;
                const softmax_recomputed_y<YT> y = {typed_load<YT>{saved->scores},
                                                    reinterpret_cast<const float2 *>(saved->stats)};
                return launch_softmax_backward(dx, store4_ok<OT>(out), dy, load4_ok<DT>(dp), y,
                                               scale, n, T, drop, stream);
            });
        });
    });
}

extern "C" size_t ao_cuda_dropout_mask_bytes(int rows, size_t per_row)
{
    return (size_t)(rows > 0 ? rows : 0) * ((per_row + 3) / 4);
}

extern "C" cudaError_t ao_cuda_gelu_dropout(void *out, ao_dtype out_type, const void *h,
                                            ao_dtype h_type, int batch, size_t per_row,
                                            const ao_cuda_dropout_key *key, uint8_t *mask_out,
                                            cudaStream_t stream)
{
    if (key->heads != 0) return cudaErrorInvalidValue;
    return with_dtype(out_type, [&](auto otag) {
        constexpr ao_dtype OT = decltype(otag)::value;
        return with_input_dtype<OT>(h_type, [&](auto htag) {
            constexpr ao_dtype HT = decltype(htag)::value;
            return launch_dropout_map(
                gelu_dropout_map<OT, HT>{typed_store<OT>{out}, typed_load<HT>{h}},
                store4_ok<OT>(out) && load4_ok<HT>(h), batch, per_row, *key, stream, nullptr,
                mask_out);
        });
    });
}

extern "C" cudaError_t ao_cuda_dropout_gelu_backward(float *dx, void *dx16, ao_dtype half_type,
                                                     const void *dy, const void *h,
                                                     ao_dtype in_type, int batch, size_t per_row,
                                                     const ao_cuda_dropout_key *key,
                                                     const uint8_t *mask_in, cudaStream_t stream)
{
    if (key->heads != 0) return cudaErrorInvalidValue;
    if (dx16 && half_type != AO_BF16 && half_type != AO_F16) return cudaErrorInvalidValue;
    if (!dx && !dx16) return cudaErrorInvalidValue;
    /* without dx16 the half type only picks an instantiation */
    const ao_dtype ht = dx16 ? half_type : in_type != AO_F32 ? in_type : AO_BF16;
    return with_dtype(ht, [&](auto tag) {
        constexpr ao_dtype HT = decltype(tag)::value;
        if (HT == AO_F32) return cudaErrorInvalidValue; /* excluded above */
        const bool vec = aligned16(dx) && (dx16 == nullptr || store4_ok<HT>(dx16));
        return with_input_dtype<HT>(in_type, [&](auto itag) {
            constexpr ao_dtype IT = decltype(itag)::value;
            return launch_dropout_map(
                dropout_gelu_backward_map<HT, IT>{
                    {dy}, dx, typed_store<HT>{dx16}, typed_load<IT>{h}},
                vec && load4_ok<IT>(dy) && load4_ok<IT>(h), batch, per_row, *key, stream, mask_in);
        });
    });
}
