/* Format-blind analysis of one rank's trace (ingest/trace.h): every device
 * activity classified (communication with its collective kind, copy,
 * compute), attributed to a step, and each step's DESIGN §7 metrics computed
 * by core/metrics over the union of the rank's intervals, plus what HTA
 * users expect beside them (idle split into host wait and the rest, exposed
 * time per collective kind, a kernel breakdown) and HTA's own whole-trace
 * numbers under HTA's conventions.
 *
 * Classification: a kernel is communication when its name starts with
 * "nccl" or "rccl" or holds "ncclDevKernel"/"ncclKernel", or matches the
 * user's --comm pattern; memcpy and memset activity is copy; every other
 * kernel is compute. A trace that states an op's class (aorta's own) is
 * taken at its word.
 *
 * Steps: host ranges whose name matches the step pattern (default
 * "^ProfilerStep#([0-9]+)"; the first group, when it is all digits, is the
 * step number). An activity belongs to the step whose range holds the start
 * of the launch call that issued it (correlation id), as HTA assigns
 * kernels to iterations; activities whose launch is unknown belong to no
 * step. A trace without launch records attributes by the activity's own
 * start; one without step ranges is one window (step 0). */
#ifndef AORTA_INGEST_ANALYZE_H
#define AORTA_INGEST_ANALYZE_H

#include <regex.h>
#include <stddef.h>

#include <yajl/yajl_gen.h>

#include "core/metrics.h"
#include "ingest/trace.h"
#include "timeline/contention.h"

/* Collective kinds for exposure, finer than ao_coll_kind (whose first four
 * they repeat in order). */
typedef enum ao_xkind {
    AO_X_ALLGATHER,
    AO_X_REDUCESCATTER,
    AO_X_ALLREDUCE,
    AO_X_BROADCAST,
    AO_X_SENDRECV,
    AO_X_ALLTOALL,
    AO_X_OTHER,
    AO_NXKINDS
} ao_xkind;
const char *ao_xkind_name(ao_xkind k);
/* The kind a collective kernel's name says ("ncclDevKernel_AllGather_RING_LL",
 * "ncclKernel_SendRecv", ...); AO_X_OTHER when it says none (RCCL's generic
 * kernels). */
ao_xkind ao_xkind_of_name(const char *name);

typedef struct ao_classifier {
    regex_t step, comm;
    int have_comm;
    int default_step; /* the ProfilerStep pattern (no --step) */
} ao_classifier;

/* step_regex NULL: ProfilerStep#N; comm_regex NULL: none. Returns 0, or
 * AO_EXIT_USAGE after an error naming the flag. */
int ao_classifier_init(ao_classifier *c, const char *step_regex, const char *comm_regex);
void ao_classifier_free(ao_classifier *c);

/* The class of a, and with AO_CLASS_COMM its kind in *xkind. */
ao_op_class ao_classify(const ao_classifier *c, const ao_activity *a, ao_xkind *xkind);

typedef struct ao_step_result {
    long long step;
    ao_overlap m;                       /* m.host_wait_ms: the idle time in which nothing was
                                           launched (§7, issue = the end of the launch call);
                                           NAN when the trace has no launch records */
    double idle_other_ms;               /* m.idle_ms - m.host_wait_ms: idle with work queued */
    double comm_kind_ms[AO_NXKINDS];    /* |M_k| */
    double exposed_kind_ms[AO_NXKINDS]; /* |M_k \ C| */
    ao_op *ops;                         /* the step's activities as ops (names in the trace) */
    size_t nops;
    /* The price of overlap (timeline/contention.h) against the whole trace's
     * alone kernels, each launch by its own stream; set when the step ran a
     * collective. */
    int has_contention;
    ao_contention_step contention;
} ao_step_result;

typedef struct ao_kernel_stat {
    const char *name; /* in the trace's pool */
    int8_t cls, xkind;
    size_t count;
    double total_us, max_us;
} ao_kernel_stat;

/* HTA 0.5.0's get_comm_comp_overlap and get_temporal_breakdown for one rank,
 * reproduced with its conventions: times rounded to whole microseconds (start
 * up, end down), GPU work launched at or after the last ProfilerStep's start
 * dropped, memcpy/memset neither compute nor communication, its own name
 * patterns. */
typedef struct ao_hta_values {
    int valid;
    double overlap_pct; /* NAN without communication */
    double idle_us, compute_us, non_compute_us, kernel_us;
} ao_hta_values;

/* A communication activity and where its op sits in the records, for the
 * cross-rank matching (ingest/xrank.h, runs/collectives.h). */
typedef struct ao_comm_act {
    size_t act;       /* index into the trace's acts */
    long long step;   /* its step's number, -1 outside every step */
    int32_t op_index; /* index into that step's ops, -1 outside every step */
    int8_t xkind;     /* ao_xkind */
    double launch_us; /* start of its launch call, NAN unknown */
    double issue_us;  /* end of it: when the work was in the queue; NAN unknown */
    int64_t tid;      /* the launching thread, -1 unknown */
} ao_comm_act;

typedef struct ao_rank_result {
    int rank;
    const ao_trace *trace;
    ao_step_result *steps; /* by step number */
    size_t nsteps;
    ao_step_result total; /* every activity, one window; its ops sorted by start */
    ao_comm_act *comms;   /* every communication activity, in launch order */
    size_t ncomms;
    size_t unattributed;     /* activities in no step */
    int stepless;            /* no step range: one window */
    ao_kernel_stat *kernels; /* by total time, longest first */
    size_t nkernels;
    double class_us[3]; /* summed durations per ao_op_class */
    ao_hta_values hta;
} ao_rank_result;

/* Analyse one trace (kept alive by the caller while out is used). world_size
 * sets busbw factors. Returns 0, or AO_EXIT_USAGE after one error line. */
int ao_analyze_trace(const ao_trace *t, const ao_classifier *c, int world_size,
                     ao_rank_result *out);
void ao_rank_result_free(ao_rank_result *r);

/* The numbers beside §7 that every step record's "extra" has (host wait,
 * idle otherwise, communication and exposure by collective kind, and the
 * contention when the step has it), as key/value pairs into an open map;
 * `aorta attach` writes them too. */
yajl_gen_status ao_step_result_gen_extra(yajl_gen g, const ao_step_result *r);

/* HTA's numbers for t (exposed for tests). */
void ao_hta_compute(const ao_trace *t, ao_hta_values *out);

#endif
