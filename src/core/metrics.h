/* Per-iteration overlap metrics, exactly as DESIGN §7 defines them.
 *
 * Input: the ops of one iteration of one rank, each an interval on the device
 * timeline (microseconds from the run's anchor event) with the stream that ran
 * it and its class. Output: one ao_overlap, the numbers every JSONL record,
 * summary and report is made of. Pure computation over core/intervals; no
 * device, no I/O. */
#ifndef AORTA_CORE_METRICS_H
#define AORTA_CORE_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* The named streams of the workload, in this order everywhere (JSONL, traces,
 * charts). */
typedef enum ao_stream_id {
    AO_STREAM_COMPUTE,
    AO_STREAM_ALLGATHER,
    AO_STREAM_REDUCESCATTER,
    AO_STREAM_ALLREDUCE,
    AO_STREAM_H2D,
    AO_NSTREAMS
} ao_stream_id;
const char *ao_stream_id_name(ao_stream_id s);

typedef enum ao_op_class { AO_CLASS_COMPUTE, AO_CLASS_COMM, AO_CLASS_COPY } ao_op_class;
const char *ao_op_class_name(ao_op_class c);

/* Collective kinds §7 breaks communication down by. */
typedef enum ao_coll_kind {
    AO_KIND_NONE = -1,
    AO_KIND_ALLGATHER,
    AO_KIND_REDUCESCATTER,
    AO_KIND_ALLREDUCE,
    AO_KIND_BROADCAST,
    AO_NKINDS
} ao_coll_kind;
const char *ao_coll_kind_name(ao_coll_kind k);

typedef struct ao_op {
    double start_us, end_us; /* end >= start; relative to the run's anchor */
    uint64_t bytes;          /* collectives: nccl-tests "size"; copies: bytes moved */
    const char *name;        /* static string: "forward", "backward", "allgather" ... */
    int16_t unit;            /* FSDP unit or bucket index, -1 when none */
    uint8_t stream;          /* ao_stream_id */
    uint8_t cls;             /* ao_op_class */
    int8_t kind;             /* ao_coll_kind for AO_CLASS_COMM, else AO_KIND_NONE */
    uint8_t has_issue;       /* issue_us is known */
    /* When the host enqueued the op, on the same axis (host clock from the
     * anchor's host time), valid when has_issue. Splits idle time
     * (host_wait_ms). Zero-initialized ops have none. */
    double issue_us;
} ao_op;

typedef struct ao_stream_stats {
    int ops;
    double busy_ms; /* |union of that stream's ops| */
} ao_stream_stats;

typedef struct ao_kind_stats {
    int ops;
    uint64_t bytes;
    double busy_ms;    /* |M_k| */
    double algbw_gbps; /* bytes / busy time, GB = 1e9; 0 when busy is 0 */
    double busbw_gbps; /* algbw x nccl-tests factor for world_size */
} ao_kind_stats;

typedef struct ao_overlap {
    double window_start_us, window_end_us; /* W */
    double step_ms;                        /* |W| */
    double compute_ms, comm_ms, copy_ms;   /* |C|, |M|, |X| */
    double overlap_ms;                     /* |C ∩ M| */
    double exposed_comm_ms;                /* |M \ C| */
    double idle_ms;                        /* |W \ (C ∪ M ∪ X)| */
    /* The part of idle_ms where nothing was enqueued: |W \ (C ∪ M ∪ X ∪ Q)|,
     * Q = union of [issue_us, start_us] (an op enqueued, not yet running).
     * NAN when some op has no issue time (has_issue 0). */
    double host_wait_ms;
    double first_issue_us; /* the earliest issue_us of the ops; NAN when unknown (not in records) */
    double overlap_ratio;  /* |C ∩ M| / |M|; NAN when M is empty */
    double compute_covered_ratio;      /* |C ∩ M| / |C|; NAN when C is empty */
    double overlap_efficiency;         /* |C ∩ M| / min(|C|,|M|); NAN when the min is 0 */
    double compute_kind_ms[AO_NKINDS]; /* |C ∩ M_k| */
    double exposed_kind_ms[AO_NKINDS]; /* |M_k \ C| */
    ao_stream_stats streams[AO_NSTREAMS];
    ao_kind_stats kinds[AO_NKINDS];
} ao_overlap;

/* nccl-tests bus-bandwidth factor for a collective over world_size ranks:
 * allreduce 2(n-1)/n, allgather and reducescatter (n-1)/n, broadcast 1;
 * 0 for AO_KIND_NONE or world_size < 1 (and so 0 for AR/AG/RS at n = 1). */
double ao_busbw_factor(ao_coll_kind kind, int world_size);

/* Compute every field from n ops (any order; zero-length ops allowed). With
 * n == 0 all lengths are 0 and the ratios NAN. world_size sets busbw factors. */
void ao_overlap_compute(const ao_op *ops, size_t n, int world_size, ao_overlap *out);

/* The §7 decomposition, from isolated baselines (compute-only and comm-only
 * medians) and a measured step. Fields NAN when baselines are absent. */
typedef struct ao_decomposition {
    double compute_isolated_ms, comm_isolated_ms;
    double ideal_ms;      /* max(compute_isolated, comm_isolated) */
    double serial_ms;     /* compute_isolated + comm_isolated */
    double achieved;      /* (serial - step) / (serial - ideal); NAN when serial == ideal */
    double contention_ms; /* compute_ms - compute_isolated */
    double comm_slowdown; /* comm_ms / comm_isolated */
} ao_decomposition;

void ao_decompose(double compute_isolated_ms, double comm_isolated_ms, double step_ms,
                  double compute_ms, double comm_ms, ao_decomposition *out);

#endif
