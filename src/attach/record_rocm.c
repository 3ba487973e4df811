/* attach/record_rocm.h */
#include <stdlib.h>
#include <string.h>

#include "attach/record_rocm.h"
#include "core/error.h"

static void copy_record(void *dst, size_t room, const void *payload)
{
    uint64_t size; /* every SDK record starts with its size */
    memcpy(&size, payload, sizeof size);
    memset(dst, 0, room);
    memcpy(dst, payload, size < room ? (size_t)size : room);
}

size_t ao_rocm_copy(rocprofiler_record_header_t *const *headers, size_t n, ao_rocm_activity *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const rocprofiler_record_header_t *h = headers[i];
        if (!h || !h->payload || h->category != ROCPROFILER_BUFFER_CATEGORY_TRACING) continue;
        if (h->kind == ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH) {
            out[k].kind = ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH;
            copy_record(&out[k++].u.kernel, sizeof out->u.kernel, h->payload);
        } else if (h->kind == ROCPROFILER_BUFFER_TRACING_MEMORY_COPY) {
            out[k].kind = ROCPROFILER_BUFFER_TRACING_MEMORY_COPY;
            copy_record(&out[k++].u.copy, sizeof out->u.copy, h->payload);
        }
    }
    return k;
}

/* ---- kernel names -------------------------------------------------------------- */

static size_t slot(uint64_t id, size_t cap)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

void ao_rocm_kernels_add(ao_rocm_kernels *t, uint64_t id, const char *name)
{
    if (!name) return;
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        ao_rocm_kernels b = {ao_calloc(cap, sizeof *b.ids), ao_calloc(cap, sizeof *b.names), cap,
                             t->n};
        for (size_t i = 0; i < t->cap; i++)
            if (t->names[i]) {
                size_t j = slot(t->ids[i], cap);
                while (b.names[j]) j = (j + 1) & (cap - 1);
                b.ids[j] = t->ids[i];
                b.names[j] = t->names[i];
            }
        free(t->ids);
        free(t->names);
        *t = b;
    }
    size_t j = slot(id, t->cap);
    while (t->names[j] && t->ids[j] != id) j = (j + 1) & (t->cap - 1);
    if (t->names[j]) { /* registered again (a code object reloaded): the newer name */
        free(t->names[j]);
    } else {
        t->n++;
    }
    t->ids[j] = id;
    t->names[j] = ao_strdup(name);
}

const char *ao_rocm_kernels_name(const ao_rocm_kernels *t, uint64_t id)
{
    if (!t->cap) return NULL;
    size_t j = slot(id, t->cap);
    while (t->names[j]) {
        if (t->ids[j] == id) return t->names[j];
        j = (j + 1) & (t->cap - 1);
    }
    return NULL;
}

void ao_rocm_kernels_free(ao_rocm_kernels *t)
{
    for (size_t i = 0; i < t->cap; i++) free(t->names[i]);
    free(t->ids);
    free(t->names);
    memset(t, 0, sizeof *t);
}

/* ---- records ------------------------------------------------------------------- */

uint32_t ao_rocm_queue_stream(ao_rocm_queues *q, uint64_t handle)
{
    for (uint32_t i = 0; i < q->n; i++)
        if (q->handles[i] == handle) return i + 1;
    if (q->n == AO_ROCM_MAX_QUEUES) return AO_ROCM_MAX_QUEUES;
    q->handles[q->n++] = handle;
    return q->n;
}

static const char *copy_name(rocprofiler_memory_copy_operation_t op)
{
    static const char *const names[ROCPROFILER_MEMORY_COPY_LAST] = {
        [ROCPROFILER_MEMORY_COPY_HOST_TO_HOST] = "memcpy HtoH",
        [ROCPROFILER_MEMORY_COPY_HOST_TO_DEVICE] = "memcpy HtoD",
        [ROCPROFILER_MEMORY_COPY_DEVICE_TO_HOST] = "memcpy DtoH",
        [ROCPROFILER_MEMORY_COPY_DEVICE_TO_DEVICE] = "memcpy DtoD"};
    /* the names CUPTI's copies get (timeline/cupti_lib_cuda.c) */
    return op >= 0 && op < ROCPROFILER_MEMORY_COPY_LAST && names[op] ? names[op] : "memcpy";
}

int ao_rocm_decode(const ao_rocm_activity *a, const ao_rocm_kernels *kernels,
                   ao_rocm_queues *queues, ao_cupti_record *r)
{
    memset(r, 0, sizeof *r);
    if (a->kind == ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH) {
        const rocprofiler_buffer_tracing_kernel_dispatch_record_t *k = &a->u.kernel;
        const char *name = ao_rocm_kernels_name(kernels, k->dispatch_info.kernel_id);
        *r = (ao_cupti_record){AO_CUPTI_KERNEL,
                               k->start_timestamp,
                               k->end_timestamp,
                               ao_rocm_queue_stream(queues, k->dispatch_info.queue_id.handle),
                               0,
                               name ? name : "kernel",
                               (int64_t)k->correlation_id.internal};
    } else if (a->kind == ROCPROFILER_BUFFER_TRACING_MEMORY_COPY) {
        const rocprofiler_buffer_tracing_memory_copy_record_t *c = &a->u.copy;
        *r = (ao_cupti_record){AO_CUPTI_MEMCPY,
                               c->start_timestamp,
                               c->end_timestamp,
                               AO_ROCM_COPY_STREAM + (uint32_t)c->operation,
                               c->bytes,
                               copy_name(c->operation),
                               (int64_t)c->correlation_id.internal};
    } else {
        return 0;
    }
    return r->end_ns >= r->start_ns;
}
