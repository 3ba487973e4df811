/* GEMMs through hipBLAS (rocBLAS underneath) where hipBLASLt is not
 * (Debian's ROCm; AORTA_HIPBLASLT takes gemm_lt_cuda.c instead). Under
 * gemm_cuda.c (device_cuda_impl.h), which chunks and batches; here one
 * product, strided batch or pointer-array batch a call.
 *
 * Row-major C (m x n) is column-major C^T (n x m), so hipBLAS computes
 * C^T = op(B)^T op(A)^T: its A is our B, its B our A, m and n swapped (as
 * gemm_lt_cuda.c). What cuBLASLt's epilogue does is done in the same
 * stream order: a separate D gets a copy of C first (then the product runs
 * in place on D), and a bias is a second, rank-1 product D += ones(m) bias^T
 * (exact: 1 * b + x). One hipBLAS handle a stream, as rocBLAS keeps its
 * scratch memory per handle. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/device.h"
#include "runtime/device_cuda.h"
#include "runtime/device_cuda_impl.h"

/* hipBLAS 3 (ROCm 7) and the HIPBLAS_V2 API of ROCm 6 type the operands
 * hipDataType and the computation hipblasComputeType_t; earlier ones
 * (Debian's 5.5) hipblasDatatype_t for both. */
#if defined(HIPBLAS_V2) || (defined(hipblasVersionMajor) && hipblasVersionMajor >= 3)
typedef hipDataType blas_dtype;
typedef hipblasComputeType_t blas_compute;
#define BLAS_R_32F      HIP_R_32F
#define BLAS_R_16F      HIP_R_16F
#define BLAS_R_16BF     HIP_R_16BF
#define BLAS_COMPUTE_32 HIPBLAS_COMPUTE_32F
#define BLAS_FAST_MODES 1
#else
typedef hipblasDatatype_t blas_dtype;
typedef hipblasDatatype_t blas_compute;
#define BLAS_R_32F      HIPBLAS_R_32F
#define BLAS_R_16F      HIPBLAS_R_16F
#define BLAS_R_16BF     HIPBLAS_R_16B
#define BLAS_COMPUTE_32 HIPBLAS_R_32F
#define BLAS_FAST_MODES 0
#endif

struct ao_blas {
    hipblasHandle_t null_stream; /* GEMMs on the default stream */
    void *ones;                  /* ones_len 1.0s of ones_type: the bias product's column */
    int ones_len;
    ao_dtype ones_type;
    int warned_compute; /* a fast fp32 mode was asked for and is not here (once) */
};

static void blas_check(hipblasStatus_t st, const char *call, const char *file, int line)
{
    if (st != HIPBLAS_STATUS_SUCCESS)
        ao_fatal(AO_EXIT_FAIL, call, "%s (status %d, %s:%d)", hipblasStatusToString(st), (int)st,
                 file, line);
}
#define BLAS_CHECK(call) blas_check((call), #call, __FILE__, __LINE__)

static blas_dtype blas_type(ao_dtype t)
{
    switch (t) {
    case AO_F32:
        return BLAS_R_32F;
    case AO_F16:
        return BLAS_R_16F;
    case AO_BF16:
        return BLAS_R_16BF;
    default:
        ao_fatal(AO_EXIT_USAGE, "gemm", "dtype %s is not supported on " AO_GPU_BACKEND,
                 ao_dtype_name(t));
    }
}

/* fp32 products in fp32 unless the library has the fast modes (hipBLAS
 * v2's): compute.* asked for one then, said once. */
static blas_compute compute_type(ao_device *dev, const struct gemm_key *key)
{
    if (key->ab_type != AO_F32 || key->compute == AO_COMPUTE_DEFAULT) return BLAS_COMPUTE_32;
#if BLAS_FAST_MODES
    (void)dev;
    switch (key->compute) {
    case AO_COMPUTE_TF32:
        return HIPBLAS_COMPUTE_32F_FAST_TF32;
    case AO_COMPUTE_BF16:
        return HIPBLAS_COMPUTE_32F_FAST_16BF;
    case AO_COMPUTE_F16:
        return HIPBLAS_COMPUTE_32F_FAST_16F;
    default:
        return BLAS_COMPUTE_32;
    }
#else
    if (!dev->blas->warned_compute) {
        dev->blas->warned_compute = 1;
        ao_warn("this hipBLAS has no reduced-precision fp32 GEMM mode (training.tf32, "
                "training.mixed_precision on fp32 operands): those GEMMs run in fp32");
    }
    return BLAS_COMPUTE_32;
#endif
}

void ao_blas_open(ao_device *dev)
{
    dev->blas = ao_calloc(1, sizeof *dev->blas);
    BLAS_CHECK(hipblasCreate(&dev->blas->null_stream));
}

void ao_blas_close(ao_device *dev)
{
    struct ao_blas *bl = dev->blas;
    if (!bl) return;
    BLAS_CHECK(hipblasDestroy(bl->null_stream));
    if (bl->ones) AO_CUDA_CHECK(cudaFree(bl->ones));
    free(bl);
    dev->blas = NULL;
}

void ao_blas_stream_close(ao_stream *s)
{
    if (s->blas) BLAS_CHECK(hipblasDestroy((hipblasHandle_t)s->blas));
    s->blas = NULL;
}

/* The handle of s, bound to its stream. */
static hipblasHandle_t handle_of(ao_device *dev, ao_stream *s)
{
    if (!s) {
        BLAS_CHECK(hipblasSetStream(dev->blas->null_stream, (cudaStream_t)0));
        return dev->blas->null_stream;
    }
    if (!s->blas) {
        hipblasHandle_t h;
        BLAS_CHECK(hipblasCreate(&h));
        BLAS_CHECK(hipblasSetStream(h, ao_cuda_stream(s)));
        s->blas = h;
    }
    return (hipblasHandle_t)s->blas;
}

/* At least n ones of type t on the device (grown, never shrunk; the old
 * buffer is freed after a device sync, as work may still read it). */
static const void *ones(ao_device *dev, ao_dtype t, int n)
{
    struct ao_blas *bl = dev->blas;
    if (bl->ones && bl->ones_type == t && bl->ones_len >= n) return bl->ones;
    if (bl->ones) {
        AO_CUDA_CHECK(cudaDeviceSynchronize());
        AO_CUDA_CHECK(cudaFree(bl->ones));
    }
    const size_t esz = ao_dtype_size(t);
    unsigned char *host = ao_malloc((size_t)n * esz);
    /* 1.0 in fp32, fp16 (0x3c00) and bf16 (0x3f80) */
    const float one32 = 1.0f;
    const uint16_t one16 = t == AO_F16 ? 0x3c00u : 0x3f80u;
    for (int i = 0; i < n; i++)
        memcpy(host + (size_t)i * esz, t == AO_F32 ? (const void *)&one32 : (const void *)&one16,
               esz);
    AO_CUDA_CHECK(cudaMalloc(&bl->ones, (size_t)n * esz));
    /* synchronous: new memory, read only by work enqueued after */
    AO_CUDA_CHECK(cudaMemcpy(bl->ones, host, (size_t)n * esz, cudaMemcpyHostToDevice));
    free(host);
    bl->ones_len = n;
    bl->ones_type = t;
    return bl->ones;
}

void ao_blas_matmul(ao_device *dev, ao_stream *s, const struct gemm_key *key, const ao_gemm_desc *d,
                    const void *a, const void *b, const void *c, void *out)
{
    hipblasHandle_t h = handle_of(dev, s);
    const blas_dtype ab = blas_type((ao_dtype)key->ab_type), ct = blas_type((ao_dtype)key->c_type);
    const blas_compute comp = compute_type(dev, key);
    const hipblasOperation_t op_a = key->trans_b ? HIPBLAS_OP_T : HIPBLAS_OP_N; /* our B */
    const hipblasOperation_t op_b = key->trans_a ? HIPBLAS_OP_T : HIPBLAS_OP_N; /* our A */
    const size_t csz = ao_dtype_size((ao_dtype)key->c_type);
    if (out != c && d->beta != 0.0f) /* a separate D: C first, then the product in place */
        AO_CUDA_CHECK(cudaMemcpy2DAsync(out, (size_t)key->ldc * csz, c, (size_t)key->ldc * csz,
                                        (size_t)key->n * csz, (size_t)key->m,
                                        cudaMemcpyDeviceToDevice, ao_cuda_stream(s)));
    if (key->batch_count > 1)
        BLAS_CHECK(hipblasGemmStridedBatchedEx(
            h, op_a, op_b, key->n, key->m, key->k, &d->alpha, b, ab, key->ldb, key->stride_b, a, ab,
            key->lda, key->stride_a, &d->beta, out, ct, key->ldc, key->stride_c, key->batch_count,
            comp, HIPBLAS_GEMM_DEFAULT));
    else
        BLAS_CHECK(hipblasGemmEx(h, op_a, op_b, key->n, key->m, key->k, &d->alpha, b, ab, key->ldb,
                                 a, ab, key->lda, &d->beta, out, ct, key->ldc, comp,
                                 HIPBLAS_GEMM_DEFAULT));
    if (d->bias) {
        /* column-major: out^T (n x m) += bias (n x 1) ones^T (1 x m) */
        const float one = 1.0f;
        BLAS_CHECK(hipblasGemmEx(h, HIPBLAS_OP_N, HIPBLAS_OP_N, key->n, key->m, 1, &one, d->bias,
                                 ct, key->n, ones(dev, (ao_dtype)key->c_type, key->m), ct, 1, &one,
                                 out, ct, key->ldc, BLAS_COMPUTE_32, HIPBLAS_GEMM_DEFAULT));
    }
}

int ao_blas_matmul_pointers(ao_device *dev, ao_stream *s, const struct gemm_key *key,
                            const ao_gemm_desc *d)
{
    hipblasHandle_t h = handle_of(dev, s);
    const blas_dtype ab = blas_type((ao_dtype)key->ab_type), ct = blas_type((ao_dtype)key->c_type);
    const hipblasOperation_t op_a = key->trans_b ? HIPBLAS_OP_T : HIPBLAS_OP_N;
    const hipblasOperation_t op_b = key->trans_a ? HIPBLAS_OP_T : HIPBLAS_OP_N;
    void **arrays = ao_cuda_gemm_pointer_arrays(dev, d);
    const size_t count = (size_t)key->batch_count;
    BLAS_CHECK(hipblasGemmBatchedEx(
        h, op_a, op_b, key->n, key->m, key->k, &d->alpha, (const void **)(arrays + count), ab,
        key->ldb, (const void **)arrays, ab, key->lda, &d->beta, arrays + 2 * count, ct, key->ldc,
        key->batch_count, compute_type(dev, key), HIPBLAS_GEMM_DEFAULT));
    return 1;
}
