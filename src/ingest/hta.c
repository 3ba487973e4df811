/* HTA 0.5.0's per-rank numbers, reproduced step by step from its source so
 * that aorta can be checked against it (DESIGN §14):
 *   - trace_parser.round_down_time_stamps: ts = ceil(ts), end = floor(ts + dur);
 *   - Trace._filter_irrelevant_gpu_kernels: with more than one ProfilerStep
 *     name, keep GPU events whose correlation matches a CPU event starting
 *     before the last ProfilerStep's start (CPU or GPU-side annotation);
 *   - utils.merge_kernel_intervals: sort by ts, a new group when ts exceeds
 *     every earlier end, a group is [min ts, max end];
 *   - get_temporal_breakdown: kernel time = last group end - first group ts,
 *     idle = kernel time - sum of group lengths, compute = merged compute
 *     kernels, non-compute = the rest;
 *   - get_comm_comp_overlap: |merged compute ∩ merged comm| / sum of merged
 *     comm lengths.
 * Kinds follow HTA's patterns (types.py): communication "^nccl", "^hip",
 * "^hccl" or holding "ncclKernel"; compute everything that is not
 * "^nccl", memcpy, memset, dma, *Sync, ... */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/intervals.h"
#include "ingest/analyze.h"

/* HTA's groups can be empty or reversed (a sub-µs kernel rounds to end <
 * start), which HTA's sums keep; ao_ival holds them, ao_iv_* ignore them. */
typedef ao_ival hiv;

static int by_ts(const void *a, const void *b)
{
    const hiv *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

/* merge_kernel_intervals, in place; returns the group count. */
static size_t hta_merge(hiv *v, size_t n)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, by_ts);
    size_t g = 0;
    double cummax = v[0].end;
    for (size_t i = 1; i < n; i++) {
        if (v[i].start > cummax) {
            v[++g] = v[i];
        } else if (v[i].end > v[g].end) {
            v[g].end = v[i].end;
        }
        if (v[i].end > cummax) cummax = v[i].end;
    }
    return g + 1;
}

static double sum_len(const hiv *v, size_t n)
{
    double ends = 0, starts = 0; /* as HTA: end.sum() - ts.sum() */
    for (size_t i = 0; i < n; i++) {
        ends += v[i].end;
        starts += v[i].start;
    }
    return ends - starts;
}

static int prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static int hta_comm(const char *n)
{
    return prefix(n, "nccl") || prefix(n, "hip") || prefix(n, "hccl") || strstr(n, "ncclKernel");
}

static int hta_compute(const char *n)
{
    static const char *const pre[] = {"nccl",        "Stream Wait Event",
                                      "runFunction", "hip",
                                      "job_exe",     "packet",
                                      "pe_exe",      "cpum_exe_subgraph",
                                      "hccl",        "collective_subgraph_execution"};
    static const char *const sub[] = {"Memcpy", "Memset", "dma", "Sync"};
    for (size_t i = 0; i < sizeof pre / sizeof *pre; i++)
        if (prefix(n, pre[i])) return 0;
    for (size_t i = 0; i < sizeof sub / sizeof *sub; i++)
        if (strstr(n, sub[i])) return 0;
    if (prefix(n, "cuda") && strstr(n + 4, "LaunchKernel")) return 0;
    return 1;
}

static int by_corr64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void ao_hta_compute(const ao_trace *t, ao_hta_values *out)
{
    memset(out, 0, sizeof *out);
    out->overlap_pct = NAN;

    /* The filter: distinct ProfilerStep names and the last one's start. */
    const char *first_name = NULL;
    int several = 0;
    double last_start = -INFINITY;
    for (size_t i = 0; i < t->nranges; i++) {
        const ao_range *r = &t->ranges[i];
        if (!r->name || !strstr(r->name, "ProfilerStep")) continue;
        if (!first_name)
            first_name = r->name;
        else if (r->name != first_name && strcmp(r->name, first_name) != 0)
            several = 1;
        double s = ceil(r->start_us);
        if (s > last_start) last_start = s;
    }
    int64_t *keep = NULL;
    size_t nkeep = 0;
    if (several) {
        keep = ao_malloc((t->nlaunches ? t->nlaunches : 1) * sizeof *keep);
        for (size_t i = 0; i < t->nlaunches; i++)
            if (ceil(t->launches[i].start_us) < last_start)
                keep[nkeep++] = t->launches[i].correlation;
        qsort(keep, nkeep, sizeof *keep, by_corr64);
    }

    size_t n = t->nacts;
    hiv *all = ao_malloc((n ? n : 1) * sizeof *all), *comp = ao_malloc((n ? n : 1) * sizeof *comp),
        *comm = ao_malloc((n ? n : 1) * sizeof *comm);
    size_t na = 0, ncp = 0, ncm = 0;
    for (size_t i = 0; i < n; i++) {
        const ao_activity *a = &t->acts[i];
        if (a->correlation < 0) continue; /* HTA takes it for a CPU event */
        if (several && !bsearch(&a->correlation, keep, nkeep, sizeof *keep, by_corr64)) continue;
        hiv v = {ceil(a->start_us), floor(a->end_us)};
        all[na++] = v;
        const char *name = a->name ? a->name : "";
        if (hta_compute(name)) comp[ncp++] = v;
        if (hta_comm(name)) comm[ncm++] = v;
    }
    free(keep);
    na = hta_merge(all, na);
    ncp = hta_merge(comp, ncp);
    ncm = hta_merge(comm, ncm);
    if (na) {
        out->valid = 1;
        out->kernel_us = all[na - 1].end - all[0].start;
        out->idle_us = out->kernel_us - sum_len(all, na);
        out->compute_us = sum_len(comp, ncp);
        out->non_compute_us = out->kernel_us - out->compute_us - out->idle_us;
        double m = sum_len(comm, ncm);
        if (m > 0) out->overlap_pct = 100.0 * ao_iv_intersect_length(comp, ncp, comm, ncm) / m;
    }
    free(all);
    free(comp);
    free(comm);
}
