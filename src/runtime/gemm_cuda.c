/* The CUDA device backend's GEMMs: cuBLASLt plans (descriptors, layouts and
 * the heuristic's algorithm), found or made once per shape, dtypes, alignment
 * and policy, and kept per device; per-stream workspaces; the device pointer
 * arrays of two-level batches. Written against CUDA names; gpu_compat.h maps
 * them for HIP (hipBLASLt). The state is in device_cuda_impl.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/device.h"
#include "runtime/device_cuda.h"
#include "runtime/device_cuda_impl.h"

/* Per-stream cuBLASLt workspace (device.h): one per stream, not per device,
 * so that two GEMMs on two streams never share scratch memory while they run. */
#define GEMM_WORKSPACE_BYTES AO_GEMM_WORKSPACE_BYTES

/* ---- GEMM --------------------------------------------------------------------- */

void ao_cuda_gemm_set_policy(ao_device *dev, int chunks, int sm_count_target, int alone)
{
    if (chunks < 0)
        ao_fatal(AO_EXIT_USAGE, "compute.gemm_chunks", "%d: must be 0 or more (0 and 1: no split)",
                 chunks);
    if (sm_count_target < 0)
        ao_fatal(AO_EXIT_USAGE, "compute.sm_count_target", "%d: must be 0 (all SMs) or more",
                 sm_count_target);
    if (sm_count_target > dev->sm_count)
        ao_warn("compute.sm_count_target %d exceeds the %d SMs of " AO_GPU_BACKEND ":%d",
                sm_count_target, dev->sm_count, dev->ordinal);
#if !AO_GPU_HAS_SM_COUNT_TARGET
    if (sm_count_target > 0)
        ao_warn("compute.sm_count_target is not supported by this BLAS library; ignored");
#endif
    lock(dev);
    dev->gemm_chunks = chunks > 1 ? chunks : 1;
    dev->gemm_sm_target = sm_count_target;
    dev->gemm_alone = alone != 0;
    unlock(dev);
}

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

static int pointer_alignment(const void *p)
{
    const uintptr_t a = (uintptr_t)p;
    int align = 256;
    while (align > 1 && (a % (uintptr_t)align) != 0) align /= 2;
    return align;
}

/* The alignment every matrix of a strided batch has: matrix i starts at
 * p + i * stride elements, so a stride of fewer aligned bytes than p (per-head
 * attention products: hd or T*T floats) lowers it. */
static int batch_alignment(const void *p, long long stride, size_t esz, int batch_count)
{
    int align = pointer_alignment(p);
    if (batch_count > 1) {
        const unsigned long long bytes = (unsigned long long)stride * esz;
        while (align > 1 && bytes % (unsigned long long)align != 0) align /= 2;
    }
    return align;
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
    if (pointers) {
        const uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
        BLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode,
                                                    sizeof mode));
    } else if (batch > 1) {
        int64_t st = stride;
        BLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                    &st, sizeof st));
    }
}

static const char *gemm_shape_text(const struct gemm_key *k, char *buf, size_t n)
{
    snprintf(buf, n,
             "m=%d n=%d k=%d trans_a=%d trans_b=%d lda=%d ldb=%d ldc=%d A/B %s C %s batch=%d "
             "sm_count_target=%d%s",
             k->m, k->n, k->k, k->trans_a, k->trans_b, k->lda, k->ldb, k->ldc,
             ao_dtype_name((ao_dtype)k->ab_type), ao_dtype_name((ao_dtype)k->c_type),
             k->batch_count, k->sm_target, k->alone ? " alone" : "");
    return buf;
}

/* Row-major C (m x n) is column-major C^T (n x m) at the same address, so the
 * GEMM is computed as C^T = op(B)^T op(A)^T: cuBLASLt's A is our B, its B our
 * A, with m and n swapped. A row-major X (r x c, ld) is a column-major c x r
 * matrix, hence the layouts below. Called with the device lock held. */
static struct gemm_plan *find_plan(ao_device *dev, const struct gemm_key *key, int optional)
{
    for (int i = 0; i < dev->nplans; i++)
        if (memcmp(&dev->plans[i].key, key, sizeof *key) == 0)
            return dev->plans[i].none ? NULL : &dev->plans[i];

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
    uint64_t ws = key->alone ? 0 : GEMM_WORKSPACE_BYTES;
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
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(dev->lt, p.op, p.la, p.lb, p.lc, p.lc, pref,
                                                       1, &res, &found);
    BLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if ((st != CUBLAS_STATUS_SUCCESS || found < 1) && optional) {
        p.none = 1; /* remembered, so the heuristic is not asked again */
    } else if (st != CUBLAS_STATUS_SUCCESS || found < 1) {
        char shape[256];
        ao_fatal(AO_EXIT_FAIL, "cuBLASLt", "no GEMM algorithm for %s on " AO_GPU_BACKEND ":%d (%s)",
                 gemm_shape_text(key, shape, sizeof shape), dev->ordinal,
                 st != CUBLAS_STATUS_SUCCESS ? ao_blas_status_string(st) : "heuristic found none");
    }
    p.algo = res.algo;
    p.workspace = res.workspaceSize;

    if (dev->nplans == dev->cap_plans) {
        dev->cap_plans = dev->cap_plans ? 2 * dev->cap_plans : 16;
        dev->plans = ao_realloc(dev->plans, (size_t)dev->cap_plans * sizeof *dev->plans);
    }
    dev->plans[dev->nplans] = p;
    dev->nplans++;
    if (ao_log_level() <= AO_LEVEL_DEBUG) {
        char shape[256];
        ao_debug("cuBLASLt plan %d: %s align %d/%d/%d bias %d pointers %d%s", dev->nplans,
                 gemm_shape_text(key, shape, sizeof shape), key->align_a, key->align_b,
                 key->align_c, key->bias, key->pointers, p.none ? " (none)" : "");
    }
    return p.none ? NULL : &dev->plans[dev->nplans - 1];
}

static void *stream_workspace(ao_device *dev, ao_stream *s)
{
    void **ws = s ? &s->workspace : &dev->null_stream_workspace;
    if (!*ws) *ws = ao_cuda_dev_alloc(dev, GEMM_WORKSPACE_BYTES);
    return *ws;
}

static void check_gemm_desc(const ao_gemm_desc *d)
{
    const int a_cols = d->trans_a ? d->m : d->k;
    const int b_cols = d->trans_b ? d->k : d->n;
    if (d->m < 0 || d->n < 0 || d->k < 1)
        ao_fatal(AO_EXIT_USAGE, "gemm", "m=%d n=%d k=%d: m and n must be >= 0, k >= 1", d->m, d->n,
                 d->k);
    if (d->lda < a_cols || d->ldb < b_cols || d->ldc < d->n)
        ao_fatal(AO_EXIT_USAGE, "gemm",
                 "lda=%d ldb=%d ldc=%d: must be at least the row length (%d, %d, %d)", d->lda,
                 d->ldb, d->ldc, a_cols, b_cols, d->n);
    if (d->batch_count < 1)
        ao_fatal(AO_EXIT_USAGE, "gemm", "batch_count=%d: must be >= 1", d->batch_count);
    if (d->batch_outer < 0 || (d->batch_outer > 1 && d->bias))
        ao_fatal(AO_EXIT_USAGE, "gemm", "batch_outer=%d: must be >= 0, without a bias",
                 d->batch_outer);
    if (d->bias && d->batch_count != 1)
        ao_fatal(AO_EXIT_USAGE, "gemm", "a bias needs batch_count 1 (got %d)", d->batch_count);
    if (d->d && (d->batch_count != 1 || d->batch_outer > 1))
        ao_fatal(AO_EXIT_USAGE, "gemm", "a separate D needs batch_count 1 (got %d, outer %d)",
                 d->batch_count, d->batch_outer);
}

/* The key of a GEMM's plan, the alignments from the given base addresses. */
static struct gemm_key gemm_key_of(const ao_device *dev, const ao_gemm_desc *d, int rows,
                                   const void *a, const void *b, const void *c)
{
    const size_t asz = ao_dtype_size(d->ab_type), csz = ao_dtype_size(d->c_type);
    struct gemm_key key;
    memset(&key, 0, sizeof key);
    key.trans_a = !!d->trans_a;
    key.trans_b = !!d->trans_b;
    key.m = rows;
    key.n = d->n;
    key.k = d->k;
    key.lda = d->lda;
    key.ldb = d->ldb;
    key.ldc = d->ldc;
    key.ab_type = d->ab_type;
    key.c_type = d->c_type;
    key.compute = d->compute;
    key.batch_count = d->batch_count;
    key.sm_target = dev->gemm_sm_target;
    key.alone = dev->gemm_alone;
    key.bias = d->bias ? pointer_alignment(d->bias) : 0;
    key.align_a = batch_alignment(a, d->stride_a, asz, d->batch_count);
    key.align_b = batch_alignment(b, d->stride_b, asz, d->batch_count);
    key.align_c = batch_alignment(c, d->stride_c, csz, d->batch_count);
    if (d->batch_count > 1) {
        key.stride_a = d->stride_a;
        key.stride_b = d->stride_b;
        key.stride_c = d->stride_c;
    }
    return key;
}

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* Outer group o of a batch (the whole GEMM when single-level): one strided
 * batch, split into compute.gemm_chunks launches along m. */
static void gemm_group(ao_device *dev, ao_stream *s, const ao_gemm_desc *d, int o, void *ws)
{
    const size_t asz = ao_dtype_size(d->ab_type), csz = ao_dtype_size(d->c_type);
    const unsigned char *a0 = (const unsigned char *)d->a + (size_t)o * d->outer_stride_a * asz;
    const unsigned char *b = (const unsigned char *)d->b + (size_t)o * d->outer_stride_b * asz;
    unsigned char *c0 = (unsigned char *)d->c + (size_t)o * d->outer_stride_c * csz;
    unsigned char *d0 = d->d ? (unsigned char *)d->d : c0; /* batch 1 when separate */
    const int chunks = dev->gemm_chunks < d->m ? dev->gemm_chunks : d->m;
    /* Chunks split the rows of C (= rows of op(A)) as evenly as possible. */
    int row = 0;
    for (int i = 0; i < chunks; i++) {
        const int rows = d->m / chunks + (i < d->m % chunks ? 1 : 0);
        const unsigned char *a = a0 + (size_t)row * (d->trans_a ? 1 : (size_t)d->lda) * asz;
        unsigned char *c = c0 + (size_t)row * (size_t)d->ldc * csz;
        unsigned char *dd = d0 + (size_t)row * (size_t)d->ldc * csz;
        struct gemm_key key = gemm_key_of(dev, d, rows, a, b, c);
        if (d->d) key.align_c = min_int(key.align_c, pointer_alignment(dd)); /* C's and D's */
        struct gemm_plan *p = find_plan(dev, &key, 0);
        if (d->bias)
            BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                      &d->bias, sizeof d->bias));
        BLAS_CHECK(cublasLtMatmul(dev->lt, p->op, &d->alpha, b, p->la, a, p->lb, &d->beta, c, p->lc,
                                  dd, p->lc, &p->algo, ws, p->workspace, ao_cuda_stream(s)));
        row += rows;
    }
}

/* The device pointer arrays of a two-level batch, built on first use. */
static void **pointer_arrays(ao_device *dev, const ao_gemm_desc *d)
{
    struct ptr_key k;
    memset(&k, 0, sizeof k);
    k.a = d->a;
    k.b = d->b;
    k.c = d->c;
    k.outer = d->batch_outer;
    k.inner = d->batch_count;
    k.asz = (int)ao_dtype_size(d->ab_type);
    k.csz = (int)ao_dtype_size(d->c_type);
    k.sa = d->stride_a, k.sb = d->stride_b, k.sc = d->stride_c;
    k.osa = d->outer_stride_a, k.osb = d->outer_stride_b, k.osc = d->outer_stride_c;
    for (int i = 0; i < dev->nptrs; i++)
        if (memcmp(&dev->ptrs[i].key, &k, sizeof k) == 0) return dev->ptrs[i].dev;
    if (dev->nptrs == MAX_PTR_ARRAYS) { /* some caller cycles through addresses */
        AO_CUDA_CHECK(cudaDeviceSynchronize());
        for (int i = 0; i < dev->nptrs; i++) AO_CUDA_CHECK(cudaFree(dev->ptrs[i].dev));
        dev->nptrs = 0;
    }
    const size_t count = (size_t)k.outer * (size_t)k.inner;
    const void **host = ao_malloc(3 * count * sizeof *host);
    for (int o = 0; o < k.outer; o++)
        for (int i = 0; i < k.inner; i++) {
            const size_t at = (size_t)o * (size_t)k.inner + (size_t)i;
            host[at] = (const char *)k.a + (size_t)(o * k.osa + i * k.sa) * (size_t)k.asz;
            host[count + at] = (const char *)k.b + (size_t)(o * k.osb + i * k.sb) * (size_t)k.asz;
            host[2 * count + at] =
                (const char *)k.c + (size_t)(o * k.osc + i * k.sc) * (size_t)k.csz;
        }
    void **arrays = ao_cuda_dev_alloc(dev, 3 * count * sizeof *arrays);
    /* synchronous: the arrays are new, and read only by work enqueued after */
    AO_CUDA_CHECK(cudaMemcpy(arrays, host, 3 * count * sizeof *host, cudaMemcpyHostToDevice));
    free(host);
    dev->ptrs[dev->nptrs++] = (struct ptr_arrays){k, arrays};
    return arrays;
}

/* A two-level batch in one launch through cuBLASLt's pointer-array mode.
 * Returns 0 (nothing enqueued) where cuBLASLt has no such algorithm. */
static int gemm_pointer_array(ao_device *dev, ao_stream *s, const ao_gemm_desc *d, void *ws)
{
    const size_t asz = ao_dtype_size(d->ab_type), csz = ao_dtype_size(d->c_type);
    ao_gemm_desc all = *d;
    all.batch_count = d->batch_outer * d->batch_count;
    struct gemm_key key = gemm_key_of(dev, &all, d->m, d->a, d->b, d->c);
    /* every matrix of every group: the outer strides may lower it too */
    key.align_a = min_int(key.align_a, batch_alignment(d->a, d->outer_stride_a, asz, 2));
    key.align_b = min_int(key.align_b, batch_alignment(d->b, d->outer_stride_b, asz, 2));
    key.align_c = min_int(key.align_c, batch_alignment(d->c, d->outer_stride_c, csz, 2));
    key.stride_a = key.stride_b = key.stride_c = 0;
    key.pointers = 1;
    struct gemm_plan *p = find_plan(dev, &key, 1);
    if (!p) return 0;
    void **arrays = pointer_arrays(dev, d);
    const size_t count = (size_t)all.batch_count;
    BLAS_CHECK(cublasLtMatmul(dev->lt, p->op, &d->alpha, arrays + count, p->la, arrays, p->lb,
                              &d->beta, arrays + 2 * count, p->lc, arrays + 2 * count, p->lc,
                              &p->algo, ws, p->workspace, ao_cuda_stream(s)));
    return 1;
}

void ao_cuda_gemm(ao_device *dev, ao_stream *s, const ao_gemm_desc *d)
{
    check_gemm_desc(d);
    if (d->m == 0 || d->n == 0) return;
    use_device(dev);
    lock(dev);
    void *ws = stream_workspace(dev, s);
    const int outer = d->batch_outer > 1 ? d->batch_outer : 1;
    /* a two-level batch is one launch unless chunked (the chunks would need
     * arrays of their own) or cuBLASLt cannot: then one launch per group */
    if (outer == 1 || dev->gemm_chunks > 1 || !gemm_pointer_array(dev, s, d, ws))
        for (int o = 0; o < outer; o++) gemm_group(dev, s, d, o, ws);
    unlock(dev);
}

static void destroy_plan(struct gemm_plan *p)
{
    BLAS_CHECK(cublasLtMatrixLayoutDestroy(p->la));
    BLAS_CHECK(cublasLtMatrixLayoutDestroy(p->lb));
    BLAS_CHECK(cublasLtMatrixLayoutDestroy(p->lc));
    BLAS_CHECK(cublasLtMatmulDescDestroy(p->op));
}

void ao_cuda_gemm_release(ao_device *dev)
{
    for (int i = 0; i < dev->nplans; i++) destroy_plan(&dev->plans[i]);
    free(dev->plans);
    for (int i = 0; i < dev->nptrs; i++) AO_CUDA_CHECK(cudaFree(dev->ptrs[i].dev));
    if (dev->null_stream_workspace) AO_CUDA_CHECK(cudaFree(dev->null_stream_workspace));
}
