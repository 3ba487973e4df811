/* The embedding bag (mean) forward and its deterministic backward: a stable
 * radix sort of the ids, then each table row's contributions in order. */
#include "model/kernels/dtype.cuh"

#if defined(AO_GPU_HIP)
#include <hipcub/hipcub.hpp>
namespace cub = hipcub;
#else
#include <cub/device/device_radix_sort.cuh>
#endif

namespace
{

/* A thread a run of V adjacent columns of one token (V = 4: e % 4 == 0 and
 * the table aligned for 4-wide loads), each column's double sum over the
 * token's slots in slot order, as the reference adds them. The table is
 * fp32 or the engine's 16-bit copy of it, whose values the model reads
 * widened: the same sums, and half the bytes (no fp32 copy cast first). */
template <ao_dtype T, int V>
__global__ void embedding_bag_forward_kernel(float *out, const int32_t *ids, const void *table,
                                             int n, int s, int e)
{
    pdl_wait();
    const typed_load<T> rows{table};
    const size_t runs = (size_t)e / V, total = (size_t)n * runs;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t at = (size_t)blockIdx.x * blockDim.x + threadIdx.x; at < total; at += stride) {
        const size_t i = at / runs, c = (at % runs) * V;
        double acc[V] = {};
        for (int k = 0; k < s; k++) {
            const size_t from = (size_t)ids[i * s + k] * e + c;
            if constexpr (V == 4) {
                const float4 v = rows.load4(from);
                acc[0] += v.x, acc[1] += v.y, acc[2] += v.z, acc[3] += v.w;
            } else {
                acc[0] += rows.load(from);
            }
        }
#pragma unroll
        for (int l = 0; l < V; l++) out[i * e + c + l] = s > 0 ? (float)(acc[l] / s) : 0.0f;
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

/* This warp's sorted position p (one warp a position) and its id; true when
 * p starts a run of equal ids, whose contributions the warp then adds. */
__device__ __forceinline__ bool run_start(const uint32_t *keys, size_t count, size_t &p,
                                          uint32_t &id)
{
    p = (size_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
    if (p >= count) return false;
    id = keys[p];
    return !(p > 0 && keys[p - 1] == id);
}

/* One warp per sorted position; the warp at the first position of a run of
 * equal ids adds the run's contributions to that table row, in position
 * order (stable sort), each as the reference does: row[c] += dout[c] * inv. */
__global__ void embedding_segment_add_kernel(float *dtable, const float *dout, const uint32_t *keys,
                                             const uint32_t *positions, size_t count, int s, int e)
{
    pdl_wait();
    size_t p;
    uint32_t id;
    const int lane = threadIdx.x & 31;
    if (!run_start(keys, count, p, id)) return;
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

/* embedding_segment_add_kernel over rows of float4s (e % 4 == 0, dtable and
 * dout 16-byte aligned): a lane keeps kSegVec float4s of the row in
 * registers through the run, so each position's key and token are read once
 * a chunk of 32 * kSegVec float4s instead of once a column. Each element's
 * additions are the scalar kernel's, in its order. */
constexpr int kSegVec = 2;

__global__ void embedding_segment_add4_kernel(float *dtable, const float *dout,
                                              const uint32_t *keys, const uint32_t *positions,
                                              size_t count, int s, int e)
{
    pdl_wait();
    size_t p;
    uint32_t id;
    const int lane = threadIdx.x & 31;
    if (!run_start(keys, count, p, id)) return;
    const float inv = 1.0f / (float)s;
    const int e4 = e / 4;
    float4 *row = reinterpret_cast<float4 *>(dtable + (size_t)id * e);
    for (int c0 = lane; c0 < e4; c0 += 32 * kSegVec) {
        float4 acc[kSegVec];
#pragma unroll
        for (int j = 0; j < kSegVec; j++)
            if (c0 + 32 * j < e4) acc[j] = row[c0 + 32 * j];
        for (size_t q = p; q < count && keys[q] == id; q++) {
            const float4 *d =
                reinterpret_cast<const float4 *>(dout + (size_t)(positions[q] / (uint32_t)s) * e);
#pragma unroll
            for (int j = 0; j < kSegVec; j++) {
                if (c0 + 32 * j >= e4) continue;
                const float4 v = d[c0 + 32 * j];
                acc[j].x = __fadd_rn(acc[j].x, __fmul_rn(v.x, inv));
                acc[j].y = __fadd_rn(acc[j].y, __fmul_rn(v.y, inv));
                acc[j].z = __fadd_rn(acc[j].z, __fmul_rn(v.z, inv));
                acc[j].w = __fadd_rn(acc[j].w, __fmul_rn(v.w, inv));
            }
        }
#pragma unroll
        for (int j = 0; j < kSegVec; j++)
            if (c0 + 32 * j < e4) row[c0 + 32 * j] = acc[j];
    }
}

int key_bits(int vocab)
{
    int bits = 1;
    while (bits < 32 && (1ull << bits) < (unsigned long long)vocab) bits++;
    return bits;
}

} // namespace

/* ---- launchers ------------------------------------------------------------- */

extern "C" cudaError_t ao_cuda_embedding_bag_mean_forward(float *out, const int32_t *ids,
                                                          const void *table, ao_dtype table_type,
                                                          int n, int s, int e, cudaStream_t stream)
{
    const size_t total = (size_t)(n > 0 ? n : 0) * (size_t)(e > 0 ? e : 0);
    if (!castable(table_type)) return cudaErrorInvalidValue;
    if (total == 0) return cudaSuccess;
    return with_dtype(table_type, [&](auto tag) {
        constexpr ao_dtype T = decltype(tag)::value;
        if (e % 4 == 0 && load4_ok<T>(table))
            launch(embedding_bag_forward_kernel<T, 4>, elem_blocks(total / 4), kThreads, 0, stream,
                   out, ids, table, n, s, e);
        else
            launch(embedding_bag_forward_kernel<T, 1>, elem_blocks(total), kThreads, 0, stream, out,
                   ids, table, n, s, e);
        return cudaGetLastError();
    });
}

/* Workspace: keys in/out, positions in/out (count uint32 each), then CUB's
 * temporary storage, each 256-byte aligned. */
static size_t embedding_sort_temp_bytes(size_t count, int vocab)
{
    size_t temp = 0;
    (void)cub::DeviceRadixSort::SortPairs(nullptr, temp, (const uint32_t *)nullptr,
                                          (uint32_t *)nullptr, (const uint32_t *)nullptr,
                                          (uint32_t *)nullptr, (int)count, 0, key_bits(vocab));
    return temp;
}

extern "C" size_t ao_cuda_embedding_bag_backward_workspace(int n, int s, int vocab)
{
    const size_t count = (size_t)(n > 0 ? n : 0) * (size_t)(s > 0 ? s : 0);
    if (count == 0) return 0;
    return ao_embedding_sort_arrays_bytes(count) + /* model/sizes.h */
           ao_align256(embedding_sort_temp_bytes(count, vocab));
}

extern "C" cudaError_t ao_cuda_embedding_bag_mean_backward(float *dtable, const float *dout,
                                                           const int32_t *ids, int n, int s, int e,
                                                           int vocab, void *workspace,
                                                           cudaStream_t stream)
{
    const size_t count = (size_t)(n > 0 ? n : 0) * (size_t)(s > 0 ? s : 0);
    if (count == 0 || e <= 0) return cudaSuccess;
    if (count > (size_t)INT32_MAX) return cudaErrorInvalidValue; /* CUB's item count is int */
    const size_t arr = ao_embedding_sort_arrays_bytes(count) / 4;
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
    if (e % 4 == 0 && aligned16(dtable) && aligned16(dout))
        launch(embedding_segment_add4_kernel, blocks, kThreads, 0, stream, dtable, dout, keys_out,
               pos_out, count, s, e);
    else
        launch(embedding_segment_add_kernel, blocks, kThreads, 0, stream, dtable, dout, keys_out,
               pos_out, count, s, e);
    return cudaGetLastError();
}
