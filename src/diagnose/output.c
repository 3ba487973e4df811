/* A diagnosis as text and as JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "diagnose/internal.h"

static void print_notes(FILE *f, const char *title, const ao_diag_note *v, size_t n)
{
    if (!n) return;
    fprintf(f, "  %s:\n", title);
    for (size_t i = 0; i < n; i++) fprintf(f, "    - [%s] %s\n", v[i].id, v[i].text);
}

void ao_diagnosis_print(FILE *f, const ao_diagnosis *d, size_t max_findings)
{
    fprintf(f, "diagnosis of %s: %s\n", d->run_id, ao_bound_name(d->bound));
    fprintf(f, "  why: %s\n", d->bound_why);
    if (isfinite(d->step_ms))
        fprintf(f,
                "  rank %d (the slowest), median of %zu steps: step %.3f ms, compute %.3f, "
                "exposed comm %.3f, idle %.3f (host wait %.3f), data wait %.3f, between steps "
                "%.3f ms\n",
                d->critical_rank, d->steps, d->step_ms, d->compute_ms, d->exposed_comm_ms,
                d->idle_ms, d->host_wait_ms, d->data_wait_ms, d->gap_ms);
    if (!d->nfindings)
        fprintf(f, "  findings: none at %.0f %% of the step or more\n",
                100 * AO_DIAG_FINDING_SHARE);
    size_t n = max_findings && max_findings < d->nfindings ? max_findings : d->nfindings;
    for (size_t i = 0; i < n; i++) {
        const ao_finding *x = &d->findings[i];
        fprintf(f, "  %zu. [%s] %s (%.0f %% of the step)\n", i + 1, ao_finding_id(x->kind), x->what,
                100 * x->share);
        fprintf(f, "     where: %s\n", x->where);
        if (x->evidence[0]) fprintf(f, "     evidence: %s\n", x->evidence);
        if (x->knobs[0]) fprintf(f, "     knobs: %s\n", x->knobs);
        fprintf(f, "     gain: %s\n", x->gain);
    }
    if (n < d->nfindings) fprintf(f, "  (%zu more: aorta diagnose)\n", d->nfindings - n);
    print_notes(f, "flags", d->flags, d->nflags);
    print_notes(f, "outlier steps", d->outliers, d->noutliers);
    if (max_findings == 0) print_notes(f, "limitations", d->limits, d->nlimits);
}

/* ---- JSON --------------------------------------------------------------------- */

static void notes(ao_json_writer *o, const char *k, const ao_diag_note *v, size_t n)
{
    ao_jw_aopen(o, k);
    for (size_t i = 0; i < n; i++) {
        ao_jw_open(o, NULL);
        ao_jw_str(o, "id", v[i].id);
        ao_jw_str(o, "text", v[i].text);
        ao_jw_close(o);
    }
    ao_jw_aclose(o);
}

yajl_gen_status ao_diagnosis_gen(yajl_gen g, const ao_diagnosis *d)
{
    ao_json_writer o = {g, yajl_gen_status_ok};
    ao_jw_open(&o, NULL);
    ao_jw_str(&o, "run_id", d->run_id);
    ao_jw_str(&o, "dir", d->dir);
    ao_jw_int(&o, "world_size", d->world_size);
    ao_jw_int(&o, "ranks", d->nranks);
    ao_jw_int(&o, "critical_rank", d->critical_rank);
    ao_jw_int(&o, "steps", (long long)d->steps);
    ao_jw_str(&o, "bound", ao_bound_name(d->bound));
    ao_jw_str(&o, "why", d->bound_why);
    ao_jw_open(&o, "thresholds");
    ao_jw_double(&o, "finding_share", AO_DIAG_FINDING_SHARE);
    ao_jw_double(&o, "bound_share", AO_DIAG_BOUND_SHARE);
    ao_jw_double(&o, "compute_share", AO_DIAG_COMPUTE_SHARE);
    ao_jw_int(&o, "min_steps", AO_DIAG_MIN_STEPS);
    ao_jw_double(&o, "spread", AO_DIAG_SPREAD);
    ao_jw_double(&o, "outlier", AO_DIAG_OUTLIER);
    ao_jw_close(&o);
    ao_jw_open(&o, "terms_ms");
    ao_jw_double(&o, "step", d->step_ms);
    ao_jw_double(&o, "compute", d->compute_ms);
    ao_jw_double(&o, "exposed_comm", d->exposed_comm_ms);
    ao_jw_double(&o, "idle", d->idle_ms);
    ao_jw_double(&o, "host_wait", d->host_wait_ms);
    ao_jw_double(&o, "data_wait", d->data_wait_ms);
    ao_jw_double(&o, "between_steps", d->gap_ms);
    ao_jw_close(&o);
    ao_jw_aopen(&o, "findings");
    for (size_t i = 0; i < d->nfindings; i++) {
        const ao_finding *x = &d->findings[i];
        ao_jw_open(&o, NULL);
        ao_jw_str(&o, "id", ao_finding_id(x->kind));
        ao_jw_double(&o, "ms", x->ms);
        ao_jw_double(&o, "share", x->share);
        ao_jw_int(&o, "rank", x->rank);
        ao_jw_str(&o, "cause", x->cause >= 0 ? ao_late_cause_name((ao_late_cause)x->cause) : NULL);
        ao_jw_str(&o, "what", x->what);
        ao_jw_str(&o, "where", x->where);
        ao_jw_str(&o, "evidence", x->evidence);
        ao_jw_str(&o, "knobs", x->knobs);
        ao_jw_str(&o, "gain", x->gain);
        ao_jw_close(&o);
    }
    ao_jw_aclose(&o);
    notes(&o, "flags", d->flags, d->nflags);
    notes(&o, "outliers", d->outliers, d->noutliers);
    notes(&o, "limitations", d->limits, d->nlimits);
    ao_jw_close(&o);
    return o.st;
}

int ao_diagnose_print_run(const char *run_dir, FILE *f)
{
    ao_run_data run;
    memset(&run, 0, sizeof run);
    int rc = ao_run_load(run_dir, -1, &run);
    if (rc == 0) {
        ao_diagnosis d;
        ao_diagnose_run(&run, &d);
        ao_diagnosis_print(f, &d, 3);
        ao_diagnosis_free(&d);
    }
    ao_run_free(&run);
    return rc;
}

/* The source of a run: run.json's command ("train", "analyze", ...). */
static const char *source_of(const ao_run_data *r)
{
    yajl_val c = ao_run_config_value(r, "command");
    return YAJL_IS_STRING(c) ? c->u.string : "unknown";
}

int ao_diagnose_dirs(const ao_diagnose_opts *o)
{
    size_t cap = 0, n = 0;
    char **all = NULL;
    int rc = 0;
    for (size_t i = 0; i < o->ndirs && rc == 0; i++) {
        char **dirs = NULL;
        size_t nd = 0;
        rc = ao_run_dirs_resolve(o->dirs[i], 0, &dirs, &nd);
        for (size_t j = 0; rc == 0 && j < nd; j++) {
            if (n == cap) {
                cap = cap ? 2 * cap : 8;
                all = ao_realloc(all, cap * sizeof *all);
            }
            all[n++] = ao_strdup(dirs[j]);
        }
        if (rc == 0) ao_run_dirs_free(dirs, nd);
    }
    ao_run_data *runs = ao_calloc(n ? n : 1, sizeof *runs);
    ao_diagnosis *ds = ao_calloc(n ? n : 1, sizeof *ds);
    ao_coll_ref ref = {0};
    if (rc == 0 && o->coll_ref) rc = ao_coll_ref_read(o->coll_ref, &ref);
    size_t loaded = 0;
    for (size_t i = 0; i < n && rc == 0; i++, loaded++) {
        rc = ao_run_load(all[i], o->skip_steps, &runs[i]);
        if (rc == 0) rc = ao_run_require_steps(&runs[i], all[i]);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        ao_diagnose_run_ref(&runs[i], o->coll_ref ? &ref : NULL, &ds[i]);
        if (strcmp(source_of(&runs[i]), source_of(&runs[0])) != 0)
            ao_diag_note_add(&ds[i].flags, &ds[i].nflags, "mixed_sources",
                             "this run comes from `%s`, %s from `%s`: compare their numbers "
                             "only as far as both measure the same",
                             source_of(&runs[i]), runs[0].run_id, source_of(&runs[0]));
    }
    if (rc == 0 && o->json) {
        yajl_gen g = ao_json_gen_new(1);
        ao_json_writer w = {g, yajl_gen_status_ok};
        ao_jw_open(&w, NULL);
        ao_jw_int(&w, "schema", 1);
        ao_jw_aopen(&w, "runs");
        for (size_t i = 0; i < n && w.st == yajl_gen_status_ok; i++)
            w.st = ao_diagnosis_gen(g, &ds[i]);
        ao_jw_aclose(&w);
        ao_jw_close(&w);
        const unsigned char *buf;
        size_t len;
        yajl_gen_get_buf(g, &buf, &len);
        fwrite(buf, 1, len, o->out);
        fputc('\n', o->out);
        yajl_gen_free(g);
    } else if (rc == 0) {
        for (size_t i = 0; i < n; i++) {
            if (i) fputc('\n', o->out);
            ao_diagnosis_print(o->out, &ds[i], 0);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (i < loaded) ao_run_free(&runs[i]);
        ao_diagnosis_free(&ds[i]);
        free(all[i]);
    }
    free(all);
    free(runs);
    free(ds);
    ao_coll_ref_free(&ref);
    return rc;
}
