/* The price of overlap (DESIGN §7, "Contention"): how much longer compute
 * kernels run beside a collective than the same kernels run alone, in ms per
 * step, from any kernel-level view of a step (aorta train's CUPTI trace, an
 * analyzed Kineto / nsys / rocprof trace, aorta attach).
 *
 *     ao_contention *c = ao_contention_create();
 *     for every step, in order:
 *         ao_contention_learn(c, ops, n);          // its alone instances become references
 *         ao_contention_price(c, ops, n, &step);   // its instances beside a collective, priced
 *     ao_contention_destroy(c);
 *
 * (analyze learns every step first, then prices each: the references are the
 * whole trace's.)
 *
 * A compute op (AO_CLASS_COMPUTE) is *beside* a collective when its interval
 * overlaps the union of the step's communication ops (AO_CLASS_COMM) at all,
 * and *alone* when it overlaps none. The same kernel is, first, the same launch
 * of the step: the same lane (ao_op.stream), name and bytes, and the same
 * occurrence among the step's ops with that lane, name and bytes (the k-th
 * such launch of the step; identical steps issue identical sequences, so this
 * is one GEMM of one layer, whatever its grid); where that launch never ran
 * alone, second, any op of the same name and bytes (pooled over the step's
 * launches of that name). A beside instance of duration d whose reference (the
 * mean duration of the alone instances of its key) is r costs d - r; the step's
 * contention is the sum over its beside instances, negative ones included
 * (noise cancels rather than adding up). Beside instances with no reference
 * are counted as unpriced time. The per-instance sum is exact when the alone
 * mean is the kernel's undisturbed duration: partial overlaps contribute their
 * partial slowdown. */
#ifndef AORTA_TIMELINE_CONTENTION_H
#define AORTA_TIMELINE_CONTENTION_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>

#include "core/metrics.h"

/* Kernels a step's record names as evidence, costliest first. */
#define AO_CONTENTION_TOP 8

/* One kernel (by name and bytes) in one step's evidence. */
typedef struct ao_contention_item {
    const char *name; /* the op's own name pointer (valid as long as the ops' names) */
    uint64_t bytes;   /* memcpy / memset bytes; 0 for kernels */
    int beside;       /* instances beside a collective in the step */
    int priced;       /* of which had a reference */
    size_t alone;     /* alone instances of this name and bytes learned so far */
    double beside_us; /* mean duration of the priced beside instances */
    double alone_us;  /* mean of the references they were priced against */
    double excess_ms; /* sum of (duration - reference) of the priced ones */
} ao_contention_item;

typedef struct ao_contention_step {
    double ms;          /* sum of (duration - reference) over priced beside instances */
    double beside_ms;   /* summed duration of the compute ops beside a collective */
    double unpriced_ms; /* of which no reference exists for */
    int beside, priced; /* instances */
    ao_contention_item top[AO_CONTENTION_TOP]; /* by excess_ms, largest first */
    size_t ntop;
} ao_contention_step;

typedef struct ao_contention ao_contention;

ao_contention *ao_contention_create(void);
void ao_contention_destroy(ao_contention *c);

/* Learns the alone compute instances of one step's ops (any order). */
void ao_contention_learn(ao_contention *c, const ao_op *ops, size_t n);
/* Prices the beside instances of one step's ops against what was learned.
 * NAN ms (and an empty evidence) when the step has no collective: there is
 * nothing to be slowed beside. */
void ao_contention_price(ao_contention *c, const ao_op *ops, size_t n, ao_contention_step *out);

/* Alone instances learned so far (for tests and the evidence). */
size_t ao_contention_alone(const ao_contention *c);

/* The step's numbers as the key "contention" and its object, into an open
 * map ({"ms", "beside_ms", "unpriced_ms", "beside", "priced", "top": [{"name",
 * "bytes", "beside", "priced", "alone", "beside_us", "alone_us",
 * "excess_ms"}]}): the one writer of the form runs/rundata reads back. */
yajl_gen_status ao_contention_step_gen(yajl_gen g, const ao_contention_step *s);

#endif
