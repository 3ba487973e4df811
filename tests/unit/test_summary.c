/* report/rundata and report/summary: loading run directories (warm-up skip
 * and where it comes from, baselines, telemetry, profiled ops, truncated
 * lines), the statistics and rank skew, summary.json, the table, and every
 * bad input with its one-line error. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_files.h"

#include "synth_run.h"

#include "core/error.h"
#include "core/json.h"
#include "runs/rundata.h"
#include "runs/summary.h"

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

static char *write_run(const char *name, const synth_opts *o)
{
    char *dir = ao_asprintf("%s/%s", tmp, name);
    assert_int_equal(synth_run_write(dir, o), 0);
    return dir;
}

static const ao_stats_summary *metric(const ao_summary *s, const char *name)
{
    int m = ao_metric_find(name);
    assert_true(m >= 0);
    return &s->metrics[m].all;
}

static const char *knob(const ao_summary *s, const char *key)
{
    for (size_t i = 0; i < s->nknobs; i++)
        if (strcmp(s->knobs[i].key, key) == 0) return s->knobs[i].value;
    return NULL;
}

static void test_metric_table(void **state)
{
    assert_true(ao_metric_count() > 20);
    for (size_t i = 0; i < ao_metric_count(); i++)
        assert_int_equal(ao_metric_find(ao_metric(i)->name), (int)i);
    assert_int_equal(ao_metric_find("no_such_metric"), -1);
    assert_int_equal(ao_metric(ao_metric_find("step_ms"))->better, AO_BETTER_LOWER);
    assert_int_equal(ao_metric(ao_metric_find("tokens_per_s"))->better, AO_BETTER_HIGHER);
    assert_int_equal(ao_metric(ao_metric_find("overlap_ratio"))->better, AO_BETTER_HIGHER);
    assert_int_equal(ao_metric(ao_metric_find("exposed_comm_ms"))->better, AO_BETTER_LOWER);
    assert_null(ao_metric(ao_metric_count()));
}

static void test_summary_numbers(void **state)
{
    synth_opts o = synth_defaults();
    o.ranks = 4;
    o.steps = 60;
    o.slow_rank = 2;
    o.slow_factor = 1.3;
    o.nccl_algo = "Ring";
    o.jitter = 0.01;
    char *dir = write_run("run", &o);
    ao_run_data run;
    assert_int_equal(ao_run_load(dir, -1, &run), 0);
    assert_int_equal(run.nranks, 4);
    assert_int_equal(run.world_size, 4);
    assert_int_equal(run.skip_steps, 5);
    assert_string_equal(run.skip_origin, "run.json");
    assert_string_equal(run.run_id, "run");
    for (int k = 0; k < 4; k++) {
        assert_int_equal(run.ranks[k].n, 55);
        assert_int_equal(run.ranks[k].skipped, 5);
        assert_int_equal(run.ranks[k].steps[0], 5);
    }

    ao_summary s;
    assert_int_equal(ao_summary_build("base", &run, 1, &s), 0);
    assert_int_equal(s.steps, 55);
    assert_int_equal(s.records, 220);
    assert_int_equal(s.skipped, 20);
    /* compute is 10 ms (13 on rank 2), comm 4 ms, 75 % of it hidden */
    assert_true(fabs(metric(&s, "comm_ms")->p50 - 4) < 0.1);
    assert_true(fabs(metric(&s, "overlap_ms")->p50 - 3) < 0.1);
    assert_true(fabs(metric(&s, "exposed_comm_ms")->p50 - 1) < 0.1);
    assert_true(fabs(metric(&s, "overlap_ratio")->p50 - 0.75) < 0.02);
    assert_true(fabs(s.metrics[ao_metric_find("compute_ms")].rank_median[0] - 10) < 0.2);
    assert_true(fabs(s.metrics[ao_metric_find("compute_ms")].rank_median[2] - 13) < 0.3);
    assert_true(metric(&s, "tokens_per_s")->p50 > 0);
    assert_true(metric(&s, "busbw_allgather_gbps")->n == 220);
    assert_int_equal(metric(&s, "busbw_allreduce_gbps")->n, 0); /* no all-reduce ran */
    const ao_stats_summary *st = metric(&s, "step_ms");
    assert_true(st->min <= st->p50 && st->p50 <= st->p90 && st->p90 <= st->p99 &&
                st->p99 <= st->max);
    assert_int_equal(s.skew.slowest_rank, 2);
    assert_true(s.skew.ratio > 1.2 && s.skew.ratio < 1.4);
    assert_false(s.dec.have);
    assert_int_equal(s.ntelemetry, 0);
    assert_string_equal(knob(&s, "fsdp.sharding_strategy"), "full_shard");
    assert_string_equal(knob(&s, "fsdp.forward_prefetch"), "true");
    assert_string_equal(knob(&s, "env.NCCL_ALGO"), "Ring");
    assert_string_equal(knob(&s, "world_size"), "4");
    assert_null(knob(&s, "env.HOME"));

    /* summary.json parses back with the fields the issue lists */
    char *path = ao_asprintf("%s/s.json", tmp);
    assert_int_equal(ao_summary_write(path, &s), 0);
    char *text = slurp(path, NULL);
    char err[128];
    yajl_val v = yajl_tree_parse(text, err, sizeof err);
    assert_non_null(v);
    yajl_val sum = ao_json_member(v, "summary");
    const char *keys[] = {"label",   "runs",      "ranks",         "steps",    "knobs",
                          "metrics", "rank_skew", "decomposition", "telemetry"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        assert_non_null(ao_json_member(sum, keys[i]));
    yajl_val step = ao_json_member(ao_json_member(sum, "metrics"), "step_ms");
    assert_true(fabs(ao_json_number(ao_json_member(step, "median")) - st->p50) < 1e-12);
    assert_int_equal(YAJL_GET_ARRAY(ao_json_member(step, "rank_medians"))->len, 4);
    assert_true(YAJL_IS_NULL(ao_json_member(sum, "decomposition")));
    yajl_tree_free(v);
    free(text);
    free(path);

    /* the table */
    char *tpath = ao_asprintf("%s/table.txt", tmp);
    FILE *f = fopen(tpath, "w");
    ao_summary_print(f, &s);
    fclose(f);
    text = slurp(tpath, NULL);
    assert_contains(text, "step_ms");
    assert_contains(text, "overlap_ratio");
    assert_contains(text, "rank skew");
    assert_contains(text, "slowest rank 2");
    /* Every cell with 3 decimals, tokens/s (above 1e4 here) as well. */
    assert_true(metric(&s, "tokens_per_s")->p50 >= 1e4);
    const char *row = strstr(text, "\n  tokens_per_s ");
    assert_non_null(row);
    char name[32], cell[4][32];
    assert_int_equal(
        sscanf(row, " %31s %31s %31s %31s %31s", name, cell[0], cell[1], cell[2], cell[3]), 5);
    for (int i = 0; i < 4; i++) {
        const char *dot = strchr(cell[i], '.');
        if (!dot || strlen(dot) != 4) fail_msg("tokens_per_s cell %d is '%s'", i, cell[i]);
    }
    free(text);
    free(tpath);
    ao_summary_free(&s);
    ao_run_free(&run);
    free(dir);
}

/* Ranks that disagree on a metric: its statistics are the slowest rank's,
 * not a pool of ranks that describes none of them (compute 10 ms on three
 * ranks, 20 on rank 1); those they agree on stay pooled. */
static void test_ranks_disagree(void **state)
{
    (void)state;
    synth_opts o = synth_defaults();
    o.ranks = 4;
    o.steps = 20;
    o.slow_rank = 1;
    o.slow_factor = 2.0;
    char *dir = write_run("disagree", &o);
    ao_run_data run;
    assert_int_equal(ao_run_load(dir, -1, &run), 0);
    const char *by;
    assert_int_equal(ao_run_slowest_rank(&run, &by), 1);
    assert_string_equal(by, "own_time"); /* no collectives.jsonl */
    ao_summary s;
    assert_int_equal(ao_summary_build("d", &run, 1, &s), 0);
    int c = ao_metric_find("compute_ms"), m = ao_metric_find("comm_ms");
    assert_int_equal(s.metrics[c].rank, 1);
    assert_true(fabs(s.metrics[c].all.p50 - 20) < 0.5);
    assert_int_equal(s.metrics[c].all.n, 15);
    assert_int_equal(s.metrics[m].rank, -1);
    assert_int_equal(s.metrics[m].all.n, 60);
    assert_int_equal(s.skew.slowest_rank, 1);
    char *tpath = ao_asprintf("%s/disagree.txt", tmp);
    FILE *f = fopen(tpath, "w");
    ao_summary_print(f, &s);
    fclose(f);
    char *text = slurp(tpath, NULL);
    assert_contains(text, "compute_ms (rank 1)");
    assert_contains(text, "slowest rank 1 (the most time of its own)");
    free(text);
    free(tpath);
    ao_summary_free(&s);
    ao_run_free(&run);
    free(dir);
}

static void test_skip_origin(void **state)
{
    synth_opts o = synth_defaults();
    o.steps = 12;
    o.skip_config = -1;
    char *dir = write_run("noskip", &o);
    ao_run_data run;
    assert_int_equal(ao_run_load(dir, -1, &run), 0);
    assert_string_equal(run.skip_origin, "default");
    assert_int_equal(run.ranks[0].n, 7);
    ao_run_free(&run);
    assert_int_equal(ao_run_load(dir, 10, &run), 0);
    assert_string_equal(run.skip_origin, "--skip-steps");
    assert_int_equal(run.ranks[1].n, 2);
    ao_run_free(&run);

    /* everything skipped: no summary */
    assert_int_equal(ao_run_load(dir, 12, &run), 0);
    ao_summary s;
    stderr_capture c;
    capture_begin(&c);
    assert_int_equal(ao_summary_build("x", &run, 1, &s), AO_EXIT_USAGE);
    char *err = capture_end(&c);
    assert_contains(err, "no train step is left after skipping 12");
    free(err);
    ao_summary_free(&s);
    ao_run_free(&run);
    free(dir);
}

static void test_baselines_telemetry_profiled(void **state)
{
    synth_opts o = synth_defaults();
    o.steps = 30;
    o.baseline_steps = 6;
    o.telemetry = 1;
    o.profile_every = 10;
    o.jitter = 0.01;
    char *dir = write_run("base", &o);
    ao_run_data run;
    assert_int_equal(ao_run_load(dir, -1, &run), 0);
    assert_int_equal(run.ranks[0].ncompute_only, 6);
    assert_int_equal(run.ranks[0].ncomm_only, 6);
    assert_int_equal(run.ranks[0].n, 25);        /* baselines are not train steps */
    assert_int_equal(run.ranks[0].nprofiled, 2); /* steps 10 and 20 (0 is warm-up) */
    assert_true(run.ranks[0].profiled[0].nops > 10);
    ao_summary s;
    assert_int_equal(ao_summary_build("b", &run, 1, &s), 0);
    assert_true(s.dec.have);
    assert_false(s.dec.kernels); /* no kernel trace: the events */
    assert_int_equal(s.dec.ncompute_only, 12);
    const ao_decomposition *d = &s.dec.d;
    assert_true(fabs(d->compute_isolated_ms - 10) < 0.3);
    assert_true(fabs(d->comm_isolated_ms - 4) < 0.2);
    assert_true(fabs(d->ideal_ms - d->compute_isolated_ms) < 1e-12);
    assert_true(d->achieved > 0 && d->achieved < 1);
    assert_int_equal(s.ntelemetry, 2);
    assert_string_equal(s.telemetry[0].key, "gpu_util");
    assert_int_equal(s.telemetry[0].s.n, 50);
    assert_true(s.telemetry[0].s.p50 >= 80 && s.telemetry[0].s.p50 <= 90);
    ao_summary_free(&s);
    ao_run_free(&run);
    free(dir);
}

static void append_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_truncated_and_for_run(void **state)
{
    synth_opts o = synth_defaults();
    o.steps = 20;
    char *dir = write_run("trunc", &o);
    char *m = ao_asprintf("%s/rank_01_metrics.jsonl", dir);
    append_text(m, "{\"schema\":1,\"rank\":1,\"wor");
    stderr_capture c;
    capture_begin(&c);
    char *tpath = ao_asprintf("%s/t.txt", tmp);
    FILE *f = fopen(tpath, "w");
    assert_int_equal(ao_summary_for_run(dir, -1, f), 0);
    fclose(f);
    char *err = capture_end(&c);
    assert_contains(err, "the last line is incomplete");
    char *table = slurp(tpath, NULL);
    assert_contains(table, "1 incomplete last line(s) skipped");
    char *sp = ao_asprintf("%s/summary.json", dir);
    char *js = slurp(sp, NULL);
    assert_non_null(js);
    assert_contains(js, "\"truncated_lines\": 1");
    free(js);
    free(sp);
    free(table);
    free(err);
    free(tpath);
    free(m);
    free(dir);
}

/* ao_run_load must fail with AO_EXIT_USAGE and print `want`. */
static void expect_load_error(const char *dir, const char *want)
{
    ao_run_data run;
    stderr_capture c;
    capture_begin(&c);
    int rc = ao_run_load(dir, -1, &run);
    char *err = capture_end(&c);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_contains(err, want);
    free(err);
    ao_run_free(&run);
}

static void test_bad_input(void **state)
{
    char *missing = ao_asprintf("%s/missing", tmp);
    expect_load_error(missing, "not a directory");
    char *empty = ao_asprintf("%s/empty", tmp);
    assert_int_equal(mkdir(empty, 0755), 0);
    expect_load_error(empty, "no rank_NN_metrics.jsonl files");

    synth_opts o = synth_defaults();
    o.steps = 8;
    char *dir = write_run("schema", &o);
    char *m = ao_asprintf("%s/rank_00_metrics.jsonl", dir);
    append_text(m, "{\"schema\":2}\n");
    expect_load_error(dir, "schema 2");
    free(m);
    free(dir);

    dir = write_run("renamed", &o);
    char *from = ao_asprintf("%s/rank_01_metrics.jsonl", dir);
    char *to = ao_asprintf("%s/rank_05_metrics.jsonl", dir);
    assert_int_equal(rename(from, to), 0);
    expect_load_error(dir, "the file name says rank 5");
    free(from);
    free(to);
    free(dir);

    dir = write_run("badjson", &o);
    char *rj = ao_asprintf("%s/run.json", dir);
    FILE *f = fopen(rj, "w");
    fputs("{\"schema\": 1, ", f);
    fclose(f);
    expect_load_error(dir, "run.json: not a JSON object");
    free(rj);
    free(dir);

    /* no run.json: a warning, and the numbers still load */
    dir = write_run("norun", &o);
    rj = ao_asprintf("%s/run.json", dir);
    unlink(rj);
    ao_run_data run;
    stderr_capture c;
    capture_begin(&c);
    assert_int_equal(ao_run_load(dir, 0, &run), 0);
    char *err = capture_end(&c);
    assert_contains(err, "no run.json");
    assert_int_equal(run.world_size, 2);
    ao_run_free(&run);
    free(err);
    free(rj);
    free(dir);
    free(missing);
    free(empty);
}

static void test_resolve_dirs(void **state)
{
    char *out = ao_asprintf("%s/out", tmp);
    assert_int_equal(mkdir(out, 0755), 0);
    char **dirs;
    size_t n;
    stderr_capture c;
    capture_begin(&c);
    assert_int_equal(ao_run_dirs_resolve(out, 0, &dirs, &n), AO_EXIT_USAGE);
    assert_int_equal(ao_run_dirs_resolve(out, 1, &dirs, &n), AO_EXIT_USAGE);
    char *nothing = ao_asprintf("%s/nothing", tmp);
    assert_int_equal(ao_run_dirs_resolve(nothing, 0, &dirs, &n), AO_EXIT_USAGE);
    char *err = capture_end(&c);
    assert_contains(err, "no `latest` run");
    assert_contains(err, "holds no run directory");
    assert_contains(err, "no such directory");
    free(err);
    free(nothing);

    synth_opts o = synth_defaults();
    o.steps = 6;
    char *a = ao_asprintf("out/b_run");
    char *b = ao_asprintf("out/a_run");
    free(write_run(a, &o));
    free(write_run(b, &o));
    assert_int_equal(ao_rundir_update_latest(out, "b_run"), 0);
    assert_int_equal(ao_run_dirs_resolve(out, 0, &dirs, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(strrchr(dirs[0], '/'), "/latest");
    ao_run_dirs_free(dirs, n);
    assert_int_equal(ao_run_dirs_resolve(out, 1, &dirs, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(strrchr(dirs[0], '/'), "/a_run");
    assert_string_equal(strrchr(dirs[1], '/'), "/b_run");
    /* a run directory itself */
    char **one;
    size_t n1;
    assert_int_equal(ao_run_dirs_resolve(dirs[1], 1, &one, &n1), 0);
    assert_int_equal(n1, 1);
    ao_run_dirs_free(one, n1);
    ao_run_dirs_free(dirs, n);
    free(a);
    free(b);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metric_table),
        cmocka_unit_test(test_summary_numbers),
        cmocka_unit_test(test_ranks_disagree),
        cmocka_unit_test(test_skip_origin),
        cmocka_unit_test(test_baselines_telemetry_profiled),
        cmocka_unit_test(test_truncated_and_for_run),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_resolve_dirs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
