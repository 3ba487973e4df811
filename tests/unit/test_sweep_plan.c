/* aorta sweep: ranges, parsing, checks (FILE:LINE errors), planning of groups
 * and launches, argv, and a run through a fake child that shows the group's
 * environment reaches the child and never the sweep itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/error.h"
#include "queues/queues.h"
#include "sweep/plan.h"
#include "sweep/run.h"
#include "test_files.h"

static void free_vals(char **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static void test_ranges(void **state)
{
    (void)state;
    char **v = NULL;
    int n = 0;
    assert_int_equal(ao_sweep_expand("t", "pow2:8:13", &v, &n), 0);
    assert_int_equal(n, 6);
    assert_string_equal(v[0], "256");
    assert_string_equal(v[5], "8192");
    assert_int_equal(ao_sweep_expand("t", "lin:64:256:64", &v, &n), 0);
    assert_int_equal(n, 10);
    assert_string_equal(v[6], "64");
    assert_string_equal(v[9], "256");
    assert_int_equal(ao_sweep_expand("t", "lin:1:3", &v, &n), 0);
    assert_int_equal(n, 13);
    assert_string_equal(v[12], "3");
    assert_int_equal(ao_sweep_expand("t", "bf16", &v, &n), 0);
    assert_string_equal(v[13], "bf16");
    const char *bad[] = {"pow2:8",    "pow2:a:3",    "pow2:5:3", "pow2:0:63", "lin:5:1",
                         "lin:1:5:0", "lin:1:2:3:4", "lin:",     ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        stderr_capture c;
        capture_begin(&c);
        assert_int_equal(ao_sweep_expand("f.yaml:3", bad[i], &v, &n), AO_EXIT_USAGE);
        char *err = capture_end(&c);
        assert_non_null(strstr(err, "f.yaml:3"));
        free(err);
    }
    assert_int_equal(n, 14);
    free_vals(v, n);
}

/* Ranges at the ends of 64 bits: counted, not stepped past LAST (a value
 * that overflows never exceeds it, and the loop never ended). */
static void test_ranges_near_int64_limits(void **state)
{
    (void)state;
    char **v = NULL;
    int n = 0;
    assert_int_equal(ao_sweep_expand("t", "lin:9223372036854775807:9223372036854775807", &v, &n),
                     0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0], "9223372036854775807");
    assert_int_equal(ao_sweep_expand("t", "lin:9223372036854775805:9223372036854775807:2", &v, &n),
                     0);
    assert_int_equal(n, 3);
    assert_string_equal(v[1], "9223372036854775805");
    assert_string_equal(v[2], "9223372036854775807");
    assert_int_equal(ao_sweep_expand("t",
                                     "lin:-9223372036854775808:9223372036854775807:"
                                     "4611686018427387904",
                                     &v, &n),
                     0);
    assert_int_equal(n, 7);
    assert_string_equal(v[3], "-9223372036854775808");
    assert_string_equal(v[6], "4611686018427387904");
    stderr_capture c;
    capture_begin(&c);
    assert_int_equal(ao_sweep_expand("t", "lin:-9223372036854775808:9223372036854775807", &v, &n),
                     AO_EXIT_USAGE);
    char *err = capture_end(&c);
    assert_non_null(strstr(err, "more than 100000 values"));
    free(err);
    assert_int_equal(n, 7);
    free_vals(v, n);
}

/* Load, change and check a sweep; the error text (or NULL) in *err. */
static int load(const char *text, const char *const *axis, const char *const *skip, char **err,
                ao_sweep_spec *s)
{
    stderr_capture c;
    capture_begin(&c);
    int rc = ao_sweep_spec_load_text("s.yaml", text, s);
    for (int i = 0; rc == 0 && axis && axis[i]; i++)
        rc = ao_sweep_spec_set_axis(s, "--axis", axis[i]);
    for (int i = 0; rc == 0 && skip && skip[i]; i++)
        rc = ao_sweep_spec_add_skip(s, "--skip", skip[i]);
    if (rc == 0) rc = ao_sweep_spec_check(s);
    char *e = capture_end(&c);
    if (err)
        *err = e;
    else
        free(e);
    return rc;
}

static const char coll_sweep[] = "name: t\n"
                                 "command: coll\n"
                                 "args: [-b, 1K, -e, 1K, -n, 2]\n"
                                 "axes:\n"
                                 "  nproc: [2]\n"
                                 "  --op: [sum, max]\n"
                                 "env:\n"
                                 "  A: [1, 2]\n"
                                 "env_zip:\n"
                                 "  - {B: x, C: x}\n"
                                 "  - {B: y, C: y}\n";

static void test_groups_env_times_zip(void **state)
{
    (void)state;
    ao_sweep_spec s;
    ao_sweep_plan p;
    assert_int_equal(load(coll_sweep, NULL, NULL, NULL, &s), 0);
    assert_int_equal(ao_sweep_plan_make(&s, &p), 0);
    /* 2 env values x 2 zip entries = 4 groups; --op is one launch per value. */
    assert_int_equal(p.ngroups, 4);
    assert_int_equal(p.npoints, 8);
    assert_int_equal(p.nlaunches, 8);
    assert_int_equal(p.nenv_names, 3);
    const char *want[4][3] = {
        {"A=1", "B=x", "C=x"}, {"A=1", "B=y", "C=y"}, {"A=2", "B=x", "C=x"}, {"A=2", "B=y", "C=y"}};
    for (int g = 0; g < 4; g++) {
        assert_int_equal(p.groups[g].nproc, 2);
        for (int k = 0; k < 3; k++) assert_string_equal(p.groups[g].env[k], want[g][k]);
        assert_null(p.groups[g].env[3]);
    }
    /* Points in group order, --op fastest. */
    assert_int_equal(p.points[1].group, 0);
    assert_string_equal(p.points[1].values[1], "max");
    assert_int_equal(p.points[2].group, 1);
    char **argv = ao_sweep_launch_argv(&p, 1, "R.json", NULL);
    const char *want_argv[] = {"coll", "-b",  "1K",      "-e", "1K",     "-n",     "2",
                               "--op", "max", "--nproc", "2",  "--json", "R.json", NULL};
    for (int i = 0; want_argv[i]; i++) assert_string_equal(argv[i], want_argv[i]);
    assert_null(argv[13]);
    ao_sweep_argv_free(argv);
    ao_sweep_plan_free(&p);
    ao_sweep_spec_free(&s);

    /* --coll values share their group's launch: launches == groups. */
    const char *axis[] = {"--op=sum", "--coll=all_reduce,all_gather", NULL};
    assert_int_equal(load(coll_sweep, axis, NULL, NULL, &s), 0);
    assert_int_equal(ao_sweep_plan_make(&s, &p), 0);
    assert_int_equal(p.ngroups, 4);
    assert_int_equal(p.npoints, 8);
    assert_int_equal(p.nlaunches, 4);
    argv = ao_sweep_launch_argv(&p, 0, "R.json", NULL);
    int found = 0;
    for (int i = 0; argv[i]; i++)
        found |=
            strcmp(argv[i], "all_reduce,all_gather") == 0 && strcmp(argv[i - 1], "--coll") == 0;
    assert_true(found);
    ao_sweep_argv_free(argv);
    ao_sweep_plan_free(&p);
    ao_sweep_spec_free(&s);
}

static void test_size_axis_launches(void **state)
{
    (void)state;
    ao_sweep_spec s;
    ao_sweep_plan p;
    /* A geometric series: one launch, -b/-e/-f replacing the fixed ones. */
    const char *geo[] = {"size=1K,4K,16K", NULL};
    assert_int_equal(load(coll_sweep, geo, NULL, NULL, &s), 0);
    assert_int_equal(ao_sweep_plan_make(&s, &p), 0);
    assert_int_equal(p.npoints, 24);
    assert_int_equal(p.nlaunches, 8);
    char **argv = ao_sweep_launch_argv(&p, 0, "R", NULL);
    const char *want[] = {"coll",  "-n", "2", "--op",    "sum", "-b",     "1024", "-e",
                          "16384", "-f", "4", "--nproc", "2",   "--json", "R",    NULL};
    for (int i = 0; want[i]; i++) assert_string_equal(argv[i], want[i]);
    ao_sweep_argv_free(argv);
    assert_int_equal(ao_sweep_point_size_index(&p, 2), 2);
    ao_sweep_plan_free(&p);
    ao_sweep_spec_free(&s);
    /* Arithmetic: a step. */
    const char *ari[] = {"size=1K,3K,5K", "--op=sum", NULL};
    assert_int_equal(load(coll_sweep, ari, NULL, NULL, &s), 0);
    assert_int_equal(ao_sweep_plan_make(&s, &p), 0);
    assert_int_equal(p.nlaunches, 4);
    argv = ao_sweep_launch_argv(&p, 0, "R", NULL);
    assert_string_equal(argv[9], "-i");
    assert_string_equal(argv[10], "2048");
    ao_sweep_argv_free(argv);
    ao_sweep_plan_free(&p);
    ao_sweep_spec_free(&s);
    /* Neither: one launch per size. */
    const char *odd[] = {"size=1K,2K,8K", "--op=sum", NULL};
    assert_int_equal(load(coll_sweep, odd, NULL, NULL, &s), 0);
    assert_int_equal(ao_sweep_plan_make(&s, &p), 0);
    assert_int_equal(p.nlaunches, 12);
    ao_sweep_plan_free(&p);
    ao_sweep_spec_free(&s);
}

static void test_skip(void **state)
{
    (void)state;
    ao_sweep_spec s;
    ao_sweep_plan p;
    const char *skip[] = {"A=2", "--op=max", NULL};
    assert_int_equal(load(coll_sweep, NULL, skip, NULL, &s), 0);
    assert_int_equal(ao_sweep_plan_make(&s, &p), 0);
    assert_int_equal(p.ngroups, 2);
    assert_int_equal(p.npoints, 2);
    assert_int_equal(p.nlaunches, 2);
    assert_string_equal(p.groups[1].env[1], "B=y");
    ao_sweep_plan_free(&p);
    ao_sweep_spec_free(&s);
    const char *all[] = {"nproc=2", NULL};
    stderr_capture c;
    assert_int_equal(load(coll_sweep, NULL, all, NULL, &s), 0);
    capture_begin(&c);
    assert_int_equal(ao_sweep_plan_make(&s, &p), AO_EXIT_USAGE);
    char *err = capture_end(&c);
    assert_non_null(strstr(err, "every point of the sweep is skipped"));
    free(err);
    ao_sweep_plan_free(&p);
    ao_sweep_spec_free(&s);
    const char *unknown[] = {"D=1", NULL};
    assert_int_equal(load(coll_sweep, NULL, unknown, &err, &s), AO_EXIT_USAGE);
    assert_non_null(strstr(err, "--skip: 'D' is neither an axis"));
    free(err);
    ao_sweep_spec_free(&s);
}

static void expect_error(const char *text, const char *msg)
{
    ao_sweep_spec s;
    char *err = NULL;
    assert_int_equal(load(text, NULL, NULL, &err, &s), AO_EXIT_USAGE);
    if (!strstr(err, msg)) fail_msg("want '%s' in: %s", msg, err);
    /* One line. */
    assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);
    free(err);
    ao_sweep_spec_free(&s);
}

static void test_bad_files(void **state)
{
    (void)state;
    expect_error("command: bench\n", "s.yaml:1: unknown command 'bench'");
    expect_error("command: coll\naxes:\n  --op: []\n", "s.yaml:3: --op has no values");
    expect_error("command: coll\naxes:\n  size: lin:4:1\n", "s.yaml:3: 'lin:4:1'");
    expect_error("command: coll\nenv: {X: [1, 2]}\nenv_zip:\n  - {X: 3}\n",
                 "s.yaml:4: X is in both env (s.yaml:2) and env_zip");
    expect_error("command: coll\naxes: {nproc: [2]\n", "YAML syntax error");
    expect_error("command: coll\naxes:\n  --bogus: [1]\n", "s.yaml:3: '--bogus' is not an axis");
    expect_error("command: coll\naxes:\n  nproc: [0]\n", "s.yaml:3");
    expect_error("command: coll\naxes:\n  size: [12Q]\n", "s.yaml:3");
    expect_error("command: coll\nmetric: speed\n", "s.yaml:2: 'speed' is not a metric");
    expect_error("command: coll\nfoo: 1\n", "s.yaml:2: unknown key 'foo'");
    expect_error("axes: {nproc: 2}\n", "no command");
    expect_error("command: sdma\naxes: {nproc: [2]}\n", "sdma runs one process");
    expect_error("command: queues\naxes: {nproc: [2]}\n", "queues runs one process");
    expect_error("command: queues\naxes:\n  streams: [65]\n", "s.yaml:3");
    expect_error("command: queues\naxes:\n  workload: [nope]\n", "s.yaml:3: 'nope'");
    expect_error("command: queues\nmetric: [latency_p99_us, speed]\n", "'speed' is not a metric");
    expect_error("command: train\naxes:\n  training.batchsize: [8]\n", "s.yaml:3");
    expect_error("command: train\naxes:\n  training.batch_size: [8, many]\n", "s.yaml:3");
    expect_error("command: coll\nenv_zip: []\n", "s.yaml:2: env_zip has no entries");
    expect_error("command: coll\nenv: {1X: [1]}\n", "not an environment variable name");
}

/* A queues sweep's flag axes are exactly the axis flags of the table that
 * `aorta queues` parses (queues/queues.h): no list of its own to drift. */
static void test_queues_axes_from_flag_table(void **state)
{
    (void)state;
    for (int f = 0; f < AO_QUEUES_NFLAGS; f++) {
        const char *flag = ao_queues_flags[f].names[0];
        char *text = ao_asprintf("command: queues\naxes:\n  %s: [1]\n", flag);
        if (ao_queues_flags[f].axis) {
            ao_sweep_spec s;
            char *err = NULL;
            if (load(text, NULL, NULL, &err, &s) != 0) fail_msg("%s refused: %s", flag, err);
            free(err);
            ao_sweep_spec_free(&s);
        } else {
            char *msg = ao_asprintf("'%s' is not an axis of queues", flag);
            expect_error(text, msg);
            free(msg);
        }
        free(text);
    }
}

/* queues: the streams axis is one --streams list per launch (replacing a
 * fixed one), the workload a positional argument, one launch per
 * environment; metric may be a list. */
static void test_queues_argv(void **state)
{
    (void)state;
    static const char text[] = "command: queues\n"
                               "args: [--streams, 2, --iterations, 5]\n"
                               "axes:\n"
                               "  workload: [hetero, tiny]\n"
                               "  streams: pow2:0:2\n"
                               "env:\n"
                               "  CUDA_DEVICE_MAX_CONNECTIONS: [1, 32]\n"
                               "metric: [latency_p99_us, scaling_efficiency]\n";
    ao_sweep_spec s;
    ao_sweep_plan p;
    assert_int_equal(load(text, NULL, NULL, NULL, &s), 0);
    assert_string_equal(s.metric, "latency_p99_us");
    assert_int_equal(s.nmore_metrics, 1);
    assert_string_equal(s.more_metrics[0], "scaling_efficiency");
    assert_int_equal(ao_sweep_plan_make(&s, &p), 0);
    assert_int_equal(p.npoints, 12);
    assert_int_equal(p.nlaunches, 4);
    char **argv = ao_sweep_launch_argv(&p, 1, "R", NULL);
    const char *want[] = {"queues", "--iterations", "5", "tiny", "--streams",
                          "1,2,4",  "--json",       "R", NULL};
    for (int i = 0; want[i]; i++) assert_string_equal(argv[i], want[i]);
    assert_null(argv[8]);
    ao_sweep_argv_free(argv);
    ao_sweep_plan_free(&p);
    ao_sweep_spec_free(&s);
}

static void test_train_argv(void **state)
{
    (void)state;
    ao_sweep_spec s;
    ao_sweep_plan p;
    const char text[] = "command: train\n"
                        "axes:\n"
                        "  nproc: [2, 4]\n"
                        "  training.batch_size: [8, 16]\n";
    assert_int_equal(load(text, NULL, NULL, NULL, &s), 0);
    assert_int_equal(ao_sweep_plan_make(&s, &p), 0);
    assert_int_equal(p.ngroups, 2);
    assert_int_equal(p.nlaunches, 4);
    char **argv = ao_sweep_launch_argv(&p, 3, NULL, "RUN");
    const char *want[] = {
        "train", "--override", "training.batch_size=16", "--nproc", "4", "--run-name", "RUN", NULL};
    for (int i = 0; want[i]; i++) assert_string_equal(argv[i], want[i]);
    assert_null(argv[7]);
    ao_sweep_argv_free(argv);
    ao_sweep_plan_free(&p);
    ao_sweep_spec_free(&s);
}

/* A fake `aorta coll`: records its environment, writes one row per --coll
 * value; fails (exit 2, with an error line) when --op is "bad". */
static const char fake_coll[] =
    "#!/bin/sh\n"
    "json=; op=; coll=all_reduce\n"
    "while [ $# -gt 0 ]; do case $1 in --json) json=$2; shift;; --op) op=$2; shift;;\n"
    "  --coll) coll=$2; shift;; esac; shift; done\n"
    "echo \"$SWEEP_T $SWEEP_U\" >> \"$(dirname \"$0\")/seen\"\n"
    "if [ \"$op\" = bad ]; then echo 'aorta: error: --op: bad op' >&2; exit 2; fi\n"
    "echo '[{\"coll\": \"allreduce\", \"size\": 1024, \"oop_time_us\": 10, "
    "\"oop_algbw_gbps\": 0.1, \"oop_busbw_gbps\": 0.2, \"oop_wrong\": 0, \"ip_wrong\": 0}]' "
    "> \"$json\"\n";

static void test_run_env_only_in_children(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char *exe = ao_asprintf("%s/fake.sh", dir);
    FILE *f = fopen(exe, "w");
    fputs(fake_coll, f);
    fclose(f);
    chmod(exe, 0755);
    setenv("SWEEP_T", "parent", 1);
    unsetenv("SWEEP_U");
    char *text = ao_asprintf("command: coll\n"
                             "axes:\n"
                             "  --op: [sum, bad]\n"
                             "env:\n"
                             "  SWEEP_T: [1, 2]\n"
                             "env_zip:\n"
                             "  - {SWEEP_U: u}\n");
    ao_sweep_spec s;
    ao_sweep_plan p;
    assert_int_equal(load(text, NULL, NULL, NULL, &s), 0);
    assert_int_equal(ao_sweep_plan_make(&s, &p), 0);
    char *out = ao_asprintf("%s/r.csv", dir), *work = ao_asprintf("%s/work", dir);
    ao_sweep_run_opts o = {.exe = exe, .out = out, .format = AO_SWEEP_CSV, .work_dir = work};
    stderr_capture c;
    capture_begin(&c);
    int rc = ao_sweep_run(&p, &o);
    free(capture_end(&c));
    assert_int_equal(rc, AO_EXIT_FAIL); /* one point failed, the others ran */
    assert_string_equal(getenv("SWEEP_T"), "parent");
    assert_null(getenv("SWEEP_U"));
    char *seen_path = ao_asprintf("%s/seen", dir);
    char *seen = slurp(seen_path, NULL);
    assert_string_equal(seen, "1 u\n1 u\n2 u\n2 u\n");
    char *csv = slurp(out, NULL);
    assert_non_null(strstr(csv, "op,SWEEP_T,SWEEP_U,coll,size,time_us,algbw_gbps,busbw_gbps,"
                                "wrong,run_dir,error\n"));
    assert_non_null(strstr(csv, "sum,1,u,allreduce,1024,10,0.1,0.2,0,"));
    assert_non_null(strstr(csv, "bad,2,u,,,,,,,"));
    assert_non_null(strstr(csv, "exit 2: --op: bad op\n"));
    free(seen);
    free(csv);

    /* --resume runs only the two failed points again. */
    unlink(seen_path);
    o.resume = 1;
    capture_begin(&c);
    rc = ao_sweep_run(&p, &o);
    free(capture_end(&c));
    assert_int_equal(rc, AO_EXIT_FAIL);
    seen = slurp(seen_path, NULL);
    assert_string_equal(seen, "1 u\n2 u\n");
    csv = slurp(out, NULL);
    int rows = 0;
    for (char *q = csv; (q = strchr(q, '\n')) != NULL; q++) rows++;
    assert_int_equal(rows, 5); /* the header and 4 points, none twice */
    free(seen);
    free(csv);

    /* --resume without a results file to read is a usage error. */
    o.format = AO_SWEEP_TABLE;
    capture_begin(&c);
    assert_int_equal(ao_sweep_run(&p, &o), AO_EXIT_USAGE);
    free(capture_end(&c));

    ao_sweep_plan_free(&p);
    ao_sweep_spec_free(&s);
    free(seen_path);
    free(text);
    free(out);
    free(work);
    free(exe);
    remove_temp_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_ranges_near_int64_limits),
        cmocka_unit_test(test_groups_env_times_zip),
        cmocka_unit_test(test_size_axis_launches),
        cmocka_unit_test(test_skip),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_train_argv),
        cmocka_unit_test(test_queues_argv),
        cmocka_unit_test(test_queues_axes_from_flag_table),
        cmocka_unit_test(test_run_env_only_in_children),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
