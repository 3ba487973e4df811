#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "report/html.h"

/* A growing string. */
typedef struct buf {
    char *s;
    size_t len, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = ao_realloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void printf_(buf *b, const char *fmt, ...) AO_PRINTF(2, 3);
static void printf_(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) ao_fatal(AO_EXIT_FAIL, "html", "out of memory");
    put(b, s, (size_t)n);
    free(s);
}

/* Text content and attribute values. */
static void esc(buf *b, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<':
            puts_(b, "&lt;");
            break;
        case '>':
            puts_(b, "&gt;");
            break;
        case '&':
            puts_(b, "&amp;");
            break;
        case '"':
            puts_(b, "&quot;");
            break;
        default:
            put(b, s, 1);
        }
    }
}

static void num(buf *b, double v)
{
    if (isnan(v))
        puts_(b, "&ndash;");
    else if (fabs(v) >= 1e4)
        printf_(b, "%.0f", v);
    else if (fabs(v) >= 100)
        printf_(b, "%.1f", v);
    else
        printf_(b, "%.3f", v);
}

static const char *verdict_class(ao_verdict v)
{
    return v == AO_VERDICT_BETTER ? "better" : v == AO_VERDICT_WORSE ? "worse" : "same";
}

static const char css[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0 auto;"
    "max-width:1100px;padding:1em 1.5em;color:#1a1a1a;line-height:1.4}"
    "h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;margin:.6em 0;font-size:.92em}"
    "th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right}"
    "th{background:#f3f3f3}td.k,th.k{text-align:left}"
    ".better{color:#1d6b2c;font-weight:600}.worse{color:#b3261e;font-weight:600}"
    ".same{color:#666}.note{color:#666;font-size:.9em}"
    ".verdicts{border:1px solid #ccc;background:#fafafa;padding:.5em 1em;border-radius:4px}"
    "figure{margin:1.2em 0;page-break-inside:avoid;break-inside:avoid}"
    "figure svg{max-width:100%;height:auto;display:block}"
    "figcaption{color:#444;font-size:.9em}"
    "@media print{body{max-width:none;padding:0}h2{page-break-after:avoid}"
    "table{page-break-inside:avoid}}";

static void comparison_section(buf *b, const ao_comparison *c)
{
    printf_(b, "<section id=\"verdicts\"><h2>Verdicts: ");
    esc(b, c->candidate);
    puts_(b, " vs ");
    esc(b, c->reference);
    puts_(b, " (reference)</h2>\n<div class=\"verdicts\"><ul>\n");
    size_t same = 0, shown = 0;
    for (size_t i = 0; i < c->nmetrics; i++) {
        const ao_metric_cmp *m = &c->metrics[i];
        if (m->verdict == AO_VERDICT_SAME) same++;
        if (m->verdict == AO_VERDICT_SAME || m->verdict == AO_VERDICT_NA) continue;
        shown++;
        printf_(b, "<li><span class=\"%s\">%s</span>: %s ", verdict_class(m->verdict),
                ao_verdict_name(m->verdict), ao_metric(m->metric)->name);
        num(b, m->ref_median);
        puts_(b, " &rarr; ");
        num(b, m->cand_median);
        printf_(b, " %s (%+.1f%%)</li>\n", ao_metric(m->metric)->unit,
                m->ref_median != 0 ? 100 * m->diff / fabs(m->ref_median) : NAN);
    }
    if (shown == 0) puts_(b, "<li>No metric differs significantly.</li>\n");
    printf_(b,
            "</ul><p class=\"note\">%zu metric(s) show no significant difference: the %.0f%% "
            "bootstrap confidence interval of the difference of medians (%d resamples, per-step "
            "samples) contains 0, or the change is below %.0f%%.</p></div>\n",
            same, 100 * AO_COMPARE_LEVEL, AO_COMPARE_RESAMPLES, 100 * AO_COMPARE_MIN_REL);
    puts_(b, "<table id=\"comparison-table\"><thead><tr><th class=\"k\">metric</th>"
             "<th>reference</th><th>candidate</th><th>ratio</th><th>difference</th>"
             "<th>95% CI</th><th class=\"k\">unit</th><th class=\"k\">verdict</th></tr></thead>"
             "<tbody>\n");
    for (size_t i = 0; i < c->nmetrics; i++) {
        const ao_metric_cmp *m = &c->metrics[i];
        printf_(b, "<tr><td class=\"k\">%s</td><td>", ao_metric(m->metric)->name);
        num(b, m->ref_median);
        puts_(b, "</td><td>");
        num(b, m->cand_median);
        puts_(b, "</td><td>");
        num(b, m->ratio);
        puts_(b, "</td><td>");
        num(b, m->diff);
        puts_(b, "</td><td>[");
        num(b, m->ci.lo);
        puts_(b, ", ");
        num(b, m->ci.hi);
        printf_(b, "]</td><td class=\"k\">%s</td><td class=\"k %s\">%s</td></tr>\n",
                ao_metric(m->metric)->unit, verdict_class(m->verdict), ao_verdict_name(m->verdict));
    }
    puts_(b, "</tbody></table>\n<h3>Setting differences</h3>\n");
    if (c->ndiffs == 0) {
        puts_(b, "<p id=\"settings-table\">The two runs' configuration and environment "
                 "(device and communication variables) are the same.</p>\n");
    } else {
        puts_(b, "<table id=\"settings-table\"><thead><tr><th class=\"k\">setting</th>"
                 "<th class=\"k\">reference</th><th class=\"k\">candidate</th></tr></thead>"
                 "<tbody>\n");
        for (size_t i = 0; i < c->ndiffs; i++) {
            puts_(b, "<tr><td class=\"k\">");
            esc(b, c->diffs[i].key);
            puts_(b, "</td><td class=\"k\">");
            esc(b, c->diffs[i].reference ? c->diffs[i].reference : "(not set)");
            puts_(b, "</td><td class=\"k\">");
            esc(b, c->diffs[i].candidate ? c->diffs[i].candidate : "(not set)");
            puts_(b, "</td></tr>\n");
        }
        puts_(b, "</tbody></table>\n");
    }
    puts_(b, "</section>\n");
}

static void label_section(buf *b, const ao_summary *s, size_t idx)
{
    puts_(b, "<section class=\"label\"><h2>");
    esc(b, s->label);
    puts_(b, "</h2>\n<p>");
    printf_(b, "%zu run(s) (", s->nruns);
    for (size_t r = 0; r < s->nruns; r++) {
        if (r) puts_(b, ", ");
        esc(b, s->run_ids[r]);
    }
    printf_(b,
            "), %d rank(s), %zu step(s) per rank counted; the first %lld train step(s) of "
            "each rank skipped as warm-up (%s).",
            s->nranks, s->steps, s->skip_steps, s->skip_origin ? s->skip_origin : "");
    if (!isnan(s->skew.ratio))
        printf_(b, " Rank skew %.3f: rank %d is the slowest, rank %d the fastest.", s->skew.ratio,
                s->skew.slowest_rank, s->skew.fastest_rank);
    if (s->truncated)
        printf_(b, " %zu incomplete last line(s) skipped (a stopped run).", s->truncated);
    puts_(b, "</p>\n");
    printf_(b,
            "<table id=\"summary-%zu\"><thead><tr><th class=\"k\">metric</th><th>median</th>"
            "<th>mean</th><th>p90</th><th>p99</th><th>min</th><th>max</th>"
            "<th class=\"k\">unit</th></tr></thead><tbody>\n",
            idx);
    for (size_t m = 0; m < ao_metric_count(); m++) {
        const ao_stats_summary *st = &s->metrics[m].all;
        if (st->n == 0) continue;
        printf_(b, "<tr><td class=\"k\">%s</td>", ao_metric(m)->name);
        const double v[6] = {st->p50, st->mean, st->p90, st->p99, st->min, st->max};
        for (int i = 0; i < 6; i++) {
            puts_(b, "<td>");
            num(b, v[i]);
            puts_(b, "</td>");
        }
        printf_(b, "<td class=\"k\">%s</td></tr>\n", ao_metric(m)->unit);
    }
    puts_(b, "</tbody></table>\n");
    if (s->have_decomposition && s->decomposition_flag) {
        printf_(b,
                "<p class=\"flag\" id=\"decomposition-%zu\">Decomposition not shown "
                "(compute alone ",
                idx);
        num(b, s->decomposition.compute_isolated_ms);
        puts_(b, " ms, comm alone ");
        num(b, s->decomposition.comm_isolated_ms);
        puts_(b, " ms): ");
        esc(b, s->decomposition_flag);
        puts_(b, ".</p>\n");
    } else if (s->have_decomposition) {
        const ao_decomposition *d = &s->decomposition;
        printf_(b,
                "<table id=\"decomposition-%zu\"><thead><tr><th class=\"k\">decomposition"
                "</th><th>value</th></tr></thead><tbody>\n",
                idx);
        const char *names[] = {"compute alone (ms)", "comm alone (ms)", "ideal (ms)",
                               "serial (ms)",        "achieved (0..1)", "contention (ms)",
                               "comm slowdown (x)"};
        const double v[] = {d->compute_isolated_ms, d->comm_isolated_ms, d->ideal_ms,
                            d->serial_ms,           d->achieved,         d->contention_ms,
                            d->comm_slowdown};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
            printf_(b, "<tr><td class=\"k\">%s</td><td>", names[i]);
            num(b, v[i]);
            puts_(b, "</td></tr>\n");
        }
        puts_(b, "</tbody></table>\n");
    } else {
        puts_(b, "<p class=\"note\">No decomposition: the run had no compute-only and comm-only "
                 "baseline steps (training.baseline_steps).</p>\n");
    }
    if (s->nknobs) {
        printf_(b,
                "<table id=\"knobs-%zu\"><thead><tr><th class=\"k\">setting</th>"
                "<th class=\"k\">value</th></tr></thead><tbody>\n",
                idx);
        for (size_t i = 0; i < s->nknobs; i++) {
            puts_(b, "<tr><td class=\"k\">");
            esc(b, s->knobs[i].key);
            puts_(b, "</td><td class=\"k\">");
            esc(b, s->knobs[i].value);
            puts_(b, "</td></tr>\n");
        }
        puts_(b, "</tbody></table>\n");
    }
    if (s->ntelemetry) {
        printf_(b,
                "<table id=\"telemetry-%zu\"><thead><tr><th class=\"k\">telemetry</th>"
                "<th>median</th><th>mean</th><th>max</th></tr></thead><tbody>\n",
                idx);
        for (size_t i = 0; i < s->ntelemetry; i++) {
            puts_(b, "<tr><td class=\"k\">");
            esc(b, s->telemetry[i].key);
            puts_(b, "</td><td>");
            num(b, s->telemetry[i].s.p50);
            puts_(b, "</td><td>");
            num(b, s->telemetry[i].s.mean);
            puts_(b, "</td><td>");
            num(b, s->telemetry[i].s.max);
            puts_(b, "</td></tr>\n");
        }
        puts_(b, "</tbody></table>\n");
    }
    puts_(b, "</section>\n");
}

/* The SVG file's <svg> element with its ids prefixed by `prefix`: cairo
 * names glyphs and clips "glyph0-1", "clip1" in every file, and inlined
 * together they would resolve to the first chart's definitions. */
static void inline_svg(buf *b, const char *path, const char *prefix)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        puts_(b, "<p class=\"note\">chart not available (this aorta was built without cairo, "
                 "or it could not be drawn)</p>\n");
        return;
    }
    buf in = {0};
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) put(&in, chunk, got);
    fclose(f);
    const char *p = in.s ? strstr(in.s, "<svg") : NULL;
    if (!p) {
        puts_(b, "<p class=\"note\">chart file is not SVG</p>\n");
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
            puts_(b, p);
            break;
        }
        put(b, p, best + strlen(refs[which]));
        puts_(b, prefix);
        p += best + strlen(refs[which]);
    }
    puts_(b, "\n");
    free(in.s);
}

int ao_html_write(const char *path, const char *chart_dir, const ao_summary *sums, size_t n,
                  const ao_comparison *cmp, const ao_html_chart *charts, size_t ncharts)
{
    buf b = {0};
    puts_(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
              "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
              "<title>aorta report</title>\n<style>");
    puts_(&b, css);
    puts_(&b, "</style></head><body>\n<h1>aorta report</h1>\n<p class=\"note\">Labels: ");
    for (size_t i = 0; i < n; i++) {
        if (i) puts_(&b, ", ");
        esc(&b, sums[i].label);
    }
    puts_(&b, ". Times are per training step; statistics skip the warm-up steps.</p>\n");
    if (cmp) comparison_section(&b, cmp);
    for (size_t i = 0; i < n; i++) label_section(&b, &sums[i], i);
    puts_(&b, "<section id=\"charts\"><h2>Charts</h2>\n");
    for (size_t i = 0; i < ncharts; i++) {
        printf_(&b, "<figure id=\"chart-");
        esc(&b, charts[i].name);
        puts_(&b, "\">\n");
        char *svg = ao_asprintf("%s/%s.svg", chart_dir, charts[i].name);
        char prefix[32];
        snprintf(prefix, sizeof prefix, "c%zu-", i);
        inline_svg(&b, svg, prefix);
        free(svg);
        puts_(&b, "<figcaption>");
        esc(&b, charts[i].caption);
        puts_(&b, " (<code>");
        esc(&b, charts[i].name);
        puts_(&b, ".png</code>, <code>");
        esc(&b, charts[i].name);
        puts_(&b, ".svg</code>)</figcaption></figure>\n");
    }
    puts_(&b, "</section>\n</body></html>\n");
    int rc = ao_file_write_atomic(path, b.s, b.len) == 0 ? 0 : AO_EXIT_FAIL;
    free(b.s);
    return rc;
}
