/* Top kernels of a rank: kernels aggregated by name (calls, total and
 * longest time) with the step time they were taken from, for the report's
 * top-kernels table (one table for every source, report/html_tables.c) and
 * summary.json. Two sources fill it:
 * - `aorta train`'s own kernel trace (profiling.kernel_trace): the
 *   "extra.kernels" of each kept train record in an active profiling window
 *   (runs/run_end.h: ao_trace_gen_kernel_extra), added while a run loads;
 * - `aorta analyze`'s per-rank "kernels" of its summary.json (whole trace).
 *
 * A kernel's share of the step is its total time over the summed windows of
 * the steps it was collected from (|W| per step, DESIGN §7): kernels on
 * different streams run at once, so shares can add up to more than 1. */
#ifndef AORTA_RUNS_KERNELS_H
#define AORTA_RUNS_KERNELS_H

#include <stddef.h>

#include "core/json.h"
#include "core/metrics.h"

/* Rows the page and summary.json show per rank. */
#define AO_TOP_KERNELS 10

typedef struct ao_top_kernel {
    const char *name; /* owned by the table that holds it */
    int cls;          /* ao_op_class */
    size_t count;
    double total_us, max_us;
} ao_top_kernel;

typedef struct ao_kernel_table {
    ao_top_kernel *k; /* by total time, longest first, after ao_kernel_table_sort */
    size_t n, cap;
    size_t *slots; /* open addressing on the name: index + 1, 0 empty */
    size_t nslots;
    double window_ms; /* summed step windows the kernels came from */
    size_t steps;     /* records that carried a kernel list */
} ao_kernel_table;

/* One step's kernels (ops as ao_trace_record_kernels reads them; names are
 * copied) and that step's window |W| in ms. */
void ao_kernel_table_add(ao_kernel_table *t, const ao_op *ops, size_t n, double step_ms);
/* Longest total first (ties by name), for the table. */
void ao_kernel_table_sort(ao_kernel_table *t);
void ao_kernel_table_free(ao_kernel_table *t);

/* The table as summary.json's object: steps, window_ms, and the first
 * AO_TOP_KERNELS kernels (name, class, count, total_ms, share, mean_us,
 * max_us). */
void ao_kernel_table_gen(ao_json_writer *w, const char *key, int rank, const ao_kernel_table *t);

/* A kernel's name as a person reads it: the function's own name, with its
 * namespaces, return type, parameters and template arguments left out
 * ("void at::native::reduce_kernel<128, 4, ...>(...)" -> "reduce_kernel<…>",
 * "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)" ->
 * "ncclDevKernel_AllGather_RING_LL"); a plain or mangled name as it is.
 * Into out (n bytes, truncated). */
void ao_kernel_short_name(const char *full, char *out, size_t n);

#endif
