/* Gradient norms, the non-finite flag, clipping, the step's scalars and the
 * AdamW update. */
#include "model/kernels/dtype.cuh"

namespace
{

/* The first pass of a two-pass reduction: AO_CUDA_REDUCE_PARTIALS blocks of
 * this many threads, about one resident wave on an H100/H200 (132 SMs x 8
 * blocks), so no block starts after the others have finished. */
constexpr int kReduceThreads = 256;

/* Each thread sums the squares of float4s i, i + stride, ... two at a time
 * (two loads in flight: one scalar load per thread left this kernel waiting
 * on memory at under a third of its bandwidth), then the scalars of the
 * tail (all of x when it is not 16-byte aligned). The order depends only on
 * n, x's alignment and the grid, never on timing. */
__global__ void sum_squares_partial_kernel(double *partials, const float *x, size_t n)
{
    pdl_wait();
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t n4 = aligned16(x) ? n / 4 : 0;
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
    double acc = 0.0;
    size_t i = tid;
    for (; i + stride < n4; i += 2 * stride) {
        const float4 a = x4[i], b = x4[i + stride];
        acc += (double)a.x * a.x + (double)a.y * a.y + (double)a.z * a.z + (double)a.w * a.w;
        acc += (double)b.x * b.x + (double)b.y * b.y + (double)b.z * b.z + (double)b.w * b.w;
    }
    if (i < n4) {
        const float4 a = x4[i];
        acc += (double)a.x * a.x + (double)a.y * a.y + (double)a.z * a.z + (double)a.w * a.w;
    }
    for (size_t j = 4 * n4 + tid; j < n; j += stride) acc += (double)x[j] * x[j];
    acc = block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

__global__ void sum_partials_kernel(double *out, const double *partials, int count)
{
    pdl_wait();
    double acc = 0.0;
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) out[0] = acc;
}

__global__ void has_nonfinite_kernel(int *flag, const float *x, size_t n)
{
    pdl_wait();
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    int found = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        found |= !isfinite(x[i]);
    if (__syncthreads_or(found) && threadIdx.x == 0) atomicOr(flag, 1);
}

__global__ void clip_coef_kernel(float *coef, const double *sq_norm, float max_norm, float extra)
{
    pdl_wait();
    if (!isfinite(sq_norm[0])) { /* overflow: 0 tells adamw_kernel to skip the step */
        coef[0] = 0.0f;
        return;
    }
    float c = 1.0f;
    if (max_norm > 0.0f) {
        const double v = (double)max_norm / (sqrt(sq_norm[0]) + 1e-6);
        c = v < 1.0 ? (float)v : 1.0f;
    }
    coef[0] = c * extra;
}

__global__ void step_scalars_kernel(double *out, const double *sq, int nsq, double norm_scale,
                                    const float *loss, int nloss, double stop)
{
    pdl_wait();
    double sum = 0.0, sq_sum = 0.0;
    for (int i = 0; i < nsq; i++) sq_sum += sq[i];
    for (int i = 0; i < nloss; i++) sum += loss[i];
    out[0] = sq_sum * norm_scale;
    out[1] = sum;
    out[2] = stop;
}

__global__ void norm_result_kernel(double *result, const double *sq_norm, const float *coef)
{
    pdl_wait();
    result[0] = sqrt(sq_norm[0]);
    result[1] = coef[0];
}

struct adamw_scalars {
    float step_size, bc2_sqrt, decay, one_minus_b1, one_minus_b2, beta2, eps, grad_scale;
};

/* ao_adamw_step, operation for operation, on one element; __f*_rn keep the
 * compiler from fusing multiply-adds the reference does not fuse, so the
 * update matches the reference bit for bit. */
struct adamw_elem {
    adamw_scalars k;
    float extra;
    bool has_extra;
    __device__ void operator()(float &param, float grad, float &m, float &v) const
    {
        float g = __fmul_rn(grad, k.grad_scale);
        if (has_extra) g = __fmul_rn(g, extra);
        float p = __fmul_rn(param, k.decay);
        const float mi = __fadd_rn(m, __fmul_rn(k.one_minus_b1, __fsub_rn(g, m)));
        const float vi =
            __fadd_rn(__fmul_rn(v, k.beta2), __fmul_rn(__fmul_rn(k.one_minus_b2, g), g));
        const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
        p = __fsub_rn(p, __fmul_rn(k.step_size, __fdiv_rn(mi, denom)));
        m = mi;
        v = vi;
        param = p;
    }
};

/* Float4s when all four arrays are 16-byte aligned (a 7-array stream at
 * ~77 % of the memory bandwidth with scalars), then the scalar tail. T !=
 * AO_F32: the parameters are also stored in type T at p16 (vec: 8-byte
 * aligned). */
template <ao_dtype T>
__global__ void adamw_kernel(float *param, void *p16, const float *grad, float *m, float *v,
                             size_t n, adamw_scalars k, const float *grad_scale_dev, bool vec)
{
    pdl_wait();
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const adamw_elem op{k, grad_scale_dev ? grad_scale_dev[0] : 1.0f, grad_scale_dev != nullptr};
    if (op.has_extra && op.extra == 0.0f) return; /* clip_coef_kernel's skip */
    const typed_store<T> out16{p16};
    const size_t n4 = vec ? n / 4 : 0;
    for (size_t i = tid; i < n4; i += stride) {
        float4 p = reinterpret_cast<float4 *>(param)[i], mm = reinterpret_cast<float4 *>(m)[i],
               vv = reinterpret_cast<float4 *>(v)[i];
        const float4 g = reinterpret_cast<const float4 *>(grad)[i];
        op(p.x, g.x, mm.x, vv.x);
        op(p.y, g.y, mm.y, vv.y);
        op(p.z, g.z, mm.z, vv.z);
        op(p.w, g.w, mm.w, vv.w);
        reinterpret_cast<float4 *>(param)[i] = p;
        reinterpret_cast<float4 *>(m)[i] = mm;
        reinterpret_cast<float4 *>(v)[i] = vv;
        if (T != AO_F32) out16.put4(4 * i, p);
    }
    for (size_t i = 4 * n4 + tid; i < n; i += stride) {
        op(param[i], grad[i], m[i], v[i]);
        if (T != AO_F32) out16.put(i, param[i]);
    }
}

} // namespace

/* ---- launchers ------------------------------------------------------------- */

extern "C" cudaError_t ao_cuda_sum_squares(double *out, const float *x, size_t n, double *partials,
                                           cudaStream_t stream)
{
    launch(sum_squares_partial_kernel, AO_CUDA_REDUCE_PARTIALS, kReduceThreads, 0, stream, partials,
           x, n);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    launch(sum_partials_kernel, 1, AO_CUDA_REDUCE_PARTIALS, 0, stream, out, partials,
           AO_CUDA_REDUCE_PARTIALS);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_has_nonfinite(int *flag, const float *x, size_t n,
                                             cudaStream_t stream)
{
    if (n == 0) return cudaSuccess;
    launch(has_nonfinite_kernel, elem_blocks(n), kThreads, 0, stream, flag, x, n);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_clip_coef(float *coef, const double *sq_norm, float max_norm,
                                         float extra, cudaStream_t stream)
{
    launch(clip_coef_kernel, 1, 1, 0, stream, coef, sq_norm, max_norm, extra);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_step_scalars(double *out, const double *sq, int nsq,
                                            double norm_scale, const float *loss, int nloss,
                                            double stop, cudaStream_t stream)
{
    launch(step_scalars_kernel, 1, 1, 0, stream, out, sq, nsq, norm_scale, loss, nloss, stop);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_norm_result(double *result, const double *sq_norm, const float *coef,
                                           cudaStream_t stream)
{
    launch(norm_result_kernel, 1, 1, 0, stream, result, sq_norm, coef);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_adamw_step(float *param, void *param16, ao_dtype param16_type,
                                          const float *grad, float *m, float *v, size_t n,
                                          const ao_cuda_adamw *h, float lr, int64_t step,
                                          float grad_scale, const float *grad_scale_dev,
                                          cudaStream_t stream)
{
    if (param16 && param16_type != AO_BF16 && param16_type != AO_F16) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    /* ao_adamw_step's scalars, computed the same way on the host. */
    const double bc1 = 1.0 - pow((double)h->beta1, (double)step);
    const double bc2 = 1.0 - pow((double)h->beta2, (double)step);
    adamw_scalars k;
    k.step_size = (float)(lr / bc1);
    k.bc2_sqrt = (float)sqrt(bc2);
    k.decay = (float)(1.0 - (double)lr * h->weight_decay);
    k.one_minus_b1 = 1.0f - h->beta1;
    k.one_minus_b2 = 1.0f - h->beta2;
    k.beta2 = h->beta2;
    k.eps = h->eps;
    k.grad_scale = grad_scale;
    return with_dtype(param16 ? param16_type : AO_F32, [&](auto tag) {
        constexpr ao_dtype T = decltype(tag)::value;
        const bool vec = aligned16(param) && aligned16(grad) && aligned16(m) && aligned16(v) &&
                         (!param16 || store4_ok<T>(param16));
        launch(adamw_kernel<T>, elem_blocks(n, 4), kThreads, 0, stream, param, param16, grad, m, v,
               n, k, grad_scale_dev, vec);
        return cudaGetLastError();
    });
}
