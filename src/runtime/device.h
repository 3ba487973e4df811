/* The device API: everything the engine and the benchmarks ask of a GPU (or of
 * the CPU standing in for one), behind one small interface.
 *
 * No CUDA/HIP header is included here or by any user of this header. A backend
 * (runtime/device_cpu.c, runtime/device_cuda.c) fills in a `struct ao_device_ops`; the
 * functions below dispatch through it.
 *
 * Failures of the device itself (a CUDA call that fails mid-run, an allocation
 * the device cannot satisfy) are fatal: they print the call that failed through
 * core/error and exit 1, because no caller can do anything better. Functions
 * that can fail for a reason a user controls (opening a backend that is not
 * there, a dtype a backend does not support) return an error instead.
 *
 * Conventions:
 * - A stream executes its work in FIFO order; cross-stream order only through
 *   events (ao_stream_wait_event).
 * - Priorities follow CUDA: 0 is the default, a smaller (negative) number is a
 *   higher priority; values outside the device's range are clamped.
 * - GEMMs are row-major: C = alpha * op(A) @ op(B) + beta * C. */
#ifndef AORTA_RUNTIME_DEVICE_H
#define AORTA_RUNTIME_DEVICE_H

#include <stddef.h>
#include <stdint.h>

typedef struct ao_device ao_device;
typedef struct ao_stream ao_stream;
typedef struct ao_event ao_event;

typedef enum ao_dtype {
    AO_F32,
    AO_F16,
    AO_BF16,
    AO_F64,
    AO_I32,
    AO_I8,
    AO_U8,
    AO_I64,
    AO_U32,
    AO_U64,
    AO_NDTYPES
} ao_dtype;

size_t ao_dtype_size(ao_dtype t);
/* nccl-tests' names: "float", "half", "bfloat16", "double", "int32", ... */
const char *ao_dtype_name(ao_dtype t);
/* Accepts nccl-tests' names and the config's (fp32, fp16, bf16, f32, ...);
 * returns 0, or -1 for an unknown name. */
int ao_dtype_parse(const char *s, ao_dtype *out);

typedef enum ao_copy_kind { AO_H2D, AO_D2H, AO_D2D, AO_H2H } ao_copy_kind;

typedef struct ao_device_info {
    char backend[16]; /* "cpu", "cuda", "hip" */
    char name[128];   /* "NVIDIA H200", "x86_64 (16 threads)" */
    char pci_bus_id[32];
    int ordinal;
    int sm_count; /* SMs / CUs; CPU: threads BLAS may use */
    int cc_major, cc_minor;
    size_t total_mem;
    int priority_least, priority_greatest; /* stream priority range */
    char runtime_version[64];
    char driver_version[64];
} ao_device_info;

/* ---- backends ------------------------------------------------------------ */

/* The backends compiled into this binary ("cpu" always, "cuda" when built
 * with CUDA, "hip" with HIP). */
int ao_device_backend_count(void);
const char *ao_device_backend_name(int i);
void ao_device_backend_version(int i, char *buf, size_t n);

/* How many devices `backend` sees (0 when its runtime or driver is absent;
 * the cpu backend always reports 1); -1 after one error line when its
 * plugin cannot be loaded. "auto" picks cuda/hip when it sees a
 * device, else cpu (ao_device_best_backend). */
int ao_device_count(const char *backend);
const char *ao_device_best_backend(void);
/* Why ao_device_best_backend found no GPU, in words for an error line:
 * "the cuda backend cannot load (WHY)", "the cuda runtime sees no device"
 * or "this aorta was built without a GPU backend". */
void ao_device_why_no_gpu(char *buf, size_t n);

/* Open device `ordinal` of `backend` for this process. Returns NULL after
 * printing why (unknown backend, no such device). */
ao_device *ao_device_open(const char *backend, int ordinal);
void ao_device_close(ao_device *dev);
void ao_device_get_info(ao_device *dev, ao_device_info *info);
const char *ao_device_backend(ao_device *dev);
/* Whether GEMMs and kernels can take this dtype on this device. */
int ao_device_supports(ao_device *dev, ao_dtype t);
void ao_device_sync(ao_device *dev);

/* ---- memory -------------------------------------------------------------- */

void *ao_dev_alloc(ao_device *dev, size_t bytes);
void ao_dev_free(ao_device *dev, void *p);
/* Device memory this process allocated through ao_dev_alloc: in use now and
 * the high-water mark since open. Returns 0, or -1 when the backend does not
 * count (both then 0). */
int ao_dev_mem_usage(ao_device *dev, size_t *in_use, size_t *peak);
/* Page-locked host memory (plain malloc on cpu). */
void *ao_host_alloc(ao_device *dev, size_t bytes);
void ao_host_free(ao_device *dev, void *p);
void ao_memset_async(ao_device *dev, void *p, int value, size_t bytes, ao_stream *s);
/* A DMA copy (cudaMemcpyAsync). */
void ao_copy_async(ao_device *dev, void *dst, const void *src, size_t bytes, ao_copy_kind kind,
                   ao_stream *s);
/* The same bytes moved by SM threads (a copy kernel) instead of a copy engine;
 * dst and src are device memory, or pinned host memory mapped for the device. */
void ao_copy_sm_async(ao_device *dev, void *dst, const void *src, size_t bytes, ao_stream *s);
/* Device-to-device copy between two devices of the same backend (p2p). Peer
 * access is enabled on first use where the hardware allows it. */
void ao_copy_peer_async(ao_device *dst_dev, void *dst, ao_device *src_dev, const void *src,
                        size_t bytes, ao_stream *s);

/* ---- streams and events -------------------------------------------------- */

/* `name` is kept for traces and error messages ("compute", "allgather", ...). */
ao_stream *ao_stream_create(ao_device *dev, const char *name, int priority);
void ao_stream_destroy(ao_stream *s);
const char *ao_stream_name(ao_stream *s);
/* The priority the device actually applied (read back from the runtime). */
int ao_stream_priority(ao_stream *s);
void ao_stream_sync(ao_stream *s);

/* Events carry timing. ao_event_elapsed_us needs both events complete. */
ao_event *ao_event_create(ao_device *dev);
void ao_event_destroy(ao_event *e);
void ao_event_record(ao_event *e, ao_stream *s);
void ao_stream_wait_event(ao_stream *s, ao_event *e);
void ao_event_sync(ao_event *e);
/* 1 when the event's work is complete, 0 when not yet (never blocks). */
int ao_event_query(ao_event *e);
double ao_event_elapsed_us(ao_event *start, ao_event *end);

/* Hold a stream: the device starts nothing enqueued on it after
 * ao_stream_hold until the host calls ao_stream_release (the host never waits
 * here). Timing holds a stream around an op whose host launch path is long, a
 * collective: without it the device reaches the op's start event while the
 * host is still inside the library launching the kernel, and the event pair
 * counts that launch path as the op's time. Release as soon as the op is
 * enqueued: anything waiting on the stream waits for the host meanwhile.
 * Never hold across a call that can wait for the device (an allocation of
 * pinned or device memory, a library's set-up on first use): it waits for
 * the held stream too, which waits for that call to return (DESIGN §4).
 * No-op on backends that run stream work on the host (cpu) and where the
 * runtime cannot wait on memory (one warning). AORTA_STREAM_HOLD=0 in the
 * environment turns holds off, to measure what they cost and what they fix. */
void ao_stream_hold(ao_stream *s);
void ao_stream_release(ao_stream *s);

/* Run fn(arg) on the host once the stream reaches this point; `arg_size` bytes
 * at `arg` are copied, so the caller's buffer may be reused at once. This is
 * how the cpu backend runs every kernel and how MPI collectives run "on" a
 * stream; on CUDA it is cudaLaunchHostFunc (use sparingly there). */
void ao_launch_host(ao_stream *s, void (*fn)(void *arg), const void *arg, size_t arg_size);

/* ---- GEMM ---------------------------------------------------------------- */

typedef enum ao_compute_mode {
    AO_COMPUTE_DEFAULT, /* fp32 accumulation, no TF32 */
    AO_COMPUTE_TF32,    /* fp32 inputs through TF32 tensor cores (CUDA); fp32 on cpu */
    /* fp32 inputs rounded to bf16 / fp16 inside the GEMM, products on those
     * tensor cores, fp32 accumulation and output (cuBLAS's
     * COMPUTE_32F_FAST_16BF / _16F): autocast's GEMM numerics without
     * storing the operands in 16 bits. fp32 on cpu. */
    AO_COMPUTE_BF16,
    AO_COMPUTE_F16,
} ao_compute_mode;

typedef struct ao_gemm_desc {
    int trans_a, trans_b; /* op(X) = X^T when set */
    int m, n, k;          /* op(A) is m x k, op(B) is k x n, C is m x n, row-major */
    float alpha, beta;
    const void *a;
    int lda;
    const void *b;
    int ldb;
    void *c;
    int ldc;
    ao_dtype ab_type; /* A and B */
    ao_dtype c_type;  /* C (and D, in place) */
    ao_compute_mode compute;
    /* Strided batch: batch_count >= 1; strides in elements (0 when batch 1). */
    int batch_count;
    long long stride_a, stride_b, stride_c;
    /* Two-level batch (attention: the heads of each sample): batch_outer > 1
     * groups of batch_count products, product (o, i) at o * outer_stride_x +
     * i * stride_x elements from x. 0 or 1: a single level. cuda runs it as
     * one launch (cuBLASLt pointer arrays, built once per set of addresses)
     * where it can. */
    int batch_outer;
    long long outer_stride_a, outer_stride_b, outer_stride_c;
    /* NULL, or n values of c_type added to every row of C after alpha and
     * beta (a linear layer's bias, in cuBLASLt's epilogue instead of a pass
     * over C; cuBLASLt wants the bias in the output's type); batch_count 1
     * only. */
    const void *bias;
    /* NULL: the result overwrites C. Otherwise the result goes to `d` (same
     * type and ldc as C) and C is only read: alpha op(A) op(B) + beta C
     * lands elsewhere, a residual add in the GEMM's epilogue instead of a
     * pass of its own. batch_count 1 only. */
    void *d;
} ao_gemm_desc;

/* Device-wide GEMM policy (compute.gemm_chunks, compute.sm_count_target):
 * chunks > 1 splits each GEMM into that many launches along m (the seed's
 * "kernel chunking"); sm_count_target > 0 asks cuBLASLt to use that many SMs
 * (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET). alone: no other kernel runs beside
 * the GEMMs (no collective overlaps them), so cuBLASLt may pick kernels that
 * assume every SM (a static tile schedule: no workspace, so no memset before
 * each launch; they lose to its dynamic schedule when a collective holds
 * SMs, bench/RESULTS.md). Ignored by the cpu backend, which says so
 * once for chunks and SMs. */
void ao_gemm_set_policy(ao_device *dev, int chunks, int sm_count_target, int alone);
void ao_gemm(ao_device *dev, ao_stream *s, const ao_gemm_desc *d);
/* Device memory a gpu backend allocates (and ao_dev_mem_usage counts) for
 * each stream that runs GEMMs: cuBLASLt's workspace. */
#define AO_GEMM_WORKSPACE_BYTES ((size_t)32 << 20)

/* ---- profiler ranges ----------------------------------------------------- */

/* NVTX / roctx ranges around an op (no-op on cpu or when disabled). */
void ao_range_push(ao_device *dev, const char *name);
void ao_range_pop(ao_device *dev);
/* Open and close an external profiler's capture range (nsys
 * --capture-range=cudaProfilerApi: cudaProfilerStart/Stop; no-op on cpu).
 * Stop first waits for the device, so the work issued inside the range is
 * captured whole. */
void ao_profiler_start(ao_device *dev);
void ao_profiler_stop(ao_device *dev);

/* ---- for backends only --------------------------------------------------- */

struct ao_device_ops {
    const char *name;
    int (*count)(void);
    void (*version)(char *buf, size_t n);
    ao_device *(*open)(int ordinal);
    void (*close)(ao_device *);
    void (*get_info)(ao_device *, ao_device_info *);
    int (*supports)(ao_device *, ao_dtype);
    void (*sync)(ao_device *);
    void *(*dev_alloc)(ao_device *, size_t);
    void (*dev_free)(ao_device *, void *);
    void (*mem_usage)(ao_device *, size_t *, size_t *); /* NULL: not counted */
    void *(*host_alloc)(ao_device *, size_t);
    void (*host_free)(ao_device *, void *);
    void (*memset_async)(ao_device *, void *, int, size_t, ao_stream *);
    void (*copy_async)(ao_device *, void *, const void *, size_t, ao_copy_kind, ao_stream *);
    void (*copy_sm_async)(ao_device *, void *, const void *, size_t, ao_stream *);
    void (*copy_peer_async)(ao_device *, void *, ao_device *, const void *, size_t, ao_stream *);
    ao_stream *(*stream_create)(ao_device *, const char *, int);
    void (*stream_destroy)(ao_stream *);
    const char *(*stream_name)(ao_stream *);
    int (*stream_priority)(ao_stream *);
    void (*stream_sync)(ao_stream *);
    void (*stream_hold)(ao_stream *);    /* NULL: no-op */
    void (*stream_release)(ao_stream *); /* NULL: no-op */
    ao_event *(*event_create)(ao_device *);
    void (*event_destroy)(ao_event *);
    void (*event_record)(ao_event *, ao_stream *);
    void (*stream_wait_event)(ao_stream *, ao_event *);
    void (*event_sync)(ao_event *);
    int (*event_query)(ao_event *);
    double (*event_elapsed_us)(ao_event *, ao_event *);
    void (*launch_host)(ao_stream *, void (*)(void *), const void *, size_t);
    void (*gemm_set_policy)(ao_device *, int, int, int);
    void (*gemm)(ao_device *, ao_stream *, const ao_gemm_desc *);
    void (*range_push)(ao_device *, const char *);
    void (*range_pop)(ao_device *);
    void (*profiler_start)(ao_device *);
    void (*profiler_stop)(ao_device *);
};

/* Every backend's device, stream and event structs begin with this header, so
 * the dispatch layer can find the ops from any of them. */
struct ao_device_base {
    const struct ao_device_ops *ops;
};

extern const struct ao_device_ops ao_cpu_device_ops;
#ifdef AORTA_HAVE_CUDA
extern const struct ao_device_ops ao_cuda_device_ops; /* in libaorta_cuda.so */
#endif

#endif
