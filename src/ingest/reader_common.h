/* Small pieces the rocprofv3 and Nsight Systems readers share. */
#ifndef AORTA_INGEST_READER_COMMON_H
#define AORTA_INGEST_READER_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "ingest/trace.h"

/* The rank a trace's path names: the last word "rank" followed by an
 * optional '_', '-' or '.' and digits ("rank_3/", "trace_rank-12.db", not
 * "frank_2"), case ignored; -1 when the path names none. */
int ao_ingest_rank_from_path(const char *path);

/* Profilers stamp nanoseconds; ao_trace holds microseconds. */
static inline double ao_ingest_ns_to_us(int64_t ns)
{
    return (double)ns / 1000.0;
}

/* Adds `name` to the trace's "device_name" meta, a ", "-joined list of the
 * distinct device names (one name on a homogeneous node). */
void ao_ingest_add_device_name(ao_trace *t, const char *name);

/* Whether the trace holds a kernel: a trace of copies alone was recorded
 * without kernel tracing and has no compute to measure overlap against. */
int ao_ingest_has_kernels(const ao_trace *t);

/* The correlation ids of a trace's activities, to keep only the host calls
 * that issued one (hipMalloc or cudaStreamSynchronize issue none). Checked
 * here rather than in SQL: a sorted array and a binary search cost less than
 * SQLite's IN over a subquery. */
typedef struct ao_corr_set {
    int64_t *ids;
    size_t n;
} ao_corr_set;
void ao_corr_set_build(ao_corr_set *s, const ao_trace *t);
int ao_corr_set_has(const ao_corr_set *s, int64_t id);
void ao_corr_set_free(ao_corr_set *s);

/* Kineto-style copy name ("Memcpy HtoD") for a rocprofv3 copy direction
 * ("MEMORY_COPY_HOST_TO_DEVICE", CSV Direction or rocpd name); "Memcpy" when
 * the direction is not one it knows. */
const char *ao_rocprof_copy_name(const char *direction);
/* Whether a copy in that direction runs on its source agent (device to
 * host/device) rather than its destination (host to device). */
int ao_rocprof_copy_on_source(const char *direction);

/* A rocprofv3 agent id as the CSV writes it: "7", or "Agent 7" with
 * --agent-index. Returns 0, or -1 when it is neither. */
int ao_rocprof_agent(const char *text, int64_t *out);

#endif
