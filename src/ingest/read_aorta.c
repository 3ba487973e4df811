/* aorta's own trace.json (runs/trace.h): every rank a process, every named
 * stream a thread whose ops are complete events with cat = the op's class
 * and args.kind / args.step. The ops carry their class, collective kind and
 * step, so nothing is guessed from names; the kernel lanes (CUPTI, tid >=
 * 100) and the iteration markers are not ops and are skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/metrics.h"
#include "ingest/chrome_json.h"
#include "ingest/trace.h"

/* runs/trace.h's thread numbers: stream ops below the iterations thread. */
#define AORTA_TID_ITERATIONS 50

typedef struct aorta_ctx {
    ao_trace *t;
    int rank;
    int nranks; /* process_name metadata seen */
} aorta_ctx;

static int parse_class(const ao_cj_event *e)
{
    for (int c = AO_CLASS_COMPUTE; c <= AO_CLASS_COPY; c++)
        if (strcmp(e->cat, ao_op_class_name((ao_op_class)c)) == 0) return c;
    return -1;
}

static int on_event(void *vctx, const ao_cj_event *e, char *err, size_t errlen)
{
    aorta_ctx *c = vctx;
    if (e->ph == 'M') {
        if (strcmp(e->name, "process_name") == 0 && e->pid >= 0 && e->pid + 1 > c->nranks)
            c->nranks = (int)e->pid + 1;
        return 0;
    }
    if (e->ph != 'X' || e->pid != c->rank || e->tid < 0 || e->tid >= AORTA_TID_ITERATIONS) return 0;
    int cls = parse_class(e);
    if (cls < 0) return 0;
    if (!e->has_ts || !e->has_dur || e->step < 0) {
        snprintf(err, errlen, "traceEvents[%zu] (op \"%.60s\") has no \"%s\"", e->index, e->name,
                 !e->has_ts    ? "ts"
                 : !e->has_dur ? "dur"
                               : "args.step");
        return 1;
    }
    ao_activity *a = ao_trace_add_activity(c->t);
    a->start_us = e->ts;
    a->end_us = e->ts + e->dur;
    a->name = ao_trace_intern(c->t, e->name, e->name_len);
    a->kind = cls == AO_CLASS_COPY ? AO_ACT_MEMCPY : AO_ACT_KERNEL;
    a->bytes = e->bytes > 0 ? (uint64_t)e->bytes : 0;
    a->stream = (uint32_t)e->tid;
    a->device = (uint32_t)c->rank;
    a->cls = (int8_t)cls;
    a->step = e->step;
    if (cls == AO_CLASS_COMM && e->kind)
        for (int k = 0; k < AO_NKINDS; k++)
            if (strcmp(e->kind, ao_coll_kind_name((ao_coll_kind)k)) == 0) a->coll_kind = (int8_t)k;
    return 0;
}

int ao_read_aorta_trace(const char *path, int rank, ao_trace *out)
{
    ao_trace_init(out, path, "aorta");
    aorta_ctx c = {.t = out, .rank = rank};
    ao_cj_callbacks cb = {.event = on_event};
    int rc = ao_cj_read(path, &cb, &c);
    if (rc == 0 && out->nacts == 0) {
        ao_error(path, "rank %d has no ops (the run wrote no op events for it)", rank);
        rc = AO_EXIT_USAGE;
    }
    if (rc) {
        ao_trace_free(out);
        return rc;
    }
    out->rank = rank;
    out->world_size = c.nranks;
    char n[16];
    snprintf(n, sizeof n, "%d", c.nranks);
    ao_trace_set_meta(out, "ranks", n);
    return 0;
}
