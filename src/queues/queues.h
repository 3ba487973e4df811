/* `aorta queues`: how the number of streams and the device's hardware queues
 * shape concurrency (DESIGN §16).
 *
 * A workload is a small pattern of real device work (GEMMs, short kernels,
 * copies, cross-stream waits) spread over N streams the way frameworks
 * spread it; each op gets an event pair on its own stream. A run repeats it
 * for each stream count and reports iteration latency, throughput, scaling
 * efficiency against one stream, how much of the time several streams ran
 * at once, launch gaps and per-op latencies (qmetrics.h), and records the
 * queue variables in effect. */
#ifndef AORTA_QUEUES_QUEUES_H
#define AORTA_QUEUES_QUEUES_H

#include <stddef.h>

#include "bench/values.h"

#define AO_QUEUES_MAX_STREAMS 64
#define AO_QUEUES_MAX_COUNTS  16

typedef enum ao_qsync {
    AO_QSYNC_PER_ITERATION, /* the host waits for the device after every iteration */
    AO_QSYNC_END_ONLY,      /* device-side barrier between iterations, host waits at the end */
    AO_QSYNC_NONE,          /* no barrier at all: each stream runs its iterations back to back */
} ao_qsync;

int ao_qsync_parse(const char *flag, const char *s, ao_qsync *out);
const char *ao_qsync_name(ao_qsync s);

typedef struct ao_queues_opts {
    const char *workload;
    const char *backend; /* resolved: "cpu", "cuda" */
    int device;
    int streams[AO_QUEUES_MAX_COUNTS];
    int nstreams;
    int iterations, warmup;
    ao_qsync sync;
    int kernel_trace;
    int hold; /* the device waits until an iteration's first ops are enqueued (default) */
    const char *json_path, *csv_path;
    unsigned env_user_mask; /* the queue variables the user set (ao_queues_defaults) */
} ao_queues_opts;

/* Call first: it also notes which queue variables the user set, before the
 * backend is chosen (which may start CUDA and set its own). */
void ao_queues_defaults(ao_queues_opts *o);

/* queues' flags with a value, indexed by ao_queues_flag (see ao_bench_flag):
 * what `aorta queues` parses and what a queues sweep's axes are checked
 * against (besides the workload and `streams`, the sweep's own). */
typedef enum ao_queues_flag {
    AO_QUEUES_F_STREAMS,
    AO_QUEUES_F_ITERATIONS,
    AO_QUEUES_F_WARMUP,
    AO_QUEUES_F_SYNC,
    AO_QUEUES_F_JSON,
    AO_QUEUES_F_CSV,
    AO_QUEUES_F_DEVICE,
    AO_QUEUES_F_BACKEND,
    AO_QUEUES_NFLAGS
} ao_queues_flag;
extern const ao_bench_flag ao_queues_flags[AO_QUEUES_NFLAGS];

/* "1,2,4" -> o->streams; 0, or -1 after printing why (naming `flag`). */
int ao_queues_parse_streams(const char *flag, const char *s, ao_queues_opts *o);

/* The workloads: name and one line each, in `aorta queues list` order. */
int ao_queues_workload_count(void);
const char *ao_queues_workload_name(int i);
const char *ao_queues_workload_help(int i);
/* 0 when `name` is a workload, else -1 after printing the allowed names. */
int ao_queues_workload_check(const char *flag, const char *name);

/* Run every stream count; prints the table, writes --json/--csv. Exit code. */
int ao_queues_run(const ao_queues_opts *o);

/* `aorta queues compare A.json B.json`: per stream count in both, the
 * iteration latency, throughput and concurrency of B against A with
 * bootstrap 95 % CIs and verdicts (report/compare's rule). Exit code. */
int ao_queues_compare(const char *ref_path, const char *cand_path, const char *json_out);

#endif
