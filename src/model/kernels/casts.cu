/* Casts between fp32 and the 16-bit types: the GEMM operands' and the
 * gathered parameters'. */
#include "model/kernels/dtype.cuh"

namespace
{

__device__ void store_from_float(void *dst, ao_dtype t, size_t i, float v)
{
    switch (t) {
    case AO_F16:
        typed_store<AO_F16>{dst}.put(i, v);
        break;
    case AO_BF16:
        typed_store<AO_BF16>{dst}.put(i, v);
        break;
    default:
        ((float *)dst)[i] = v;
        break;
    }
}

__global__ void cast_kernel(void *dst, ao_dtype dst_type, const void *src, ao_dtype src_type,
                            size_t n)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        store_from_float(dst, dst_type, i, load_as_float(src, src_type, i));
}

/* fp32 -> 16 bits, the GEMM operands' cast: 4 floats in (16 bytes), 4 halves
 * out (8 bytes) per thread and step, the same rounding as store_from_float.
 * The templated type keeps the inner loop free of the dtype switch. */
template <ao_dtype T>
__global__ void cast_down4_kernel(uint2 *__restrict__ dst, const float4 *__restrict__ src,
                                  size_t n4)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    /* two loads in flight per thread: one left it at ~70 % of the bandwidth */
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + stride < n4; i += 2 * stride) {
        const float4 a = src[i], b = src[i + stride];
        dst[i] = narrow4<T>(a);
        dst[i + stride] = narrow4<T>(b);
    }
    if (i < n4) dst[i] = narrow4<T>(src[i]);
}

/* 16 bits -> fp32, the gathered parameters' cast: 4 halves in (8 bytes), 4
 * floats out per thread and step. */
template <ao_dtype T>
__global__ void cast_up4_kernel(float4 *__restrict__ dst, const uint2 *__restrict__ src, size_t n4)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride)
        dst[i] = widen4<T>(src[i]);
}

/* The parts of ao_cuda_cast_parts, by value: part p covers elements
 * [first[p], first[p + 1]) of the flattened parts, at offset off[p]. */
struct cast_parts_arg {
    size_t off[AO_CUDA_CAST_PARTS];
    size_t first[AO_CUDA_CAST_PARTS + 1];
    int n;
};

__global__ void cast_parts_kernel(void *dst, ao_dtype dst_type, const void *src, ao_dtype src_type,
                                  cast_parts_arg a)
{
    pdl_wait();
    const size_t total = a.first[a.n], stride = (size_t)gridDim.x * blockDim.x;
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        int p = 0;
        while (t >= a.first[p + 1]) p++;
        const size_t i = a.off[p] + (t - a.first[p]);
        store_from_float(dst, dst_type, i, load_as_float(src, src_type, i));
    }
}

} // namespace

/* ---- launchers ------------------------------------------------------------- */

extern "C" cudaError_t ao_cuda_cast_parts(void *dst, ao_dtype dst_type, const void *src,
                                          ao_dtype src_type, const size_t (*parts)[2], int nparts,
                                          cudaStream_t stream)
{
    if (nparts < 0 || nparts > AO_CUDA_CAST_PARTS || !castable(dst_type) || !castable(src_type))
        return cudaErrorInvalidValue;
    if (nparts == 1) {
        const size_t o = parts[0][0];
        return ao_cuda_cast((char *)dst + o * (dst_type == AO_F32 ? 4 : 2), dst_type,
                            (const char *)src + o * (src_type == AO_F32 ? 4 : 2), src_type,
                            parts[0][1], stream);
    }
    cast_parts_arg a = {};
    a.n = nparts;
    for (int p = 0; p < nparts; p++) {
        a.off[p] = parts[p][0];
        a.first[p + 1] = a.first[p] + parts[p][1];
    }
    if (a.first[nparts] == 0) return cudaSuccess;
    launch(cast_parts_kernel, elem_blocks(a.first[nparts]), kThreads, 0, stream, dst, dst_type, src,
           src_type, a);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_cast(void *dst, ao_dtype dst_type, const void *src,
                                    ao_dtype src_type, size_t n, cudaStream_t stream)
{
    if (!castable(dst_type) || !castable(src_type)) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    if (dst_type == src_type)
        return cudaMemcpyAsync(dst, src, n * (src_type == AO_F32 ? 4 : 2), cudaMemcpyDeviceToDevice,
                               stream);
    /* fp32 <-> 16 bits, 4 elements a thread where both sides are aligned */
    const size_t n4 = n / 4;
    const void *wide = src_type == AO_F32 ? src : dst, *narrow = src_type == AO_F32 ? dst : src;
    if ((src_type == AO_F32) != (dst_type == AO_F32) && n4 > 0 && (uintptr_t)wide % 16 == 0 &&
        (uintptr_t)narrow % 8 == 0) {
        const size_t g = elem_blocks(n4);
        if (dst_type == AO_BF16)
            launch(cast_down4_kernel<AO_BF16>, g, kThreads, 0, stream, (uint2 *)dst,
                   (const float4 *)src, n4);
        else if (dst_type == AO_F16)
            launch(cast_down4_kernel<AO_F16>, g, kThreads, 0, stream, (uint2 *)dst,
                   (const float4 *)src, n4);
        else if (src_type == AO_BF16)
            launch(cast_up4_kernel<AO_BF16>, g, kThreads, 0, stream, (float4 *)dst,
                   (const uint2 *)src, n4);
        else
            launch(cast_up4_kernel<AO_F16>, g, kThreads, 0, stream, (float4 *)dst,
                   (const uint2 *)src, n4);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess || n4 * 4 == n) return e;
        /* the tail: fewer than 4 elements */
        const size_t done = n4 * 4;
        launch(cast_kernel, 1, kThreads, 0, stream,
               (char *)dst + done * (dst_type == AO_F32 ? 4 : 2), dst_type,
               (const char *)src + done * (src_type == AO_F32 ? 4 : 2), src_type, n - done);
        return cudaGetLastError();
    }
    launch(cast_kernel, elem_blocks(n), kThreads, 0, stream, dst, dst_type, src, src_type, n);
    return cudaGetLastError();
}
