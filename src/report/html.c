/* index.html's skeleton and its first sections: findings, verdicts, the
 * median step's timeline. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/json.h"
#include "report/html_buf.h"

/* A growing string. */

void ao_hput(ao_hbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = ao_realloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void ao_hputs(ao_hbuf *b, const char *s)
{
    ao_hput(b, s, strlen(s));
}

void ao_hprintf(ao_hbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) ao_fatal(AO_EXIT_FAIL, "html", "out of memory");
    ao_hput(b, s, (size_t)n);
    free(s);
}

/* Text content and attribute values. */
void ao_hesc(ao_hbuf *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            ao_hputs(b, "&lt;");
            break;
        case '>':
            ao_hputs(b, "&gt;");
            break;
        case '&':
            ao_hputs(b, "&amp;");
            break;
        case '"':
            ao_hputs(b, "&quot;");
            break;
        default:
            ao_hput(b, s, 1);
        }
    }
}

void ao_hnum(ao_hbuf *b, double v)
{
    if (isnan(v))
        ao_hputs(b, "&ndash;");
    else if (fabs(v) >= 1e4)
        ao_hprintf(b, "%.0f", v);
    else if (fabs(v) >= 100)
        ao_hprintf(b, "%.1f", v);
    else
        ao_hprintf(b, "%.3f", v);
}

static const char css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;"
    "max-width:1100px;padding:1em 1.5em;color:#1a1a1a;line-height:1.4}"
    "h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;margin:.6em 0;font-size:.92em}"
    "th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right}"
    "th{background:#f3f3f3}td.k,th.k{text-align:left}td.k{overflow-wrap:anywhere}"
    ".better{color:#1d6b2c;font-weight:600}.worse{color:#b3261e;font-weight:600}"
    ".same{color:#666}.note{color:#666;font-size:.9em}"
    ".flag{border-left:4px solid #c77c00;background:#fff6e5;padding:.4em .8em}"
    ".finding{margin:.5em 0 .8em}.finding .what{font-weight:600}"
    "td.better{background:#e3f2e6}td.worse{background:#fbe3e1}td.same{background:#f3f3f3}"
    "code{font-size:.92em}dt{font-weight:600;margin-top:.4em}dd{margin-left:1.2em}"
    ".wide{overflow-x:auto}"
    ".verdicts{border:1px solid #ccc;background:#fafafa;padding:.5em 1em;border-radius:4px}"
    "figure{margin:1.2em 0;page-break-inside:avoid;break-inside:avoid}"
    "figure svg{max-width:100%;height:auto;display:block}"
    "figcaption{color:#444;font-size:.9em}"
    "@media print{body{max-width:none;padding:0}h2{page-break-after:avoid}"
    "table{page-break-inside:avoid}}";

void ao_hcells(ao_hbuf *b, const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ao_hputs(b, "<td>");
        ao_hnum(b, v[i]);
        ao_hputs(b, "</td>");
    }
}

/* The SVG file's <svg> element with its ids prefixed by `prefix`: cairo
 * names glyphs and clips "glyph0-1", "clip1" in every file, and inlined
 * together they would resolve to the first chart's definitions. */
static void inline_svg(ao_hbuf *b, const char *path, const char *prefix)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        ao_hputs(b, "<p class=\"note\">chart not available (this aorta was built without cairo, "
                    "or it could not be drawn)</p>\n");
        return;
    }
    ao_hbuf in = {0};
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) ao_hput(&in, chunk, got);
    fclose(f);
    const char *p = in.s ? strstr(in.s, "<svg") : NULL;
    if (!p) {
        ao_hputs(b, "<p class=\"note\">chart file is not SVG</p>\n");
        free(in.s);
        return;
    }
    static const char *const refs[] = {"id=\"", "href=\"#", "url(#"};
    while (*p) {
        size_t best = strlen(p), which = 0;
        for (size_t r = 0; r < 3; r++) {
            const char *q = strstr(p, refs[r]);
            if (q && (size_t)(q - p) < best) {
                best = (size_t)(q - p);
                which = r;
            }
        }
        if (best == strlen(p)) {
            ao_hputs(b, p);
            break;
        }
        ao_hput(b, p, best + strlen(refs[which]));
        ao_hputs(b, prefix);
        p += best + strlen(refs[which]);
    }
    ao_hputs(b, "\n");
    free(in.s);
}

void ao_html_figure(ao_hbuf *b, const ao_html_page *p, const char *name, const char *caption)
{
    ao_hputs(b, "<figure id=\"chart-");
    ao_hesc(b, name);
    ao_hputs(b, "\">\n");
    char *svg = ao_asprintf("%s/%s.svg", p->chart_dir, name);
    char *prefix = ao_asprintf("%s-", name); /* chart names are unique on the page */
    inline_svg(b, svg, prefix);
    free(prefix);
    free(svg);
    ao_hputs(b, "<figcaption>");
    ao_hesc(b, caption);
    ao_hputs(b, " (<a href=\"");
    ao_hesc(b, name);
    ao_hputs(b, ".png\"><code>");
    ao_hesc(b, name);
    ao_hputs(b, ".png</code></a>, <a href=\"");
    ao_hesc(b, name);
    ao_hputs(b, ".svg\"><code>");
    ao_hesc(b, name);
    ao_hputs(b, ".svg</code></a>");
    char *csv = ao_asprintf("%s/%s.csv", p->chart_dir, name);
    if (access(csv, F_OK) == 0) { /* the data behind the chart */
        ao_hputs(b, ", <a href=\"");
        ao_hesc(b, name);
        ao_hputs(b, ".csv\"><code>");
        ao_hesc(b, name);
        ao_hputs(b, ".csv</code></a>");
    }
    free(csv);
    ao_hputs(b, ")</figcaption></figure>\n");
}

static const char *verdict_class(ao_verdict v)
{
    return v == AO_VERDICT_BETTER ? "better" : v == AO_VERDICT_WORSE ? "worse" : "same";
}

/* ---- 0. at a glance ------------------------------------------------------------ */

/* The page's charts of every label at once (the median step's overlap
 * breakdown): the answer in one picture, on the first screen. */
static void glance_section(ao_hbuf *b, const ao_html_page *p)
{
    if (p->ncharts == 0) return;
    ao_hputs(b, "<section id=\"glance\"><h2>At a glance</h2>\n");
    for (size_t i = 0; i < p->ncharts; i++)
        ao_html_figure(b, p, p->charts[i].name, p->charts[i].caption);
    ao_hputs(b, "</section>\n");
}

/* ---- 1. findings --------------------------------------------------------------- */

static void notes(ao_hbuf *b, const char *title, const ao_diag_note *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ao_hprintf(b, "<p class=\"flag\">%s <code>", title);
        ao_hesc(b, v[i].id);
        ao_hputs(b, "</code>: ");
        ao_hesc(b, v[i].text);
        ao_hputs(b, "</p>\n");
    }
}

static void findings_section(ao_hbuf *b, const ao_html_page *p)
{
    ao_hputs(b, "<section id=\"findings\"><h2>Findings</h2>\n");
    for (size_t i = 0; i < p->nlabels; i++) {
        const ao_diagnosis *d = p->labels[i].diag;
        ao_hputs(b, "<h3>");
        ao_hesc(b, p->labels[i].sum->label);
        ao_hputs(b, ": ");
        ao_hesc(b, d ? ao_bound_name(d->bound) : "not diagnosed");
        ao_hputs(b, "</h3>\n");
        if (!d) continue;
        ao_hputs(b, "<p>");
        ao_hesc(b, d->bound_why);
        ao_hputs(b, ".");
        if (isfinite(d->step_ms))
            ao_hprintf(b,
                       " Rank %d (the slowest), median of %zu steps: step %.3f ms, compute "
                       "%.3f ms, exposed communication %.3f ms, idle %.3f ms.",
                       d->critical_rank, d->steps, d->step_ms, d->compute_ms, d->exposed_comm_ms,
                       d->idle_ms);
        ao_hputs(b, "</p>\n");
        if (d->nfindings == 0)
            ao_hprintf(b, "<p class=\"note\">No finding costs %.0f%% of the step or more.</p>\n",
                       100 * AO_DIAG_FINDING_SHARE);
        if (d->nfindings) ao_hputs(b, "<ol class=\"findings\">\n");
        /* Past two labels the page would be findings only: the costliest of
         * each in full, the others folded. */
        size_t open = p->nlabels > 2 ? 1 : d->nfindings;
        for (size_t k = 0; k < d->nfindings; k++) {
            const ao_finding *f = &d->findings[k];
            if (k == open)
                ao_hputs(b, "</ol><details><summary>more findings</summary><ol start=\"2\">\n");
            ao_hputs(b, "<li class=\"finding\"><span class=\"what\">");
            ao_hesc(b, f->what);
            ao_hprintf(b,
                       "</span> (%.0f%% of the step, <code>%s</code>)<br>where: ", 100 * f->share,
                       ao_finding_id(f->kind));
            ao_hesc(b, f->where);
            if (f->evidence[0]) {
                ao_hputs(b, "<br>evidence: ");
                ao_hesc(b, f->evidence);
            }
            if (f->knobs[0]) {
                ao_hputs(b, "<br>what to change: ");
                ao_hesc(b, f->knobs);
            }
            ao_hputs(b, "<br>expected gain: ");
            ao_hesc(b, f->gain);
            ao_hputs(b, "</li>\n");
        }
        if (d->nfindings) ao_hputs(b, d->nfindings > open ? "</ol></details>\n" : "</ol>\n");
        notes(b, "Sanity flag", d->flags, d->nflags);
        notes(b, "Outlier step", d->outliers, d->noutliers);
    }
    ao_hputs(b, "<p class=\"note\">From <code>aorta diagnose</code> (findings of at least ");
    ao_hprintf(b, "%.0f%% of the step, ranked by their cost per step).</p>\n</section>\n",
               100 * AO_DIAG_FINDING_SHARE);
}

/* ---- 2. verdicts --------------------------------------------------------------- */

static void verdict_list(ao_hbuf *b, const ao_comparison *c)
{
    ao_hputs(b, "<h3>");
    ao_hesc(b, c->candidate);
    ao_hputs(b, " vs ");
    ao_hesc(b, c->reference);
    ao_hputs(b, " (reference)</h3>\n<div class=\"verdicts\"><ul>\n");
    size_t same = 0, shown = 0;
    for (size_t i = 0; i < c->nmetrics; i++) {
        const ao_metric_cmp *m = &c->metrics[i];
        if (m->verdict == AO_VERDICT_SAME) same++;
        if (m->verdict == AO_VERDICT_SAME || m->verdict == AO_VERDICT_NA) continue;
        shown++;
        ao_hprintf(b, "<li><span class=\"%s\">%s</span>: %s ", verdict_class(m->verdict),
                   ao_verdict_name(m->verdict), ao_metric(m->metric)->name);
        ao_hnum(b, m->ref_median);
        ao_hputs(b, " &rarr; ");
        ao_hnum(b, m->cand_median);
        ao_hprintf(b, " %s (%+.1f%%, 95%% CI of the difference [", ao_metric(m->metric)->unit,
                   m->ref_median != 0 ? 100 * m->diff / fabs(m->ref_median) : NAN);
        ao_hnum(b, m->ci.lo);
        ao_hputs(b, ", ");
        ao_hnum(b, m->ci.hi);
        ao_hputs(b, "])</li>\n");
    }
    if (shown == 0) ao_hputs(b, "<li>No metric differs significantly.</li>\n");
    for (size_t i = 0; i < c->ndiffs; i++) {
        ao_hputs(b, "<li class=\"note\">setting <code>");
        ao_hesc(b, c->diffs[i].key);
        ao_hputs(b, "</code>: ");
        ao_hesc(b, c->diffs[i].reference ? c->diffs[i].reference : "(not set)");
        ao_hputs(b, " &rarr; ");
        ao_hesc(b, c->diffs[i].candidate ? c->diffs[i].candidate : "(not set)");
        ao_hputs(b, "</li>\n");
    }
    ao_hprintf(b,
               "</ul><p class=\"note\">%zu metric(s) show no significant difference.</p></div>\n",
               same);
}

/* Configs as rows, headline metrics as columns, each cell the candidate's
 * median over the reference's with its verdict as the cell's colour. */
static void matrix(ao_hbuf *b, const ao_html_page *p)
{
    ao_hputs(b, "<div class=\"wide\"><table id=\"matrix\"><thead><tr><th class=\"k\">candidate / "
                "reference</th>");
    const ao_comparison *c0 = &p->cmps[0];
    for (size_t i = 0; i < c0->nmetrics; i++)
        ao_hprintf(b, "<th>%s</th>", ao_metric(c0->metrics[i].metric)->name);
    ao_hputs(b, "</tr></thead><tbody>\n");
    for (size_t c = 0; c < p->ncmps; c++) {
        ao_hputs(b, "<tr><td class=\"k\">");
        ao_hesc(b, p->cmps[c].candidate);
        ao_hputs(b, "</td>");
        for (size_t i = 0; i < c0->nmetrics; i++) {
            const ao_metric_cmp *m = NULL;
            for (size_t j = 0; j < p->cmps[c].nmetrics; j++)
                if (p->cmps[c].metrics[j].metric == c0->metrics[i].metric)
                    m = &p->cmps[c].metrics[j];
            if (!m) {
                ao_hputs(b, "<td>&ndash;</td>");
                continue;
            }
            ao_hprintf(b, "<td class=\"%s\" title=\"%s\">", verdict_class(m->verdict),
                       ao_verdict_name(m->verdict));
            if (isfinite(m->ratio))
                ao_hprintf(b, "%.3f&times;", m->ratio);
            else
                ao_hputs(b, "&ndash;");
            ao_hputs(b, "</td>");
        }
        ao_hputs(b, "</tr>\n");
    }
    ao_hputs(b,
             "</tbody></table></div>\n<p class=\"note\">Each cell: the candidate's median over the "
             "reference's. Green: better, red: worse, grey: no significant difference.</p>\n");
}

/* Per matrix column, the metric across configs (configs_{metric}). */
static void configs_figures(ao_hbuf *b, const ao_html_page *p)
{
    const ao_comparison *c0 = &p->cmps[0];
    ao_hprintf(b,
               "<details open id=\"configs\"><summary><b>Each metric across configs</b> (%zu "
               "charts, one per matrix column)</summary>\n",
               c0->nmetrics);
    for (size_t i = 0; i < c0->nmetrics; i++) {
        const char *m = ao_metric(c0->metrics[i].metric)->name;
        char *name = ao_asprintf("configs_%s", m);
        char *caption = ao_asprintf(
            "%s per config: the median of its per-step samples with the 95%% bootstrap CI of "
            "that median, coloured by the verdict against %s (the dark bar, its value dashed "
            "through every row); the ratio to it beside each bar, as in the matrix.",
            m, c0->reference);
        ao_html_figure(b, p, name, caption);
        free(caption);
        free(name);
    }
    ao_hputs(b, "</details>\n");
}

static void full_table(ao_hbuf *b, const ao_comparison *c, size_t idx)
{
    ao_hprintf(b, "<details><summary>All metrics: ");
    ao_hesc(b, c->candidate);
    ao_hprintf(b,
               "</summary><table id=\"comparison-table-%zu\"><thead><tr><th class=\"k\">metric"
               "</th><th>reference</th><th>candidate</th><th>ratio</th><th>difference</th>"
               "<th>95%% CI</th><th class=\"k\">unit</th><th class=\"k\">verdict</th></tr>"
               "</thead><tbody>\n",
               idx);
    for (size_t i = 0; i < c->nmetrics; i++) {
        const ao_metric_cmp *m = &c->metrics[i];
        ao_hprintf(b, "<tr><td class=\"k\">%s</td>", ao_metric(m->metric)->name);
        const double v[4] = {m->ref_median, m->cand_median, m->ratio, m->diff};
        ao_hcells(b, v, 4);
        ao_hputs(b, "<td>[");
        ao_hnum(b, m->ci.lo);
        ao_hputs(b, ", ");
        ao_hnum(b, m->ci.hi);
        ao_hprintf(b, "]</td><td class=\"k\">%s</td><td class=\"k %s\">%s</td></tr>\n",
                   ao_metric(m->metric)->unit, verdict_class(m->verdict),
                   ao_verdict_name(m->verdict));
    }
    ao_hputs(b, "</tbody></table></details>\n");
}

static void verdicts_section(ao_hbuf *b, const ao_html_page *p)
{
    if (p->ncmps == 0) return;
    ao_hputs(b, "<section id=\"verdicts\"><h2>Verdicts</h2>\n");
    if (p->ncmps > 1) {
        matrix(b, p);
        configs_figures(b, p);
    }
    for (size_t c = 0; c < p->ncmps; c++) verdict_list(b, &p->cmps[c]);
    for (size_t c = 0; c < p->ncmps; c++) full_table(b, &p->cmps[c], c);
    ao_hprintf(b,
               "<p class=\"note\">Medians of per-step samples (step_ms: the %s; other metrics: "
               "the mean over ranks). A verdict needs the %.0f%% bootstrap confidence interval "
               "of the difference of medians (%d resamples) to exclude 0 and the change to be "
               "at least %.0f%%.</p>\n",
               AO_STEP_MS_DEFINITION, 100 * AO_COMPARE_LEVEL, AO_COMPARE_RESAMPLES,
               100 * AO_COMPARE_MIN_REL);
    for (size_t c = 0; c < p->ncmps; c++) {
        char *name = ao_asprintf("comparison_%s", p->cmps[c].candidate);
        ao_html_figure(b, p, name,
                       "Change of the median per metric with its 95% bootstrap CI, coloured "
                       "by verdict.");
        free(name);
    }
    ao_hputs(b, "</section>\n");
}

/* ---- 3. timeline --------------------------------------------------------------- */

static void timeline_section(ao_hbuf *b, const ao_html_page *p)
{
    ao_hputs(b, "<section id=\"timeline\"><h2>The median step</h2>\n");
    for (size_t i = 0; i < p->nlabels; i++) {
        const ao_html_label *l = &p->labels[i];
        char *name = ao_asprintf("%s_streams", l->sum->label);
        char caption[400];
        if (l->timeline_step >= 0) {
            snprintf(caption, sizeof caption,
                     "%s, step %lld: the profiled step whose slowest rank's time is the median. "
                     "Lanes per stream per rank; ops labelled with unit and kind; shading marks "
                     "compute overlapping communication.",
                     l->sum->label, l->timeline_step);
        } else {
            ao_hputs(b, "<p class=\"flag\" id=\"degraded-");
            ao_hesc(b, l->sum->label);
            ao_hputs(b, "\">");
            ao_hesc(b, l->sum->label);
            ao_hputs(b, ": no counted step has per-op intervals, so the chart below shows busy "
                        "totals per stream instead of the step's lanes. For the full timeline, "
                        "run <code>aorta train</code> with <code>--override "
                        "profiling.enabled=true</code> (its windows fall on counted steps) and "
                        "at least training.summary_skip_steps + 4 steps.</p>\n");
            snprintf(caption, sizeof caption,
                     "%s: busy time per stream and rank (median step), no lanes.", l->sum->label);
        }
        ao_html_figure(b, p, name, caption);
        free(name);
    }
    ao_hputs(b, "</section>\n");
}

/* ---- the page ------------------------------------------------------------------ */

static void header(ao_hbuf *b, const ao_html_page *p)
{
    ao_hputs(b, "<h1>aorta report</h1>\n<ul class=\"note\" id=\"sources\">\n");
    for (size_t i = 0; i < p->nlabels; i++) {
        const ao_html_label *l = &p->labels[i];
        ao_hputs(b, "<li><b>");
        ao_hesc(b, l->sum->label);
        ao_hputs(b, "</b>: ");
        for (size_t r = 0; r < l->nruns; r++) {
            if (r) ao_hputs(b, ", ");
            ao_hputs(b, "<a href=\"file://");
            if (l->runs[r].dir[0] != '/') {
                char *cwd = realpath(".", NULL);
                if (cwd) ao_hesc(b, cwd);
                if (cwd) ao_hputs(b, "/");
                free(cwd);
            }
            ao_hesc(b, l->runs[r].dir);
            ao_hputs(b, "\">");
            ao_hesc(b, l->runs[r].run_id);
            ao_hputs(b, "</a>");
        }
        if (l->trace) {
            ao_hputs(b, "; trace <a href=\"");
            ao_hesc(b, l->trace);
            ao_hputs(b, "\"><code>");
            ao_hesc(b, l->trace);
            ao_hputs(b, "</code></a> (open in ui.perfetto.dev or HTA)");
        }
        ao_hprintf(b, "; %d rank(s), %zu counted step(s) per rank after %lld warm-up step(s)",
                   l->sum->nranks, l->sum->steps, l->sum->skip_steps);
        ao_hputs(b, "</li>\n");
    }
    ao_hputs(b, "</ul>\n");
}

int ao_html_write(const char *path, const ao_html_page *p)
{
    ao_hbuf b = {0};
    ao_hputs(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                 "<title>aorta report</title>\n<style>");
    ao_hputs(&b, css);
    ao_hputs(&b, "</style></head><body>\n");
    header(&b, p);
    glance_section(&b, p);
    findings_section(&b, p);
    verdicts_section(&b, p);
    timeline_section(&b, p);
    ao_html_tables(&b, p);
    ao_html_settings(&b, p);
    ao_html_glossary(&b);
    ao_hputs(&b, "</body></html>\n");
    int rc = ao_file_write_atomic(path, b.s, b.len) == 0 ? 0 : AO_EXIT_FAIL;
    free(b.s);
    return rc;
}
