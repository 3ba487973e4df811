/* One rank's profiler trace, whatever tool wrote it (PyTorch/Kineto JSON,
 * rocprofv3 CSV or rocpd SQLite, an `nsys export --type sqlite` database,
 * aorta's own trace.json), reduced to what DESIGN §7 needs: the device's
 * activity (kernels, copies, memsets), the host's annotation ranges (steps),
 * and the host launch calls that tie the two together.
 *
 * Each reader fills an ao_trace; everything after reading (classification,
 * step windows, per-step metrics, the run directory) is format-blind and
 * lives in ingest/analyze.c, so `aorta analyze` and `aorta attach` share it.
 *
 * Times are microseconds on the trace's own clock (Kineto's "ts", or a
 * reader's nanoseconds / 1000); only differences matter. Strings are interned
 * in the trace's pool (ao_trace_intern) and live as long as the trace. */
#ifndef AORTA_INGEST_TRACE_H
#define AORTA_INGEST_TRACE_H

#include <stddef.h>
#include <stdint.h>

typedef enum ao_act_kind { AO_ACT_KERNEL, AO_ACT_MEMCPY, AO_ACT_MEMSET } ao_act_kind;

/* One thing the device ran. */
typedef struct ao_activity {
    double start_us, end_us;
    uint64_t bytes;      /* copies and memsets; 0 for kernels */
    const char *name;    /* kernel name (demangled where the tool gives it), or "Memcpy HtoD" ... */
    int64_t correlation; /* id of the host launch that issued it; -1 when unknown */
    uint32_t device;     /* device ordinal as the trace names it */
    uint32_t stream;     /* stream / queue id as the trace names it */
    uint8_t kind;        /* ao_act_kind */
    /* What the trace itself says, where it says it (aorta's own trace.json);
     * -1 otherwise, which the appender sets: classify by name, attribute to a
     * step through the launch. */
    int8_t cls;       /* ao_op_class */
    int8_t coll_kind; /* ao_coll_kind of a communication op */
    int32_t coll;     /* index into the trace's coll_args, -1 when the trace names none */
    int64_t step;
} ao_activity;

/* What a trace says of a collective kernel beyond its name (Kineto's NCCL
 * kernel args; DESIGN §14 "Collectives across ranks"). Strings are interned;
 * NULL and -1 when absent. */
typedef struct ao_coll_args {
    const char *op;                /* "Collective name": "_allgather_base", "allreduce" */
    const char *group;             /* "Process Group Name": "0" */
    const char *group_desc;        /* "Process Group Description": "default_pg" */
    const char *group_ranks;       /* "Process Group Ranks": "[0, 1]" (global ranks) */
    const char *dtype;             /* "dtype": "BFloat16", "Float" */
    int64_t in_nelems, out_nelems; /* "In msg nelems", "Out msg nelems" */
    int64_t group_size;            /* "Group size" */
    int64_t seq;                   /* "Seq": the collective's number in its group */
} ao_coll_args;

/* A host-side range: a CPU annotation (`ProfilerStep#3`, a user's
 * record_function), an NVTX or roctx range. */
typedef struct ao_range {
    double start_us, end_us;
    const char *name;
    int64_t tid;       /* host thread; -1 when unknown */
    uint8_t on_device; /* a device-side copy of an annotation (Kineto's gpu_user_annotation):
                          never a step window; HTA's step filter counts it */
    uint8_t context;   /* a host range kept only as the context of launches (autograd's
                          evaluate_function ops): never a step window */
} ao_range;

/* A host launch call (cudaLaunchKernel, hipMemcpyAsync, ...): correlation
 * ties it to the activity it issued. It gives steps their GPU work (an
 * activity belongs to the step whose range holds its launch, as HTA does)
 * and splits idle time into waiting on the host (the launch came after the
 * device had run dry) and the rest. */
typedef struct ao_launch {
    double start_us, end_us;
    int64_t correlation;
    int64_t tid;
} ao_launch;

typedef struct ao_trace_meta {
    const char *key, *value; /* "device_name" "NVIDIA H200", "pytorch" "2.11.0", ... */
} ao_trace_meta;

typedef struct ao_trace {
    const char *path;   /* the file read */
    const char *format; /* "kineto", "rocprof-csv", "rocpd", "nsys", "aorta" */
    int rank;           /* from the trace (distributedInfo.rank, ...), else -1 */
    int world_size;     /* from the trace, else -1 */
    ao_activity *acts;
    size_t nacts, cap_acts;
    ao_range *ranges;
    size_t nranges, cap_ranges;
    ao_launch *launches;
    size_t nlaunches, cap_launches;
    ao_trace_meta *meta;
    size_t nmeta, cap_meta;
    ao_coll_args *coll_args; /* indexed by ao_activity.coll */
    size_t ncoll_args, cap_coll_args;
    struct ao_trace_pool *pool; /* interned strings */
} ao_trace;

void ao_trace_init(ao_trace *t, const char *path, const char *format);
void ao_trace_free(ao_trace *t);

/* The pool's copy of s[0..len) (len (size_t)-1: strlen), one per distinct
 * string, so names compare by pointer once interned. */
const char *ao_trace_intern(ao_trace *t, const char *s, size_t len);

/* Appenders; each returns the new element, zeroed except an activity's
 * correlation, cls, coll_kind, coll and step (-1) and a range's and a launch's tid
 * (-1), growing the array geometrically. */
ao_activity *ao_trace_add_activity(ao_trace *t);
ao_range *ao_trace_add_range(ao_trace *t);
ao_launch *ao_trace_add_launch(ao_trace *t);
/* A collective's args for activity a (a->coll set to its index); every
 * field NULL / -1. */
ao_coll_args *ao_trace_add_coll_args(ao_trace *t, ao_activity *a);
/* An estimate of the heap bytes t holds (arrays and strings). */
size_t ao_trace_bytes(const ao_trace *t);
/* key and value are interned. A later value for the same key wins. */
void ao_trace_set_meta(ao_trace *t, const char *key, const char *value);
const char *ao_trace_get_meta(const ao_trace *t, const char *key);

/* ---- readers: each fills a fresh trace (ao_trace_init done by the reader);
 * returns 0, or AO_EXIT_USAGE after ONE error line naming the file and the
 * byte offset, row or field (truncated file, wrong type, no device activity,
 * not this format). On error the trace is freed. -------------------------- */

typedef enum ao_trace_format {
    AO_TRACE_AUTO,
    AO_TRACE_KINETO,      /* PyTorch profiler Chrome-trace JSON, plain or .gz */
    AO_TRACE_ROCPROF_CSV, /* rocprofv3 --output-format csv: its *_kernel_trace.csv (siblings read
                             too) */
    AO_TRACE_ROCPD,       /* rocprofv3 rocpd SQLite database */
    AO_TRACE_NSYS,        /* nsys export --type sqlite */
    AO_TRACE_AORTA,       /* aorta's own trace.json (Chrome trace, ops as events) */
} ao_trace_format;

const char *ao_trace_format_name(ao_trace_format f);
/* Parses "auto", "kineto", "rocprof", "rocpd", "nsys", "aorta"; -1 when unknown. */
int ao_trace_format_parse(const char *s);
/* The format of `path` by its name and first bytes (gzip magic, '{',
 * "SQLite format 3", CSV header); AO_TRACE_AUTO when it cannot tell. */
ao_trace_format ao_trace_detect(const char *path);

int ao_read_kineto(const char *path, ao_trace *out);
int ao_read_rocprof_csv(const char *path, ao_trace *out);
int ao_read_rocpd(const char *path, ao_trace *out);
int ao_read_nsys(const char *path, ao_trace *out);
int ao_read_aorta_trace(const char *path, int rank, ao_trace *out);

/* Dispatch on fmt (AO_TRACE_AUTO: ao_trace_detect, an error when it cannot
 * tell). */
int ao_trace_read(const char *path, ao_trace_format fmt, ao_trace *out);

#endif
