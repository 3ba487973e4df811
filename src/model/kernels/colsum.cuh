/* Column sums: the bias gradients and LayerNorm's parameter gradients,
 * split over row chunks and tiles of columns with an order that depends
 * only on the shape, so the bits are the same on every device and run.
 * A term F says what is summed (F::get: the values of row i, columns
 * j .. j + W - 1); a heavy term computes them (and stores a pass's output)
 * as it goes: the FFN's GELU backward sums its own output
 * (elementwise.cu). Each translation unit that includes this has its own
 * partials buffer; its column sums run on one stream, in order. */
#ifndef AORTA_MODEL_KERNELS_COLSUM_CUH
#define AORTA_MODEL_KERNELS_COLSUM_CUH

#include "model/kernels/dtype.cuh"

namespace
{

constexpr int kColTile = 32;       /* columns per block of a column sum: one warp per row */
constexpr int kColLanes = 8;       /* warps per block, each summing every 8th row of the chunk */
constexpr int kColChunkRows = 256; /* rows one block sums (before the cap below) */
/* Rows a thread of the 8-column (16-bit) sums has in flight: kColDeep where
 * the grid is at most 2 blocks an SM (its loads are all the memory has in
 * flight), kColShallow at 8 blocks an SM (32 registers) on larger grids,
 * which the deep kernel (44 registers, 5 blocks an SM) would run in more
 * than one wave. Not part of the bits. */
constexpr int kColDeep = 8, kColShallow = 1;
/* ... and of a heavy term (F::heavy: one that does a pass's element work as
 * it reads, more registers than kColShallow's 32 allow) */
constexpr int kColHeavy = 2;

/* ---- column sums (bias and layernorm parameter gradients) ---------------- */

struct sum2 {
    double a, b;
};

/* Column partials of a split column sum, one double per (row chunk, column,
 * output). A static device buffer rather than a launcher argument so the
 * launchers keep their signatures and no call allocates: 2 MiB per device
 * and translation unit, loaded with the module. The launcher shrinks the number of row chunks so
 * that a call fits. Two column sums of one translation unit must not run at
 * the same time on one device (different streams): the model issues them on
 * its one compute stream, in order. */
constexpr size_t kColPartials = (size_t)1 << 18;
__device__ double column_partials[kColPartials];

/* Per column tile, how many of its row-chunk blocks have written their
 * partials; the last one combines them and resets the count to 0. */
constexpr int kColDoneTiles = 4096;
__device__ unsigned int column_done[kColDoneTiles];

/* Block (kColTile, kColLanes) at (blockIdx.x, blockIdx.y) sums rows
 * [blockIdx.y * chunk, + chunk) of W columns per thread, columns
 * (blockIdx.x * kColTile + tx) * W + l: lane ty takes every kColLanes-th row
 * (a warp reads 32 * W consecutive values of a row), then each column's
 * kColLanes lane sums are added in a fixed tree. With one chunk the block
 * adds straight into out. Otherwise it writes the chunk's partial (output o
 * at column_partials[(o * parts + chunk_index) * c + j]), and the tile's
 * last block to finish (threadFenceReduction's pattern: integer atomics, no
 * float ones) adds the partials in chunk order, so the bits do not depend on
 * which block was last. W = 2, 4 or 8 (wider loads, W independent sums per
 * thread: more bytes in flight) adds every column's terms in the same order
 * as W = 1, so the bits do not depend on W either. F::outputs (1 or 2) is
 * how many sums a term feeds (out_b unused for 1). One launch per column
 * sum. */
template <class F, int W, int U>
__device__ void column_partials_block(float *out_a, float *out_b, int n, int c, int col0, int chunk,
                                      const F &f, int tile, int part, int parts, int tx, int ty)
{
    constexpr int O = F::outputs, stride = kColTile + 1; /* padded: no bank conflicts */
    static_assert(kColTile * W <= kColTile * kColLanes, "a thread a column in the combine");
    /* lane ty's sums of output o, column (tile * kColTile + tx) * W + l, at
     * s[o][ty][l * stride + tx] */
    __shared__ double s[O][kColLanes][W * stride];
    __shared__ bool last;
    float *const out[2] = {out_a, out_b};
    const int j = col0 + (tile * kColTile + tx) * W; /* c % W == 0 */
    const int r0 = part * chunk, r1 = min(n, r0 + chunk);
    double acc[O][W];
#pragma unroll
    for (int l = 0; l < W; l++) {
        acc[0][l] = 0.0;
        acc[O - 1][l] = 0.0;
    }
    if (j < c) {
#pragma unroll U
        for (int i = r0 + ty; i < r1; i += kColLanes) {
            sum2 v[W];
            f.get(i, j, v);
#pragma unroll
            for (int l = 0; l < W; l++) {
                acc[0][l] += v[l].a;
                if (O == 2) acc[O - 1][l] += v[l].b;
            }
        }
    }
#pragma unroll
    for (int o = 0; o < O; o++)
#pragma unroll
        for (int l = 0; l < W; l++) s[o][ty][l * stride + tx] = acc[o][l];
    __syncthreads();
    /* From here thread t owns column jt = col0 + tile * kColTile * W + t of
     * the tile (coalesced stores); its lanes' sums in the tree
     * ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)). */
    static_assert(kColLanes == 8, "the tree below");
    const int t = ty * kColTile + tx;
    const int jt = col0 + tile * kColTile * W + t;
    const bool mine = t < kColTile * W && jt < c;
    double sum[O] = {};
    if (mine) {
        const int at = (t % W) * stride + t / W;
#pragma unroll
        for (int o = 0; o < O; o++) {
            const double(*q)[W * stride] = s[o];
            sum[o] = ((q[0][at] + q[4][at]) + (q[2][at] + q[6][at])) +
                     ((q[1][at] + q[5][at]) + (q[3][at] + q[7][at]));
        }
    }
    if (parts == 1) {
        if (mine)
#pragma unroll
            for (int o = 0; o < O; o++) out[o][jt] += (float)sum[o];
        return;
    }
    if (mine)
#pragma unroll
        for (int o = 0; o < O; o++) column_partials[((size_t)o * parts + part) * c + jt] = sum[o];
    __threadfence(); /* the partials are visible before the count says so */
    __syncthreads();
    if (t == 0) last = atomicAdd(&column_done[tile], 1u) == (unsigned)parts - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (mine) {
        /* chunk order; kBatch loads in flight at a time */
        constexpr int kBatch = 8 / O;
#pragma unroll
        for (int o = 0; o < O; o++) {
            const double *p = column_partials + (size_t)o * parts * c + jt;
            double a = 0.0;
            for (int k0 = 0; k0 < parts; k0 += kBatch) {
                double b[kBatch];
#pragma unroll
                for (int u = 0; u < kBatch; u++)
                    b[u] = k0 + u < parts ? AO_LDCG(p + (size_t)(k0 + u) * c) : 0.0;
#pragma unroll
                for (int u = 0; u < kBatch; u++)
                    if (k0 + u < parts) a += b[u];
            }
            out[o][jt] += (float)a;
        }
    }
    if (t == 0) column_done[tile] = 0;
}

/* One launch of column sums: the block at (blockIdx.x, blockIdx.y). */
template <class F, int W, int U>
__device__ __forceinline__ void column_partials_grid(float *out_a, float *out_b, int n, int c,
                                                     int col0, int chunk, const F &f)
{
    pdl_wait();
    column_partials_block<F, W, U>(out_a, out_b, n, c, col0, chunk, f, (int)blockIdx.x,
                                   (int)blockIdx.y, (int)gridDim.y, (int)threadIdx.x,
                                   (int)threadIdx.y);
}

template <class F, int W, int U>
__global__ void column_partials_kernel(float *out_a, float *out_b, int n, int c, int col0,
                                       int chunk, F f)
{
    column_partials_grid<F, W, U>(out_a, out_b, n, c, col0, chunk, f);
}

/* kColShallow rows in flight at 8 blocks an SM (32 registers a thread) */
template <class F, int W>
__global__ void __launch_bounds__(kColTile *kColLanes, 8)
    column_partials_kernel8(float *out_a, float *out_b, int n, int c, int col0, int chunk, F f)
{
    column_partials_grid<F, W, kColShallow>(out_a, out_b, n, c, col0, chunk, f);
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

/* out_a[j] += sum_i f(i, j).a and, when F::outputs is 2, out_b[j] += .b.
 * f.get(i, j, v) is called once for each (row, W columns) of [n, c], so a
 * heavy term may compute and store the pass's elements there too.
 * The chunking depends only on (n, c, outputs), so the order of the sums, and
 * hence the bits, are the same on every device and every run. f.get(i, j, v)
 * fills v[0..W) with the terms of columns j..j+W-1 of row i; f.width() is
 * the W it is read with (1, 2, 4 or 8: c % W == 0, its pointers aligned for
 * it). */
template <class F>
cudaError_t column_sums(float *out_a, float *out_b, int n, int c, F f, cudaStream_t stream)
{
    if (n <= 0 || c <= 0) return cudaSuccess;
    const column_split sp = split_columns(n, c, F::outputs, f.width());
    const int chunk = sp.chunk, w = sp.w, span = sp.span;
    const size_t parts = (size_t)sp.parts;
    const dim3 block(kColTile, kColLanes);
    int sms = 0;
    cudaError_t err = device_sms(&sms);
    if (err != cudaSuccess) return err;
    /* a launch per kColDoneTiles column tiles (one for any layer of the configs) */
    for (int col0 = 0; col0 < c; col0 += span) {
        const int cols = c - col0 < span ? c - col0 : span;
        const unsigned tiles = (unsigned)((cols + kColTile * w - 1) / (kColTile * w));
        const dim3 grid(tiles, (unsigned)parts);
        if constexpr (F::heavy) {
            if (w != 8) return cudaErrorInvalidValue;
            launch(column_partials_kernel<F, 8, kColHeavy>, grid, block, 0, stream, out_a, out_b, n,
                   c, col0, chunk, f);
        } else if (w == 8 && (size_t)tiles * parts <= 2 * (size_t)sms)
            launch(column_partials_kernel<F, 8, kColDeep>, grid, block, 0, stream, out_a, out_b, n,
                   c, col0, chunk, f);
        else if (w == 8)
            launch(column_partials_kernel8<F, 8>, grid, block, 0, stream, out_a, out_b, n, c, col0,
                   chunk, f);
        else if (w == 4)
            launch(column_partials_kernel<F, 4, 4>, grid, block, 0, stream, out_a, out_b, n, c,
                   col0, chunk, f);
        else if (w == 2)
            launch(column_partials_kernel<F, 2, 4>, grid, block, 0, stream, out_a, out_b, n, c,
                   col0, chunk, f);
        else
            launch(column_partials_kernel<F, 1, 4>, grid, block, 0, stream, out_a, out_b, n, c,
                   col0, chunk, f);
        err = cudaGetLastError();
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

/* W 16-bit values at p: one 16-byte load for W = 8 (p 16-byte aligned), one
 * 4-byte load for W = 2 (p 4-byte aligned). */
template <int W> __device__ void load_row16(const uint16_t *p, uint16_t (&h)[W])
{
    for (int l = 0; l < W; l++) h[l] = p[l];
}

__device__ void split_halves(const uint32_t *q, int words, uint16_t *h)
{
    for (int l = 0; l < words; l++)
        h[2 * l] = (uint16_t)(q[l] & 0xffffu), h[2 * l + 1] = (uint16_t)(q[l] >> 16);
}

template <> __device__ void load_row16<8>(const uint16_t *p, uint16_t (&h)[8])
{
    const uint4 u = *reinterpret_cast<const uint4 *>(p);
    const uint32_t q[4] = {u.x, u.y, u.z, u.w};
    split_halves(q, 4, h);
}

template <> __device__ void load_row16<2>(const uint16_t *p, uint16_t (&h)[2])
{
    split_halves(reinterpret_cast<const uint32_t *>(p), 1, h);
}

struct bias_grad_term {
    static constexpr int outputs = 1;
    static constexpr bool heavy = false;
    const float *dy;
    int c;
    template <int W> __device__ void get(int i, int j, sum2 (&v)[W]) const
    {
        float d[W];
        load_row<W>(dy, c, i, j, d);
        for (int l = 0; l < W; l++) v[l] = sum2{(double)d[l], 0.0};
    }
    /* One column a thread: float4s made the bias sums slower, a quarter of
     * the blocks for a single output; the LayerNorm sums (two outputs) got
     * faster (bench/RESULTS.md). */
    int width() const
    {
        return 1;
    }
};

/* The bias gradient's terms from a 16-bit dy (the copy the GEMMs read):
 * eight columns a thread (one 16-byte load: a warp reads 512 bytes of a
 * row) where c % 8 == 0 and dy is 16-byte aligned, else two (one 4-byte
 * load) or one. */
template <ao_dtype T> struct bias_grad_term16 {
    static constexpr int outputs = 1;
    static constexpr bool heavy = false;
    const uint16_t *dy;
    int c;
    template <int W> __device__ void get(int i, int j, sum2 (&v)[W]) const
    {
        uint16_t h[W];
        load_row16(dy + (size_t)i * c + j, h);
#pragma unroll
        for (int l = 0; l < W; l++) v[l] = sum2{(double)load_as_float(h, T, (size_t)l), 0.0};
    }
    int width() const
    {
        if (c % 8 == 0 && aligned16(dy)) return 8;
        return c % 2 == 0 && ((uintptr_t)dy & 3u) == 0 ? 2 : 1;
    }
};

} // namespace

#endif
