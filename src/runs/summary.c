#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "core/rundir.h"
#include "runs/compare.h"
#include "runs/summary.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* run.json config keys that change how communication and compute overlap. */
static const char *const knob_keys[] = {
    "command",
    "world_size",
    "distributed.mode",
    "fsdp.sharding_strategy",
    "fsdp.forward_prefetch",
    "fsdp.backward_prefetch",
    "fsdp.limit_all_gathers",
    "fsdp.reduce_every_microbatch",
    "fsdp.param_dtype",
    "fsdp.reduce_dtype",
    "training.mixed_precision",
    "training.batch_size",
    "training.gradient_accumulation",
    "distributed.bucket_cap_mb",
    "distributed.comm_per_stream",
    "distributed.nccl.min_ctas",
    "distributed.nccl.max_ctas",
    "compute.sm_count_target",
    "streams.compute.priority",
    "streams.allgather.priority",
    "streams.reducescatter.priority",
    "streams.allreduce.priority",
    "streams.h2d.priority",
};
/* Environment variables of the communication library. */
static const char *const knob_env_prefixes[] = {"NCCL_", "RCCL_"};

static void add_knob(ao_summary *s, const char *key, const char *value)
{
    s->knobs = ao_realloc(s->knobs, (s->nknobs + 1) * sizeof *s->knobs);
    s->knobs[s->nknobs].key = ao_strdup(key);
    s->knobs[s->nknobs].value = ao_strdup(value);
    s->nknobs++;
}

static void collect_knobs(ao_summary *s, const ao_run_data *r)
{
    char text[512];
    for (size_t i = 0; i < NELEM(knob_keys); i++) {
        yajl_val v = ao_run_config_value(r, knob_keys[i]);
        if (!v) continue;
        ao_json_value_text(v, text, sizeof text);
        add_knob(s, knob_keys[i], text);
    }
    yajl_val env = r->run ? ao_json_member(r->run, "env") : NULL;
    if (!YAJL_IS_OBJECT(env)) return;
    for (size_t i = 0; i < env->u.object.len; i++) {
        const char *k = env->u.object.keys[i];
        for (size_t p = 0; p < NELEM(knob_env_prefixes); p++) {
            if (strncmp(k, knob_env_prefixes[p], strlen(knob_env_prefixes[p])) != 0) continue;
            char key[300];
            snprintf(key, sizeof key, "env.%s", k);
            ao_json_value_text(env->u.object.values[i], text, sizeof text);
            add_knob(s, key, text);
        }
    }
}

static void summarize_telemetry(ao_summary *s, const ao_run_data *runs, size_t nruns)
{
    for (size_t r = 0; r < nruns; r++) {
        for (int k = 0; k < runs[r].nranks; k++) {
            const ao_rank_data *rd = &runs[r].ranks[k];
            for (size_t t = 0; t < rd->ntelemetry; t++) {
                size_t j = 0;
                while (j < s->ntelemetry && strcmp(s->telemetry[j].key, rd->telemetry[t].key)) j++;
                if (j == s->ntelemetry) {
                    s->telemetry =
                        ao_realloc(s->telemetry, (s->ntelemetry + 1) * sizeof *s->telemetry);
                    s->telemetry[j].key = ao_strdup(rd->telemetry[t].key);
                    s->ntelemetry++;
                }
            }
        }
    }
    for (size_t j = 0; j < s->ntelemetry; j++) {
        double *all = NULL;
        size_t n = 0;
        for (size_t r = 0; r < nruns; r++) {
            for (int k = 0; k < runs[r].nranks; k++) {
                const ao_rank_data *rd = &runs[r].ranks[k];
                for (size_t t = 0; t < rd->ntelemetry; t++) {
                    if (strcmp(rd->telemetry[t].key, s->telemetry[j].key)) continue;
                    all = ao_realloc(all, (n + rd->telemetry[t].n + 1) * sizeof *all);
                    memcpy(all + n, rd->telemetry[t].values, rd->telemetry[t].n * sizeof *all);
                    n += rd->telemetry[t].n;
                }
            }
        }
        ao_stats_summarize(all, n, &s->telemetry[j].s);
        free(all);
    }
}

const char *const ao_breakdown_names[AO_BREAKDOWN_PARTS] = {"overlapped (compute and comm)",
                                                            "exposed comm", "compute alone", "idle",
                                                            "copies alone, other"};

static void breakdown(ao_summary *s, const ao_run_data *runs, size_t nruns)
{
    const int col[5] = {ao_metric_find("overlap_ms"), ao_metric_find("exposed_comm_ms"),
                        ao_metric_find("compute_ms"), ao_metric_find("idle_ms"),
                        ao_metric_find("step_ms")};
    size_t nm = ao_metric_count();
    double sum[AO_BREAKDOWN_PARTS] = {0}, total = 0;
    for (size_t r = 0; r < nruns; r++) {
        for (int k = 0; k < runs[r].nranks; k++) {
            const ao_rank_data *rd = &runs[r].ranks[k];
            for (size_t i = 0; i < rd->n; i++) {
                const double *row = rd->rows + i * nm;
                double v[5];
                int ok = 1;
                for (int j = 0; j < 5; j++) ok &= isfinite(v[j] = row[col[j]]);
                if (!ok || !(v[4] > 0)) continue;
                double p[AO_BREAKDOWN_PARTS] = {v[0], v[1], v[2] - v[0], v[3], 0};
                double rest = v[4];
                for (int j = 0; j < AO_BREAKDOWN_PARTS - 1; j++) {
                    if (!(p[j] > 0)) p[j] = 0;
                    rest -= p[j];
                }
                p[AO_BREAKDOWN_PARTS - 1] = rest > 0 ? rest : 0;
                for (int j = 0; j < AO_BREAKDOWN_PARTS; j++) {
                    sum[j] += p[j];
                    total += p[j];
                }
            }
        }
    }
    double step = s->metrics[col[4]].all.p50;
    for (int j = 0; j < AO_BREAKDOWN_PARTS; j++)
        s->breakdown_ms[j] = total > 0 && isfinite(step) ? step * sum[j] / total : 0;
}

static int disagree(const ao_metric_def *d, const double *med, int n, double step_ms)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < n; k++)
        if (isfinite(med[k])) {
            lo = fmin(lo, med[k]);
            hi = fmax(hi, med[k]);
        }
    if (!(hi > lo)) return 0;
    double spread = hi - lo;
    if (strcmp(d->unit, "ratio") == 0) return spread > 0.1;
    if (spread <= AO_RANKS_DISAGREE * fmax(fabs(hi), fabs(lo))) return 0;
    return strcmp(d->unit, "ms") != 0 || !(step_ms > 0) || spread > 0.02 * step_ms;
}

/* A metric the ranks disagree on: the slowest rank's statistics (rank
 * index c of every run), not a pool that describes none of them. */
static void per_rank_where_disagreeing(ao_summary *out, const ao_run_data *runs, size_t nruns,
                                       int c)
{
    int sm = ao_metric_find("step_ms");
    double step = out->metrics[sm].all.p50;
    size_t n = 0;
    for (size_t r = 0; r < nruns; r++)
        if (c < runs[r].nranks) n += runs[r].ranks[c].n;
    double *v = ao_malloc((n ? n : 1) * sizeof *v);
    for (size_t m = 0; m < ao_metric_count(); m++) {
        ao_metric_summary *ms = &out->metrics[m];
        ms->rank = -1;
        if ((int)m == sm || !disagree(ao_metric(m), ms->rank_median, out->nranks, step)) continue;
        size_t k = 0;
        for (size_t r = 0; r < nruns; r++) {
            if (c >= runs[r].nranks) continue;
            ao_rank_column(&runs[r].ranks[c], m, v + k);
            k += runs[r].ranks[c].n;
        }
        ao_stats_summarize(v, k, &ms->all);
        ms->rank = runs[0].ranks[c].rank;
    }
    free(v);
}

const char *ao_decomposition_flag(const ao_decomposition *d)
{
    /* A tolerance for run-to-run noise between the baselines and the train
     * steps; beyond it the baselines did not measure the same work. */
    if (!isnan(d->achieved) && (d->achieved < -AO_DECOMP_TOL || d->achieved > 1 + AO_DECOMP_TOL))
        return "out of range: the step is outside [ideal, serial] of the baselines, so the "
               "baselines do not measure the same work as the train steps (more baseline steps, "
               "or a quieter machine)";
    if (!isnan(d->comm_slowdown) && d->comm_slowdown < 1 - AO_DECOMP_SLOWDOWN_TOL)
        return "out of range: communication would be faster under contention than alone, so "
               "the comm-only baseline is not comparable (more baseline steps, or a quieter "
               "machine)";
    return NULL;
}

int ao_summary_build(const char *label, const ao_run_data *runs, size_t nruns, ao_summary *out)
{
    memset(out, 0, sizeof *out);
    out->label = ao_strdup(label);
    out->nruns = nruns;
    out->run_ids = ao_calloc(nruns ? nruns : 1, sizeof *out->run_ids);
    out->skew.ratio = NAN;
    out->skew.slowest_rank = out->skew.fastest_rank = -1;
    size_t total = 0, max_rank_n = 0;
    for (size_t r = 0; r < nruns; r++) {
        out->run_ids[r] = ao_strdup(runs[r].run_id);
        if (runs[r].nranks > out->nranks) out->nranks = runs[r].nranks;
        if (runs[r].world_size > out->world_size) out->world_size = runs[r].world_size;
        for (int k = 0; k < runs[r].nranks; k++) {
            const ao_rank_data *rd = &runs[r].ranks[k];
            total += rd->n;
            out->skipped += rd->skipped;
            out->truncated += rd->truncated;
            if (rd->n > out->steps) out->steps = rd->n;
            if (r == 0 && rd->n + rd->skipped > out->steps_run)
                out->steps_run = rd->n + rd->skipped;
            if (rd->n > max_rank_n) max_rank_n = rd->n;
        }
    }
    out->records = total;
    out->planned_steps = -1;
    out->completed = -1;
    if (nruns > 0) {
        yajl_val planned = ao_json_member(runs[0].run, "planned_steps");
        yajl_val done = ao_json_member(runs[0].run, "completed");
        yajl_val end = ao_json_member(runs[0].run, "end");
        if (YAJL_IS_INTEGER(planned)) out->planned_steps = YAJL_GET_INTEGER(planned);
        if (YAJL_IS_TRUE(done) || YAJL_IS_FALSE(done)) out->completed = YAJL_IS_TRUE(done);
        if (YAJL_IS_STRING(end)) out->end = ao_strdup(YAJL_GET_STRING(end));
        out->skip_steps = runs[0].skip_steps;
        out->skip_origin = runs[0].skip_origin;
        collect_knobs(out, &runs[0]);
        out->analyze = ao_json_member(runs[0].summary, "analyze");
        for (int k = 0; k < runs[0].nranks && !out->kernel_ranks; k++)
            if (runs[0].ranks[k].kernels.steps) out->kernel_ranks = runs[0].ranks;
        if (out->kernel_ranks) out->nkernel_ranks = runs[0].nranks;
        for (int k = 0; k < runs[0].nranks && !out->contention_ranks; k++)
            if (runs[0].ranks[k].contention.steps) out->contention_ranks = runs[0].ranks;
        if (out->contention_ranks) out->ncontention_ranks = runs[0].nranks;
    }
    if (total == 0) return ao_run_no_steps_error(label, out->skip_steps);

    size_t nm = ao_metric_count();
    out->metrics = ao_calloc(nm, sizeof *out->metrics);
    double *all = ao_malloc(total * sizeof *all);
    /* per-rank values pooled over runs: rank index k across all runs */
    double *rank_vals = ao_malloc((max_rank_n * nruns + 1) * sizeof *rank_vals);
    for (size_t m = 0; m < nm; m++) {
        ao_metric_summary *ms = &out->metrics[m];
        size_t n = 0;
        for (size_t r = 0; r < nruns; r++) {
            for (int k = 0; k < runs[r].nranks; k++) {
                ao_rank_column(&runs[r].ranks[k], m, all + n);
                n += runs[r].ranks[k].n;
            }
        }
        if ((int)m == ao_metric_find("step_ms") || (int)m == ao_metric_find("kernel_step_ms")) {
            /* One step time everywhere: the per-step max over ranks, as the
             * comparison samples it (compare.h). */
            double *st = ao_step_samples(runs, nruns, m, &n);
            ao_stats_summarize(st, n, &ms->all);
            free(st);
        } else {
            ao_stats_summarize(all, n, &ms->all);
        }
        ms->rank = -1;
        ms->rank_median = ao_malloc((size_t)out->nranks * sizeof *ms->rank_median);
        for (int k = 0; k < out->nranks; k++) {
            size_t nk = 0;
            for (size_t r = 0; r < nruns; r++) {
                if (k >= runs[r].nranks) continue;
                ao_rank_column(&runs[r].ranks[k], m, rank_vals + nk);
                nk += runs[r].ranks[k].n;
            }
            ms->rank_median[k] = ao_stats_median(rank_vals, nk);
        }
    }
    free(rank_vals);
    free(all);

    const ao_metric_summary *step = &out->metrics[ao_metric_find("step_ms")];
    ao_stats_rank_skew(step->rank_median, (size_t)out->nranks, &out->skew);
    if (nruns > 0 && runs[0].nranks > 0) {
        int c = ao_run_slowest_rank(&runs[0], &out->slowest_by);
        out->skew.slowest_rank = runs[0].ranks[c].rank;
        out->coll = runs[0].coll;
        out->coll_sum = runs[0].coll_sum;
        if (out->nranks > 1) per_rank_where_disagreeing(out, runs, nruns, c);
    }

    ao_decomp_of(runs, nruns, -1, &out->dec);
    breakdown(out, runs, nruns);
    summarize_telemetry(out, runs, nruns);
    return 0;
}

void ao_summary_free(ao_summary *s)
{
    if (s->metrics)
        for (size_t m = 0; m < ao_metric_count(); m++) free(s->metrics[m].rank_median);
    free(s->metrics);
    for (size_t r = 0; r < s->nruns && s->run_ids; r++) free(s->run_ids[r]);
    free(s->run_ids);
    free(s->end);
    for (size_t i = 0; i < s->nknobs; i++) {
        free(s->knobs[i].key);
        free(s->knobs[i].value);
    }
    free(s->knobs);
    for (size_t i = 0; i < s->ntelemetry; i++) free(s->telemetry[i].key);
    free(s->telemetry);
    free(s->label);
    memset(s, 0, sizeof *s);
}

/* ---- summary.json ------------------------------------------------------------- */

static const char *better_name(ao_better b)
{
    return b == AO_BETTER_LOWER ? "lower" : b == AO_BETTER_HIGHER ? "higher" : "neither";
}

static void gen_stats(ao_json_writer *o, const ao_stats_summary *s)
{
    ao_jw_int(o, "n", (long long)s->n);
    ao_jw_double(o, "median", s->p50);
    ao_jw_double(o, "mean", s->mean);
    ao_jw_double(o, "p90", s->p90);
    ao_jw_double(o, "p99", s->p99);
    ao_jw_double(o, "min", s->min);
    ao_jw_double(o, "max", s->max);
}

yajl_gen_status ao_summary_gen(yajl_gen g, const ao_summary *s)
{
    ao_json_writer o = {g, yajl_gen_status_ok};
    ao_jw_open(&o, NULL);
    ao_jw_str(&o, "label", s->label);
    ao_jw_aopen(&o, "runs");
    for (size_t r = 0; r < s->nruns; r++) ao_jw_str(&o, NULL, s->run_ids[r]);
    ao_jw_aclose(&o);
    ao_jw_int(&o, "ranks", s->nranks);
    ao_jw_int(&o, "world_size", s->world_size);
    ao_jw_int(&o, "skip_steps", s->skip_steps);
    ao_jw_str(&o, "skip_steps_origin", s->skip_origin);
    ao_jw_int(&o, "steps", (long long)s->steps);
    ao_jw_int(&o, "records", (long long)s->records);
    ao_jw_int(&o, "warmup_records_skipped", (long long)s->skipped);
    ao_jw_int(&o, "truncated_lines", (long long)s->truncated);
    ao_jw_int(&o, "steps_run", (long long)s->steps_run);
    if (s->planned_steps >= 0) ao_jw_int(&o, "planned_steps", s->planned_steps);
    if (s->completed >= 0) {
        ao_json_value done = ao_json_bool(s->completed);
        ao_jw_value(&o, "completed", &done);
    }
    if (s->end) ao_jw_str(&o, "end", s->end);
    ao_jw_open(&o, "knobs");
    for (size_t i = 0; i < s->nknobs; i++) ao_jw_str(&o, s->knobs[i].key, s->knobs[i].value);
    ao_jw_close(&o);
    ao_jw_open(&o, "metrics");
    for (size_t m = 0; m < ao_metric_count(); m++) {
        const ao_metric_def *d = ao_metric(m);
        const ao_metric_summary *ms = &s->metrics[m];
        ao_jw_open(&o, d->name);
        ao_jw_str(&o, "unit", d->unit);
        ao_jw_str(&o, "better", better_name(d->better));
        gen_stats(&o, &ms->all);
        ao_jw_key(&o, "of_rank");
        if (ms->rank < 0)
            ao_jw_null(&o, NULL);
        else
            ao_jw_int(&o, NULL, ms->rank);
        ao_jw_aopen(&o, "rank_medians");
        for (int k = 0; k < s->nranks; k++) ao_jw_double(&o, NULL, ms->rank_median[k]);
        ao_jw_aclose(&o);
        ao_jw_close(&o);
    }
    ao_jw_close(&o);
    ao_jw_open(&o, "rank_skew");
    ao_jw_double(&o, "ratio", s->skew.ratio);
    ao_jw_int(&o, "slowest_rank", s->skew.slowest_rank);
    ao_jw_str(&o, "slowest_rank_by", s->slowest_by);
    ao_jw_int(&o, "fastest_rank", s->skew.fastest_rank);
    ao_jw_close(&o);
    ao_jw_key(&o, "collectives");
    if (!s->coll || !s->coll_sum)
        ao_jw_null(&o, NULL);
    else if (o.st == yajl_gen_status_ok)
        o.st = ao_coll_summary_gen(g, s->coll, s->coll_sum);
    ao_jw_key(&o, "decomposition");
    if (!s->dec.have) {
        ao_jw_null(&o, NULL);
    } else {
        const ao_decomp *x = &s->dec;
        const ao_decomposition *d = &x->d;
        ao_jw_open(&o, NULL);
        ao_jw_str(&o, "source", x->kernels ? "kernels" : "events");
        ao_jw_int(&o, "compute_only_records", (long long)x->ncompute_only);
        ao_jw_int(&o, "comm_only_records", (long long)x->ncomm_only);
        ao_jw_double(&o, "compute_isolated_ms", d->compute_isolated_ms);
        ao_jw_double(&o, "comm_isolated_ms", d->comm_isolated_ms);
        ao_jw_double(&o, "compute_only_step_ms", x->compute_only_step_ms);
        ao_jw_double(&o, "comm_only_step_ms", x->comm_only_step_ms);
        ao_jw_double(&o, "step_ms", x->step_ms);
        ao_jw_double(&o, "compute_ms", x->compute_ms);
        ao_jw_double(&o, "comm_ms", x->comm_ms);
        ao_jw_double(&o, "ideal_ms", d->ideal_ms);
        ao_jw_double(&o, "serial_ms", d->serial_ms);
        ao_jw_double(&o, "gap_ms", x->gap_ms);
        ao_jw_double(&o, "achieved", d->achieved);
        ao_jw_double(&o, "contention_ms", d->contention_ms);
        ao_jw_double(&o, "comm_slowdown", d->comm_slowdown);
        if (x->flag)
            ao_jw_str(&o, "flag", x->flag);
        else
            ao_jw_null(&o, "flag");
        ao_jw_open(&o, "events_vs_kernels");
        for (int i = 0; i < AO_DECOMP_NCHECKS; i++) {
            ao_jw_open(&o, ao_decomp_check_names[i]);
            ao_jw_double(&o, "events", x->events_ms[i]);
            ao_jw_double(&o, "kernels", x->kernels_ms[i]);
            ao_jw_close(&o);
        }
        ao_jw_close(&o);
        ao_jw_close(&o);
    }
    ao_jw_open(&o, "breakdown_ms");
    for (int j = 0; j < AO_BREAKDOWN_PARTS; j++)
        ao_jw_double(&o, ao_breakdown_names[j], s->breakdown_ms[j]);
    ao_jw_close(&o);
    ao_jw_key(&o, "telemetry");
    if (s->ntelemetry == 0) {
        ao_jw_null(&o, NULL);
    } else {
        ao_jw_open(&o, NULL);
        for (size_t i = 0; i < s->ntelemetry; i++) {
            ao_jw_open(&o, s->telemetry[i].key);
            gen_stats(&o, &s->telemetry[i].s);
            ao_jw_close(&o);
        }
        ao_jw_close(&o);
    }
    /* aorta train's kernel trace: each rank's top kernels */
    ao_jw_key(&o, "top_kernels");
    if (!s->kernel_ranks) {
        ao_jw_null(&o, NULL);
    } else {
        ao_jw_aopen(&o, NULL);
        for (int k = 0; k < s->nkernel_ranks; k++)
            ao_kernel_table_gen(&o, NULL, s->kernel_ranks[k].rank, &s->kernel_ranks[k].kernels);
        ao_jw_aclose(&o);
    }
    /* the price of overlap per rank (runs/contention.h) */
    ao_jw_key(&o, "contention");
    if (!s->contention_ranks) {
        ao_jw_null(&o, NULL);
    } else {
        int m = ao_metric_find("contention_ms");
        ao_jw_aopen(&o, NULL);
        for (int k = 0; k < s->ncontention_ranks; k++) {
            const ao_rank_data *rd = &s->contention_ranks[k];
            ao_jw_open(&o, NULL);
            ao_jw_int(&o, "rank", rd->rank);
            ao_jw_double(&o, "ms_median", k < s->nranks ? s->metrics[m].rank_median[k] : NAN);
            ao_contention_evidence_gen(&o, "evidence", &rd->contention, AO_CONTENTION_EVIDENCE_TOP);
            ao_jw_close(&o);
        }
        ao_jw_aclose(&o);
    }
    ao_jw_close(&o);
    return o.st;
}

int ao_summary_write(const char *path, const ao_summary *s)
{
    yajl_gen g = ao_json_gen_new(1);
    ao_json_writer o = {g, yajl_gen_status_ok};
    ao_jw_open(&o, NULL);
    ao_jw_int(&o, "schema", 1);
    ao_jw_key(&o, "summary");
    if (o.st == yajl_gen_status_ok) o.st = ao_summary_gen(g, s);
    ao_jw_close(&o);
    int rc = 0;
    if (o.st != yajl_gen_status_ok) {
        ao_error(path, "JSON generation failed (yajl status %d)", (int)o.st);
        rc = AO_EXIT_FAIL;
    } else if (ao_json_write_atomic(path, g) != 0) {
        rc = AO_EXIT_FAIL;
    }
    yajl_gen_free(g);
    return rc;
}

/* ---- the table ------------------------------------------------------------------ */

/* Every cell with 3 decimals, large ones too, so a column reads alike. */
static void fmt(char *buf, size_t n, double v)
{
    if (isnan(v))
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.3f", v);
}

void ao_summary_print(FILE *out, const ao_summary *s)
{
    fprintf(out, "summary of %s: %zu run(s), %d rank(s), %zu step(s) per rank", s->label, s->nruns,
            s->nranks, s->steps);
    fprintf(out, " (first %lld skipped as warm-up)\n", s->skip_steps);
    fprintf(out, "  %-26s %12s %12s %12s %12s  %s\n", "metric", "median", "mean", "p90", "p99",
            "unit");
    int any_rank = 0;
    for (size_t m = 0; m < ao_metric_count(); m++) {
        const ao_metric_def *d = ao_metric(m);
        const ao_stats_summary *st = &s->metrics[m].all;
        if (!d->headline || st->n == 0) continue;
        char a[32], b[32], c[32], e[32];
        fmt(a, sizeof a, st->p50);
        fmt(b, sizeof b, st->mean);
        fmt(c, sizeof c, st->p90);
        fmt(e, sizeof e, st->p99);
        char name[48];
        if (s->metrics[m].rank >= 0)
            snprintf(name, sizeof name, "%s (rank %d)", d->name, s->metrics[m].rank);
        else
            snprintf(name, sizeof name, "%s", d->name);
        fprintf(out, "  %-26s %12s %12s %12s %12s  %s\n", name, a, b, c, e, d->unit);
        any_rank |= s->metrics[m].rank >= 0;
    }
    if (any_rank)
        fprintf(out, "  (rank N): the ranks disagree on it, so the slowest rank's alone\n");
    if (!isnan(s->skew.ratio))
        fprintf(out,
                "  rank skew %.3f (largest median step over the smallest); slowest rank %d "
                "(%s), fastest rank %d\n",
                s->skew.ratio, s->skew.slowest_rank,
                s->slowest_by && strcmp(s->slowest_by, "waited_for") == 0
                    ? "the others waited for it in collectives"
                    : "the most time of its own",
                s->skew.fastest_rank);
    const ao_decomp *x = &s->dec;
    const ao_decomposition *d = &x->d;
    if (x->have && x->flag) {
        fprintf(out,
                "  decomposition (%s): compute alone %.3f ms, comm alone %.3f ms; achieved and "
                "comm slowdown not shown: %s\n",
                ao_decomp_source(x), d->compute_isolated_ms, d->comm_isolated_ms, x->flag);
    } else if (x->have) {
        char a[32];
        fmt(a, sizeof a, d->achieved);
        fprintf(out,
                "  decomposition (%s): compute alone %.3f ms, comm alone %.3f ms, ideal %.3f ms, "
                "serial %.3f ms, step %.3f ms (%.3f over ideal), achieved %s, contention %.3f ms, "
                "comm slowdown %.3fx\n",
                ao_decomp_source(x), d->compute_isolated_ms, d->comm_isolated_ms, d->ideal_ms,
                d->serial_ms, x->step_ms, x->gap_ms, a, d->contention_ms, d->comm_slowdown);
    }
    if (x->have && isfinite(x->kernels_ms[AO_DECOMP_CHECK_COMPUTE_ONLY])) {
        fprintf(out, "  baselines, events against kernels:");
        static const char *const what[AO_DECOMP_NCHECKS] = {
            "compute-only compute", "comm-only comm", "train compute", "train comm"};
        for (int i = 0; i < AO_DECOMP_NCHECKS; i++) {
            double e = x->events_ms[i], k = x->kernels_ms[i];
            fprintf(out, "%s %s %.3f vs %.3f ms (%+.1f %%)", i ? "," : "", what[i], e, k,
                    k > 0 ? 100 * (e - k) / k : NAN);
        }
        fprintf(out, "\n");
    }
    if (s->contention_ranks) {
        int m = ao_metric_find("contention_ms");
        fprintf(out,
                "  contention (the same kernels beside a collective against alone), ms a step:");
        for (int k = 0; k < s->ncontention_ranks && k < s->nranks; k++) {
            char v[32];
            fmt(v, sizeof v, s->metrics[m].rank_median[k]);
            fprintf(out, "%s rank %d %s", k ? "," : "", s->contention_ranks[k].rank, v);
        }
        fprintf(out, "\n");
    }
    if (s->truncated)
        fprintf(out, "  %zu incomplete last line(s) skipped (a stopped run)\n", s->truncated);
    if (s->completed != 1 && s->planned_steps > 0)
        fprintf(out, "  cut short: %zu of %lld planned steps; the run ended: %s\n", s->steps_run,
                s->planned_steps, s->end ? s->end : "unknown");
}

int ao_summary_for_run(const char *run_dir, long long skip_steps, FILE *table)
{
    ao_run_data run;
    int rc = ao_run_load(run_dir, skip_steps, &run);
    if (rc == 0) rc = ao_coll_from_records(&run);
    if (rc == 0) {
        ao_summary s;
        rc = ao_summary_build(run.run_id, &run, 1, &s);
        if (rc == 0) {
            char *path = ao_asprintf("%s/%s", run_dir, AO_RUN_SUMMARY);
            rc = ao_summary_write(path, &s);
            free(path);
            if (table) ao_summary_print(table, &s);
        }
        ao_summary_free(&s);
    }
    ao_run_free(&run);
    return rc;
}
