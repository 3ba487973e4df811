/* The findings of the collectives matched across ranks (collectives.jsonl,
 * DESIGN §13): late_rank (the rank the others wait for, what held it, what
 * it costs them), collective_skew (arrival skew no one rank explains) and
 * slow_transfer (bus bandwidth well under `aorta coll`'s at that size). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "diagnose/internal.h"

/* A transfer under this share of the reference's bus bandwidth is slow. */
#define SLOW_TRANSFER_SHARE 0.5

enum { K_AG, K_RS, K_AR, K_OTHER, NK };
static const char *const kind_names[NK] = {"all-gather", "reduce-scatter", "all-reduce", "other"};

static int kind_index(const char *k)
{
    if (!k) return K_OTHER;
    if (strcmp(k, "allgather") == 0) return K_AG;
    if (strcmp(k, "reducescatter") == 0) return K_RS;
    if (strcmp(k, "allreduce") == 0) return K_AR;
    return K_OTHER;
}

const ao_coll_instance *ao_diag_coll_of_op(const ao_run_data *run, int rank, long long step,
                                           int op_index)
{
    const ao_coll_set *s = run->coll;
    if (!s || op_index < 0) return NULL;
    size_t lo = 0, hi = s->ninst;
    while (lo < hi) { /* the first instance of the step */
        size_t mid = (lo + hi) / 2;
        if (s->inst[mid].step < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < s->ninst && s->inst[i].step == step; i++) {
        const ao_coll_instance *in = &s->inst[i];
        for (size_t m = 0; m < in->n; m++)
            if (s->members[in->first + m].rank == rank &&
                s->members[in->first + m].op_index == op_index)
                return in;
    }
    return NULL;
}

static const char *cause_words(ao_late_cause c)
{
    switch (c) {
    case AO_CAUSE_HOST_WAIT:
        return "its host: the collective was not launched yet, or its device ran dry";
    case AO_CAUSE_DATA_WAIT:
        return "its data loader: the host waited for a batch";
    case AO_CAUSE_COMPUTE:
        return "its own compute: its device was busy with its kernels";
    case AO_CAUSE_DEVICE_WAIT:
        return "its streams waiting on events: work queued, the device idle";
    case AO_CAUSE_COLLECTIVE:
        return "another collective it was in, itself waiting";
    default:
        return "time its records do not cover";
    }
}

/* The three instances with the largest skew among those keep() takes. */
static void top_instances(const ao_coll_set *s, int late_rank, char *buf, size_t n)
{
    const ao_coll_instance *top[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < s->ninst; i++) {
        const ao_coll_instance *in = &s->inst[i];
        if (late_rank >= 0 && in->late_rank != late_rank) continue;
        for (int k = 0; k < 3; k++)
            if (!top[k] || in->skew_us > top[k]->skew_us) {
                memmove(&top[k + 1], &top[k], (size_t)(2 - k) * sizeof *top);
                top[k] = in;
                break;
            }
    }
    buf[0] = '\0';
    for (int k = 0; k < 3 && top[k]; k++)
        ao_appendf(buf, n, "%sstep %lld %s %s (%s, %s) %.3g ms", k ? "; " : "", top[k]->step,
                   ao_pass_name((ao_pass)top[k]->pass), top[k]->kind,
                   top[k]->unit ? top[k]->unit : "unit unknown",
                   top[k]->op ? top[k]->op : "op unknown", top[k]->skew_us / 1e3);
}

/* Each other rank's wait for late_rank, by kind, ms a step. */
static void waits(const ao_run_data *run, int late_rank, char *buf, size_t n)
{
    const ao_coll_set *s = run->coll;
    int nr = run->coll_sum->nranks;
    double steps = run->coll_sum->nsteps ? (double)run->coll_sum->nsteps : 1;
    double *w = ao_calloc((size_t)nr * NK, sizeof *w);
    for (size_t i = 0; i < s->ninst; i++) {
        const ao_coll_instance *in = &s->inst[i];
        if (in->late_rank != late_rank || in->step < 0) continue;
        for (size_t m = 0; m < in->n; m++) {
            const ao_coll_member *mb = &s->members[in->first + m];
            if (mb->rank == late_rank || mb->rank >= nr) continue;
            w[(size_t)mb->rank * NK + (size_t)kind_index(in->kind)] +=
                (in->last_start_us - mb->start_us) / 1e3 / steps;
        }
    }
    buf[0] = '\0';
    int shown = 0;
    for (int r = 0; r < nr && shown < 8; r++) {
        if (r == late_rank) continue;
        double tot = 0;
        for (int k = 0; k < NK; k++) tot += w[(size_t)r * NK + (size_t)k];
        if (!(tot > 0)) continue;
        ao_appendf(buf, n, "%srank %d %.3g ms (", shown ? "; " : "", r, tot);
        int first = 1;
        for (int k = 0; k < NK; k++)
            if (w[(size_t)r * NK + (size_t)k] > 0.0005 * tot) {
                ao_appendf(buf, n, "%s%s %.3g", first ? "" : ", ", kind_names[k],
                           w[(size_t)r * NK + (size_t)k]);
                first = 0;
            }
        ao_appendf(buf, n, ")");
        shown++;
    }
    if (shown == 8) ao_appendf(buf, n, "; ...");
    free(w);
}

/* A test-only hook (engine/test_hooks.h) run.json's environment names. */
static const char *planted(const ao_run_data *run, const char *name)
{
    yajl_val v = ao_json_member(ao_run_config_value(run, "env"), name);
    return YAJL_IS_STRING(v) ? v->u.string : NULL;
}

static void late_knobs(const ao_run_data *run, ao_late_cause c, ao_finding *f)
{
    const char *late = planted(run, "AORTA_TEST_LATE_HOST"),
               *slow = planted(run, "AORTA_TEST_SLOW_RANK");
    if (late && c == AO_CAUSE_HOST_WAIT)
        ao_appendf(f->knobs, sizeof f->knobs,
                   "AORTA_TEST_LATE_HOST=%s is set: the test-only hook made that rank's host late "
                   "on purpose",
                   late);
    if (slow && c == AO_CAUSE_COMPUTE)
        ao_appendf(f->knobs, sizeof f->knobs,
                   "AORTA_TEST_SLOW_RANK=%s is set: the test-only hook slowed that rank's compute "
                   "on purpose",
                   slow);
    char *k = f->knobs;
    size_t n = sizeof f->knobs;
    const char *sep = k[0] ? "; " : "";
    switch (c) {
    case AO_CAUSE_HOST_WAIT:
        ao_diag_knobs_host(run, f);
        break;
    case AO_CAUSE_DATA_WAIT:
        ao_diag_knobs_input(run, f);
        break;
    case AO_CAUSE_COMPUTE:
        ao_appendf(k, n,
                   "%sthat rank's device runs more or slower kernels than the others': its extra "
                   "work (uneven data or shards), its clocks and throttling (telemetry.enabled), "
                   "other jobs on it (docs/tuning.md, \"A late rank\")",
                   sep);
        break;
    case AO_CAUSE_DEVICE_WAIT:
        ao_diag_knobs_device_wait(run, k, n);
        break;
    case AO_CAUSE_COLLECTIVE:
        ao_appendf(k, n,
                   "%sit was itself waiting in an earlier collective: follow the chain to the rank "
                   "that one waited for (collectives.jsonl, late_rank of the collective before; "
                   "docs/tuning.md, \"A late rank\")",
                   sep);
        break;
    default:
        ao_appendf(k, n,
                   "%sprofile the steps before too (its late windows reach before its records)",
                   sep);
    }
}

static void late_rank_findings(ao_diagnosis *d, const ao_run_data *run)
{
    const ao_coll_summary *sum = run->coll_sum;
    int top = sum->waited_for;
    char others[300] = "";
    for (int r = 0; r < sum->nranks; r++) {
        const ao_coll_rank_stats *rs = &sum->ranks[r];
        if (r == top || !(rs->cost_ms > 0.001)) continue;
        ao_appendf(others, sizeof others, "%srank %d %.3g ms a step (%s)", others[0] ? "; " : "", r,
                   rs->cost_ms, ao_late_cause_name(ao_late_cause_top(rs->cause_ms)));
    }
    for (int r = 0; r < sum->nranks; r++) {
        const ao_coll_rank_stats *rs = &sum->ranks[r];
        if (!(rs->cost_ms > 0)) continue;
        ao_late_cause c = ao_late_cause_top(rs->cause_ms);
        ao_finding *f = ao_diag_add_finding(d, AO_FIND_LATE_RANK, rs->cost_ms, r);
        f->cause = (int)c;
        snprintf(f->what, sizeof f->what,
                 "rank %d is late at collectives: the others wait %.3g ms a step for it; held "
                 "by %s",
                 r, rs->cost_ms, ao_late_cause_name(c));
        char tops[300];
        top_instances(run->coll, r, tops, sizeof tops);
        snprintf(f->where, sizeof f->where,
                 "rank %d, last to arrive at %zu of %zu collectives; "
                 "the longest waits: %.250s",
                 r, rs->late, run->coll->ninst, tops);
        char w[240];
        waits(run, r, w, sizeof w);
        snprintf(f->evidence, sizeof f->evidence,
                 "held by %s: its late windows a step hold host wait %.3g, data wait %.3g, "
                 "compute %.3g, device wait %.3g, another collective %.3g, unknown %.3g ms; "
                 "the others wait for it: %s",
                 cause_words(c), rs->cause_ms[AO_CAUSE_HOST_WAIT], rs->cause_ms[AO_CAUSE_DATA_WAIT],
                 rs->cause_ms[AO_CAUSE_COMPUTE], rs->cause_ms[AO_CAUSE_DEVICE_WAIT],
                 rs->cause_ms[AO_CAUSE_COLLECTIVE], rs->cause_ms[AO_CAUSE_UNKNOWN], w);
        if (r == top && others[0])
            ao_appendf(f->evidence, sizeof f->evidence, "; also late: %s", others);
        late_knobs(run, c, f);
        snprintf(f->gain, sizeof f->gain,
                 "at most %.3g ms a step: the others' wait for rank %d, were it on time "
                 "(docs/DESIGN.md §14, collectives across ranks)",
                 rs->cost_ms, r);
    }
}

/* Skew no one rank explains: the waits for every late rank but the most
 * waited-for one. */
static void skew_finding(ao_diagnosis *d, const ao_run_data *run)
{
    const ao_coll_summary *sum = run->coll_sum;
    double total = 0, top = 0;
    for (int r = 0; r < sum->nranks; r++) {
        total += sum->ranks[r].cost_ms;
        if (sum->ranks[r].cost_ms > top) top = sum->ranks[r].cost_ms;
    }
    double ms = total - top;
    if (!(ms > 0)) return;
    ao_finding *f = ao_diag_add_finding(d, AO_FIND_COLLECTIVE_SKEW, ms, -1);
    snprintf(f->what, sizeof f->what,
             "collective skew: %.3g ms a step of waiting at collectives for ranks that are late "
             "by turns",
             ms);
    char tops[300];
    top_instances(run->coll, -1, tops, sizeof tops);
    snprintf(f->where, sizeof f->where, "the largest arrival skews: %s", tops);
    snprintf(f->evidence, sizeof f->evidence,
             "the others' wait for every late rank, %.3g ms a step, less the %.3g ms of the "
             "rank waited for most (its own finding); %zu collectives, %zu of them matched on "
             "fewer ranks than their group",
             total, top, run->coll->ninst, run->coll->partial);
    snprintf(f->knobs, sizeof f->knobs,
             "jitter of the ranks' hosts: keep other work off their cores (CPU affinity), "
             "avoid Python's garbage collector in the step, equal data per rank; the instances "
             "are in collectives.jsonl (docs/tuning.md, \"Collective skew\")");
    snprintf(f->gain, sizeof f->gain, "at most %.3g ms a step, were every rank on time", ms);
}

static void slow_transfer_finding(ao_diagnosis *d, const ao_run_data *run, const ao_coll_ref *ref)
{
    const ao_coll_set *s = run->coll;
    double extra = 0, worst = 1;
    size_t slow = 0, judged = 0;
    const ao_coll_instance *w = NULL;
    double wref = NAN;
    for (size_t i = 0; i < s->ninst; i++) {
        const ao_coll_instance *in = &s->inst[i];
        if (!in->consistent || !(in->busbw_gbps > 0) || in->step < 0) continue;
        int n = in->group_size > 0 ? in->group_size : (int)in->n;
        double rb = ao_coll_ref_busbw(ref, in->kind, n, (double)in->bytes);
        if (!(rb > 0)) continue;
        judged++;
        double ratio = in->busbw_gbps / rb;
        if (ratio >= SLOW_TRANSFER_SHARE) continue;
        slow++;
        extra += in->transfer_us * (1 - ratio);
        if (ratio < worst) {
            worst = ratio;
            w = in;
            wref = rb;
        }
    }
    if (!judged)
        ao_diag_note_add(&d->limits, &d->nlimits, "coll_ref_unmatched",
                         "--coll-ref %s has no row of the run's collective kinds and rank counts: "
                         "no transfer was judged",
                         ref->path);
    if (!slow) return;
    double steps = run->coll_sum->nsteps ? (double)run->coll_sum->nsteps : 1;
    ao_finding *f = ao_diag_add_finding(d, AO_FIND_SLOW_TRANSFER, extra / 1e3 / steps, -1);
    snprintf(f->what, sizeof f->what,
             "slow transfers: %zu collectives moved their bytes at under %.0f %% of the bus "
             "bandwidth `aorta coll` measured at their size: %.3g ms a step",
             slow, 100 * SLOW_TRANSFER_SHARE, f->ms);
    snprintf(f->where, sizeof f->where,
             "the slowest: step %lld %s %s of %.3g MiB (%s, %s): %.3g GB/s against %.3g GB/s",
             w->step, ao_pass_name((ao_pass)w->pass), w->kind, (double)w->bytes / 1048576.0,
             w->unit ? w->unit : "unit unknown", w->dtype ? w->dtype : "dtype unknown",
             w->busbw_gbps, wref);
    snprintf(f->evidence, sizeof f->evidence,
             "transfer time (the last rank's start to the end) against %s's bus bandwidth at each "
             "collective's size (interpolated in log size); %zu of %zu collectives judged; the "
             "cost is the time over the reference's",
             ref->path, judged, s->ninst);
    if (strcmp(ao_diag_backend(run), "cpu") == 0)
        snprintf(f->knobs, sizeof f->knobs,
                 "the cpu backend's collectives are MPI's: its transport (OMPI_MCA_btl), the "
                 "host's load; compare `aorta coll --backend cpu` on a quiet host "
                 "(docs/tuning.md, \"Slow transfers\")");
    else
        snprintf(f->knobs, sizeof f->knobs,
                 "compute beside the collective takes its SMs and memory bandwidth: `aorta coll "
                 "--with-compute` at that size; the communicator's channels "
                 "(distributed.nccl.min_ctas, NCCL_MIN_NCHANNELS) and NCCL_ALGO/NCCL_PROTO as "
                 "`aorta coll` ran; the links (nvidia-smi topo -m) (docs/tuning.md, \"Slow "
                 "transfers\")");
    snprintf(f->gain, sizeof f->gain,
             "at most %.3g ms a step, were every transfer as fast as `aorta coll`'s", f->ms);
}

void ao_diag_late(ao_diagnosis *d, const ao_run_data *run, const ao_coll_ref *ref)
{
    if (!run->coll || !run->coll_sum) return;
    late_rank_findings(d, run);
    skew_finding(d, run);
    if (ref) slow_transfer_finding(d, run, ref);
    if (run->coll->misaligned)
        ao_diag_note_add(&d->flags, &d->nflags, "clocks_disagree",
                         "%zu of %zu collectives have a rank that ended before the last one "
                         "started: the ranks' clocks disagree (traces of several hosts?), so "
                         "skews and late ranks are off by the offset (docs/DESIGN.md §14)",
                         run->coll->misaligned, run->coll->ninst);
    if (run->coll->inconsistent)
        ao_diag_note_add(&d->flags, &d->nflags, "collectives_mismatched",
                         "%zu collectives matched across ranks differ in kind or size: the "
                         "traces are of different steps or the matching is off",
                         run->coll->inconsistent);
}
