/* What bounds a step: the terms of a step on the critical rank, findings
 * ranked by their cost, the classification (DESIGN §13). Knob advice lives
 * in knobs.c; printing and JSON in output.c. */
#include "diagnose/diagnose.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/stats.h"
#include "core/text.h"
#include "diagnose/internal.h"

const char *ao_bound_name(ao_bound b)
{
    static const char *const names[] = {
        "compute-bound",   "communication-exposed", "input-bound", "host-bound",
        "memory-bound",    "straggler-bound",       "balanced",    "unknown",
        "contention-bound"};
    return (unsigned)b < sizeof names / sizeof names[0] ? names[b] : "unknown";
}

const char *ao_finding_id(ao_finding_kind k)
{
    static const char *const ids[] = {
        "input_wait",        "host_launch",           "straggler",
        "exposed_allgather", "exposed_reducescatter", "exposed_allreduce",
        "exposed_broadcast", "device_wait",           "contention",
        "late_rank",         "collective_skew",       "slow_transfer"};
    return (unsigned)k < sizeof ids / sizeof ids[0] ? ids[k] : "unknown";
}

void ao_diag_note_add(ao_diag_note **v, size_t *n, const char *id, const char *fmt, ...)
{
    *v = ao_realloc(*v, (*n + 1) * sizeof **v);
    ao_diag_note *x = &(*v)[(*n)++];
    snprintf(x->id, sizeof x->id, "%s", id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->text, sizeof x->text, fmt, ap);
    va_end(ap);
}

static double nz(double x)
{
    return isfinite(x) && x > 0 ? x : 0;
}

/* ---- the terms of a step, per rank ----------------------------------------- */

/* Time between one step's window and the next one's (consecutive steps):
 * the device ran nothing of either, the host was between iterations. From
 * wall_time (the window's start) and step_ms. */
static double rank_gap_median(const ao_rank_data *rd)
{
    int ms = ao_metric_find("step_ms");
    if (rd->n < 2 || ms < 0) return NAN;
    size_t nm = ao_metric_count(), k = 0;
    double *g = ao_malloc(rd->n * sizeof *g);
    for (size_t i = 0; i + 1 < rd->n; i++) {
        if (rd->steps[i + 1] != rd->steps[i] + 1) continue;
        double step = rd->rows[i * nm + (size_t)ms];
        double gap = (rd->wall[i + 1] - rd->wall[i]) * 1e3 - step;
        if (isfinite(gap)) g[k++] = gap > 0 ? gap : 0;
    }
    double v = k ? ao_stats_median(g, k) : NAN;
    free(g);
    return v;
}

void ao_diag_terms_of(const ao_rank_data *rd, ao_diag_terms *t)
{
    t->step = ao_rank_metric_median(rd, "step_ms");
    t->compute = ao_rank_metric_median(rd, "compute_ms");
    t->comm = ao_rank_metric_median(rd, "comm_ms");
    t->exposed = ao_rank_metric_median(rd, "exposed_comm_ms");
    t->idle = ao_rank_metric_median(rd, "idle_ms");
    t->host_wait = ao_rank_metric_median(rd, "host_wait_ms");
    t->data_wait = ao_rank_metric_median(rd, "data_wait_ms");
    /* the host's share of the gap when the records have it, else all of it */
    t->gap = ao_rank_metric_median(rd, "host_gap_ms");
    if (isnan(t->gap)) t->gap = rank_gap_median(rd);
    static const char *const kinds[AO_NKINDS] = {"exposed_allgather_ms", "exposed_reducescatter_ms",
                                                 "exposed_allreduce_ms", "exposed_broadcast_ms"};
    for (int k = 0; k < AO_NKINDS; k++) t->exposed_kind[k] = ao_rank_metric_median(rd, kinds[k]);
    t->contention = ao_rank_metric_median(rd, "contention_ms");
    /* The rank's own time: its compute and its device waiting for its host
     * (what a slow device or host adds), not what it waits for the others. */
    t->own = t->compute + nz(t->host_wait);
}

/* ---- findings ---------------------------------------------------------------- */

ao_finding *ao_diag_add_finding(ao_diagnosis *d, ao_finding_kind kind, double ms, int rank)
{
    d->findings = ao_realloc(d->findings, (d->nfindings + 1) * sizeof *d->findings);
    ao_finding *f = &d->findings[d->nfindings++];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->ms = ms;
    f->share = d->step_ms > 0 ? ms / d->step_ms : NAN;
    f->rank = rank;
    f->cause = -1;
    return f;
}

static int by_cost(const void *a, const void *b)
{
    const ao_finding *x = a, *y = b;
    return (x->ms < y->ms) - (x->ms > y->ms);
}

/* The ranks: the critical one (the slowest, runs/rundata.h: the one the
 * others wait for, else the most time of its own) and how much it holds the
 * others back: the smaller of how much longer its own time is than the
 * others' median and how much longer the others wait in collectives than it
 * does (both hold for a straggler; one alone is noise between ranks). */
static int critical_rank(const ao_run_data *run, const ao_diag_terms *t, double *straggle_ms)
{
    int c = ao_run_slowest_rank(run, NULL);
    *straggle_ms = NAN;
    if (run->nranks < 2) return c;
    double *own = ao_malloc(2 * (size_t)run->nranks * sizeof *own), *wait = own + run->nranks;
    size_t n = 0;
    for (int i = 0; i < run->nranks; i++)
        if (i != c && isfinite(t[i].own) && isfinite(t[i].exposed)) {
            own[n] = t[i].own;
            wait[n++] = t[i].exposed;
        }
    if (n && isfinite(t[c].exposed)) {
        double a = t[c].own - ao_stats_median(own, n);
        double b = ao_stats_median(wait, n) - t[c].exposed;
        *straggle_ms = a < b ? a : b;
    }
    free(own);
    return c;
}

static void straggler_finding(ao_diagnosis *d, const ao_run_data *run, const ao_diag_terms *t,
                              int c, double straggle)
{
    /* The others waited that long in collectives: their exposed
     * communication exceeds the critical rank's by about the same. */
    double others_exposed = 0, med_own = 0;
    int n = 0;
    for (int i = 0; i < run->nranks; i++)
        if (i != c && isfinite(t[i].exposed)) {
            others_exposed += t[i].exposed;
            med_own += t[i].own;
            n++;
        }
    others_exposed = n ? others_exposed / n : NAN;
    med_own = n ? med_own / n : NAN; /* their mean, as the evidence states */
    ao_finding *f = ao_diag_add_finding(d, AO_FIND_STRAGGLER, straggle, run->ranks[c].rank);
    snprintf(f->what, sizeof f->what, "rank %d is slower than the others by %.3g ms a step",
             run->ranks[c].rank, straggle);
    snprintf(f->where, sizeof f->where,
             "rank %d: compute %.3g ms, data wait %.3g ms, idle %.3g ms a step", run->ranks[c].rank,
             t[c].compute, nz(t[c].data_wait), nz(t[c].idle));
    snprintf(f->evidence, sizeof f->evidence,
             "time of its own (compute + host wait) %.3g ms against a mean %.3g ms on the other "
             "%d rank(s); they wait %.3g ms a step (mean) in collectives against %.3g ms on rank "
             "%d; the "
             "cost is the smaller difference",
             t[c].own, med_own, run->nranks - 1, others_exposed, nz(t[c].exposed),
             run->ranks[c].rank);
    ao_diag_knobs_straggler(run, t, c, f);
    snprintf(f->gain, sizeof f->gain,
             "at most %.3g ms a step: the others' wait for rank %d, if it ran as fast as they do",
             straggle, run->ranks[c].rank);
}

static void input_and_host(ao_diagnosis *d, const ao_run_data *run, const ao_diag_terms *tc,
                           int rank)
{
    double device_dry = nz(tc->host_wait) + nz(tc->gap);
    double input = 0;
    if (isfinite(tc->data_wait) && tc->data_wait > 0) {
        input = tc->data_wait < device_dry ? tc->data_wait : device_dry;
        ao_finding *f = ao_diag_add_finding(d, AO_FIND_INPUT, input, rank);
        snprintf(f->what, sizeof f->what, "input wait: %.3g ms a step waiting for the data loader",
                 input);
        ao_diag_where_input(run, f);
        snprintf(f->evidence, sizeof f->evidence,
                 "the host waited %.3g ms a step for the loader (data_wait_ms); the device ran "
                 "dry %.3g ms a step (host_wait_ms %.3g inside the step + %.3g between steps); "
                 "the cost is the smaller",
                 tc->data_wait, device_dry, nz(tc->host_wait), nz(tc->gap));
        ao_diag_knobs_input(run, f);
        snprintf(f->gain, sizeof f->gain,
                 "at most %.3g ms a step (%.0f %%): the device time lost to the loader", input,
                 100 * input / d->step_ms);
    }
    double host = device_dry - input;
    if (host > 0) {
        ao_finding *f = ao_diag_add_finding(d, AO_FIND_HOST, host, rank);
        snprintf(f->what, sizeof f->what,
                 "host launch: the device ran dry %.3g ms a step waiting for the host to enqueue",
                 host);
        snprintf(f->where, sizeof f->where,
                 "rank %d: %.3g ms inside the step, %.3g ms between steps", rank, nz(tc->host_wait),
                 nz(tc->gap));
        snprintf(f->evidence, sizeof f->evidence,
                 "idle %.3g ms a step of which %.3g ms with nothing enqueued (host_wait_ms), "
                 "%.3g ms between one step's last op and the next one's first, less %.3g ms "
                 "explained by the loader",
                 nz(tc->idle), nz(tc->host_wait), nz(tc->gap), input);
        ao_diag_knobs_host(run, f);
        snprintf(f->gain, sizeof f->gain,
                 "at most %.3g ms a step: the device's idle time spent "
                 "waiting for launches",
                 host);
    }
    /* Idle with work queued: a stream waiting on another's event. */
    if (isfinite(tc->host_wait) && tc->idle - tc->host_wait > 0) {
        double w = tc->idle - tc->host_wait;
        ao_finding *f = ao_diag_add_finding(d, AO_FIND_DEVICE_WAIT, w, rank);
        snprintf(f->what, sizeof f->what,
                 "device wait: %.3g ms a step idle with work enqueued (cross-stream waits)", w);
        snprintf(f->where, sizeof f->where, "rank %d, between ops of the step", rank);
        snprintf(f->evidence, sizeof f->evidence,
                 "idle_ms %.3g less host_wait_ms %.3g: every stream was waiting on an event",
                 tc->idle, tc->host_wait);
        ao_diag_knobs_device_wait(run, f->knobs, sizeof f->knobs);
        snprintf(f->gain, sizeof f->gain, "at most %.3g ms a step", w);
    }
}

static void comm_findings(ao_diagnosis *d, const ao_run_data *run, const ao_diag_terms *tc, int c,
                          int straggling)
{
    static const ao_finding_kind fk[AO_NKINDS] = {
        AO_FIND_EXPOSED_ALLGATHER, AO_FIND_EXPOSED_REDUCESCATTER, AO_FIND_EXPOSED_ALLREDUCE,
        AO_FIND_EXPOSED_BROADCAST};
    const ao_rank_data *rd = &run->ranks[c];
    for (int k = 0; k < AO_NKINDS; k++) {
        double e = tc->exposed_kind[k];
        if (!(e > 0)) continue;
        ao_finding *f = ao_diag_add_finding(d, fk[k], e, rd->rank);
        snprintf(f->what, sizeof f->what, "exposed %s: %.3g ms a step that no compute hid",
                 ao_coll_kind_name((ao_coll_kind)k), e);
        ao_diag_where_comm(run, c, (ao_coll_kind)k, f);
        ao_diag_knobs_comm(run, c, (ao_coll_kind)k, f);
        snprintf(f->gain, sizeof f->gain, "at most the %.3g ms of exposed %s a step%s", e,
                 ao_coll_kind_name((ao_coll_kind)k),
                 straggling ? " (measured on the slowest rank: the others' include its lag)" : "");
    }
}

/* ---- classification ------------------------------------------------------------ */

static void classify(ao_diagnosis *d)
{
    const ao_finding *top = d->nfindings ? &d->findings[0] : NULL;
    double cshare = d->step_ms > 0 ? d->compute_ms / d->step_ms : NAN;
    if (!(d->step_ms > 0)) {
        d->bound = AO_BOUND_UNKNOWN;
        snprintf(d->bound_why, sizeof d->bound_why, "no step with a measured time");
        return;
    }
    if (top && top->share >= AO_DIAG_BOUND_SHARE) {
        switch (top->kind) {
        case AO_FIND_INPUT:
            d->bound = AO_BOUND_INPUT;
            break;
        case AO_FIND_HOST:
            d->bound = AO_BOUND_HOST;
            break;
        case AO_FIND_STRAGGLER:
            d->bound = AO_BOUND_STRAGGLER;
            break;
        case AO_FIND_DEVICE_WAIT:
            d->bound = AO_BOUND_BALANCED;
            break;
        case AO_FIND_CONTENTION:
            d->bound = AO_BOUND_CONTENTION;
            break;
        case AO_FIND_LATE_RANK:
            /* what held the rank the others wait for bounds them all */
            d->bound = top->cause == AO_CAUSE_HOST_WAIT   ? AO_BOUND_HOST
                       : top->cause == AO_CAUSE_DATA_WAIT ? AO_BOUND_INPUT
                                                          : AO_BOUND_STRAGGLER;
            break;
        case AO_FIND_COLLECTIVE_SKEW:
            d->bound = AO_BOUND_STRAGGLER;
            break;
        default:
            d->bound = AO_BOUND_COMM;
        }
        snprintf(d->bound_why, sizeof d->bound_why,
                 "the largest finding (%s) costs %.3g ms of the %.3g ms median step (%.0f %% >= "
                 "%.0f %%); compute fills %.0f %% of the step",
                 ao_finding_id(top->kind), top->ms, d->step_ms, 100 * top->share,
                 100 * AO_DIAG_BOUND_SHARE, 100 * cshare);
        if (top->kind == AO_FIND_LATE_RANK)
            ao_appendf(d->bound_why, sizeof d->bound_why,
                       "; the others wait for rank %d, held by %s", top->rank,
                       ao_late_cause_name((ao_late_cause)top->cause));
        if (d->bound != AO_BOUND_BALANCED) return;
    }
    if (cshare >= AO_DIAG_COMPUTE_SHARE) {
        d->bound = AO_BOUND_COMPUTE;
        snprintf(d->bound_why, sizeof d->bound_why,
                 "compute fills %.0f %% of the %.3g ms median step (>= %.0f %%) and no finding "
                 "costs %.0f %% of it; the levers are the kernels: training.mixed_precision bf16, "
                 "training.tf32 (docs/tuning.md, \"Compute-bound\"); memory-bound kernels cannot "
                 "be told from these records",
                 100 * cshare, d->step_ms, 100 * AO_DIAG_COMPUTE_SHARE, 100 * AO_DIAG_BOUND_SHARE);
        return;
    }
    d->bound = AO_BOUND_BALANCED;
    snprintf(d->bound_why, sizeof d->bound_why,
             "no finding costs %.0f %% of the %.3g ms median step and compute fills %.0f %% of it "
             "(< %.0f %%)",
             100 * AO_DIAG_BOUND_SHARE, d->step_ms, 100 * cshare, 100 * AO_DIAG_COMPUTE_SHARE);
}

void ao_diagnose_run(const ao_run_data *run, ao_diagnosis *d)
{
    ao_diagnose_run_ref(run, NULL, d);
}

void ao_diagnose_run_ref(const ao_run_data *run, const ao_coll_ref *ref, ao_diagnosis *d)
{
    memset(d, 0, sizeof *d);
    d->run_id = ao_strdup(run->run_id ? run->run_id : "?");
    d->dir = ao_strdup(run->dir ? run->dir : "?");
    d->world_size = run->world_size;
    d->nranks = run->nranks;
    d->step_ms = d->compute_ms = d->exposed_comm_ms = d->idle_ms = NAN;
    d->host_wait_ms = d->data_wait_ms = d->gap_ms = NAN;
    d->bound = AO_BOUND_UNKNOWN;
    if (run->nranks == 0) {
        ao_diag_note_add(&d->limits, &d->nlimits, "no_ranks", "the run has no metrics file");
        snprintf(d->bound_why, sizeof d->bound_why, "no records");
        return;
    }
    ao_diag_terms *t = ao_calloc((size_t)run->nranks, sizeof *t);
    for (int i = 0; i < run->nranks; i++) ao_diag_terms_of(&run->ranks[i], &t[i]);
    double straggle;
    int c = critical_rank(run, t, &straggle);
    const ao_diag_terms *tc = &t[c];
    d->critical_rank = run->ranks[c].rank;
    d->steps = run->ranks[c].n;
    d->step_ms = tc->step;
    d->compute_ms = tc->compute;
    d->exposed_comm_ms = tc->exposed;
    d->idle_ms = tc->idle;
    d->host_wait_ms = tc->host_wait;
    d->data_wait_ms = tc->data_wait;
    d->gap_ms = tc->gap;

    /* Matched collectives say who waited for whom (late.c); the straggler
     * estimate from medians is for runs without them. */
    int straggling = straggle > 0 && straggle >= AO_DIAG_FINDING_SHARE * tc->step;
    if (run->coll_sum)
        ao_diag_late(d, run, ref);
    else if (straggle > 0)
        straggler_finding(d, run, t, c, straggle);
    input_and_host(d, run, tc, d->critical_rank);
    comm_findings(d, run, tc, c, straggling);
    ao_diag_contention(run, t, c, d);
    qsort(d->findings, d->nfindings, sizeof *d->findings, by_cost);
    /* Findings below the share are noise at this resolution: dropped. */
    size_t keep = 0;
    for (size_t i = 0; i < d->nfindings; i++)
        if (d->findings[i].share >= AO_DIAG_FINDING_SHARE) d->findings[keep++] = d->findings[i];
    d->nfindings = keep;
    classify(d);
    ao_diag_sanity(run, t, c, d);
    ao_diag_outliers(run, c, d);
    free(t);
}

void ao_diagnosis_free(ao_diagnosis *d)
{
    free(d->run_id);
    free(d->dir);
    free(d->findings);
    free(d->flags);
    free(d->limits);
    free(d->outliers);
    memset(d, 0, sizeof *d);
}
