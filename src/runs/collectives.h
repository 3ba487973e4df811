/* Collectives across ranks (DESIGN §14 "Collectives across ranks"): every
 * collective of a multi-rank run, trace or attach, matched across the ranks
 * that ran it, with who arrived last, how long the others waited for it, how
 * long the transfer took once all had arrived, and what held the late rank.
 *
 * Sources give per-rank entries (ingest/xrank.c from traces, coll_records.c
 * from the records' op lists of aorta train and attach); ao_coll_match lines
 * them up by (step, communicator, sequence number in it); the late rank's
 * windows are then broken down by its own timeline (ao_late_breakdown);
 * collectives.jsonl holds the result, one line per collective, and every
 * reader of a run directory (rundata, summary, diagnose, the report) reads it
 * back through ao_coll_read. Memory is the entries, ranks x collectives. */
#ifndef AORTA_RUNS_COLLECTIVES_H
#define AORTA_RUNS_COLLECTIVES_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>

#include "core/intervals.h"
#include "core/metrics.h"

#define AO_COLLECTIVES_FILE   "collectives.jsonl"
#define AO_COLLECTIVES_SCHEMA 1

/* The pass that issued a collective, from the host's context (trace ranges,
 * or the op order of aorta's own records). */
typedef enum ao_pass {
    AO_PASS_UNKNOWN,
    AO_PASS_FORWARD,
    AO_PASS_BACKWARD,
    AO_PASS_OPTIMIZER,
    AO_NPASSES
} ao_pass;
const char *ao_pass_name(ao_pass p); /* "unknown", "forward", "backward", "optimizer" */

/* What the late rank's timeline held while the others waited for it. */
typedef enum ao_late_cause {
    AO_CAUSE_HOST_WAIT,   /* its device ran dry: nothing launched */
    AO_CAUSE_DATA_WAIT,   /* ran dry while its host waited for the data loader */
    AO_CAUSE_COMPUTE,     /* its own compute kernels and copies */
    AO_CAUSE_DEVICE_WAIT, /* idle with work queued: a stream waiting on an event */
    AO_CAUSE_COLLECTIVE,  /* in another collective (its previous one, waiting in turn) */
    AO_CAUSE_UNKNOWN,     /* outside what the records cover */
    AO_NCAUSES
} ao_late_cause;
/* "host_wait", "data_wait", "compute", "device_wait", "collective", "unknown" */
const char *ao_late_cause_name(ao_late_cause c);
/* The cause with the most time in us[]; AO_CAUSE_UNKNOWN when none has any. */
ao_late_cause ao_late_cause_top(const double us[AO_NCAUSES]);

/* One rank's sighting of a collective, as a source's extractor gives it. */
typedef struct ao_coll_entry {
    long long step;     /* -1: outside every step */
    long long seq;      /* the communicator's own number for it, -1: its order there */
    int32_t op_index;   /* index into that step's record ops, -1 none */
    int32_t group;      /* communicator name (a string id of the rank), -1 unknown */
    int32_t op, dtype;  /* "_allgather_base", "BFloat16": string ids, -1 unknown */
    int32_t unit;       /* the layer or FSDP unit that issued it: string id, -1 unknown */
    int32_t group_size; /* ranks in the communicator, -1 unknown */
    uint8_t pass;       /* ao_pass */
    const char *kind;   /* static: "allgather", "reducescatter", "allreduce", ... */
    uint64_t bytes;     /* nccl-tests' size (AG: output, RS: input, AR: buffer); 0 unknown */
    int64_t count;      /* elements of that size, -1 unknown */
    double issue_us;    /* the host's issue, NAN unknown; all on the run's common axis */
    double start_us, end_us;
} ao_coll_entry;

/* One rank's entries, in issue order, and their strings. */
typedef struct ao_coll_rank {
    int rank;
    ao_coll_entry *v;
    size_t n, cap;
    char **strs;
    size_t nstrs, cap_strs;
} ao_coll_rank;

/* The id of s in r's strings (added once); -1 for NULL. */
int32_t ao_coll_rank_str(ao_coll_rank *r, const char *s);
/* A new entry, zeroed but for -1 ids, seq, op_index, count, group_size and
 * a NAN issue. */
ao_coll_entry *ao_coll_rank_add(ao_coll_rank *r);
void ao_coll_rank_free(ao_coll_rank *r);

/* A rank's part of an instance. */
typedef struct ao_coll_member {
    int rank;
    int32_t op_index; /* into its record of the step, -1 none */
    double issue_us, start_us, end_us;
} ao_coll_member;

/* One collective across the ranks that ran it. Strings are the set's. */
typedef struct ao_coll_instance {
    long long step, seq; /* seq: the communicator's number, else the order in it */
    const char *group;   /* NULL: the trace names no communicator (matched by kind) */
    const char *op, *kind, *dtype, *unit;
    uint8_t pass;
    uint8_t consistent; /* every member of the same kind and size */
    uint8_t complete;   /* every rank of the communicator present */
    uint8_t aligned;    /* no member ended before the last one started */
    int group_size;     /* -1 unknown */
    uint64_t bytes;
    int64_t count;
    size_t first, n; /* members[first .. first + n), by rank */
    int late_rank;   /* the last to start; -1 with one member or none later than another */
    double first_start_us, last_start_us, last_end_us;
    double skew_us;                /* last start - first start */
    double transfer_us;            /* last end - last start */
    double algbw_gbps, busbw_gbps; /* bytes over the transfer time; NAN unknown */
    /* The late rank's timeline while the others waited (its window, clipped
     * where an earlier late window of the same rank covers it); NAN before
     * ao_coll_set_breakdowns fills it. */
    double cause_us[AO_NCAUSES];
} ao_coll_instance;

typedef struct ao_coll_set {
    ao_coll_instance *inst; /* by step, then first start */
    size_t ninst;
    ao_coll_member *members;
    size_t nmembers;
    char **strs; /* owned, interned */
    size_t nstrs, cap_strs;
    int nranks; /* ranks that gave entries */
    size_t inconsistent, partial, misaligned, single;
    char clock[200]; /* how the ranks' times were put on one axis */
} ao_coll_set;

/* Match ranks[0..n)'s entries into instances: the key is (step, group or,
 * when unknown, kind, seq or the entry's order among its rank's entries of
 * that step and group). Fills every field but cause_us (NAN). */
void ao_coll_match(const ao_coll_rank *ranks, size_t n, ao_coll_set *out);
void ao_coll_set_free(ao_coll_set *s);
/* The set's copy of s (interned); NULL for NULL. */
const char *ao_coll_set_str(ao_coll_set *s, const char *str);

/* ---- why the late rank was late ------------------------------------------- */

/* A window of one rank's timeline to break down: instance inst, [a, b),
 * and when the rank issued that collective (NAN unknown). */
typedef struct ao_late_window {
    size_t inst;
    double a, b, issued;
} ao_late_window;

/* The windows of instances where `rank` was late, in its start order: each
 * [first start, its own start), clipped to begin where its previous one
 * ended, so that an instant of its timeline is counted once. */
size_t ao_coll_late_windows(const ao_coll_set *s, int rank, ao_late_window **out);

/* What held a late rank's collective in [a, b) (it started at b; the
 * others had started by a). Until `issued` (the rank's host issued it; NAN
 * unknown) the collective waited for the host: host wait, or data wait
 * where the host was inside one of data[0..ndata) (normalized). After it,
 * what the device ran instead: compute and copies, another collective, or
 * nothing while work was queued (a stream waiting on an event: device wait;
 * this collective counts as queued from `issued`). Without an issue time,
 * idle with nothing queued is host wait. Before cover_from the ops say
 * nothing: unknown. ops in any order; an op without has_issue queues
 * nothing. */
void ao_late_breakdown(const ao_op *ops, size_t n, const ao_ival *data, size_t ndata, double a,
                       double b, double issued, double cover_from, double us[AO_NCAUSES]);

/* ao_late_breakdown over a long timeline: ops sorted by start, and the
 * longest op and queueing delay, so that a window looks only at the ops
 * that can reach into it. */
typedef struct ao_ops_index {
    const ao_op *ops;
    size_t n;
    double max_dur, max_queue;
} ao_ops_index;
void ao_ops_index_init(ao_ops_index *x, const ao_op *ops, size_t n);
void ao_ops_index_breakdown(const ao_ops_index *x, const ao_ival *data, size_t ndata,
                            const ao_late_window *w, double offset, double cover_from,
                            double us[AO_NCAUSES]);

/* ---- collectives.jsonl ------------------------------------------------------ */

/* Write the set, one line per instance, to path (not there before). 0, or
 * AO_EXIT_FAIL after printing why. */
int ao_coll_write(const char *path, const ao_coll_set *s);
/* Read it back. 0; AO_EXIT_USAGE after one error naming the file, line and
 * key. */
int ao_coll_read(const char *path, ao_coll_set *out);

/* ---- per step and per rank --------------------------------------------------- */

/* Who waited for whom in a step. */
typedef struct ao_coll_step {
    long long step;
    int late_rank;               /* the rank the others waited for most; -1 none */
    double late_cost_ms;         /* the time they waited for it, mean over the other ranks */
    double cause_ms[AO_NCAUSES]; /* the late rank's windows in the step */
    double max_skew_us;
    size_t instances;
} ao_coll_step;

typedef struct ao_coll_rank_stats {
    int rank;
    size_t late;                 /* instances it was last at */
    double cost_ms;              /* the time the others waited for it, all steps (mean over them) */
    double waited_ms;            /* the time it waited for others in collectives, all steps */
    double cause_ms[AO_NCAUSES]; /* its late windows, all steps */
    double cost_step_med_ms;     /* the median over steps of its cost a step (0 where none) */
} ao_coll_rank_stats;

typedef struct ao_coll_summary {
    ao_coll_step *steps;
    size_t nsteps;
    ao_coll_rank_stats *ranks; /* [nranks], by rank */
    int nranks;
    int waited_for; /* the rank the others waited for most over the run; -1 none */
} ao_coll_summary;

/* nranks: the run's ranks (ranks >= it are ignored). */
void ao_coll_summarize(const ao_coll_set *s, int nranks, ao_coll_summary *out);
void ao_coll_summary_free(ao_coll_summary *s);

/* summary.json's "collectives" block: counts, the clock, per rank and per
 * step, as one object into g (key already written). */
yajl_gen_status ao_coll_summary_gen(yajl_gen g, const ao_coll_set *s, const ao_coll_summary *sum);

#endif
