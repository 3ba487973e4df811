/* The GPU device backend's GEMMs, above the BLAS library: the policy
 * (chunks, SM target), checks, each product's key (shape, dtypes, alignment),
 * the split into chunks and groups, per-stream workspaces and the device
 * pointer arrays of two-level batches. The library's half is gemm_lt_cuda.c
 * (cuBLASLt, hipBLASLt) or gemm_hipblas_hip.c (hipBLAS). Written against
 * CUDA names; gpu_compat.h maps them for HIP. The state is in
 * device_cuda_impl.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/device.h"
#include "runtime/device_cuda.h"
#include "runtime/device_cuda_impl.h"

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

const char *ao_cuda_gemm_shape_text(const struct gemm_key *k, char *buf, size_t n)
{
    snprintf(buf, n,
             "m=%d n=%d k=%d trans_a=%d trans_b=%d lda=%d ldb=%d ldc=%d A/B %s C %s batch=%d "
             "sm_count_target=%d%s",
             k->m, k->n, k->k, k->trans_a, k->trans_b, k->lda, k->ldb, k->ldc,
             ao_dtype_name((ao_dtype)k->ab_type), ao_dtype_name((ao_dtype)k->c_type),
             k->batch_count, k->sm_target, k->alone ? " alone" : "");
    return buf;
}

/* One per stream, not per device, so that two GEMMs on two streams never
 * share scratch memory while they run. */
void *ao_cuda_gemm_workspace(ao_device *dev, ao_stream *s)
{
    void **ws = s ? &s->workspace : &dev->null_stream_workspace;
    if (!*ws) *ws = ao_cuda_dev_alloc(dev, AO_GEMM_WORKSPACE_BYTES);
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
static void gemm_group(ao_device *dev, ao_stream *s, const ao_gemm_desc *d, int o)
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
        ao_blas_matmul(dev, s, &key, d, a, b, c, dd);
        row += rows;
    }
}

/* The device pointer arrays of a two-level batch, built on first use. */
void **ao_cuda_gemm_pointer_arrays(ao_device *dev, const ao_gemm_desc *d)
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

/* A two-level batch in one launch through the library's pointer-array mode.
 * Returns 0 (nothing enqueued) where it has no such algorithm. */
static int gemm_pointer_array(ao_device *dev, ao_stream *s, const ao_gemm_desc *d)
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
    return ao_blas_matmul_pointers(dev, s, &key, d);
}

void ao_cuda_gemm(ao_device *dev, ao_stream *s, const ao_gemm_desc *d)
{
    check_gemm_desc(d);
    if (d->m == 0 || d->n == 0) return;
    use_device(dev);
    lock(dev);
    const int outer = d->batch_outer > 1 ? d->batch_outer : 1;
    /* a two-level batch is one launch unless chunked (the chunks would need
     * arrays of their own) or the library cannot: then one launch per group */
    if (outer == 1 || dev->gemm_chunks > 1 || !gemm_pointer_array(dev, s, d))
        for (int o = 0; o < outer; o++) gemm_group(dev, s, d, o);
    unlock(dev);
}

void ao_cuda_gemm_release(ao_device *dev)
{
    ao_blas_close(dev);
    for (int i = 0; i < dev->nptrs; i++) AO_CUDA_CHECK(cudaFree(dev->ptrs[i].dev));
    if (dev->null_stream_workspace) AO_CUDA_CHECK(cudaFree(dev->null_stream_workspace));
}
