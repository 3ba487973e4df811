/* report/report (with charts and html): a two-label report with comparison
 * writes summary.json, valid PNG (signature, cairo reads it back) and SVG
 * files for every chart, and an index.html that holds every table and chart
 * inline; the degraded stream view without ops; every bad input gives exit 2
 * and one line naming the flag or file. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_files.h"

#include "synth_run.h"

#include "core/error.h"
#include "core/json.h"
#include "report/glossary.h"
#include "report/report.h"
#include "runs/rundata.h"
#if AORTA_HAVE_CAIRO
#include <cairo.h>

#include "report/charts.h"
#endif

static char *tmp;

static int setup(void **state)
{
    tmp = make_temp_dir();
    synth_opts o = synth_defaults();
    o.ranks = 2;
    o.steps = 40;
    o.profile_every = 7;
    o.baseline_steps = 3;
    o.telemetry = 1;
    char *a = ao_asprintf("%s/a", tmp), *b = ao_asprintf("%s/b", tmp),
         *c = ao_asprintf("%s/c", tmp);
    assert_int_equal(synth_run_write(a, &o), 0);
    o.comm_ms = 8;
    o.hidden = 0.4;
    o.seed = 5;
    o.profile_every = 0; /* no ops: the degraded stream view */
    o.telemetry = 0;
    assert_int_equal(synth_run_write(b, &o), 0);
    assert_int_equal(mkdir(c, 0755), 0); /* empty */
    free(a);
    free(b);
    free(c);
    return 0;
}

static int teardown(void **state)
{
    remove_temp_dir(tmp);
    return 0;
}

static int run_report(const char *const *dirs, const char *const *labels, size_t n, const char *out,
                      const char *ref, const char *cand, char **err)
{
    char *d[8], *l[8];
    for (size_t i = 0; i < n; i++) {
        d[i] = ao_asprintf("%s/%s", tmp, dirs[i]);
        l[i] = (char *)labels[i];
    }
    char *o = ao_asprintf("%s/%s", tmp, out);
    const char *cands[1] = {cand};
    ao_report_opts opts = {.log_dirs = (const char *const *)d,
                           .labels = (const char *const *)l,
                           .nlabels = n,
                           .output = o,
                           .reference = ref,
                           .candidates = cands,
                           .ncandidates = cand ? 1 : 0,
                           .skip_steps = -1,
                           .charts = 1};
    stderr_capture c;
    capture_begin(&c);
    int rc = ao_report_generate(&opts);
    char *e = capture_end(&c);
    if (err)
        *err = e;
    else
        free(e);
    for (size_t i = 0; i < n; i++) free(d[i]);
    free(o);
    return rc;
}

static void check_png_svg(const char *out, const char *name)
{
#if AORTA_HAVE_CAIRO
    char *png = ao_asprintf("%s/%s/%s.png", tmp, out, name);
    size_t len = 0;
    char *bytes = slurp(png, &len);
    assert_non_null(bytes);
    assert_true(len > 8 && memcmp(bytes, "\x89PNG\r\n\x1a\n", 8) == 0);
    cairo_surface_t *s = cairo_image_surface_create_from_png(png);
    assert_int_equal(cairo_surface_status(s), CAIRO_STATUS_SUCCESS);
    assert_true(cairo_image_surface_get_width(s) >= 800);
    cairo_surface_destroy(s);
    free(bytes);
    free(png);
    char *svg = ao_asprintf("%s/%s/%s.svg", tmp, out, name);
    char *text = slurp(svg, NULL);
    assert_non_null(text);
    assert_true(strncmp(text, "<?xml", 5) == 0);
    assert_non_null(strstr(text, "<svg"));
    assert_non_null(strstr(text, "</svg>"));
    free(text);
    free(svg);
#else
    (void)out;
    (void)name;
#endif
}

#if AORTA_HAVE_CAIRO
/* Count of non-overlapping occurrences of needle. */
static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}
#endif

static void test_full_report(void **state)
{
    const char *dirs[] = {"a", "b"}, *labels[] = {"base", "slow"};
    char *err;
    assert_int_equal(run_report(dirs, labels, 2, "out", "base", "slow", &err), 0);
    free(err);
    const char *charts[] = {"base_timeline", "base_streams",      "slow_timeline",
                            "slow_streams",  "overlap_breakdown", "comparison_slow"};
    for (size_t i = 0; i < 6; i++) check_png_svg("out", charts[i]);

    char *path = ao_asprintf("%s/out/summary.json", tmp);
    char *js = slurp(path, NULL);
    char e[128];
    yajl_val v = yajl_tree_parse(js, e, sizeof e);
    assert_non_null(v);
    assert_int_equal(YAJL_GET_ARRAY(ao_json_member(v, "labels"))->len, 2);
    yajl_val cmp = ao_json_member(v, "comparison");
    yajl_val step = ao_json_member(ao_json_member(cmp, "metrics"), "step_ms");
    assert_string_equal(YAJL_GET_STRING(ao_json_member(step, "verdict")), "worse");
    yajl_tree_free(v);
    free(js);
    free(path);

    /* index.html in reading order: the overlap breakdown at a glance,
     * findings, verdicts, timeline, tables, settings, glossary; every table
     * and chart inline */
    path = ao_asprintf("%s/out/index.html", tmp);
    char *html = slurp(path, NULL);
    assert_non_null(html);
    assert_true(strncmp(html, "<!DOCTYPE html>", 15) == 0);
    assert_non_null(strstr(html, "</html>"));
    const char *verdicts = strstr(html, "id=\"verdicts\""),
               *first = strstr(html, "id=\"summary-0\"");
    assert_non_null(verdicts);
    assert_non_null(first);
    assert_true(verdicts < first);
    const char *order[] = {"id=\"glance\"",   "id=\"chart-overlap_breakdown\"",
                           "id=\"findings\"", "id=\"verdicts\"",
                           "id=\"timeline\"", "id=\"tables\"",
                           "id=\"settings\"", "id=\"glossary\""};
    for (size_t i = 1; i < sizeof order / sizeof order[0]; i++) {
        assert_non_null(strstr(html, order[i]));
        assert_true(strstr(html, order[i - 1]) < strstr(html, order[i]));
    }
    const char *ids[] = {"id=\"comparison-table-0\"", "id=\"settings-table\"", "id=\"summary-1\"",
                         "id=\"decomposition-0\"",    "id=\"kinds-0\"",        "id=\"g-step_ms\"",
                         "per-step max over ranks",   "id=\"telemetry-0\"",    "@media print"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) assert_contains(html, ids[i]);
    for (size_t i = 0; i < 6; i++) {
        char *fig = ao_asprintf("id=\"chart-%s\"", charts[i]);
        assert_contains(html, fig);
        free(fig);
    }
#if AORTA_HAVE_CAIRO
    assert_int_equal(count(html, "<svg"), 6);
    assert_int_equal(count(html, "</svg>"), 6);
    assert_null(strstr(html, "<?xml"));             /* the files' XML declarations are dropped */
    assert_contains(html, "id=\"comparison_slow-"); /* ids prefixed per chart */
#endif
    assert_null(strstr(html, "<script"));
    /* nothing fetched: no links, sources or hrefs outside the page (xmlns is a name) */
    assert_null(strstr(html, "<link"));
    assert_null(strstr(html, "src=\""));
    assert_null(strstr(html, "href=\"http"));
    assert_contains(html, "worse");
    assert_contains(html, "other setting(s) are the same for every label");
    /* the run without ops: the timeline says it is degraded and how to get lanes */
    assert_contains(html, "id=\"degraded-slow\"");
    assert_contains(html, "profiling.enabled=true");
    assert_null(strstr(html, "id=\"degraded-base\""));
    free(html);
    free(path);
#if AORTA_HAVE_CAIRO
    /* the run without ops gets the degraded stream view, and says so */
    path = ao_asprintf("%s/out/slow_streams.svg", tmp);
    char *svg = slurp(path, NULL);
    free(path);
    path = ao_asprintf("%s/out/base_streams.svg", tmp);
    char *svg_ops = slurp(path, NULL);
    assert_true(strlen(svg) < strlen(svg_ops));
    free(svg);
    free(svg_ops);
    free(path);
#endif
}

#if AORTA_HAVE_CAIRO
/* Issue 27: one 66 ms step among ~8.6 ms ones flattened the time-per-step
 * chart; the axis now stops below it and keeps the others readable. */
static void test_timeline_cap(void **state)
{
    (void)state;
    double y[41];
    for (int i = 0; i < 40; i++) y[i] = 8.4 + 0.01 * i;
    y[40] = 66;
    double cap = ao_timeline_cap(y, 41);
    assert_true(cap > 8.8 && cap < 66);
    assert_true(cap < 2 * 8.8); /* the common steps fill at least half the axis */
    assert_true(isinf(ao_timeline_cap(y, 0)));
}

/* Issue 49: one metric's -10,000 %..90,000 % CI put the other ten on zero;
 * the comparison axis now stops at a few times the median row's reach. */
static void test_comparison_cap(void **state)
{
    (void)state;
    double lo[11], hi[11];
    for (int i = 0; i < 10; i++) lo[i] = -2 - i, hi[i] = 3 + i;
    lo[10] = -10000, hi[10] = 90000;
    double cap = ao_comparison_cap(lo, hi, 11);
    assert_true(cap >= 12 && cap < 100); /* every ordinary row inside, the outlier cut */
    double small_lo[2] = {-0.1, -0.2}, small_hi[2] = {0.1, 0.3};
    assert_true(ao_comparison_cap(small_lo, small_hi, 2) == 10); /* 10 % at least */
    assert_true(isinf(ao_comparison_cap(lo, hi, 0)));
}

/* The timeline chart of a hand-built run (synth_run: h2d, compute, all-gather
 * and reduce-scatter ops, no all-reduce): the median profiled step, one lane
 * per stream that has an op (4, allreduce absent), and the shading equal to
 * each rank's |C ∩ M| as the record states it. */
static void test_streams_layout(void **state)
{
    (void)state;
    char *dir = ao_asprintf("%s/a", tmp);
    ao_run_data run;
    assert_int_equal(ao_run_load(dir, -1, &run), 0);
    long long step = ao_run_median_profiled_step(&run);
    assert_true(step >= 0);
    const ao_iter_record *recs[2];
    for (int k = 0; k < 2; k++) {
        recs[k] = ao_run_profiled_step(&run.ranks[k], step);
        assert_non_null(recs[k]);
    }
    int used[AO_NSTREAMS];
    assert_int_equal(ao_streams_lanes(recs, 2, used), 4);
    assert_true(used[AO_STREAM_COMPUTE] && used[AO_STREAM_H2D] && used[AO_STREAM_ALLGATHER] &&
                used[AO_STREAM_REDUCESCATTER]);
    assert_false(used[AO_STREAM_ALLREDUCE]);
    for (int k = 0; k < 2; k++) {
        ao_ival *x;
        size_t nx = ao_streams_shaded(recs[k], &x);
        double us = 0;
        for (size_t i = 0; i < nx; i++) us += x[i].end - x[i].start;
        free(x);
        assert_true(nx > 0);
        assert_true(fabs(us / 1000 - recs[k]->m.overlap_ms) < 1e-6);
    }
    ao_run_free(&run);
    free(dir);
}
#endif

/* Every metric has a glossary entry in plain words and a definition. */
static void test_glossary(void **state)
{
    (void)state;
    for (size_t m = 0; m < ao_metric_count(); m++) {
        ao_glossary_entry g = ao_glossary(m);
        if (!g.plain[0] || !g.definition[0])
            fail_msg("no glossary entry for %s", ao_metric(m)->name);
    }
    assert_string_equal(ao_glossary((size_t)ao_metric_find("exposed_allgather_ms")).definition,
                        "|Mₖ \\ C|");
    assert_string_equal(ao_glossary((size_t)ao_metric_find("allgather_ms")).definition, "|Mₖ|");
    /* the kernel-level metrics have their own entries, not the per-kind family's */
    assert_string_equal(ao_glossary((size_t)ao_metric_find("kernel_comm_ms")).definition, "|M|");
    assert_non_null(
        strstr(ao_glossary((size_t)ao_metric_find("contention_ms")).definition, "alone instances"));
    /* every decomposition term says what to do about it */
    size_t nt;
    const ao_glossary_term *t = ao_glossary_terms(&nt);
    assert_true(nt >= 8);
    for (size_t i = 0; i < nt; i++)
        assert_true(t[i].name[0] && t[i].plain[0] && t[i].definition[0] && t[i].act[0]);
}

static void expect_usage(const char *const *dirs, const char *const *labels, size_t n,
                         const char *ref, const char *cand, const char *want)
{
    char *err;
    assert_int_equal(run_report(dirs, labels, n, "bad_out", ref, cand, &err), AO_EXIT_USAGE);
    assert_contains(err, want);
    free(err);
}

static void test_bad_input(void **state)
{
    const char *ab[] = {"a", "b"}, *lab[] = {"base", "slow"};
    expect_usage(ab, lab, 2, "base", "nope", "--candidate: 'nope' is not one of the labels");
    expect_usage(ab, lab, 2, "nope", "slow", "--reference: 'nope' is not one of the labels");
    expect_usage(ab, lab, 2, NULL, "slow", "a comparison needs --reference");
    expect_usage(ab, lab, 2, "base", "base", "also the reference");
    const char *same[] = {"x", "x"};
    expect_usage(ab, same, 2, NULL, NULL, "'x' is given twice");
    const char *badl[] = {"a/b"};
    expect_usage(ab, badl, 1, NULL, NULL, "--label: \"a/b\" contains '/'");
    const char *c[] = {"c"}, *lc[] = {"c"};
    expect_usage(c, lc, 1, NULL, NULL, "no run.json, no rank_NN_metrics.jsonl");
    const char *m[] = {"missing"};
    expect_usage(m, lc, 1, NULL, NULL, "no such directory");
    expect_usage(ab, lab, 0, NULL, NULL, "no --log-dir");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_report),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_glossary),
#if AORTA_HAVE_CAIRO
        cmocka_unit_test(test_timeline_cap),
        cmocka_unit_test(test_comparison_cap),
        cmocka_unit_test(test_streams_layout),
#endif
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
