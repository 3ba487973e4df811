/* Fused (flash-style) attention, forward and backward, on 16-bit q, k, v:
 * tiles of 64 queries x 64 keys in shared memory, the products on tensor
 * cores (mma.sync m16n8k16, fp32 accumulation), an online softmax, and no
 * T x T matrix in global memory. The forward keeps each row's logsumexp;
 * the backward recomputes the probabilities from it in one kernel for dK
 * and dV (a block per key tile, looping over the queries), which also
 * writes dS^T (16-bit, as the products round it) to scratch; a second
 * kernel (a block per query tile, looping over the keys) then forms
 * dQ = dS K from it, so that no gradient is summed by atomics
 * (kernels_cuda.h: no floating-point atomics) and no product is computed
 * twice.
 *
 * The dropout of the probabilities is attention.cu's, element for element:
 * element (q, key) of head (b, h) keeps or drops on word q * T + key of the
 * (b, h) row stream (dropout_row_stream), and the mask bytes have
 * ao_cuda_dropout_mask_bytes' layout, so a forward stores the same mask the
 * unfused one would and a backward reads either's. A forward that stores
 * the mask draws it all first (ao_cuda_draw_masks, one Philox block a group of four,
 * as the unfused kernels draw them); the tile loops copy each tile's 64 x 64
 * decisions into shared memory with the tile, or, with no mask to read or
 * store, each warp draws the part it reads.
 *
 * The tiles a block loops over stream through two shared buffers (cp.async:
 * the next tile loads while this one is multiplied). Warp w of the 4 owns
 * 16 rows of a tile (in the forward, of each of its block's two query
 * tiles). Fragments follow PTX's m16n8k16
 * layouts: lane = 4 g + t holds rows g and g + 8, columns 2t and 2t + 1 of
 * each 8-column tile of an accumulator, which is also the A-operand layout of
 * the next product (no shuffle between S and P V). */
#include "model/kernels/dropout.cuh"

#if !defined(AO_GPU_HIP)
#include <cuda_bf16.h>

#include <type_traits>

namespace
{

constexpr int kTile = 64;          /* queries and keys a tile */
constexpr int kFlashThreads = 128; /* 4 warps, 16 rows each */
constexpr int kPad = 8;            /* halves after each shared row: no bank conflicts */
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

template <int HD> __host__ __device__ constexpr int row_ld()
{
    return HD + kPad;
}

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* Four 8x8 16-bit matrices from shared memory, lane l naming row l % 8 of
 * matrix l / 8; trans: each one transposed. */
__device__ __forceinline__ void ldsm4(uint32_t r[4], const uint16_t *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldsm4_t(uint32_t r[4], const uint16_t *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}

/* c += a b, a 16x16 (row), b 16x8 (col), T = AO_BF16 or AO_F16. */
template <ao_dtype T>
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
#if __CUDA_ARCH__ >= 800
    if (T == AO_BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();
#endif
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

/* Starts copying a tile of 64 rows x HD halves from global rows `stride`
 * apart into shared rows row_ld apart. */
template <int HD> __device__ void load_tile(uint16_t *s, const uint16_t *g, size_t stride)
{
    constexpr int per_row = HD / 8;
    for (int i = threadIdx.x; i < kTile * per_row; i += kFlashThreads) {
        const int r = i / per_row, c = (i % per_row) * 8;
        cp_async16(s + r * row_ld<HD>() + c, g + (size_t)r * stride + c);
    }
}

/* Starts copying 64 floats (16-byte aligned) into shared memory. */
__device__ void load_row64(float *s, const float *g)
{
    if (threadIdx.x < kTile / 4) cp_async16(s + 4 * threadIdx.x, g + 4 * threadIdx.x);
}

/* acc[i][16 x 8 NT] += A_i[16 x HD] B[8 NT x HD]^T for the warp's MT m-tiles,
 * A_i at A + i kTile rows, B 8 NT shared rows (all row_ld apart): each B
 * fragment, read once, feeds MT products (shared-memory bandwidth, not the
 * tensor cores, bounds a warp of 16 rows on Hopper). */
template <ao_dtype T, int HD, int NT, int MT = 1>
__device__ void mma_abt(float (*acc)[NT][4], const uint16_t *A, const uint16_t *B)
{
    constexpr int LD = row_ld<HD>();
    const int lane = threadIdx.x & 31, m = lane >> 3, r = lane & 7;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int i = 0; i < MT; i++)
            ldsm4(a[i], A + (i * kTile + r + (m & 1) * 8) * LD + kk * 16 + (m >> 1) * 8);
#pragma unroll
        for (int j = 0; j < NT; j += 2) {
            uint32_t b[4];
            ldsm4(b, B + (j * 8 + r + (m >> 1) * 8) * LD + kk * 16 + (m & 1) * 8);
#pragma unroll
            for (int i = 0; i < MT; i++) {
                mma<T>(acc[i][j], a[i], b[0], b[1]);
                mma<T>(acc[i][j + 1], a[i], b[2], b[3]);
            }
        }
    }
}

/* Two products at once, acc[i][16 x 8 NT] += A_i[16 x HD] B_i[8 NT x HD]^T
 * (i = 0, 1; 16 and 8 NT shared rows): twice the independent accumulator
 * chains in flight, where one product's NT would leave the tensor pipe
 * waiting on each mma's latency. */
template <ao_dtype T, int HD, int NT>
__device__ void mma_abt2(float (*acc)[NT][4], const uint16_t *A0, const uint16_t *B0,
                         const uint16_t *A1, const uint16_t *B1)
{
    constexpr int LD = row_ld<HD>();
    const int lane = threadIdx.x & 31, m = lane >> 3, r = lane & 7;
    const uint16_t *A[2] = {A0, A1}, *B[2] = {B0, B1};
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t a[2][4];
#pragma unroll
        for (int i = 0; i < 2; i++)
            ldsm4(a[i], A[i] + (r + (m & 1) * 8) * LD + kk * 16 + (m >> 1) * 8);
#pragma unroll
        for (int j = 0; j < NT; j += 2) {
            uint32_t b[2][4];
#pragma unroll
            for (int i = 0; i < 2; i++)
                ldsm4(b[i], B[i] + (j * 8 + r + (m >> 1) * 8) * LD + kk * 16 + (m & 1) * 8);
#pragma unroll
            for (int i = 0; i < 2; i++) {
                mma<T>(acc[i][j], a[i], b[i][0], b[i][1]);
                mma<T>(acc[i][j + 1], a[i], b[i][2], b[i][3]);
            }
        }
    }
}

/* acc[i][16 x HD] += a_i B[kk * 16 .. + 15][HD] for MT A fragments a_i
 * (16 x 16) and B's shared rows (row_ld apart): the inner step of mma_pb
 * and mma_tb. */
template <ao_dtype T, int HD, int MT>
__device__ __forceinline__ void mma_ab_rows(float (*acc)[HD / 8][4], const uint32_t (*a)[4],
                                            const uint16_t *B, int kk)
{
    constexpr int LD = row_ld<HD>();
    const int lane = threadIdx.x & 31, m = lane >> 3, r = lane & 7;
#pragma unroll
    for (int n = 0; n < HD / 8; n += 2) {
        uint32_t b[4];
        ldsm4_t(b, B + (kk * 16 + r + (m & 1) * 8) * LD + n * 8 + (m >> 1) * 8);
#pragma unroll
        for (int i = 0; i < MT; i++) {
            mma<T>(acc[i][n], a[i], b[0], b[1]);
            mma<T>(acc[i][n + 1], a[i], b[2], b[3]);
        }
    }
}

/* acc[i][16 x HD] += P_i[16 x 8 NT] B[8 NT x HD] for the warp's MT m-tiles:
 * P_i in accumulator layout (rounded to T here), B 8 NT shared rows. */
template <ao_dtype T, int HD, int NT, int MT = 1>
__device__ void mma_pb(float (*acc)[HD / 8][4], const float (*p)[NT][4], const uint16_t *B)
{
#pragma unroll
    for (int kk = 0; kk < NT / 2; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int i = 0; i < MT; i++) {
            a[i][0] = pack2<T>(p[i][2 * kk][0], p[i][2 * kk][1]);
            a[i][1] = pack2<T>(p[i][2 * kk][2], p[i][2 * kk][3]);
            a[i][2] = pack2<T>(p[i][2 * kk + 1][0], p[i][2 * kk + 1][1]);
            a[i][3] = pack2<T>(p[i][2 * kk + 1][2], p[i][2 * kk + 1][3]);
        }
        mma_ab_rows<T, HD, MT>(acc, a, B, kk);
    }
}

/* acc[i][16 x HD] += A_i[16 x 64] B[64 x HD] for the warp's MT m-tiles, A_i
 * stored transposed (64 shared rows, LA halves apart, of its 16 columns at
 * At + i kTile): ldmatrix's transpose hands each lane the A fragment, so
 * dS^T, written key-major by the dK dV kernel, needs no reordering. */
template <ao_dtype T, int HD, int LA, int MT>
__device__ void mma_tb(float (*acc)[HD / 8][4], const uint16_t *At, const uint16_t *B)
{
    const int lane = threadIdx.x & 31, m = lane >> 3, r = lane & 7;
#pragma unroll
    for (int kk = 0; kk < kTile / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int i = 0; i < MT; i++)
            ldsm4_t(a[i], At + (kk * 16 + r + (m >> 1) * 8) * LA + i * kTile + (m & 1) * 8);
        mma_ab_rows<T, HD, MT>(acc, a, B, kk);
    }
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

/* 2^x on the special-function unit alone: results under 2^-126 flush to 0
 * (exp2f's denormal fix-ups cost ~3 instructions an element here, where the
 * tile loops are bound by instruction issue, not by the tensor cores). */
__device__ __forceinline__ float fast_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
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
        return (m[e >> 1][j >> 1] >> (16 * (j & 1) + (e & 1))) & 1u ? f : 0.0f;
    }
};

/* The keep bits of a key-owning warp's elements (keys w*16 + g and + 8,
 * query q): the warp's 4 bytes of the query's row are one word, shifted by
 * the lane's part; key g + 8 hi is then bit 16 hi. */
__device__ __forceinline__ uint32_t key_bits(const uint8_t *sm, int q, int w, int g)
{
    return *reinterpret_cast<const uint32_t *>(sm + q * 16 + w * 4) >> (8 * (g >> 2) + (g & 3));
}

/* Writes a warp's 16 x HD accumulator times (row g, row g + 8) factors as T
 * at rows `stride` apart. */
template <ao_dtype T, int HD>
__device__ void store_rows(uint16_t *out, size_t stride, const float acc[HD / 8][4], float f0,
                           float f1)
{
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < HD / 8; n++) {
        const int c = n * 8 + 2 * t;
        *reinterpret_cast<uint32_t *>(out + (size_t)g * stride + c) =
            pack2<T>(acc[n][0] * f0, acc[n][1] * f0);
        *reinterpret_cast<uint32_t *>(out + (size_t)(g + 8) * stride + c) =
            pack2<T>(acc[n][2] * f1, acc[n][3] * f1);
    }
}

/* Shared bytes of a kernel with `tiles` 64 x HD tiles: those, two mask
 * tiles and two double-buffered pairs of 64 floats. */
template <int HD>
__host__ __device__ constexpr size_t flash_smem(int tiles, int mask_rows = 2 * kTile)
{
    return (size_t)tiles * kTile * row_ld<HD>() * 2 + (size_t)mask_rows * 16 +
           4 * kTile * sizeof(float);
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

/* ---- forward: a block per (kFwdMT query tiles, head, sample) ----------------- */

/* Query tiles a forward block (and m-tiles a warp: queries i * 64 + w * 16
 * .. + 15 of the block's) */
constexpr int kFwdMT = 2;

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

/* The key tiles stream through two buffers: tile i + 1's copy runs while
 * tile i is multiplied. A block's last query tiles past T (T % 128 == 64)
 * repeat its first one and are neither drawn nor stored. */
template <ao_dtype T, int HD, bool DRAW>
__global__ void __launch_bounds__(kFlashThreads) flash_forward(flash_args a)
{
    pdl_wait();
    extern __shared__ __align__(16) uint16_t smem[];
    constexpr int LD = row_ld<HD>(), TL = kTile * LD, MT = kFwdMT;
    uint16_t *sQ = smem, *sKV = sQ + MT * TL;                /* Q: [MT], then [2][K, V] */
    uint8_t *sM = reinterpret_cast<uint8_t *>(sKV + 4 * TL); /* [2][MT * 64 queries][16] */
    const auto &[h, b, q0, w, g, t, d3, bh, base, dr, sl2] = flash_block<HD>(a, MT * kTile);
    const int tiles = a.T / kTile, r = w * 16 + g, mv = min(MT, (a.T - q0) / kTile);
#pragma unroll
    for (int i = 0; i < MT; i++)
        load_tile<HD>(sQ + i * TL, base + (size_t)(q0 + (i < mv ? i : 0) * kTile) * d3, d3);
    load_tile<HD>(sKV, base + a.d, d3);
    load_tile<HD>(sKV + TL, base + 2 * a.d, d3);
    if (dr.mask_in)
        for (int i = 0; i < mv; i++) mask_copy(sM + i * kTile * 16, dr, q0 + i * kTile, 0, a.T);
    cp_async_commit();

    float o[MT][HD / 8][4] = {};
    softmax_rows st[MT];
    for (int it = 0; it < tiles; it++) {
        const int k0 = it * kTile;
        const uint16_t *sK = sKV + (it & 1) * 2 * TL, *sV = sK + TL;
        uint8_t *sMb = sM + (it & 1) * MT * kTile * 16;
        if (it + 1 < tiles) {
            uint16_t *nK = sKV + ((it + 1) & 1) * 2 * TL;
            load_tile<HD>(nK, base + a.d + (size_t)(k0 + kTile) * d3, d3);
            load_tile<HD>(nK + TL, base + 2 * a.d + (size_t)(k0 + kTile) * d3, d3);
            if (dr.mask_in)
                for (int i = 0; i < mv; i++)
                    mask_copy(sM + (((it + 1) & 1) * MT + i) * kTile * 16, dr, q0 + i * kTile,
                              k0 + kTile, a.T);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        if (DRAW)
            for (int i = 0; i < mv; i++)
                mask_part<16>(sMb + i * kTile * 16, dr, q0 + i * kTile, k0, a.T, w * 16, 0);
        float s[MT][8][4] = {};
        mma_abt<T, HD, 8, MT>(s, sQ + w * 16 * LD, sK);
#pragma unroll
        for (int i = 0; i < MT; i++)
            online_step<HD>(s[i], o[i], st[i], row_factors(sMb + i * kTile * 16, r, t), dr, sl2);
        mma_pb<T, HD, 8, MT>(o, s, sV);
        __syncthreads(); /* the buffer is refilled next iteration */
    }
#pragma unroll
    for (int i = 0; i < MT; i++) {
        if (i >= mv) break;
        softmax_rows &x = st[i];
        x.l0 += AO_SHFL_XOR(x.l0, 1);
        x.l0 += AO_SHFL_XOR(x.l0, 2);
        x.l1 += AO_SHFL_XOR(x.l1, 1);
        x.l1 += AO_SHFL_XOR(x.l1, 2);
        const int q = q0 + i * kTile + r;
        store_rows<T, HD>(a.out + ((size_t)b * a.T + q - g) * a.d + (size_t)h * HD, (size_t)a.d,
                          o[i], 1.0f / x.l0, 1.0f / x.l1);
        if (t == 0) {
            a.lse[bh * a.T + q] = x.m0 + log2f(x.l0);
            a.lse[bh * a.T + q + 8] = x.m1 + log2f(x.l1);
        }
    }
}

/* ---- backward ----------------------------------------------------------------- */

/* delta[row] = scale times the sum over the head's columns of dctx * ctx:
 * HD / 8 lanes a (b, h, query) row (8 columns each, two 8-byte loads), rows
 * in the order of lse. */
template <ao_dtype T, int HD> __global__ void flash_delta(flash_args a, int rows)
{
    pdl_wait();
    constexpr int L = HD / 8;
    const size_t i = (size_t)blockIdx.x * kThreads + threadIdx.x;
    const int row = (int)(i / L);
    double s = 0.0;
    if (row < rows) {
        const int q = row % a.T, bh = row / a.T, h = bh % a.H, b = bh / a.H;
        const size_t off = ((size_t)b * a.T + q) * a.d + (size_t)h * HD + (i % L) * 8;
        const typed_load<T> dy{a.dctx}, y{a.ctx};
#pragma unroll
        for (int k = 0; k < 8; k += 4) {
            const float4 u = dy.load4(off + k), v = y.load4(off + k);
            s += (double)(u.x * v.x);
            s += (double)(u.y * v.y);
            s += (double)(u.z * v.z);
            s += (double)(u.w * v.w);
        }
    }
#pragma unroll
    for (int o = L / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (row < rows && i % L == 0) a.delta[row] = (float)s * a.scale;
}

/* dK, dV: a block per (key tile, head, sample); warp w owns keys w*16 ..
 * and computes S^T and dP^T (keys x queries), whose accumulators are the
 * A operands of dV += P^T dO and dK += dS^T Q, and stores dS^T (rounded to
 * T, the operand dK took) for flash_backward_dq. The query tiles (q, dO,
 * lse, delta) stream through two buffers. */
template <ao_dtype T, int HD>
__global__ void __launch_bounds__(kFlashThreads) flash_backward_kv(flash_args a)
{
    pdl_wait();
    extern __shared__ __align__(16) uint16_t smem[];
    constexpr int LD = row_ld<HD>(), TL = kTile * LD;
    uint16_t *sK = smem, *sV = sK + TL, *sQO = sV + TL; /* [2][Q, dO] */
    uint8_t *sM = reinterpret_cast<uint8_t *>(sQO + 4 * TL);
    float *sLD = reinterpret_cast<float *>(sM + 2 * kTile * 16); /* [2][lse, delta] */
    const auto &[h, b, k0, w, g, t, d3, bh, base, dr, sl2] = flash_block<HD>(a);
    const uint16_t *dobase = a.dctx + (size_t)b * a.T * a.d + (size_t)h * HD;
    const float *lse = a.lse + bh * a.T, *delta = a.delta + bh * a.T;
    uint16_t *ds = a.ds + (bh * a.T + (size_t)(k0 + w * 16 + g)) * a.T; /* the lane's key row */
    const int tiles = a.T / kTile;
    load_tile<HD>(sK, base + a.d + (size_t)k0 * d3, d3);
    load_tile<HD>(sV, base + 2 * a.d + (size_t)k0 * d3, d3);
    load_tile<HD>(sQO, base, d3);
    load_tile<HD>(sQO + TL, dobase, (size_t)a.d);
    load_row64(sLD, lse);
    load_row64(sLD + kTile, delta);
    if (dr.mask_in) mask_copy(sM, dr, 0, k0, a.T);
    cp_async_commit();

    /* the kept elements' factor, and it times the scale (delta holds its own) */
    const float kf = dr.on ? dr.r.keep : 1.0f, ks = kf * a.scale;
    float dk[HD / 8][4] = {}, dv[HD / 8][4] = {};
    for (int it = 0; it < tiles; it++) {
        const int q0 = it * kTile;
        const uint16_t *sQ = sQO + (it & 1) * 2 * TL, *sO = sQ + TL;
        const float *sL = sLD + (it & 1) * 2 * kTile, *sD = sL + kTile;
        uint8_t *sMb = sM + (it & 1) * kTile * 16;
        if (it + 1 < tiles) {
            const int nb = (it + 1) & 1, n0 = q0 + kTile;
            load_tile<HD>(sQO + nb * 2 * TL, base + (size_t)n0 * d3, d3);
            load_tile<HD>(sQO + nb * 2 * TL + TL, dobase + (size_t)n0 * a.d, (size_t)a.d);
            load_row64(sLD + nb * 2 * kTile, lse + n0);
            load_row64(sLD + nb * 2 * kTile + kTile, delta + n0);
            if (dr.mask_in) mask_copy(sM + nb * kTile * 16, dr, n0, k0, a.T);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        /* this warp's keys: groups w*4 .. w*4 + 3 of every query */
        if (dr.on && !dr.mask_in) mask_part<4>(sMb, dr, q0, k0, a.T, 0, w * 4);
            /* in two halves of 32 queries: fewer accumulators live at once */
#pragma unroll 1
        for (int hq = 0; hq < kTile; hq += 32) {
            const uint16_t *hQ = sQ + hq * LD, *hO = sO + hq * LD;
            float pdp[2][4][4] = {}, pd[4][4];
            float(&p)[4][4] = pdp[0], (&dp)[4][4] = pdp[1];
            mma_abt2<T, HD, 4>(pdp, sK + w * 16 * LD, hQ, sV + w * 16 * LD, hO);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int c = hq + j * 8 + 2 * t;
                const float2 l = *reinterpret_cast<const float2 *>(sL + c);
                const float2 dl = *reinterpret_cast<const float2 *>(sD + c);
                const uint32_t kb[2] = {dr.on ? key_bits(sMb, c, w, g) : ~0u,
                                        dr.on ? key_bits(sMb, c + 1, w, g) : ~0u};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const bool keep = (kb[e & 1] >> (16 * (e >> 1))) & 1u;
                    const float pv = fast_exp2(fmaf(p[j][e], sl2, -(e & 1 ? l.y : l.x)));
                    pd[j][e] = keep ? pv * kf : 0.0f;
                    p[j][e] = pv * fmaf(dp[j][e], keep ? ks : 0.0f, -(e & 1 ? dl.y : dl.x));
                }
                uint16_t *o = ds + q0 + c;
                *reinterpret_cast<uint32_t *>(o) = pack2<T>(p[j][0], p[j][1]);
                *reinterpret_cast<uint32_t *>(o + (size_t)8 * a.T) = pack2<T>(p[j][2], p[j][3]);
            }
            mma_pb<T, HD, 4>(&dv, &pd, hO);
            mma_pb<T, HD, 4>(&dk, &p, hQ);
        }
        __syncthreads(); /* the buffer is refilled next iteration */
    }
    const size_t row0 = (size_t)b * a.T + k0 + w * 16;
    store_rows<T, HD>(a.out + row0 * d3 + a.d + (size_t)h * HD, d3, dk, 1.0f, 1.0f);
    store_rows<T, HD>(a.out + row0 * d3 + 2 * a.d + (size_t)h * HD, d3, dv, 1.0f, 1.0f);
}

/* dQ = dS K: a block per (MT query tiles, head, sample), warp w owning
 * queries i * 64 + w * 16 .. + 15 of its block's (i < MT), looping over the
 * key tiles, whose K rows and dS^T (64 keys x 64 MT queries) stream through
 * two buffers. */
template <ao_dtype T, int HD, int MT>
__global__ void __launch_bounds__(kFlashThreads) flash_backward_dq(flash_args a)
{
    pdl_wait();
    extern __shared__ __align__(16) uint16_t smem[];
    constexpr int LD = row_ld<HD>(), TL = kTile * LD, LA = row_ld<MT * kTile>();
    constexpr int STL = kTile * LA;
    uint16_t *sK = smem, *sS = sK + 2 * TL; /* [2] K, then [2] dS^T */
    const auto &[h, b, q0, w, g, t, d3, bh, base, dr, sl2] = flash_block<HD>(a, MT * kTile);
    (void)dr, (void)sl2;
    const uint16_t *ds = a.ds + bh * (size_t)a.T * a.T + q0;
    const int tiles = a.T / kTile;
    load_tile<HD>(sK, base + a.d, d3);
    load_tile<MT * kTile>(sS, ds, (size_t)a.T);
    cp_async_commit();
    float dq[MT][HD / 8][4] = {};
    for (int it = 0; it < tiles; it++) {
        const int k0 = it * kTile, cur = it & 1;
        if (it + 1 < tiles) {
            load_tile<HD>(sK + (cur ^ 1) * TL, base + a.d + (size_t)(k0 + kTile) * d3, d3);
            load_tile<MT * kTile>(sS + (cur ^ 1) * STL, ds + (size_t)(k0 + kTile) * a.T,
                                  (size_t)a.T);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        mma_tb<T, HD, LA, MT>(dq, sS + cur * STL + w * 16, sK + cur * TL);
        __syncthreads(); /* the buffer is refilled next iteration */
    }
#pragma unroll
    for (int i = 0; i < MT; i++)
        store_rows<T, HD>(a.out + ((size_t)b * a.T + q0 + i * kTile + w * 16) * d3 + (size_t)h * HD,
                          d3, dq[i], 1.0f, 1.0f);
}

/* flash_backward_dq's shared bytes: two K tiles and two dS^T tiles. */
template <int HD, int MT> constexpr size_t dq_smem()
{
    return (size_t)2 * kTile * (row_ld<HD>() + row_ld<MT * kTile>()) * sizeof(uint16_t);
}

template <class K>
cudaError_t flash_launch(K kernel, dim3 grid, size_t smem, cudaStream_t stream, const flash_args &a)
{
    /* over 48 KiB of shared memory needs the opt-in, once per kernel */
    cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    launch(kernel, grid, kFlashThreads, smem, stream, a);
    return cudaGetLastError();
}

/* f(dtype_tag, hd constant) for the supported (type, hd). */
template <class F> cudaError_t with_flash_shape(ao_dtype t, int hd, F &&f)
{
    if (t == AO_BF16 && hd == 64) return f(dtype_tag<AO_BF16>{}, std::integral_constant<int, 64>{});
    if (t == AO_BF16 && hd == 128)
        return f(dtype_tag<AO_BF16>{}, std::integral_constant<int, 128>{});
    if (t == AO_F16 && hd == 64) return f(dtype_tag<AO_F16>{}, std::integral_constant<int, 64>{});
    if (t == AO_F16 && hd == 128) return f(dtype_tag<AO_F16>{}, std::integral_constant<int, 128>{});
    return cudaErrorInvalidValue;
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

extern "C" int ao_cuda_flash_attention_supported(ao_dtype type, int T, int head_dim)
{
    return (type == AO_BF16 || type == AO_F16) && (head_dim == 64 || head_dim == 128) && T > 0 &&
           T % kTile == 0;
}

extern "C" cudaError_t ao_cuda_flash_attention_forward(void *ctx, float *lse, const void *qkv,
                                                       ao_dtype type, int batch, int heads, int T,
                                                       int head_dim, float scale,
                                                       const ao_cuda_dropout_key *key,
                                                       const uint8_t *mask_in, uint8_t *mask_out,
                                                       cudaStream_t stream)
{
    if (!ao_cuda_flash_attention_supported(type, T, head_dim) || key->heads != heads)
        return cudaErrorInvalidValue;
    if (batch <= 0 || heads <= 0) return cudaSuccess;
    flash_args a = flash_args_of(heads, T, head_dim, scale, key);
    a.qkv = static_cast<const uint16_t *>(qkv);
    a.out = static_cast<uint16_t *>(ctx);
    a.lse = lse;
    a.mask_in = a.on ? mask_in : nullptr;
    a.mask_out = mask_in ? nullptr : mask_out;
    const int qt = kFwdMT * kTile;
    const dim3 grid((unsigned)((T + qt - 1) / qt), (unsigned)heads, (unsigned)batch);
    return with_flash_shape(type, head_dim, [&](auto tt, auto hh) {
        constexpr ao_dtype TT = decltype(tt)::value;
        constexpr int HD = decltype(hh)::value;
        if (a.on && a.mask_out) { /* drawn first at full occupancy, then read */
            const ao_cuda_mask_job job = {a.mask_out, batch * heads, (size_t)T * T, *key};
            const cudaError_t e = ao_cuda_draw_masks(&job, 1, 0, stream);
            if (e != cudaSuccess) return e;
            a.mask_in = a.mask_out;
            a.mask_out = nullptr;
        }
        const size_t smem = flash_smem<HD>(kFwdMT + 4, 2 * kFwdMT * kTile);
        if (a.on && !a.mask_in)
            return flash_launch(flash_forward<TT, HD, true>, grid, smem, stream, a);
        return flash_launch(flash_forward<TT, HD, false>, grid, smem, stream, a);
    });
}

extern "C" size_t ao_cuda_flash_backward_scratch_bytes(int batch, int heads, int T)
{
    const size_t rows = (size_t)batch * heads * T;
    return rows * sizeof(float) + rows * (size_t)T * sizeof(uint16_t);
}

extern "C" cudaError_t ao_cuda_flash_attention_backward(void *dqkv, void *scratch, const void *dctx,
                                                        const void *ctx, const float *lse,
                                                        const void *qkv, ao_dtype type, int batch,
                                                        int heads, int T, int head_dim, float scale,
                                                        const ao_cuda_dropout_key *key,
                                                        const uint8_t *mask_in, cudaStream_t stream)
{
    if (!ao_cuda_flash_attention_supported(type, T, head_dim) || key->heads != heads)
        return cudaErrorInvalidValue;
    if (batch <= 0 || heads <= 0) return cudaSuccess;
    flash_args a = flash_args_of(heads, T, head_dim, scale, key);
    a.qkv = static_cast<const uint16_t *>(qkv);
    a.ctx = static_cast<const uint16_t *>(ctx);
    a.dctx = static_cast<const uint16_t *>(dctx);
    a.out = static_cast<uint16_t *>(dqkv);
    a.lse = const_cast<float *>(lse);
    const int rows = batch * heads * T;
    a.delta = static_cast<float *>(scratch); /* rows floats (a multiple of 64), then dS^T */
    a.ds = reinterpret_cast<uint16_t *>(a.delta + rows);
    a.mask_in = mask_in;
    const dim3 grid((unsigned)(T / kTile), (unsigned)heads, (unsigned)batch);
    flash_args aq = a; /* dQ reads no mask */
    aq.on = false;
    return with_flash_shape(type, head_dim, [&](auto tt, auto hh) {
        constexpr ao_dtype TT = decltype(tt)::value;
        constexpr int HD = decltype(hh)::value;
        const size_t lanes = (size_t)rows * (HD / 8);
        launch(flash_delta<TT, HD>, (unsigned)((lanes + kThreads - 1) / kThreads), kThreads, 0,
               stream, a, rows);
        cudaError_t e = cudaGetLastError();
        if (e == cudaSuccess)
            e = flash_launch(flash_backward_kv<TT, HD>, grid, flash_smem<HD>(6), stream, a);
        if (e != cudaSuccess) return e;
        if (T % (2 * kTile) == 0)
            return flash_launch(flash_backward_dq<TT, HD, 2>, dim3(grid.x / 2, grid.y, grid.z),
                                dq_smem<HD, 2>(), stream, aq);
        return flash_launch(flash_backward_dq<TT, HD, 1>, grid, dq_smem<HD, 1>(), stream, aq);
    });
}

#else /* HIP: not ported; the model takes the unfused path */

extern "C" int ao_cuda_flash_attention_supported(ao_dtype type, int T, int head_dim)
{
    (void)type;
    (void)T;
    (void)head_dim;
    return 0;
}

extern "C" cudaError_t ao_cuda_flash_attention_forward(void *, float *, const void *, ao_dtype, int,
                                                       int, int, int, float,
                                                       const ao_cuda_dropout_key *, const uint8_t *,
                                                       uint8_t *, cudaStream_t)
{
    return cudaErrorInvalidValue;
}

extern "C" size_t ao_cuda_flash_backward_scratch_bytes(int batch, int heads, int T)
{
    (void)batch;
    (void)heads;
    (void)T;
    return 0;
}

extern "C" cudaError_t ao_cuda_flash_attention_backward(void *, void *, const void *, const void *,
                                                        const float *, const void *, ao_dtype, int,
                                                        int, int, int, float,
                                                        const ao_cuda_dropout_key *,
                                                        const uint8_t *, cudaStream_t)
{
    return cudaErrorInvalidValue;
}

#endif
