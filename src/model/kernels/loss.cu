/* The weighted binary cross-entropy loss (with logits) and its gradient. */
#include "model/kernels/common.cuh"

namespace
{

constexpr int kLossThreads = 1024;

__global__ void bce_loss_kernel(float *loss, const float *z, const float *y, const float *w, int n,
                                double normalizer)
{
    pdl_wait();
    double acc = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const double zi = z[i];
        acc += (double)w[i] * (fmax(zi, 0.0) - zi * y[i] + log1p(exp(-fabs(zi))));
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0) loss[0] = (float)(acc / normalizer);
}

__global__ void bce_loss_backward_kernel(float *dz, const float *z, const float *y, const float *w,
                                         int n, double normalizer)
{
    pdl_wait();
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const double sig = 1.0 / (1.0 + exp(-(double)z[i]));
        dz[i] = (float)((double)w[i] * (sig - y[i]) / normalizer);
    }
}

} // namespace

/* ---- launchers ------------------------------------------------------------- */

extern "C" cudaError_t ao_cuda_bce_loss(float *loss, const float *z, const float *y, const float *w,
                                        int n, double normalizer, cudaStream_t stream)
{
    launch(bce_loss_kernel, 1, kLossThreads, 0, stream, loss, z, y, w, n > 0 ? n : 0, normalizer);
    return cudaGetLastError();
}

extern "C" cudaError_t ao_cuda_bce_loss_backward(float *dz, const float *z, const float *y,
                                                 const float *w, int n, double normalizer,
                                                 cudaStream_t stream)
{
    if (n <= 0) return cudaSuccess;
    launch(bce_loss_backward_kernel, elem_blocks((size_t)n), kThreads, 0, stream, dz, z, y, w, n,
           normalizer);
    return cudaGetLastError();
}
