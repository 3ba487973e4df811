/* The CUDA device backend: runtime API streams/events/memory, cuBLASLt GEMMs,
 * NVTX ranges. Written against CUDA names; gpu_compat.h maps them for HIP.
 *
 * Every runtime call is checked: a failure is a device failure, fatal with the
 * call, file:line and the runtime's message. A process may open two devices
 * (p2p copies), so each op that depends on the current device sets it first. */
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "runtime/device.h"
#include "runtime/memtrack.h"
#include "runtime/device_cuda.h"
#include "runtime/kernels_cuda.h"

#ifndef AO_GPU_HIP
#include <cuda.h> /* CUstream, CUresult: the one driver call, see "stream holds" */
#endif

/* Per-stream cuBLASLt workspace (device.h): one per stream, not per device,
 * so that two GEMMs on two streams never share scratch memory while they run. */
#define GEMM_WORKSPACE_BYTES AO_GEMM_WORKSPACE_BYTES

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
 * column-major roles (see cuda_gemm for the row-major mapping). */
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

void ao_cuda_check(cudaError_t err, const char *call, const char *file, int line)
{
    if (err != cudaSuccess)
        ao_fatal(AO_EXIT_FAIL, call, "%s (%s:%d)", cudaGetErrorString(err), file, line);
}

static void blas_check(cublasStatus_t st, const char *call, const char *file, int line)
{
    if (st != CUBLAS_STATUS_SUCCESS)
        ao_fatal(AO_EXIT_FAIL, call, "%s (status %d, %s:%d)", ao_blas_status_string(st), (int)st,
                 file, line);
}
#define BLAS_CHECK(call) blas_check((call), #call, __FILE__, __LINE__)

int ao_cuda_is_device(ao_device *dev)
{
    return dev && ((struct ao_device_base *)dev)->ops == &ao_cuda_device_ops;
}

int ao_cuda_ordinal(ao_device *dev)
{
    return dev->ordinal;
}

cudaStream_t ao_cuda_stream(ao_stream *s)
{
    return s ? s->s : (cudaStream_t)0;
}

ao_device *ao_cuda_stream_device(ao_stream *s)
{
    return s->dev;
}

static void use_device(ao_device *dev)
{
    AO_CUDA_CHECK(cudaSetDevice(dev->ordinal));
}

static void lock(ao_device *dev)
{
    pthread_mutex_lock(&dev->lock);
}

static void unlock(ao_device *dev)
{
    pthread_mutex_unlock(&dev->lock);
}

/* ---- backend ---------------------------------------------------------------- */

/* Streams share the device's hardware work queues, 8 by default; two
 * streams on one queue run their work in the order the host enqueued it, as
 * if one stream. aorta's five streams and NCCL's own exceed 8, and on 2xH200
 * the compute stream shared a queue with the all-gathers': each layer's
 * backward kernel after the gathered weights' cast waited 10-15 us for the
 * prefetched all-gather's launch, and the compute stream idled 3.2 % of a
 * large step between its kernels instead of 2.3 % (bench/RESULTS.md, session
 * 10). 32 queues, the most CUDA gives, keep each stream on its own. Set before
 * the first runtime call, as the driver reads it when it starts; a value the
 * user set is kept. HIP's queues (GPU_MAX_HW_QUEUES) are left as they are:
 * not measured there. */
static void one_queue_per_stream(void)
{
#ifndef AO_GPU_HIP
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
#endif
}

/* The one unchecked call: no driver or no device means "0 devices". */
static int cuda_count(void)
{
    one_queue_per_stream();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

/* CUDA encodes versions as 1000 * major + 10 * minor. */
static void format_version(int v, char *buf, size_t n)
{
    if (v <= 0)
        snprintf(buf, n, "none");
    else
        snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

static void runtime_and_driver(char *rt, size_t rn, char *drv, size_t dn)
{
    int r = 0, d = 0;
    if (cudaRuntimeGetVersion(&r) != cudaSuccess) r = 0;
    if (cudaDriverGetVersion(&d) != cudaSuccess) d = 0;
    (void)cudaGetLastError();
    format_version(r, rt, rn);
    format_version(d, drv, dn);
}

static void cuda_version(char *buf, size_t n)
{
    char rt[32], drv[32];
    runtime_and_driver(rt, sizeof rt, drv, sizeof drv);
    snprintf(buf, n, "%s runtime %s, driver %s", AO_GPU_RUNTIME, rt, drv);
}

static ao_device *cuda_open(int ordinal)
{
    int n = cuda_count();
    if (ordinal < 0 || ordinal >= n) {
        ao_error("cannot open " AO_GPU_BACKEND " device", "device %d does not exist (%d visible)",
                 ordinal, n);
        if (n == 0) ao_hint("no GPU or no driver is visible to this process; try backend cpu");
        return NULL;
    }
    ao_device *dev = ao_calloc(1, sizeof *dev);
    dev->base.ops = &ao_cuda_device_ops;
    dev->ordinal = ordinal;
    dev->gemm_chunks = 1;
    use_device(dev);
    AO_CUDA_CHECK(cudaFree(0)); /* create the context now, not inside the first timed op */
    AO_CUDA_CHECK(cudaDeviceGetAttribute(&dev->sm_count, cudaDevAttrMultiProcessorCount, ordinal));
    AO_CUDA_CHECK(
        cudaDeviceGetAttribute(&dev->cc_major, cudaDevAttrComputeCapabilityMajor, ordinal));
    AO_CUDA_CHECK(
        cudaDeviceGetAttribute(&dev->cc_minor, cudaDevAttrComputeCapabilityMinor, ordinal));
    AO_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&dev->prio_least, &dev->prio_greatest));
    BLAS_CHECK(cublasLtCreate(&dev->lt));
    pthread_mutex_init(&dev->lock, NULL);
    ao_memtrack_init(&dev->mem);
    return dev;
}

static void destroy_plan(struct gemm_plan *p)
{
    BLAS_CHECK(cublasLtMatrixLayoutDestroy(p->la));
    BLAS_CHECK(cublasLtMatrixLayoutDestroy(p->lb));
    BLAS_CHECK(cublasLtMatrixLayoutDestroy(p->lc));
    BLAS_CHECK(cublasLtMatmulDescDestroy(p->op));
}

static void cuda_close(ao_device *dev)
{
    if (!dev) return;
    use_device(dev);
    AO_CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < dev->nplans; i++) destroy_plan(&dev->plans[i]);
    free(dev->plans);
    for (int i = 0; i < dev->nptrs; i++) AO_CUDA_CHECK(cudaFree(dev->ptrs[i].dev));
    if (dev->null_stream_workspace) AO_CUDA_CHECK(cudaFree(dev->null_stream_workspace));
    BLAS_CHECK(cublasLtDestroy(dev->lt));
    pthread_mutex_destroy(&dev->lock);
    ao_memtrack_destroy(&dev->mem);
    free(dev);
}

static void cuda_get_info(ao_device *dev, ao_device_info *info)
{
    memset(info, 0, sizeof *info);
    struct cudaDeviceProp prop;
    AO_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev->ordinal));
    snprintf(info->backend, sizeof info->backend, "%s", AO_GPU_BACKEND);
    snprintf(info->name, sizeof info->name, "%.*s", (int)sizeof info->name - 1, prop.name);
    AO_CUDA_CHECK(
        cudaDeviceGetPCIBusId(info->pci_bus_id, (int)sizeof info->pci_bus_id, dev->ordinal));
    info->ordinal = dev->ordinal;
    info->sm_count = dev->sm_count;
    info->cc_major = dev->cc_major;
    info->cc_minor = dev->cc_minor;
    info->total_mem = prop.totalGlobalMem;
    info->priority_least = dev->prio_least;
    info->priority_greatest = dev->prio_greatest;
    runtime_and_driver(info->runtime_version, sizeof info->runtime_version, info->driver_version,
                       sizeof info->driver_version);
}

/* The dtypes GEMMs take here; bf16 needs Ampere (sm_80) or newer. */
static int cuda_supports(ao_device *dev, ao_dtype t)
{
    switch (t) {
    case AO_F32:
    case AO_F16:
        return 1;
    case AO_BF16:
        return dev->cc_major >= 8;
    default:
        return 0;
    }
}

static void cuda_sync(ao_device *dev)
{
    use_device(dev);
    AO_CUDA_CHECK(cudaDeviceSynchronize());
}

/* ---- memory ------------------------------------------------------------------ */

static void *cuda_dev_alloc(ao_device *dev, size_t bytes)
{
    use_device(dev);
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess)
        ao_fatal(AO_EXIT_FAIL, "cudaMalloc", "%zu bytes on " AO_GPU_BACKEND ":%d: %s", bytes,
                 dev->ordinal, cudaGetErrorString(err));
    ao_memtrack_add(&dev->mem, p, bytes);
    return p;
}

static void cuda_dev_free(ao_device *dev, void *p)
{
    if (!p) return;
    use_device(dev);
    ao_memtrack_remove(&dev->mem, p);
    AO_CUDA_CHECK(cudaFree(p));
}

/* aorta's own allocations; the runtime's (context, NCCL, cuBLASLt) are not
 * counted: cudaMemGetInfo sees them, but also every other process's. */
static void cuda_mem_usage(ao_device *dev, size_t *in_use, size_t *peak)
{
    ao_memtrack_get(&dev->mem, in_use, peak);
}

/* With unified addressing (every 64-bit CUDA platform), pinned memory is
 * mapped for all devices at the same address: copy kernels can read it. */
static void *cuda_host_alloc(ao_device *dev, size_t bytes)
{
    use_device(dev);
    void *p = NULL;
    cudaError_t err = cudaMallocHost(&p, bytes);
    if (err != cudaSuccess)
        ao_fatal(AO_EXIT_FAIL, "cudaMallocHost", "%zu bytes of pinned memory: %s", bytes,
                 cudaGetErrorString(err));
    return p;
}

static void cuda_host_free(ao_device *dev, void *p)
{
    if (!p) return;
    use_device(dev);
    AO_CUDA_CHECK(cudaFreeHost(p));
}

static void cuda_memset_async(ao_device *dev, void *p, int value, size_t bytes, ao_stream *s)
{
    use_device(dev);
    AO_CUDA_CHECK(cudaMemsetAsync(p, value, bytes, ao_cuda_stream(s)));
}

static void cuda_copy_async(ao_device *dev, void *dst, const void *src, size_t bytes,
                            ao_copy_kind kind, ao_stream *s)
{
    enum cudaMemcpyKind k = cudaMemcpyDeviceToDevice;
    switch (kind) {
    case AO_H2D:
        k = cudaMemcpyHostToDevice;
        break;
    case AO_D2H:
        k = cudaMemcpyDeviceToHost;
        break;
    case AO_D2D:
        k = cudaMemcpyDeviceToDevice;
        break;
    case AO_H2H:
        k = cudaMemcpyHostToHost;
        break;
    }
    use_device(dev);
    AO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, ao_cuda_stream(s)));
}

static void cuda_copy_sm_async(ao_device *dev, void *dst, const void *src, size_t bytes,
                               ao_stream *s)
{
    use_device(dev);
    AO_CUDA_CHECK(ao_cuda_copy_sm(dst, src, bytes, dev->sm_count, ao_cuda_stream(s)));
}

/* Lets `from` address `to`'s memory, once per pair. Where the hardware has no
 * peer path, cudaMemcpyPeerAsync still works (staged through the host). */
static void enable_peer(ao_device *from, ao_device *to)
{
    if (from->ordinal == to->ordinal) return;
    const uint64_t bit = to->ordinal < 64 ? (uint64_t)1 << to->ordinal : 0;
    lock(from);
    if (!(from->peers_done & bit)) {
        int can = 0;
        AO_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from->ordinal, to->ordinal));
        if (can) {
            use_device(from);
            cudaError_t err = cudaDeviceEnablePeerAccess(to->ordinal, 0);
            if (err == cudaErrorPeerAccessAlreadyEnabled)
                (void)cudaGetLastError();
            else
                AO_CUDA_CHECK(err);
        }
        from->peers_done |= bit;
    }
    unlock(from);
}

static void cuda_copy_peer_async(ao_device *dst_dev, void *dst, ao_device *src_dev, const void *src,
                                 size_t bytes, ao_stream *s)
{
    enable_peer(dst_dev, src_dev);
    enable_peer(src_dev, dst_dev);
    use_device(s ? s->dev : src_dev);
    AO_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_dev->ordinal, src, src_dev->ordinal, bytes,
                                      ao_cuda_stream(s)));
}

/* ---- streams and events ---------------------------------------------------------- */

static ao_stream *cuda_stream_create(ao_device *dev, const char *name, int priority)
{
    /* greatest is the numerically smallest (highest) priority */
    int p = priority;
    if (p < dev->prio_greatest) p = dev->prio_greatest;
    if (p > dev->prio_least) p = dev->prio_least;
    ao_stream *s = ao_calloc(1, sizeof *s);
    s->base.ops = &ao_cuda_device_ops;
    s->dev = dev;
    s->name = ao_strdup(name ? name : "stream");
    use_device(dev);
    AO_CUDA_CHECK(cudaStreamCreateWithPriority(&s->s, cudaStreamNonBlocking, p));
    AO_CUDA_CHECK(cudaStreamGetPriority(s->s, &s->priority));
    return s;
}

static void cuda_stream_release(ao_stream *s);

static void cuda_stream_destroy(ao_stream *s)
{
    if (!s) return;
    cuda_stream_release(s); /* a held stream would never drain */
    use_device(s->dev);
    AO_CUDA_CHECK(cudaStreamSynchronize(s->s)); /* its GEMMs may still use the workspace */
    if (s->workspace) AO_CUDA_CHECK(cudaFree(s->workspace));
    AO_CUDA_CHECK(cudaStreamDestroy(s->s));
    if (s->gate) AO_CUDA_CHECK(cudaFreeHost(s->gate));
    free(s->name);
    free(s);
}

static const char *cuda_stream_name(ao_stream *s)
{
    return s->name;
}

static int cuda_stream_priority(ao_stream *s)
{
    return s->priority;
}

static void cuda_stream_sync(ao_stream *s)
{
    AO_CUDA_CHECK(cudaStreamSynchronize(s->s));
}

/* ---- stream holds ----------------------------------------------------------------
 *
 * The device waits on a 32-bit counter in mapped pinned host memory
 * (cuStreamWaitValue32, a cyclic >=): hold enqueues a wait for the counter's
 * next value, release stores that value from the host. The driver entry point
 * is found through the runtime, so nothing links libcuda; the pointer is
 * process-wide state because the driver's function is. HIP builds and CUDA
 * runtimes before 12.5 do not hold (hipStreamWaitValue32 wants signal
 * memory; not done, untested there). */

#if !defined(AO_GPU_HIP) && CUDART_VERSION >= 12050
typedef CUresult (*wait_value32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static wait_value32_fn wait_value32;
static int hold_broken; /* a wait failed once: holds are off, with one warning */

static void find_wait_value32(void)
{
    const char *env = getenv("AORTA_STREAM_HOLD");
    if (env && strcmp(env, "0") == 0) return; /* device.h: measuring the holds */
    enum cudaDriverEntryPointQueryResult q;
    void *fn = NULL;
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
        wait_value32 = (wait_value32_fn)fn;
}

static void cuda_stream_hold(ao_stream *s)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, find_wait_value32);
    if (s->held) ao_fatal(AO_EXIT_FAIL, "stream", "%s held twice", s->name);
    if (!wait_value32 || __atomic_load_n(&hold_broken, __ATOMIC_RELAXED)) return;
    use_device(s->dev);
    if (!s->gate) {
        AO_CUDA_CHECK(cudaHostAlloc((void **)&s->gate, sizeof *s->gate, cudaHostAllocMapped));
        *s->gate = 0;
        AO_CUDA_CHECK(cudaHostGetDevicePointer(&s->gate_dev, s->gate, 0));
    }
    CUresult r = wait_value32((CUstream)s->s, (CUdeviceptr)(uintptr_t)s->gate_dev, s->gate_next + 1,
                              CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS) {
        if (!__atomic_exchange_n(&hold_broken, 1, __ATOMIC_RELAXED))
            ao_warn("cuStreamWaitValue32 failed (CUresult %d): collectives' event pairs include "
                    "their host launch path",
                    (int)r);
        return;
    }
    s->gate_next++;
    s->held = 1;
}

static void cuda_stream_release(ao_stream *s)
{
    if (!s->held) return;
    __atomic_store_n(s->gate, s->gate_next, __ATOMIC_RELEASE);
    s->held = 0;
}
#else
#define cuda_stream_hold NULL
static void cuda_stream_release(ao_stream *s)
{
    (void)s;
}
#endif

static ao_event *cuda_event_create(ao_device *dev)
{
    ao_event *e = ao_calloc(1, sizeof *e);
    e->base.ops = &ao_cuda_device_ops;
    e->dev = dev;
    use_device(dev);
    AO_CUDA_CHECK(cudaEventCreateWithFlags(&e->e, cudaEventDefault));
    return e;
}

static void cuda_event_destroy(ao_event *e)
{
    if (!e) return;
    use_device(e->dev);
    AO_CUDA_CHECK(cudaEventDestroy(e->e));
    free(e);
}

static void cuda_event_record(ao_event *e, ao_stream *s)
{
    use_device(e->dev);
    AO_CUDA_CHECK(cudaEventRecord(e->e, ao_cuda_stream(s)));
}

static void cuda_stream_wait_event(ao_stream *s, ao_event *e)
{
    AO_CUDA_CHECK(cudaStreamWaitEvent(ao_cuda_stream(s), e->e, 0));
}

static void cuda_event_sync(ao_event *e)
{
    AO_CUDA_CHECK(cudaEventSynchronize(e->e));
}

static int cuda_event_query(ao_event *e)
{
    cudaError_t err = cudaEventQuery(e->e);
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError(); /* "not ready" is an answer, not an error */
        return 0;
    }
    AO_CUDA_CHECK(err);
    return 1;
}

static double cuda_event_elapsed_us(ao_event *start, ao_event *end)
{
    float ms = 0.0f;
    AO_CUDA_CHECK(cudaEventElapsedTime(&ms, start->e, end->e));
    return (double)ms * 1000.0;
}

/* The callback and a private copy of its argument, in one allocation that the
 * trampoline frees after the call. */
struct host_call {
    void (*fn)(void *);
    void *arg;
};

static void host_call_trampoline(void *p)
{
    struct host_call *hc = p;
    hc->fn(hc->arg);
    free(hc);
}

/* fn runs on a CUDA runtime thread and must not call CUDA. With arg_size 0 the
 * pointer itself is passed (nothing to copy). */
static void cuda_launch_host(ao_stream *s, void (*fn)(void *), const void *arg, size_t arg_size)
{
    const size_t off = (sizeof(struct host_call) + alignof(max_align_t) - 1) /
                       alignof(max_align_t) * alignof(max_align_t);
    struct host_call *hc = ao_malloc(off + arg_size);
    hc->fn = fn;
    if (arg_size) {
        hc->arg = (unsigned char *)hc + off;
        memcpy(hc->arg, arg, arg_size);
    } else {
        hc->arg = (void *)arg;
    }
    AO_CUDA_CHECK(cudaLaunchHostFunc(ao_cuda_stream(s), host_call_trampoline, hc));
}

/* ---- GEMM --------------------------------------------------------------------- */

static void cuda_gemm_set_policy(ao_device *dev, int chunks, int sm_count_target, int alone)
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
    if (!*ws) *ws = cuda_dev_alloc(dev, GEMM_WORKSPACE_BYTES);
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
    void **arrays = cuda_dev_alloc(dev, 3 * count * sizeof *arrays);
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

static void cuda_gemm(ao_device *dev, ao_stream *s, const ao_gemm_desc *d)
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

/* ---- profiler ranges ------------------------------------------------------------ */

static void cuda_range_push(ao_device *dev, const char *name)
{
    (void)dev;
    nvtxRangePushA(name);
}

static void cuda_range_pop(ao_device *dev)
{
    (void)dev;
    nvtxRangePop();
}

/* The capture range of nsys --capture-range=cudaProfilerApi (rocprof honours
 * hipProfilerStart/Stop the same way). Both act on the current context. */
static void cuda_profiler_start(ao_device *dev)
{
    use_device(dev);
    AO_CUDA_CHECK(cudaProfilerStart());
}

/* The range's last kernels may still run when the host decides to close it:
 * wait for them, or the capture would end mid-iteration. */
static void cuda_profiler_stop(ao_device *dev)
{
    use_device(dev);
    AO_CUDA_CHECK(cudaDeviceSynchronize());
    AO_CUDA_CHECK(cudaProfilerStop());
}

const struct ao_device_ops ao_cuda_device_ops = {
    .name = AO_GPU_BACKEND,
    .count = cuda_count,
    .version = cuda_version,
    .open = cuda_open,
    .close = cuda_close,
    .get_info = cuda_get_info,
    .supports = cuda_supports,
    .sync = cuda_sync,
    .dev_alloc = cuda_dev_alloc,
    .dev_free = cuda_dev_free,
    .mem_usage = cuda_mem_usage,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .memset_async = cuda_memset_async,
    .copy_async = cuda_copy_async,
    .copy_sm_async = cuda_copy_sm_async,
    .copy_peer_async = cuda_copy_peer_async,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_name = cuda_stream_name,
    .stream_priority = cuda_stream_priority,
    .stream_sync = cuda_stream_sync,
    .stream_hold = cuda_stream_hold,
    .stream_release = cuda_stream_release,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .event_sync = cuda_event_sync,
    .event_query = cuda_event_query,
    .event_elapsed_us = cuda_event_elapsed_us,
    .launch_host = cuda_launch_host,
    .gemm_set_policy = cuda_gemm_set_policy,
    .gemm = cuda_gemm,
    .range_push = cuda_range_push,
    .range_pop = cuda_range_pop,
    .profiler_start = cuda_profiler_start,
    .profiler_stop = cuda_profiler_stop,
};
