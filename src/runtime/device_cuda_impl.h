/* The CUDA device backend's state, shared by its two halves: device_cuda.c
 * (the backend, memory, streams and events, stream holds, host launches,
 * profiler ranges, the ops table) and gemm_cuda.c (cuBLASLt GEMM plans and
 * launches). Includes gpu_compat.h through device_cuda.h, so only those two
 * files include it. Internal to src/runtime. */
#ifndef AORTA_RUNTIME_DEVICE_CUDA_IMPL_H
#define AORTA_RUNTIME_DEVICE_CUDA_IMPL_H

#include <pthread.h>
#include <stdint.h>

#include "runtime/device.h"
#include "runtime/memtrack.h"
#include "runtime/device_cuda.h"

struct gemm_key {
    int trans_a, trans_b, m, n, k, lda, ldb, ldc;
    int ab_type, c_type, compute, batch_count, sm_target;
    int alone;                     /* ao_gemm_set_policy's: no workspace offered */
    int align_a, align_b, align_c; /* bytes; cuBLASLt picks kernels by alignment */
    int bias;     /* CUBLASLT_EPILOGUE_BIAS: the bias pointer's alignment (bytes), 0 without */
    int pointers; /* a pointer-array batch (two-level batches) */
    long long stride_a, stride_b, stride_c;
};

/* Descriptors and the chosen algorithm for one shape, in cuBLASLt's
 * column-major roles (see ao_cuda_gemm for the row-major mapping). */
struct gemm_plan {
    struct gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    size_t workspace;
    int none; /* the heuristic found no algorithm (only asked of optional plans) */
};

/* The device pointer arrays of one two-level batch (ao_gemm_desc.batch_outer):
 * [A's | B's | C's], product (o, i) at o * inner + i. Built once per distinct
 * set of addresses: the model's attention passes repeat theirs every step. */
struct ptr_key {
    const void *a, *b, *c;
    int outer, inner, asz, csz;
    long long sa, sb, sc, osa, osb, osc;
};
struct ptr_arrays {
    struct ptr_key key;
    void **dev;
};
#define MAX_PTR_ARRAYS 256 /* then all are dropped (after a device sync) and rebuilt */

struct ao_device {
    struct ao_device_base base;
    int ordinal;
    int sm_count, cc_major, cc_minor;
    int prio_least, prio_greatest;
    cublasLtHandle_t lt;
    pthread_mutex_t lock; /* guards everything below */
    int gemm_chunks, gemm_sm_target, gemm_alone;
    struct gemm_plan *plans;
    int nplans, cap_plans;
    void *null_stream_workspace; /* for GEMMs on the legacy default stream */
    struct ptr_arrays ptrs[MAX_PTR_ARRAYS];
    int nptrs;
    uint64_t peers_done; /* ordinals whose peer access was set up */
    ao_memtrack mem;     /* dev_alloc's bytes */
};

struct ao_stream {
    struct ao_device_base base;
    ao_device *dev;
    cudaStream_t s;
    char *name;
    int priority;
    void *workspace;
    /* ao_stream_hold: the device waits until *gate reaches gate_next
     * (mapped pinned host memory, gate_dev its device address) */
    uint32_t *gate;
    void *gate_dev;
    uint32_t gate_next;
    int held;
};

struct ao_event {
    struct ao_device_base base;
    ao_device *dev;
    cudaEvent_t e;
};

/* ao_fatal(1) naming the call, file:line and cuBLASLt's status when `st` is
 * not CUBLAS_STATUS_SUCCESS. */
void ao_cuda_blas_check(cublasStatus_t st, const char *call, const char *file, int line);
#define BLAS_CHECK(call) ao_cuda_blas_check((call), #call, __FILE__, __LINE__)

/* Each op that depends on the current device sets it first (a process may
 * open two devices). */
static inline void use_device(ao_device *dev)
{
    AO_CUDA_CHECK(cudaSetDevice(dev->ordinal));
}

static inline void lock(ao_device *dev)
{
    pthread_mutex_lock(&dev->lock);
}

static inline void unlock(ao_device *dev)
{
    pthread_mutex_unlock(&dev->lock);
}

/* device_cuda.c: the ops table's dev_alloc, counted in dev->mem. */
void *ao_cuda_dev_alloc(ao_device *dev, size_t bytes);

/* gemm_cuda.c: the ops table's gemm_set_policy and gemm. */
void ao_cuda_gemm_set_policy(ao_device *dev, int chunks, int sm_count_target, int alone);
void ao_cuda_gemm(ao_device *dev, ao_stream *s, const ao_gemm_desc *d);
/* gemm_cuda.c: frees a closing device's GEMM plans, pointer arrays and
 * default-stream workspace; cuda_close calls it after the device sync. */
void ao_cuda_gemm_release(ao_device *dev);

#endif
