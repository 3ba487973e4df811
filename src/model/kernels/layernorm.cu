/* LayerNorm forward and backward, its backward fused with the dropout that
 * follows it; the fused backward sums its parameter gradients in the same
 * launch (colsum.cuh's column_partials_block). */
#include "model/kernels/colsum.cuh"
#include "model/kernels/dropout.cuh"

namespace
{

/* ao_layernorm_backward's parameter gradients: (dy xhat, dy). */
struct layernorm_param_term {
    static constexpr int outputs = 2;
    static constexpr bool heavy = false;
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
    (void)with_dtype(y16 ? half_type : AO_F32, [&](auto tag) {
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
    (void)with_dtype(x_type, [&](auto tag) {
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
