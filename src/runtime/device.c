/* The device API's dispatch layer and its backend-independent helpers.
 *
 * Every backend device, stream and event begins with `struct ao_device_base`,
 * so each call below finds its backend's ops through the object it is given;
 * nothing here keeps state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/plugin.h"
#include "runtime/device.h"

/* ---- dtypes -------------------------------------------------------------- */

static const struct {
    const char *name;    /* nccl-tests' name, the one we print */
    const char *aliases; /* the config's and common short names, space-separated */
    size_t size;
} dtype_table[AO_NDTYPES] = {
    [AO_F32] = {"float", "fp32 f32 float32", 4},
    [AO_F16] = {"half", "fp16 f16 float16", 2},
    [AO_BF16] = {"bfloat16", "bf16", 2},
    [AO_F64] = {"double", "fp64 f64 float64", 8},
    [AO_I32] = {"int32", "i32 int", 4},
    [AO_I8] = {"int8", "i8 char", 1},
    [AO_U8] = {"uint8", "u8", 1},
    [AO_I64] = {"int64", "i64", 8},
    [AO_U32] = {"uint32", "u32", 4},
    [AO_U64] = {"uint64", "u64", 8},
};

size_t ao_dtype_size(ao_dtype t)
{
    return (unsigned)t < AO_NDTYPES ? dtype_table[t].size : 0;
}

const char *ao_dtype_name(ao_dtype t)
{
    return (unsigned)t < AO_NDTYPES ? dtype_table[t].name : "unknown";
}

static int word_in_list(const char *s, const char *list)
{
    size_t n = strlen(s);
    for (const char *p = list; *p;) {
        size_t w = strcspn(p, " ");
        if (w == n && strncasecmp(p, s, n) == 0) return 1;
        p += w;
        while (*p == ' ') p++;
    }
    return 0;
}

int ao_dtype_parse(const char *s, ao_dtype *out)
{
    if (!s || !*s) return -1;
    for (int t = 0; t < AO_NDTYPES; t++) {
        if (strcasecmp(s, dtype_table[t].name) == 0 || word_in_list(s, dtype_table[t].aliases)) {
            *out = (ao_dtype)t;
            return 0;
        }
    }
    return -1;
}

/* ---- backends ------------------------------------------------------------ */

/* The backends of this build, GPUs first. A GPU backend's ops are in its
 * plugin, libaorta_<name>.so (core/plugin.h), loaded when first asked for,
 * so commands that never open a device never load a GPU runtime. */
static const char *const backends[] = {
#ifdef AO_GPU_PLUGIN
    AO_GPU_PLUGIN,
#endif
    "cpu",
};
enum { NBACKENDS = sizeof backends / sizeof backends[0] };

/* quiet: a probe (auto, --version), which says nothing when it cannot load */
static const struct ao_device_ops *backend_ops(const char *name, int quiet)
{
    if (strcmp(name, ao_cpu_device_ops.name) == 0) return &ao_cpu_device_ops;
    return ao_plugin_sym(name, "ao_cuda_device_ops", quiet); /* the GPU plugin's (plugin.h) */
}

int ao_device_backend_count(void)
{
    return NBACKENDS;
}

const char *ao_device_backend_name(int i)
{
    return i >= 0 && i < NBACKENDS ? backends[i] : NULL;
}

void ao_device_backend_version(int i, char *buf, size_t n)
{
    if (n == 0) return;
    buf[0] = '\0';
    if (i < 0 || i >= NBACKENDS) return;
    const struct ao_device_ops *ops = backend_ops(backends[i], 1);
    if (ops)
        ops->version(buf, n);
    else
        snprintf(buf, n, "cannot load: %s", ao_plugin_why(backends[i]));
}

static int known_backend(const char *name)
{
    for (int i = 0; i < NBACKENDS; i++)
        if (strcmp(backends[i], name) == 0) return 1;
    return 0;
}

const char *ao_device_best_backend(void)
{
    for (int i = 0; i < NBACKENDS; i++) {
        const struct ao_device_ops *ops = backend_ops(backends[i], 1);
        if (ops && ops->count() > 0) return backends[i];
    }
    return ao_cpu_device_ops.name;
}

void ao_device_why_no_gpu(char *buf, size_t n)
{
    if (n == 0) return;
    buf[0] = '\0';
    for (int i = 0; i < NBACKENDS; i++) {
        if (strcmp(backends[i], ao_cpu_device_ops.name) == 0) continue;
        size_t used = strlen(buf);
        if (used) used += (size_t)snprintf(buf + used, n - used, "; ");
        if (used >= n) return;
        const struct ao_device_ops *ops = backend_ops(backends[i], 1);
        if (!ops)
            snprintf(buf + used, n - used, "the %s backend cannot load (%s)", backends[i],
                     ao_plugin_why(backends[i]));
        else if (ops->count() <= 0)
            snprintf(buf + used, n - used, "the %s runtime sees no device", backends[i]);
    }
    if (!buf[0]) snprintf(buf, n, "this aorta was built without a GPU backend");
}

int ao_device_count(const char *backend)
{
    if (strcmp(backend, "auto") == 0) backend = ao_device_best_backend();
    if (!known_backend(backend)) return 0;
    const struct ao_device_ops *ops = backend_ops(backend, 0);
    return ops ? ops->count() : -1;
}

static void list_backends(char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < NBACKENDS && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", backends[i]);
}

ao_device *ao_device_open(const char *backend, int ordinal)
{
    if (strcmp(backend, "auto") == 0) backend = ao_device_best_backend();
    if (!known_backend(backend)) {
        char names[128];
        list_backends(names, sizeof names);
        ao_error("device backend", "\"%s\" is not built into this binary (available: auto, %s)",
                 backend, names);
        return NULL;
    }
    const struct ao_device_ops *ops = backend_ops(backend, 0);
    return ops ? ops->open(ordinal) : NULL;
}

/* ---- dispatch ------------------------------------------------------------ */

#define OPS(obj) (((const struct ao_device_base *)(const void *)(obj))->ops)

void ao_device_close(ao_device *dev)
{
    if (dev) OPS(dev)->close(dev);
}

void ao_device_get_info(ao_device *dev, ao_device_info *info)
{
    memset(info, 0, sizeof *info);
    OPS(dev)->get_info(dev, info);
}

const char *ao_device_backend(ao_device *dev)
{
    return OPS(dev)->name;
}

int ao_device_supports(ao_device *dev, ao_dtype t)
{
    return (unsigned)t < AO_NDTYPES && OPS(dev)->supports(dev, t);
}

void ao_device_sync(ao_device *dev)
{
    OPS(dev)->sync(dev);
}

/* AORTA_TEST_DEV_MEM_LIMIT=BYTES (tests only, never a tuning knob): an
 * allocation that would take this process's device memory past BYTES fails
 * as a real one does (a fatal error), so that a run out of device memory can
 * be planted on any backend (tests/e2e/train_faults.sh). */
static void test_mem_limit(ao_device *dev, size_t bytes)
{
    const char *v = getenv("AORTA_TEST_DEV_MEM_LIMIT");
    size_t in_use, peak;
    if (!v || !*v || ao_dev_mem_usage(dev, &in_use, &peak) != 0) return;
    unsigned long long limit = strtoull(v, NULL, 10);
    if (in_use + bytes > limit)
        ao_fatal(AO_EXIT_FAIL, "device memory",
                 "%zu bytes more than the %zu in use: out of memory (AORTA_TEST_DEV_MEM_LIMIT "
                 "%llu, a planted fault for tests)",
                 bytes, in_use, limit);
}

void *ao_dev_alloc(ao_device *dev, size_t bytes)
{
    test_mem_limit(dev, bytes);
    return OPS(dev)->dev_alloc(dev, bytes);
}

void ao_dev_free(ao_device *dev, void *p)
{
    if (p) OPS(dev)->dev_free(dev, p);
}

void *ao_host_alloc(ao_device *dev, size_t bytes)
{
    return OPS(dev)->host_alloc(dev, bytes);
}

void ao_host_free(ao_device *dev, void *p)
{
    if (p) OPS(dev)->host_free(dev, p);
}

void ao_memset_async(ao_device *dev, void *p, int value, size_t bytes, ao_stream *s)
{
    OPS(dev)->memset_async(dev, p, value, bytes, s);
}

void ao_copy_async(ao_device *dev, void *dst, const void *src, size_t bytes, ao_copy_kind kind,
                   ao_stream *s)
{
    OPS(dev)->copy_async(dev, dst, src, bytes, kind, s);
}

void ao_copy_sm_async(ao_device *dev, void *dst, const void *src, size_t bytes, ao_stream *s)
{
    OPS(dev)->copy_sm_async(dev, dst, src, bytes, s);
}

void ao_copy_peer_async(ao_device *dst_dev, void *dst, ao_device *src_dev, const void *src,
                        size_t bytes, ao_stream *s)
{
    if (OPS(dst_dev) != OPS(src_dev))
        ao_fatal(AO_EXIT_FAIL, "peer copy", "from a %s device to a %s device is not possible",
                 OPS(src_dev)->name, OPS(dst_dev)->name);
    OPS(dst_dev)->copy_peer_async(dst_dev, dst, src_dev, src, bytes, s);
}

ao_stream *ao_stream_create(ao_device *dev, const char *name, int priority)
{
    return OPS(dev)->stream_create(dev, name, priority);
}

void ao_stream_destroy(ao_stream *s)
{
    if (s) OPS(s)->stream_destroy(s);
}

const char *ao_stream_name(ao_stream *s)
{
    return OPS(s)->stream_name(s);
}

int ao_stream_priority(ao_stream *s)
{
    return OPS(s)->stream_priority(s);
}

void ao_stream_sync(ao_stream *s)
{
    OPS(s)->stream_sync(s);
}

void ao_stream_hold(ao_stream *s)
{
    if (OPS(s)->stream_hold) OPS(s)->stream_hold(s);
}

void ao_stream_release(ao_stream *s)
{
    if (OPS(s)->stream_release) OPS(s)->stream_release(s);
}

ao_event *ao_event_create(ao_device *dev)
{
    return OPS(dev)->event_create(dev);
}

void ao_event_destroy(ao_event *e)
{
    if (e) OPS(e)->event_destroy(e);
}

void ao_event_record(ao_event *e, ao_stream *s)
{
    OPS(e)->event_record(e, s);
}

void ao_stream_wait_event(ao_stream *s, ao_event *e)
{
    OPS(s)->stream_wait_event(s, e);
}

void ao_event_sync(ao_event *e)
{
    OPS(e)->event_sync(e);
}

int ao_event_query(ao_event *e)
{
    return OPS(e)->event_query(e);
}

double ao_event_elapsed_us(ao_event *start, ao_event *end)
{
    return OPS(start)->event_elapsed_us(start, end);
}

int ao_dev_mem_usage(ao_device *dev, size_t *in_use, size_t *peak)
{
    *in_use = *peak = 0;
    if (!OPS(dev)->mem_usage) return -1;
    OPS(dev)->mem_usage(dev, in_use, peak);
    return 0;
}

void ao_launch_host(ao_stream *s, void (*fn)(void *arg), const void *arg, size_t arg_size)
{
    OPS(s)->launch_host(s, fn, arg, arg_size);
}

void ao_gemm_set_policy(ao_device *dev, int chunks, int sm_count_target, int alone)
{
    OPS(dev)->gemm_set_policy(dev, chunks, sm_count_target, alone);
}

void ao_gemm(ao_device *dev, ao_stream *s, const ao_gemm_desc *d)
{
    OPS(dev)->gemm(dev, s, d);
}

void ao_range_push(ao_device *dev, const char *name)
{
    OPS(dev)->range_push(dev, name);
}

void ao_range_pop(ao_device *dev)
{
    OPS(dev)->range_pop(dev);
}

void ao_profiler_start(ao_device *dev)
{
    OPS(dev)->profiler_start(dev);
}

void ao_profiler_stop(ao_device *dev)
{
    OPS(dev)->profiler_stop(dev);
}
