/* The 16-bit types (bf16, fp16) on the device: conversions, typed loads and
 * stores (scalar and four at a time), and the dispatch from an ao_dtype to a
 * template argument. */
#ifndef AORTA_MODEL_KERNELS_DTYPE_CUH
#define AORTA_MODEL_KERNELS_DTYPE_CUH

#include "model/kernels/common.cuh"

namespace
{

__device__ float bf16_bits_to_float(uint16_t b)
{
    return __uint_as_float((uint32_t)b << 16);
}

/* Round to nearest even; NaN stays a (quiet) NaN. The host twin is
 * bench/values.c's float_to_bf16. */
__device__ uint16_t float_to_bf16_bits(float f)
{
    uint32_t bits = __float_as_uint(f);
    if (isnan(f)) return (uint16_t)((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* float -> T's 16 bits (T = AO_BF16 or AO_F16), round to nearest even. */
template <ao_dtype T> __device__ uint16_t narrow_bits(float f)
{
    return T == AO_BF16 ? float_to_bf16_bits(f) : __half_as_ushort(__float2half_rn(f));
}

/* lo and hi as two halves of T, lo in the low 16 bits. bf16 on sm_80+ is one
 * cvt.rn.bf16x2.f32 (the same round to nearest even) instead of about seven
 * integer operations an element, which the 16-bit stores of the element-wise
 * passes are bound by; a NaN goes through float_to_bf16_bits, whose NaN bits
 * the host twin matches (cvt writes a canonical NaN). */
template <ao_dtype T> __device__ uint32_t narrow2(float lo, float hi)
{
#if !defined(AO_GPU_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (T == AO_BF16 && !isnan(lo) && !isnan(hi)) {
        uint32_t r;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
    }
#endif
    return (uint32_t)narrow_bits<T>(lo) | (uint32_t)narrow_bits<T>(hi) << 16;
}

/* 4 floats as 4 halves of T, packed low element first (8 bytes). */
template <ao_dtype T> __device__ uint2 narrow4(float4 v)
{
    return make_uint2(narrow2<T>(v.x, v.y), narrow2<T>(v.z, v.w));
}

/* f rounded to T (round to nearest even) and widened back: the value a
 * kernel or GEMM that stores f in T leaves there. */
template <ao_dtype T> __device__ float rounded(float f)
{
    return T == AO_BF16 ? bf16_bits_to_float(narrow_bits<T>(f))
                        : __half2float(__ushort_as_half(narrow_bits<T>(f)));
}

/* Stores of type T (F32, BF16, F16) at element i of p; put4 stores elements
 * i .. i + 3 (i a multiple of 4, p 16-byte aligned for F32, 8 for 16 bits). */
template <ao_dtype T> struct typed_store {
    void *p;
    __device__ void put(size_t i, float v) const
    {
        if (T == AO_F32)
            static_cast<float *>(p)[i] = v;
        else
            static_cast<uint16_t *>(p)[i] = narrow_bits<T>(v);
    }
    __device__ void put4(size_t i, float4 v) const
    {
        if (T == AO_F32)
            *reinterpret_cast<float4 *>(static_cast<float *>(p) + i) = v;
        else
            *reinterpret_cast<uint2 *>(static_cast<uint16_t *>(p) + i) = narrow4<T>(v);
    }
};

/* Whether typed_store<T>::put4 may be used at multiples of 4 elements of p. */
template <ao_dtype T> bool store4_ok(const void *p)
{
    return T == AO_F32 ? aligned16(p) : aligned8(p);
}

__device__ float load_as_float(const void *src, ao_dtype t, size_t i)
{
    switch (t) {
    case AO_F16:
        return __half2float(__ushort_as_half(((const unsigned short *)src)[i]));
    case AO_BF16:
        return bf16_bits_to_float(((const uint16_t *)src)[i]);
    default:
        return ((const float *)src)[i];
    }
}

/* 4 halves of T packed low element first (8 bytes) as 4 floats (exact:
 * every 16-bit value is a float); narrow4's inverse. */
template <ao_dtype T> __device__ float4 widen4(uint2 v)
{
    const uint16_t h[4] = {(uint16_t)(v.x & 0xffffu), (uint16_t)(v.x >> 16),
                           (uint16_t)(v.y & 0xffffu), (uint16_t)(v.y >> 16)};
    return make_float4(load_as_float(h, T, 0), load_as_float(h, T, 1), load_as_float(h, T, 2),
                       load_as_float(h, T, 3));
}

/* The input of a Map of type T (F32, BF16, F16), widened to floats (exact):
 * the value(s) at flat element i, i a multiple of 4 for load4 (p 16-byte
 * aligned for F32, 8 for 16 bits: load4_ok). */
template <ao_dtype T> struct typed_load {
    const void *p;
    __device__ float load(size_t i) const
    {
        return load_as_float(p, T, i);
    }
    __device__ float4 load4(size_t i) const
    {
        if (T == AO_F32)
            return *reinterpret_cast<const float4 *>(static_cast<const float *>(p) + i);
        return widen4<T>(*reinterpret_cast<const uint2 *>(static_cast<const uint16_t *>(p) + i));
    }
};

template <ao_dtype T> bool load4_ok(const void *p)
{
    return store4_ok<T>(p);
}

bool castable(ao_dtype t)
{
    return t == AO_F32 || t == AO_F16 || t == AO_BF16;
}

template <ao_dtype T> struct dtype_tag {
    static constexpr ao_dtype value = T;
};

/* f(dtype_tag<t>{}) for a castable t; cudaErrorInvalidValue otherwise. */
template <class F> cudaError_t with_dtype(ao_dtype t, F &&f)
{
    switch (t) {
    case AO_F32:
        return f(dtype_tag<AO_F32>{});
    case AO_BF16:
        return f(dtype_tag<AO_BF16>{});
    case AO_F16:
        return f(dtype_tag<AO_F16>{});
    default:
        return cudaErrorInvalidValue;
    }
}

/* f(tag of x_type) where x_type is AO_F32 or OT, a kernel's output type (an
 * input of its 16-bit type, widened exactly); cudaErrorInvalidValue
 * otherwise. */
template <ao_dtype OT, class F> cudaError_t with_input_dtype(ao_dtype x_type, F &&f)
{
    if (x_type == AO_F32) return f(dtype_tag<AO_F32>{});
    if (x_type == OT) return f(dtype_tag<OT>{});
    return cudaErrorInvalidValue;
}

} // namespace

#endif
