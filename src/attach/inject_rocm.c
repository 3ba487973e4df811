/* The rocprofiler-sdk tool of aorta attach (attach/attach.h), built as
 * libaorta_attach_rocm.so where the SDK's headers are (DESIGN §15): the SDK
 * loads it from ROCP_TOOL_LIBRARIES when a ROCm runtime starts and calls
 * rocprofiler_configure. This file is the SDK half; the queue, steps and
 * files are attach/tracer.h's, shared with the CUPTI library.
 *
 * One context of its own: buffered tracing of kernel dispatches and memory
 * copies into one buffer whose callback runs on a callback thread created
 * for it (never an application thread); the callback copies the records out
 * (attach/record_rocm.h) and hands them to the tracer's worker, which
 * decodes them. Callback tracing of code objects names the kernels; of the
 * roctx core API gives the step ranges. The SDK's functions are looked up
 * at run time in the process's librocprofiler-sdk (it is loaded: it called
 * us), so the library links against nothing of ROCm's. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rocprofiler-sdk/registration.h>
#include <rocprofiler-sdk/rocprofiler.h>

#include "attach/record_rocm.h"
#include "attach/tracer.h"
#include "core/error.h"

#define AO_EXPORT    __attribute__((visibility("default")))
#define BUFFER_BYTES (4u << 20)
#define WATERMARK    (3u << 20)

/* The SDK's entry points this tool calls, typed by its headers. */
#define SDK_FNS(X)                                                                                 \
    X(rocprofiler_create_context)                                                                  \
    X(rocprofiler_start_context)                                                                   \
    X(rocprofiler_stop_context)                                                                    \
    X(rocprofiler_create_buffer)                                                                   \
    X(rocprofiler_flush_buffer)                                                                    \
    X(rocprofiler_configure_buffer_tracing_service)                                                \
    X(rocprofiler_configure_callback_tracing_service)                                              \
    X(rocprofiler_create_callback_thread)                                                          \
    X(rocprofiler_assign_callback_thread)                                                          \
    X(rocprofiler_get_timestamp)                                                                   \
    X(rocprofiler_query_available_agents)                                                          \
    X(rocprofiler_get_status_string)                                                               \
    X(rocprofiler_get_version)

static struct {
#define X(f) __typeof__(&f) f;
    SDK_FNS(X)
#undef X
} S;

static struct {
    atomic_int on;     /* tracing: the worker's flushes and finalize act */
    pid_t pid;         /* the process that started it */
    uint32_t priority; /* tools the SDK configured before this one */
    rocprofiler_context_id_t ctx;
    rocprofiler_buffer_id_t buf;
    /* mu: the kernel names (code object callbacks, the worker's decode) */
    pthread_mutex_t mu;
    ao_rocm_kernels kernels;
    ao_rocm_queues queues; /* the worker's */
} R = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The SDK's functions from the process's librocprofiler-sdk; -1 with *why. */
static int load_sdk(const char **why)
{
    void *lib = NULL;
    static const char *const libs[] = {"librocprofiler-sdk.so.0", "librocprofiler-sdk.so"};
    for (size_t i = 0; i < sizeof libs / sizeof *libs && !lib; i++)
        lib = dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD);
#define X(f)                                                                                       \
    if (!(*(void **)&S.f = dlsym(lib ? lib : RTLD_DEFAULT, #f))) {                                 \
        *why = "no " #f " in the process (librocprofiler-sdk not loaded?)";                        \
        return -1;                                                                                 \
    }
    SDK_FNS(X)
#undef X
    return 0;
}

static uint64_t sdk_now(void)
{
    rocprofiler_timestamp_t t = 0;
    S.rocprofiler_get_timestamp(&t);
    return t;
}

/* ---- records: the SDK's callback thread, then the tracer's worker ---------------- */

static void on_buffer(rocprofiler_context_id_t ctx, rocprofiler_buffer_id_t buf,
                      rocprofiler_record_header_t **headers, size_t n, void *data, uint64_t dropped)
{
    (void)ctx;
    (void)buf;
    (void)data;
    ao_rocm_activity *a = n ? malloc(n * sizeof *a) : NULL;
    size_t k = a ? ao_rocm_copy(headers, n, a) : 0;
    if (!a && n) dropped += n; /* no memory: counted, the job goes on */
    if (!k) {
        free(a);
        a = NULL;
    }
    if (k || dropped) ao_tracer_push(a, k, 0, (size_t)dropped);
}

static int decode(void *buf, size_t valid, int tag, int final)
{
    (void)tag;
    (void) final;
    const ao_rocm_activity *a = buf;
    for (size_t i = 0; i < valid; i++) {
        ao_cupti_record r;
        pthread_mutex_lock(&R.mu);
        int ok = ao_rocm_decode(&a[i], &R.kernels, &R.queues, &r);
        pthread_mutex_unlock(&R.mu);
        if (ok) ao_tracer_add(&r); /* names stay in R.kernels until exit */
    }
    free(buf);
    return 1;
}

/* Live steps need records while the job runs, not only at the watermark. */
static void tick(void)
{
    if (R.on) S.rocprofiler_flush_buffer(R.buf);
}

static const ao_tracer_backend backend = {sdk_now, decode, tick};

/* ---- callbacks on the application's threads ------------------------------------- */

static void on_code_object(rocprofiler_callback_tracing_record_t rec, rocprofiler_user_data_t *user,
                           void *data)
{
    (void)user;
    (void)data;
    if (rec.kind != ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT ||
        rec.operation != ROCPROFILER_CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER ||
        rec.phase != ROCPROFILER_CALLBACK_PHASE_LOAD)
        return;
    const rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t *k = rec.payload;
    pthread_mutex_lock(&R.mu);
    ao_rocm_kernels_add(&R.kernels, k->kernel_id, k->kernel_name);
    pthread_mutex_unlock(&R.mu);
}

/* A roctx call's correlation id comes from the counter every traced call and
 * dispatch draws from: the kernels a range launched lie between its push's
 * and its pop's ids. */
static void on_marker(rocprofiler_callback_tracing_record_t rec, rocprofiler_user_data_t *user,
                      void *data)
{
    (void)user;
    (void)data;
    if (rec.kind != ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API) return;
    const rocprofiler_callback_tracing_marker_api_data_t *m = rec.payload;
    int64_t corr = (int64_t)rec.correlation_id.internal;
    int enter = rec.phase == ROCPROFILER_CALLBACK_PHASE_ENTER;
    switch (rec.operation) {
    case ROCPROFILER_MARKER_CORE_API_ID_roctxRangePushA:
        if (enter) ao_tracer_range_push(m->args.roctxRangePushA.message, corr);
        break;
    case ROCPROFILER_MARKER_CORE_API_ID_roctxRangePop:
        if (enter) ao_tracer_range_pop(corr);
        break;
    case ROCPROFILER_MARKER_CORE_API_ID_roctxRangeStartA: /* its id is its return value */
        if (!enter)
            ao_tracer_range_start(m->args.roctxRangeStartA.message,
                                  m->retval.roctx_range_id_t_retval, corr);
        break;
    case ROCPROFILER_MARKER_CORE_API_ID_roctxRangeStop:
        if (enter) ao_tracer_range_end(m->args.roctxRangeStop.id, corr);
        break;
    default:
        break;
    }
}

/* ---- start and end --------------------------------------------------------------- */

static rocprofiler_status_t on_agents(rocprofiler_agent_version_t version, const void **agents,
                                      size_t n, void *data)
{
    ao_attach_info *in = data;
    if (version != ROCPROFILER_AGENT_INFO_VERSION_0) return ROCPROFILER_STATUS_SUCCESS;
    for (size_t i = 0; i < n; i++) {
        const rocprofiler_agent_v0_t *a = agents[i];
        if (a->type != ROCPROFILER_AGENT_TYPE_GPU) continue;
        char name[128];
        snprintf(name, sizeof name, "%s (%s)", a->product_name ? a->product_name : "",
                 a->name ? a->name : "");
        ao_attach_info_device(in, name);
    }
    return ROCPROFILER_STATUS_SUCCESS;
}

static const char *status_text(rocprofiler_status_t st)
{
    const char *s = S.rocprofiler_get_status_string ? S.rocprofiler_get_status_string(st) : NULL;
    return s ? s : "unknown status";
}

/* Every step of the setup; the first failure's call and status in *what. */
static rocprofiler_status_t setup(const char **what)
{
    static const rocprofiler_tracing_operation_t marker_ops[] = {
        ROCPROFILER_MARKER_CORE_API_ID_roctxRangePushA,
        ROCPROFILER_MARKER_CORE_API_ID_roctxRangePop,
        ROCPROFILER_MARKER_CORE_API_ID_roctxRangeStartA,
        ROCPROFILER_MARKER_CORE_API_ID_roctxRangeStop};
    static const rocprofiler_tracing_operation_t symbol_ops[] = {
        ROCPROFILER_CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER};
    rocprofiler_status_t st;
#define TRY(call)                                                                                  \
    if ((st = (call)) != ROCPROFILER_STATUS_SUCCESS) {                                             \
        *what = #call;                                                                             \
        return st;                                                                                 \
    }
    TRY(S.rocprofiler_create_context(&R.ctx));
    TRY(S.rocprofiler_configure_callback_tracing_service(
        R.ctx, ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT, symbol_ops,
        sizeof symbol_ops / sizeof *symbol_ops, on_code_object, NULL));
    TRY(S.rocprofiler_create_buffer(R.ctx, BUFFER_BYTES, WATERMARK,
                                    ROCPROFILER_BUFFER_POLICY_LOSSLESS, on_buffer, NULL, &R.buf));
    TRY(S.rocprofiler_configure_buffer_tracing_service(
        R.ctx, ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH, NULL, 0, R.buf));
    TRY(S.rocprofiler_configure_buffer_tracing_service(
        R.ctx, ROCPROFILER_BUFFER_TRACING_MEMORY_COPY, NULL, 0, R.buf));
    rocprofiler_callback_thread_t thr;
    TRY(S.rocprofiler_create_callback_thread(&thr));
    TRY(S.rocprofiler_assign_callback_thread(R.buf, thr));
#undef TRY
    /* without roctx ranges steps come from kernels or windows */
    st = S.rocprofiler_configure_callback_tracing_service(
        R.ctx, ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API, marker_ops,
        sizeof marker_ops / sizeof *marker_ops, on_marker, NULL);
    if (st != ROCPROFILER_STATUS_SUCCESS)
        ao_warn("attach: no roctx callbacks in pid %d (%s); steps come from kernels or windows",
                (int)getpid(), status_text(st));
    *what = "rocprofiler_start_context";
    return S.rocprofiler_start_context(R.ctx);
}

static int tool_init(rocprofiler_client_finalize_t fini, void *data)
{
    (void)fini;
    (void)data;
    const char *why = NULL;
    if (load_sdk(&why) != 0) {
        ao_warn("attach: rocprofiler-sdk cannot be used in pid %d (%s); this process runs "
                "untraced",
                (int)getpid(), why);
        return -1;
    }
    if (ao_tracer_open(&backend) != 0) return -1;
    ao_attach_info *in = ao_tracer_info();
    uint32_t v[3] = {0, 0, 0};
    S.rocprofiler_get_version(&v[0], &v[1], &v[2]);
    char text[64];
    snprintf(text, sizeof text, "%u.%u.%u", v[0], v[1], v[2]);
    ao_attach_info_version(in, "rocprofiler_sdk", text);
    ao_attach_info_version(in, "rocprofiler_sdk_built", ROCPROFILER_VERSION_STRING);
    in->foreign_key = "other_rocprofiler_tools";
    if (R.priority)
        snprintf(in->foreign, sizeof in->foreign,
                 "%u tool(s) configured before attach, each with its own context", R.priority);
    S.rocprofiler_query_available_agents(ROCPROFILER_AGENT_INFO_VERSION_0, on_agents,
                                         sizeof(rocprofiler_agent_v0_t), in);
    const char *what = "";
    rocprofiler_status_t st = setup(&what);
    if (st != ROCPROFILER_STATUS_SUCCESS) {
        ao_warn("attach: rocprofiler-sdk refused tracing in pid %d (%s: %s); this process runs "
                "untraced",
                (int)getpid(), what, status_text(st));
        if (R.ctx.handle) S.rocprofiler_stop_context(R.ctx);
        ao_tracer_abandon();
        return -1;
    }
    if (ao_tracer_run() != 0) {
        S.rocprofiler_stop_context(R.ctx);
        ao_tracer_abandon();
        return -1;
    }
    R.pid = getpid();
    R.on = 1;
    return 0;
}

/* The SDK's end of the tool (its atexit, or an explicit finalize). */
static void tool_fini(void *data)
{
    (void)data;
    /* a child forked since (a data loader's worker) leaves the parent's
     * context alone */
    if (!R.on || getpid() != R.pid) return;
    S.rocprofiler_flush_buffer(R.buf); /* waits for the callback */
    S.rocprofiler_stop_context(R.ctx);
    S.rocprofiler_flush_buffer(R.buf);
    R.on = 0;
    ao_tracer_finish();
}

AO_EXPORT rocprofiler_tool_configure_result_t *rocprofiler_configure(uint32_t version,
                                                                     const char *runtime_version,
                                                                     uint32_t priority,
                                                                     rocprofiler_client_id_t *id)
{
    (void)version;
    (void)runtime_version;
    if (!ao_tracer_dir()) return NULL; /* loaded by something else than aorta attach */
    static rocprofiler_tool_configure_result_t cfg = {sizeof cfg, tool_init, tool_fini, NULL};
    id->name = "aorta attach";
    R.priority = priority;
    return &cfg;
}
