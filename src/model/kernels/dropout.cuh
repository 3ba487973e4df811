/* Dropout masks from Philox (data/rng.h), keyed as ops_ref.h's dropout so
 * the masks match the reference bit for bit, and the plain dropout's Map
 * that the fused chains end with. */
#ifndef AORTA_MODEL_KERNELS_DROPOUT_CUH
#define AORTA_MODEL_KERNELS_DROPOUT_CUH

#include "model/kernels/dtype.cuh"

namespace
{

/* What a dropout kernel needs: the call's site stream, i.e. ao_dropout_stream
 * up to but excluding the sample level, which is the same for every row and
 * so is derived once on the host; rows then cost 1 (2 with heads) Philox
 * calls instead of 4 (5). */
/* A dropout probability in the forms the kernels use: p (on: p > 0); the
 * threshold a word is dropped below (ao_dropout_threshold, 0 < p < 1); the
 * kept elements' factor 1 / (1 - p), 0 when p >= 1, which then drops all.
 * drop_factor(word) is then ao_dropout_factor_from_word's, bit for bit. */
struct drop_rate {
    float p;
    uint32_t thr;
    float keep;
};

drop_rate drop_rate_of(float p)
{
    if (p >= 1.0f) return drop_rate{p, 0u, 0.0f};
    return drop_rate{p, p > 0.0f ? ao_dropout_threshold(p) : 0u, 1.0f / (1.0f - p)};
}

__device__ float drop_factor(uint32_t word, const drop_rate &r)
{
    return word < r.thr ? 0.0f : r.keep;
}

struct dropout_args {
    ao_rng_stream site;
    uint64_t first_sample;
    int heads;
    drop_rate r;
};

dropout_args dropout_args_of(const ao_cuda_dropout_key &k)
{
    /* ao_dropout_stream's key path without its last level (sample): the GPU
     * test compares the masks with ao_dropout_stream's bit for bit */
    ao_rng_stream s = ao_rng_root(k.seed, AO_RNG_DROPOUT);
    s = ao_rng_child(s, k.step);
    s = ao_rng_child(s, k.layer);
    s = ao_rng_child(s, k.site);
    return dropout_args{s, k.first_sample, k.heads, drop_rate_of(k.p)};
}

/* The stream of row r of a dropout call (ops_ref's keying). */
__device__ ao_rng_stream dropout_row_stream(const dropout_args &a, size_t r)
{
    const uint64_t b = a.heads > 0 ? r / (size_t)a.heads : r;
    ao_rng_stream s = ao_rng_child(a.site, a.first_sample + b);
    if (a.heads > 0) s = ao_rng_child(s, (uint64_t)(r % (size_t)a.heads));
    return s;
}

/* The mask of one group as a byte (bit l: element l kept), and back: the
 * factors are exactly ao_dropout_factor_from_word's (0 or 1 / (1 - p); p >= 1
 * keeps nothing), so a pass that reads the byte multiplies by the very
 * factors the Philox draw gave the pass that wrote it. */
__device__ uint8_t mask_byte(const float f[4])
{
    return (uint8_t)((f[0] != 0.0f) | (f[1] != 0.0f) << 1 | (f[2] != 0.0f) << 2 |
                     (f[3] != 0.0f) << 3);
}

__device__ void mask_factors(uint8_t m, const drop_rate &r, float f[4])
{
#pragma unroll
    for (int l = 0; l < 4; l++) f[l] = (m >> l) & 1 ? r.keep : 0.0f;
}

/* The factors of a group of four elements, block g of stream s: read from
 * its mask byte *mask_in when that is set, else drawn, and then stored to
 * *mask_out when that is set. Every dropout path gets its factors here. */
__device__ void group_factors(float f[4], ao_rng_stream s, uint64_t g, const drop_rate &r,
                              const uint8_t *mask_in, uint8_t *mask_out)
{
    if (mask_in) {
        mask_factors(*mask_in, r, f);
        return;
    }
    const ao_u32x4 w = ao_rng_block(s, g);
#pragma unroll
    for (int l = 0; l < 4; l++) f[l] = drop_factor(w.v[l], r);
    if (mask_out) *mask_out = mask_byte(f);
}

__device__ float4 times4(float4 v, const float f[4])
{
    return make_float4(v.x * f[0], v.y * f[1], v.z * f[2], v.w * f[3]);
}

/* v + r element by element, __fadd_rn so that the compiler cannot contract a
 * preceding product (the mask's) into the add */
__device__ float4 add4_rn(float4 v, float4 r)
{
    return make_float4(__fadd_rn(v.x, r.x), __fadd_rn(v.y, r.y), __fadd_rn(v.z, r.z),
                       __fadd_rn(v.w, r.w));
}

/* v times the dropout factors of block g of stream s (drawn): group g's four
 * elements, the product every float4 dropout path makes. */
__device__ float4 drop4(float4 v, ao_rng_stream s, size_t g, const drop_rate &r)
{
    float f[4];
    group_factors(f, s, g, r, nullptr, nullptr);
    return times4(v, f);
}

/* Every fused chain computes each value with the same operations, in the same
 * order, as the chain of plain kernels it replaces (the mask a single float
 * multiply, the conversion typed_store's), so the results are bit-identical;
 * only the fp32 intermediates are never written. */

/* dropout_kernel's Map of the plain dropout and of its fused ends
 * (ao_cuda_dropout, _residual): x in (fp32); v = dropped x (+ res) out, as
 * floats at y unless y is NULL, and in type T at out unless out.p is NULL.
 * The add is __fadd_rn so that the compiler cannot contract the mask's
 * product into it: the sum is the one a dropout followed by ao_cuda_add
 * stores. */
template <ao_dtype T> struct dropout_out_map : typed_load<AO_F32> {
    float *y;
    typed_store<T> out;
    const float *res;
    __device__ void store(size_t i, float v) const
    {
        const float o = res ? __fadd_rn(v, res[i]) : v;
        if (y) y[i] = o;
        if (out.p) out.put(i, o);
    }
    /* the residual's float4 (read with the values: dropout_kernel) */
    __device__ float4 aux4(size_t i) const
    {
        return res ? *reinterpret_cast<const float4 *>(res + i)
                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    __device__ void store4(size_t i, float4 v, float4 r) const
    {
        if (res) v = add4_rn(v, r);
        if (y) *reinterpret_cast<float4 *>(y + i) = v;
        if (out.p) out.put4(i, v);
    }
    __device__ void store4(size_t i, float4 v) const
    {
        store4(i, v, aux4(i));
    }
};

} // namespace

#endif
