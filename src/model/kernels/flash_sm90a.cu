/* Fused attention on Hopper's warpgroup MMA (wgmma, sm_90a), head dim 128:
 * the forward (T a multiple of 128) and the dK, dV kernel (T a multiple of
 * 64), the same functions as flash.cu's flash_forward and
 * flash_backward_kv, bit for bit in their dropout decisions and within
 * rounding in their values (the products' order differs).
 *
 * Operands sit in shared memory in the 128-byte swizzled layout wgmma's
 * descriptors read (rows of 64 halves; element (r, c) of a 64-column half at
 * r * 128 + ((c / 8) ^ (r % 8)) * 16 + (c % 8) * 2 bytes, each half 1024-byte
 * aligned) and stream through two stages (cp.async). A warpgroup's m64nN
 * accumulator gives each warp the m16n8 fragments mma.sync's does, so the
 * per-element work (online softmax, dropout bits, stores) is flash.cuh's.
 *
 * Forward: a block is 2 warpgroups, each owning 64 of its 128 queries; per
 * 64-key tile, S = Q K^T (8 m64n64k16, both operands from shared memory,
 * K-major), the online softmax and dropout, then P V (4 m64n128k16, P from
 * registers, V read MN-major).
 *
 * Compiled for sm_90a only (CMakeLists.txt); ao_flash_forward_sm90a and
 * ao_flash_backward_kv_sm90a say cudaErrorNotSupported where this image
 * cannot run or the shape does not fit, and flash.cu then runs its own
 * kernels. */
#include "model/kernels/flash.cuh"

namespace
{

constexpr int kWgQueries = 128; /* a block: 2 warpgroups of 64 queries */
constexpr int kWgThreads = 256;
constexpr int kHalf = 64 * 64; /* halves in a 64-row, 64-column swizzled half tile */
constexpr uint32_t kVLead = kHalf * 2, kVStride = 8 * 128; /* V's descriptor strides, bytes */

/* Starts copying ROWS x 128 halves (rows `stride` apart) into the swizzled
 * layout, column half c / 64 at s + (c / 64) * ROWS * 64, with the block's
 * NT threads. Thread i copies 16-byte column i % 16 of rows i / 16 + k NT / 16:
 * NT / 16 is a multiple of 8, so its swizzle (row % 8) is the same for every
 * k and each copy is one constant offset from the first: the loops issue
 * instructions, not products, so the address math is kept out of them. */
template <int ROWS, int NT>
__device__ __forceinline__ void load_swizzled(uint16_t *s, const uint16_t *g, size_t stride)
{
    static_assert(NT % 128 == 0 && ROWS * 16 % NT == 0, "whole swizzle periods a step");
    constexpr int kRows = NT / 16; /* rows a step */
    const int i = (int)threadIdx.x, r = i / 16, c = i % 16;
    uint16_t *sp = s + (c / 8) * ROWS * 64 + r * 64 + (((c % 8) ^ (r & 7)) * 8);
    const uint16_t *gp = g + (size_t)r * stride + c * 8;
    const size_t step = (size_t)kRows * stride;
#pragma unroll
    for (int k = 0; k < ROWS * 16 / NT; k++) cp_async16(sp + k * kRows * 64, gp + k * step);
}

/* A shared-memory matrix descriptor, 128-byte swizzle: lbo and sbo in bytes.
 * K-major operands use sbo alone (8-row groups, 1 KiB apart); an MN-major
 * one (V, n = the head's 128 columns) steps lbo between its two 64-column
 * halves and sbo between groups of 8 keys. at(off) is the descriptor of
 * p + off halves (off a multiple of 8): the start address field is the
 * shared address / 16 in 14 bits, and every operand lies below 256 KiB, so
 * the offset adds to the low word without a carry: one add a product, not
 * a descriptor rebuilt from its address. */
struct wg_desc {
    uint32_t lo, hi;
    __device__ __forceinline__ wg_desc(const void *p, uint32_t lbo, uint32_t sbo)
        : lo(((smem_addr(p) & 0x3FFFF) >> 4) | (lbo >> 4) << 16), hi((sbo >> 4) | 1u << 30)
    {
    }
    __device__ __forceinline__ uint64_t at(int off) const
    {
        return (uint64_t)hi << 32 | (lo + (uint32_t)off / 8);
    }
};

__device__ __forceinline__ void wg_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wg_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* Waits until at most N committed groups are still running. */
template <int N> __device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void wg_commit_wait()
{
    wg_commit();
    wg_wait<0>();
}

/* Keeps the compiler from moving an accumulator across the asynchronous
 * products (their registers are in flight until the wait). */
template <int N> __device__ __forceinline__ void wg_hold(float (&acc)[N][4])
{
#pragma unroll
    for (int j = 0; j < N; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+f"(acc[j][e])::"memory");
}

/* ... and an A operand's registers, read by the products until the wait. */
template <int N> __device__ __forceinline__ void wg_hold(uint32_t (&a)[N][4])
{
#pragma unroll
    for (int j = 0; j < N; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+r"(a[j][e])::"memory");
}

/* The accumulators as asm operands: acc[j][e] is register 4 j + e of the
 * instruction's fragment (m16n8 tiles per warp, as mma.sync's). */
#define WG_ACC32(a)                                                                                \
    "+f"(a[0][0]), "+f"(a[0][1]), "+f"(a[0][2]), "+f"(a[0][3]), "+f"(a[1][0]), "+f"(a[1][1]),      \
        "+f"(a[1][2]), "+f"(a[1][3]), "+f"(a[2][0]), "+f"(a[2][1]), "+f"(a[2][2]), "+f"(a[2][3]),  \
        "+f"(a[3][0]), "+f"(a[3][1]), "+f"(a[3][2]), "+f"(a[3][3]), "+f"(a[4][0]), "+f"(a[4][1]),  \
        "+f"(a[4][2]), "+f"(a[4][3]), "+f"(a[5][0]), "+f"(a[5][1]), "+f"(a[5][2]), "+f"(a[5][3]),  \
        "+f"(a[6][0]), "+f"(a[6][1]), "+f"(a[6][2]), "+f"(a[6][3]), "+f"(a[7][0]), "+f"(a[7][1]),  \
        "+f"(a[7][2]), "+f"(a[7][3])
#define WG_ACC64(a)                                                                                \
    WG_ACC32(a), "+f"(a[8][0]), "+f"(a[8][1]), "+f"(a[8][2]), "+f"(a[8][3]), "+f"(a[9][0]),        \
        "+f"(a[9][1]), "+f"(a[9][2]), "+f"(a[9][3]), "+f"(a[10][0]), "+f"(a[10][1]),               \
        "+f"(a[10][2]), "+f"(a[10][3]), "+f"(a[11][0]), "+f"(a[11][1]), "+f"(a[11][2]),            \
        "+f"(a[11][3]), "+f"(a[12][0]), "+f"(a[12][1]), "+f"(a[12][2]), "+f"(a[12][3]),            \
        "+f"(a[13][0]), "+f"(a[13][1]), "+f"(a[13][2]), "+f"(a[13][3]), "+f"(a[14][0]),            \
        "+f"(a[14][1]), "+f"(a[14][2]), "+f"(a[14][3]), "+f"(a[15][0]), "+f"(a[15][1]),            \
        "+f"(a[15][2]), "+f"(a[15][3])

/* s (64 x 64 a warpgroup) = (acc ? s : 0) + A B^T, A and B K-major in shared
 * memory; TY the PTX type of T. */
#define WG_SS(TY)                                                                                  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY                           \
                 " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "   \
                 "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "    \
                 "%32, %33, p, 1, 1, 0, 0;\n}"                                                     \
                 : WG_ACC32(s)                                                                     \
                 : "l"(da), "l"(db), "r"(acc))
template <ao_dtype T>
__device__ __forceinline__ void wg_ss(float (&s)[8][4], uint64_t da, uint64_t db, int acc)
{
    if (T == AO_BF16)
        WG_SS("bf16");
    else
        WG_SS("f16");
}

/* o (64 x 128 a warpgroup) += A B, A from registers (m16n8k16 A fragments
 * per warp), B MN-major in shared memory. */
#define WG_RS(TY)                                                                                  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY                          \
                 " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "   \
                 "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "     \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, "     \
                 "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "     \
                 "%62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}"                            \
                 : WG_ACC64(o)                                                                     \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1))
template <ao_dtype T>
__device__ __forceinline__ void wg_rs(float (&o)[16][4], const uint32_t (&a)[4], uint64_t db)
{
    if (T == AO_BF16)
        WG_RS("bf16");
    else
        WG_RS("f16");
}

/* The tile a loop reads now is in shared memory, for every thread and for
 * the tensor cores (its copies were the newest group; the async-proxy fence,
 * as wgmma reads through that proxy), and every warp is past the previous
 * tile: one barrier for both, after which the stage that tile used takes
 * the next tile's copies. */
__device__ __forceinline__ void stage_ready()
{
    cp_async_wait<0>();
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
}

/* The 1024-byte aligned base of the dynamic shared memory (the swizzle is a
 * function of the address bits, so each half tile must start on 1024). */
__device__ __forceinline__ uint16_t *aligned_smem(uint8_t *p)
{
    const uint32_t a = smem_addr(p);
    return reinterpret_cast<uint16_t *>(p + ((1024 - (a & 1023)) & 1023));
}

/* Tiles leave through shared memory as whole rows: an accumulator fragment
 * holds 4 bytes of 8 rows a store, half a sector each, which L2 took as
 * twice the sectors. Row r of ROW bytes keeps its 16-byte chunk c at
 * swz<ROW>(r, c): the fragments' 4-byte writes and the rows' 16-byte reads
 * are both free of bank conflicts. */
template <int ROW> __device__ __forceinline__ uint32_t swz(int r, int c)
{
    return (uint32_t)(r * ROW + ((c ^ (r & 7)) << 4));
}

/* store_rows into shared memory: a warp's 16 x N accumulator times (row g,
 * row g + 8) factors as T, at rows r0 + g and r0 + g + 8 of s. */
template <ao_dtype T, int N>
__device__ void rows_to_smem(uint8_t *s, int r0, const float (&acc)[N / 8][4], float f0, float f1)
{
    const int t = threadIdx.x & 3;
    pack_rows<T, N>(acc, f0, f1, [&](int r, int n, uint32_t v) {
        *reinterpret_cast<uint32_t *>(s + swz<N * 2>(r0 + r, n) + 4 * t) = v;
    });
}

/* ROWS x N halves from s (rows_to_smem's layout) to rows `stride` apart at
 * out, 16 bytes a thread, by the block's NT threads after the barrier that
 * orders their writes. */
template <int ROWS, int N, int NT>
__device__ __forceinline__ void rows_from_smem(const uint8_t *s, uint16_t *out, size_t stride)
{
    constexpr int C = N / 8; /* chunks a row */
    static_assert(NT % C == 0 && ROWS * C % NT == 0, "whole rows a step");
    const int r = (int)threadIdx.x / C, c = (int)threadIdx.x % C;
#pragma unroll
    for (int k = 0; k < ROWS * C / NT; k++) {
        const int rk = r + k * (NT / C);
        *reinterpret_cast<uint4 *>(out + (size_t)rk * stride + c * 8) =
            *reinterpret_cast<const uint4 *>(s + swz<N * 2>(rk, c));
    }
}

/* Shared bytes: Q (128 x 128), two stages of K and V (64 x 128 each), the
 * mask of two stages (128 queries x 16 bytes), and the alignment slack. */
constexpr size_t kWgSmem =
    (size_t)(2 * kWgQueries * 64 + 2 * 4 * kHalf) * 2 + 2 * kWgQueries * 16 + 1024;

template <ao_dtype T, bool DRAW>
__global__ void __launch_bounds__(kWgThreads, 2) flash_forward_wg(flash_args a)
{
    pdl_wait();
    extern __shared__ uint8_t wsm[];
    constexpr int HD = 128;
    uint16_t *sQ = aligned_smem(wsm);         /* [2 halves][128 rows][64] */
    uint16_t *sKV = sQ + 2 * kWgQueries * 64; /* [2 stages][K, V][2 halves][64 rows][64] */
    uint8_t *sM = reinterpret_cast<uint8_t *>(sKV + 2 * 4 * kHalf); /* [2][128 queries][16] */
    const auto &[h, b, q0, w, g, t, d3, bh, base, dr, sl2] = flash_block<HD>(a, kWgQueries);
    const int wg = w >> 2, tiles = a.T / kTile;
    load_swizzled<kWgQueries, kWgThreads>(sQ, base + (size_t)q0 * d3, d3);
    load_swizzled<kTile, kWgThreads>(sKV, base + a.d, d3);
    load_swizzled<kTile, kWgThreads>(sKV + 2 * kHalf, base + 2 * a.d, d3);
    if (dr.mask_in)
        for (int i = 0; i < 2; i++) mask_copy(sM + i * kTile * 16, dr, q0 + i * kTile, 0, a.T);
    cp_async_commit();

    /* Q's rows of this warpgroup, K and V of stage 0 */
    const wg_desc dq(sQ + wg * kTile * 64, 16, 1024), dk(sKV, 16, 1024),
        dv(sKV + 2 * kHalf, kVLead, kVStride);
    float o[HD / 8][4] = {};
    softmax_rows st;
    for (int it = 0; it < tiles; it++) {
        const int k0 = it * kTile;
        const int stage = (it & 1) * 4 * kHalf; /* halves from stage 0 */
        uint8_t *sMb = sM + (it & 1) * kWgQueries * 16;
        stage_ready();
        if (it + 1 < tiles) {
            uint16_t *nK = sKV + ((it + 1) & 1) * 4 * kHalf;
            load_swizzled<kTile, kWgThreads>(nK, base + a.d + (size_t)(k0 + kTile) * d3, d3);
            load_swizzled<kTile, kWgThreads>(nK + 2 * kHalf,
                                             base + 2 * a.d + (size_t)(k0 + kTile) * d3, d3);
            if (dr.mask_in)
                for (int i = 0; i < 2; i++)
                    mask_copy(sM + (((it + 1) & 1) * 2 + i) * kTile * 16, dr, q0 + i * kTile,
                              k0 + kTile, a.T);
            cp_async_commit();
        }
        if (DRAW)
            mask_part<16>(sMb + wg * kTile * 16, dr, q0 + wg * kTile, k0, a.T, (w & 3) * 16, 0);
        float s[8][4];
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            const int half = kk >> 2, off = (kk & 3) * 16;
            wg_ss<T>(s, dq.at(half * kWgQueries * 64 + off), dk.at(stage + half * kHalf + off), kk);
        }
        wg_commit_wait();
        wg_hold(s);
        online_step<HD>(s, o, st, row_factors(sMb, w * 16 + g, t), dr, sl2);
        uint32_t p[kTile / 16][4]; /* P as the A fragments of P V, packed before the products */
#pragma unroll
        for (int kk = 0; kk < kTile / 16; kk++) {
            p[kk][0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
            p[kk][1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
            p[kk][2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            p[kk][3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
        }
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < kTile / 16; kk++) wg_rs<T>(o, p[kk], dv.at(stage + kk * 16 * 64));
        wg_commit_wait();
        wg_hold(o);
    }
    softmax_rows &x = st;
    x.l0 += AO_SHFL_XOR(x.l0, 1);
    x.l0 += AO_SHFL_XOR(x.l0, 2);
    x.l1 += AO_SHFL_XOR(x.l1, 1);
    x.l1 += AO_SHFL_XOR(x.l1, 2);
    const int q = q0 + w * 16 + g;
    /* ctx through the K, V stages, once every warp is past the last tile */
    __syncthreads();
    uint8_t *sOut = reinterpret_cast<uint8_t *>(sKV);
    rows_to_smem<T, HD>(sOut, w * 16, o, 1.0f / x.l0, 1.0f / x.l1);
    __syncthreads();
    rows_from_smem<kWgQueries, HD, kWgThreads>(
        sOut, a.out + ((size_t)b * a.T + q0) * a.d + (size_t)h * HD, (size_t)a.d);
    if (t == 0) {
        a.lse[bh * a.T + q] = x.m0 + log2f(x.l0);
        a.lse[bh * a.T + q + 8] = x.m1 + log2f(x.l1);
    }
}

template <ao_dtype T, bool DRAW>
cudaError_t forward_wg(const flash_args &a, dim3 grid, cudaStream_t stream)
{
    return flash_launch(flash_forward_wg<T, DRAW>, grid, kWgSmem, stream, a, kWgThreads);
}

/* ---- backward: dK and dV (and dS^T for the dQ GEMM) -------------------------- */

constexpr int kKvThreads = 128; /* one warpgroup: 64 keys, warp w keys w * 16 .. + 15 */

/* Shared bytes: K and V (64 x 128 each), two stages of Q and dO, the tile's
 * dS^T on its way out, the mask of two stages (64 queries x 16 bytes), two
 * stages of lse and delta, slack. */
constexpr size_t kKvSmem = (size_t)(2 * 2 * kHalf + 2 * 2 * 2 * kHalf + kHalf) * 2 +
                           2 * kTile * 16 + 2 * 2 * kTile * sizeof(float) + 1024;

/* flash.cu's flash_backward_kv on wgmma, a whole 64-query tile at a time:
 * S^T = K Q^T and dP^T = V dO^T (8 m64n64k16 each, K-major operands in
 * shared memory), the same per-element chain on the accumulators (their
 * fragments are mma.sync's), and dV += P^T dO and dK += dS^T Q (4
 * m64n128k16 each, A from registers, B MN-major). */
template <ao_dtype T, bool DRAW>
__global__ void __launch_bounds__(kKvThreads, 2) flash_backward_kv_wg(flash_args a)
{
    pdl_wait();
    extern __shared__ uint8_t wsm[];
    constexpr int HD = 128;
    uint16_t *sK = aligned_smem(wsm), *sV = sK + 2 * kHalf; /* [2 halves][64 keys][64] */
    uint16_t *sQO = sV + 2 * kHalf; /* [2 stages][Q, dO][2 halves][64][64] */
    uint8_t *sS = reinterpret_cast<uint8_t *>(sQO + 2 * 4 * kHalf); /* [64 keys][64] (swz) */
    uint8_t *sM = sS + kHalf * 2;                                   /* [2][64 queries][16] */
    float *sLD = reinterpret_cast<float *>(sM + 2 * kTile * 16);    /* [2][lse, delta] */
    const auto &[h, b, k0, w, g, t, d3, bh, base, dr, sl2] = flash_block<HD>(a);
    const kv_rows kr(a, b, h, bh, k0, w, g, HD);
    uint16_t *ds0 = a.ds + (bh * a.T + (size_t)k0) * a.T; /* the block's first key row of dS^T */
    const auto load = [](uint16_t *s, const uint16_t *src, size_t stride) {
        load_swizzled<kTile, kKvThreads>(s, src, stride);
    };
    const int tiles = a.T / kTile;
    load(sK, base + a.d + (size_t)k0 * d3, d3);
    load(sV, base + 2 * a.d + (size_t)k0 * d3, d3);
    kr.stage(sQO, sQO + 2 * kHalf, sLD, sM, a, base, d3, dr, 0, k0, load);
    cp_async_commit();

    /* the kept elements' factor, and it times the scale (delta holds its own) */
    const float kf = dr.on ? dr.r.keep : 1.0f, ks = kf * a.scale;
    /* K then V (K-major); stage 0's Q then dO, K-major and MN-major */
    const wg_desc dkv(sK, 16, 1024), dqo(sQO, 16, 1024), dqo_mn(sQO, kVLead, kVStride);
    float dk[HD / 8][4] = {}, dv[HD / 8][4] = {};
    for (int it = 0; it < tiles; it++) {
        const int q0 = it * kTile;
        const int stage = (it & 1) * 4 * kHalf; /* halves from stage 0 */
        const float *sL = sLD + (it & 1) * 2 * kTile, *sD = sL + kTile;
        uint8_t *sMb = sM + (it & 1) * kTile * 16;
        stage_ready();
        if (it + 1 < tiles) {
            const int nb = (it + 1) & 1, n0 = q0 + kTile;
            kr.stage(sQO + nb * 4 * kHalf, sQO + nb * 4 * kHalf + 2 * kHalf, sLD + nb * 2 * kTile,
                     sM + nb * kTile * 16, a, base, d3, dr, n0, k0, load);
            cp_async_commit();
        }
        /* this warp's keys: groups w*4 .. w*4 + 3 of every query */
        if (DRAW) mask_part<4>(sMb, dr, q0, k0, a.T, 0, w * 4);
        float p[8][4], dp[8][4];
        uint32_t pa[kTile / 16][4], da[kTile / 16][4]; /* dropped P^T and dS^T, A fragments */
        /* S^T, then dP^T, as two groups: P is formed while dP^T is multiplied,
         * and dV's products run while dS is formed */
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            const int off = (kk >> 2) * kHalf + (kk & 3) * 16;
            wg_ss<T>(p, dkv.at(off), dqo.at(stage + off), kk);
        }
        wg_commit();
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            const int off = (kk >> 2) * kHalf + (kk & 3) * 16;
            wg_ss<T>(dp, dkv.at(2 * kHalf + off), dqo.at(stage + 2 * kHalf + off), kk);
        }
        wg_commit();
        /* the rows' lse and the keep bits, read while S^T multiplies (after
         * the wait their shared-memory latency stood in the chain) */
        float2 l[8];
        uint2 kb[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            l[j] = *reinterpret_cast<const float2 *>(sL + j * 8 + 2 * t);
            kb[j] = keep_bits(sMb, dr, j * 8 + 2 * t, w, g);
        }
        wg_wait<1>();
        wg_hold(p);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float pd[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const bool keep = kept(kb[j], e);
                p[j][e] = fast_exp2(fmaf(p[j][e], sl2, -(e & 1 ? l[j].y : l[j].x)));
                pd[e] = keep ? p[j][e] * kf : 0.0f;
            }
            pa[j >> 1][2 * (j & 1)] = pack2<T>(pd[0], pd[1]);
            pa[j >> 1][2 * (j & 1) + 1] = pack2<T>(pd[2], pd[3]);
        }
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < kTile / 16; kk++)
            wg_rs<T>(dv, pa[kk], dqo_mn.at(stage + 2 * kHalf + kk * 16 * 64));
        wg_commit();
        /* delta and the keep bits again, while dP^T finishes */
#pragma unroll
        for (int j = 0; j < 8; j++) {
            l[j] = *reinterpret_cast<const float2 *>(sD + j * 8 + 2 * t);
            kb[j] = keep_bits(sMb, dr, j * 8 + 2 * t, w, g);
        }
        wg_wait<1>();
        wg_hold(dp);
#pragma unroll
        for (int j = 0; j < 8; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const bool keep = kept(kb[j], e);
                p[j][e] *= fmaf(dp[j][e], keep ? ks : 0.0f, -(e & 1 ? l[j].y : l[j].x));
            }
            const uint32_t s01 = pack2<T>(p[j][0], p[j][1]), s23 = pack2<T>(p[j][2], p[j][3]);
            *reinterpret_cast<uint32_t *>(sS + swz<kTile * 2>(w * 16 + g, j) + 4 * t) = s01;
            *reinterpret_cast<uint32_t *>(sS + swz<kTile * 2>(w * 16 + g + 8, j) + 4 * t) = s23;
            da[j >> 1][2 * (j & 1)] = s01;
            da[j >> 1][2 * (j & 1) + 1] = s23;
        }
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < kTile / 16; kk++)
            wg_rs<T>(dk, da[kk], dqo_mn.at(stage + kk * 16 * 64));
        wg_commit();
        __syncthreads(); /* dS^T's tile is in sS: out as whole rows while dK multiplies */
        rows_from_smem<kTile, kTile, kKvThreads>(sS, ds0 + q0, a.T);
        wg_wait<0>();
        wg_hold(dv);
        wg_hold(dk);
        wg_hold(pa);
        wg_hold(da);
    }
    /* dK and dV through the query stages, once every warp is past the last tile */
    __syncthreads();
    uint8_t *sOut = reinterpret_cast<uint8_t *>(sQO);
    rows_to_smem<T, HD>(sOut, w * 16, dk, 1.0f, 1.0f);
    rows_to_smem<T, HD>(sOut + kTile * HD * 2, w * 16, dv, 1.0f, 1.0f);
    __syncthreads();
    uint16_t *out = a.out + ((size_t)b * a.T + k0) * d3 + (size_t)h * HD;
    rows_from_smem<kTile, HD, kKvThreads>(sOut, out + a.d, d3);
    rows_from_smem<kTile, HD, kKvThreads>(sOut + kTile * HD * 2, out + 2 * a.d, d3);
}

template <ao_dtype T, bool DRAW>
cudaError_t backward_kv_wg(const flash_args &a, dim3 grid, cudaStream_t stream)
{
    return flash_launch(flash_backward_kv_wg<T, DRAW>, grid, kKvSmem, stream, a, kKvThreads);
}

/* Whether the device can run this file's sm_90a image (compute capability
 * 9.0 exactly): asked once. */
bool image_runs()
{
    static int runs = -1;
    if (runs < 0) {
        cudaFuncAttributes fa;
        runs = cudaFuncGetAttributes(&fa, flash_forward_wg<AO_BF16, false>) == cudaSuccess;
        (void)cudaGetLastError();
    }
    return runs == 1;
}

} // namespace

extern "C" cudaError_t ao_flash_forward_sm90a(void *ctx, float *lse, const void *qkv, ao_dtype type,
                                              int batch, int heads, int T, int head_dim,
                                              float scale, const ao_cuda_dropout_key *key,
                                              const uint8_t *mask_in, cudaStream_t stream)
{
    if (!image_runs() || head_dim != 128 || T % kWgQueries != 0) return cudaErrorNotSupported;
    flash_args a = flash_args_of(heads, T, head_dim, scale, key);
    a.qkv = static_cast<const uint16_t *>(qkv);
    a.out = static_cast<uint16_t *>(ctx);
    a.lse = lse;
    a.mask_in = a.on ? mask_in : nullptr;
    const dim3 grid((unsigned)(T / kWgQueries), (unsigned)heads, (unsigned)batch);
    const bool draw = a.on && !a.mask_in;
    if (type == AO_BF16)
        return draw ? forward_wg<AO_BF16, true>(a, grid, stream)
                    : forward_wg<AO_BF16, false>(a, grid, stream);
    return draw ? forward_wg<AO_F16, true>(a, grid, stream)
                : forward_wg<AO_F16, false>(a, grid, stream);
}

extern "C" cudaError_t ao_flash_backward_kv_sm90a(void *dqkv, void *scratch, const void *dctx,
                                                  const float *lse, const void *qkv, ao_dtype type,
                                                  int batch, int heads, int T, int head_dim,
                                                  float scale, const ao_cuda_dropout_key *key,
                                                  const uint8_t *mask_in, cudaStream_t stream)
{
    if (!image_runs() || head_dim != 128 || T % kTile != 0) return cudaErrorNotSupported;
    flash_args a = flash_args_of(heads, T, head_dim, scale, key);
    a.qkv = static_cast<const uint16_t *>(qkv);
    a.dctx = static_cast<const uint16_t *>(dctx);
    a.out = static_cast<uint16_t *>(dqkv);
    a.lse = const_cast<float *>(lse);
    a.delta = static_cast<float *>(scratch);
    a.ds = reinterpret_cast<uint16_t *>(a.delta + (size_t)batch * heads * T);
    a.mask_in = a.on ? mask_in : nullptr;
    const dim3 grid((unsigned)(T / kTile), (unsigned)heads, (unsigned)batch);
    const bool draw = a.on && !a.mask_in;
    if (type == AO_BF16)
        return draw ? backward_kv_wg<AO_BF16, true>(a, grid, stream)
                    : backward_kv_wg<AO_BF16, false>(a, grid, stream);
    return draw ? backward_kv_wg<AO_F16, true>(a, grid, stream)
                : backward_kv_wg<AO_F16, false>(a, grid, stream);
}
