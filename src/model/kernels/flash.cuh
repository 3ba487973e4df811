/* What the flash attention kernels share (flash.cu's mma.sync kernels,
 * flash_sm90a.cu's wgmma ones): the arguments, cp.async copies, the dropout
 * of a tile, the online softmax, the accumulator fragments' stores and the
 * launch. The mma.sync fragments and padded tiles stay in flash.cu, which
 * says how the kernels work. */
#ifndef AORTA_MODEL_KERNELS_FLASH_CUH
#define AORTA_MODEL_KERNELS_FLASH_CUH

#include "model/kernels/dropout.cuh"

#if !defined(AO_GPU_HIP)
#include <cuda_bf16.h>

namespace
{

constexpr int kTile = 64;          /* queries and keys a tile */
constexpr int kFlashThreads = 128; /* 4 warps, 16 rows each */
constexpr float kLog2e = 1.4426950408889634f;

/* What every fused attention kernel reads. Rows: qkv [B * T, 3d] (q, k, v of
 * head h at columns h hd, d + h hd, 2d + h hd), ctx and dctx [B * T, d]. lse:
 * [B * h * T] row logsumexps of the scaled scores, in base 2. */
struct flash_args {
    const uint16_t *qkv, *ctx, *dctx;
    uint16_t *out;      /* forward: ctx; backward: dqkv [B * T, 3d] */
    float *lse, *delta; /* delta: [B * h * T] rowsum(dctx * ctx) times scale */
    uint16_t *ds;       /* backward: dS^T, [B * h][T keys][T queries] */
    int H, T, d;
    float scale; /* of the scores, 1 / sqrt(hd) */
    dropout_args drop;
    bool on;
    const uint8_t *mask_in;
    uint8_t *mask_out;
};

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* Two floats as T, round to nearest even, lo in the low half. */
template <ao_dtype T> __device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    if (T == AO_BF16) {
        const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<const uint32_t *>(&v);
    }
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&v);
}

/* cp.async: 16 bytes global -> shared without a register stop, in groups
 * that a later wait_group retires (all but the newest N). */
__device__ __forceinline__ void cp_async16(void *s, const void *g)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(s)), "l"(g));
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* Starts copying 64 floats (16-byte aligned) into shared memory. */
__device__ void load_row64(float *s, const float *g)
{
    if (threadIdx.x < kTile / 4) cp_async16(s + 4 * threadIdx.x, g + 4 * threadIdx.x);
}

/* The dropout of head (b, h) as the kernels use it. */
struct flash_drop {
    ao_rng_stream s;
    drop_rate r;
    bool on;
    const uint8_t *mask_in; /* the head's T rows of T / 4 bytes, or NULL */
    uint8_t *mask_out;
};

__device__ flash_drop flash_drop_of(const flash_args &a, size_t bh)
{
    flash_drop d;
    d.on = a.on;
    d.r = a.drop.r;
    d.s = a.drop.site;
    const size_t at = bh * (size_t)a.T * (size_t)(a.T / 4);
    d.mask_in = a.on && a.mask_in ? a.mask_in + at : nullptr;
    d.mask_out = a.on && a.mask_out && !a.mask_in ? a.mask_out + at : nullptr;
    if (a.on && !d.mask_in) d.s = dropout_row_stream(a.drop, bh);
    return d;
}

/* The keep bits of a tile (queries q0 .. q0 + 63 x keys k0 .. k0 + 63, 16
 * bytes a query, the mask's layout) that one warp reads: queries
 * r0 .. r0 + 256 / NC - 1 x key groups c0 .. c0 + NC - 1, read or drawn (and
 * stored) by that warp alone, so no block barrier orders them. A lane's 8
 * Philox blocks are independent chains, unrolled so that they overlap (one
 * at a time, the draw is bound by the multiplies' latency). */
template <int NC>
__device__ void mask_part(uint8_t *sm, const flash_drop &d, int q0, int k0, int T, int r0, int c0)
{
    constexpr int kPer = 256 / 32; /* groups a lane */
    const size_t row = (size_t)(T / 4);
    const int lane = threadIdx.x & 31;
    uint8_t m[kPer];
#pragma unroll
    for (int k = 0; k < kPer; k++) {
        const int i = lane + 32 * k, r = r0 + i / NC, c = c0 + i % NC;
        const size_t at = (size_t)(q0 + r) * row + (size_t)(k0 / 4 + c);
        if (d.mask_in) {
            m[k] = d.mask_in[at];
        } else {
            float f[4];
            group_factors(f, d.s, at, d.r, nullptr, nullptr);
            m[k] = mask_byte(f);
        }
    }
#pragma unroll
    for (int k = 0; k < kPer; k++) {
        const int i = lane + 32 * k, r = r0 + i / NC, c = c0 + i % NC;
        if (d.mask_out) d.mask_out[(size_t)(q0 + r) * row + (size_t)(k0 / 4 + c)] = m[k];
        sm[r * 16 + c] = m[k];
    }
    __syncwarp();
}

/* Starts copying a tile's stored mask bytes (mask_part's layout). */
__device__ void mask_copy(uint8_t *sm, const flash_drop &d, int q0, int k0, int T)
{
    if (threadIdx.x < kTile)
        cp_async16(sm + 16 * threadIdx.x,
                   d.mask_in + (size_t)(q0 + threadIdx.x) * (size_t)(T / 4) + k0 / 4);
}

/* The keep bits of a query-owning warp's elements (rows r, r + 8 of the
 * tile; accumulator column j * 8 + 2t + (e & 1)): each row's 16 mask bytes
 * read once (one 16-byte load) instead of a byte an element. Column c is
 * byte 2j + t / 2, bit 2 (t & 1) + (e & 1); the words are shifted by the
 * lane's part once, so that an element tests a constant bit. */
struct row_factors {
    uint32_t m[2][4];
    __device__ row_factors(const uint8_t *sm, int r, int t)
    {
        const int sh = 8 * (t >> 1) + 2 * (t & 1);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint4 v = *reinterpret_cast<const uint4 *>(sm + (r + 8 * h) * 16);
            m[h][0] = v.x >> sh;
            m[h][1] = v.y >> sh;
            m[h][2] = v.z >> sh;
            m[h][3] = v.w >> sh;
        }
    }
    /* f if element (j, e) is kept, else 0 */
    __device__ float at(int j, int e, float f) const
    {
        return m[e >> 1][j >> 1] & (1u << (16 * (j & 1) + (e & 1))) ? f : 0.0f;
    }
};

/* The keep bits of a key-owning warp's elements (keys w*16 + g and + 8,
 * query q): the warp's 4 bytes of the query's row are one word, shifted by
 * the lane's part; key g + 8 hi is then bit 16 hi. */
__device__ __forceinline__ uint32_t key_bits(const uint8_t *sm, int q, int w, int g)
{
    return *reinterpret_cast<const uint32_t *>(sm + q * 16 + w * 4) >> (8 * (g >> 2) + (g & 3));
}

/* key_bits of query columns c and c + 1 (all kept without dropout) ... */
__device__ __forceinline__ uint2 keep_bits(const uint8_t *sm, const flash_drop &dr, int c, int w,
                                           int g)
{
    return dr.on ? make_uint2(key_bits(sm, c, w, g), key_bits(sm, c + 1, w, g))
                 : make_uint2(~0u, ~0u);
}

/* ... and whether accumulator element e (key row g, or g + 8 for e >= 2;
 * column c + (e & 1)) is kept. */
__device__ __forceinline__ bool kept(uint2 kb, int e)
{
    return (e & 1 ? kb.y : kb.x) & (1u << (16 * (e >> 1)));
}

/* A warp's 16 x N accumulator times (row g, row g + 8) factors, packed as T:
 * put(r, n, v) for each 4-byte pair v, columns n * 8 + 2t and + 1 of row r
 * (g or g + 8). */
template <ao_dtype T, int N, class Put>
__device__ __forceinline__ void pack_rows(const float (&acc)[N / 8][4], float f0, float f1, Put put)
{
    const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
    for (int n = 0; n < N / 8; n++) {
        put(g, n, pack2<T>(acc[n][0] * f0, acc[n][1] * f0));
        put(g + 8, n, pack2<T>(acc[n][2] * f1, acc[n][3] * f1));
    }
}

/* Writes a warp's 16 x HD accumulator times (row g, row g + 8) factors as T
 * at rows `stride` apart. */
template <ao_dtype T, int HD>
__device__ void store_rows(uint16_t *out, size_t stride, const float (&acc)[HD / 8][4], float f0,
                           float f1)
{
    const int t = threadIdx.x & 3;
    pack_rows<T, HD>(acc, f0, f1, [&](int r, int n, uint32_t v) {
        *reinterpret_cast<uint32_t *>(out + (size_t)r * stride + n * 8 + 2 * t) = v;
    });
}

/* What every tile kernel derives first: head h, sample b, the first row r0
 * of its tile (queries or keys), warp w, the lane's g and t; d3 the qkv row
 * stride, bh the (b, h) row, base q's first row of (b, h), the head's
 * dropout and the scores' base-2 scale. */
template <int HD> struct flash_block {
    int h, b, r0, w, g, t;
    size_t d3, bh;
    const uint16_t *base;
    flash_drop dr;
    float sl2;
    __device__ explicit flash_block(const flash_args &a, int rows = kTile)
        : h((int)blockIdx.y), b((int)blockIdx.z), r0((int)blockIdx.x * rows),
          w((int)threadIdx.x >> 5), g(((int)threadIdx.x & 31) >> 2), t((int)threadIdx.x & 3),
          d3(3 * (size_t)a.d), bh((size_t)blockIdx.z * a.H + blockIdx.y),
          base(a.qkv + (size_t)blockIdx.z * a.T * d3 + (size_t)blockIdx.y * HD),
          dr(flash_drop_of(a, bh)), sl2(a.scale * kLog2e)
    {
    }
};

/* What a dK, dV block (64 keys from k0, warp w, lane row g) reads and writes
 * besides its tiles: dO's head columns, the rows' lse and delta, and the
 * lane's key row of dS^T. */
struct kv_rows {
    const uint16_t *dobase;
    const float *lse, *delta;
    uint16_t *ds;
    __device__ kv_rows(const flash_args &a, int b, int h, size_t bh, int k0, int w, int g, int hd)
        : dobase(a.dctx + (size_t)b * a.T * a.d + (size_t)h * hd), lse(a.lse + bh * a.T),
          delta(a.delta + bh * a.T), ds(a.ds + (bh * a.T + (size_t)(k0 + w * 16 + g)) * a.T)
    {
    }
    /* Starts copying query tile n0's stage: its Q and dO rows through the
     * kernel's tile loader (load(s, g, stride): padded or swizzled shared
     * rows), its lse and delta into sLD, and (the mask read) its mask bytes
     * for keys from k0 into sM. base and d3 are the block's qkv and its row
     * stride (flash_block). The caller commits. */
    template <class Load>
    __device__ void stage(uint16_t *sQ, uint16_t *sO, float *sLD, uint8_t *sM, const flash_args &a,
                          const uint16_t *base, size_t d3, const flash_drop &dr, int n0, int k0,
                          Load load) const
    {
        load(sQ, base + (size_t)n0 * d3, d3);
        load(sO, dobase + (size_t)n0 * a.d, (size_t)a.d);
        load_row64(sLD, lse + n0);
        load_row64(sLD + kTile, delta + n0);
        if (dr.mask_in) mask_copy(sM, dr, n0, k0, a.T);
    }
};

/* A forward m-tile's running row maxima and sums (rows g, g + 8; base 2). */
struct softmax_rows {
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
};

/* One key tile of the online softmax on a warp's 16 x 64 raw scores s:
 * the maxima are taken before scaling (the scale is positive, so that is
 * exact) and each probability is one fma and one exp2; o and the sums are
 * rescaled only when some row's maximum grew (else the factor is exactly 1).
 * Leaves the dropped probabilities in s, the A operand of P V. */
template <int HD>
__device__ void online_step(float s[8][4], float o[HD / 8][4], softmax_rows &st,
                            const row_factors &rf, const flash_drop &dr, float sl2)
{
    float x0 = -INFINITY, x1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        x0 = fmaxf(x0, fmaxf(s[j][0], s[j][1]));
        x1 = fmaxf(x1, fmaxf(s[j][2], s[j][3]));
    }
    x0 = fmaxf(x0, AO_SHFL_XOR(x0, 1));
    x0 = fmaxf(x0, AO_SHFL_XOR(x0, 2));
    x1 = fmaxf(x1, AO_SHFL_XOR(x1, 1));
    x1 = fmaxf(x1, AO_SHFL_XOR(x1, 2));
    const float n0 = fmaxf(st.m0, x0 * sl2), n1 = fmaxf(st.m1, x1 * sl2);
    if (__any_sync(0xffffffffu, n0 != st.m0 || n1 != st.m1)) {
        const float c0 = fast_exp2(st.m0 - n0), c1 = fast_exp2(st.m1 - n1);
        st.m0 = n0;
        st.m1 = n1;
        st.l0 *= c0;
        st.l1 *= c1;
#pragma unroll
        for (int n = 0; n < HD / 8; n++) {
            o[n][0] *= c0;
            o[n][1] *= c0;
            o[n][2] *= c1;
            o[n][3] *= c1;
        }
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float p = fast_exp2(fmaf(s[j][e], sl2, e < 2 ? -n0 : -n1));
            if (e < 2)
                st.l0 += p;
            else
                st.l1 += p;
            s[j][e] = dr.on ? p * rf.at(j, e, dr.r.keep) : p;
        }
    }
}

template <class K>
cudaError_t flash_launch(K kernel, dim3 grid, size_t smem, cudaStream_t stream, const flash_args &a,
                         int threads = kFlashThreads)
{
    /* over 48 KiB of shared memory needs the opt-in, once per kernel */
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    launch(kernel, grid, threads, smem, stream, a);
    return cudaGetLastError();
}

flash_args flash_args_of(int heads, int T, int hd, float scale, const ao_cuda_dropout_key *key)
{
    flash_args a = {};
    a.H = heads;
    a.T = T;
    a.d = heads * hd;
    a.scale = scale;
    a.drop = dropout_args_of(*key);
    a.on = key->p > 0.0f;
    return a;
}

} // namespace

/* flash_sm90a.cu's forward (wgmma): cudaErrorNotSupported where the device
 * cannot run its sm_90a image or the shape is not its (head dim 128, T a
 * multiple of 128); mask_in as ao_cuda_flash_attention_forward's. */
extern "C" cudaError_t ao_flash_forward_sm90a(void *ctx, float *lse, const void *qkv, ao_dtype type,
                                              int batch, int heads, int T, int head_dim,
                                              float scale, const ao_cuda_dropout_key *key,
                                              const uint8_t *mask_in, cudaStream_t stream);
/* flash_sm90a.cu's dK, dV and dS^T kernel (wgmma), after flash.cu's delta:
 * cudaErrorNotSupported as above (head dim 128, T a multiple of 64). */
extern "C" cudaError_t ao_flash_backward_kv_sm90a(void *dqkv, void *scratch, const void *dctx,
                                                  const float *lse, const void *qkv, ao_dtype type,
                                                  int batch, int heads, int T, int head_dim,
                                                  float scale, const ao_cuda_dropout_key *key,
                                                  const uint8_t *mask_in, cudaStream_t stream);

#endif
#endif
