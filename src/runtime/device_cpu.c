/* The cpu device backend: a stand-in GPU made of threads, and the numerical
 * reference for the GPU kernels.
 *
 * - Memory is host memory: device and "pinned" allocations are 64-byte aligned
 *   heap blocks, and every copy kind (H2D, D2H, D2D, H2H, SM copies, peer
 *   copies) is a memcpy run on the stream's thread.
 * - A stream is one worker thread draining a FIFO ring of closures. A closure
 *   is a function and a copy of its arguments, stored inline in the ring slot
 *   up to CPU_INLINE_ARG bytes (every op of this backend fits), on the heap
 *   beyond, so enqueueing costs a mutex, a memcpy and a condvar signal.
 * - An event is a completion timestamp (CLOCK_MONOTONIC) plus generation
 *   counters: each record bumps `recorded` and enqueues a marker that stamps
 *   the time and publishes its generation as `completed`. A stream wait
 *   captures the generation current at the call, so recording the event again
 *   later never changes what an earlier wait waits for. Markers and waits hold
 *   a reference, so an event may be destroyed with work still queued (as in
 *   CUDA).
 * - GEMMs are OpenBLAS cblas_sgemm, fp32 only: the engine maps fp16/bf16/tf32
 *   configurations to fp32 on this backend (with one warning there), so a GEMM
 *   of another dtype reaching this file is a programming error and fatal.
 *   ao_device_supports says yes for fp32 and the integer types (which only
 *   memory and collectives use).
 * - BLAS threads: OPENBLAS_NUM_THREADS / OMP_NUM_THREADS are respected. When
 *   neither is set, each process gets the online CPUs divided by the ranks on
 *   this node (from the launcher's environment), so that N ranks do not each
 *   start one BLAS thread per core. Several streams may call sgemm at once
 *   (OpenBLAS serialises use of its thread pool); the engine issues GEMMs from
 *   its compute stream only.
 * - Stream priorities: the range is CUDA's on recent GPUs, [-5 (greatest), 0
 *   (least)]; requests outside it are clamped and the clamped value is what
 *   ao_stream_priority reports. Priorities are recorded, not applied to the
 *   threads: raising a thread's scheduling priority needs CAP_SYS_NICE, and
 *   the worker threads mostly sleep in MPI or BLAS anyway.
 * - A failure inside a worker (ao_fatal) exits the process; no lock of this
 *   file is held across a user closure, so other threads never wait on a
 *   thread that died holding one. */
#include <cblas.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "runtime/device.h"
#include "runtime/memtrack.h"

enum { CPU_INLINE_ARG = 176, CPU_PRIORITY_LEAST = 0, CPU_PRIORITY_GREATEST = -5 };

struct cpu_task {
    void (*fn)(void *);
    void *heap_arg; /* owned copy when the arguments do not fit inline */
    void *raw_arg;  /* the caller's pointer, passed as is when arg_size is 0 */
    _Alignas(max_align_t) unsigned char inline_arg[CPU_INLINE_ARG];
};

struct cpu_device;

struct cpu_stream {
    struct ao_device_base base;
    struct cpu_device *dev;
    char name[64];
    int priority;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t has_work; /* worker sleeps here */
    pthread_cond_t progress; /* ao_stream_sync sleeps here */
    struct cpu_task *ring;
    size_t cap, head, count;
    uint64_t enqueued, done;
    int sync_waiters;
    int stopping;
    struct cpu_stream *next; /* the device's list, for ao_device_sync */
};

struct cpu_event {
    struct ao_device_base base;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t recorded;  /* generations handed out by ao_event_record */
    uint64_t completed; /* newest generation whose marker has run */
    int64_t time_ns;    /* when generation `completed` ran */
    atomic_int refs;
};

struct cpu_device {
    struct ao_device_base base;
    pthread_mutex_t mu;
    struct cpu_stream *streams;
    int gemm_chunks, gemm_sm_target;
    int policy_warned;
    ao_memtrack mem; /* dev_alloc's bytes (host_alloc's are not device memory) */
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- backend ------------------------------------------------------------- */

static int cpu_count(void)
{
    return 1;
}

static void cpu_version(char *buf, size_t n)
{
    snprintf(buf, n, "%s", openblas_get_config());
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int ranks_on_this_node(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                       "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        int n = v ? atoi(v) : 0;
        if (n > 0) return n;
    }
    return 1;
}

static void choose_blas_threads(void)
{
    if (getenv("OPENBLAS_NUM_THREADS") || getenv("OMP_NUM_THREADS")) return;
    int n = online_cpus() / ranks_on_this_node();
    openblas_set_num_threads(n > 0 ? n : 1);
}

static ao_device *cpu_open(int ordinal)
{
    if (ordinal != 0) {
        ao_error("cpu device", "there is no device %d (the cpu backend has one device, 0)",
                 ordinal);
        return NULL;
    }
    choose_blas_threads();
    struct cpu_device *d = ao_calloc(1, sizeof *d);
    d->base.ops = &ao_cpu_device_ops;
    pthread_mutex_init(&d->mu, NULL);
    ao_memtrack_init(&d->mem);
    d->gemm_chunks = 1;
    return (ao_device *)d;
}

static void cpu_close(ao_device *dev)
{
    struct cpu_device *d = (struct cpu_device *)dev;
    if (d->streams)
        ao_fatal(AO_EXIT_FAIL, "cpu device", "closed while stream \"%s\" still exists",
                 d->streams->name);
    pthread_mutex_destroy(&d->mu);
    ao_memtrack_destroy(&d->mem);
    free(d);
}

static void cpu_model_name(char *buf, size_t n)
{
    struct utsname u;
    snprintf(buf, n, "%s", uname(&u) == 0 ? u.machine : "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *v = strchr(line, ':');
        if (!v) break;
        v += 1 + strspn(v + 1, " \t");
        snprintf(buf, n, "%.*s", (int)strcspn(v, "\n"), v);
        break;
    }
    fclose(f);
}

static void cpu_get_info(ao_device *dev, ao_device_info *info)
{
    snprintf(info->backend, sizeof info->backend, "cpu");
    cpu_model_name(info->name, sizeof info->name);
    info->ordinal = 0;
    info->sm_count = openblas_get_num_threads();
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    info->total_mem = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    info->priority_least = CPU_PRIORITY_LEAST;
    info->priority_greatest = CPU_PRIORITY_GREATEST;
    cpu_version(info->runtime_version, sizeof info->runtime_version);
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(info->driver_version, sizeof info->driver_version, "%.20s %.40s", u.sysname,
                 u.release);
}

static int cpu_supports(ao_device *dev, ao_dtype t)
{
    switch (t) {
    case AO_F32:
    case AO_I32:
    case AO_I8:
    case AO_U8:
    case AO_I64:
    case AO_U32:
    case AO_U64:
        return 1;
    default:
        return 0;
    }
}

/* ---- memory -------------------------------------------------------------- */

static void *cpu_alloc(ao_device *dev, size_t bytes)
{
    size_t rounded = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) ao_fatal(AO_EXIT_FAIL, "cpu device", "cannot allocate %zu bytes of memory", bytes);
    return p;
}

static void cpu_free(ao_device *dev, void *p)
{
    free(p);
}

static void *cpu_dev_alloc(ao_device *dev, size_t bytes)
{
    void *p = cpu_alloc(dev, bytes);
    ao_memtrack_add(&((struct cpu_device *)dev)->mem, p, bytes);
    return p;
}

static void cpu_dev_free(ao_device *dev, void *p)
{
    if (p) ao_memtrack_remove(&((struct cpu_device *)dev)->mem, p);
    free(p);
}

static void cpu_mem_usage(ao_device *dev, size_t *in_use, size_t *peak)
{
    ao_memtrack_get(&((struct cpu_device *)dev)->mem, in_use, peak);
}

/* ---- streams ------------------------------------------------------------- */

static void *stream_worker(void *arg)
{
    struct cpu_stream *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->count == 0 && !s->stopping) pthread_cond_wait(&s->has_work, &s->mu);
        if (s->count == 0) break; /* stopping, and everything before it has run */
        struct cpu_task t = s->ring[s->head];
        s->head = (s->head + 1) % s->cap;
        s->count--;
        pthread_mutex_unlock(&s->mu);

        t.fn(t.heap_arg ? t.heap_arg : t.raw_arg ? t.raw_arg : (void *)t.inline_arg);
        free(t.heap_arg);

        pthread_mutex_lock(&s->mu);
        s->done++;
        if (s->sync_waiters) pthread_cond_broadcast(&s->progress);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static void grow_ring(struct cpu_stream *s)
{
    size_t cap = s->cap ? 2 * s->cap : 64;
    struct cpu_task *ring = ao_malloc(cap * sizeof *ring);
    for (size_t i = 0; i < s->count; i++) ring[i] = s->ring[(s->head + i) % s->cap];
    free(s->ring);
    s->ring = ring;
    s->cap = cap;
    s->head = 0;
}

static void cpu_launch_host(ao_stream *stream, void (*fn)(void *), const void *arg, size_t arg_size)
{
    struct cpu_stream *s = (struct cpu_stream *)stream;
    void *heap = NULL;
    if (arg_size > CPU_INLINE_ARG) {
        heap = ao_malloc(arg_size);
        memcpy(heap, arg, arg_size);
    }
    pthread_mutex_lock(&s->mu);
    if (s->count == s->cap) grow_ring(s);
    struct cpu_task *t = &s->ring[(s->head + s->count) % s->cap];
    t->fn = fn;
    t->heap_arg = heap;
    t->raw_arg = arg_size == 0 ? (void *)arg : NULL;
    if (arg_size > 0 && !heap) memcpy(t->inline_arg, arg, arg_size);
    s->count++;
    s->enqueued++;
    pthread_cond_signal(&s->has_work);
    pthread_mutex_unlock(&s->mu);
}

static int clamp_priority(int p)
{
    if (p > CPU_PRIORITY_LEAST) return CPU_PRIORITY_LEAST;
    if (p < CPU_PRIORITY_GREATEST) return CPU_PRIORITY_GREATEST;
    return p;
}

static ao_stream *cpu_stream_create(ao_device *dev, const char *name, int priority)
{
    struct cpu_device *d = (struct cpu_device *)dev;
    struct cpu_stream *s = ao_calloc(1, sizeof *s);
    s->base.ops = &ao_cpu_device_ops;
    s->dev = d;
    snprintf(s->name, sizeof s->name, "%s", name ? name : "stream");
    s->priority = clamp_priority(priority);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->has_work, NULL);
    pthread_cond_init(&s->progress, NULL);

    /* Signals (Ctrl-C, SIGTERM from the launcher) belong to the main thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, stream_worker, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        ao_fatal(AO_EXIT_FAIL, "cpu device", "cannot start the thread of stream \"%s\": %s",
                 s->name, strerror(rc));
    char thread_name[16];
    snprintf(thread_name, sizeof thread_name, "ao:%.12s", s->name);
    pthread_setname_np(s->thread, thread_name);

    pthread_mutex_lock(&d->mu);
    s->next = d->streams;
    d->streams = s;
    pthread_mutex_unlock(&d->mu);
    return (ao_stream *)s;
}

static void cpu_stream_destroy(ao_stream *stream)
{
    struct cpu_stream *s = (struct cpu_stream *)stream;
    struct cpu_device *d = s->dev;
    pthread_mutex_lock(&d->mu);
    for (struct cpu_stream **p = &d->streams; *p; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    pthread_mutex_unlock(&d->mu);

    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_signal(&s->has_work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL); /* the worker drains the queue first */

    pthread_cond_destroy(&s->progress);
    pthread_cond_destroy(&s->has_work);
    pthread_mutex_destroy(&s->mu);
    free(s->ring);
    free(s);
}

static const char *cpu_stream_name(ao_stream *stream)
{
    return ((struct cpu_stream *)stream)->name;
}

static int cpu_stream_priority(ao_stream *stream)
{
    return ((struct cpu_stream *)stream)->priority;
}

static void cpu_stream_sync(ao_stream *stream)
{
    struct cpu_stream *s = (struct cpu_stream *)stream;
    pthread_mutex_lock(&s->mu);
    uint64_t target = s->enqueued;
    s->sync_waiters++;
    while (s->done < target) pthread_cond_wait(&s->progress, &s->mu);
    s->sync_waiters--;
    pthread_mutex_unlock(&s->mu);
}

static void cpu_device_sync(ao_device *dev)
{
    struct cpu_device *d = (struct cpu_device *)dev;
    pthread_mutex_lock(&d->mu);
    for (struct cpu_stream *s = d->streams; s; s = s->next) cpu_stream_sync((ao_stream *)s);
    pthread_mutex_unlock(&d->mu);
}

/* ---- copies -------------------------------------------------------------- */

struct copy_args {
    void *dst;
    const void *src;
    size_t bytes;
    int value; /* memset only */
};

static void run_copy(void *arg)
{
    struct copy_args *a = arg;
    memcpy(a->dst, a->src, a->bytes);
}

static void run_memset(void *arg)
{
    struct copy_args *a = arg;
    memset(a->dst, a->value, a->bytes);
}

static void cpu_memset_async(ao_device *dev, void *p, int value, size_t bytes, ao_stream *s)
{
    struct copy_args a = {.dst = p, .bytes = bytes, .value = value};
    if (bytes) cpu_launch_host(s, run_memset, &a, sizeof a);
}

static void cpu_copy_sm_async(ao_device *dev, void *dst, const void *src, size_t bytes,
                              ao_stream *s)
{
    struct copy_args a = {.dst = dst, .src = src, .bytes = bytes};
    if (bytes) cpu_launch_host(s, run_copy, &a, sizeof a);
}

static void cpu_copy_async(ao_device *dev, void *dst, const void *src, size_t bytes,
                           ao_copy_kind kind, ao_stream *s)
{
    cpu_copy_sm_async(dev, dst, src, bytes, s);
}

static void cpu_copy_peer_async(ao_device *dst_dev, void *dst, ao_device *src_dev, const void *src,
                                size_t bytes, ao_stream *s)
{
    cpu_copy_sm_async(dst_dev, dst, src, bytes, s);
}

/* ---- events -------------------------------------------------------------- */

static ao_event *cpu_event_create(ao_device *dev)
{
    struct cpu_event *e = ao_calloc(1, sizeof *e);
    e->base.ops = &ao_cpu_device_ops;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    atomic_init(&e->refs, 1);
    return (ao_event *)e;
}

static void event_unref(struct cpu_event *e)
{
    if (atomic_fetch_sub(&e->refs, 1) != 1) return;
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

static void cpu_event_destroy(ao_event *e)
{
    event_unref((struct cpu_event *)e);
}

struct event_args {
    struct cpu_event *e;
    uint64_t generation;
};

static void run_record(void *arg)
{
    struct event_args *a = arg;
    struct cpu_event *e = a->e;
    int64_t t = now_ns();
    pthread_mutex_lock(&e->mu);
    if (a->generation > e->completed) {
        e->completed = a->generation;
        e->time_ns = t;
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    event_unref(e);
}

static void cpu_event_record(ao_event *event, ao_stream *s)
{
    struct cpu_event *e = (struct cpu_event *)event;
    atomic_fetch_add(&e->refs, 1);
    pthread_mutex_lock(&e->mu);
    struct event_args a = {e, ++e->recorded};
    pthread_mutex_unlock(&e->mu);
    cpu_launch_host(s, run_record, &a, sizeof a);
}

static void wait_generation(struct cpu_event *e, uint64_t generation)
{
    pthread_mutex_lock(&e->mu);
    while (e->completed < generation) pthread_cond_wait(&e->cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

static void run_wait(void *arg)
{
    struct event_args *a = arg;
    wait_generation(a->e, a->generation);
    event_unref(a->e);
}

static void cpu_stream_wait_event(ao_stream *s, ao_event *event)
{
    struct cpu_event *e = (struct cpu_event *)event;
    pthread_mutex_lock(&e->mu);
    struct event_args a = {e, e->recorded};
    pthread_mutex_unlock(&e->mu);
    if (a.generation == 0) return; /* never recorded: nothing to wait for (CUDA too) */
    atomic_fetch_add(&e->refs, 1);
    cpu_launch_host(s, run_wait, &a, sizeof a);
}

static void cpu_event_sync(ao_event *event)
{
    struct cpu_event *e = (struct cpu_event *)event;
    pthread_mutex_lock(&e->mu);
    uint64_t generation = e->recorded;
    pthread_mutex_unlock(&e->mu);
    wait_generation(e, generation);
}

static int cpu_event_query(ao_event *event)
{
    struct cpu_event *e = (struct cpu_event *)event;
    pthread_mutex_lock(&e->mu);
    int complete = e->completed >= e->recorded;
    pthread_mutex_unlock(&e->mu);
    return complete;
}

/* The time of a complete event, or fatal: asking for the time of work that has
 * not run is a programming error, as cudaEventElapsedTime's is. */
static int64_t completed_time(struct cpu_event *e, const char *which)
{
    pthread_mutex_lock(&e->mu);
    uint64_t recorded = e->recorded, completed = e->completed;
    int64_t t = e->time_ns;
    pthread_mutex_unlock(&e->mu);
    if (recorded == 0)
        ao_fatal(AO_EXIT_FAIL, "event elapsed time", "the %s event was never recorded", which);
    if (completed < recorded)
        ao_fatal(AO_EXIT_FAIL, "event elapsed time",
                 "the %s event is not complete yet (synchronize it first)", which);
    return t;
}

static double cpu_event_elapsed_us(ao_event *start, ao_event *end)
{
    int64_t t0 = completed_time((struct cpu_event *)start, "start");
    int64_t t1 = completed_time((struct cpu_event *)end, "end");
    return (double)(t1 - t0) / 1e3;
}

/* ---- GEMM ---------------------------------------------------------------- */

_Static_assert(sizeof(ao_gemm_desc) <= CPU_INLINE_ARG, "a GEMM must fit a ring slot inline");

static void cpu_gemm_set_policy(ao_device *dev, int chunks, int sm_count_target, int alone)
{
    (void)alone; /* no workspace, no schedule to pick */
    struct cpu_device *d = (struct cpu_device *)dev;
    d->gemm_chunks = chunks;
    d->gemm_sm_target = sm_count_target;
    if ((chunks > 1 || sm_count_target > 0) && !d->policy_warned) {
        d->policy_warned = 1;
        ao_warn("compute.gemm_chunks and compute.sm_count_target have no effect on the cpu "
                "device");
    }
}

static void run_gemm(void *arg)
{
    const ao_gemm_desc *d = arg;
    const float *a = d->a, *b = d->b;
    float *c = d->c;
    if (d->d) { /* D = C first (what beta scales), then the product accumulates into D */
        float *dst = d->d;
        if (d->beta != 0.0f)
            for (int r = 0; r < d->m; r++)
                memcpy(dst + (size_t)r * d->ldc, c + (size_t)r * d->ldc, (size_t)d->n * sizeof *c);
        c = dst;
    }
    const int outer = d->batch_outer > 1 ? d->batch_outer : 1;
    for (int o = 0; o < outer; o++)
        for (int i = 0; i < d->batch_count; i++) {
            cblas_sgemm(CblasRowMajor, d->trans_a ? CblasTrans : CblasNoTrans,
                        d->trans_b ? CblasTrans : CblasNoTrans, d->m, d->n, d->k, d->alpha,
                        a + o * d->outer_stride_a + i * d->stride_a, d->lda,
                        b + o * d->outer_stride_b + i * d->stride_b, d->ldb, d->beta,
                        c + o * d->outer_stride_c + i * d->stride_c, d->ldc);
        }
    if (d->bias)
        for (int r = 0; r < d->m; r++)
            for (int j = 0; j < d->n; j++) c[(size_t)r * d->ldc + j] += ((const float *)d->bias)[j];
}

static void check_ld(const char *name, int ld, int cols)
{
    if (ld < (cols > 1 ? cols : 1))
        ao_fatal(AO_EXIT_FAIL, "gemm",
                 "ld%s = %d is smaller than the %d columns of the row-major matrix", name, ld,
                 cols);
}

static void cpu_gemm(ao_device *dev, ao_stream *s, const ao_gemm_desc *d)
{
    if (d->ab_type != AO_F32 || d->c_type != AO_F32)
        ao_fatal(AO_EXIT_FAIL, "gemm",
                 "the cpu device computes in fp32 only (got A/B %s, C %s); map other precisions "
                 "to fp32 before calling ao_gemm",
                 ao_dtype_name(d->ab_type), ao_dtype_name(d->c_type));
    if (d->m < 0 || d->n < 0 || d->k < 0 || d->batch_count < 1)
        ao_fatal(AO_EXIT_FAIL, "gemm", "invalid shape m=%d n=%d k=%d batch=%d", d->m, d->n, d->k,
                 d->batch_count);
    /* Row-major: a row of the stored matrix is op()'s column when transposed. */
    check_ld("a", d->lda, d->trans_a ? d->m : d->k);
    check_ld("b", d->ldb, d->trans_b ? d->k : d->n);
    check_ld("c", d->ldc, d->n);
    if (d->batch_outer < 0)
        ao_fatal(AO_EXIT_FAIL, "gemm", "batch_outer=%d: must be >= 0", d->batch_outer);
    if (d->bias && (d->batch_count != 1 || d->batch_outer > 1))
        ao_fatal(AO_EXIT_FAIL, "gemm", "a bias needs batch_count 1 (got %d)", d->batch_count);
    if (d->d && (d->batch_count != 1 || d->batch_outer > 1))
        ao_fatal(AO_EXIT_FAIL, "gemm", "a separate D needs batch_count 1 (got %d)", d->batch_count);
    if (d->m == 0 || d->n == 0) return;
    cpu_launch_host(s, run_gemm, d, sizeof *d);
}

static void cpu_range_push(ao_device *dev, const char *name) {}

static void cpu_range_pop(ao_device *dev) {}

/* No external profiler attaches to the cpu backend. */
static void cpu_profiler_start(ao_device *dev) {}

static void cpu_profiler_stop(ao_device *dev) {}

const struct ao_device_ops ao_cpu_device_ops = {
    .name = "cpu",
    .count = cpu_count,
    .version = cpu_version,
    .open = cpu_open,
    .close = cpu_close,
    .get_info = cpu_get_info,
    .supports = cpu_supports,
    .sync = cpu_device_sync,
    .dev_alloc = cpu_dev_alloc,
    .dev_free = cpu_dev_free,
    .mem_usage = cpu_mem_usage,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .memset_async = cpu_memset_async,
    .copy_async = cpu_copy_async,
    .copy_sm_async = cpu_copy_sm_async,
    .copy_peer_async = cpu_copy_peer_async,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_name = cpu_stream_name,
    .stream_priority = cpu_stream_priority,
    .stream_sync = cpu_stream_sync,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_sync = cpu_event_sync,
    .event_query = cpu_event_query,
    .event_elapsed_us = cpu_event_elapsed_us,
    .launch_host = cpu_launch_host,
    .gemm_set_policy = cpu_gemm_set_policy,
    .gemm = cpu_gemm,
    .range_push = cpu_range_push,
    .range_pop = cpu_range_pop,
    .profiler_start = cpu_profiler_start,
    .profiler_stop = cpu_profiler_stop,
};
