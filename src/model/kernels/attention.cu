/* Attention's softmax, forward and backward, plain and fused with the
 * dropout of the attention probabilities. */
#include "model/kernels/dropout.cuh"

namespace
{

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

/* ---- softmax + dropout, fused --------------------------------------------- */

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

/* The softmax output a backward reads, computed again from the scores the
 * forward read (type T) and each row's (max, 1/sum) it stored: the same
 * softmax_exp(x, max) * inv, so the same bits as the forward's y. Storing
 * 16-bit scores instead of float probabilities halves what the score GEMM
 * writes and softmax reads, and the backward reads 2 bytes a probability
 * instead of 4. */
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

} // namespace

/* ---- launchers ------------------------------------------------------------- */

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
