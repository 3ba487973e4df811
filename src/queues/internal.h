/* What the queues files share: the plan of one iteration (workloads.c), the
 * spin kernel (spin.c) and one stream count's results (run.c -> output.c). */
#ifndef AORTA_QUEUES_INTERNAL_H
#define AORTA_QUEUES_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

#include "core/stats.h"
#include "queues/qmetrics.h"
#include "queues/queues.h"
#include "runtime/device.h"

typedef enum ao_qkind { AO_Q_GEMM, AO_Q_SPIN, AO_Q_COPY } ao_qkind;

typedef struct ao_qshape {
    int m, n, k;
} ao_qshape;

/* One op of an iteration, in host issue order. */
typedef struct ao_qplan_op {
    int stream;
    ao_qkind kind;
    const char *name; /* its class in the per-op table: "gemm", "tiny", "allgather", ... */
    int shape;        /* AO_Q_GEMM: index into plan->shapes */
    double spin_us;   /* AO_Q_SPIN */
    size_t bytes;     /* AO_Q_COPY */
    ao_copy_kind copy;
    int dep0, ndeps; /* ops it waits for (earlier, on other streams): plan->deps[dep0 ..] */
} ao_qplan_op;

#define AO_QMAX_SHAPES 4
#define AO_QMAX_NAMES  8

typedef struct ao_qplan {
    int nstreams;
    ao_qplan_op *ops;
    int nops;
    int *deps;
    int ndeps;
    ao_qshape shapes[AO_QMAX_SHAPES];
    int nshapes;
    const char *names[AO_QMAX_NAMES]; /* distinct op names, first issued first */
    int nnames;
    const char *note; /* what the record should say about the pattern, or NULL */
} ao_qplan;

/* The ops of one iteration of `workload` on `streams` streams; sizes for a
 * GPU, or scaled down for the cpu backend (cpu != 0). */
void ao_qplan_make(const char *workload, int streams, int cpu, ao_qplan *p);
void ao_qplan_free(ao_qplan *p);
int ao_qplan_name_index(const ao_qplan *p, const char *name);

/* A kernel that keeps one block busy for `us` microseconds (the device's own
 * timer; the cpu backend spins the stream's thread): one table per device
 * backend (runtime/backend_table.h), cuda's in libaorta_cuda.so. */
struct ao_qspin_backend {
    const char *device_backend;
    void (*spin)(ao_stream *s, double us);
};
extern const struct ao_qspin_backend ao_qspin_cpu_backend;
/* dev's table; NULL after an error when its backend has none. */
const struct ao_qspin_backend *ao_qspin_for(ao_device *dev);

/* ---- one stream count's results ------------------------------------------- */

typedef struct ao_qname_stats {
    const char *name;
    size_t n;
    ao_stats_summary dur, lat; /* duration end - start, latency end - ready (µs) */
    double lat_p95;
} ao_qname_stats;

typedef struct ao_qresult {
    int streams;
    int ops_per_iter;
    double *latency_us; /* per measured iteration */
    double *concurrency;
    int iterations;
    ao_stats_summary lat;
    double lat_p95;
    double span_us;        /* |∪ iteration windows| */
    double throughput;     /* ops / s over the span */
    double per_stream;     /* throughput / streams */
    double efficiency;     /* against the run's one-stream throughput; NAN without one */
    ao_qunion u;           /* over every measured op */
    double conc_iter_mean; /* mean of the per-iteration concurrency */
    size_t nintra, ninter;
    ao_stats_summary intra, inter; /* launch gaps (µs) */
    double intra_p95, inter_p95;
    ao_qname_stats names[AO_QMAX_NAMES];
    int nnames;
    /* --kernel-trace: the same union over CUPTI's kernels of the span. */
    int have_kernels;
    size_t kernels;
    ao_qunion ku;
    double conc_diff_pct; /* (kernels - events) / events, in percent */
} ao_qresult;

void ao_qresult_free(ao_qresult *r);

/* ---- output ------------------------------------------------------------------ */

typedef struct ao_qenv {
    char **names, **values; /* the queue variables in effect */
    int n;
    char **set_by_aorta; /* the ones aorta set because the user had not */
    int nset;
} ao_qenv;

/* Which of the always-listed variables the user set, read before anything
 * can touch the device (ao_queues_defaults: choosing the backend already
 * opens CUDA, which sets 32 connections unless set); then the variables in
 * effect, those set since marked as aorta's. */
unsigned ao_qenv_user_mask(void);
void ao_qenv_effective(unsigned user_mask, ao_qenv *eff);
void ao_qenv_free(ao_qenv *e);

typedef struct ao_table ao_table;
typedef struct ao_column ao_column;

typedef struct ao_qrun {
    const ao_queues_opts *o;
    const char *device_name, *backend;
    ao_qenv env;
    const char *note;                 /* the plan's */
    const char *names[AO_QMAX_NAMES]; /* the plan's op names */
    int nnames;
    ao_qresult *res;
    int nres;
    /* The table: text, CSV (output.c) */
    ao_table *t;
    ao_column *cols;
    int ncols;
} ao_qrun;

/* The table's columns and header; then a row per finished count (printed
 * and kept for --csv); the footer (per-op latencies, kernel check). */
void ao_qtable_header(ao_qrun *r, FILE *out);
void ao_qtable_row(ao_qrun *r, const ao_qresult *q, FILE *out);
void ao_qtable_footer(const ao_qrun *r, FILE *out);
void ao_qtable_free(ao_qrun *r);
int ao_qwrite_json(const ao_qrun *r, const char *path);
int ao_qwrite_csv(const ao_qrun *r, const char *path);

#endif
