/* report/compare: verdicts on a pair with a known large difference (better
 * and worse by each metric's direction), no claimed difference between two
 * samples of one distribution, the < 1 % rule, per-step samples, and the
 * setting differences taken from run.json. */
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
#include "runs/compare.h"

static char *tmp;

static int setup(void **state)
{
    tmp = make_temp_dir();
    return 0;
}

static int teardown(void **state)
{
    remove_temp_dir(tmp);
    return 0;
}

static void load(const char *name, const synth_opts *o, ao_run_data *run)
{
    char *dir = ao_asprintf("%s/%s", tmp, name);
    assert_int_equal(synth_run_write(dir, o), 0);
    assert_int_equal(ao_run_load(dir, -1, run), 0);
    free(dir);
}

static const ao_metric_cmp *find(const ao_comparison *c, const char *name)
{
    for (size_t i = 0; i < c->nmetrics; i++)
        if (strcmp(ao_metric(c->metrics[i].metric)->name, name) == 0) return &c->metrics[i];
    fail_msg("metric %s not compared", name);
    return NULL;
}

static const ao_setting_diff *find_diff(const ao_comparison *c, const char *key)
{
    for (size_t i = 0; i < c->ndiffs; i++)
        if (strcmp(c->diffs[i].key, key) == 0) return &c->diffs[i];
    return NULL;
}

static void test_verdict_rule(void **state)
{
    ao_stats_ci pos = {0.5, 0.2, 0.8}, straddle = {0.1, -0.1, 0.3}, none = {NAN, NAN, NAN};
    assert_int_equal(ao_compare_verdict(AO_BETTER_LOWER, 10, 10.5, &pos), AO_VERDICT_WORSE);
    assert_int_equal(ao_compare_verdict(AO_BETTER_HIGHER, 10, 10.5, &pos), AO_VERDICT_BETTER);
    assert_int_equal(ao_compare_verdict(AO_BETTER_NEITHER, 10, 10.5, &pos), AO_VERDICT_DIFFERENT);
    assert_int_equal(ao_compare_verdict(AO_BETTER_LOWER, 10, 10.1, &straddle), AO_VERDICT_SAME);
    /* CI excludes 0 but the change is below 1 %: not significant */
    ao_stats_ci tiny = {0.05, 0.02, 0.08};
    assert_int_equal(ao_compare_verdict(AO_BETTER_LOWER, 10, 10.05, &tiny), AO_VERDICT_SAME);
    ao_stats_ci neg = {-2, -3, -1};
    assert_int_equal(ao_compare_verdict(AO_BETTER_LOWER, 10, 8, &neg), AO_VERDICT_BETTER);
    assert_int_equal(ao_compare_verdict(AO_BETTER_LOWER, NAN, 8, &none), AO_VERDICT_NA);
    assert_string_equal(ao_verdict_name(AO_VERDICT_SAME), "no significant difference");
    assert_string_equal(ao_verdict_name(AO_VERDICT_WORSE), "worse");
}

static void test_large_difference(void **state)
{
    synth_opts o = synth_defaults();
    o.ranks = 2;
    o.steps = 120;
    o.nccl_algo = "Ring";
    ao_run_data ref, cand;
    load("ref", &o, &ref);
    /* twice the communication, half of it hidden instead of 3/4 */
    o.comm_ms = 8;
    o.hidden = 0.5;
    o.seed = 2;
    o.strategy = "shard_grad_op";
    o.nccl_algo = "Tree";
    load("cand", &o, &cand);
    ao_comparison c;
    ao_compare("ref", &ref, 1, "cand", &cand, 1, &c);
    assert_int_equal(find(&c, "step_ms")->verdict, AO_VERDICT_WORSE);
    assert_int_equal(find(&c, "tokens_per_s")->verdict, AO_VERDICT_WORSE);
    assert_int_equal(find(&c, "exposed_comm_ms")->verdict, AO_VERDICT_WORSE);
    assert_int_equal(find(&c, "overlap_ratio")->verdict, AO_VERDICT_WORSE);
    assert_int_equal(find(&c, "overlap_ms")->verdict, AO_VERDICT_BETTER); /* 4 ms vs 3 ms */
    assert_int_equal(find(&c, "compute_ms")->verdict, AO_VERDICT_SAME);
    const ao_metric_cmp *st = find(&c, "step_ms");
    assert_int_equal(st->nref, 115);
    assert_true(st->ci.lo > 0 && st->ci.lo <= st->diff && st->diff <= st->ci.hi);
    assert_true(fabs(st->ratio - st->cand_median / st->ref_median) < 1e-12);
    /* the reverse pair flips the verdicts */
    ao_comparison r;
    ao_compare("cand", &cand, 1, "ref", &ref, 1, &r);
    assert_int_equal(find(&r, "step_ms")->verdict, AO_VERDICT_BETTER);
    assert_int_equal(find(&r, "overlap_ratio")->verdict, AO_VERDICT_BETTER);

    const ao_setting_diff *d = find_diff(&c, "fsdp.sharding_strategy");
    assert_non_null(d);
    assert_string_equal(d->reference, "full_shard");
    assert_string_equal(d->candidate, "shard_grad_op");
    d = find_diff(&c, "env.NCCL_ALGO");
    assert_non_null(d);
    assert_string_equal(d->candidate, "Tree");
    assert_null(find_diff(&c, "fsdp.param_dtype"));
    assert_null(find_diff(&c, "env.NCCL_DEBUG"));

    /* JSON */
    yajl_gen g = ao_json_gen_new(0);
    assert_int_equal(ao_comparison_gen(g, &c), yajl_gen_status_ok);
    const unsigned char *buf;
    size_t len;
    yajl_gen_get_buf(g, &buf, &len);
    char err[128];
    yajl_val v = yajl_tree_parse((const char *)buf, err, sizeof err);
    assert_non_null(v);
    yajl_val sm = ao_json_member(ao_json_member(v, "metrics"), "step_ms");
    assert_string_equal(YAJL_GET_STRING(ao_json_member(sm, "verdict")), "worse");
    assert_true(YAJL_IS_NUMBER(ao_json_member(sm, "ci_low")));
    assert_int_equal(YAJL_GET_ARRAY(ao_json_member(v, "setting_differences"))->len, c.ndiffs);
    yajl_tree_free(v);
    yajl_gen_free(g);
    ao_comparison_free(&r);
    ao_comparison_free(&c);
    ao_run_free(&ref);
    ao_run_free(&cand);
}

static void test_same_distribution(void **state)
{
    synth_opts o = synth_defaults();
    o.ranks = 4;
    o.steps = 400;
    ao_run_data a, b;
    load("a", &o, &a);
    o.seed = 99;
    load("b", &o, &b);
    ao_comparison c;
    ao_compare("a", &a, 1, "b", &b, 1, &c);
    assert_true(c.nmetrics >= 10);
    for (size_t i = 0; i < c.nmetrics; i++) {
        const ao_metric_cmp *mc = &c.metrics[i];
        if (mc->verdict == AO_VERDICT_NA) continue;
        if (mc->verdict != AO_VERDICT_SAME)
            fail_msg("%s: %s (diff %g, CI [%g, %g])", ao_metric(mc->metric)->name,
                     ao_verdict_name(mc->verdict), mc->diff, mc->ci.lo, mc->ci.hi);
    }
    assert_int_equal(c.ndiffs, 0);
    ao_comparison_free(&c);
    ao_run_free(&a);
    ao_run_free(&b);
}

static void test_step_samples(void **state)
{
    synth_opts o = synth_defaults();
    o.ranks = 3;
    o.steps = 20;
    ao_run_data a;
    load("steps", &o, &a);
    size_t n;
    int m = ao_metric_find("compute_ms");
    double *s = ao_step_samples(&a, 1, (size_t)m, &n);
    assert_int_equal(n, 15);
    double want = 0;
    for (int k = 0; k < 3; k++) want += a.ranks[k].rows[2 * ao_metric_count() + (size_t)m];
    assert_true(fabs(s[2] - want / 3) < 1e-9);
    free(s);
    /* two runs of one label are concatenated */
    s = ao_step_samples((ao_run_data[]){a, a}, 2, (size_t)m, &n);
    assert_int_equal(n, 30);
    free(s);
    ao_run_free(&a);
}

/* A metric across configs: the reference then each candidate, the
 * comparisons' medians, ratios and verdicts, each median inside its own CI;
 * a candidate without the metric has no value. */
static void test_across_configs(void **state)
{
    synth_opts o = synth_defaults();
    o.steps = 30;
    ao_run_data r[3];
    load("x0", &o, &r[0]);
    o.comm_ms = 8;
    o.seed = 2;
    load("x1", &o, &r[1]);
    o.comm_ms = 2;
    o.seed = 3;
    load("x2", &o, &r[2]);
    ao_comparison c[2];
    ao_compare("x0", &r[0], 1, "x1", &r[1], 1, &c[0]);
    ao_compare("x0", &r[0], 1, "x2", &r[2], 1, &c[1]);
    const ao_run_data *runs[3] = {&r[0], &r[1], &r[2]};
    const size_t nruns[3] = {1, 1, 1};
    ao_config_value v[3];
    size_t m = (size_t)ao_metric_find("step_ms");
    assert_int_equal(ao_compare_across(c, 2, m, runs, nruns, v), 3);
    assert_string_equal(v[0].label, "x0");
    assert_true(v[0].reference && !v[1].reference && !v[2].reference);
    assert_string_equal(v[2].label, "x2");
    for (int i = 0; i < 2; i++) {
        const ao_metric_cmp *mc = find(&c[i], "step_ms");
        assert_true(v[0].median == mc->ref_median);
        assert_true(v[1 + i].median == mc->cand_median && v[1 + i].ratio == mc->ratio);
        assert_int_equal(v[1 + i].verdict, mc->verdict);
    }
    assert_int_equal(v[1].verdict, AO_VERDICT_WORSE);
    assert_int_equal(v[2].verdict, AO_VERDICT_BETTER);
    for (int i = 0; i < 3; i++) {
        assert_true(v[i].ci.lo <= v[i].median && v[i].median <= v[i].ci.hi);
        assert_true(v[i].ci.hi > v[i].ci.lo); /* jittered samples: a real interval */
    }
    /* a metric no comparison has: no values, no intervals */
    c[1].nmetrics = 0;
    ao_compare_across(c, 2, m, runs, nruns, v);
    assert_true(isnan(v[2].median) && isnan(v[2].ci.lo) && v[2].verdict == AO_VERDICT_NA);
    assert_false(isnan(v[1].median));
    c[1].nmetrics = 1; /* freed as usual */
    for (int i = 0; i < 2; i++) ao_comparison_free(&c[i]);
    for (int i = 0; i < 3; i++) ao_run_free(&r[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verdict_rule),      cmocka_unit_test(test_large_difference),
        cmocka_unit_test(test_same_distribution), cmocka_unit_test(test_step_samples),
        cmocka_unit_test(test_across_configs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
