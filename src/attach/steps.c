/* attach/steps.h: records and marks cut into steps, each to §7 metrics. */
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "attach/steps.h"
#include "core/error.h"

#define MAX_PENDING (4u << 20)

typedef struct pending {
    ao_cupti_record r;
    uint64_t arrived;
} pending;

typedef struct mark {
    char *name;
    int64_t begin, end;
} mark;

typedef struct aside {
    int64_t corr_from, corr_to; /* corr_to INT64_MAX while open */
    uint64_t t_from, t_to;
} aside;

struct ao_steps {
    ao_steps_opts o;
    uint64_t anchor;
    regex_t nvtx, kernel;
    ao_classifier classifier;
    pending *recs;
    size_t n, cap;
    mark *marks;
    size_t nmarks, cap_marks;
    aside *asides;
    size_t nasides, cap_asides;
    ao_step_source source;
    ao_step_change *changes;
    size_t nchanges;
    long long next_step;
    long long *unseen;
    size_t nunseen;
    size_t late, outside;
    int64_t horizon;      /* largest id of a settled record */
    uint64_t settled_end; /* latest end of a settled record (windows) */
    int64_t done_corr;    /* records up to this id belong to emitted steps */
    int64_t consumed;     /* the largest id of a record consumed */
    long long emitted;
    int have_w0;
    uint64_t w0, done_t; /* windows: origin; device time up to which windows are done */
};

const char *ao_step_source_name(ao_step_source s)
{
    switch (s) {
    case AO_STEP_WINDOW:
        return "window";
    case AO_STEP_KERNEL:
        return "kernel";
    case AO_STEP_NVTX:
        return "nvtx";
    default:
        return "none";
    }
}

int ao_steps_regex_check(const char *flag, const char *re)
{
    regex_t r;
    int rc = regcomp(&r, re, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char why[256];
        regerror(rc, &r, why, sizeof why);
        ao_error(flag, "'%s' is not an extended regular expression: %s", re, why);
        return AO_EXIT_USAGE;
    }
    regfree(&r);
    return 0;
}

ao_steps *ao_steps_new(const ao_steps_opts *o, uint64_t anchor_ns)
{
    ao_steps *s = ao_calloc(1, sizeof *s);
    s->o = *o;
    if (!s->o.nvtx_regex) s->o.nvtx_regex = AO_STEP_NVTX_DEFAULT;
    if (!s->o.kernel_regex) s->o.kernel_regex = AO_STEP_KERNEL_DEFAULT;
    if (s->o.window_ms <= 0) s->o.window_ms = AO_STEP_WINDOW_MS_DEFAULT;
    if (s->o.min_gap <= 0) s->o.min_gap = 16;
    if (s->o.world_size < 1) s->o.world_size = 1;
    s->anchor = anchor_ns;
    s->done_corr = -1;
    if (regcomp(&s->nvtx, s->o.nvtx_regex, REG_EXTENDED | REG_NOSUB) != 0) {
        free(s);
        return NULL;
    }
    if (regcomp(&s->kernel, s->o.kernel_regex, REG_EXTENDED | REG_NOSUB) != 0) {
        regfree(&s->nvtx);
        free(s);
        return NULL;
    }
    if (ao_classifier_init(&s->classifier, NULL, s->o.comm_regex) != 0) {
        regfree(&s->nvtx);
        regfree(&s->kernel);
        free(s);
        return NULL;
    }
    return s;
}

void ao_steps_free(ao_steps *s)
{
    if (!s) return;
    regfree(&s->nvtx);
    regfree(&s->kernel);
    ao_classifier_free(&s->classifier);
    for (size_t i = 0; i < s->nmarks; i++) free(s->marks[i].name);
    free(s->marks);
    free(s->recs);
    free(s->asides);
    free(s->changes);
    free(s->unseen);
    free(s);
}

static uint64_t mid(const ao_cupti_record *r)
{
    return r->end_ns > r->start_ns ? r->start_ns + (r->end_ns - r->start_ns) / 2 : r->start_ns;
}

void ao_steps_add(ao_steps *s, const ao_cupti_record *r, uint64_t arrived_ns)
{
    /* a record of a step already written: too late to count */
    if ((s->source == AO_STEP_NVTX || s->source == AO_STEP_KERNEL) &&
        r->correlation <= s->done_corr) {
        s->late++;
        return;
    }
    if (s->source == AO_STEP_WINDOW && mid(r) < s->done_t) {
        s->late++;
        return;
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        s->recs = ao_realloc(s->recs, s->cap * sizeof *s->recs);
    }
    s->recs[s->n++] = (pending){*r, arrived_ns};
}

int ao_steps_is_step_range(const ao_steps *s, const char *name)
{
    if (!name || (s->o.forced != AO_STEP_NONE && s->o.forced != AO_STEP_NVTX)) return 0;
    return regexec(&s->nvtx, name, 0, NULL, 0) == 0;
}

void ao_steps_add_mark(ao_steps *s, const char *name, int64_t corr_begin, int64_t corr_end)
{
    if (s->nmarks == s->cap_marks) {
        s->cap_marks = s->cap_marks ? 2 * s->cap_marks : 64;
        s->marks = ao_realloc(s->marks, s->cap_marks * sizeof *s->marks);
    }
    /* ranges of one thread end in order; of several threads, nearly: keep
     * the queue sorted by end */
    size_t i = s->nmarks++;
    while (i > 0 && s->marks[i - 1].end > corr_end) {
        s->marks[i] = s->marks[i - 1];
        i--;
    }
    s->marks[i] = (mark){ao_strdup(name ? name : "step"), corr_begin, corr_end};
}

void ao_steps_aside(ao_steps *s, int64_t corr_from, uint64_t t_from_ns)
{
    if (s->nasides && s->asides[s->nasides - 1].corr_to == INT64_MAX) return; /* already */
    if (s->nasides == s->cap_asides) {
        s->cap_asides = s->cap_asides ? 2 * s->cap_asides : 8;
        s->asides = ao_realloc(s->asides, s->cap_asides * sizeof *s->asides);
    }
    s->asides[s->nasides++] = (aside){corr_from, INT64_MAX, t_from_ns, UINT64_MAX};
}

void ao_steps_resume(ao_steps *s, int64_t corr_to, uint64_t t_to_ns)
{
    if (!s->nasides || s->asides[s->nasides - 1].corr_to != INT64_MAX) return;
    s->asides[s->nasides - 1].corr_to = corr_to;
    s->asides[s->nasides - 1].t_to = t_to_ns;
}

static int unseen_corr(const ao_steps *s, int64_t b, int64_t e)
{
    for (size_t i = 0; i < s->nasides; i++)
        if (s->asides[i].corr_from < e && s->asides[i].corr_to > b) return 1;
    return 0;
}

static int unseen_time(const ao_steps *s, uint64_t t0, uint64_t t1)
{
    for (size_t i = 0; i < s->nasides; i++)
        if (s->asides[i].t_from < t1 && s->asides[i].t_to > t0) return 1;
    return 0;
}

static void set_source(ao_steps *s, ao_step_source src)
{
    if (src <= s->source) return;
    s->source = src;
    s->changes = ao_realloc(s->changes, (s->nchanges + 1) * sizeof *s->changes);
    s->changes[s->nchanges++] = (ao_step_change){s->next_step, src};
}

static int by_corr(const void *a, const void *b)
{
    const pending *x = a, *y = b;
    return (x->r.correlation > y->r.correlation) - (x->r.correlation < y->r.correlation);
}

static int is_kernel_match(const ao_steps *s, const ao_cupti_record *r)
{
    return r->kind == AO_CUPTI_KERNEL && regexec(&s->kernel, r->name, 0, NULL, 0) == 0;
}

/* The records as one step of a trace, analysed as `aorta analyze` analyses
 * a trace (ingest/analyze.h): one classification, one set of metrics. */
static void emit(ao_steps *s, const pending *recs, size_t n, ao_step_source src, const char *name,
                 ao_step_emit_fn fn, void *ctx)
{
    long long step = s->next_step++;
    if (n == 0) return;
    static const uint8_t kinds[] = {[AO_CUPTI_KERNEL] = AO_ACT_KERNEL,
                                    [AO_CUPTI_MEMCPY] = AO_ACT_MEMCPY,
                                    [AO_CUPTI_MEMSET] = AO_ACT_MEMSET};
    ao_trace t;
    ao_trace_init(&t, "attach", "cupti");
    for (size_t i = 0; i < n; i++) {
        const ao_cupti_record *r = &recs[i].r;
        ao_activity *a = ao_trace_add_activity(&t);
        /* signed differences: an activity may precede the anchor */
        a->start_us = (double)(int64_t)(r->start_ns - s->anchor) / 1000.0;
        a->end_us = (double)(int64_t)(r->end_ns - s->anchor) / 1000.0;
        if (a->end_us < a->start_us) a->end_us = a->start_us;
        a->bytes = r->bytes;
        a->name = r->name; /* interned by the caller: analysis keys names by pointer */
        a->correlation = r->correlation;
        a->stream = r->stream_id;
        a->kind = kinds[r->kind];
        a->step = step; /* the trace states the step: no ranges, no launches needed */
    }
    ao_rank_result res;
    if (ao_analyze_trace(&t, &s->classifier, s->o.world_size, &res) == 0 && res.nsteps == 1) {
        const ao_step_result *sr = &res.steps[0];
        ao_step_out out = {.step = step,
                           .source = src,
                           .name = name,
                           .ops = sr->ops,
                           .nops = sr->nops,
                           .m = sr->m,
                           .analysis = sr};
        s->emitted++;
        fn(ctx, &out);
    }
    ao_rank_result_free(&res);
    ao_trace_free(&t);
}

static void mark_unseen(ao_steps *s)
{
    s->unseen = ao_realloc(s->unseen, (s->nunseen + 1) * sizeof *s->unseen);
    s->unseen[s->nunseen++] = s->next_step++;
}

/* Drop the first k records (sorted by id). */
static void consume(ao_steps *s, size_t k)
{
    for (size_t i = 0; i < k; i++)
        if (s->recs[i].r.correlation > s->consumed) s->consumed = s->recs[i].r.correlation;
    memmove(s->recs, s->recs + k, (s->n - k) * sizeof *s->recs);
    s->n -= k;
}

static void advance_nvtx(ao_steps *s, int final, ao_step_emit_fn fn, void *ctx)
{
    size_t m = 0;
    for (; m < s->nmarks; m++) {
        const mark *mk = &s->marks[m];
        if (!final && s->horizon <= mk->end) break;
        size_t i = 0;
        while (i < s->n && s->recs[i].r.correlation <= mk->begin) i++;
        s->outside += i;
        size_t j = i;
        while (j < s->n && s->recs[j].r.correlation <= mk->end) j++;
        if (unseen_corr(s, mk->begin, mk->end))
            mark_unseen(s);
        else
            emit(s, s->recs + i, j - i, AO_STEP_NVTX, mk->name, fn, ctx);
        consume(s, j);
        if (mk->end > s->done_corr) s->done_corr = mk->end;
        free(s->marks[m].name);
    }
    memmove(s->marks, s->marks + m, (s->nmarks - m) * sizeof *s->marks);
    s->nmarks -= m;
}

/* The index of the kernel that ends the first step among the settled
 * records, or -1. */
static long kernel_boundary(const ao_steps *s, int final)
{
    long last = -1;
    int gap = 0;
    for (size_t i = 0; i < s->n; i++) {
        const ao_cupti_record *r = &s->recs[i].r;
        if (!final && r->correlation > s->horizon) return -1;
        if (r->kind != AO_CUPTI_KERNEL) continue;
        if (is_kernel_match(s, r)) {
            last = (long)i;
            gap = 0;
        } else if (last >= 0 && ++gap >= s->o.min_gap) {
            return last;
        }
    }
    return final ? last : -1;
}

static void advance_kernel(ao_steps *s, int final, ao_step_emit_fn fn, void *ctx)
{
    long b;
    while ((b = kernel_boundary(s, final)) >= 0) {
        int64_t first = s->recs[0].r.correlation - 1, end = s->recs[b].r.correlation;
        if (unseen_corr(s, first, end))
            mark_unseen(s);
        else
            emit(s, s->recs, (size_t)b + 1, AO_STEP_KERNEL, NULL, fn, ctx);
        consume(s, (size_t)b + 1);
        s->done_corr = end;
    }
    if (final) { /* work after the last step's end belongs to no step */
        s->outside += s->n;
        s->n = 0;
    }
}

static int by_mid(const void *a, const void *b)
{
    uint64_t x = mid(&((const pending *)a)->r), y = mid(&((const pending *)b)->r);
    return (x > y) - (x < y);
}

static void advance_window(ao_steps *s, int final, ao_step_emit_fn fn, void *ctx)
{
    if (!s->n) return;
    qsort(s->recs, s->n, sizeof *s->recs, by_mid);
    const uint64_t w = (uint64_t)(s->o.window_ms * 1e6);
    if (!s->have_w0) {
        s->have_w0 = 1;
        s->w0 = mid(&s->recs[0].r);
        s->done_t = s->w0;
    }
    while (s->n) {
        uint64_t m0 = mid(&s->recs[0].r);
        uint64_t k = m0 > s->w0 ? (m0 - s->w0) / w : 0;
        uint64_t t0 = s->w0 + k * w, t1 = t0 + w;
        if (!final && s->settled_end < t1) break;
        /* numbered by window, so empty windows keep their numbers */
        long long first = (long long)((s->done_t - s->w0) / w);
        if ((long long)k > first) s->next_step += (long long)k - first;
        size_t j = 0;
        while (j < s->n && mid(&s->recs[j].r) < t1) j++;
        if (unseen_time(s, t0, t1))
            mark_unseen(s);
        else
            emit(s, s->recs, j, AO_STEP_WINDOW, NULL, fn, ctx);
        consume(s, j);
        s->done_t = t1;
    }
}

void ao_steps_advance(ao_steps *s, uint64_t now_ns, int final, ao_step_emit_fn fn, void *ctx)
{
    uint64_t cutoff = now_ns > s->o.settle_ns ? now_ns - s->o.settle_ns : 0;
    uint64_t first_start = UINT64_MAX;
    for (size_t i = 0; i < s->n; i++) {
        const pending *p = &s->recs[i];
        if (p->r.start_ns < first_start) first_start = p->r.start_ns;
        if (p->arrived > cutoff) continue;
        if (p->r.correlation > s->horizon) s->horizon = p->r.correlation;
        if (p->r.end_ns > s->settled_end) s->settled_end = p->r.end_ns;
    }
    qsort(s->recs, s->n, sizeof *s->recs, by_corr);

    ao_step_source want = s->o.forced;
    if (want == AO_STEP_NONE) {
        want = s->source;
        if (s->nmarks)
            want = AO_STEP_NVTX;
        else if (want < AO_STEP_KERNEL && kernel_boundary(s, 0) >= 0)
            want = AO_STEP_KERNEL;
        else if (want == AO_STEP_NONE && s->n &&
                 (final || s->settled_end >= first_start + (uint64_t)(5 * s->o.window_ms * 1e6)))
            want = AO_STEP_WINDOW; /* no step mark in the first five windows */
    } else if (want == AO_STEP_NVTX && !s->nmarks && !final) {
        want = s->source; /* not before the first range */
    }
    if (want > s->source) {
        /* leaving windows: what they took, by id */
        if (s->source == AO_STEP_WINDOW) s->done_corr = s->consumed;
        set_source(s, want);
    }
    switch (s->source) {
    case AO_STEP_NVTX:
        advance_nvtx(s, final, fn, ctx);
        if (s->n > MAX_PENDING) { /* no range ends any more (marks lost): bound memory */
            s->outside += s->n - MAX_PENDING / 2;
            consume(s, s->n - MAX_PENDING / 2);
        }
        if (final) {
            s->outside += s->n;
            s->n = 0;
        }
        break;
    case AO_STEP_KERNEL:
        advance_kernel(s, final, fn, ctx);
        break;
    case AO_STEP_WINDOW:
        advance_window(s, final, fn, ctx);
        break;
    default:
        break;
    }
}

void ao_steps_get_stats(const ao_steps *s, ao_steps_stats *st)
{
    *st = (ao_steps_stats){s->source, s->changes, s->nchanges, s->next_step - (long long)s->nunseen,
                           s->unseen, s->nunseen, s->late,     s->outside};
}
