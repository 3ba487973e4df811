/* The injection library of aorta attach (attach/attach.h), built as
 * libaorta_attach.so: CUDA calls InitializeInjection when the process
 * initializes the driver. This file is the CUPTI half; the queue, steps and
 * files are attach/tracer.h's, shared with the rocprofiler-sdk tool.
 *
 * Threads: the application's threads only run CUPTI's callbacks (an atomic
 * max of the correlation id per launch, a few compares per NVTX range) and
 * hand CUPTI's full buffers to the tracer's queue; its worker thread decodes
 * them (decode below), cuts steps and writes the JSONL lines.
 *
 * A second CUPTI client: CUPTI allows one subscriber and one set of buffer
 * callbacks per process, and a second client's registration silently takes
 * the buffers of the first (Kineto: "bufferCompleted called with unknown
 * buffer", 0 events). Loaded with LD_PRELOAD, this library's cupti* entry
 * points below stand in front of libcupti's, so the other client's calls
 * come here first: before forwarding them, attach steps aside (disables its
 * activity kinds, flushes so its buffers come back to it, unsubscribes), and
 * when the other client has disabled all its kinds (or finalized) it comes
 * back. A buffer of the other client that reaches attach's callback is
 * handed to the other client's. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>
#include <nvtx3/nvToolsExt.h>

#include <generated_nvtx_meta.h>

#include "attach/tracer.h"
#include "core/error.h"
#include "timeline/cupti_lib_cuda.h"

/* The library is built with hidden visibility: only these are exported. */
#define AO_EXPORT __attribute__((visibility("default")))

#define BUFFER_BYTES (4u << 20)
#define FLUSH_MS     100

static const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                           CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

/* The other client may give CUPTI its own clock
 * (cuptiActivityRegisterTimestampCallback: PyTorch's Kineto gives a TSC
 * count); CUPTI then stamps every record it hands out on that clock, in its
 * units. Clock k > 0 maps back onto CUPTI's own nanoseconds through the
 * readings taken when it was registered: t = cupti0 + (x - x0) / scale,
 * with scale (units per ns) measured against CLOCK_MONOTONIC since. */
#define MAX_CLOCKS 8
typedef struct clock_map {
    CUpti_TimestampCallbackFunc fn;
    uint64_t cupti0, x0, mono0;
} clock_map;

static struct {
    int on;
    ao_cupti_fns f;
    /* qmu: the set of our buffers, the clocks (buffer callbacks may run
     * inside a flush this library makes while holding ctl) */
    pthread_mutex_t qmu;
    void **ours;
    size_t nours, capours;
    clock_map clocks[MAX_CLOCKS];
    int nclocks; /* 0: CUPTI's own clock throughout */
    /* ctl: the foreign client */
    pthread_mutex_t ctl;
    int activity_on, subscribed;
    unsigned foreign_kinds;
    int foreign_registered;
    CUpti_BuffersCallbackRequestFunc their_request;
    CUpti_BuffersCallbackCompleteFunc their_complete;
    char foreign[256];
    CUpti_SubscriberHandle sub;
    atomic_llong last_corr;
    ao_cupti_names names; /* the worker's (decode) */
    pid_t pid;            /* the process that started: at_exit only there */
} G = {.qmu = PTHREAD_MUTEX_INITIALIZER, .ctl = PTHREAD_MUTEX_INITIALIZER};

/* The other client's subscription, when attach rides on it (below). */
#define MAX_CBID 4096

static struct {
    int active;
    CUpti_SubscriberHandle h;
    CUpti_CallbackFunc cb;
    void *ud;
    uint8_t all[CUPTI_CB_DOMAIN_SIZE];
    uint8_t cbid[CUPTI_CB_DOMAIN_SIZE][MAX_CBID];
} T;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Units of clock k per nanosecond, measured since it was registered; 0
 * while that is under 200 ms (too short for 1e-5), unless `final`, when
 * any span over 1 ms will do (1 where there is none: take it for ns). */
static double clock_scale(int k, int final)
{
    const clock_map *c = &G.clocks[k - 1];
    uint64_t x = c->fn(), m = mono_ns();
    uint64_t need = final ? 1000000ull : 200000000ull;
    if (m < c->mono0 + need || x <= c->x0) return final ? 1.0 : 0.0;
    return (double)(x - c->x0) / (double)(m - c->mono0);
}

static uint64_t to_cupti_ns(int k, uint64_t x, double scale)
{
    if (k == 0) return x;
    const clock_map *c = &G.clocks[k - 1];
    return c->cupti0 + (uint64_t)((double)((int64_t)(x - c->x0)) / scale);
}

static uint64_t cupti_now(void)
{
    uint64_t t = 0;
    if (G.f.timestamp) G.f.timestamp(&t);
    return G.nclocks ? to_cupti_ns(G.nclocks, t, clock_scale(G.nclocks, 1)) : t;
}

static void grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return;
    *cap = *cap ? 2 * *cap : 64;
    if (*cap < need) *cap = need;
    *p = ao_realloc(*p, *cap * size);
}

/* ---- activity buffers ------------------------------------------------------ */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
    if (!*buffer) return;
    pthread_mutex_lock(&G.qmu);
    grow((void **)&G.ours, &G.capours, G.nours + 1, sizeof *G.ours);
    G.ours[G.nours++] = *buffer;
    pthread_mutex_unlock(&G.qmu);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                      size_t size, size_t valid)
{
    pthread_mutex_lock(&G.qmu);
    size_t i = 0;
    while (i < G.nours && G.ours[i] != buffer) i++;
    if (i == G.nours) { /* the other client's buffer: its callback's */
        CUpti_BuffersCallbackCompleteFunc theirs = G.their_complete;
        pthread_mutex_unlock(&G.qmu);
        if (theirs) theirs(ctx, stream_id, buffer, size, valid);
        return;
    }
    G.ours[i] = G.ours[--G.nours];
    int clock = G.nclocks;
    pthread_mutex_unlock(&G.qmu);
    size_t d = 0;
    if (!G.f.dropped || G.f.dropped(ctx, stream_id, &d) != CUPTI_SUCCESS) d = 0;
    ao_tracer_push(buffer, valid, clock, d);
}

/* ---- callbacks: launches and NVTX ranges ------------------------------------- */

static int64_t corr_now(void)
{
    return atomic_load_explicit(&G.last_corr, memory_order_relaxed);
}

static const char *attr_message(const nvtxEventAttributes_t *a)
{
    return a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : NULL;
}

static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data)
{
    (void)ud;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
        const CUpti_CallbackData *cb = data;
        if (cb->callbackSite != CUPTI_API_ENTER) return;
        long long id = (long long)cb->correlationId, cur = corr_now();
        while (id > cur && !atomic_compare_exchange_weak(&G.last_corr, &cur, id)) {
        }
        return;
    }
    if (domain != CUPTI_CB_DOMAIN_NVTX) return;
    const CUpti_NvtxData *nv = data;
    switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
        ao_tracer_range_push(((const nvtxRangePushA_params *)nv->functionParams)->message,
                             corr_now());
        break;
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
        ao_tracer_range_push(
            attr_message(((const nvtxRangePushEx_params *)nv->functionParams)->eventAttrib),
            corr_now());
        break;
    case CUPTI_CBID_NVTX_nvtxRangePop:
        ao_tracer_range_pop(corr_now());
        break;
    case CUPTI_CBID_NVTX_nvtxRangeStartA:
        if (nv->functionReturnValue)
            ao_tracer_range_start(((const nvtxRangeStartA_params *)nv->functionParams)->message,
                                  *(const nvtxRangeId_t *)nv->functionReturnValue, corr_now());
        break;
    case CUPTI_CBID_NVTX_nvtxRangeStartEx:
        if (nv->functionReturnValue)
            ao_tracer_range_start(
                attr_message(((const nvtxRangeStartEx_params *)nv->functionParams)->eventAttrib),
                *(const nvtxRangeId_t *)nv->functionReturnValue, corr_now());
        break;
    case CUPTI_CBID_NVTX_nvtxRangeEnd:
        ao_tracer_range_end(((const nvtxRangeEnd_params *)nv->functionParams)->id, corr_now());
        break;
    default:
        break;
    }
}

static const CUpti_CallbackId runtime_cbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
};

static const CUpti_CallbackId driver_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz,
};

/* Enable the launch and NVTX callbacks on sub (ours, or the other
 * client's that ours rides on). */
static CUptiResult enable_ours(CUpti_SubscriberHandle sub)
{
    CUptiResult r = CUPTI_SUCCESS;
    for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof runtime_cbids / sizeof *runtime_cbids; i++)
        r = G.f.enable_callback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, runtime_cbids[i]);
    for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof driver_cbids / sizeof *driver_cbids; i++)
        r = G.f.enable_callback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, driver_cbids[i]);
    if (r == CUPTI_SUCCESS) r = G.f.enable_domain(1, sub, CUPTI_CB_DOMAIN_NVTX);
    return r;
}

/* Subscribe ours, or ride on the other client's subscription (ctl held). */
static CUptiResult subscribe(void)
{
    if (!G.f.subscribe || !G.f.enable_callback || !G.f.enable_domain)
        return CUPTI_ERROR_NOT_SUPPORTED;
    if (T.active) return enable_ours(T.h);
    CUptiResult r = G.f.subscribe(&G.sub, on_callback, NULL);
    if (r != CUPTI_SUCCESS) return r;
    r = enable_ours(G.sub);
    if (r != CUPTI_SUCCESS) {
        G.f.unsubscribe(G.sub);
        return r;
    }
    G.subscribed = 1;
    return CUPTI_SUCCESS;
}

/* Register our buffers and enable our kinds (ctl held). */
static CUptiResult activity_on(void)
{
    CUptiResult r = G.f.register_callbacks(buffer_requested, buffer_completed);
    for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof kinds / sizeof *kinds; i++)
        r = G.f.enable(kinds[i]);
    if (r != CUPTI_SUCCESS) {
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) G.f.disable(kinds[i]);
        return r;
    }
    if (G.f.flush_period) G.f.flush_period(FLUSH_MS);
    G.activity_on = 1;
    return CUPTI_SUCCESS;
}

static void push_event(int on)
{
    ao_tracer_event(on, corr_now(), cupti_now());
}

/* ---- a second CUPTI client ---------------------------------------------------- */

/* ctl held. `what` names the call that showed the other client. */
static void step_aside(const char *what)
{
    if (!G.on) return;
    if (!G.foreign[0]) {
        snprintf(G.foreign, sizeof G.foreign, "%s", what);
        ao_warn("attach: another CUPTI client (%s) in pid %d: attach steps aside while it "
                "traces; the steps it cannot see are listed in its rank file",
                what, (int)getpid());
    }
    if (G.activity_on) {
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) G.f.disable(kinds[i]);
        G.f.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* our buffers come back to us */
        G.activity_on = 0;
        push_event(1);
    }
}

/* ctl held: the other client is done with activity. */
static void come_back(void)
{
    if (!G.on || G.activity_on || G.foreign_kinds) return;
    if (activity_on() == CUPTI_SUCCESS) push_event(0);
}

/* libcupti's own entry point: the next definition after this library's in
 * the global scope, else the copy loaded in a local scope (Python loads
 * PyTorch's libcupti with its extension modules, RTLD_LOCAL): the caller of a
 * cupti* function has it loaded. */
static void *real_sym(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (p) return p;
    if (G.f.lib && (p = dlsym(G.f.lib, name))) return p;
    static const char *const libs[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
    for (size_t i = 0; i < sizeof libs / sizeof *libs && !p; i++) {
        void *h = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);
        if (h) p = dlsym(h, name);
    }
    return p;
}

#define REAL(name, params)                                                                         \
    static CUptiResult(*real) params;                                                              \
    if (!real) *(void **)&real = real_sym(name);                                                   \
    if (!real) return CUPTI_ERROR_NOT_INITIALIZED

AO_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc comp)
{
    REAL("cuptiActivityRegisterCallbacks",
         (CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc));
    pthread_mutex_lock(&G.ctl);
    step_aside("cuptiActivityRegisterCallbacks");
    pthread_mutex_lock(&G.qmu);
    G.their_request = req;
    G.their_complete = comp;
    pthread_mutex_unlock(&G.qmu);
    G.foreign_registered = 1;
    CUptiResult r = real(req, comp);
    pthread_mutex_unlock(&G.ctl);
    return r;
}

AO_EXPORT CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn)
{
    REAL("cuptiActivityRegisterTimestampCallback", (CUpti_TimestampCallbackFunc));
    pthread_mutex_lock(&G.ctl);
    /* what CUPTI holds is stamped at the flush: flush it on the clock we know */
    step_aside("cuptiActivityRegisterTimestampCallback");
    uint64_t c0 = cupti_now();
    CUptiResult r = real(fn);
    if (r == CUPTI_SUCCESS && fn) {
        pthread_mutex_lock(&G.qmu);
        if (G.nclocks < MAX_CLOCKS) {
            G.clocks[G.nclocks] = (clock_map){fn, c0, fn(), mono_ns()};
            G.nclocks++;
        }
        pthread_mutex_unlock(&G.qmu);
    }
    come_back(); /* on the new clock, unless the other client traces now */
    pthread_mutex_unlock(&G.ctl);
    return r;
}

AO_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    REAL("cuptiActivityEnable", (CUpti_ActivityKind));
    pthread_mutex_lock(&G.ctl);
    step_aside("cuptiActivityEnable");
    /* it registered once and we took the callbacks back since: give them back */
    if (G.foreign_registered && G.on && !G.foreign_kinds)
        G.f.register_callbacks(G.their_request, G.their_complete);
    if ((unsigned)kind < 32) G.foreign_kinds |= 1u << kind;
    CUptiResult r = real(kind);
    pthread_mutex_unlock(&G.ctl);
    return r;
}

AO_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
    REAL("cuptiActivityDisable", (CUpti_ActivityKind));
    CUptiResult r = real(kind);
    pthread_mutex_lock(&G.ctl);
    if ((unsigned)kind < 32) G.foreign_kinds &= ~(1u << kind);
    come_back();
    pthread_mutex_unlock(&G.ctl);
    return r;
}

/* ---- one subscriber for two clients ----------------------------------------------
 * The other client subscribes with a trampoline that calls attach's callback
 * (launches, NVTX) and the other's for what it enabled; attach's callbacks
 * are enabled on the shared handle, and its disables leave attach's on. */

static int theirs(CUpti_CallbackDomain d, CUpti_CallbackId id)
{
    if ((unsigned)d >= CUPTI_CB_DOMAIN_SIZE) return 1;
    return T.all[d] || id >= MAX_CBID || T.cbid[d][id];
}

static int ours(CUpti_CallbackDomain d, CUpti_CallbackId id)
{
    const CUpti_CallbackId *ids = d == CUPTI_CB_DOMAIN_RUNTIME_API  ? runtime_cbids
                                  : d == CUPTI_CB_DOMAIN_DRIVER_API ? driver_cbids
                                                                    : NULL;
    size_t n = d == CUPTI_CB_DOMAIN_RUNTIME_API  ? sizeof runtime_cbids / sizeof *runtime_cbids
               : d == CUPTI_CB_DOMAIN_DRIVER_API ? sizeof driver_cbids / sizeof *driver_cbids
                                                 : 0;
    if (d == CUPTI_CB_DOMAIN_NVTX) return 1;
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

static void CUPTIAPI trampoline(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                const void *data)
{
    (void)ud;
    if (G.on && ours(d, id)) on_callback(NULL, d, id, data);
    if (T.cb && theirs(d, id)) T.cb(T.ud, d, id, data);
}

AO_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc cb,
                                              void *ud)
{
    REAL("cuptiSubscribe", (CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *));
    pthread_mutex_lock(&G.ctl);
    int had = G.subscribed;
    if (had) { /* CUPTI holds one: ours makes way, then rides on theirs */
        G.f.unsubscribe(G.sub);
        G.subscribed = 0;
    }
    CUptiResult r = real(sub, trampoline, NULL);
    if (r == CUPTI_SUCCESS) {
        memset(&T, 0, sizeof T);
        T.active = 1;
        T.h = *sub;
        T.cb = cb;
        T.ud = ud;
        if (G.on) enable_ours(T.h);
    } else if (had) {
        subscribe();
    }
    pthread_mutex_unlock(&G.ctl);
    return r;
}

AO_EXPORT CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
                                                   CUpti_CallbackDomain d, CUpti_CallbackId id)
{
    REAL("cuptiEnableCallback",
         (uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId));
    if (!T.active || sub != T.h) return real(enable, sub, d, id);
    pthread_mutex_lock(&G.ctl);
    if ((unsigned)d < CUPTI_CB_DOMAIN_SIZE && id < MAX_CBID) T.cbid[d][id] = enable != 0;
    CUptiResult r = real(enable || (G.on && ours(d, id)), sub, d, id);
    pthread_mutex_unlock(&G.ctl);
    return r;
}

AO_EXPORT CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle sub,
                                                 CUpti_CallbackDomain d)
{
    REAL("cuptiEnableDomain", (uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain));
    if (!T.active || sub != T.h) return real(enable, sub, d);
    pthread_mutex_lock(&G.ctl);
    if ((unsigned)d < CUPTI_CB_DOMAIN_SIZE) T.all[d] = enable != 0;
    CUptiResult r = real(enable, sub, d);
    if (!enable && G.on) enable_ours(sub); /* what attach needs stays on */
    pthread_mutex_unlock(&G.ctl);
    return r;
}

AO_EXPORT CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle sub)
{
    REAL("cuptiEnableAllDomains", (uint32_t, CUpti_SubscriberHandle));
    if (!T.active || sub != T.h) return real(enable, sub);
    pthread_mutex_lock(&G.ctl);
    memset(T.all, enable != 0, sizeof T.all);
    CUptiResult r = real(enable, sub);
    if (!enable && G.on) enable_ours(sub);
    pthread_mutex_unlock(&G.ctl);
    return r;
}

AO_EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle sub)
{
    REAL("cuptiUnsubscribe", (CUpti_SubscriberHandle));
    pthread_mutex_lock(&G.ctl);
    int shared = T.active && sub == T.h;
    CUptiResult r = real(sub);
    if (shared) {
        T.active = 0;
        T.cb = NULL;
        if (G.on) subscribe(); /* ours alone again */
    }
    pthread_mutex_unlock(&G.ctl);
    return r;
}

AO_EXPORT CUptiResult CUPTIAPI cuptiFinalize(void)
{
    REAL("cuptiFinalize", (void));
    pthread_mutex_lock(&G.ctl);
    step_aside("cuptiFinalize");
    if (G.subscribed) {
        G.f.unsubscribe(G.sub);
        G.subscribed = 0;
    }
    CUptiResult r = real();
    /* CUPTI starts afresh at its next call, every subscription gone: take
     * activity and callbacks up again */
    T.active = 0;
    T.cb = NULL;
    G.foreign_kinds = 0;
    G.foreign_registered = 0;
    if (G.on) {
        come_back();
        subscribe();
    }
    pthread_mutex_unlock(&G.ctl);
    return r;
}

/* ---- the tracer's decode (on its worker) ------------------------------------------ */

static int decode(void *buf, size_t valid, int k, int final)
{
    double scale = k ? clock_scale(k, final) : 1.0;
    if (scale == 0) return 0; /* its clock is not measured yet: next time */
    CUpti_Activity *a = NULL;
    while (G.f.next_record(buf, valid, &a) == CUPTI_SUCCESS) {
        ao_cupti_record r;
        if (!ao_cupti_decode(a, &G.names, &r)) continue;
        ao_attach_info_used_device(ao_tracer_info(), ao_cupti_device(a));
        r.start_ns = to_cupti_ns(k, r.start_ns, scale);
        r.end_ns = to_cupti_ns(k, r.end_ns, scale);
        ao_tracer_add(&r);
    }
    free(buf);
    return 1;
}

/* ---- start and end ------------------------------------------------------------- */

/* The devices and the driver through the process's own libcuda (already
 * loaded: CUDA called us), without touching a context. */
static void note_devices(ao_attach_info *in)
{
    typedef int (*count_fn)(int *);
    typedef int (*get_fn)(int *, int);
    typedef int (*name_fn)(char *, int, int);
    typedef int (*ver_fn)(int *);
    int driver = 0;
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (cu) {
        count_fn count = (count_fn)dlsym(cu, "cuDeviceGetCount");
        get_fn get = (get_fn)dlsym(cu, "cuDeviceGet");
        name_fn name = (name_fn)dlsym(cu, "cuDeviceGetName");
        ver_fn ver = (ver_fn)dlsym(cu, "cuDriverGetVersion");
        int n = 0;
        if (ver) ver(&driver);
        if (count && get && name && count(&n) == 0)
            for (int i = 0; i < n; i++) {
                int dev;
                char buf[128] = "";
                if (get(&dev, i) == 0 && name(buf, sizeof buf, dev) == 0)
                    ao_attach_info_device(in, buf);
            }
        dlclose(cu);
    }
    char v[32];
    snprintf(v, sizeof v, "%d.%d", driver / 1000, driver % 1000 / 10);
    ao_attach_info_version(in, "cuda_driver", v);
}

static void at_exit(void)
{
    /* a child forked after CUDA started (a data loader's worker) has no
     * worker thread and no business with the parent's CUPTI state */
    if (!G.on || getpid() != G.pid) return;
    pthread_mutex_lock(&G.ctl);
    if (G.activity_on) {
        G.f.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) G.f.disable(kinds[i]);
        G.f.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    G.on = 0; /* from here the cupti* stand-ins only forward */
    pthread_mutex_unlock(&G.ctl);
    ao_attach_info *in = ao_tracer_info();
    note_devices(in);
    snprintf(in->foreign, sizeof in->foreign, "%s", G.foreign);
    ao_tracer_finish();
}

static const ao_tracer_backend backend = {cupti_now, decode, NULL};

static int start(void)
{
    if (!ao_tracer_dir()) return 0; /* injected by something else than aorta attach */
    const char *why = NULL;
    if (ao_cupti_fns_load(&G.f, &why) != 0) {
        ao_warn("attach: CUPTI cannot be used in pid %d (%s); this process runs untraced",
                (int)getpid(), why);
        return 0;
    }
    if (ao_tracer_open(&backend) != 0) return 0;
    ao_attach_info *in = ao_tracer_info();
    char v[32];
    snprintf(v, sizeof v, "%u", G.f.version);
    ao_attach_info_version(in, "cupti_api", v);
    in->foreign_key = "other_cupti_client";
    /* NVTX reaches CUPTI only through NVTX's own injection variable */
    if (G.f.path[0]) setenv("NVTX_INJECTION64_PATH", G.f.path, 0);

    pthread_mutex_lock(&G.ctl);
    G.on = 1;
    CUptiResult r = subscribe();
    if (r != CUPTI_SUCCESS) { /* a client this library did not see (not preloaded) */
        snprintf(G.foreign, sizeof G.foreign, "cuptiSubscribe: %s", ao_cupti_result_text(&G.f, r));
        ao_warn("attach: no CUPTI callbacks in pid %d (%s: another CUPTI client?); steps come "
                "from kernels or windows, not NVTX",
                (int)getpid(), ao_cupti_result_text(&G.f, r));
    }
    if (G.foreign_kinds) step_aside("cuptiActivityEnable before CUDA started");
    r = G.foreign_kinds ? CUPTI_ERROR_NOT_READY : activity_on();
    pthread_mutex_unlock(&G.ctl);
    if (r != CUPTI_SUCCESS && !G.foreign_kinds) {
        ao_warn("attach: CUPTI refused activity tracing in pid %d (%s); this process runs "
                "untraced",
                (int)getpid(), ao_cupti_result_text(&G.f, r));
        pthread_mutex_lock(&G.ctl);
        G.on = 0;
        if (G.subscribed) G.f.unsubscribe(G.sub);
        G.subscribed = 0;
        pthread_mutex_unlock(&G.ctl);
        ao_tracer_abandon();
        return 0;
    }
    if (ao_tracer_run() != 0) {
        pthread_mutex_lock(&G.ctl);
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) G.f.disable(kinds[i]);
        G.activity_on = 0;
        G.on = 0;
        pthread_mutex_unlock(&G.ctl);
        ao_tracer_abandon();
        return 0;
    }
    G.pid = getpid();
    atexit(at_exit);
    return 1;
}

/* CUDA's entry point (CUDA_INJECTION64_PATH). The job runs whatever this
 * returns. */
AO_EXPORT int InitializeInjection(void);
AO_EXPORT int InitializeInjection(void)
{
    static int once;
    if (once++) return 1;
    start();
    return 1;
}
