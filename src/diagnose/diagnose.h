/* What bounds a step (DESIGN §13): from the records of one run directory,
 * a classification with the numbers that decide it, findings ranked by the
 * time they cost per step (where, the knobs that move them, an expected-gain
 * bound from the measured terms), sanity flags on the measurement itself,
 * and the limitations of what the records allow.
 *
 * Input is only what `aorta train`, `aorta analyze` or `aorta attach` wrote
 * (runs/rundata.h): a record without data_wait_ms, host_wait_ms, ops or
 * baselines limits what can be said, named in `limitations`; it never
 * fails. `aorta diagnose`, `aorta train`'s final table and `aorta report`
 * call the same functions. */
#ifndef AORTA_DIAGNOSE_DIAGNOSE_H
#define AORTA_DIAGNOSE_DIAGNOSE_H

#include <stddef.h>
#include <stdio.h>

#include <yajl/yajl_gen.h>

#include "diagnose/for_run.h"
#include "runs/rundata.h"

typedef enum ao_bound {
    AO_BOUND_COMPUTE,
    AO_BOUND_COMM,      /* communication-exposed */
    AO_BOUND_INPUT,     /* waiting for the data loader */
    AO_BOUND_HOST,      /* the device ran dry waiting for the host's launches */
    AO_BOUND_MEMORY,    /* needs kernel-level counters: never concluded from records */
    AO_BOUND_STRAGGLER, /* one rank is slower; the others wait in collectives */
    AO_BOUND_BALANCED,
    AO_BOUND_UNKNOWN,    /* no step with the ops' breakdown */
    AO_BOUND_CONTENTION, /* compute slowed by the collectives beside it */
} ao_bound;
/* "compute-bound", "communication-exposed", "input-bound", ... */
const char *ao_bound_name(ao_bound b);

/* Thresholds, one place (printed with the classification). */
#define AO_DIAG_FINDING_SHARE 0.05 /* a finding costs at least this share of the step */
#define AO_DIAG_BOUND_SHARE   0.10 /* the largest finding bounds the step from this share */
#define AO_DIAG_COMPUTE_SHARE 0.80 /* compute-bound: compute fills this share of the step */
#define AO_DIAG_MIN_STEPS     10   /* fewer kept steps per rank is flagged */
#define AO_DIAG_SPREAD        1.5  /* p90 / median step above this is high variance */
#define AO_DIAG_OUTLIER       1.25 /* a step this many times the median is looked at alone */

typedef enum ao_finding_kind {
    AO_FIND_INPUT,
    AO_FIND_HOST,
    AO_FIND_STRAGGLER,
    AO_FIND_EXPOSED_ALLGATHER,
    AO_FIND_EXPOSED_REDUCESCATTER,
    AO_FIND_EXPOSED_ALLREDUCE,
    AO_FIND_EXPOSED_BROADCAST,
    AO_FIND_DEVICE_WAIT,     /* idle with work queued: a cross-stream dependency */
    AO_FIND_CONTENTION,      /* compute kernels slower beside collectives than alone */
    AO_FIND_LATE_RANK,       /* the others wait for one rank at collectives (late.c) */
    AO_FIND_COLLECTIVE_SKEW, /* arrival skew no single late rank explains */
    AO_FIND_SLOW_TRANSFER,   /* busbw well under `aorta coll`'s at that size (--coll-ref) */
} ao_finding_kind;
/* "input_wait", "host_launch", "straggler", "exposed_allgather", ...,
 * "late_rank", "collective_skew", "slow_transfer" */
const char *ao_finding_id(ao_finding_kind k);

typedef struct ao_finding {
    ao_finding_kind kind;
    double ms;      /* median time it costs per step */
    double share;   /* ms / median step */
    int rank;       /* the rank it was measured on (the critical one), -1 for all */
    char what[200]; /* "exposed all-gather: 2.1 ms a step" */
    char where[360];
    char evidence[640];
    char knobs[800]; /* the knobs that move it, best first, with the source */
    char gain[240];  /* the expected-gain bound */
    int cause;       /* late_rank: its ao_late_cause; -1 otherwise */
} ao_finding;

typedef struct ao_diag_note {
    char id[32];
    char text[300];
} ao_diag_note;

typedef struct ao_diagnosis {
    char *run_id, *dir;
    int world_size, nranks, critical_rank;
    size_t steps; /* kept train steps of the critical rank */
    ao_bound bound;
    char bound_why[400];
    /* medians per step on the critical rank (NAN when unknown) */
    double step_ms, compute_ms, exposed_comm_ms, idle_ms, host_wait_ms, data_wait_ms, gap_ms;
    ao_finding *findings; /* ranked, costliest first; only those >= the finding share */
    size_t nfindings;
    ao_diag_note *flags; /* sanity flags on the measurement */
    size_t nflags;
    ao_diag_note *limits; /* what the records do not allow to say */
    size_t nlimits;
    ao_diag_note *outliers; /* steps far from the median and what made them so */
    size_t noutliers;
} ao_diagnosis;

/* `aorta coll --json` rows: the bus bandwidth `aorta coll` measured per
 * collective, rank count and size, against which a run's transfers are
 * judged (slow_transfer). */
typedef struct ao_coll_ref_row {
    char coll[32]; /* "allgather", "reducescatter", "allreduce", ... */
    int nranks;
    double size, busbw_gbps;
} ao_coll_ref_row;
typedef struct ao_coll_ref {
    char *path;
    ao_coll_ref_row *rows;
    size_t n;
} ao_coll_ref;
/* Read `aorta coll --json FILE`'s output. 0, or AO_EXIT_USAGE after one
 * error naming the file, the row and the key. */
int ao_coll_ref_read(const char *path, ao_coll_ref *out);
void ao_coll_ref_free(ao_coll_ref *r);
/* The busbw the reference has for kind over nranks at size bytes:
 * interpolated in log(size) between its rows, the nearest row's outside
 * them; NAN when it has no row of that kind and rank count. */
double ao_coll_ref_busbw(const ao_coll_ref *r, const char *kind, int nranks, double size);

/* Diagnose one loaded run. Never fails: what cannot be told is a limitation. */
void ao_diagnose_run(const ao_run_data *run, ao_diagnosis *out);
/* The same, judging transfers against ref (NULL: no slow_transfer). */
void ao_diagnose_run_ref(const ao_run_data *run, const ao_coll_ref *ref, ao_diagnosis *out);
void ao_diagnosis_free(ao_diagnosis *d);

/* Text: classification, findings (top `max_findings`, 0 = all), flags,
 * limitations. */
void ao_diagnosis_print(FILE *f, const ao_diagnosis *d, size_t max_findings);
/* One JSON object into g. */
yajl_gen_status ao_diagnosis_gen(yajl_gen g, const ao_diagnosis *d);

/* `aorta diagnose`: each directory (an output directory gives its `latest`
 * run) loaded and diagnosed in turn; runs from different sources (train,
 * analyze, attach) are flagged. Text, or one JSON document {"schema": 1,
 * "runs": [...]}, to out. Returns 0, or AO_EXIT_USAGE after one error line
 * (a directory without records). */
typedef struct ao_diagnose_opts {
    const char *const *dirs;
    size_t ndirs;
    long long skip_steps; /* < 0: the run's training.summary_skip_steps */
    const char *coll_ref; /* `aorta coll --json` output, or NULL */
    int json;
    FILE *out;
} ao_diagnose_opts;
int ao_diagnose_dirs(const ao_diagnose_opts *o);

#endif
