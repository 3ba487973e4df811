/* Who waited for whom, per step and per rank, from the matched collectives
 * (collectives.h), summary.json's "collectives" block, and the one
 * definition of the slowest rank (rundata.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "core/stats.h"
#include "runs/collectives.h"
#include "runs/rundata.h"

typedef struct wait_iv {
    int late, waiter;
    double a, b;
} wait_iv;

static int by_pair(const void *pa, const void *pb)
{
    const wait_iv *x = pa, *y = pb;
    if (x->late != y->late) return (x->late > y->late) - (x->late < y->late);
    if (x->waiter != y->waiter) return (x->waiter > y->waiter) - (x->waiter < y->waiter);
    return (x->a > y->a) - (x->a < y->a);
}

static int by_waiter(const void *pa, const void *pb)
{
    const wait_iv *x = pa, *y = pb;
    if (x->waiter != y->waiter) return (x->waiter > y->waiter) - (x->waiter < y->waiter);
    return (x->a > y->a) - (x->a < y->a);
}

/* Sum of the union lengths of runs of v that same() groups; v sorted so
 * that each group is contiguous and by start within it. Calls add(key
 * element, length) per group. */
static void unions(const wait_iv *v, size_t n, int pairs, double *per_late, double *per_waiter,
                   int nranks)
{
    for (size_t i = 0; i < n;) {
        size_t j = i;
        double len = 0, s = v[i].a, e = v[i].b;
        while (j < n && v[j].waiter == v[i].waiter && (!pairs || v[j].late == v[i].late)) {
            if (v[j].a > e) {
                len += e - s;
                s = v[j].a;
                e = v[j].b;
            } else if (v[j].b > e) {
                e = v[j].b;
            }
            j++;
        }
        len += e - s;
        if (pairs && v[i].late < nranks)
            per_late[v[i].late] += len;
        else if (!pairs && v[i].waiter < nranks)
            per_waiter[v[i].waiter] += len;
        i = j;
    }
}

void ao_coll_summarize(const ao_coll_set *s, int nranks, ao_coll_summary *out)
{
    memset(out, 0, sizeof *out);
    out->nranks = nranks;
    out->waited_for = -1;
    out->ranks = ao_calloc(nranks > 0 ? (size_t)nranks : 1, sizeof *out->ranks);
    for (int r = 0; r < nranks; r++) out->ranks[r].rank = r;
    size_t nsteps = 0;
    for (size_t i = 0; i < s->ninst; i++)
        if (s->inst[i].step >= 0 && (i == 0 || s->inst[i].step != s->inst[i - 1].step)) nsteps++;
    out->steps = ao_calloc(nsteps ? nsteps : 1, sizeof *out->steps);
    double *cost = ao_calloc((size_t)(nranks > 0 ? nranks : 1) * 2, sizeof *cost);
    double *waited = cost + (nranks > 0 ? nranks : 1);
    double *step_cost =
        ao_calloc((nsteps ? nsteps : 1) * (size_t)(nranks > 0 ? nranks : 1), sizeof *step_cost);
    size_t cap = 0;
    wait_iv *v = NULL;
    for (size_t i = 0; i < s->ninst;) {
        size_t j = i;
        while (j < s->ninst && s->inst[j].step == s->inst[i].step) j++;
        if (s->inst[i].step < 0) {
            i = j;
            continue;
        }
        ao_coll_step *st = &out->steps[out->nsteps];
        st->step = s->inst[i].step;
        st->late_rank = -1;
        st->instances = j - i;
        size_t n = 0;
        for (size_t k = i; k < j; k++) {
            const ao_coll_instance *in = &s->inst[k];
            if (in->skew_us > st->max_skew_us) st->max_skew_us = in->skew_us;
            if (in->late_rank < 0 || !in->consistent) continue;
            if (in->late_rank < nranks) out->ranks[in->late_rank].late++;
            if (n + in->n > cap) {
                cap = (n + in->n) * 2;
                v = ao_realloc(v, cap * sizeof *v);
            }
            for (size_t m = 0; m < in->n; m++) {
                const ao_coll_member *mb = &s->members[in->first + m];
                if (mb->rank == in->late_rank || !(in->last_start_us > mb->start_us)) continue;
                v[n++] = (wait_iv){in->late_rank, mb->rank, mb->start_us, in->last_start_us};
            }
        }
        memset(cost, 0, 2 * (size_t)(nranks > 0 ? nranks : 1) * sizeof *cost);
        qsort(v, n, sizeof *v, by_pair);
        unions(v, n, 1, cost, NULL, nranks);
        qsort(v, n, sizeof *v, by_waiter);
        unions(v, n, 0, NULL, waited, nranks);
        int others = nranks > 1 ? nranks - 1 : 1;
        for (int r = 0; r < nranks; r++) {
            double c = cost[r] / others / 1e3;
            step_cost[out->nsteps * (size_t)nranks + (size_t)r] = c;
            out->ranks[r].cost_ms += c;
            out->ranks[r].waited_ms += waited[r] / 1e3;
            if (c > st->late_cost_ms) {
                st->late_cost_ms = c;
                st->late_rank = r;
            }
        }
        for (size_t k = i; k < j; k++) {
            const ao_coll_instance *in = &s->inst[k];
            if (in->late_rank < 0 || in->late_rank >= nranks || isnan(in->cause_us[0])) continue;
            for (int c = 0; c < AO_NCAUSES; c++) {
                out->ranks[in->late_rank].cause_ms[c] += in->cause_us[c] / 1e3;
                if (in->late_rank == st->late_rank) st->cause_ms[c] += in->cause_us[c] / 1e3;
            }
        }
        out->nsteps++;
        i = j;
    }
    free(v);
    double best = 0, *col = ao_malloc((out->nsteps ? out->nsteps : 1) * sizeof *col);
    for (int r = 0; r < nranks; r++) {
        ao_coll_rank_stats *rs = &out->ranks[r];
        if (rs->cost_ms > best) {
            best = rs->cost_ms;
            out->waited_for = r;
        }
        for (size_t k = 0; k < out->nsteps; k++) col[k] = step_cost[k * (size_t)nranks + (size_t)r];
        rs->cost_step_med_ms = out->nsteps ? ao_stats_median(col, out->nsteps) : 0;
        if (out->nsteps) {
            rs->cost_ms /= (double)out->nsteps;
            rs->waited_ms /= (double)out->nsteps;
            for (int c = 0; c < AO_NCAUSES; c++) rs->cause_ms[c] /= (double)out->nsteps;
        }
    }
    free(col);
    free(cost);
    free(step_cost);
}

void ao_coll_summary_free(ao_coll_summary *s)
{
    free(s->steps);
    free(s->ranks);
    memset(s, 0, sizeof *s);
}

static void causes(ao_json_writer *o, const char *key, const double *ms)
{
    ao_jw_open(o, key);
    for (int c = 0; c < AO_NCAUSES; c++)
        ao_jw_double(o, ao_late_cause_name((ao_late_cause)c), ms[c]);
    ao_jw_close(o);
}

yajl_gen_status ao_coll_summary_gen(yajl_gen g, const ao_coll_set *s, const ao_coll_summary *sum)
{
    ao_json_writer o = {g, yajl_gen_status_ok};
    ao_jw_open(&o, NULL);
    ao_jw_str(&o, "file", AO_COLLECTIVES_FILE);
    ao_jw_int(&o, "instances", (long long)s->ninst);
    ao_jw_int(&o, "inconsistent", (long long)s->inconsistent);
    ao_jw_int(&o, "partial", (long long)s->partial);
    ao_jw_int(&o, "misaligned", (long long)s->misaligned);
    ao_jw_int(&o, "single", (long long)s->single);
    ao_jw_str(&o, "clock", s->clock[0] ? s->clock : NULL);
    ao_jw_key(&o, "waited_for_rank");
    if (sum->waited_for < 0)
        ao_jw_null(&o, NULL);
    else
        ao_jw_int(&o, NULL, sum->waited_for);
    ao_jw_aopen(&o, "ranks");
    for (int r = 0; r < sum->nranks; r++) {
        const ao_coll_rank_stats *rs = &sum->ranks[r];
        ao_jw_open(&o, NULL);
        ao_jw_int(&o, "rank", rs->rank);
        ao_jw_int(&o, "late_instances", (long long)rs->late);
        ao_jw_double(&o, "cost_ms_per_step", rs->cost_ms);
        ao_jw_double(&o, "cost_ms_step_median", rs->cost_step_med_ms);
        ao_jw_double(&o, "waited_ms_per_step", rs->waited_ms);
        causes(&o, "late_window_ms_per_step", rs->cause_ms);
        ao_jw_close(&o);
    }
    ao_jw_aclose(&o);
    ao_jw_aopen(&o, "steps");
    for (size_t i = 0; i < sum->nsteps; i++) {
        const ao_coll_step *st = &sum->steps[i];
        ao_jw_open(&o, NULL);
        ao_jw_int(&o, "step", st->step);
        ao_jw_int(&o, "instances", (long long)st->instances);
        ao_jw_double(&o, "max_skew_us", st->max_skew_us);
        ao_jw_key(&o, "late_rank");
        if (st->late_rank < 0)
            ao_jw_null(&o, NULL);
        else
            ao_jw_int(&o, NULL, st->late_rank);
        ao_jw_double(&o, "late_cost_ms", st->late_cost_ms);
        ao_jw_str(&o, "late_cause",
                  st->late_rank < 0 ? NULL : ao_late_cause_name(ao_late_cause_top(st->cause_ms)));
        causes(&o, "late_window_ms", st->cause_ms);
        ao_jw_close(&o);
    }
    ao_jw_aclose(&o);
    ao_jw_close(&o);
    return o.st;
}

/* ---- the slowest rank --------------------------------------------------------------- */

double ao_rank_metric_median(const ao_rank_data *rd, const char *name)
{
    int m = ao_metric_find(name);
    if (m < 0 || rd->n == 0) return NAN;
    double *col = ao_malloc(rd->n * sizeof *col);
    ao_rank_column(rd, (size_t)m, col);
    double v = ao_stats_count(col, rd->n) ? ao_stats_median(col, rd->n) : NAN;
    free(col);
    return v;
}

double ao_rank_own_ms(const ao_rank_data *rd)
{
    double c = ao_rank_metric_median(rd, "compute_ms"),
           h = ao_rank_metric_median(rd, "host_wait_ms");
    return c + (isfinite(h) && h > 0 ? h : 0);
}

int ao_run_slowest_rank(const ao_run_data *run, const char **by)
{
    if (run->coll_sum && run->coll_sum->waited_for >= 0) {
        for (int i = 0; i < run->nranks; i++)
            if (run->ranks[i].rank == run->coll_sum->waited_for) {
                if (by) *by = "waited_for";
                return i;
            }
    }
    int c = 0;
    double best = NAN;
    for (int i = 0; i < run->nranks; i++) {
        double own = ao_rank_own_ms(&run->ranks[i]);
        if (isnan(best) || own > best) {
            best = own;
            c = i;
        }
    }
    if (by) *by = "own_time";
    return c;
}
