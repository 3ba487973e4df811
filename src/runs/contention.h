/* A rank's evidence for its contention (DESIGN §7, "Contention"): the kernels
 * its kept train records name in "extra.contention.top"
 * (timeline/contention.h writes them, one step each), summed over the
 * records by name and bytes: how many instances ran beside a collective and
 * were priced, their mean duration beside, the mean of the alone references
 * they were priced against, and the time they added per step. For
 * summary.json, the report and diagnose. */
#ifndef AORTA_RUNS_CONTENTION_H
#define AORTA_RUNS_CONTENTION_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_tree.h>

#include "core/json.h"

typedef struct ao_contention_kernel {
    char *name;
    uint64_t bytes;
    long long beside, priced;   /* instances, summed over the records */
    size_t alone;               /* alone instances behind the references (the latest record's) */
    double beside_us, alone_us; /* summed over priced instances: durations, references */
    double excess_ms;           /* summed over the records */
} ao_contention_kernel;

typedef struct ao_contention_evidence {
    size_t steps;                  /* records with a contention object */
    double beside_ms, unpriced_ms; /* summed over them (beside a collective, no reference) */
    ao_contention_kernel *k; /* by excess_ms, largest first, after ao_contention_evidence_sort */
    size_t n, cap;
} ao_contention_evidence;

/* Adds one record's "contention" object (anything else is ignored). */
void ao_contention_evidence_add(ao_contention_evidence *ev, yajl_val contention);
void ao_contention_evidence_sort(ao_contention_evidence *ev);
void ao_contention_evidence_free(ao_contention_evidence *ev);

/* Under `key`: the records counted, compute time beside a collective and
 * unpriced time per step, and the first `top` kernels: name, bytes, beside
 * and priced instances per step, alone instances, mean beside and alone
 * durations (µs), and ms per step. */
void ao_contention_evidence_gen(ao_json_writer *w, const char *key,
                                const ao_contention_evidence *ev, size_t top);

#endif
