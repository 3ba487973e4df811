/* Fused (flash-style) attention, forward and backward, on 16-bit q, k, v:
 * tiles of 64 queries x 64 keys in shared memory, the products on tensor
 * cores (mma.sync m16n8k16, fp32 accumulation), an online softmax, and no
 * T x T matrix in global memory. The forward keeps each row's logsumexp;
 * the backward recomputes the probabilities from it in one kernel for dK
 * and dV (a block per key tile, looping over the queries), which also
 * writes dS^T (16-bit, as the products round it) to scratch; dQ = dS K is
 * then a batched GEMM over it (ao_cuda_flash_dq_gemm), so that no gradient
 * is summed by atomics (kernels_cuda.h: no floating-point atomics) and no
 * product is computed twice.
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
#include "model/kernels/flash.cuh"

#include <type_traits>

#if !defined(AO_GPU_HIP)

namespace
{

constexpr int kPad = 8; /* halves after each shared row: no bank conflicts */

template <int HD> __host__ __device__ constexpr int row_ld()
{
    return HD + kPad;
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
 * (16 x 16) and B's shared rows (row_ld apart): mma_pb's inner step. */
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

/* Shared bytes of a kernel with `tiles` 64 x HD tiles: those, two mask
 * tiles and two double-buffered pairs of 64 floats. */
template <int HD>
__host__ __device__ constexpr size_t flash_smem(int tiles, int mask_rows = 2 * kTile)
{
    return (size_t)tiles * kTile * row_ld<HD>() * 2 + (size_t)mask_rows * 16 +
           4 * kTile * sizeof(float);
}

/* ---- forward: a block per (kFwdMT query tiles, head, sample) ----------------- */

/* Query tiles a forward block (and m-tiles a warp: queries i * 64 + w * 16
 * .. + 15 of the block's) */
constexpr int kFwdMT = 2;

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
    const kv_rows kr(a, b, h, bh, k0, w, g, HD);
    const auto load = [](uint16_t *s, const uint16_t *src, size_t stride) {
        load_tile<HD>(s, src, stride);
    };
    const int tiles = a.T / kTile;
    load_tile<HD>(sK, base + a.d + (size_t)k0 * d3, d3);
    load_tile<HD>(sV, base + 2 * a.d + (size_t)k0 * d3, d3);
    kr.stage(sQO, sQO + TL, sLD, sM, a, base, d3, dr, 0, k0, load);
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
            kr.stage(sQO + nb * 2 * TL, sQO + nb * 2 * TL + TL, sLD + nb * 2 * kTile,
                     sM + nb * kTile * 16, a, base, d3, dr, n0, k0, load);
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
                const uint2 kb = keep_bits(sMb, dr, c, w, g);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const bool keep = kept(kb, e);
                    const float pv = fast_exp2(fmaf(p[j][e], sl2, -(e & 1 ? l.y : l.x)));
                    pd[j][e] = keep ? pv * kf : 0.0f;
                    p[j][e] = pv * fmaf(dp[j][e], keep ? ks : 0.0f, -(e & 1 ? dl.y : dl.x));
                }
                uint16_t *o = kr.ds + q0 + c;
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
#if AORTA_HAVE_SM90A
        const cudaError_t wg = ao_flash_forward_sm90a(ctx, lse, qkv, type, batch, heads, T, HD,
                                                      scale, key, a.mask_in, stream);
        if (wg != cudaErrorNotSupported) return wg;
#endif
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
    return with_flash_shape(type, head_dim, [&](auto tt, auto hh) {
        constexpr ao_dtype TT = decltype(tt)::value;
        constexpr int HD = decltype(hh)::value;
        const size_t lanes = (size_t)rows * (HD / 8);
        launch(flash_delta<TT, HD>, (unsigned)((lanes + kThreads - 1) / kThreads), kThreads, 0,
               stream, a, rows);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
#if AORTA_HAVE_SM90A
        e = ao_flash_backward_kv_sm90a(dqkv, scratch, dctx, lse, qkv, type, batch, heads, T, HD,
                                       scale, key, a.mask_in, stream);
        if (e != cudaErrorNotSupported) return e;
#endif
        return flash_launch(flash_backward_kv<TT, HD>, grid, flash_smem<HD>(6), stream, a);
    });
}

extern "C" ao_gemm_desc ao_cuda_flash_dq_gemm(void *dqkv, const void *scratch, const void *qkv,
                                              ao_dtype type, int batch, int heads, int T,
                                              int head_dim)
{
    const long long d = (long long)heads * head_dim, d3 = 3 * d, TT = (long long)T * T;
    ao_gemm_desc g = {};
    g.trans_a = 1; /* dS, stored as dS^T */
    g.m = T;
    g.n = head_dim;
    g.k = T;
    g.alpha = 1.0f;
    g.a = static_cast<const float *>(scratch) + (size_t)batch * heads * T;
    g.lda = T;
    g.b = static_cast<const uint16_t *>(qkv) + d; /* k */
    g.ldb = (int)d3;
    g.c = dqkv; /* dq */
    g.ldc = (int)d3;
    g.ab_type = g.c_type = type;
    g.compute = AO_COMPUTE_DEFAULT;
    g.batch_count = heads;
    g.stride_a = TT;
    g.stride_b = g.stride_c = head_dim;
    g.batch_outer = batch;
    g.outer_stride_a = heads * TT;
    g.outer_stride_b = g.outer_stride_c = T * d3;
    return g;
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

extern "C" ao_gemm_desc ao_cuda_flash_dq_gemm(void *, const void *, const void *, ao_dtype, int,
                                              int, int, int)
{
    return ao_gemm_desc{};
}

#endif
