/* The bias gradient's column sums (ao_cuda_bias_grad). */
#include "model/kernels/colsum.cuh"

extern "C" cudaError_t ao_cuda_bias_grad(float *db, const void *dy, ao_dtype dy_type, int n, int c,
                                         cudaStream_t stream)
{
    switch (dy_type) {
    case AO_F32:
        return column_sums(db, (float *)nullptr, n, c, bias_grad_term{(const float *)dy, c},
                           stream);
    case AO_BF16:
        return column_sums(db, (float *)nullptr, n, c,
                           bias_grad_term16<AO_BF16>{(const uint16_t *)dy, c}, stream);
    case AO_F16:
        return column_sums(db, (float *)nullptr, n, c,
                           bias_grad_term16<AO_F16>{(const uint16_t *)dy, c}, stream);
    default:
        return cudaErrorInvalidValue;
    }
}
