/* The GPU device backend's state, shared by its parts: device_cuda.c (the
 * backend, memory, streams and events, stream holds, host launches, profiler
 * ranges, the ops table), gemm_cuda.c (GEMM policy, chunks, batches) and the
 * BLAS library under it: gemm_lt_cuda.c (cuBLASLt, or hipBLASLt) or
 * gemm_hipblas_hip.c (hipBLAS). Includes gpu_compat.h through device_cuda.h,
 * so only those files include it. Internal to src/runtime. */
#ifndef AORTA_RUNTIME_DEVICE_CUDA_IMPL_H
#define AORTA_RUNTIME_DEVICE_CUDA_IMPL_H

#include <pthread.h>
#include <stddef.h>
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
    pthread_mutex_t lock; /* guards everything below */
    struct ao_blas *blas; /* the BLAS library's handle(s) and plans */
    int gemm_chunks, gemm_sm_target, gemm_alone;
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
    void *blas; /* the BLAS library's per-stream state (hipBLAS: its handle) */
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
/* gemm_cuda.c: frees a closing device's GEMM state (the BLAS library's too),
 * pointer arrays and default-stream workspace; cuda_close calls it after the
 * device sync. */
void ao_cuda_gemm_release(ao_device *dev);
/* gemm_cuda.c: the workspace of GEMMs on s (NULL: the default stream), made
 * on first use: AO_GEMM_WORKSPACE_BYTES, for libraries that take one. */
void *ao_cuda_gemm_workspace(ao_device *dev, ao_stream *s);
/* gemm_cuda.c: d's two-level batch as device pointer arrays ([A's | B's |
 * C's], product (o, i) at o * inner + i), kept per set of addresses. */
void **ao_cuda_gemm_pointer_arrays(ao_device *dev, const ao_gemm_desc *d);
/* gemm_cuda.c: "m=.. n=.. k=.. ..." for a message about key's GEMM. */
const char *ao_cuda_gemm_shape_text(const struct gemm_key *key, char *buf, size_t n);

/* ---- the BLAS library under gemm_cuda.c ----------------------------------
 * One implementation in a build: gemm_lt_cuda.c (cuBLASLt; hipBLASLt with
 * AORTA_HIPBLASLT) or gemm_hipblas_hip.c (hipBLAS). Called with the device
 * current; the *_matmul calls with the device lock held. */
void ao_blas_open(ao_device *dev);
/* Frees dev->blas; the device is synchronized. */
void ao_blas_close(ao_device *dev);
/* Frees s->blas; s is synchronized. */
void ao_blas_stream_close(ao_stream *s);
/* One product (a strided batch when key->batch_count > 1) of d at these
 * addresses: out = alpha op(a) op(b) + beta c, out == c in place, plus d's
 * bias when d->bias. key->m is the rows of this chunk. */
void ao_blas_matmul(ao_device *dev, ao_stream *s, const struct gemm_key *key, const ao_gemm_desc *d,
                    const void *a, const void *b, const void *c, void *out);
/* d's two-level batch in one launch (key->batch_count products through
 * ao_cuda_gemm_pointer_arrays). 0 (nothing enqueued) where the library has
 * no such algorithm. */
int ao_blas_matmul_pointers(ao_device *dev, ao_stream *s, const struct gemm_key *key,
                            const ao_gemm_desc *d);

#endif
