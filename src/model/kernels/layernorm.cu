/* LayerNorm forward and backward, its backward fused with the dropout that
 * follows it, and the column sums of the parameter gradients. The bias
 * gradient's column sums live here too: the fused LayerNorm backward sums
 * its parameter gradients in the same launch (column_partials_block), and
 * every column sum shares one partials buffer per device. */
#include "model/kernels/dropout.cuh"

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
                    b[u] = k0 + u < parts ? __ldcg(p + (size_t)(k0 + u) * c) : 0.0;
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
        if (w == 8 && (size_t)tiles * parts <= 2 * (size_t)sms)
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

/* ao_layernorm_backward's parameter gradients: (dy xhat, dy). */
struct layernorm_param_term {
    static constexpr int outputs = 2;
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

/* ---- layernorm ------------------------------------------------------------ */

/* One element of layernorm's output, as the reference computes it. */
__device__ float layernorm_out(float x, double m, double rs, float g, float b)
{
    return (float)((x - m) * rs) * g + b;
}

/* Rows with c % 4 == 0 and aligned pointers (the model's) go a block a row,
 * each thread holding K float4s of the row (and of dy in the backward) in
 * registers from one load: the row is read from memory once, where a warp a
 * row re-reads it for each of its passes (the forward's gain; the backward,
 * with two arrays a row and a block sync between its passes, runs about as
 * a warp a row does: bench/RESULTS.md). The per-element math is the reference's; only the order of
 * the double sums differs (their rounding). Other rows go a warp a row, scalar. */
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

/* A forward's Head gives float4 q of row `row` of its input: ln_input (x
 * itself) or ln_dropout_residual (x dropped, plus the residual, stored, as
 * ao_cuda_dropout_residual would store it). */
struct ln_input {
    static constexpr ao_dtype x_type = AO_F32;
    const float *x;
    __device__ int begin_row(int) const
    {
        return 0;
    }
    __device__ float4 get4(int, int row, int c, int q) const
    {
        return reinterpret_cast<const float4 *>(x + (size_t)row * c)[q];
    }
};

/* dropout_kernel's Vec path with dropout_out_map over sample rows of tokens
 * * c: float4 q of token row `row` is group ((row % tokens) * c) / 4 + q of
 * the sample's stream; the product, the __fadd_rn and the store are that
 * map's, so r holds ao_cuda_dropout_residual's bits (of x widened to float
 * when X is a 16-bit type). r may alias x (X = AO_F32) or res. */
template <ao_dtype X> struct ln_dropout_residual {
    static constexpr ao_dtype x_type = X;
    float *r;
    typed_load<X> x;
    const float *res;
    dropout_args k;
    int tokens;
    __device__ ao_rng_stream begin_row(int row) const
    {
        return k.r.p > 0.0f ? dropout_row_stream(k, (size_t)(row / tokens)) : k.site;
    }
    __device__ float4 get4(ao_rng_stream s, int row, int c, int q) const
    {
        const size_t at = (size_t)row * c + 4 * (size_t)q;
        float4 v = x.load4(at);
        const float4 a = *reinterpret_cast<const float4 *>(res + at);
        if (k.r.p > 0.0f) v = drop4(v, s, (size_t)(row % tokens) * (size_t)c / 4 + (size_t)q, k.r);
        v = add4_rn(v, a);
        *reinterpret_cast<float4 *>(r + at) = v;
        return v;
    }
};

/* H != AO_F32: y's values are also stored in half type H at y16 (the next
 * GEMM's operand), from the same float (y16 8-byte aligned). */
template <ao_dtype H, int K, class Head>
__global__ void layernorm_forward_rows_kernel(float *y, void *y16, float *mean, float *rstd,
                                              Head in, const float *gamma, const float *beta, int n,
                                              int c)
{
    pdl_wait();
    const int c4 = c / 4, t = (int)threadIdx.x;
    const float4 *g4 = reinterpret_cast<const float4 *>(gamma);
    const float4 *b4 = reinterpret_cast<const float4 *>(beta);
    for (int row = blockIdx.x; row < n; row += gridDim.x) {
        const auto row_state = in.begin_row(row);
        float4 v[K];
        double s = 0.0;
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int q = t + k * kThreads;
            if (q < c4) {
                v[k] = in.get4(row_state, row, c, q);
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
 * registers) for the model's rows, since the registers it would take
 * otherwise leave too few rows in flight for the memory (Nsight Compute,
 * bench/RESULTS.md); 2 where 64 would spill. */
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
    column_partials_block<layernorm_param_term, 4, 4>(dgamma, dbeta, n, c, 0, chunk,
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

/* ---- LayerNorm backward + dropout, fused --------------------------------- */

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

} // namespace

/* ---- launchers ------------------------------------------------------------- */

/* The bias gradient's terms from a 16-bit dy (the copy the GEMMs read):
 * eight columns a thread (one 16-byte load: a warp reads 512 bytes of a
 * row) where c % 8 == 0 and dy is 16-byte aligned, else two (one 4-byte
 * load) or one. */
template <ao_dtype T> struct bias_grad_term16 {
    static constexpr int outputs = 1;
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

/* Launches the block-a-row forward over Head's rows; false (nothing
 * launched): the rows are not c % 4 == 0 and aligned, or too wide. */
template <class Head>
bool launch_layernorm_forward_rows(float *y, void *y16, ao_dtype half_type, float *mean,
                                   float *rstd, const Head &in, bool in_aligned, const float *gamma,
                                   const float *beta, int n, int c, cudaStream_t stream)
{
    const bool vec = c % 4 == 0 && in_aligned && aligned16(y) && aligned16(gamma) &&
                     aligned16(beta) && (!y16 || aligned8(y16));
    bool launched = false;
    with_dtype(y16 ? half_type : AO_F32, [&](auto tag) {
        constexpr ao_dtype H = decltype(tag)::value;
        /* a 16-bit input only beside a copy of its own type (the model's one
         * pairing): fewer instantiations; the callers fall back otherwise */
        if constexpr (Head::x_type == AO_F32 || Head::x_type == H)
            launched = vec && with_row_k(c, [&](auto ktag) {
                           constexpr int K = decltype(ktag)::value;
                           launch(layernorm_forward_rows_kernel<H, K, Head>, row_blocks(n),
                                  kThreads, 0, stream, y, y16, mean, rstd, in, gamma, beta, n, c);
                       });
        return cudaSuccess;
    });
    return launched;
}

extern "C" cudaError_t ao_cuda_layernorm_forward(float *y, void *y16, ao_dtype half_type,
                                                 float *mean, float *rstd, const float *x,
                                                 const float *gamma, const float *beta, int n,
                                                 int c, cudaStream_t stream)
{
    if (y16 && half_type != AO_BF16 && half_type != AO_F16) return cudaErrorInvalidValue;
    if (n <= 0 || c <= 0) return cudaSuccess;
    if (launch_layernorm_forward_rows(y, y16, half_type, mean, rstd, ln_input{x}, aligned16(x),
                                      gamma, beta, n, c, stream))
        return cudaGetLastError();
    return with_dtype(y16 ? half_type : AO_F32, [&](auto tag) {
        constexpr ao_dtype H = decltype(tag)::value;
        launch(layernorm_forward_kernel<H>, row_warp_blocks(n), kThreads, 0, stream, y, y16, mean,
               rstd, x, gamma, beta, n, c);
        return cudaGetLastError();
    });
}

extern "C" cudaError_t
ao_cuda_dropout_residual_layernorm(float *r, float *y, void *y16, ao_dtype half_type, float *mean,
                                   float *rstd, const void *x, ao_dtype x_type, const float *res,
                                   const float *gamma, const float *beta, int n, int c, int batch,
                                   const ao_cuda_dropout_key *key, cudaStream_t stream)
{
    if (y16 && half_type != AO_BF16 && half_type != AO_F16) return cudaErrorInvalidValue;
    if (batch <= 0 || n % batch != 0 || key->heads != 0) return cudaErrorInvalidValue;
    if (!castable(x_type)) return cudaErrorInvalidValue;
    if (n <= 0 || c <= 0) return cudaSuccess;
    const int tokens = n / batch;
    const size_t nc = (size_t)n * (size_t)c;
    bool launched = false;
    with_dtype(x_type, [&](auto tag) {
        constexpr ao_dtype X = decltype(tag)::value;
        const ln_dropout_residual<X> in{r, {x}, res, dropout_args_of(*key), tokens};
        launched = launch_layernorm_forward_rows(y, y16, half_type, mean, rstd, in,
                                                 aligned16(r) && load4_ok<X>(x) && aligned16(res),
                                                 gamma, beta, n, c, stream);
        return cudaSuccess;
    });
    if (launched) return cudaGetLastError();
    /* a 16-bit x is widened into r first: the same floats the pass reads */
    const float *xf = static_cast<const float *>(x);
    if (x_type != AO_F32) {
        const cudaError_t e = ao_cuda_cast(r, AO_F32, x, x_type, nc, stream);
        if (e != cudaSuccess) return e;
        xf = r;
    }
    const cudaError_t e = ao_cuda_dropout_residual(r, NULL, AO_F32, xf, res, batch,
                                                   (size_t)tokens * (size_t)c, key, stream);
    if (e != cudaSuccess) return e;
    return ao_cuda_layernorm_forward(y, y16, half_type, mean, rstd, r, gamma, beta, n, c, stream);
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
