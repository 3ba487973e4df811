/* The plain C half of timeline/cupti.h: classification, lanes, and turning
 * records into ops (also compiled into the attach libraries). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "timeline/cupti.h"

/* The identifier inside an Itanium-mangled name ("_Z31ncclDevKernel_..."). */
static const char *unmangled(const char *name)
{
    if (strncmp(name, "_Z", 2) != 0) return name;
    const char *p = name + 2;
    if (*p == 'N') p++; /* nested name: the first component follows */
    while (*p >= '0' && *p <= '9') p++;
    return p;
}

ao_op_class ao_cupti_classify(const char *kernel_name, ao_coll_kind *kind)
{
    *kind = AO_KIND_NONE;
    if (!kernel_name) return AO_CLASS_COMPUTE;
    const char *id = unmangled(kernel_name);
    if (strncmp(id, "ncclDevKernel", 13) != 0 && strncmp(id, "ncclKernel", 10) != 0)
        return AO_CLASS_COMPUTE;
    static const struct {
        const char *token;
        ao_coll_kind kind;
    } kinds[] = {
        {"AllGather", AO_KIND_ALLGATHER},
        {"ReduceScatter", AO_KIND_REDUCESCATTER},
        {"AllReduce", AO_KIND_ALLREDUCE},
        {"Broadcast", AO_KIND_BROADCAST},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strstr(id, kinds[i].token)) {
            *kind = kinds[i].kind;
            break;
        }
    return AO_CLASS_COMM;
}

int ao_cupti_lane(ao_cupti_lanes *l, uint32_t stream_id)
{
    for (int i = 0; i < l->n; i++)
        if (l->stream_ids[i] == stream_id) return i;
    if (l->n == AO_CUPTI_MAX_LANES) return AO_CUPTI_MAX_LANES - 1;
    l->stream_ids[l->n] = stream_id;
    return l->n++;
}

void ao_cupti_record_to_op(const ao_cupti_record *r, uint64_t anchor_ns, int lane, int on_compute,
                           ao_op *op)
{
    ao_coll_kind kind = AO_KIND_NONE;
    ao_op_class cls = r->kind == AO_CUPTI_KERNEL ? ao_cupti_classify(r->name, &kind)
                      : on_compute               ? AO_CLASS_COMPUTE
                                                 : AO_CLASS_COPY;
    /* signed differences: an activity may precede the anchor */
    op->start_us = (double)(int64_t)(r->start_ns - anchor_ns) / 1000.0;
    op->end_us = (double)(int64_t)(r->end_ns - anchor_ns) / 1000.0;
    if (op->end_us < op->start_us) op->end_us = op->start_us;
    op->bytes = r->bytes;
    op->name = r->name ? r->name : (r->kind == AO_CUPTI_KERNEL ? "kernel" : "copy");
    op->unit = -1;
    op->stream = (uint8_t)lane;
    op->cls = (uint8_t)cls;
    op->kind = (int8_t)kind;
}

static int by_start(const void *a, const void *b)
{
    const ao_op *x = a, *y = b;
    return (x->start_us > y->start_us) - (x->start_us < y->start_us);
}

size_t ao_cupti_split(ao_cupti_record *recs, size_t *n, uint64_t t0, uint64_t t1,
                      uint64_t anchor_ns, ao_cupti_lanes *lanes, ao_op **ops, size_t *cap)
{
    size_t kept = 0, nops = 0;
    for (size_t i = 0; i < *n; i++) {
        ao_cupti_record *r = &recs[i];
        /* by its midpoint (cupti.h): end >= start is not guaranteed here */
        const uint64_t mid =
            r->end_ns > r->start_ns ? r->start_ns + (r->end_ns - r->start_ns) / 2 : r->start_ns;
        if (mid < t0) continue;
        if (mid >= t1) {
            recs[kept++] = *r;
            continue;
        }
        if (nops == *cap) {
            *cap = *cap ? 2 * *cap : 256;
            *ops = ao_realloc(*ops, *cap * sizeof **ops);
        }
        const int on_compute = lanes->compute_known && r->stream_id == lanes->compute_stream;
        ao_cupti_record_to_op(r, anchor_ns, ao_cupti_lane(lanes, r->stream_id), on_compute,
                              &(*ops)[nops++]);
    }
    *n = kept;
    if (nops) qsort(*ops, nops, sizeof **ops, by_start);
    return nops;
}
