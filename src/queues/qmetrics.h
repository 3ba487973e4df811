/* The numbers `aorta queues` reports, from op intervals alone: pure
 * computation, no device, no I/O (unit-tested directly).
 *
 * An op is one event pair on one of n streams: [start, end) in µs from the
 * run's anchor, plus `ready`, the time the op could have started (the
 * iteration's go, the end of the op before it on its stream, the ends of the
 * ops it waits for: whichever is last). end - ready is the op's latency, the
 * time a framework waits for it from the moment nothing but the device held
 * it back; end - start its duration. */
#ifndef AORTA_QUEUES_QMETRICS_H
#define AORTA_QUEUES_QMETRICS_H

#include <stddef.h>

typedef struct ao_qop {
    double ready_us, start_us, end_us;
    int stream;
} ao_qop;

/* How the streams shared the device over a set of ops (DESIGN §7's union
 * arithmetic, per stream instead of per class). */
typedef struct ao_qunion {
    double busy_us;       /* |∪ all ops|: some stream ran */
    double sum_us;        /* Σ over streams of |∪ that stream's ops| */
    double concurrent_us; /* time at least two streams ran at once */
    double concurrency;   /* sum / busy: streams running on average while any ran; NAN if idle */
    int max_streams;      /* most streams running at one instant */
} ao_qunion;

/* Over n ops on streams 0..nstreams-1 (ops on other streams are ignored).
 * busy <= sum, concurrent <= busy, 1 <= concurrency <= max_streams. */
void ao_qunion_compute(const ao_qop *ops, size_t n, int nstreams, ao_qunion *out);

/* Launch gaps: for each op, the op that last finished before it started
 * (any stream, latest end <= its start). Same stream: an intra-stream gap
 * (the device's turnaround between two ops of one queue); another stream:
 * an inter-stream gap (a hand-off between queues). An op that started while
 * every earlier op still ran (or first) has no gap. Gaps in µs go to
 * intra[] / inter[] (room for n each); returns their counts. */
void ao_qgaps(const ao_qop *ops, size_t n, double *intra, size_t *nintra, double *inter,
              size_t *ninter);

/* Scaling efficiency of `streams` streams against one: the throughput gained
 * over the work added, thr / thr1 x ops1 / ops (ops: an iteration's ops at
 * each count), which is latency1 / latency for an iteration. Where every
 * stream brings the same work (ops = streams x ops1: tiny, gemm, experts,
 * pipeline, dataload) it is the usual thr / (streams x thr1): 1 = each
 * stream added its full share, 1/streams = none did. Where the work is fixed
 * (fsdp) it is the speedup from spreading it. NAN when an input is not
 * positive. */
double ao_qefficiency(double thr, int ops, double thr1, int ops1);

/* The knee of a scaling curve: of n stream counts in ascending order with
 * their efficiencies, the largest count reached before an efficiency falls
 * below 90 % of the best before it (where adding streams stops paying for
 * the work they add); counts[0] when n is 1 or the first is not finite. */
int ao_qknee(const int *counts, const double *efficiency, int n);

#endif
