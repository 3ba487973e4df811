/* PyTorch profiler (Kineto) Chrome-trace JSON, CUDA or ROCm builds, plain or
 * .gz: device activity from "kernel", "gpu_memcpy" and "gpu_memset" events,
 * launches from "*_runtime"/"*_driver" calls with a correlation id (the
 * ids the ac2g flows draw), host ranges from "user_annotation" events
 * (ProfilerStep#N, record_function, FSDP's ranges), autograd's
 * evaluate_function ops (the backward's context), the device copies of
 * annotations ("gpu_user_annotation"), and the NCCL kernels' args (process
 * group, message sizes, dtype). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ingest/chrome_json.h"
#include "ingest/trace.h"

#define AUTOGRAD "autograd::engine::evaluate_function"

typedef struct kineto_ctx {
    ao_trace *t;
    char devices[512]; /* distinct device names, ", "-joined */
} kineto_ctx;

static int cat_is(const ao_cj_event *e, const char *lit)
{
    size_t n = strlen(lit);
    return e->cat_len == n && memcmp(e->cat, lit, n) == 0;
}

static int cat_ends(const ao_cj_event *e, const char *suffix)
{
    size_t n = strlen(suffix);
    return e->cat_len >= n && memcmp(e->cat + e->cat_len - n, suffix, n) == 0;
}

/* ts and a dur >= 0: a negative one would end the event before it starts
 * (the rocprofv3 and nsys readers refuse that too). */
static int need_times(const ao_cj_event *e, char *err, size_t errlen)
{
    if (e->has_ts && e->has_dur && e->dur >= 0) return 0;
    if (e->has_ts && e->has_dur)
        snprintf(err, errlen, "traceEvents[%zu] (%s \"%.60s\") has a negative \"dur\" (%g)",
                 e->index, e->cat, e->name, e->dur);
    else
        snprintf(err, errlen, "traceEvents[%zu] (%s \"%.60s\") has no \"%s\"", e->index, e->cat,
                 e->name, e->has_ts ? "dur" : "ts");
    return 1;
}

static int on_event(void *vctx, const ao_cj_event *e, char *err, size_t errlen)
{
    kineto_ctx *c = vctx;
    ao_trace *t = c->t;
    if (e->ph != 'X') return 0;
    int kernel = cat_is(e, "kernel"), memcpy_ = cat_is(e, "gpu_memcpy"),
        memset_ = cat_is(e, "gpu_memset");
    if (kernel || memcpy_ || memset_) {
        if (need_times(e, err, errlen)) return 1;
        ao_activity *a = ao_trace_add_activity(t);
        a->start_us = e->ts;
        a->end_us = e->ts + e->dur;
        a->name = ao_trace_intern(t, e->name, e->name_len);
        a->kind = kernel ? AO_ACT_KERNEL : memcpy_ ? AO_ACT_MEMCPY : AO_ACT_MEMSET;
        a->bytes = e->bytes > 0 ? (uint64_t)e->bytes : 0;
        a->correlation = e->correlation;
        a->device = e->device >= 0 ? (uint32_t)e->device : 0;
        a->stream = e->stream >= 0 ? (uint32_t)e->stream : 0;
        if (kernel && (e->coll_name || e->pg_name || e->in_nelems >= 0)) {
            ao_coll_args *ca = ao_trace_add_coll_args(t, a);
            ca->op = ao_trace_intern(t, e->coll_name, (size_t)-1);
            ca->group = ao_trace_intern(t, e->pg_name, (size_t)-1);
            ca->group_desc = ao_trace_intern(t, e->pg_desc, (size_t)-1);
            ca->group_ranks = ao_trace_intern(t, e->pg_ranks, (size_t)-1);
            ca->dtype = ao_trace_intern(t, e->dtype, (size_t)-1);
            ca->in_nelems = e->in_nelems;
            ca->out_nelems = e->out_nelems;
            ca->group_size = e->group_size;
            ca->seq = e->seq;
        }
        return 0;
    }
    if (cat_ends(e, "_runtime") || cat_ends(e, "_driver")) {
        if (e->correlation < 0) return 0; /* a call that launched nothing */
        if (need_times(e, err, errlen)) return 1;
        ao_launch *l = ao_trace_add_launch(t);
        l->start_us = e->ts;
        l->end_us = e->ts + e->dur;
        l->correlation = e->correlation;
        l->tid = e->tid;
        return 0;
    }
    int dev_ann = cat_is(e, "gpu_user_annotation");
    /* cpu_op (aten::*) events are not kept: the steps are annotations, and
     * they are most of a trace's events. Autograd's evaluate_function ops
     * are, as the context that says a launch was the backward's. */
    int context = cat_is(e, "cpu_op") && e->name_len > sizeof AUTOGRAD - 1 &&
                  memcmp(e->name, AUTOGRAD, sizeof AUTOGRAD - 1) == 0;
    if (dev_ann || context || cat_is(e, "user_annotation")) {
        if (need_times(e, err, errlen)) return 1;
        ao_range *r = ao_trace_add_range(t);
        r->start_us = e->ts;
        r->end_us = e->ts + e->dur;
        r->name = ao_trace_intern(t, context ? AUTOGRAD : e->name,
                                  context ? sizeof AUTOGRAD - 1 : e->name_len);
        r->tid = e->tid;
        r->on_device = (uint8_t)dev_ann;
        r->context = (uint8_t)context;
    }
    return 0;
}

/* A rank or world size: a whole number in [lo, hi] (the metrics files' bound
 * is 2^24 ranks), never cut to 32 bits. */
static int rank_number(const char *path, const char *value, long lo, long hi, int *out, char *err,
                       size_t errlen)
{
    char *end;
    errno = 0;
    long v = strtol(value, &end, 10);
    if (!*value || *end || errno || v < lo || v > hi) {
        snprintf(err, errlen, "%s is %.40s, not a whole number %ld..%ld", path, value, lo, hi);
        return 1;
    }
    *out = (int)v;
    return 0;
}

static int on_meta(void *vctx, const char *path, const char *value, char *err, size_t errlen)
{
    kineto_ctx *c = vctx;
    ao_trace *t = c->t;
    if (strcmp(path, "distributedInfo.rank") == 0) {
        return rank_number(path, value, 0, (1L << 24) - 1, &t->rank, err, errlen);
    } else if (strcmp(path, "distributedInfo.world_size") == 0) {
        return rank_number(path, value, 1, 1L << 24, &t->world_size, err, errlen);
    } else if (strcmp(path, "deviceProperties.name") == 0) {
        if (!strstr(c->devices, value)) {
            size_t n = strlen(c->devices);
            snprintf(c->devices + n, sizeof c->devices - n, "%s%s", n ? ", " : "", value);
        }
    } else if (strcmp(path, "distributedInfo.nccl_version") == 0) {
        ao_trace_set_meta(t, "nccl_version", value);
    } else if (strcmp(path, "distributedInfo.backend") == 0) {
        ao_trace_set_meta(t, "distributed_backend", value);
    } else if (!strchr(path, '.') && strcmp(path, "traceName") != 0 &&
               strcmp(path, "trace_id") != 0 && strcmp(path, "displayTimeUnit") != 0) {
        ao_trace_set_meta(t, path, value); /* cuda_runtime_version, hip_version, ... */
    }
    return 0;
}

int ao_read_kineto(const char *path, ao_trace *out)
{
    ao_trace_init(out, path, "kineto");
    kineto_ctx c = {.t = out};
    ao_cj_callbacks cb = {.event = on_event, .meta = on_meta};
    int rc = ao_cj_read(path, &cb, &c);
    if (rc == 0 && out->nacts == 0) {
        ao_error(path, "no GPU events (kernel, gpu_memcpy, gpu_memset): nothing ran on a device");
        ao_hint("record with torch.profiler.profile(activities=[ProfilerActivity.CPU, "
                "ProfilerActivity.CUDA])");
        rc = AO_EXIT_USAGE;
    }
    if (rc) {
        ao_trace_free(out);
        return rc;
    }
    if (c.devices[0]) ao_trace_set_meta(out, "device_name", c.devices);
    return 0;
}
