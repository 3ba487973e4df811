/* A stand-in for rocprofiler-sdk, to run aorta attach's tool
 * (libaorta_attach_rocm.so) on a machine without ROCm: it exports the SDK
 * functions the tool calls (typed by the SDK's own headers), loads the
 * first library in ROCP_TOOL_LIBRARIES and calls rocprofiler_configure as
 * the SDK does, then plays a job on a virtual clock: kernel symbols, roctx
 * step ranges, kernel dispatch and memory copy records handed through the
 * tool's buffer callback, and the SDK's finalize at the end.
 *
 *     fake_rocprof STEPS
 * Each step (a range "step"): a GEMM [0,10) ms on one queue, an RCCL
 * all-reduce [6,14) ms on another, a host-to-device copy [2,4) ms; steps
 * 20 ms apart. Prints ROCP_TOOL_LIBRARIES' entries to stderr. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rocprofiler-sdk/registration.h>
#include <rocprofiler-sdk/rocprofiler.h>

#define MS     1000000ull
#define MAXREC 4096

static struct {
    pthread_mutex_t mu;
    rocprofiler_timestamp_t now;
    uint64_t corr;
    rocprofiler_buffer_tracing_cb_t buffer_cb;
    void *buffer_data;
    rocprofiler_callback_tracing_cb_t code_cb, marker_cb;
    int started, kinds;
    rocprofiler_buffer_tracing_kernel_dispatch_record_t kernels[MAXREC];
    rocprofiler_buffer_tracing_memory_copy_record_t copies[MAXREC];
    size_t nkernels, ncopies;
} F = {.mu = PTHREAD_MUTEX_INITIALIZER, .now = 1000 * MS};

/* ---- the SDK's functions the tool looks up ---------------------------------------- */

rocprofiler_status_t rocprofiler_create_context(rocprofiler_context_id_t *id)
{
    id->handle = 1;
    return ROCPROFILER_STATUS_SUCCESS;
}

rocprofiler_status_t rocprofiler_start_context(rocprofiler_context_id_t id)
{
    (void)id;
    F.started = 1;
    return ROCPROFILER_STATUS_SUCCESS;
}

rocprofiler_status_t rocprofiler_stop_context(rocprofiler_context_id_t id)
{
    (void)id;
    F.started = 0;
    return ROCPROFILER_STATUS_SUCCESS;
}

rocprofiler_status_t rocprofiler_create_buffer(rocprofiler_context_id_t ctx, size_t size,
                                               size_t watermark, rocprofiler_buffer_policy_t policy,
                                               rocprofiler_buffer_tracing_cb_t cb, void *data,
                                               rocprofiler_buffer_id_t *id)
{
    (void)ctx;
    (void)size;
    (void)watermark;
    (void)policy;
    F.buffer_cb = cb;
    F.buffer_data = data;
    id->handle = 2;
    return ROCPROFILER_STATUS_SUCCESS;
}

/* Hands every pending record to the tool's callback, as the SDK's flush does
 * (it waits for the callback). */
rocprofiler_status_t rocprofiler_flush_buffer(rocprofiler_buffer_id_t id)
{
    rocprofiler_context_id_t ctx = {1};
    pthread_mutex_lock(&F.mu);
    size_t n = F.nkernels + F.ncopies, k = 0;
    rocprofiler_record_header_t *h = calloc(n ? n : 1, sizeof *h);
    rocprofiler_record_header_t **p = calloc(n ? n : 1, sizeof *p);
    for (size_t i = 0; i < F.nkernels; i++, k++) {
        h[k].category = ROCPROFILER_BUFFER_CATEGORY_TRACING;
        h[k].kind = ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH;
        h[k].payload = &F.kernels[i];
        p[k] = &h[k];
    }
    for (size_t i = 0; i < F.ncopies; i++, k++) {
        h[k].category = ROCPROFILER_BUFFER_CATEGORY_TRACING;
        h[k].kind = ROCPROFILER_BUFFER_TRACING_MEMORY_COPY;
        h[k].payload = &F.copies[i];
        p[k] = &h[k];
    }
    if (n && F.buffer_cb) F.buffer_cb(ctx, id, p, n, F.buffer_data, 0);
    F.nkernels = F.ncopies = 0;
    pthread_mutex_unlock(&F.mu);
    free(h);
    free(p);
    return ROCPROFILER_STATUS_SUCCESS;
}

rocprofiler_status_t rocprofiler_configure_buffer_tracing_service(
    rocprofiler_context_id_t ctx, rocprofiler_buffer_tracing_kind_t kind,
    const rocprofiler_tracing_operation_t *ops, size_t nops, rocprofiler_buffer_id_t buf)
{
    (void)ctx;
    (void)ops;
    (void)nops;
    (void)buf;
    F.kinds |= 1 << kind;
    return ROCPROFILER_STATUS_SUCCESS;
}

rocprofiler_status_t rocprofiler_configure_callback_tracing_service(
    rocprofiler_context_id_t ctx, rocprofiler_callback_tracing_kind_t kind,
    const rocprofiler_tracing_operation_t *ops, size_t nops, rocprofiler_callback_tracing_cb_t cb,
    void *data)
{
    (void)ctx;
    (void)ops;
    (void)nops;
    (void)data;
    if (kind == ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT) F.code_cb = cb;
    if (kind == ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API) F.marker_cb = cb;
    return ROCPROFILER_STATUS_SUCCESS;
}

rocprofiler_status_t rocprofiler_create_callback_thread(rocprofiler_callback_thread_t *t)
{
    t->handle = 3;
    return ROCPROFILER_STATUS_SUCCESS;
}

rocprofiler_status_t rocprofiler_assign_callback_thread(rocprofiler_buffer_id_t b,
                                                        rocprofiler_callback_thread_t t)
{
    (void)b;
    (void)t;
    return ROCPROFILER_STATUS_SUCCESS;
}

rocprofiler_status_t rocprofiler_get_timestamp(rocprofiler_timestamp_t *ts)
{
    pthread_mutex_lock(&F.mu);
    *ts = F.now;
    pthread_mutex_unlock(&F.mu);
    return ROCPROFILER_STATUS_SUCCESS;
}

rocprofiler_status_t rocprofiler_query_available_agents(rocprofiler_agent_version_t version,
                                                        rocprofiler_query_available_agents_cb_t cb,
                                                        size_t size, void *data)
{
    (void)size;
    static rocprofiler_agent_v0_t cpu, gpu;
    cpu.type = ROCPROFILER_AGENT_TYPE_CPU;
    cpu.name = cpu.product_name = "a CPU";
    gpu.type = ROCPROFILER_AGENT_TYPE_GPU;
    gpu.name = "gfx942";
    gpu.product_name = "a fake MI300X";
    const void *agents[] = {&cpu, &gpu};
    return cb(version, agents, 2, data);
}

const char *rocprofiler_get_status_string(rocprofiler_status_t st)
{
    return st == ROCPROFILER_STATUS_SUCCESS ? "success" : "error";
}

rocprofiler_status_t rocprofiler_get_version(uint32_t *major, uint32_t *minor, uint32_t *patch)
{
    *major = ROCPROFILER_VERSION_MAJOR;
    *minor = ROCPROFILER_VERSION_MINOR;
    *patch = ROCPROFILER_VERSION_PATCH;
    return ROCPROFILER_STATUS_SUCCESS;
}

/* ---- the job ------------------------------------------------------------------------ */

static rocprofiler_callback_tracing_record_t callback_record(rocprofiler_callback_tracing_kind_t k,
                                                             int op, int phase, void *payload)
{
    rocprofiler_callback_tracing_record_t r;
    memset(&r, 0, sizeof r);
    r.kind = k;
    r.operation = op;
    r.phase = phase;
    r.payload = payload;
    pthread_mutex_lock(&F.mu);
    r.correlation_id.internal = ++F.corr;
    pthread_mutex_unlock(&F.mu);
    return r;
}

static void marker(int op, const char *message)
{
    rocprofiler_callback_tracing_marker_api_data_t d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.args.roctxRangePushA.message = message;
    rocprofiler_user_data_t user = {0};
    rocprofiler_callback_tracing_record_t r = callback_record(
        ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API, op, ROCPROFILER_CALLBACK_PHASE_ENTER, &d);
    if (F.marker_cb) F.marker_cb(r, &user, NULL);
    r.phase = ROCPROFILER_CALLBACK_PHASE_EXIT;
    if (F.marker_cb) F.marker_cb(r, &user, NULL);
}

static void kernel_symbol(uint64_t id, const char *name)
{
    rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.kernel_id = id;
    d.kernel_name = name;
    rocprofiler_user_data_t user = {0};
    rocprofiler_callback_tracing_record_t r = callback_record(
        ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT,
        ROCPROFILER_CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER, ROCPROFILER_CALLBACK_PHASE_LOAD, &d);
    if (F.code_cb) F.code_cb(r, &user, NULL);
}

static void dispatch(uint64_t kernel_id, uint64_t queue, uint64_t t0, uint64_t t1)
{
    pthread_mutex_lock(&F.mu);
    rocprofiler_buffer_tracing_kernel_dispatch_record_t *k = &F.kernels[F.nkernels++];
    memset(k, 0, sizeof *k);
    k->size = sizeof *k;
    k->kind = ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH;
    k->correlation_id.internal = ++F.corr;
    k->start_timestamp = t0;
    k->end_timestamp = t1;
    k->dispatch_info.kernel_id = kernel_id;
    k->dispatch_info.queue_id.handle = queue;
    pthread_mutex_unlock(&F.mu);
}

static void memcpy_h2d(uint64_t t0, uint64_t t1, uint64_t bytes)
{
    pthread_mutex_lock(&F.mu);
    rocprofiler_buffer_tracing_memory_copy_record_t *c = &F.copies[F.ncopies++];
    memset(c, 0, sizeof *c);
    c->size = sizeof *c;
    c->kind = ROCPROFILER_BUFFER_TRACING_MEMORY_COPY;
    c->operation = ROCPROFILER_MEMORY_COPY_HOST_TO_DEVICE;
    c->correlation_id.internal = ++F.corr;
    c->start_timestamp = t0;
    c->end_timestamp = t1;
    c->bytes = bytes;
    pthread_mutex_unlock(&F.mu);
}

static int fail(const char *what)
{
    fprintf(stderr, "fake_rocprof: %s\n", what);
    return 1;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 3;
    if (steps < 0 || steps > MAXREC / 4) return fail("bad step count");
    const char *libs = getenv("ROCP_TOOL_LIBRARIES");
    if (!libs || !*libs) return fail("no ROCP_TOOL_LIBRARIES");
    fprintf(stderr, "fake_rocprof: ROCP_TOOL_LIBRARIES=%s\n", libs);
    char first[4096];
    snprintf(first, sizeof first, "%s", libs);
    first[strcspn(first, ":")] = '\0';
    void *tool = dlopen(first, RTLD_NOW | RTLD_LOCAL);
    if (!tool) return fail(dlerror());
    rocprofiler_configure_func_t configure;
    *(void **)&configure = dlsym(tool, "rocprofiler_configure");
    if (!configure) return fail("the tool has no rocprofiler_configure");
    rocprofiler_client_id_t id = {NULL, 1};
    rocprofiler_tool_configure_result_t *cfg = configure(ROCPROFILER_VERSION, "fake", 0, &id);
    if (!cfg) {
        fprintf(stderr, "fake_rocprof: the tool declined\n");
        return 0;
    }
    if (cfg->initialize(NULL, cfg->tool_data) != 0 || !F.started)
        fprintf(stderr, "fake_rocprof: the tool did not start\n");
    if ((F.kinds & (1 << ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH)) == 0 ||
        (F.kinds & (1 << ROCPROFILER_BUFFER_TRACING_MEMORY_COPY)) == 0)
        fprintf(stderr, "fake_rocprof: the tool traces no dispatches or copies\n");

    kernel_symbol(11, "Cijk_Alik_Bljk_SB_MT128x128x16");
    kernel_symbol(12, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    for (int i = 0; i < steps; i++) {
        uint64_t t = F.now + (uint64_t)i * 20 * MS;
        marker(ROCPROFILER_MARKER_CORE_API_ID_roctxRangePushA, "step");
        dispatch(11, 0x1000, t, t + 10 * MS);
        dispatch(12, 0x2000, t + 6 * MS, t + 14 * MS);
        memcpy_h2d(t + 2 * MS, t + 4 * MS, 1 << 20);
        marker(ROCPROFILER_MARKER_CORE_API_ID_roctxRangePop, NULL);
    }
    pthread_mutex_lock(&F.mu);
    F.now += (uint64_t)steps * 20 * MS;
    pthread_mutex_unlock(&F.mu);
    if (cfg->finalize) cfg->finalize(cfg->tool_data);
    return 0;
}
