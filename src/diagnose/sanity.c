/* Flags on the measurement itself (the report shows the flag instead of an
 * impossible number), what the records do not allow to say, and the steps
 * far from the median. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "diagnose/internal.h"
#include "runs/decompose.h"

static double col_at(const ao_rank_data *rd, size_t i, const char *name)
{
    int m = ao_metric_find(name);
    return m < 0 ? NAN : rd->rows[i * ao_metric_count() + (size_t)m];
}

/* Steps whose §7 terms do not add up: compute + exposed comm + idle must
 * cover the step, less the copies nothing else ran beside, and not exceed
 * it; host wait is part of idle. */
static void check_terms(const ao_rank_data *rd, ao_diagnosis *d)
{
    size_t bad = 0;
    long long first = -1;
    for (size_t i = 0; i < rd->n; i++) {
        double step = col_at(rd, i, "step_ms"), c = col_at(rd, i, "compute_ms"),
               e = col_at(rd, i, "exposed_comm_ms"), idle = col_at(rd, i, "idle_ms"),
               x = col_at(rd, i, "copy_ms"), hw = col_at(rd, i, "host_wait_ms"),
               r = col_at(rd, i, "overlap_ratio");
        if (!isfinite(step) || !isfinite(c) || !isfinite(e) || !isfinite(idle)) continue;
        double tol = 1e-3 + 1e-3 * step, sum = c + e + idle;
        int out = sum > step + tol || sum < step - (isfinite(x) ? x : 0) - tol || step < 0 ||
                  (isfinite(hw) && hw > idle + tol) || (isfinite(r) && (r < -1e-9 || r > 1 + 1e-9));
        if (out && !bad++) first = rd->steps[i];
    }
    if (bad)
        ao_diag_note_add(
            &d->flags, &d->nflags, "decomposition_range",
            "%zu step(s) of rank %d (first: step %lld) have terms that do not add up "
            "to the step (compute + exposed comm + idle vs step_ms, host_wait <= idle, "
            "overlap_ratio in [0, 1]): their records are suspect",
            bad, rd->rank, first);
}

/* The baselines against the steps: the decomposition is shown only when it
 * is in range and its isolated times are of the size of the steps' own
 * (both in the source the decomposition uses: kernel time with the trace). */
static void check_baselines(const ao_run_data *run, int c, ao_diagnosis *d)
{
    const ao_rank_data *rd = &run->ranks[c];
    if (!rd->ncompute_only || !rd->ncomm_only) {
        ao_diag_note_add(&d->limits, &d->nlimits, "no_baselines",
                         "no compute-only and comm-only baselines (training.baseline_steps 0, or "
                         "a run from another source): no decomposition into ideal and serial "
                         "time");
        return;
    }
    ao_decomp x;
    ao_decomp_of(run, 1, c, &x);
    const ao_decomposition *dec = &x.d;
    const char *src = x.kernels ? "kernel time" : "events";
    if (isfinite(dec->achieved) && (dec->achieved < -0.05 || dec->achieved > 1.05))
        ao_diag_note_add(&d->flags, &d->nflags, "decomposition_out_of_range",
                         "achieved overlap %.3g is outside [0, 1] on rank %d (%s: serial %.3g ms, "
                         "ideal %.3g ms, step %.3g ms): the decomposition is not meaningful for "
                         "this run",
                         dec->achieved, rd->rank, src, dec->serial_ms, dec->ideal_ms, x.step_ms);
    double ci = dec->compute_isolated_ms, mi = dec->comm_isolated_ms;
    double rc = x.compute_ms / ci, rm = x.comm_ms / mi;
    if ((isfinite(rm) && (rm < 0.5 || rm > 2)) || (isfinite(rc) && (rc < 0.5 || rc > 2)))
        ao_diag_note_add(&d->flags, &d->nflags, "baselines_disagree",
                         "the baselines disagree with the steps on rank %d (%s): comm-only %.3g ms "
                         "against %.3g ms of communication in a step (%.3gx), compute-only %.3g "
                         "ms against %.3g ms (%.3gx); outside 0.5x-2x the isolated times do not "
                         "describe the steps",
                         rd->rank, src, mi, x.comm_ms, rm, ci, x.compute_ms, rc);
}

/* Clocks that move during the run, or a throttle reason (telemetry). */
static void check_telemetry(const ao_rank_data *rd, ao_diagnosis *d)
{
    for (size_t i = 0; i < rd->ntelemetry; i++) {
        const ao_telemetry_series *s = &rd->telemetry[i];
        if (!s->n) continue;
        double lo = ao_stats_min(s->values, s->n), hi = ao_stats_max(s->values, s->n);
        if (strcmp(s->key, "throttle_mask") == 0 && hi > 0)
            ao_diag_note_add(&d->flags, &d->nflags, "throttling",
                             "rank %d reported a clock throttle reason in some steps "
                             "(throttle_mask up to %.0f): times are not steady-state",
                             rd->rank, hi);
        if (strcmp(s->key, "sm_clock_mhz.mean") == 0 && lo > 0 && hi / lo > 1.1)
            ao_diag_note_add(&d->flags, &d->nflags, "clocks_vary",
                             "rank %d's SM clock moved between %.0f and %.0f MHz across steps",
                             rd->rank, lo, hi);
    }
}

void ao_diag_sanity(const ao_run_data *run, const ao_diag_terms *t, int c, ao_diagnosis *d)
{
    const ao_rank_data *rd = &run->ranks[c];
    if (rd->n < AO_DIAG_MIN_STEPS)
        ao_diag_note_add(&d->flags, &d->nflags, "too_few_steps",
                         "rank %d has %zu kept steps (< %d): medians are rough", rd->rank, rd->n,
                         AO_DIAG_MIN_STEPS);
    int m = ao_metric_find("step_ms");
    if (rd->n >= 3 && m >= 0) {
        double *col = ao_malloc(rd->n * sizeof *col);
        ao_rank_column(rd, (size_t)m, col);
        double p90 = ao_stats_percentile(col, rd->n, 90), med = ao_stats_median(col, rd->n);
        if (med > 0 && p90 / med > AO_DIAG_SPREAD)
            ao_diag_note_add(&d->flags, &d->nflags, "high_variance",
                             "rank %d's p90 step %.3g ms is %.2fx its median %.3g ms (> %.2fx): "
                             "look at the outlier steps",
                             rd->rank, p90, p90 / med, med, AO_DIAG_SPREAD);
        free(col);
    }
    for (int i = 0; i < run->nranks; i++) {
        check_terms(&run->ranks[i], d);
        check_telemetry(&run->ranks[i], d);
    }
    check_baselines(run, c, d);
    if (run->world_size > run->nranks)
        ao_diag_note_add(&d->limits, &d->nlimits, "missing_ranks",
                         "%d of %d ranks have a metrics file: the critical rank and straggler "
                         "are among those present only",
                         run->nranks, run->world_size);
    if (isnan(t[c].data_wait))
        ao_diag_note_add(&d->limits, &d->nlimits, "no_data_wait",
                         "the records have no data_wait_ms (an older aorta or another source): "
                         "a loader wait reads as host-launch time");
    if (isnan(t[c].host_wait))
        ao_diag_note_add(&d->limits, &d->nlimits, "no_host_wait",
                         "the records have no host_wait_ms (no issue times): idle time is not "
                         "split into waiting for the host and waiting between streams");
    if (rd->nprofiled == 0)
        ao_diag_note_add(&d->limits, &d->nlimits, "no_ops",
                         "no step has per-op intervals: which unit and forward or backward "
                         "cannot be named (profiling.enabled with active windows)");
    ao_diag_note_add(&d->limits, &d->nlimits, "memory_bound",
                     "memory-bound kernels (far from the GEMM rate, near DRAM bandwidth) need "
                     "kernel counters: bench/ncu_table.py on the largest kernels");
    yajl_val cmd = ao_run_config_value(run, "command");
    if (YAJL_IS_STRING(cmd) && strcmp(cmd->u.string, "train") != 0)
        ao_diag_note_add(&d->limits, &d->nlimits, "source",
                         "the records come from `aorta %s`, not aorta's own engine: knobs named "
                         "after aorta's config keys map to the traced job's equivalents",
                         cmd->u.string);
}

/* ---- steps far from the median ---------------------------------------------------- */

static const char *const outlier_terms[] = {"data_wait_ms", "host_wait_ms", "exposed_comm_ms",
                                            "compute_ms", "idle_ms"};
enum { NTERMS = sizeof outlier_terms / sizeof outlier_terms[0] };

void ao_diag_outliers(const ao_run_data *run, int c, ao_diagnosis *d)
{
    const ao_rank_data *rd = &run->ranks[c];
    int ms = ao_metric_find("step_ms");
    if (rd->n < 3 || ms < 0) return;
    double *col = ao_malloc(rd->n * sizeof *col);
    double med[NTERMS], step_med;
    ao_rank_column(rd, (size_t)ms, col);
    step_med = ao_stats_median(col, rd->n);
    for (int k = 0; k < NTERMS; k++) {
        int m = ao_metric_find(outlier_terms[k]);
        ao_rank_column(rd, (size_t)m, col);
        med[k] = ao_stats_count(col, rd->n) ? ao_stats_median(col, rd->n) : NAN;
    }
    /* per term: how many outlier steps it explains, their steps, excess */
    size_t count[NTERMS] = {0};
    double excess[NTERMS] = {0};
    char steps[NTERMS][96];
    for (int k = 0; k < NTERMS; k++) steps[k][0] = '\0';
    for (size_t i = 0; i < rd->n; i++) {
        double s = col_at(rd, i, "step_ms");
        if (!(s > AO_DIAG_OUTLIER * step_med)) continue;
        int best = -1;
        double bx = 0;
        for (int k = 0; k < NTERMS; k++) {
            double x = col_at(rd, i, outlier_terms[k]) - med[k];
            if (isfinite(x) && x > bx) {
                bx = x;
                best = k;
            }
        }
        if (best < 0) continue;
        size_t at = strlen(steps[best]);
        if (count[best] < 8)
            snprintf(steps[best] + at, sizeof steps[best] - at, "%s%lld", at ? "," : "",
                     rd->steps[i]);
        count[best]++;
        excess[best] += bx;
    }
    for (int k = 0; k < NTERMS; k++)
        if (count[k])
            ao_diag_note_add(&d->outliers, &d->noutliers, outlier_terms[k],
                             "%zu step(s) of rank %d over %.2fx the median step (%s%s): %s %.3g ms "
                             "above its median, on average",
                             count[k], rd->rank, AO_DIAG_OUTLIER, steps[k],
                             count[k] > 8 ? ",..." : "", outlier_terms[k],
                             excess[k] / (double)count[k]);
    free(col);
}
