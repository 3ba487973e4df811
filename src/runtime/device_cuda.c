/* The CUDA device backend: runtime API streams/events/memory, NVTX ranges and
 * the ops table; its GEMMs are in gemm_cuda.c (over gemm_lt_cuda.c or
 * gemm_hipblas_hip.c), the state they share in device_cuda_impl.h. Written against CUDA names;
 * gpu_compat.h maps them for HIP.
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
#include "runtime/device_cuda_impl.h"
#include "runtime/kernels_cuda.h"

#ifndef AO_GPU_HIP
#include <cuda.h> /* CUstream, CUresult: the one driver call, see "stream holds" */
#endif

void ao_cuda_check(cudaError_t err, const char *call, const char *file, int line)
{
    if (err != cudaSuccess)
        ao_fatal(AO_EXIT_FAIL, call, "%s (%s:%d)", cudaGetErrorString(err), file, line);
}

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

/* CUDA encodes versions as 1000 * major + 10 * minor, HIP as 10^7 * major +
 * 10^5 * minor + patch. */
static void format_version(int v, char *buf, size_t n)
{
    if (v <= 0) snprintf(buf, n, "none");
#ifdef AO_GPU_HIP
    else
        snprintf(buf, n, "%d.%d.%d", v / 10000000, v / 100000 % 100, v % 100000);
#else
    else
        snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
#endif
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
    ao_blas_open(dev);
    pthread_mutex_init(&dev->lock, NULL);
    ao_memtrack_init(&dev->mem);
    return dev;
}

static void cuda_close(ao_device *dev)
{
    if (!dev) return;
    use_device(dev);
    AO_CUDA_CHECK(cudaDeviceSynchronize());
    ao_cuda_gemm_release(dev);
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

void *ao_cuda_dev_alloc(ao_device *dev, size_t bytes)
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
    ao_blas_stream_close(s);
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
    .dev_alloc = ao_cuda_dev_alloc,
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
    .gemm_set_policy = ao_cuda_gemm_set_policy,
    .gemm = ao_cuda_gemm,
    .range_push = cuda_range_push,
    .range_pop = cuda_range_pop,
    .profiler_start = cuda_profiler_start,
    .profiler_stop = cuda_profiler_stop,
};
