/* `aorta analyze`: traces in, a run directory out (DESIGN §8's layout, so
 * `aorta report` reads it unchanged), with collectives.jsonl when there are
 * several ranks (DESIGN §14).
 *
 * The paths are trace files or directories of them (one trace per rank; a
 * rocprofv3 CSV directory by its *kernel_trace.csv files). Ranks are read
 * and analysed in parallel, one thread per core. Everything is written into
 * a hidden staging directory that is renamed into place at the end, so a
 * failure never leaves half a run. */
#ifndef AORTA_INGEST_ANALYZE_RUN_H
#define AORTA_INGEST_ANALYZE_RUN_H

#include <stddef.h>
#include <stdio.h>

#include "ingest/trace.h"

typedef struct ao_analyze_run_opts {
    char *const *paths;
    size_t npaths;
    const char *output_dir; /* NULL: "artifacts" */
    const char *run_name;   /* NULL: a fresh run id */
    ao_trace_format format; /* AO_TRACE_AUTO: detect per file */
    const char *step_regex, *comm_regex;
    int threads; /* <= 0: the online cores */
    /* Traces kept in memory between the two passes, bytes (estimated);
     * beyond it a rank's trace is read again in the second pass. */
    size_t keep_bytes;
    int argc;
    char *const *argv;
    FILE *table; /* the final tables; NULL: none */
} ao_analyze_run_opts;

/* Returns 0, AO_EXIT_USAGE after one error line naming the file and offset,
 * row or field (bad or mixed input), or AO_EXIT_FAIL (cannot write). */
int ao_analyze_run(const ao_analyze_run_opts *o);

#endif
