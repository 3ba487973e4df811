#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/json.h"
#include "core/plugin.h"
#include "core/text.h"
#include "diagnose/diagnose.h"
#include "runs/compare.h"
#include "report/html.h"
#include "report/report.h"
#include "runs/run_end.h"
#include "runs/summary.h"
#if AORTA_HAVE_CAIRO
#include "report/charts.h"
#endif

int ao_report_check_label(const char *label)
{
    if (ao_check_plain_name(label, 64, "--label", "label")) return AO_EXIT_USAGE;
    size_t n = strlen(label);
    if (label[0] == '.' ||
        strspn(label, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n) {
        ao_error("--label",
                 "'%s' cannot name files; allowed: 1 to 64 of A-Z a-z 0-9 . _ - (not starting "
                 "with '.')",
                 label);
        return AO_EXIT_USAGE;
    }
    return 0;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char *p = ao_strdup(path);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) rc = -1;
            *s = c;
            if (c == '\0') break;
        }
    }
    struct stat st;
    if (rc == 0 && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) rc = -1;
    if (rc)
        ao_error("--output", "%s: cannot make the directory: %s", path,
                 errno ? strerror(errno) : "a file is in the way");
    free(p);
    return rc;
}

typedef struct label_runs {
    ao_run_data *runs;
    size_t n;
} label_runs;

static int find_label(const ao_report_opts *o, const char *flag, const char *name)
{
    for (size_t i = 0; i < o->nlabels; i++)
        if (strcmp(o->labels[i], name) == 0) return (int)i;
    ao_error(flag, "'%s' is not one of the labels given with --label", name);
    return -1;
}

static int write_summary_json(const char *path, const ao_summary *s, size_t n,
                              const ao_comparison *c, size_t nc)
{
    yajl_gen g = ao_json_gen_new(1);
    yajl_gen_status st = yajl_gen_map_open(g);
    if (st == yajl_gen_status_ok) st = ao_json_gen_str(g, "schema");
    if (st == yajl_gen_status_ok) st = yajl_gen_integer(g, 1);
    if (st == yajl_gen_status_ok) st = ao_json_gen_str(g, "labels");
    if (st == yajl_gen_status_ok) st = yajl_gen_array_open(g);
    for (size_t i = 0; i < n && st == yajl_gen_status_ok; i++) st = ao_summary_gen(g, &s[i]);
    if (st == yajl_gen_status_ok) st = yajl_gen_array_close(g);
    /* "comparison": the first candidate's (older readers); "comparisons": all */
    if (st == yajl_gen_status_ok) st = ao_json_gen_str(g, "comparison");
    if (st == yajl_gen_status_ok) st = nc ? ao_comparison_gen(g, c) : yajl_gen_null(g);
    if (st == yajl_gen_status_ok) st = ao_json_gen_str(g, "comparisons");
    if (st == yajl_gen_status_ok) st = yajl_gen_array_open(g);
    for (size_t i = 0; i < nc && st == yajl_gen_status_ok; i++) st = ao_comparison_gen(g, &c[i]);
    if (st == yajl_gen_status_ok) st = yajl_gen_array_close(g);
    if (st == yajl_gen_status_ok) st = yajl_gen_map_close(g);
    int rc = 0;
    if (st != yajl_gen_status_ok) {
        ao_error(path, "JSON generation failed (yajl status %d)", (int)st);
        rc = AO_EXIT_FAIL;
    } else if (ao_json_write_atomic(path, g) != 0) {
        rc = AO_EXIT_FAIL;
    }
    yajl_gen_free(g);
    return rc;
}

static void print_verdicts(FILE *out, const ao_comparison *c)
{
    fprintf(out, "\n%s vs %s (reference): median, 95%% bootstrap CI of the difference\n",
            c->candidate, c->reference);
    for (size_t i = 0; i < c->nmetrics; i++) {
        const ao_metric_cmp *m = &c->metrics[i];
        fprintf(out, "  %-26s %12.4g -> %-12.4g [%+.4g, %+.4g]  %s\n", ao_metric(m->metric)->name,
                m->ref_median, m->cand_median, m->ci.lo, m->ci.hi, ao_verdict_name(m->verdict));
    }
    for (size_t i = 0; i < c->ndiffs; i++)
        fprintf(out, "  setting %s: %s -> %s\n", c->diffs[i].key,
                c->diffs[i].reference ? c->diffs[i].reference : "(not set)",
                c->diffs[i].candidate ? c->diffs[i].candidate : "(not set)");
}

#if AORTA_HAVE_CAIRO
/* The charts' plugin; without it the page says each chart is not available,
 * after one warning naming the library. */
static const struct ao_report_charts *chart_plugin(void)
{
    const struct ao_report_charts *ch = ao_plugin_sym("cairo", "ao_report_charts_cairo", 1);
    if (!ch)
        ao_warn("report: no charts: cannot load libaorta_cairo.so: %s", ao_plugin_why("cairo"));
    return ch;
}
#endif

static int draw_charts(const ao_report_opts *o, const label_runs *lr, const ao_summary *sums,
                       const ao_comparison *cmps, size_t ncmps, ao_html_chart *charts,
                       size_t *ncharts)
{
    *ncharts = 0;
    int rc = 0;
    charts[(*ncharts)++] = (ao_html_chart){
        "overlap_breakdown", "The median step split into overlapped time, exposed communication, "
                             "compute alone, idle time and the rest; the parts add up to the "
                             "median step."};
#if AORTA_HAVE_CAIRO
    const struct ao_report_charts *ch = o->charts ? chart_plugin() : NULL;
    for (size_t i = 0; i < o->nlabels && ch && rc == 0; i++) {
        rc = ch->timeline(o->output, o->labels[i], lr[i].runs, lr[i].n);
        if (rc == 0) rc = ch->streams(o->output, o->labels[i], lr[i].runs, lr[i].n);
    }
    if (ch && rc == 0) rc = ch->overlap_breakdown(o->output, sums, o->nlabels);
    for (size_t c = 0; c < ncmps && ch && rc == 0; c++) rc = ch->comparison(o->output, &cmps[c]);
#else
    (void)lr;
    (void)sums;
    (void)cmps;
    (void)ncmps;
    if (o->charts) ao_warn("this aorta was built without cairo: no charts");
#endif
    return rc;
}

/* With a matrix (several candidates): per metric of it, the metric across
 * configs as configs_{metric}.csv and its chart. */
static int configs_charts(const ao_report_opts *o, const label_runs *lr, int ref, const int *cand,
                          const ao_comparison *cmps, size_t ncmps)
{
    if (ncmps < 2) return 0;
    const ao_run_data **runs = ao_malloc((ncmps + 1) * sizeof *runs);
    size_t *nruns = ao_malloc((ncmps + 1) * sizeof *nruns);
    ao_config_value *v = ao_malloc((ncmps + 1) * sizeof *v);
    runs[0] = lr[ref].runs;
    nruns[0] = lr[ref].n;
    for (size_t c = 0; c < ncmps; c++) {
        runs[1 + c] = lr[cand[c]].runs;
        nruns[1 + c] = lr[cand[c]].n;
    }
    int rc = 0;
    for (size_t i = 0; i < cmps[0].nmetrics && rc == 0; i++) {
        size_t m = cmps[0].metrics[i].metric;
        size_t n = ao_compare_across(cmps, ncmps, m, runs, nruns, v);
        char *path = ao_asprintf("%s/configs_%s.csv", o->output, ao_metric(m)->name);
        rc = ao_config_values_write_csv(path, v, n);
        free(path);
#if AORTA_HAVE_CAIRO
        const struct ao_report_charts *ch =
            rc == 0 && o->charts ? ao_plugin_sym("cairo", "ao_report_charts_cairo", 1) : NULL;
        if (ch) rc = ch->configs(o->output, m, v, n);
#endif
    }
    free(runs);
    free(nruns);
    free(v);
    return rc;
}

int ao_report_check_labels(const char *const *labels, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ao_report_check_label(labels[i])) return AO_EXIT_USAGE;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(labels[i], labels[j]) == 0) {
                ao_error("--label", "'%s' is given twice; labels must differ", labels[i]);
                return AO_EXIT_USAGE;
            }
        }
    }
    return 0;
}

/* The comparisons' labels: the reference's index, then each candidate's
 * (every other label when none is named). */
static int pick(const ao_report_opts *o, int *ref, int *cand, size_t *ncand)
{
    *ref = -1;
    *ncand = 0;
    if (!o->reference) {
        if (o->ncandidates == 0) return 0;
        ao_error("--candidate", "a comparison needs --reference");
        return AO_EXIT_USAGE;
    }
    if ((*ref = find_label(o, "--reference", o->reference)) < 0) return AO_EXIT_USAGE;
    if (o->ncandidates == 0) {
        for (size_t i = 0; i < o->nlabels; i++)
            if ((int)i != *ref) cand[(*ncand)++] = (int)i;
        return 0;
    }
    for (size_t c = 0; c < o->ncandidates; c++) {
        int k = find_label(o, "--candidate", o->candidates[c]);
        if (k < 0) return AO_EXIT_USAGE;
        if (k == *ref) {
            ao_error("--candidate", "'%s' is also the reference; compare two different labels",
                     o->candidates[c]);
            return AO_EXIT_USAGE;
        }
        for (size_t j = 0; j < *ncand; j++) {
            if (cand[j] == k) {
                ao_error("--candidate", "'%s' is given twice", o->candidates[c]);
                return AO_EXIT_USAGE;
            }
        }
        cand[(*ncand)++] = k;
    }
    return 0;
}

/* {label}_trace.json of the label's first run, for Perfetto and HTA: its
 * file name in *name (NULL without run.json). A failure fails the report
 * (its error was printed): never an error line and exit 0. */
static int write_trace(const ao_report_opts *o, size_t i, const label_runs *lr, char **name)
{
    *name = NULL;
    if (!lr[i].runs[0].run) { /* the trace needs run.json; its absence was already said */
        ao_warn("%s: no run.json, so no trace; the report goes on without it", o->labels[i]);
        return 0;
    }
    char *file = ao_asprintf("%s_trace.json", o->labels[i]);
    char *path = ao_asprintf("%s/%s", o->output, file);
    int rc = ao_trace_from_run(lr[i].runs[0].dir, path);
    free(path);
    if (rc == 0)
        *name = file;
    else
        free(file);
    return rc;
}

static int generate(const ao_report_opts *o);

/* The label of a sweep's run: its directory's name, with characters a label
 * cannot hold as '_'. */
static char *sweep_label(const char *dir)
{
    const char *base = strrchr(dir, '/');
    char *l = ao_strdup(base ? base + 1 : dir);
    for (char *c = l; *c; c++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-", *c))
            *c = '_';
    if (l[0] == '.') l[0] = '_';
    if (strlen(l) > 64) l[64] = '\0';
    return l;
}

int ao_report_generate(const ao_report_opts *o)
{
    if (o->nsweeps == 0) return generate(o);
    /* every run directory of each sweep becomes a label of its own */
    size_t n = 0;
    const char **dirs = ao_malloc((o->nlabels + 1) * sizeof *dirs);
    const char **labels = ao_malloc((o->nlabels + 1) * sizeof *labels);
    char **owned = NULL;
    size_t nowned = 0;
    int rc = 0;
    for (size_t i = 0; i < o->nlabels; i++, n++) {
        dirs[n] = o->log_dirs[i];
        labels[n] = o->labels[i];
    }
    for (size_t s = 0; s < o->nsweeps && rc == 0; s++) {
        char **runs;
        size_t nr;
        rc = ao_run_dirs_resolve(o->sweeps[s], 1, &runs, &nr);
        if (rc) break;
        dirs = ao_realloc(dirs, (n + nr + 1) * sizeof *dirs);
        labels = ao_realloc(labels, (n + nr + 1) * sizeof *labels);
        owned = ao_realloc(owned, (nowned + 2 * nr + 1) * sizeof *owned);
        for (size_t k = 0; k < nr; k++, n++) {
            dirs[n] = owned[nowned++] = runs[k];
            labels[n] = owned[nowned++] = sweep_label(runs[k]);
        }
        free(runs); /* its strings are in owned */
    }
    if (rc == 0) {
        ao_report_opts x = *o;
        x.log_dirs = dirs;
        x.labels = labels;
        x.nlabels = n;
        x.all_runs = 0;
        rc = generate(&x);
    }
    for (size_t i = 0; i < nowned; i++) free(owned[i]);
    free(owned);
    free(dirs);
    free(labels);
    return rc;
}

static int generate(const ao_report_opts *o)
{
    if (o->nlabels == 0) {
        ao_error("report", "no --log-dir given");
        return AO_EXIT_USAGE;
    }
    if (ao_report_check_labels(o->labels, o->nlabels)) return AO_EXIT_USAGE;
    int ref;
    size_t ncand;
    int *cand = ao_calloc(o->nlabels + o->ncandidates + 1, sizeof *cand);
    if (pick(o, &ref, cand, &ncand) != 0) {
        free(cand);
        return AO_EXIT_USAGE;
    }

    int rc = 0;
    label_runs *lr = ao_calloc(o->nlabels, sizeof *lr);
    ao_summary *sums = ao_calloc(o->nlabels, sizeof *sums);
    size_t built = 0;
    for (size_t i = 0; i < o->nlabels && rc == 0; i++) {
        char **dirs;
        size_t nd;
        rc = ao_run_dirs_resolve(o->log_dirs[i], o->all_runs, &dirs, &nd);
        if (rc) break;
        lr[i].runs = ao_calloc(nd, sizeof *lr[i].runs);
        for (size_t d = 0; d < nd && rc == 0; d++) {
            rc = ao_run_load(dirs[d], o->skip_steps, &lr[i].runs[d]);
            lr[i].n = d + 1;
        }
        ao_run_dirs_free(dirs, nd);
        if (rc == 0) {
            rc = ao_summary_build(o->labels[i], lr[i].runs, lr[i].n, &sums[i]);
            built = i + 1;
        }
    }
    ao_comparison *cmps = ao_calloc(ncand + 1, sizeof *cmps);
    size_t ncmps = 0;
    for (size_t c = 0; rc == 0 && c < ncand; c++, ncmps++)
        ao_compare(o->labels[ref], lr[ref].runs, lr[ref].n, o->labels[cand[c]], lr[cand[c]].runs,
                   lr[cand[c]].n, &cmps[c]);
    if (rc == 0 && make_dirs(o->output) != 0) rc = AO_EXIT_USAGE;
    if (rc == 0) {
        char *path = ao_asprintf("%s/summary.json", o->output);
        rc = write_summary_json(path, sums, o->nlabels, cmps, ncmps);
        free(path);
    }
    ao_html_chart charts[1];
    size_t ncharts = 0;
    if (rc == 0) rc = draw_charts(o, lr, sums, cmps, ncmps, charts, &ncharts);
    if (rc == 0) rc = configs_charts(o, lr, ref, cand, cmps, ncmps);
    ao_diagnosis *diags = ao_calloc(o->nlabels, sizeof *diags);
    ao_html_label *hl = ao_calloc(o->nlabels, sizeof *hl);
    char **traces = ao_calloc(o->nlabels, sizeof *traces);
    for (size_t i = 0; rc == 0 && i < o->nlabels; i++) {
        ao_diagnose_run(&lr[i].runs[0], &diags[i]);
        if (o->traces) rc = write_trace(o, i, lr, &traces[i]);
        hl[i] = (ao_html_label){&sums[i], &diags[i], lr[i].runs,
                                lr[i].n,  traces[i], ao_run_median_profiled_step(&lr[i].runs[0])};
    }
    if (rc == 0) {
        char *path = ao_asprintf("%s/index.html", o->output);
        ao_html_page page = {o->output, hl, o->nlabels, cmps, ncmps, charts, ncharts};
        rc = ao_html_write(path, &page);
        free(path);
    }
    if (rc == 0 && o->out) {
        for (size_t i = 0; i < o->nlabels; i++) ao_summary_print(o->out, &sums[i]);
        for (size_t c = 0; c < ncmps; c++) print_verdicts(o->out, &cmps[c]);
        fprintf(o->out, "\nwrote %s/summary.json and %s/index.html\n", o->output, o->output);
    }
    for (size_t i = 0; i < o->nlabels; i++) {
        ao_diagnosis_free(&diags[i]);
        free(traces[i]);
    }
    free(diags);
    free(hl);
    free(traces);
    for (size_t c = 0; c < ncmps; c++) ao_comparison_free(&cmps[c]);
    free(cmps);
    free(cand);
    for (size_t i = 0; i < built; i++) ao_summary_free(&sums[i]);
    if (rc && built < o->nlabels) ao_summary_free(&sums[built]);
    free(sums);
    for (size_t i = 0; i < o->nlabels; i++) {
        for (size_t d = 0; d < lr[i].n; d++) ao_run_free(&lr[i].runs[d]);
        free(lr[i].runs);
    }
    free(lr);
    return rc;
}
