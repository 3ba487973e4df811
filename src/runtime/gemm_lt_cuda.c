/* GEMMs through cuBLASLt (hipBLASLt with AORTA_HIPBLASLT, through
 * gpu_compat.h's names): plans (descriptors, layouts and the heuristic's
 * algorithm), found or made once per key and kept per device, run with the
 * stream's workspace. The bias is the library's epilogue, a separate D its
 * output. Under gemm_cuda.c (device_cuda_impl.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/device.h"
#include "runtime/device_cuda.h"
#include "runtime/device_cuda_impl.h"

/* Descriptors and the chosen algorithm for one shape, in cuBLASLt's
 * column-major roles (see find_plan for the row-major mapping). */
struct gemm_plan {
    struct gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
    int none; /* the heuristic found no algorithm (only asked of optional plans) */
};

struct ao_blas {
    cublasLtHandle_t lt;
    struct gemm_plan *plans;
    int nplans, cap_plans;
};

/* ao_fatal(1) naming the call, file:line and cuBLASLt's status when `st` is
 * not CUBLAS_STATUS_SUCCESS. */
static void blas_check(cublasStatus_t st, const char *call, const char *file, int line)
{
    if (st != CUBLAS_STATUS_SUCCESS)
        ao_fatal(AO_EXIT_FAIL, call, "%s (status %d, %s:%d)", ao_blas_status_string(st), (int)st,
                 file, line);
}
#define BLAS_CHECK(call) blas_check((call), #call, __FILE__, __LINE__)

static int blas_type(ao_dtype t, cudaDataType_t *out)
{
    switch (t) {
    case AO_F32:
        *out = CUDA_R_32F;
        return 0;
    case AO_F16:
        *out = CUDA_R_16F;
        return 0;
    case AO_BF16:
        *out = CUDA_R_16BF;
        return 0;
    default:
        return -1;
    }
}

/* pointers: the batch's matrices are found through a pointer array. */
static void set_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int rows, int cols, int ld,
                       int batch, long long stride, int pointers)
{
    BLAS_CHECK(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, (int64_t)ld));
    if (batch > 1) {
        int32_t b = batch;
        BLAS_CHECK(
            cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
    }
#if AO_GPU_HAS_LT_POINTER_ARRAYS
    if (pointers) {
        const uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
        BLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode,
                                                    sizeof mode));
        return;
    }
#endif
    if (batch > 1) {
        int64_t st = stride;
        BLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                    &st, sizeof st));
    }
}

/* Row-major C (m x n) is column-major C^T (n x m) at the same address, so the
 * GEMM is computed as C^T = op(B)^T op(A)^T: cuBLASLt's A is our B, its B our
 * A, with m and n swapped. A row-major X (r x c, ld) is a column-major c x r
 * matrix, hence the layouts below. Called with the device lock held. */
static struct gemm_plan *find_plan(ao_device *dev, const struct gemm_key *key, int optional)
{
    struct ao_blas *bl = dev->blas;
    for (int i = 0; i < bl->nplans; i++)
        if (memcmp(&bl->plans[i].key, key, sizeof *key) == 0)
            return bl->plans[i].none ? NULL : &bl->plans[i];

    cudaDataType_t ab, c;
    if (blas_type((ao_dtype)key->ab_type, &ab) || blas_type((ao_dtype)key->c_type, &c))
        ao_fatal(AO_EXIT_USAGE, "gemm", "dtype %s x %s is not supported on " AO_GPU_BACKEND,
                 ao_dtype_name((ao_dtype)key->ab_type), ao_dtype_name((ao_dtype)key->c_type));

    struct gemm_plan p;
    memset(&p, 0, sizeof p);
    p.key = *key;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    if (key->ab_type == AO_F32 && key->compute == AO_COMPUTE_TF32)
        compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    else if (key->ab_type == AO_F32 && key->compute == AO_COMPUTE_BF16)
        compute = CUBLAS_COMPUTE_32F_FAST_16BF;
    else if (key->ab_type == AO_F32 && key->compute == AO_COMPUTE_F16)
        compute = CUBLAS_COMPUTE_32F_FAST_16F;
    BLAS_CHECK(cublasLtMatmulDescCreate(&p.op, compute, CUDA_R_32F));
    const cublasOperation_t op_a = key->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* our B */
    const cublasOperation_t op_b = key->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N; /* our A */
    BLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    BLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    if (key->bias) {
        const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        BLAS_CHECK(
            cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        /* the output's type, cuBLASLt's default, said so for hipBLASLt */
        const int32_t bias_type = (int32_t)c;
        BLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                  &bias_type, sizeof bias_type));
        /* The heuristic reads only the pointer's alignment (cublasLt.h), so a
         * stand-in address of the key's alignment; each call sets the real
         * one. */
        const void *stand_in = (const void *)(uintptr_t)key->bias;
        BLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                  &stand_in, sizeof stand_in));
    }
#if AO_GPU_HAS_SM_COUNT_TARGET
    if (key->sm_target > 0) {
        int32_t sms = key->sm_target;
        BLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms,
                                                  sizeof sms));
    }
#endif
    /* cuBLASLt's A = our B: stored row-major k x n (n x k when transposed). */
    set_layout(&p.la, ab, key->trans_b ? key->k : key->n, key->trans_b ? key->n : key->k, key->ldb,
               key->batch_count, key->stride_b, key->pointers);
    /* cuBLASLt's B = our A: stored row-major m x k (k x m when transposed). */
    set_layout(&p.lb, ab, key->trans_a ? key->m : key->k, key->trans_a ? key->k : key->m, key->lda,
               key->batch_count, key->stride_a, key->pointers);
    set_layout(&p.lc, c, key->n, key->m, key->ldc, key->batch_count, key->stride_c, key->pointers);

    cublasLtMatmulPreference_t pref;
    BLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    /* Alone, no workspace: cuBLASLt then picks among kernels that need none,
     * on Hopper its static-schedule ones (ao_gemm_set_policy). */
    uint64_t ws = key->alone ? 0 : AO_GEMM_WORKSPACE_BYTES;
    BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &ws, sizeof ws));
#if AO_GPU_HAS_ALIGNMENT_PREFS
    uint32_t al_a = (uint32_t)key->align_b, al_b = (uint32_t)key->align_a;
    uint32_t al_c = (uint32_t)key->align_c;
    BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
    BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
    BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
    BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));
#endif
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(bl->lt, p.op, p.la, p.lb, p.lc, p.lc, pref, 1, &res, &found);
    BLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if ((st != CUBLAS_STATUS_SUCCESS || found < 1) && optional) {
        p.none = 1; /* remembered, so the heuristic is not asked again */
    } else if (st != CUBLAS_STATUS_SUCCESS || found < 1) {
        char shape[256];
        ao_fatal(AO_EXIT_FAIL, "cuBLASLt", "no GEMM algorithm for %s on " AO_GPU_BACKEND ":%d (%s)",
                 ao_cuda_gemm_shape_text(key, shape, sizeof shape), dev->ordinal,
                 st != CUBLAS_STATUS_SUCCESS ? ao_blas_status_string(st) : "heuristic found none");
    }
    p.algo = res.algo;
    p.workspace = res.workspaceSize;

    if (bl->nplans == bl->cap_plans) {
        bl->cap_plans = bl->cap_plans ? 2 * bl->cap_plans : 16;
        bl->plans = ao_realloc(bl->plans, (size_t)bl->cap_plans * sizeof *bl->plans);
    }
    bl->plans[bl->nplans] = p;
    bl->nplans++;
    if (ao_log_level() <= AO_LEVEL_DEBUG) {
        char shape[256];
        ao_debug("cuBLASLt plan %d: %s align %d/%d/%d bias %d pointers %d%s", bl->nplans,
                 ao_cuda_gemm_shape_text(key, shape, sizeof shape), key->align_a, key->align_b,
                 key->align_c, key->bias, key->pointers, p.none ? " (none)" : "");
    }
    return p.none ? NULL : &bl->plans[bl->nplans - 1];
}

static void destroy_plan(struct gemm_plan *p)
{
    BLAS_CHECK(cublasLtMatrixLayoutDestroy(p->la));
    BLAS_CHECK(cublasLtMatrixLayoutDestroy(p->lb));
    BLAS_CHECK(cublasLtMatrixLayoutDestroy(p->lc));
    BLAS_CHECK(cublasLtMatmulDescDestroy(p->op));
}

void ao_blas_open(ao_device *dev)
{
    dev->blas = ao_calloc(1, sizeof *dev->blas);
    BLAS_CHECK(cublasLtCreate(&dev->blas->lt));
}

void ao_blas_close(ao_device *dev)
{
    struct ao_blas *bl = dev->blas;
    if (!bl) return;
    for (int i = 0; i < bl->nplans; i++) destroy_plan(&bl->plans[i]);
    free(bl->plans);
    BLAS_CHECK(cublasLtDestroy(bl->lt));
    free(bl);
    dev->blas = NULL;
}

void ao_blas_stream_close(ao_stream *s)
{
    (void)s; /* the stream's workspace is gemm_cuda.c's */
}

/* cuBLASLt's A is our B and its B our A (find_plan); the bias pointer is
 * set on the plan's descriptor for each call. */
void ao_blas_matmul(ao_device *dev, ao_stream *s, const struct gemm_key *key, const ao_gemm_desc *d,
                    const void *a, const void *b, const void *c, void *out)
{
    struct gemm_plan *p = find_plan(dev, key, 0);
    if (d->bias)
        BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                  &d->bias, sizeof d->bias));
    BLAS_CHECK(cublasLtMatmul(dev->blas->lt, p->op, &d->alpha, b, p->la, a, p->lb, &d->beta, c,
                              p->lc, out, p->lc, &p->algo, ao_cuda_gemm_workspace(dev, s),
                              p->workspace, ao_cuda_stream(s)));
}

int ao_blas_matmul_pointers(ao_device *dev, ao_stream *s, const struct gemm_key *key,
                            const ao_gemm_desc *d)
{
    if (!AO_GPU_HAS_LT_POINTER_ARRAYS) return 0;
    struct gemm_plan *p = find_plan(dev, key, 1);
    if (!p) return 0;
    void **arrays = ao_cuda_gemm_pointer_arrays(dev, d);
    const size_t count = (size_t)key->batch_count;
    BLAS_CHECK(cublasLtMatmul(dev->blas->lt, p->op, &d->alpha, arrays + count, p->la, arrays, p->lb,
                              &d->beta, arrays + 2 * count, p->lc, arrays + 2 * count, p->lc,
                              &p->algo, ao_cuda_gemm_workspace(dev, s), p->workspace,
                              ao_cuda_stream(s)));
    return 1;
}
