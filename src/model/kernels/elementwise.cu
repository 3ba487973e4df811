/* Element-wise ops (add, scale, GELU), dropout, and the fused chains of
 * GELU and dropout. */
#include "model/kernels/colsum.cuh"
#include "model/kernels/dropout.cuh"

namespace
{

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

/* GELU's Phi(v) = erfc(-v / sqrt 2) / 2 without a branch: erfc of |v| / sqrt 2
 * by the Chebyshev fit of Numerical Recipes' erfcc (fractional error under
 * 1.2e-7), one reciprocal and one 2^x on the special-function unit. A
 * negative v's Phi is erfc / 2 itself, never 1 - (1 - ...), so the tail
 * keeps its relative precision, which (1 + erff) / 2 in float lost below
 * v = -4. erff took ~47 instructions (two polynomials and a branch) and
 * left the GELU passes bound by instruction issue. */
__device__ __forceinline__ float gelu_cdf(float v)
{
    const float z = fabsf(v) * 0.70710678118654752f;
    const float t = __fdividef(1.0f, fmaf(0.5f, z, 1.0f));
    float p = 0.17087277f;
    p = fmaf(p, t, -0.82215223f);
    p = fmaf(p, t, 1.48851587f);
    p = fmaf(p, t, -1.13520398f);
    p = fmaf(p, t, 0.27886807f);
    p = fmaf(p, t, -0.18628806f);
    p = fmaf(p, t, 0.09678418f);
    p = fmaf(p, t, 0.37409196f);
    p = fmaf(p, t, 1.00002368f);
    p = fmaf(p, t, -1.26551223f);
    const float half_erfc = 0.5f * t * fast_exp2(fmaf(-z, z, p) * 1.4426950408889634f);
    return v >= 0.0f ? 1.0f - half_erfc : half_erfc;
}

/* ao_gelu_forward / ao_gelu_backward (ops_ref, in double), in float: within
 * ~3e-6 relative everywhere, far inside the fp32 tolerance. */
struct gelu_forward_op {
    __device__ float operator()(float v, float) const
    {
        return v * gelu_cdf(v);
    }
};

/* (dy, x) -> dx: Phi(v) + v phi(v) */
struct gelu_backward_op {
    __device__ float operator()(float dy, float v) const
    {
        const float pdf = 0.39894228040143268f * fast_exp2(v * v * -0.72134752044448170f);
        return dy * fmaf(v, pdf, gelu_cdf(v));
    }
};

/* Up to kZeroRanges float ranges := 0 in one launch (the small gradients a
 * backward adds to when it overwrites the rest: ao_model_overwrite_grads). */
constexpr int kZeroRanges = 8;
struct zero_ranges {
    float *p[kZeroRanges];
    size_t n[kZeroRanges];
    int k;
};

__global__ void zero_ranges_kernel(zero_ranges z)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int r = 0; r < z.k; r++)
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < z.n[r]; i += stride)
            z.p[r][i] = 0.0f;
}

/* ---- dropout ------------------------------------------------------------- */

/* Philox blocks (4 elements each) one dropout thread applies: their
 * independent Philox evaluations overlap, and they amortize the thread's
 * row-stream derivation (every thread derives it: cheaper than a shared
 * copy and a barrier). */
constexpr int kDropGroups = 4;

/* A dropout kernel reads its input through a Map (load / load4: the
 * value(s) at flat element i, i a multiple of 4 for load4), multiplies by
 * the mask and writes through the Map (store / store4), so the fused chains
 * put their element-wise op before or after the mask (dropout_out_map and
 * the GELU maps, with the fused kernels below). A Map's second operand
 * (aux4: the residual, GELU's input) is read with the values, and store4
 * gets it back. */

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
 * At most 64 registers (4 blocks an SM): faster for GELU + dropout, slower
 * for dropout + GELU backward, about a wash over a step (Nsight Compute,
 * bench/RESULTS.md); every GPU measurement since was taken with it. */
template <bool Vec, class Map, class I>
__global__ void __launch_bounds__(kThreads, 4)
    dropout_kernel(Map m, I per_row, I tiles_per_row, I tiles, I run, dropout_args k,
                   const uint8_t *mask_in, uint8_t *mask_out)
{
    pdl_wait();
    const I groups = (per_row + 3) / 4;
    const I tile_groups = (I)blockDim.x * kDropGroups;
    const bool drop = k.r.p > 0.0f;
    I stream_row = ~(I)0; /* the row whose stream s is */
    ao_rng_stream s = k.site;
    for (I t0 = (I)blockIdx.x * run; t0 < tiles; t0 += (I)gridDim.x * run)
        for (I t = t0; t < t0 + run && t < tiles; t++) {
            const I r = t / tiles_per_row;
            const I first = (t % tiles_per_row) * tile_groups + threadIdx.x;
            if (drop && !mask_in && r != stream_row) {
                s = dropout_row_stream(k, r);
                stream_row = r;
            }
            const I off = r * per_row;
            if (Vec) {
                /* every load in flight first: the values, the Map's second
                 * operand and the mask bytes (a load after a store would wait
                 * for it, since the pointers may alias) */
                float4 v[kDropGroups], aux[kDropGroups];
                uint8_t mb[kDropGroups];
#pragma unroll
                for (int i = 0; i < kDropGroups; i++) {
                    const I g = first + (I)i * blockDim.x;
                    const bool in = g < groups;
                    v[i] = in ? m.load4(off + 4 * g) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    aux[i] = in ? m.aux4(off + 4 * g) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    mb[i] = in && drop && mask_in ? mask_in[r * groups + g] : 0;
                }
#pragma unroll
                for (int i = 0; i < kDropGroups; i++) {
                    const I g = first + (I)i * blockDim.x;
                    if (g >= groups) break;
                    if (drop) {
                        float f[4];
                        const I at = r * groups + g; /* the group's mask byte */
                        group_factors(f, s, g, k.r, mask_in ? &mb[i] : nullptr,
                                      mask_out ? mask_out + at : nullptr);
                        v[i] = times4(v[i], f);
                    }
                    m.store4(off + 4 * g, v[i], aux[i]);
                }
            } else {
#pragma unroll
                for (int i = 0; i < kDropGroups; i++) {
                    const I g = first + (I)i * blockDim.x;
                    if (g >= groups) break;
                    float f[4] = {1.0f, 1.0f, 1.0f, 1.0f};
                    const I at = r * groups + g;
                    if (drop)
                        group_factors(f, s, g, k.r, mask_in ? mask_in + at : nullptr,
                                      mask_out ? mask_out + at : nullptr);
                    for (int l = 0; l < 4; l++) {
                        const I e = g * 4 + l;
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
    /* 32-bit indices where every element index and tile fits (about half the
     * instructions a group of 64-bit ones cost) */
    const auto go = [&](auto index) {
        using I = decltype(index);
        if (vec && per_row % 4 == 0)
            launch(dropout_kernel<true, Map, I>, grid, threads, 0, stream, m, (I)per_row,
                   (I)tiles_per_row, (I)tiles, (I)run, args, mask_in, mask_out);
        else
            launch(dropout_kernel<false, Map, I>, grid, threads, 0, stream, m, (I)per_row,
                   (I)tiles_per_row, (I)tiles, (I)run, args, mask_in, mask_out);
    };
    const size_t span = (tiles + (size_t)grid * run) * tile_groups * 4;
    if (span < ((size_t)1 << 31) && rows * per_row < ((size_t)1 << 31))
        go(uint32_t{0});
    else
        go(size_t{0});
    return cudaGetLastError();
}

/* ---- masks drawn alone ---------------------------------------------------- */

/* Groups a thread draws (two 16-byte stores), and jobs a launch takes. */
constexpr int kMaskGroups = 32;
constexpr int kMaskJobs = 16;

struct mask_jobs {
    dropout_args k[kMaskJobs];
    uint8_t *out[kMaskJobs];
    size_t groups[kMaskJobs];     /* a row's groups: a multiple of kMaskGroups */
    size_t chunks[kMaskJobs + 1]; /* prefix sums of the jobs' kMaskGroups-group chunks */
    int n;
};

/* Chunk c of the launch: job t's groups g .. g + 31 of row g / groups, each
 * the mask byte of its Philox block (group_factors), as a dropout pass that
 * draws and stores its mask writes it. Grid-stride, so that a launch capped
 * to a few blocks an SM leaves the rest to a kernel beside it. */
__global__ void draw_masks_kernel(mask_jobs j)
{
    pdl_wait();
    const size_t total = j.chunks[j.n];
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < total;
         c += (size_t)gridDim.x * blockDim.x) {
        int t = 0;
        while (c >= j.chunks[t + 1]) t++;
        const size_t g = (c - j.chunks[t]) * kMaskGroups, g0 = g % j.groups[t];
        const ao_rng_stream s = dropout_row_stream(j.k[t], g / j.groups[t]);
#pragma unroll
        for (int v = 0; v < kMaskGroups / 16; v++) {
            uint32_t w[4];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                w[q] = 0;
#pragma unroll
                for (int l = 0; l < 4; l++) {
                    float f[4];
                    group_factors(f, s, g0 + 16 * v + 4 * q + l, j.k[t].r, nullptr, nullptr);
                    w[q] |= (uint32_t)mask_byte(f) << (8 * l);
                }
            }
            *reinterpret_cast<uint4 *>(j.out[t] + g + 16 * v) = make_uint4(w[0], w[1], w[2], w[3]);
        }
    }
}

/* ---- GELU + dropout, fused ------------------------------------------------ */

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
    __device__ float4 aux4(size_t) const
    {
        return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    __device__ void store4(size_t i, float4 v, float4) const
    {
        out.put4(i, v);
    }
};

/* GELU and its dropout with the mask already drawn (every large step after
 * the first), or GELU alone at p = 0 (the head's), all 16-bit, per_row % 8
 * == 0: the mask byte of group g of row r is byte r * per_row / 4 + g, i.e.
 * the flat element's index / 4, so the rows need not be known. A thread
 * takes 8 consecutive elements a step (one 16-byte load of each input, two
 * mask bytes, one 16-byte store), kFlatSteps steps' loads in flight. Op
 * gives an element's value from its input(s) and mask factor with the
 * operations of the dropout_kernel Map it stands for, so the bits are that
 * Map's. dropout_kernel's 8-byte groups and per-group indexing left the
 * forward bound by instruction issue (bench/RESULTS.md). */
constexpr int kFlatSteps = 4;

/* gelu_dropout_map: gelu(h) times the factor */
struct gelu_dropout_flat {
    static constexpr bool two_inputs = false, masked = true;
    __device__ float operator()(float h, float, float f) const
    {
        return gelu_forward_op{}(h, 0.0f) * f;
    }
};

/* gelu_dropout_map at p = 0: gelu(h), stored as it is (no factor) */
struct gelu_flat {
    static constexpr bool two_inputs = false, masked = false;
    __device__ float operator()(float h, float, float) const
    {
        return gelu_forward_op{}(h, 0.0f);
    }
};

/* dropout_gelu_backward_map: gelu'(h) applied to the dropped dy */
struct dropout_gelu_backward_flat {
    static constexpr bool two_inputs = true, masked = true;
    __device__ float operator()(float dy, float h, float f) const
    {
        return gelu_backward_op{}(dy * f, h);
    }
};

/* 8 16-bit values of type T as floats */
template <ao_dtype T> __device__ void widen8(uint4 u, float (&v)[8])
{
    const float4 lo = widen4<T>(make_uint2(u.x, u.y)), hi = widen4<T>(make_uint2(u.z, u.w));
    v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w;
    v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
}

/* Op on 8 consecutive elements: a and b's 16-bit values (b ignored unless
 * Op::two_inputs), mb's two mask bytes (group 2i, then 2i + 1); the
 * results rounded to T and packed as they are stored. */
template <ao_dtype T, ao_dtype TI, class Op>
__device__ uint4 flat8(uint4 a, uint4 b, uint16_t mb, const drop_rate &r, const Op &op)
{
    float x[8], y[8], f[8], o[8];
    widen8<TI>(a, x);
    widen8<TI>(b, y);
    mask_factors((uint8_t)(mb & 0xffu), r, f);
    mask_factors((uint8_t)(mb >> 8), r, f + 4);
#pragma unroll
    for (int l = 0; l < 8; l++) o[l] = op(x[l], y[l], f[l]);
    return make_uint4(narrow2<T>(o[0], o[1]), narrow2<T>(o[2], o[3]), narrow2<T>(o[4], o[5]),
                      narrow2<T>(o[6], o[7]));
}

/* out[i] = flat8(a[i], b[i], mask[i]) over n8 groups of 8; b is read only
 * when Op::two_inputs, the mask only when Op::masked; out may alias a (each
 * thread reads a group before it stores it). */
template <ao_dtype T, ao_dtype TI, class Op>
__global__ void __launch_bounds__(kThreads)
    flat_kernel(uint4 *out, const uint4 *a, const uint4 *b, const uint16_t *mask, size_t n8,
                drop_rate r, Op op)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i0 < n8;
         i0 += kFlatSteps * stride) {
        uint4 av[kFlatSteps], bv[kFlatSteps];
        uint16_t mb[kFlatSteps];
#pragma unroll
        for (int u = 0; u < kFlatSteps; u++) {
            const size_t i = i0 + (size_t)u * stride;
            const bool in = i < n8;
            av[u] = in ? a[i] : make_uint4(0, 0, 0, 0);
            bv[u] = in && Op::two_inputs ? b[i] : make_uint4(0, 0, 0, 0);
            mb[u] = in && Op::masked ? mask[i] : 0;
        }
#pragma unroll
        for (int u = 0; u < kFlatSteps; u++) {
            const size_t i = i0 + (size_t)u * stride;
            if (i >= n8) break;
            out[i] = flat8<T, TI>(av[u], bv[u], mb[u], r, op);
        }
    }
}

/* Whether the flat path takes a call: a masked Op with its mask read (2-byte
 * aligned) and p > 0, or an unmasked one at p = 0; per_row % 8 == 0 and the
 * arrays 16-byte aligned (b only when read). */
bool flat_ok(bool masked, const void *out, const void *a, const void *b, const uint8_t *mask,
             size_t per_row, const ao_cuda_dropout_key &key)
{
    const bool factors =
        masked ? mask && key.p > 0.0f && ((uintptr_t)mask & 1u) == 0 : key.p == 0.0f;
    return factors && per_row % 8 == 0 && aligned16(out) && aligned16(a) && (!b || aligned16(b));
}

/* Launches flat_kernel over n elements when flat_ok holds; false: the caller
 * runs dropout_kernel. */
template <ao_dtype T, ao_dtype TI, class Op>
bool launch_flat(void *out, const void *a, const void *b, const uint8_t *mask, int batch,
                 size_t per_row, const ao_cuda_dropout_key &key, Op op, cudaStream_t stream,
                 cudaError_t *err)
{
    static_assert(T != AO_F32 && TI != AO_F32, "16-bit types only");
    if (!flat_ok(Op::masked, out, a, Op::two_inputs ? b : nullptr, mask, per_row, key))
        return false;
    const size_t n8 = (size_t)(batch > 0 ? batch : 0) * per_row / 8;
    *err = cudaSuccess;
    if (n8 == 0) return true;
    launch(flat_kernel<T, TI, Op>, elem_blocks(n8, kFlatSteps), kThreads, 0, stream,
           static_cast<uint4 *>(out), static_cast<const uint4 *>(a), static_cast<const uint4 *>(b),
           reinterpret_cast<const uint16_t *>(mask), n8, drop_rate_of(key.p), op);
    *err = cudaGetLastError();
    return true;
}

/* dropout_gelu_backward_flat as a column-sum term (colsum.cuh), all of type
 * T: get() computes and stores 8 elements of dx16 (over dy) at row i,
 * column j and returns their 16-bit values widened, the terms
 * bias_grad_term16 reads back from dx16. So the bias gradient of the linear
 * before GELU comes with the pass, in ao_cuda_bias_grad's chunks and order
 * (its bits), instead of a second read of dx16. */
template <ao_dtype T> struct gelu_backward_bias_term {
    static constexpr int outputs = 1;
    static constexpr bool heavy = true;
    uint16_t *dx16;
    const uint16_t *dy, *h;
    const uint8_t *mask; /* flat_kernel's: flat element e's group is byte e / 4 */
    drop_rate r;
    int c;
    template <int W> __device__ void get(int i, int j, sum2 (&v)[W]) const
    {
        static_assert(W == 8, "one 16-byte load of each array");
        const size_t at = (size_t)i * c + j;
        const uint4 q = flat8<T, T>(
            *reinterpret_cast<const uint4 *>(dy + at), *reinterpret_cast<const uint4 *>(h + at),
            *reinterpret_cast<const uint16_t *>(mask + at / 4), r, dropout_gelu_backward_flat{});
        *reinterpret_cast<uint4 *>(dx16 + at) = q;
        float o[8];
        widen8<T>(q, o);
#pragma unroll
        for (int l = 0; l < 8; l++) v[l] = sum2{(double)o[l], 0.0};
    }
    int width() const
    {
        return 8;
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
    __device__ float4 aux4(size_t i) const
    {
        return h.load4(i);
    }
    __device__ void store4(size_t i, float4 v, float4 x) const
    {
        const gelu_backward_op op{};
        const float4 g = make_float4(op(v.x, x.x), op(v.y, x.y), op(v.z, x.z), op(v.w, x.w));
        if (dx) *reinterpret_cast<float4 *>(dx + i) = g;
        if (dx16.p) dx16.put4(i, g);
    }
};

/* ---- an outer product's gradient through GELU, fused ------------------------ */

/* dx16[i, j] = gelu'(h[i, j]) * T(T(u[i]) v[j]) (ao_cuda_outer_gelu_backward):
 * the product of two T values is exact in float and is rounded to T once,
 * as the k = 1 GEMM that writes it in T does; then gelu_backward_op as
 * dropout_gelu_backward_map applies it at p = 0. A thread takes kOuterCols
 * columns (one 16-byte load of h and store of dx16 when Vec) of
 * kOuterRows rows, its v values loaded once. */
constexpr int kOuterCols = 8, kOuterRows = 8;
static_assert(kOuterCols == 8, "the Vec path: one uint4 of h and of dx16");

template <ao_dtype T, bool Vec>
__global__ void outer_gelu_backward_kernel(uint16_t *dx16, const float *u, const uint16_t *v,
                                           const uint16_t *h, int rows, int cols)
{
    pdl_wait();
    const int j0 = kOuterCols * (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (j0 >= cols) return;
    const int w = cols - j0 < kOuterCols ? cols - j0 : kOuterCols;
    float vj[kOuterCols];
#pragma unroll
    for (int l = 0; l < kOuterCols; l++) vj[l] = l < w ? load_as_float(v, T, (size_t)(j0 + l)) : 0;
    const gelu_backward_op op{};
    for (int r0 = (int)blockIdx.y * kOuterRows; r0 < rows; r0 += (int)gridDim.y * kOuterRows)
        for (int row = r0; row < r0 + kOuterRows && row < rows; row++) {
            const float ur = rounded<T>(u[row]);
            /* column l's gradient, given h there */
            const auto grad = [&](int l, float hv) { return op(rounded<T>(ur * vj[l]), hv); };
            const size_t at = (size_t)row * (size_t)cols + (size_t)j0;
            if (Vec) {
                const uint4 hv = *reinterpret_cast<const uint4 *>(h + at);
                const float4 h0 = widen4<T>(make_uint2(hv.x, hv.y));
                const float4 h1 = widen4<T>(make_uint2(hv.z, hv.w));
                const uint2 lo = narrow4<T>(
                    make_float4(grad(0, h0.x), grad(1, h0.y), grad(2, h0.z), grad(3, h0.w)));
                const uint2 hi = narrow4<T>(
                    make_float4(grad(4, h1.x), grad(5, h1.y), grad(6, h1.z), grad(7, h1.w)));
                *reinterpret_cast<uint4 *>(dx16 + at) = make_uint4(lo.x, lo.y, hi.x, hi.y);
            } else {
                for (int l = 0; l < w; l++)
                    dx16[at + l] = narrow_bits<T>(grad(l, load_as_float(h, T, at + (size_t)l)));
            }
        }
}

} // namespace

/* ---- launchers ------------------------------------------------------------- */

extern "C" cudaError_t ao_cuda_zero_ranges(float *const *p, const size_t *n, int k,
                                           cudaStream_t stream)
{
    if (k < 0 || k > kZeroRanges) return cudaErrorInvalidValue;
    zero_ranges z = {};
    size_t most = 0;
    for (int r = 0; r < k; r++) {
        z.p[r] = p[r];
        z.n[r] = n[r];
        most = n[r] > most ? n[r] : most;
    }
    z.k = k;
    if (most == 0) return cudaSuccess;
    launch(zero_ranges_kernel, elem_blocks(most), kThreads, 0, stream, z);
    return cudaGetLastError();
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

extern "C" size_t ao_cuda_dropout_mask_bytes(int rows, size_t per_row)
{
    return ao_dropout_mask_bytes(rows, per_row); /* model/sizes.h */
}

extern "C" cudaError_t ao_cuda_gelu_dropout(void *out, ao_dtype out_type, const void *h,
                                            ao_dtype h_type, int batch, size_t per_row,
                                            const ao_cuda_dropout_key *key, const uint8_t *mask_in,
                                            uint8_t *mask_out, cudaStream_t stream)
{
    if (key->heads != 0) return cudaErrorInvalidValue;
    if (mask_in) mask_out = nullptr;
    return with_dtype(out_type, [&](auto otag) {
        constexpr ao_dtype OT = decltype(otag)::value;
        return with_input_dtype<OT>(h_type, [&](auto htag) {
            constexpr ao_dtype HT = decltype(htag)::value;
            if constexpr (OT != AO_F32 && HT != AO_F32) {
                cudaError_t err;
                if (launch_flat<OT, HT>(out, h, nullptr, mask_in, batch, per_row, *key,
                                        gelu_dropout_flat{}, stream, &err) ||
                    launch_flat<OT, HT>(out, h, nullptr, nullptr, batch, per_row, *key, gelu_flat{},
                                        stream, &err))
                    return err;
            }
            return launch_dropout_map(
                gelu_dropout_map<OT, HT>{typed_store<OT>{out}, typed_load<HT>{h}},
                store4_ok<OT>(out) && load4_ok<HT>(h), batch, per_row, *key, stream, mask_in,
                mask_out);
        });
    });
}

extern "C" cudaError_t ao_cuda_draw_masks(const ao_cuda_mask_job *jobs, int n, int blocks_per_sm,
                                          cudaStream_t stream)
{
    for (int first = 0; first < n; first += kMaskJobs) {
        mask_jobs j = {};
        for (int i = first; i < n && j.n < kMaskJobs; i++) {
            const ao_cuda_mask_job &b = jobs[i];
            const int heads = b.key.heads > 0 ? b.key.heads : 1;
            if (b.rows < 0 || b.rows % heads != 0 || b.per_row % (4 * kMaskGroups) != 0 ||
                ((uintptr_t)b.mask & 15u) != 0)
                return cudaErrorInvalidValue;
            if (b.key.p <= 0.0f || b.rows == 0 || b.per_row == 0) continue;
            j.k[j.n] = dropout_args_of(b.key);
            j.out[j.n] = b.mask;
            j.groups[j.n] = b.per_row / 4;
            j.chunks[j.n + 1] = j.chunks[j.n] + (size_t)b.rows * (b.per_row / 4) / kMaskGroups;
            j.n++;
        }
        if (j.n == 0) continue;
        size_t blocks = (j.chunks[j.n] + kThreads - 1) / kThreads;
        if (blocks_per_sm > 0) {
            int sms = 0;
            const cudaError_t e = device_sms(&sms);
            if (e != cudaSuccess) return e;
            const size_t cap = (size_t)sms * (size_t)blocks_per_sm;
            blocks = blocks < cap ? blocks : cap;
        }
        launch(draw_masks_kernel, (unsigned)(blocks < (size_t)INT32_MAX ? blocks : INT32_MAX),
               kThreads, 0, stream, j);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
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
            if constexpr (HT != AO_F32 && IT != AO_F32) {
                cudaError_t err;
                if (!dx && launch_flat<HT, IT>(dx16, dy, h, mask_in, batch, per_row, *key,
                                               dropout_gelu_backward_flat{}, stream, &err))
                    return err;
            }
            return launch_dropout_map(
                dropout_gelu_backward_map<HT, IT>{
                    {dy}, dx, typed_store<HT>{dx16}, typed_load<IT>{h}},
                vec && load4_ok<IT>(dy) && load4_ok<IT>(h), batch, per_row, *key, stream, mask_in);
        });
    });
}

extern "C" cudaError_t
ao_cuda_dropout_gelu_backward_bias(float *dx, void *dx16, ao_dtype half_type, const void *dy,
                                   const void *h, ao_dtype in_type, int batch, size_t per_row,
                                   const ao_cuda_dropout_key *key, const uint8_t *mask_in,
                                   float *db, int cols, cudaStream_t stream)
{
    if (batch < 0 || cols <= 0 || per_row % (size_t)cols != 0) return cudaErrorInvalidValue;
    const size_t rows = (size_t)batch * (per_row / (size_t)cols);
    if (rows > (size_t)INT32_MAX) return cudaErrorInvalidValue;
    const bool fused = !dx && dx16 && in_type == half_type && key->heads == 0 && cols % 8 == 0 &&
                       flat_ok(true, dx16, dy, h, mask_in, per_row, *key);
    const auto term = [&](auto tag) {
        constexpr ao_dtype T = decltype(tag)::value;
        return gelu_backward_bias_term<T>{static_cast<uint16_t *>(dx16),
                                          static_cast<const uint16_t *>(dy),
                                          static_cast<const uint16_t *>(h),
                                          mask_in,
                                          drop_rate_of(key->p),
                                          cols};
    };
    if (fused && half_type == AO_BF16)
        return column_sums(db, (float *)nullptr, (int)rows, cols, term(dtype_tag<AO_BF16>{}),
                           stream);
    if (fused && half_type == AO_F16)
        return column_sums(db, (float *)nullptr, (int)rows, cols, term(dtype_tag<AO_F16>{}),
                           stream);
    const cudaError_t err = ao_cuda_dropout_gelu_backward(dx, dx16, half_type, dy, h, in_type,
                                                          batch, per_row, key, mask_in, stream);
    if (err != cudaSuccess) return err;
    return dx16 ? ao_cuda_bias_grad(db, dx16, half_type, (int)rows, cols, stream)
                : ao_cuda_bias_grad(db, dx, AO_F32, (int)rows, cols, stream);
}

extern "C" cudaError_t ao_cuda_outer_gelu_backward(void *dx16, ao_dtype half_type, const float *u,
                                                   const void *v, const void *h, int rows, int cols,
                                                   cudaStream_t stream)
{
    if (half_type != AO_BF16 && half_type != AO_F16) return cudaErrorInvalidValue;
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    const int per_block = kThreads * kOuterCols, row_blocks = (rows + kOuterRows - 1) / kOuterRows;
    const dim3 grid((unsigned)((cols + per_block - 1) / per_block),
                    (unsigned)(row_blocks < 65535 ? row_blocks : 65535));
    const bool vec = cols % kOuterCols == 0 && aligned16(dx16) && aligned16(h);
    return with_dtype(half_type, [&](auto tag) {
        constexpr ao_dtype T = decltype(tag)::value;
        if (T == AO_F32) return cudaErrorInvalidValue; /* excluded above */
        const auto go = [&](auto kernel) {
            launch(kernel, grid, kThreads, 0, stream, static_cast<uint16_t *>(dx16), u,
                   static_cast<const uint16_t *>(v), static_cast<const uint16_t *>(h), rows, cols);
        };
        if (vec)
            go(outer_gelu_backward_kernel<T, true>);
        else
            go(outer_gelu_backward_kernel<T, false>);
        return cudaGetLastError();
    });
}
