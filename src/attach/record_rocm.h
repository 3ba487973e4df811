/* rocprofiler-sdk's buffered tracing records as aorta attach's activities
 * (timeline/cupti.h's ao_cupti_record, the record every tracer feeds to
 * attach/steps.h). Plain C over the SDK's header structs: no runtime, so the
 * translation is unit-tested on the CPU with hand-built records.
 *
 * A record lives only during the SDK's buffer callback: ao_rocm_copy keeps
 * the kinds attach reads (kernel dispatches, memory copies) in its own
 * array, which the tracer's worker decodes later with ao_rocm_decode. */
#ifndef AORTA_ATTACH_RECORD_ROCM_H
#define AORTA_ATTACH_RECORD_ROCM_H

#include <stddef.h>
#include <stdint.h>

#include <rocprofiler-sdk/buffer_tracing.h>
#include <rocprofiler-sdk/fwd.h>

#include "timeline/cupti.h"

typedef struct ao_rocm_activity {
    rocprofiler_buffer_tracing_kind_t kind; /* KERNEL_DISPATCH or MEMORY_COPY */
    union {
        rocprofiler_buffer_tracing_kernel_dispatch_record_t kernel;
        rocprofiler_buffer_tracing_memory_copy_record_t copy;
    } u;
} ao_rocm_activity;

/* Copy the kernel dispatch and memory copy records among headers into out
 * (room for n); returns how many. A record the SDK made smaller than this
 * build's struct (an older SDK) keeps its size and zeros after it. */
size_t ao_rocm_copy(rocprofiler_record_header_t *const *headers, size_t n, ao_rocm_activity *out);

/* Kernel names by the SDK's kernel id (code object callbacks), copied. */
typedef struct ao_rocm_kernels {
    uint64_t *ids;
    char **names;
    size_t cap, n; /* open addressing, cap a power of two */
} ao_rocm_kernels;
void ao_rocm_kernels_add(ao_rocm_kernels *t, uint64_t id, const char *name);
/* NULL when the id was never registered. */
const char *ao_rocm_kernels_name(const ao_rocm_kernels *t, uint64_t id);
void ao_rocm_kernels_free(ao_rocm_kernels *t);

/* The SDK's queue handles as stream ids 1, 2, ... in order of first
 * appearance (the last one shared past AO_ROCM_MAX_QUEUES). Copies carry no
 * queue: each direction is a stream of its own, AO_ROCM_COPY_STREAM + the
 * SDK's direction. */
#define AO_ROCM_MAX_QUEUES  255
#define AO_ROCM_COPY_STREAM 0x10000u
typedef struct ao_rocm_queues {
    uint64_t handles[AO_ROCM_MAX_QUEUES];
    uint32_t n;
} ao_rocm_queues;
uint32_t ao_rocm_queue_stream(ao_rocm_queues *q, uint64_t handle);

/* The activity as an ao_cupti_record: kernel (named through kernels, else
 * "kernel"), or "memcpy HtoD", "memcpy DtoH", ... with its bytes; the SDK's
 * internal correlation id, its nanosecond times. 0 for another kind or a
 * record that ends before it starts. */
int ao_rocm_decode(const ao_rocm_activity *a, const ao_rocm_kernels *kernels,
                   ao_rocm_queues *queues, ao_cupti_record *r);

#endif
