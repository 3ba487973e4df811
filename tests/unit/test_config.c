/* core/config: schema defaults, YAML files with origins, every type's parsing
 * and errors, overrides, did-you-mean, cross-key checks, the seed's file, and
 * hostile input. Messages are checked by capturing stderr. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/error.h"
#include "core/text.h"

/* ---- helpers ------------------------------------------------------------- */

static char tmpdir[] = "/tmp/aorta_test_config_XXXXXX";
static char captured[65536];
static int saved_stderr = -1;
static FILE *capture_file;

static void capture_begin(void)
{
    fflush(stderr);
    capture_file = tmpfile();
    assert_non_null(capture_file);
    saved_stderr = dup(2);
    dup2(fileno(capture_file), 2);
}

/* Stops capturing; the text is in `captured`. */
static const char *capture_end(void)
{
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    rewind(capture_file);
    size_t n = fread(captured, 1, sizeof captured - 1, capture_file);
    captured[n] = '\0';
    fclose(capture_file);
    return captured;
}

static int count_of(const char *haystack, const char *needle)
{
    int n = 0;
    for (const char *p = haystack; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* Write `text` (len bytes; -1 = strlen) to a fresh file in tmpdir. */
static char *write_file(const char *name, const char *text, long len)
{
    char *path = ao_asprintf("%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(text, 1, len < 0 ? strlen(text) : (size_t)len, f);
    fclose(f);
    return path;
}

/* Load and expect failure; returns the captured stderr. */
static const char *load_fails(const char *path, char *const *ov, int n)
{
    struct ao_config cfg;
    capture_begin();
    int rc = ao_config_load(&cfg, path, ov, n);
    const char *err = capture_end();
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_null(cfg.meta); /* nothing left to free */
    ao_config_free(&cfg);  /* and freeing again is harmless */
    return err;
}

static const char *override_fails(const char *word)
{
    char *ov[] = {(char *)word};
    return load_fails(NULL, ov, 1);
}

static void load_ok(struct ao_config *cfg, const char *path, char *const *ov, int n)
{
    capture_begin();
    int rc = ao_config_load(cfg, path, ov, n);
    const char *err = capture_end();
    if (rc) fprintf(stderr, "unexpected error: %s", err);
    assert_int_equal(rc, 0);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char *cmd = ao_asprintf("rm -rf '%s'", tmpdir);
    int rc = system(cmd);
    free(cmd);
    return rc;
}

/* ---- defaults ------------------------------------------------------------- */

static void test_defaults_are_the_seeds(void **state)
{
    (void)state;
    struct ao_config cfg;
    load_ok(&cfg, NULL, NULL, 0);
    assert_int_equal(cfg.logging.level, AO_LOG_INFO);
    assert_int_equal(cfg.training.epochs, 1);
    assert_int_equal(cfg.training.batch_size, 8);
    assert_int_equal(cfg.training.mixed_precision, AO_PRECISION_BF16);
    assert_int_equal(cfg.training.max_steps, 200);
    assert_int_equal(cfg.training.summary_skip_steps, 5);
    assert_string_equal(cfg.training.output_dir, "artifacts");
    assert_true(cfg.optimizer.lr == 0.0003);
    assert_true(cfg.optimizer.betas[0] == 0.9 && cfg.optimizer.betas[1] == 0.98);
    assert_true(cfg.optimizer.eps == 1e-8);
    assert_int_equal(cfg.dataset.vocab_size, 60000);
    assert_int_equal(cfg.dataset.placement, AO_PLACEMENT_HOST);
    assert_int_equal(cfg.dataset.target, AO_DATASET_TARGET_RANDOM);
    assert_int_equal(cfg.model.model_dim, 768);
    assert_true(cfg.model.dropout == 0.1);
    assert_int_equal(cfg.model.ff_dim, 0);
    assert_int_equal(ao_config_ff_dim(&cfg), 2048);
    assert_int_equal(cfg.fsdp.sharding_strategy, AO_SHARD_FULL);
    assert_int_equal(cfg.fsdp.backward_prefetch, AO_PREFETCH_BACKWARD_PRE);
    assert_int_equal(cfg.fsdp.limit_all_gathers, 2);
    assert_int_equal(cfg.fsdp.param_dtype, AO_PRECISION_AUTO);
    assert_int_equal(ao_config_param_dtype(&cfg), AO_PRECISION_BF16);
    assert_int_equal(cfg.fsdp.reduce_dtype, AO_PRECISION_FP32);
    assert_string_equal(cfg.compile.options, "{}");
    assert_int_equal(cfg.distributed.mode, AO_MODE_FSDP);
    assert_true(cfg.distributed.timeout_s == 300);
    assert_int_equal(cfg.dataloader.pin_memory, 1);
    assert_int_equal(cfg.compute.gemm_chunks, 1);
    assert_string_equal(cfg.profiling.trace_filename, "trace.json");
    assert_string_equal(ao_config_origin(&cfg, "training.batch_size"), "default");
    assert_null(ao_config_origin(&cfg, "training.nope"));
    assert_int_equal(ao_config_noop_warnings(&cfg), 0);
    /* by_id aliases the named streams */
    cfg.streams.allgather.priority = -3;
    assert_int_equal(cfg.streams.by_id[1].priority, -3);
    ao_config_free(&cfg);
}

static void test_total_steps(void **state)
{
    (void)state;
    struct ao_config cfg;
    char *ov[] = {"dataset.num_samples=100", "training.epochs=3"};
    load_ok(&cfg, NULL, ov, 2);
    /* ceil(100 / (2 x 8)) = 7 per epoch, 21 in all */
    assert_int_equal(ao_config_total_steps(&cfg, 2), 21);
    assert_int_equal(ao_config_total_steps(&cfg, 1), 39); /* 13 x 3 */
    cfg.training.max_steps = 10;
    assert_int_equal(ao_config_total_steps(&cfg, 1), 10);
    ao_config_free(&cfg);
}

/* ---- files ------------------------------------------------------------------- */

static void test_file_values_and_origins(void **state)
{
    (void)state;
    char *path = write_file("origins.yaml",
                            "# a comment\n"
                            "training:\n"
                            "  batch_size: 16\n"
                            "  mixed_precision: FP16\n"
                            "optimizer:\n"
                            "  betas: [0.8, 0.9]\n"
                            "distributed:\n"
                            "  nccl:\n"
                            "    max_ctas: 16\n"
                            "streams:\n"
                            "  h2d: {priority: -1}\n"
                            "model.ff_dim: 1024\n",
                            -1);
    struct ao_config cfg;
    load_ok(&cfg, path, NULL, 0);
    assert_int_equal(cfg.training.batch_size, 16);
    assert_int_equal(cfg.training.mixed_precision, AO_PRECISION_FP16);
    assert_true(cfg.optimizer.betas[0] == 0.8);
    assert_int_equal(cfg.distributed.nccl.max_ctas, 16);
    assert_int_equal(cfg.streams.h2d.priority, -1);
    assert_int_equal(ao_config_ff_dim(&cfg), 1024);
    char *want = ao_asprintf("%s:3", path);
    assert_string_equal(ao_config_origin(&cfg, "training.batch_size"), want);
    free(want);
    want = ao_asprintf("%s:9", path);
    assert_string_equal(ao_config_origin(&cfg, "distributed.nccl.max_ctas"), want);
    free(want);
    assert_string_equal(ao_config_origin(&cfg, "training.max_steps"), "default");
    ao_config_free(&cfg);
    free(path);
}

static void test_unreadable_file(void **state)
{
    (void)state;
    const char *err = load_fails("/nonexistent/dir/x.yaml", NULL, 0);
    assert_non_null(strstr(err, "/nonexistent/dir/x.yaml: cannot read the config file"));
}

/* ---- types ------------------------------------------------------------------- */

static void test_every_type_parses(void **state)
{
    (void)state;
    struct ao_config cfg;
    load_ok(&cfg, NULL, NULL, 0);
    assert_int_equal(ao_config_set(&cfg, "training.batch_size", "12", "t"), 0);
    assert_int_equal(cfg.training.batch_size, 12);
    assert_string_equal(ao_config_origin(&cfg, "training.batch_size"), "t");
    assert_int_equal(ao_config_set(&cfg, "optimizer.lr", "3e-4", "t"), 0);
    assert_true(cfg.optimizer.lr == 3e-4);
    assert_int_equal(ao_config_set(&cfg, "training.grad_clip_norm", "2", "t"), 0);
    assert_true(cfg.training.grad_clip_norm == 2.0);
    const char *yes[] = {"true", "yes", "on", "1", "TRUE", "Yes"};
    const char *no[] = {"false", "no", "off", "0", "False", "OFF"};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(ao_config_set(&cfg, "training.tf32", yes[i], "t"), 0);
        assert_int_equal(cfg.training.tf32, 1);
        assert_int_equal(ao_config_set(&cfg, "training.tf32", no[i], "t"), 0);
        assert_int_equal(cfg.training.tf32, 0);
    }
    assert_int_equal(ao_config_set(&cfg, "fsdp.sharding_strategy", "Hybrid_Shard", "t"), 0);
    assert_int_equal(cfg.fsdp.sharding_strategy, AO_SHARD_HYBRID);
    assert_int_equal(ao_config_set(&cfg, "fsdp.backward_prefetch", "backward_post", "t"), 0);
    assert_int_equal(cfg.fsdp.backward_prefetch, AO_PREFETCH_BACKWARD_POST);
    assert_int_equal(ao_config_set(&cfg, "training.mixed_precision", "fp32", "t"), 0);
    assert_int_equal(cfg.training.mixed_precision, AO_PRECISION_FP32);
    assert_int_equal(ao_config_set(&cfg, "logging.level", "debug", "t"), 0);
    assert_int_equal(cfg.logging.level, AO_LOG_DEBUG);
    assert_int_equal(ao_config_set(&cfg, "optimizer.betas", "[0.9,0.95]", "t"), 0);
    assert_true(cfg.optimizer.betas[0] == 0.9 && cfg.optimizer.betas[1] == 0.95);
    assert_int_equal(ao_config_set(&cfg, "model.ff_dim", "4096", "t"), 0);
    assert_int_equal(ao_config_ff_dim(&cfg), 4096);
    assert_int_equal(ao_config_set(&cfg, "model.ff_dim", "null", "t"), 0);
    assert_int_equal(ao_config_ff_dim(&cfg), cfg.model.mlp_hidden_dim);
    assert_int_equal(ao_config_set(&cfg, "fsdp.param_dtype", "FP16", "t"), 0);
    assert_int_equal(ao_config_param_dtype(&cfg), AO_PRECISION_FP16);
    assert_int_equal(ao_config_set(&cfg, "fsdp.param_dtype", "~", "t"), 0);
    assert_int_equal(cfg.fsdp.param_dtype, AO_PRECISION_AUTO);
    const struct {
        const char *text;
        int value;
    } limits[] = {{"true", 2}, {"false", 0}, {"1", 1}, {"0", 0}, {"5", 5}, {"on", 2}};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        assert_int_equal(ao_config_set(&cfg, "fsdp.limit_all_gathers", limits[i].text, "t"), 0);
        assert_int_equal(cfg.fsdp.limit_all_gathers, limits[i].value);
    }
    assert_int_equal(ao_config_set(&cfg, "training.output_dir", "runs/a b", "t"), 0);
    assert_string_equal(cfg.training.output_dir, "runs/a b");
    assert_int_equal(ao_config_set(&cfg, "streams.compute.priority", "-2", "t"), 0);
    assert_int_equal(cfg.streams.compute.priority, -2);
    capture_begin();
    assert_int_equal(ao_config_set(&cfg, "compile.options", "{mode: x, k: [1, 2]}", "t"), 0);
    capture_end();
    assert_string_equal(cfg.compile.options, "{\"mode\": \"x\", \"k\": [\"1\", \"2\"]}");
    ao_config_free(&cfg);
}

static void test_type_errors_name_key_value_origin_and_allowed(void **state)
{
    (void)state;
    const struct {
        const char *word, *expect;
    } cases[] = {
        {"training.batch_size=abc", "training.batch_size: 'abc' is not an integer; allowed: "
                                    "integer 1..2147483647"},
        {"training.batch_size=0", "'0' is out of range"},
        {"training.batch_size=2.5", "'2.5' is not an integer"},
        {"training.batch_size=99999999999", "is out of range"},
        {"training.batch_size=[1]", "'[\"1\"]' is not an integer"},
        {"optimizer.lr=0", "optimizer.lr: '0' is out of range; allowed: number greater than 0"},
        {"optimizer.lr=inf", "'inf' is not a number"},
        {"optimizer.lr=nan", "'nan' is not a number"},
        {"optimizer.lr=1e999", "is not a number"},
        {"model.dropout=1", "allowed: number [0, 1)"},
        {"training.tf32=maybe", "training.tf32: 'maybe' is not a boolean; allowed: true or false"},
        {"fsdp.sharding_strategy=zero3",
         "'zero3' is not one of the choices; allowed: full_shard, shard_grad_op, no_shard, "
         "hybrid_shard"},
        {"optimizer.betas=[0.9]", "has 1 element"},
        {"optimizer.betas=[0.9, 1.0]", "'1.0' is out of range"},
        {"optimizer.betas=0.9", "'0.9' is not a list"},
        {"optimizer.betas=[a, b]", "'a' is not a number"},
        {"model.ff_dim=0", "allowed: integer 1..1048576, or null"},
        {"training.output_dir=null", "'null' is not allowed; allowed: string"},
        {"training.max_steps=", "'null' is not allowed"},
        {"fsdp.limit_all_gathers=-1", "allowed: true, false or integer 0..1024"},
        {"compile.options=3", "is not a mapping"},
        {"training.batch_size=[", "training.batch_size: cannot read '[' as a value"},
        {"training.batch_size", "'training.batch_size' is not key=value"},
        {"training=3", "'training' is a section, not a key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *err = override_fails(cases[i].word);
        if (!strstr(err, cases[i].expect) || !strstr(err, "aorta: error: --override: "))
            fail_msg("%s: got '%s', want '%s'", cases[i].word, err, cases[i].expect);
        assert_int_equal(count_of(err, "\n"), 1); /* one line */
    }
    /* In a file, the origin is file:line:column, and a quoted number is a string. */
    char *path = write_file("types.yaml", "training:\n  batch_size: \"8\"\n", -1);
    const char *err = load_fails(path, NULL, 0);
    char *want = ao_asprintf("%s:2:15: training.batch_size: '8' is a quoted string", path);
    assert_non_null(strstr(err, want));
    free(want);
    free(path);
    /* A rejected value leaves the old one in place. */
    struct ao_config cfg;
    load_ok(&cfg, NULL, NULL, 0);
    capture_begin();
    assert_int_equal(ao_config_set(&cfg, "optimizer.betas", "[0.5, 7]", "sweep.yaml:3:4"),
                     AO_EXIT_USAGE);
    err = capture_end();
    assert_non_null(strstr(err, "sweep.yaml:3:4: optimizer.betas"));
    assert_true(cfg.optimizer.betas[0] == 0.9);
    assert_string_equal(ao_config_origin(&cfg, "optimizer.betas"), "default");
    ao_config_free(&cfg);
}

/* ---- overrides ------------------------------------------------------------- */

static void test_overrides_apply_in_order(void **state)
{
    (void)state;
    char *path = write_file("base.yaml", "training:\n  max_steps: 40\n  batch_size: 4\n", -1);
    char *ov[] = {"training.max_steps=50",       "optimizer.betas=[0.8,0.85]",
                  "fsdp.backward_prefetch=none", "training.max_steps=60",
                  "model.ff_dim=null",           "distributed.mode=DDP"};
    struct ao_config cfg;
    load_ok(&cfg, path, ov, 6);
    assert_int_equal(cfg.training.max_steps, 60);
    assert_int_equal(cfg.training.batch_size, 4);
    assert_true(cfg.optimizer.betas[1] == 0.85);
    assert_int_equal(cfg.fsdp.backward_prefetch, AO_PREFETCH_NONE);
    assert_int_equal(cfg.model.ff_dim, 0);
    assert_int_equal(cfg.distributed.mode, AO_MODE_DDP);
    assert_string_equal(ao_config_origin(&cfg, "training.max_steps"), "--override");
    char *want = ao_asprintf("%s:3", path);
    assert_string_equal(ao_config_origin(&cfg, "training.batch_size"), want);
    free(want);
    ao_config_free(&cfg);
    free(path);
}

static void test_did_you_mean(void **state)
{
    (void)state;
    const char *err = override_fails("training.batch_sise=4");
    assert_non_null(strstr(err, "unknown key 'training.batch_sise' (did you mean "
                                "'training.batch_size'?)"));
    err = override_fails("fsdp.batch_size=4"); /* right name, wrong section */
    assert_non_null(strstr(err, "did you mean 'training.batch_size'?"));
    err = override_fails("zzzzzzzz.qqqqqqqq=1");
    assert_non_null(strstr(err, "unknown key 'zzzzzzzz.qqqqqqqq' ('aorta config doc'"));
    char *path = write_file("typo.yaml", "trainng:\n  batch_size: 4\n", -1);
    err = load_fails(path, NULL, 0);
    char *want = ao_asprintf("%s:1:1: unknown section 'trainng' (did you mean 'training'?)", path);
    assert_non_null(strstr(err, want));
    free(want);
    free(path);
    path = write_file("typo2.yaml", "distributed:\n  nccl:\n    max_cta: 4\n", -1);
    err = load_fails(path, NULL, 0);
    assert_non_null(strstr(err, "(did you mean 'distributed.nccl.max_ctas'?)"));
    free(path);
    assert_int_equal(ao_edit_distance("kitten", "sitting", 10), 3);
    assert_int_equal(ao_edit_distance("", "abc", 10), 3);
    assert_int_equal(ao_edit_distance("same", "same", 10), 0);
    assert_int_equal(ao_edit_distance("abcdefgh", "zzzzzzzz", 3), 3); /* capped */
}

/* ---- cross-key checks ---------------------------------------------------- */

static void test_cross_key_checks(void **state)
{
    (void)state;
    const struct {
        const char *word, *expect;
    } cases[] = {
        {"model.num_heads=7", "model.model_dim = 768 (default) and model.num_heads = 7 "
                              "(--override): model_dim must be divisible by num_heads"},
        {"model.vocab_size=1000", "model.vocab_size = 1000 (--override) and dataset.vocab_size "
                                  "= 60000 (default)"},
        {"dataset.dense_dim=64", "model.dense_dim = 128 (default) and dataset.dense_dim = 64"},
        {"model.num_dense_features=3", "model.num_dense_features = 3 (--override) and "
                                       "dataset.num_dense_features = 16"},
        {"training.max_steps=5", "max_steps must exceed summary_skip_steps"},
        {"training.baseline_steps=100", "training.max_steps must be at least 206"},
        {"dataset.num_samples=16", "2 steps even on one rank"},
        {"scheduler.warmup_steps=5000", "warm-up cannot be longer than the schedule"},
        {"fsdp.shard_group_size=4", "applies only to hybrid_shard"},
        {"profiling.trace_filename=a/b.json", "must be a plain file name"},
        {"training.output_dir=''", "training.output_dir =  (--override): must not be empty"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *err = override_fails(cases[i].word);
        if (!strstr(err, cases[i].expect) || !strstr(err, "aorta: error: config: "))
            fail_msg("%s: got '%s', want '%s'", cases[i].word, err, cases[i].expect);
    }
    char *ctas[] = {"distributed.nccl.min_ctas=8", "distributed.nccl.max_ctas=4"};
    assert_non_null(strstr(load_fails(NULL, ctas, 2), "min_ctas cannot exceed max_ctas"));
    /* The origin of a file value is its path:line. */
    char *path = write_file("mismatch.yaml", "dataset:\n  vocab_size: 500\n", -1);
    const char *err = load_fails(path, NULL, 0);
    char *want = ao_asprintf("dataset.vocab_size = 500 (%s:2)", path);
    assert_non_null(strstr(err, want));
    free(want);
    free(path);
    /* hybrid_shard with a group size, and a config that only resolves, are fine. */
    struct ao_config cfg;
    char *hybrid[] = {"fsdp.sharding_strategy=hybrid_shard", "fsdp.shard_group_size=4"};
    load_ok(&cfg, NULL, hybrid, 2);
    ao_config_free(&cfg);
    char *heads[] = {"model.num_heads=7"};
    capture_begin();
    int rc = ao_config_resolve(&cfg, NULL, heads, 1);
    capture_end();
    assert_int_equal(rc, 0);
    capture_begin();
    rc = ao_config_validate(&cfg);
    err = capture_end();
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_non_null(strstr(err, "model.num_heads = 7 (--override)"));
    ao_config_free(&cfg);
}

/* ---- the seed's file ------------------------------------------------------- */

static void test_seed_file_warns_once_per_no_effect_key(void **state)
{
    (void)state;
    const char *src = getenv("AORTA_SOURCE_DIR");
    char *path = ao_asprintf("%s/tests/data/seed_default.yaml", src ? src : ".");
    static const char *no_effect[] = {"fsdp.use_orig_params",
                                      "fsdp.param_init_device",
                                      "compile.enabled",
                                      "compile.backend",
                                      "compile.mode",
                                      "compile.fullgraph",
                                      "compile.dynamic",
                                      "compile.options",
                                      "distributed.overlap_reduce_scatter",
                                      "distributed.overlap_clone_for_reduce_scatter",
                                      "profiling.record_shapes",
                                      "profiling.profile_memory",
                                      "profiling.with_stack",
                                      "profiling.with_flops",
                                      "profiling.tensorboard"};
    const int n = (int)(sizeof no_effect / sizeof no_effect[0]);
    /* The file's keys in one summary line; each override by name. */
    char *ov[] = {"compile.enabled=true", "compile.mode=reduce-overhead", "compile.enabled=false"};
    struct ao_config cfg;
    capture_begin();
    int rc = ao_config_load(&cfg, path, ov, 3);
    const char *err = capture_end();
    assert_int_equal(rc, 0);
    assert_int_equal(ao_config_noop_warnings(&cfg), n);
    assert_int_equal(count_of(err, "aorta: warning: "), 1 + 3);
    assert_int_equal(count_of(err, "15 keys from the reference toolkit's format are accepted and "
                                   "ignored: fsdp.use_orig_params, fsdp.param_init_device, "),
                     1);
    assert_int_equal(count_of(err, "; see docs/config.md"), 1);
    for (int i = 0; i < n; i++)
        if (count_of(err, no_effect[i]) < 1) fail_msg("%s is not named", no_effect[i]);
    assert_int_equal(count_of(err, "--override: compile.enabled has no effect in aorta"), 2);
    assert_int_equal(count_of(err, "--override: compile.mode has no effect in aorta"), 1);
    /* The file's values equal the defaults; only the origins differ. */
    struct ao_config defaults;
    load_ok(&defaults, NULL, NULL, 0);
    assert_int_equal(cfg.training.batch_size, defaults.training.batch_size);
    assert_true(cfg.optimizer.lr == defaults.optimizer.lr);
    assert_int_equal(cfg.fsdp.limit_all_gathers, 2);
    assert_string_equal(cfg.compile.mode, "reduce-overhead");
    ao_config_free(&defaults);
    ao_config_free(&cfg);
    free(path);
}

/* ---- hostile input ----------------------------------------------------------- */

static void test_hostile_yaml(void **state)
{
    (void)state;
    /* Empty and comment-only files are the defaults. */
    struct ao_config cfg;
    char *path = write_file("empty.yaml", "", 0);
    load_ok(&cfg, path, NULL, 0);
    ao_config_free(&cfg);
    free(path);
    path = write_file("comment.yaml", "# nothing\n", -1);
    load_ok(&cfg, path, NULL, 0);
    ao_config_free(&cfg);
    free(path);
    /* An alias to a scalar is a value like any other. */
    path = write_file("alias.yaml",
                      "training:\n  max_steps: &n 40\n  log_interval: *n\n  batch_size: 4\n", -1);
    load_ok(&cfg, path, NULL, 0);
    assert_int_equal(cfg.training.log_interval, 40);
    ao_config_free(&cfg);
    free(path);

    char *deep = ao_malloc(400002);
    memset(deep, '[', 200000);
    memset(deep + 200000, ']', 200000);
    deep[400000] = '\n';
    deep[400001] = '\0';
    char *deep_map = ao_asprintf("compile:\n  options: %s", deep);
    char *many = ao_malloc(5000 * 12 + 16);
    size_t o = (size_t)sprintf(many, "x:\n");
    for (int i = 0; i < 5000; i++) o += (size_t)sprintf(many + o, "  k%d: 1\n", i);
    const struct {
        const char *name, *text;
        long len;
        const char *expect;
    } cases[] = {
        {"syntax.yaml", "training:\n  batch_size: [1\n", -1, ":3:1: YAML syntax error"},
        {"list.yaml", "- a\n- b\n", -1, ":1:1: the top level must be a mapping"},
        {"scalar.yaml", "hello\n", -1, "not a single value"},
        {"deep.yaml", deep, -1, "nested deeper than 64 levels"},
        {"deep_options.yaml", deep_map, -1, "nested deeper than 64 levels"},
        {"junk.yaml", "x:\n  y:\n    z: {a: [1, {b: c}]}\n", -1, "unknown section 'x'"},
        {"many.yaml", many, -1, "unknown section 'x'"},
        {"self_alias.yaml", "compile:\n  options: &x {a: *x}\n", -1, "too deeply nested"},
        {"alias_section.yaml", "training: &t\n  batch_size: 4\nmodel: *t\n", -1,
         "unknown key 'model.batch_size'"},
        {"non_utf8.yaml", "training:\n  output_dir: \xff\xfe\n", -1,
         ":2:15: YAML syntax error: invalid leading UTF-8 octet"},
        {"nul.yaml", "training:\n  output_dir: a\0b\n", 28, "YAML syntax error"},
        {"dup.yaml", "training:\n  batch_size: 4\n  batch_size: 5\n", -1,
         ":3:3: duplicate key 'training.batch_size' (first at line 2)"},
        {"dup_spelled.yaml", "training.batch_size: 4\ntraining:\n  batch_size: 5\n", -1,
         ":3:3: duplicate key 'training.batch_size' (first at line 1)"},
        {"dup_section.yaml", "training: {batch_size: 4}\ntraining: {max_steps: 9}\n", -1,
         ":2:1: duplicate key 'training' (first at line 1)"},
        {"two_docs.yaml", "training: {batch_size: 4}\n---\nmodel: {}\n", -1,
         "holds one YAML document; found a second"},
        {"complex_key.yaml", "training:\n  ? [a]\n  : 1\n", -1, "a key must be a name"},
        {"section_value.yaml", "training: 5\n", -1, "'training' is a section"},
        {"tabs.yaml", "training:\n\tbatch_size: 4\n", -1, "YAML syntax error"},
        {"bad_tag.yaml", "training: !!binary AAAA\n", -1, "'training' is a section"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        path = write_file(cases[i].name, cases[i].text, cases[i].len);
        const char *err = load_fails(path, NULL, 0);
        if (!strstr(err, cases[i].expect) || !strstr(err, path))
            fail_msg("%s: got '%s', want '%s'", cases[i].name, err, cases[i].expect);
        free(path);
    }
    free(deep_map);
    free(many);
    char *ov[] = {deep};
    memmove(deep + 20, deep, 380000);
    memcpy(deep, "training.batch_size=", 20);
    assert_non_null(strstr(load_fails(NULL, ov, 1), "nested deeper than 64 levels"));
    free(deep);
}

/* ---- printing ---------------------------------------------------------------- */

struct collected {
    int n;
    char *text[256];
};

static void collect(void *ctx, const struct ao_config_item *item)
{
    struct collected *c = ctx;
    assert_true(c->n < 256);
    c->text[c->n++] =
        ao_asprintf("%s=%s|%d|%d", item->key, item->value, item->is_null, item->no_effect);
}

static void free_collected(struct collected *c)
{
    for (int i = 0; i < c->n; i++) free(c->text[i]);
}

static void test_print_yaml_reads_back_the_same(void **state)
{
    (void)state;
    char *ov[] = {"training.output_dir=\"odd dir: #1 'x'\"",
                  "optimizer.lr=1e-5",
                  "optimizer.betas=[0.1, 0.30000000000000004]",
                  "fsdp.param_dtype=bf16",
                  "profiling.trace_filename=yes",
                  "compile.options={a: [1, \"q\\\"\"]}",
                  "streams.h2d.priority=-7",
                  "distributed.timeout_s=12.5"};
    struct ao_config cfg, back;
    capture_begin();
    int rc = ao_config_load(&cfg, NULL, ov, 8);
    capture_end();
    assert_int_equal(rc, 0);
    char *path = ao_asprintf("%s/printed.yaml", tmpdir);
    FILE *f = fopen(path, "w");
    ao_config_print_yaml(f, &cfg, 1);
    fclose(f);
    capture_begin();
    rc = ao_config_load(&back, path, NULL, 0);
    const char *err = capture_end();
    if (rc) fail_msg("printed YAML does not load: %s", err);
    struct collected a = {0}, b = {0};
    ao_config_foreach(&cfg, collect, &a);
    ao_config_foreach(&back, collect, &b);
    assert_int_equal(a.n, b.n);
    for (int i = 0; i < a.n; i++) assert_string_equal(a.text[i], b.text[i]);
    assert_string_equal(back.training.output_dir, "odd dir: #1 'x'");
    assert_string_equal(back.profiling.trace_filename, "yes");
    assert_true(back.optimizer.betas[1] == 0.30000000000000004);
    /* Origins as trailing comments. */
    f = fopen(path, "r");
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "  lr: 1e-5") && strstr(line, "# --override")) found = 1;
    fclose(f);
    assert_true(found);
    free_collected(&a);
    free_collected(&b);
    ao_config_free(&cfg);
    ao_config_free(&back);
    free(path);
}

struct finder {
    const char *key;
    struct ao_config_item item;
    char value[128], origin[128];
    int n;
};

static void find_item(void *ctx, const struct ao_config_item *item)
{
    struct finder *f = ctx;
    f->n++;
    if (strcmp(item->key, f->key)) return;
    f->item = *item;
    snprintf(f->value, sizeof f->value, "%s", item->value);
    snprintf(f->origin, sizeof f->origin, "%s", item->origin);
}

static void test_foreach_and_doc(void **state)
{
    (void)state;
    struct ao_config cfg;
    char *ov[] = {"model.ff_dim=512"};
    load_ok(&cfg, NULL, ov, 1);
    struct finder f = {.key = "optimizer.betas"};
    ao_config_foreach(&cfg, find_item, &f);
    assert_int_equal(f.n, 95); /* every schema row, once */
    assert_int_equal(f.item.type, AO_CFG_FLOAT_LIST);
    assert_string_equal(f.value, "[0.9, 0.98]");
    assert_string_equal(f.origin, "default");
    struct finder g = {.key = "fsdp.param_dtype"};
    ao_config_foreach(&cfg, find_item, &g);
    assert_true(g.item.is_null);
    assert_string_equal(g.value, "null");
    struct finder h = {.key = "compile.backend"};
    ao_config_foreach(&cfg, find_item, &h);
    assert_true(h.item.no_effect);
    struct finder m = {.key = "model.ff_dim"};
    ao_config_foreach(&cfg, find_item, &m);
    assert_string_equal(m.value, "512");
    assert_string_equal(m.origin, "--override");
    assert_false(m.item.no_effect);

    /* The reference names every key. */
    char *doc = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&doc, &len);
    ao_config_print_doc(out);
    fclose(out);
    struct collected all = {0};
    ao_config_foreach(&cfg, collect, &all);
    for (int i = 0; i < all.n; i++) {
        char *key = ao_asprintf("| `%.*s` |", (int)strcspn(all.text[i], "="), all.text[i]);
        if (!strstr(doc, key)) fail_msg("doc lacks %s", key);
        free(key);
    }
    assert_non_null(strstr(doc, "- `profiling.tensorboard`: "));
    free_collected(&all);
    free(doc);
    ao_config_free(&cfg);

    char buf[64];
    ao_format_double(buf, sizeof buf, 300);
    assert_string_equal(buf, "300");
    ao_format_double(buf, sizeof buf, 1e-8);
    assert_string_equal(buf, "1e-8");
    ao_format_double(buf, sizeof buf, 0.1 + 0.2);
    assert_string_equal(buf, "0.30000000000000004");

    char small[8] = "ab";
    ao_appendf(small, sizeof small, "%d", 12);
    assert_string_equal(small, "ab12");
    ao_appendf(small, sizeof small, "%s", "xyzw"); /* truncated, terminated */
    assert_string_equal(small, "ab12xyz");
    ao_appendf(small, sizeof small, "more"); /* full: unchanged */
    assert_string_equal(small, "ab12xyz");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_are_the_seeds),
        cmocka_unit_test(test_total_steps),
        cmocka_unit_test(test_file_values_and_origins),
        cmocka_unit_test(test_unreadable_file),
        cmocka_unit_test(test_every_type_parses),
        cmocka_unit_test(test_type_errors_name_key_value_origin_and_allowed),
        cmocka_unit_test(test_overrides_apply_in_order),
        cmocka_unit_test(test_did_you_mean),
        cmocka_unit_test(test_cross_key_checks),
        cmocka_unit_test(test_seed_file_warns_once_per_no_effect_key),
        cmocka_unit_test(test_hostile_yaml),
        cmocka_unit_test(test_print_yaml_reads_back_the_same),
        cmocka_unit_test(test_foreach_and_doc),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
