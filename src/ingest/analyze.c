/* Classification, step attribution and per-step metrics of one rank's trace
 * (analyze.h), and HTA's whole-trace numbers. */
#include "ingest/analyze.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/intervals.h"
#include "core/json.h"
#include "timeline/cupti.h"

#define DEFAULT_STEP "^ProfilerStep#([0-9]+)"

const char *ao_xkind_name(ao_xkind k)
{
    static const char *const names[AO_NXKINDS] = {
        "allgather", "reducescatter", "allreduce", "broadcast", "sendrecv", "alltoall", "other"};
    return (unsigned)k < AO_NXKINDS ? names[k] : "other";
}

ao_xkind ao_xkind_of_name(const char *n)
{
    if (strcasestr(n, "ReduceScatter") || strcasestr(n, "reduce_scatter"))
        return AO_X_REDUCESCATTER;
    if (strcasestr(n, "AllGather") || strcasestr(n, "all_gather")) return AO_X_ALLGATHER;
    if (strcasestr(n, "AllReduce") || strcasestr(n, "all_reduce")) return AO_X_ALLREDUCE;
    if (strcasestr(n, "Broadcast")) return AO_X_BROADCAST;
    if (strcasestr(n, "AllToAll") || strcasestr(n, "all_to_all")) return AO_X_ALLTOALL;
    if (strcasestr(n, "SendRecv") || strcasestr(n, "Send") || strcasestr(n, "Recv"))
        return AO_X_SENDRECV;
    return AO_X_OTHER;
}

int ao_classifier_init(ao_classifier *c, const char *step_regex, const char *comm_regex)
{
    memset(c, 0, sizeof *c);
    c->default_step = step_regex == NULL;
    int e = regcomp(&c->step, step_regex ? step_regex : DEFAULT_STEP, REG_EXTENDED);
    if (e) {
        char m[128];
        regerror(e, &c->step, m, sizeof m);
        ao_error("--step", "\"%s\" is not a regular expression: %s", step_regex, m);
        return AO_EXIT_USAGE;
    }
    if (comm_regex) {
        e = regcomp(&c->comm, comm_regex, REG_EXTENDED | REG_NOSUB);
        if (e) {
            char m[128];
            regerror(e, &c->comm, m, sizeof m);
            ao_error("--comm", "\"%s\" is not a regular expression: %s", comm_regex, m);
            regfree(&c->step);
            return AO_EXIT_USAGE;
        }
        c->have_comm = 1;
    }
    return 0;
}

void ao_classifier_free(ao_classifier *c)
{
    regfree(&c->step);
    if (c->have_comm) regfree(&c->comm);
    memset(c, 0, sizeof *c);
}

static int starts(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static int is_comm_name(const char *n)
{
    return starts(n, "nccl") || starts(n, "rccl") || strstr(n, "ncclDevKernel") ||
           strstr(n, "ncclKernel");
}

ao_op_class ao_classify(const ao_classifier *c, const ao_activity *a, ao_xkind *xkind)
{
    *xkind = AO_X_OTHER;
    if (a->cls >= 0) {
        if (a->cls == AO_CLASS_COMM && a->coll_kind >= 0) *xkind = (ao_xkind)a->coll_kind;
        return (ao_op_class)a->cls;
    }
    if (a->kind != AO_ACT_KERNEL) return AO_CLASS_COPY;
    const char *n = a->name ? a->name : "";
    if (is_comm_name(n) || (c->have_comm && regexec(&c->comm, n, 0, NULL, 0) == 0)) {
        *xkind = ao_xkind_of_name(n);
        return AO_CLASS_COMM;
    }
    return AO_CLASS_COMPUTE;
}

/* ---- a map from interned pointers to indexes ------------------------------------- */

typedef struct ptrmap {
    const void **keys;
    size_t *vals;
    size_t cap, n;
} ptrmap;

static size_t ptr_hash(const void *p)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0xed5ad4bbu;
    x ^= x >> 11;
    return (size_t)x;
}

/* The slot of key: its value when present (returns 1), else where to put it. */
static int ptrmap_find(ptrmap *m, const void *key, size_t *slot)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        const void **keys = ao_calloc(cap, sizeof *keys);
        size_t *vals = ao_malloc(cap * sizeof *vals);
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i]) continue;
            size_t j = ptr_hash(m->keys[i]) & (cap - 1);
            while (keys[j]) j = (j + 1) & (cap - 1);
            keys[j] = m->keys[i];
            vals[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    size_t j = ptr_hash(key) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != key) j = (j + 1) & (m->cap - 1);
    *slot = j;
    return m->keys[j] != NULL;
}

static void ptrmap_put(ptrmap *m, size_t slot, const void *key, size_t val)
{
    m->keys[slot] = key;
    m->vals[slot] = val;
    m->n++;
}

static void ptrmap_free(ptrmap *m)
{
    free(m->keys);
    free(m->vals);
}

/* ---- steps ------------------------------------------------------------------------- */

typedef struct step_range {
    double start, end;
    long long step;
    const char *name; /* interned: equal names are equal pointers */
} step_range;

typedef struct launch_key {
    int64_t corr;
    double start, end;
    int64_t tid;
} launch_key;

static int by_range_start(const void *a, const void *b)
{
    const step_range *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static int by_corr(const void *a, const void *b)
{
    const launch_key *x = a, *y = b;
    return (x->corr > y->corr) - (x->corr < y->corr);
}

static int by_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Step number of a matching range name: the first group when all digits,
 * else -1 (numbered by order later). Returns 0 when it does not match. */
static int step_match(const ao_classifier *c, const char *name, long long *step)
{
    regmatch_t g[2];
    if (regexec(&c->step, name, 2, g, 0) != 0) return 0;
    *step = -1;
    if (g[1].rm_so >= 0 && g[1].rm_eo > g[1].rm_so) {
        const char *s = name + g[1].rm_so;
        long long v = 0;
        int ok = 1;
        for (regoff_t i = g[1].rm_so; i < g[1].rm_eo; i++, s++) {
            if (!isdigit((unsigned char)*s) || v > 1000000000000LL) {
                ok = 0;
                break;
            }
            v = v * 10 + (*s - '0');
        }
        if (ok) *step = v;
    }
    return 1;
}

/* The step ranges of t, sorted by start; their count. */
static size_t collect_steps(const ao_trace *t, const ao_classifier *c, step_range **out)
{
    ptrmap names = {0}; /* name -> 0 no match, 1 + k match with step k (or 0 for -1) */
    step_range *v = NULL;
    size_t n = 0, cap = 0, ordinal = 0;
    for (size_t i = 0; i < t->nranges; i++) {
        const ao_range *r = &t->ranges[i];
        if (r->on_device || r->context || !r->name) continue;
        size_t slot, val;
        long long step = -1;
        if (ptrmap_find(&names, r->name, &slot)) {
            val = names.vals[slot];
        } else {
            val = step_match(c, r->name, &step) ? (size_t)(step + 2) : 0;
            ptrmap_put(&names, slot, r->name, val);
        }
        if (val == 0) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            v = ao_realloc(v, cap * sizeof *v);
        }
        v[n++] = (step_range){r->start_us, r->end_us, (long long)val - 2, r->name};
    }
    ptrmap_free(&names);
    if (n) qsort(v, n, sizeof *v, by_range_start);
    for (size_t i = 0; i < n; i++)
        if (v[i].step < 0) v[i].step = (long long)ordinal++;
    *out = v;
    return n;
}

static int by_step_name(const void *a, const void *b)
{
    const step_range *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    if (x->name != y->name) return strcmp(x->name, y->name);
    return (x->start > y->start) - (x->start < y->start);
}

/* A numbered step range that occurs more than once (three ProfilerStep#1)
 * would merge into one step: refused, naming the range. 0 or AO_EXIT_USAGE. */
static int check_step_names(const ao_trace *t, const ao_classifier *c)
{
    step_range *v;
    size_t n = collect_steps(t, c, &v), i = 0;
    if (n) qsort(v, n, sizeof *v, by_step_name);
    int rc = 0;
    for (; i + 1 < n && rc == 0; i++) {
        if (v[i].step != v[i + 1].step || v[i].name != v[i + 1].name) continue;
        size_t k = i + 1;
        while (k < n && v[k].step == v[i].step && v[k].name == v[i].name) k++;
        ao_error(t->path,
                 "the step range \"%.200s\" occurs %zu times (at ts %.3f and %.3f us, ...): one "
                 "range a step, or the steps would merge",
                 v[i].name, k - i, v[i].start, v[i + 1].start);
        ao_hint("name each step once (ProfilerStep#N counts up), or pick the ranges with --step");
        rc = AO_EXIT_USAGE;
    }
    free(v);
    return rc;
}

/* The range holding time x (the last one starting at or before it), or -1. */
static long find_range(const step_range *v, size_t n, double x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].start <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) return -1;
    return x < v[lo - 1].end ? (long)(lo - 1) : -1;
}

/* The launch of correlation id corr, or NULL. */
static const launch_key *launch_of(const launch_key *k, size_t n, int64_t corr)
{
    if (corr < 0) return NULL;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (k[mid].corr < corr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && k[lo].corr == corr ? &k[lo] : NULL;
}

/* ---- one window's numbers ------------------------------------------------------------ */

typedef struct act_info {
    double launch; /* start of the launch call, NAN when unknown */
    double issue;  /* when it was in the queue (the call's end); NAN: no launch records */
    int64_t tid;   /* the launching thread, -1 unknown */
    long step;     /* index into the step list, -1 none */
    int8_t cls, xkind;
} act_info;

static uint8_t role_stream(const ao_trace *t, const ao_activity *a, const act_info *ai)
{
    if (a->cls >= 0 && a->stream < AO_NSTREAMS) return (uint8_t)a->stream; /* aorta's own */
    if (ai->cls == AO_CLASS_COPY) return AO_STREAM_H2D;
    if (ai->cls == AO_CLASS_COMPUTE) return AO_STREAM_COMPUTE;
    if (ai->xkind == AO_X_ALLGATHER) return AO_STREAM_ALLGATHER;
    if (ai->xkind == AO_X_REDUCESCATTER) return AO_STREAM_REDUCESCATTER;
    return AO_STREAM_ALLREDUCE;
}

static int by_act_start(const void *a, const void *b, void *ctx)
{
    const ao_activity *acts = ctx;
    double x = acts[*(const size_t *)a].start_us, y = acts[*(const size_t *)b].start_us;
    return (x > y) - (x < y);
}

/* The §7 numbers, host wait and per-kind exposure of the activities idx[0..n). */
static ao_op make_op(const ao_trace *t, const ao_activity *a, const act_info *ai)
{
    return (ao_op){
        .start_us = a->start_us,
        .end_us = a->end_us,
        .bytes = a->bytes,
        .name = a->name,
        .unit = -1,
        .stream = role_stream(t, a, ai),
        .cls = (uint8_t)ai->cls,
        .kind =
            (int8_t)(ai->cls == AO_CLASS_COMM && ai->xkind < AO_NKINDS ? ai->xkind : AO_KIND_NONE),
        .has_issue = !isnan(ai->issue),
        .issue_us = isnan(ai->issue) ? 0 : ai->issue};
}

/* The §7 numbers, host wait and per-kind exposure of the activities idx[0..n)
 * (sorted here by start). */
static void window_stats(const ao_trace *t, const act_info *info, size_t *idx, size_t n,
                         int world_size, int keep_ops, ao_step_result *r)
{
    qsort_r(idx, n, sizeof *idx, by_act_start, (void *)t->acts);
    ao_op *ops = ao_malloc((n ? n : 1) * sizeof *ops);
    for (size_t i = 0; i < n; i++) ops[i] = make_op(t, &t->acts[idx[i]], &info[idx[i]]);
    ao_overlap_compute(ops, n, world_size, &r->m);
    /* Kernel traces rarely give a collective's size (Kineto's NCCL kernels
     * carry none): no bytes is an unknown bandwidth, not 0 GB/s. */
    for (int k = 0; k < AO_NKINDS; k++)
        if (r->m.kinds[k].bytes == 0) r->m.kinds[k].algbw_gbps = r->m.kinds[k].busbw_gbps = NAN;

    /* Host wait is §7's: idle with nothing launched (core/metrics). */
    r->idle_other_ms = r->m.idle_ms - r->m.host_wait_ms;
    if (r->idle_other_ms < 0) r->idle_other_ms = 0;

    /* Per-kind exposure: |M_k \ C| over normalized sets. */
    ao_ival *cv = ao_malloc((n ? n : 1) * sizeof *cv), *mk = ao_malloc((n ? n : 1) * sizeof *mk);
    size_t nc = 0;
    for (size_t i = 0; i < n; i++)
        if (ops[i].cls == AO_CLASS_COMPUTE) cv[nc++] = (ao_ival){ops[i].start_us, ops[i].end_us};
    nc = ao_iv_normalize(cv, nc);
    for (int k = 0; k < AO_NXKINDS; k++) {
        size_t nm = 0;
        for (size_t i = 0; i < n; i++)
            if (ops[i].cls == AO_CLASS_COMM && info[idx[i]].xkind == k)
                mk[nm++] = (ao_ival){ops[i].start_us, ops[i].end_us};
        nm = ao_iv_normalize(mk, nm);
        double len = ao_iv_length(mk, nm);
        r->comm_kind_ms[k] = len / 1000.0;
        r->exposed_kind_ms[k] = (len - ao_iv_intersect_length(mk, nm, cv, nc)) / 1000.0;
    }
    free(cv);
    free(mk);
    if (keep_ops) {
        r->ops = ops;
        r->nops = n;
    } else {
        free(ops);
    }
}

/* The steps' ops with each op's own stream as its lane (the role streams
 * lump every compute stream together, and the same name on two streams is
 * two launches); idx is the step's activities in its ops' order
 * (window_stats sorted them). Heap array of r->nops ops. */
static ao_op *launch_ops(const ao_trace *t, const size_t *idx, const ao_step_result *r,
                         ao_cupti_lanes *lanes)
{
    ao_op *ops = ao_malloc((r->nops ? r->nops : 1) * sizeof *ops);
    for (size_t i = 0; i < r->nops; i++) {
        ops[i] = r->ops[i];
        ops[i].stream = (uint8_t)ao_cupti_lane(lanes, t->acts[idx[i]].stream);
    }
    return ops;
}

/* Every step's contention against the alone kernels of all steps. */
static void step_contention(const ao_trace *t, const size_t *idx, const size_t *count,
                            size_t nsteps, ao_rank_result *out)
{
    ao_contention *c = ao_contention_create();
    ao_cupti_lanes lanes = {0};
    for (int pass = 0; pass < 2; pass++) {
        size_t k = 0;
        for (size_t s = 0; s < nsteps; s++) {
            if (count[s + 1] == count[s]) continue; /* no result for an empty step */
            ao_step_result *r = &out->steps[k++];
            ao_op *ops = launch_ops(t, idx + count[s], r, &lanes);
            if (pass == 0) {
                ao_contention_learn(c, ops, r->nops);
            } else {
                ao_contention_price(c, ops, r->nops, &r->contention);
                r->has_contention = isfinite(r->contention.ms);
            }
            free(ops);
        }
    }
    ao_contention_destroy(c);
}

static ao_comm_act comm_act(const act_info *info, size_t i, long long step, long op_index)
{
    return (ao_comm_act){.act = i,
                         .step = step,
                         .op_index = (int32_t)op_index,
                         .xkind = info[i].xkind,
                         .launch_us = info[i].launch,
                         .issue_us = info[i].issue,
                         .tid = info[i].tid};
}

/* Launch order (a collective's order in its group is its issue order),
 * else start order; the correlation id breaks ties. */
static int by_launch(const void *a, const void *b, void *ctx)
{
    const ao_comm_act *x = a, *y = b;
    const ao_activity *acts = ctx;
    double kx = isnan(x->launch_us) ? acts[x->act].start_us : x->launch_us;
    double ky = isnan(y->launch_us) ? acts[y->act].start_us : y->launch_us;
    if (kx != ky) return (kx > ky) - (kx < ky);
    int64_t cx = acts[x->act].correlation, cy = acts[y->act].correlation;
    if (cx != cy) return (cx > cy) - (cx < cy);
    return (x->act > y->act) - (x->act < y->act);
}

static int by_total_desc(const void *a, const void *b)
{
    const ao_kernel_stat *x = a, *y = b;
    if (x->total_us != y->total_us) return x->total_us < y->total_us ? 1 : -1;
    return strcmp(x->name, y->name);
}

int ao_analyze_trace(const ao_trace *t, const ao_classifier *c, int world_size, ao_rank_result *out)
{
    memset(out, 0, sizeof *out);
    out->rank = t->rank;
    out->trace = t;
    size_t n = t->nacts;
    if (!(n > 0 && t->acts[0].step >= 0) && check_step_names(t, c)) return AO_EXIT_USAGE;
    act_info *info = ao_malloc((n ? n : 1) * sizeof *info);

    /* Classes, and the kernel breakdown, one classification per name. */
    ptrmap names = {0};
    size_t nk = 0, capk = 0;
    for (size_t i = 0; i < n; i++) {
        const ao_activity *a = &t->acts[i];
        size_t slot;
        ao_kernel_stat *ks;
        const void *key = a->name ? (const void *)a->name : (const void *)t;
        if (ptrmap_find(&names, key, &slot)) {
            ks = &out->kernels[names.vals[slot]];
        } else {
            if (nk == capk) {
                capk = capk ? 2 * capk : 256;
                out->kernels = ao_realloc(out->kernels, capk * sizeof *out->kernels);
            }
            ks = &out->kernels[nk];
            ao_xkind xk;
            ao_op_class cls = ao_classify(c, a, &xk);
            *ks = (ao_kernel_stat){
                .name = a->name ? a->name : "?", .cls = (int8_t)cls, .xkind = (int8_t)xk};
            ptrmap_put(&names, slot, key, nk++);
        }
        if (a->cls >= 0) {
            ao_xkind xk;
            info[i].cls = (int8_t)ao_classify(c, a, &xk);
            info[i].xkind = (int8_t)xk;
        } else {
            info[i].cls = ks->cls;
            info[i].xkind = ks->xkind;
        }
        double d = a->end_us > a->start_us ? a->end_us - a->start_us : 0;
        ks->count++;
        ks->total_us += d;
        if (d > ks->max_us) ks->max_us = d;
        out->class_us[info[i].cls] += d;
    }
    ptrmap_free(&names);
    out->nkernels = nk;
    if (nk) qsort(out->kernels, nk, sizeof *out->kernels, by_total_desc);

    /* Launch of each activity. */
    launch_key *lk = ao_malloc((t->nlaunches ? t->nlaunches : 1) * sizeof *lk);
    for (size_t i = 0; i < t->nlaunches; i++)
        lk[i] = (launch_key){t->launches[i].correlation, t->launches[i].start_us,
                             t->launches[i].end_us, t->launches[i].tid};
    if (t->nlaunches) qsort(lk, t->nlaunches, sizeof *lk, by_corr);
    for (size_t i = 0; i < n; i++) {
        const launch_key *l = launch_of(lk, t->nlaunches, t->acts[i].correlation);
        info[i].launch = l ? l->start : NAN;
        info[i].tid = l ? l->tid : -1;
        /* With launch records, an activity whose launch is unknown counts as
         * queued when it started: the idle before it is the host's. */
        info[i].issue = l              ? fmax(l->start, fmin(l->end, t->acts[i].start_us))
                        : t->nlaunches ? t->acts[i].start_us
                                       : NAN;
    }
    free(lk);

    /* Steps: what the trace states, else host ranges and launches. */
    long long *numbers = NULL;
    size_t nsteps = 0;
    int stated = n > 0 && t->acts[0].step >= 0;
    if (stated) {
        numbers = ao_malloc(n * sizeof *numbers);
        for (size_t i = 0; i < n; i++) numbers[i] = t->acts[i].step;
        qsort(numbers, n, sizeof *numbers, by_ll);
        for (size_t i = 0; i < n; i++)
            if (i == 0 || numbers[i] != numbers[nsteps - 1]) numbers[nsteps++] = numbers[i];
        for (size_t i = 0; i < n; i++) {
            long long s = t->acts[i].step;
            long long *p = bsearch(&s, numbers, nsteps, sizeof *numbers, by_ll);
            info[i].step = p ? (long)(p - numbers) : -1;
        }
    } else {
        step_range *ranges;
        size_t nr = collect_steps(t, c, &ranges);
        if (nr == 0) {
            out->stepless = 1;
            numbers = ao_malloc(sizeof *numbers);
            numbers[0] = 0;
            nsteps = 1;
            for (size_t i = 0; i < n; i++) info[i].step = 0;
        } else {
            numbers = ao_malloc(nr * sizeof *numbers);
            for (size_t i = 0; i < nr; i++) numbers[i] = ranges[i].step;
            qsort(numbers, nr, sizeof *numbers, by_ll);
            for (size_t i = 0; i < nr; i++)
                if (i == 0 || numbers[i] != numbers[nsteps - 1]) numbers[nsteps++] = numbers[i];
            for (size_t i = 0; i < n; i++) {
                double x = t->nlaunches ? info[i].launch : t->acts[i].start_us;
                long r = isnan(x) ? -1 : find_range(ranges, nr, x);
                if (r < 0) {
                    info[i].step = -1;
                    continue;
                }
                long long *p = bsearch(&ranges[r].step, numbers, nsteps, sizeof *numbers, by_ll);
                info[i].step = (long)(p - numbers);
            }
        }
        free(ranges);
    }

    /* Group activity indexes by step (counting sort). */
    size_t *count = ao_calloc(nsteps + 1, sizeof *count);
    size_t *idx = ao_malloc((n ? n : 1) * sizeof *idx);
    for (size_t i = 0; i < n; i++) {
        if (info[i].step >= 0)
            count[info[i].step + 1]++;
        else
            out->unattributed++;
    }
    for (size_t s = 0; s < nsteps; s++) count[s + 1] += count[s];
    size_t *pos = ao_malloc((nsteps + 1) * sizeof *pos);
    memcpy(pos, count, (nsteps + 1) * sizeof *pos);
    for (size_t i = 0; i < n; i++)
        if (info[i].step >= 0) idx[pos[info[i].step]++] = i;
    free(pos);

    out->steps = ao_calloc(nsteps ? nsteps : 1, sizeof *out->steps);
    size_t ncomm = 0;
    for (size_t i = 0; i < n; i++) ncomm += info[i].cls == AO_CLASS_COMM;
    out->comms = ao_malloc((ncomm ? ncomm : 1) * sizeof *out->comms);
    for (size_t s = 0; s < nsteps; s++) {
        size_t m = count[s + 1] - count[s];
        if (m == 0) continue; /* a step that ran nothing on the device */
        ao_step_result *r = &out->steps[out->nsteps++];
        r->step = numbers[s];
        window_stats(t, info, idx + count[s], m, world_size, 1, r);
        /* window_stats sorted the step's activities: op j is idx[j] */
        for (size_t j = 0; j < m; j++)
            if (info[idx[count[s] + j]].cls == AO_CLASS_COMM)
                out->comms[out->ncomms++] = comm_act(info, idx[count[s] + j], r->step, (long)j);
    }
    step_contention(t, idx, count, nsteps, out);
    for (size_t i = 0; i < n; i++)
        if (info[i].cls == AO_CLASS_COMM && info[i].step < 0)
            out->comms[out->ncomms++] = comm_act(info, i, -1, -1);
    qsort_r(out->comms, out->ncomms, sizeof *out->comms, by_launch, (void *)t->acts);
    for (size_t i = 0; i < n; i++) idx[i] = i;
    window_stats(t, info, idx, n, world_size, 1, &out->total);
    free(count);
    free(idx);
    free(numbers);
    free(info);
    ao_hta_compute(t, &out->hta);
    return 0;
}

void ao_rank_result_free(ao_rank_result *r)
{
    for (size_t i = 0; i < r->nsteps; i++) free(r->steps[i].ops);
    free(r->steps);
    free(r->total.ops);
    free(r->comms);
    free(r->kernels);
    memset(r, 0, sizeof *r);
}

static yajl_gen_status gen_kinds(yajl_gen g, const char *k, const double *v)
{
    yajl_gen_status st = ao_json_gen_str(g, k);
    if (st == yajl_gen_status_ok) st = yajl_gen_map_open(g);
    for (int i = 0; i < AO_NXKINDS && st == yajl_gen_status_ok; i++) {
        st = ao_json_gen_str(g, ao_xkind_name((ao_xkind)i));
        if (st == yajl_gen_status_ok) st = ao_json_gen_double(g, v[i]);
    }
    return st == yajl_gen_status_ok ? yajl_gen_map_close(g) : st;
}

yajl_gen_status ao_step_result_gen_extra(yajl_gen g, const ao_step_result *r)
{
    yajl_gen_status st = ao_json_gen_str(g, "idle_other_ms");
    if (st == yajl_gen_status_ok) st = ao_json_gen_double(g, r->idle_other_ms);
    if (st == yajl_gen_status_ok) st = gen_kinds(g, "comm_by_kind_ms", r->comm_kind_ms);
    if (st == yajl_gen_status_ok) st = gen_kinds(g, "exposed_by_kind_ms", r->exposed_kind_ms);
    if (st == yajl_gen_status_ok && r->has_contention)
        st = ao_contention_step_gen(g, &r->contention);
    return st;
}
