#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "runs/compare.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

const char *ao_verdict_name(ao_verdict v)
{
    switch (v) {
    case AO_VERDICT_BETTER:
        return "better";
    case AO_VERDICT_WORSE:
        return "worse";
    case AO_VERDICT_SAME:
        return "no significant difference";
    case AO_VERDICT_DIFFERENT:
        return "different";
    case AO_VERDICT_NA:
        break;
    }
    return "n/a";
}

ao_verdict ao_compare_verdict(ao_better better, double ref_median, double cand_median,
                              const ao_stats_ci *ci)
{
    if (isnan(ref_median) || isnan(cand_median) || isnan(ci->lo) || isnan(ci->hi))
        return AO_VERDICT_NA;
    double diff = cand_median - ref_median;
    double scale = fmax(fabs(ref_median), fabs(cand_median));
    if ((ci->lo <= 0 && ci->hi >= 0) || fabs(diff) < AO_COMPARE_MIN_REL * scale)
        return AO_VERDICT_SAME;
    if (better == AO_BETTER_NEITHER) return AO_VERDICT_DIFFERENT;
    return (diff < 0) == (better == AO_BETTER_LOWER) ? AO_VERDICT_BETTER : AO_VERDICT_WORSE;
}

typedef struct step_value {
    long long step;
    double v;
} step_value;

static int by_step(const void *a, const void *b)
{
    long long x = ((const step_value *)a)->step, y = ((const step_value *)b)->step;
    return (x > y) - (x < y);
}

/* Each run's (step, value) pairs over its ranks, sorted by step and reduced
 * per step: sized by the records read, never by the step numbers (a step
 * 10^12 must not allocate 10^12 slots), and blind to their order. */
double *ao_step_samples(const ao_run_data *runs, size_t nruns, size_t m, size_t *n)
{
    size_t total = 0;
    for (size_t r = 0; r < nruns; r++)
        for (int k = 0; k < runs[r].nranks; k++) total += runs[r].ranks[k].n;
    double *out = ao_malloc((total ? total : 1) * sizeof *out);
    step_value *sv = ao_malloc((total ? total : 1) * sizeof *sv);
    *n = 0;
    size_t nm = ao_metric_count();
    int use_max = (int)m == ao_metric_find("step_ms") || (int)m == ao_metric_find("kernel_step_ms");
    for (size_t r = 0; r < nruns; r++) {
        size_t ns = 0;
        for (int k = 0; k < runs[r].nranks; k++) {
            const ao_rank_data *rd = &runs[r].ranks[k];
            for (size_t i = 0; i < rd->n; i++) {
                double v = rd->rows[i * nm + m];
                if (!isnan(v)) sv[ns++] = (step_value){rd->steps[i], v};
            }
        }
        qsort(sv, ns, sizeof *sv, by_step);
        for (size_t i = 0; i < ns;) {
            size_t j = i;
            double acc = sv[i].v;
            while (++j < ns && sv[j].step == sv[i].step)
                acc = use_max ? fmax(acc, sv[j].v) : acc + sv[j].v;
            out[(*n)++] = use_max ? acc : acc / (double)(j - i);
            i = j;
        }
    }
    free(sv);
    return out;
}

/* ---- settings ---------------------------------------------------------------- */

typedef struct setting {
    char *key, *value;
} setting;

typedef struct settings {
    setting *v;
    size_t n;
} settings;

static void settings_add(settings *s, const char *key, yajl_val v)
{
    char text[512];
    ao_json_value_text(v, text, sizeof text);
    s->v = ao_realloc(s->v, (s->n + 1) * sizeof *s->v);
    s->v[s->n].key = ao_strdup(key);
    s->v[s->n].value = ao_strdup(text);
    s->n++;
}

/* Environment variables that describe the job rather than the setup (ids,
 * ports, the job's own run id) would make every pair of runs "differ": only
 * the device and communication libraries' variables and aorta's own are
 * compared. */
static const char *const env_compared[] = {"NCCL_", "RCCL_", "CUDA_", "HIP_", "HSA_", "AORTA_"};

static void collect_settings(const ao_run_data *r, settings *s)
{
    memset(s, 0, sizeof *s);
    if (!r->run) return;
    static const char *const top[] = {"command", "world_size", "host"};
    for (size_t i = 0; i < NELEM(top); i++) {
        yajl_val v = ao_json_member(r->run, top[i]);
        if (v) settings_add(s, top[i], v);
    }
    yajl_val cfg = ao_json_member(r->run, "config");
    if (YAJL_IS_OBJECT(cfg))
        for (size_t i = 0; i < cfg->u.object.len; i++)
            settings_add(s, cfg->u.object.keys[i],
                         ao_json_member(cfg->u.object.values[i], "value"));
    yajl_val env = ao_json_member(r->run, "env");
    if (!YAJL_IS_OBJECT(env)) return;
    for (size_t i = 0; i < env->u.object.len; i++) {
        const char *k = env->u.object.keys[i];
        if (strcmp(k, "AORTA_RUN_ID") == 0) continue;
        for (size_t p = 0; p < NELEM(env_compared); p++) {
            if (strncmp(k, env_compared[p], strlen(env_compared[p])) != 0) continue;
            char key[300];
            snprintf(key, sizeof key, "env.%s", k);
            settings_add(s, key, env->u.object.values[i]);
            break;
        }
    }
}

static const char *settings_get(const settings *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i].key, key) == 0) return s->v[i].value;
    return NULL;
}

static void settings_free(settings *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].key);
        free(s->v[i].value);
    }
    free(s->v);
}

static void add_diff(ao_comparison *c, const char *key, const char *a, const char *b)
{
    c->diffs = ao_realloc(c->diffs, (c->ndiffs + 1) * sizeof *c->diffs);
    ao_setting_diff *d = &c->diffs[c->ndiffs++];
    d->key = ao_strdup(key);
    d->reference = a ? ao_strdup(a) : NULL;
    d->candidate = b ? ao_strdup(b) : NULL;
}

static void diff_settings(const ao_run_data *ref, const ao_run_data *cand, ao_comparison *c)
{
    settings a, b;
    collect_settings(ref, &a);
    collect_settings(cand, &b);
    for (size_t i = 0; i < a.n; i++) {
        const char *other = settings_get(&b, a.v[i].key);
        if (!other || strcmp(other, a.v[i].value) != 0)
            add_diff(c, a.v[i].key, a.v[i].value, other);
    }
    for (size_t i = 0; i < b.n; i++)
        if (!settings_get(&a, b.v[i].key)) add_diff(c, b.v[i].key, NULL, b.v[i].value);
    settings_free(&a);
    settings_free(&b);
}

/* ---- comparison ---------------------------------------------------------------- */

void ao_compare(const char *ref_label, const ao_run_data *ref, size_t nref, const char *cand_label,
                const ao_run_data *cand, size_t ncand, ao_comparison *out)
{
    memset(out, 0, sizeof *out);
    out->reference = ao_strdup(ref_label);
    out->candidate = ao_strdup(cand_label);
    size_t nm = ao_metric_count();
    out->metrics = ao_calloc(nm, sizeof *out->metrics);
    for (size_t m = 0; m < nm; m++) {
        const ao_metric_def *d = ao_metric(m);
        if (!d->headline) continue;
        size_t na, nb;
        double *a = ao_step_samples(ref, nref, m, &na);
        double *b = ao_step_samples(cand, ncand, m, &nb);
        if (na > 0 || nb > 0) {
            ao_metric_cmp *mc = &out->metrics[out->nmetrics++];
            mc->metric = m;
            mc->nref = na;
            mc->ncand = nb;
            mc->ref_median = ao_stats_median(a, na);
            mc->cand_median = ao_stats_median(b, nb);
            mc->diff = mc->cand_median - mc->ref_median;
            mc->ratio = mc->ref_median != 0 ? mc->cand_median / mc->ref_median : NAN;
            /* one seed per metric: the intervals do not share resamples */
            ao_stats_bootstrap_median_diff(a, na, b, nb, AO_COMPARE_RESAMPLES, AO_COMPARE_LEVEL,
                                           AO_COMPARE_SEED + m, &mc->ci);
            mc->verdict = ao_compare_verdict(d->better, mc->ref_median, mc->cand_median, &mc->ci);
        }
        free(a);
        free(b);
    }
    if (nref > 0 && ncand > 0) diff_settings(&ref[0], &cand[0], out);
}

/* The median's CI alone: the bootstrap of median(b) - median({0}). */
static void median_ci(const ao_run_data *runs, size_t nruns, size_t m, ao_stats_ci *ci)
{
    size_t n;
    double *x = ao_step_samples(runs, nruns, m, &n);
    const double zero = 0;
    ao_stats_bootstrap_median_diff(&zero, 1, x, n, AO_COMPARE_RESAMPLES, AO_COMPARE_LEVEL,
                                   AO_COMPARE_SEED + m, ci);
    free(x);
}

size_t ao_compare_across(const ao_comparison *cmps, size_t ncmps, size_t m,
                         const ao_run_data *const *runs, const size_t *nruns, ao_config_value *out)
{
    out[0] = (ao_config_value){
        ncmps ? cmps[0].reference : "", 1, NAN, {NAN, NAN, NAN}, 1, AO_VERDICT_NA};
    for (size_t c = 0; c < ncmps; c++) {
        ao_config_value *v = &out[1 + c];
        *v = (ao_config_value){cmps[c].candidate, 0, NAN, {NAN, NAN, NAN}, NAN, AO_VERDICT_NA};
        for (size_t i = 0; i < cmps[c].nmetrics; i++) {
            const ao_metric_cmp *mc = &cmps[c].metrics[i];
            if (mc->metric != m) continue;
            if (isnan(out[0].median)) out[0].median = mc->ref_median;
            v->median = mc->cand_median;
            v->ratio = mc->ratio;
            v->verdict = mc->verdict;
        }
    }
    for (size_t i = 0; i <= ncmps; i++)
        if (!isnan(out[i].median)) median_ci(runs[i], nruns[i], m, &out[i].ci);
    return ncmps + 1;
}

int ao_config_values_write_csv(const char *path, const ao_config_value *v, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) ao_fatal(AO_EXIT_FAIL, path, "out of memory");
    fprintf(f, "config,role,median,ci_low,ci_high,ratio,verdict\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s,%s,%.17g,%.17g,%.17g,%.17g,%s\n", v[i].label,
                v[i].reference ? "reference" : "candidate", v[i].median, v[i].ci.lo, v[i].ci.hi,
                v[i].ratio, v[i].reference ? "reference" : ao_verdict_name(v[i].verdict));
    fclose(f);
    int rc = ao_file_write_atomic(path, text, len) == 0 ? 0 : AO_EXIT_FAIL;
    free(text);
    return rc;
}

void ao_comparison_free(ao_comparison *c)
{
    free(c->reference);
    free(c->candidate);
    free(c->metrics);
    for (size_t i = 0; i < c->ndiffs; i++) {
        free(c->diffs[i].key);
        free(c->diffs[i].reference);
        free(c->diffs[i].candidate);
    }
    free(c->diffs);
    memset(c, 0, sizeof *c);
}

yajl_gen_status ao_comparison_gen(yajl_gen g, const ao_comparison *c)
{
    yajl_gen_status s = yajl_gen_status_ok;
#define T(call)                                                                                    \
    do {                                                                                           \
        if (s == yajl_gen_status_ok) s = (call);                                                   \
    } while (0)
#define KEY(k) T(ao_json_gen_str(g, k))
    T(yajl_gen_map_open(g));
    KEY("reference");
    T(ao_json_gen_str(g, c->reference));
    KEY("candidate");
    T(ao_json_gen_str(g, c->candidate));
    KEY("confidence_level");
    T(ao_json_gen_double(g, AO_COMPARE_LEVEL));
    KEY("bootstrap_resamples");
    T(yajl_gen_integer(g, AO_COMPARE_RESAMPLES));
    KEY("min_relative_difference");
    T(ao_json_gen_double(g, AO_COMPARE_MIN_REL));
    KEY("metrics");
    T(yajl_gen_map_open(g));
    for (size_t i = 0; i < c->nmetrics; i++) {
        const ao_metric_cmp *mc = &c->metrics[i];
        const ao_metric_def *d = ao_metric(mc->metric);
        KEY(d->name);
        T(yajl_gen_map_open(g));
        KEY("unit");
        T(ao_json_gen_str(g, d->unit));
        KEY("reference_steps");
        T(yajl_gen_integer(g, (long long)mc->nref));
        KEY("candidate_steps");
        T(yajl_gen_integer(g, (long long)mc->ncand));
        KEY("reference_median");
        T(ao_json_gen_double(g, mc->ref_median));
        KEY("candidate_median");
        T(ao_json_gen_double(g, mc->cand_median));
        KEY("ratio");
        T(ao_json_gen_double(g, mc->ratio));
        KEY("difference");
        T(ao_json_gen_double(g, mc->diff));
        KEY("ci_low");
        T(ao_json_gen_double(g, mc->ci.lo));
        KEY("ci_high");
        T(ao_json_gen_double(g, mc->ci.hi));
        KEY("verdict");
        T(ao_json_gen_str(g, ao_verdict_name(mc->verdict)));
        T(yajl_gen_map_close(g));
    }
    T(yajl_gen_map_close(g));
    KEY("setting_differences");
    T(yajl_gen_array_open(g));
    for (size_t i = 0; i < c->ndiffs; i++) {
        T(yajl_gen_map_open(g));
        KEY("key");
        T(ao_json_gen_str(g, c->diffs[i].key));
        KEY("reference");
        T(ao_json_gen_str(g, c->diffs[i].reference));
        KEY("candidate");
        T(ao_json_gen_str(g, c->diffs[i].candidate));
        T(yajl_gen_map_close(g));
    }
    T(yajl_gen_array_close(g));
    T(yajl_gen_map_close(g));
#undef KEY
#undef T
    return s;
}
