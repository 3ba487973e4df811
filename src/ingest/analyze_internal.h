/* Shared by analyze_run.c (finding, reading and lining up the ranks) and
 * analyze_write.c (the run directory's files); ingest/ only. */
#ifndef AORTA_INGEST_ANALYZE_INTERNAL_H
#define AORTA_INGEST_ANALYZE_INTERNAL_H

#include <stddef.h>

#include "core/rundir.h"
#include "ingest/analyze.h"
#include "ingest/analyze_run.h"
#include "runs/collectives.h"

/* What a rank keeps between the two passes when its trace is not kept: its
 * steps' times, for the per-step slowest rank. */
typedef struct step_brief {
    long long step;
    double step_ms, own_ms; /* own: compute + host wait */
} step_brief;

typedef struct job {
    char *path;
    ao_trace_format fmt;
    int aorta_rank;  /* AO_TRACE_AORTA: the rank to read */
    int rank;        /* in the run directory, 0..n-1 */
    int trace_rank;  /* as the trace or file name says, -1 unknown */
    int said_rank;   /* the trace's own rank (ao_trace.rank), kept past freeing it */
    int world_size;  /* the trace's, -1 unknown */
    char *device;    /* its device name, or NULL */
    double first_us; /* its earliest activity, the trace's clock */
    size_t unattributed;
    int stepless;
    step_brief *steps;
    size_t nsteps;
    /* the whole-trace numbers summary.json and the tables show */
    ao_step_result total; /* no ops */
    double class_us[3];
    ao_kernel_stat *top; /* the longest kernels, names in the run's pool */
    size_t ntop;
    ao_hta_values hta;
    ao_coll_rank coll; /* its collectives, the trace's clock until the origin is known */
    ao_trace trace;    /* valid while `kept` */
    ao_rank_result res;
    int rc, kept;
} job;

typedef struct step_cmp {
    long long step;
    int slowest, fastest;
    const char *by; /* "waited_for", "own_time" */
    double slowest_ms, fastest_ms;
} step_cmp;

typedef struct run_ctx {
    const ao_analyze_run_opts *o;
    job *jobs;
    size_t n;
    int world_size;
    double origin_us; /* earliest activity of any rank: time 0 in the files */
    step_cmp *cmp;
    size_t ncmp;
    ao_coll_set coll; /* matched across the ranks (empty with one) */
    ao_coll_summary coll_sum;
    const char *format_name;
    /* run.json's versions, from the first rank's trace */
    char **version_keys, **version_values;
    size_t nversions;
    ao_rundir dir;
} run_ctx;

#define AO_ANALYZE_TOP_KERNELS 20

/* analyze_write.c */
int ao_analyze_write_run_json(const run_ctx *c);
int ao_analyze_write_rank(const run_ctx *c, const job *j);
int ao_analyze_write_summary(run_ctx *c);
void ao_analyze_print_tables(FILE *out, const run_ctx *c);

#endif
