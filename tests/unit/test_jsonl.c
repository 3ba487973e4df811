/* core/jsonl and core/json: run.json, the metrics writer (never appends,
 * whole lines, flush cadence), the validating reader (truncated last line,
 * bad lines, schema, missing and mistyped fields) and bit-exact round trips. */
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_files.h"

#include "core/error.h"
#include "core/json.h"
#include "core/jsonl.h"

/* ---- helpers ------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* Any finite double: raw bit patterns (subnormals, huge, negative zero) and
 * timestamp-like values; NAN with probability nan_pct %. */
static double rnd_double(int nan_pct)
{
    if ((int)(rnd() % 100) < nan_pct) return NAN;
    switch (rnd() % 3) {
    case 0: {
        double d;
        do {
            uint64_t bits = rnd();
            memcpy(&d, &bits, sizeof d);
        } while (!isfinite(d));
        return d;
    }
    case 1:
        return (double)(rnd() % 100000000000ULL) / 1000.0 + 1.0 / (double)(rnd() % 1000 + 1);
    default:
        return (double)(rnd() >> 11) * 0x1.0p-53;
    }
}

#define assert_same_double(a, b)                                                                   \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (isnan(a_) ? !isnan(b_) : memcmp(&a_, &b_, sizeof a_) != 0) {                           \
            print_error("%s = %.17g (%a), read back %.17g (%a)\n", #a, a_, a_, b_, b_);            \
            _fail(__FILE__, __LINE__);                                                             \
        }                                                                                          \
    } while (0)

static const char *const phases[] = {"train", "compute_only", "comm_only"};

static void random_record(ao_iter_record *r, long long step)
{
    ao_iter_record_init(r);
    r->world_size = (int)(rnd() % 64) + 1;
    r->rank = (int)(rnd() % (uint64_t)r->world_size);
    r->step = step;
    r->phase = phases[rnd() % 3];
    r->wall_time = 1.7e9 + (double)(rnd() % 100000000) * 1e-6;
    ao_overlap *m = &r->m;
    m->window_start_us = rnd_double(0);
    m->window_end_us = rnd_double(0);
    m->step_ms = rnd_double(0);
    m->compute_ms = rnd_double(0);
    m->comm_ms = rnd_double(0);
    m->copy_ms = rnd_double(0);
    m->overlap_ms = rnd_double(0);
    m->exposed_comm_ms = rnd_double(0);
    m->idle_ms = rnd_double(0);
    m->overlap_ratio = rnd_double(30);
    m->compute_covered_ratio = rnd_double(30);
    m->overlap_efficiency = rnd_double(30);
    for (int k = 0; k < AO_NKINDS; k++) {
        m->compute_kind_ms[k] = rnd_double(0);
        m->kinds[k].ops = (int)(rnd() % 1000);
        m->kinds[k].bytes = rnd(); /* the full range, beyond LLONG_MAX too */
        m->kinds[k].busy_ms = rnd_double(0);
        m->kinds[k].algbw_gbps = rnd_double(0);
        m->kinds[k].busbw_gbps = rnd_double(0);
    }
    for (int s = 0; s < AO_NSTREAMS; s++) {
        m->streams[s].ops = (int)(rnd() % 1000);
        m->streams[s].busy_ms = rnd_double(0);
    }
    r->loss = rnd_double(30);
    r->loss_local = rnd_double(30);
    r->grad_norm = rnd_double(30);
    r->lr = rnd_double(30);
    r->loss_scale = rnd_double(30);
    r->tokens_per_s = rnd_double(30);
    r->samples = rnd() % 4 == 0 ? -1 : (long long)(rnd() >> 2);
}

static void assert_same_record(const ao_iter_record *a, const ao_iter_record *b)
{
    assert_int_equal(a->rank, b->rank);
    assert_int_equal(a->world_size, b->world_size);
    assert_int_equal(a->step, b->step);
    assert_string_equal(a->phase, b->phase);
    assert_same_double(a->wall_time, b->wall_time);
    const ao_overlap *x = &a->m, *y = &b->m;
    assert_same_double(x->window_start_us, y->window_start_us);
    assert_same_double(x->window_end_us, y->window_end_us);
    assert_same_double(x->step_ms, y->step_ms);
    assert_same_double(x->compute_ms, y->compute_ms);
    assert_same_double(x->comm_ms, y->comm_ms);
    assert_same_double(x->copy_ms, y->copy_ms);
    assert_same_double(x->overlap_ms, y->overlap_ms);
    assert_same_double(x->exposed_comm_ms, y->exposed_comm_ms);
    assert_same_double(x->idle_ms, y->idle_ms);
    assert_same_double(x->overlap_ratio, y->overlap_ratio);
    assert_same_double(x->compute_covered_ratio, y->compute_covered_ratio);
    assert_same_double(x->overlap_efficiency, y->overlap_efficiency);
    for (int k = 0; k < AO_NKINDS; k++) {
        assert_same_double(x->compute_kind_ms[k], y->compute_kind_ms[k]);
        assert_int_equal(x->kinds[k].ops, y->kinds[k].ops);
        assert_true(x->kinds[k].bytes == y->kinds[k].bytes);
        assert_same_double(x->kinds[k].busy_ms, y->kinds[k].busy_ms);
        assert_same_double(x->kinds[k].algbw_gbps, y->kinds[k].algbw_gbps);
        assert_same_double(x->kinds[k].busbw_gbps, y->kinds[k].busbw_gbps);
    }
    for (int s = 0; s < AO_NSTREAMS; s++) {
        assert_int_equal(x->streams[s].ops, y->streams[s].ops);
        assert_same_double(x->streams[s].busy_ms, y->streams[s].busy_ms);
    }
    assert_same_double(a->loss, b->loss);
    assert_same_double(a->loss_local, b->loss_local);
    assert_same_double(a->grad_norm, b->grad_norm);
    assert_same_double(a->lr, b->lr);
    assert_same_double(a->loss_scale, b->loss_scale);
    assert_same_double(a->tokens_per_s, b->tokens_per_s);
    assert_int_equal(a->samples, b->samples);
    assert_int_equal(a->nops, b->nops);
    for (size_t i = 0; i < a->nops; i++) {
        const ao_op *p = &a->ops[i], *q = &b->ops[i];
        assert_same_double(p->start_us, q->start_us);
        assert_same_double(p->end_us, q->end_us);
        assert_true(p->bytes == q->bytes);
        assert_string_equal(p->name, q->name);
        assert_int_equal(p->unit, q->unit);
        assert_int_equal(p->stream, q->stream);
        assert_int_equal(p->cls, q->cls);
        assert_int_equal(p->kind, q->kind);
    }
}

typedef struct fixture {
    char *dir;
    char *path; /* dir/rank_00_metrics.jsonl */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->dir = make_temp_dir();
    f->path = ao_asprintf("%s/rank_00_metrics.jsonl", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    free(f->path);
    remove_temp_dir(f->dir);
    free(f);
    return 0;
}

/* A simple valid record, step s. */
static void plain_record(ao_iter_record *r, long long s)
{
    ao_iter_record_init(r);
    r->world_size = 2;
    r->rank = 1;
    r->step = s;
    r->m.step_ms = 10.0 + (double)s;
    r->m.window_start_us = 1000.0 * (double)s;
    r->m.window_end_us = 1000.0 * (double)s + 900.5;
    r->loss = 0.5;
}

static void write_records(const char *path, long long n, int flush_every)
{
    ao_jsonl_writer *w = ao_jsonl_open(path, flush_every);
    assert_non_null(w);
    for (long long s = 0; s < n; s++) {
        ao_iter_record r;
        plain_record(&r, s);
        assert_int_equal(ao_jsonl_append(w, &r), 0);
    }
    assert_int_equal(ao_jsonl_close(w), 0);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Read `path` expecting failure; returns the captured stderr. */
static char *read_expect_error(const char *path, int want_rc, ao_jsonl_stats *st)
{
    stderr_capture c;
    capture_begin(&c);
    ao_iter_record *recs;
    size_t n;
    int rc = ao_jsonl_read_all(path, &recs, &n, st);
    char *err = capture_end(&c);
    assert_int_equal(rc, want_rc);
    assert_null(recs);
    assert_int_equal(n, 0);
    return err;
}

/* One formatted record with `from` replaced by `to` in its line. */
static char *edited_line(const char *from, const char *to)
{
    ao_iter_record r;
    plain_record(&r, 3);
    size_t len;
    char *line = ao_iter_record_format(&r, &len);
    char *at = strstr(line, from);
    assert_non_null(at);
    char *out = ao_asprintf("%.*s%s%s", (int)(at - line), line, to, at + strlen(from));
    free(line);
    return out;
}

/* ---- json helpers ----------------------------------------------------------------- */

static const char *gen_one_double(yajl_gen g, double d)
{
    yajl_gen_reset(g, NULL);
    yajl_gen_clear(g);
    assert_int_equal(ao_json_gen_double(g, d), yajl_gen_status_ok);
    const unsigned char *buf;
    size_t len;
    yajl_gen_get_buf(g, &buf, &len);
    return (const char *)buf;
}

static void test_json_doubles(void **state)
{
    yajl_gen g = ao_json_gen_new(0);
    assert_string_equal(gen_one_double(g, 0.1), "0.1");
    assert_string_equal(gen_one_double(g, 1.0), "1");
    assert_string_equal(gen_one_double(g, 1234567.25), "1234567.25");
    assert_string_equal(gen_one_double(g, 1.0 / 3.0), "0.3333333333333333");
    assert_string_equal(gen_one_double(g, 0.1 + 0.2), "0.30000000000000004");
    assert_string_equal(gen_one_double(g, NAN), "null");
    assert_string_equal(gen_one_double(g, INFINITY), "null");
    assert_string_equal(gen_one_double(g, -INFINITY), "null");
    /* A subnormal survives the trip: yajl_tree alone would lose it. */
    double tiny = 4.9406564584124654e-324;
    char *text = strdup(gen_one_double(g, tiny));
    yajl_val v = yajl_tree_parse(text, NULL, 0);
    assert_non_null(v);
    assert_same_double(tiny, ao_json_number(v));
    yajl_tree_free(v);
    free(text);
    /* Raw JSON is validated before anything is written. */
    yajl_gen_reset(g, NULL);
    yajl_gen_clear(g);
    assert_int_not_equal(ao_json_gen_raw(g, "[1, 2"), yajl_gen_status_ok);
    assert_int_equal(ao_json_gen_raw(g, "[0.9, 0.95, {\"a\": null}]"), yajl_gen_status_ok);
    const unsigned char *buf;
    size_t len;
    yajl_gen_get_buf(g, &buf, &len);
    assert_string_equal((const char *)buf, "[0.9,0.95,{\"a\":null}]");
    yajl_gen_free(g);
}

/* The fast 15-digit path gives exactly the text of the printf search it
 * replaces, on random bit patterns and on the kinds of numbers records hold
 * (times from float event readings, counts, decimals, ratios). */
static int printf_search(double d, char *buf)
{
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, AO_JSON_DOUBLE_MAX, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    return n;
}

static void test_json_double_text(void **state)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    char want[AO_JSON_DOUBLE_MAX], got[AO_JSON_DOUBLE_MAX];
    for (int i = 0; i < 400000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double d;
        switch (i % 6) {
        case 0: /* any finite bit pattern */
            memcpy(&d, &x, sizeof d);
            if (!isfinite(d)) continue;
            break;
        case 1: /* µs from a float ms reading */
            d = 1000.0 * (double)(float)((double)(x % 100000000) * 1e-6);
            break;
        case 2: /* a short decimal, anywhere from 1e-12 to 1e40 */
            d = (double)(long long)(x % 100000) * pow(10.0, (double)((int)(x >> 40) % 53 - 24));
            break;
        case 3: /* an integer */
            d = (double)(long long)(x >> (x % 50));
            break;
        case 4: /* a ratio */
            d = (double)(x % 1000003) / (double)(1 + (x >> 32) % 999983);
            break;
        default: /* at a power of two, where the gap below is half the gap above */
            d = ldexp(1.0, (int)(x % 90) - 40);
            if (x & 2) d = nextafter(d, (x & 4) ? 0.0 : INFINITY);
            break;
        }
        if (x & 1) d = -d;
        int nw = printf_search(d, want), ng = ao_json_format_double(d, got);
        if (nw != ng || strcmp(want, got) != 0) fail_msg("%a: printf %s, fast %s", d, want, got);
    }
}

/* ---- run.json --------------------------------------------------------------------- */

static void test_env_filter(void **state)
{
    char *envp[] = {"PATH=/usr/bin",
                    "SLURM_JOB_ID=42",
                    "NCCL_DEBUG=INFO",
                    "MY_NCCL_DEBUG=no",
                    "NCCLX=no",
                    "AORTA_RUN_ID=r1",
                    "HSA_ENABLE_SDMA=0",
                    "HIP_VISIBLE_DEVICES=0,1",
                    "CUDA_VISIBLE_DEVICES=1",
                    "OMPI_COMM_WORLD_RANK=0",
                    "RCCL_MSCCL_ENABLE=0",
                    "HOME=/root",
                    "cuda_lower=no",
                    "NCCL_ALGO=Ring",
                    NULL};
    size_t n;
    char **out = ao_env_filter(envp, &n);
    const char *want[] = {
        "AORTA_RUN_ID=r1",        "CUDA_VISIBLE_DEVICES=1", "HIP_VISIBLE_DEVICES=0,1",
        "HSA_ENABLE_SDMA=0",      "NCCL_ALGO=Ring",         "NCCL_DEBUG=INFO",
        "OMPI_COMM_WORLD_RANK=0", "RCCL_MSCCL_ENABLE=0",    "SLURM_JOB_ID=42"};
    assert_int_equal(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++) assert_string_equal(out[i], want[i]);
    assert_null(out[n]);
    free(out);

    /* The process environment, through setenv. */
    setenv("NCCL_TEST_JSONL_VAR", "7", 1);
    setenv("XNCCL_TEST_JSONL_VAR", "8", 1);
    extern char **environ;
    out = ao_env_filter(environ, &n);
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(out[i], "NCCL_TEST_JSONL_VAR=7") == 0) found++;
        assert_null(strstr(out[i], "XNCCL_TEST_JSONL_VAR"));
        if (i > 0) assert_true(strcmp(out[i - 1], out[i]) < 0);
    }
    assert_int_equal(found, 1);
    free(out);
    unsetenv("NCCL_TEST_JSONL_VAR");
    unsetenv("XNCCL_TEST_JSONL_VAR");
}

typedef struct fake_config {
    const ao_config_entry *entries;
    size_t n;
} fake_config;

static void visit_fake(const void *cfg, ao_config_emit_fn emit, void *emit_ctx)
{
    const fake_config *fc = cfg;
    for (size_t i = 0; i < fc->n; i++) emit(emit_ctx, &fc->entries[i]);
}

static yajl_val at(yajl_val root, const char *a, const char *b, const char *c)
{
    const char *path[] = {a, b, c, NULL};
    return yajl_tree_get(root, path, yajl_t_any);
}

/* "end" of dir/run.json (heap), or NULL. */
static char *end_of(const char *dir)
{
    char *path = ao_asprintf("%s/run.json", dir), err[256];
    char *text = slurp(path, NULL);
    free(path);
    yajl_val root = text ? yajl_tree_parse(text, err, sizeof err) : NULL;
    free(text);
    yajl_val e = ao_json_member(root, "end");
    char *end = YAJL_IS_STRING(e) ? strdup(e->u.string) : NULL;
    if (root) yajl_tree_free(root);
    return end;
}

/* The first end recorded stays: later records (the failure's consequences)
 * and rank 0's rewrites with the unrecorded end leave it. */
static void test_run_end_recorded_once(void **state)
{
    fixture *f = *state;
    char *path = ao_asprintf("%s/run.json", f->dir);
    assert_int_equal(ao_run_json_record_end(f->dir, "early"), 0); /* no run.json yet */
    ao_run_header h = {.run_id = "r",
                       .command = "train",
                       .world_size = 2,
                       .unanchored = 1,
                       .end = AO_RUN_END_UNRECORDED};
    assert_int_equal(ao_run_json_write(path, &h), 0);
    char *e = end_of(f->dir);
    assert_string_equal(e, AO_RUN_END_UNRECORDED);
    free(e);
    assert_int_equal(ao_run_json_record_end(f->dir, "rank 1 killed by signal 9 (Killed)"), 1);
    assert_int_equal(ao_run_json_record_end(f->dir, "timed out on rank 0: a consequence"), 0);
    assert_int_equal(ao_run_json_write(path, &h), 0);
    e = end_of(f->dir);
    assert_string_equal(e, "rank 1 killed by signal 9 (Killed)");
    free(e);
    free(path);
}

static void test_run_json(void **state)
{
    fixture *f = *state;
    char *path = ao_asprintf("%s/run.json", f->dir);
    char *argv[] = {"aorta", "train", "--override", "training.lr=3e-4", NULL};
    const ao_config_entry entries[] = {
        {"training.lr", ao_json_double(3e-4), "float", "--override"},
        {"training.max_steps", ao_json_int(100), "int", "configs/a.yaml:12:5"},
        {"optimizer.betas", ao_json_raw("[0.9, 0.95]"), "list", "default"},
        {"fsdp.sharding_strategy", ao_json_str("full_shard"), "enum", "default"},
        {"training.tf32", ao_json_bool(1), "bool", "default"},
    };
    fake_config fc = {entries, sizeof entries / sizeof entries[0]};
    const ao_json_field versions[] = {{"aorta", ao_json_str("0.1.0")},
                                      {"nccl", ao_json_str("2.21.5")}};
    const ao_json_field dev0[] = {{"name", ao_json_str("NVIDIA H200")},
                                  {"ordinal", ao_json_int(0)},
                                  {"total_mem", ao_json_int(150000000000LL)}};
    const ao_json_field dev1[] = {{"name", ao_json_str("NVIDIA H200")},
                                  {"ordinal", ao_json_int(1)}};
    const ao_json_object devices[] = {{dev0, 3}, {dev1, 2}};
    char *envp[] = {"NCCL_DEBUG=WARN", "PATH=/bin", "AORTA_RUN_ID=r\"1", NULL};
    ao_run_header h = {
        .run_id = "r\"1",
        .command = "train",
        .argc = 4,
        .argv = argv,
        .host = "node-7",
        .world_size = 2,
        .config_visit = visit_fake,
        .config = &fc,
        .envp = envp,
        .versions = versions,
        .nversions = 2,
        .devices = devices,
        .ndevices = 2,
        .anchor_realtime = {1763788502, 123456789},
        .anchor_monotonic = {5000, 42},
    };
    assert_int_equal(ao_run_json_write(path, &h), 0);

    char *text = slurp(path, NULL);
    assert_non_null(text);
    char err[256];
    yajl_val root = yajl_tree_parse(text, err, sizeof err);
    if (!root) fail_msg("run.json does not parse: %s\n%s", err, text);
    assert_int_equal(YAJL_GET_INTEGER(at(root, "schema", NULL, NULL)), 1);
    assert_string_equal(YAJL_GET_STRING(at(root, "run_id", NULL, NULL)), "r\"1");
    assert_string_equal(YAJL_GET_STRING(at(root, "command", NULL, NULL)), "train");
    assert_string_equal(YAJL_GET_STRING(at(root, "host", NULL, NULL)), "node-7");
    assert_int_equal(YAJL_GET_INTEGER(at(root, "world_size", NULL, NULL)), 2);
    assert_int_equal(YAJL_GET_INTEGER(at(root, "pid", NULL, NULL)), getpid());
    yajl_val av = at(root, "argv", NULL, NULL);
    assert_true(YAJL_IS_ARRAY(av));
    assert_int_equal(av->u.array.len, 4);
    assert_string_equal(YAJL_GET_STRING(av->u.array.values[3]), "training.lr=3e-4");

    assert_int_equal(YAJL_GET_INTEGER(at(root, "anchor", "realtime_ns", NULL)),
                     1763788502123456789LL);
    assert_same_double(ao_json_number(at(root, "anchor", "realtime_s", NULL)),
                       1763788502.123456789);
    assert_string_equal(YAJL_GET_STRING(at(root, "anchor", "utc", NULL)),
                        "2025-11-22T05:15:02.123456789Z");
    assert_int_equal(YAJL_GET_INTEGER(at(root, "anchor", "monotonic_ns", NULL)), 5000000000042LL);

    assert_string_equal(YAJL_GET_STRING(at(root, "versions", "nccl", NULL)), "2.21.5");
    yajl_val dv = at(root, "devices", NULL, NULL);
    assert_true(YAJL_IS_ARRAY(dv));
    assert_int_equal(dv->u.array.len, 2);
    assert_int_equal(YAJL_GET_INTEGER(ao_json_member(dv->u.array.values[0], "total_mem")),
                     150000000000LL);

    assert_same_double(ao_json_number(at(root, "config", "training.lr", "value")), 3e-4);
    assert_string_equal(YAJL_GET_STRING(at(root, "config", "training.lr", "origin")), "--override");
    assert_string_equal(YAJL_GET_STRING(at(root, "config", "training.max_steps", "origin")),
                        "configs/a.yaml:12:5");
    yajl_val betas = at(root, "config", "optimizer.betas", "value");
    assert_true(YAJL_IS_ARRAY(betas));
    assert_same_double(ao_json_number(betas->u.array.values[1]), 0.95);
    assert_string_equal(YAJL_GET_STRING(at(root, "config", "fsdp.sharding_strategy", "value")),
                        "full_shard");
    assert_true(YAJL_IS_TRUE(at(root, "config", "training.tf32", "value")));
    assert_string_equal(YAJL_GET_STRING(at(root, "config", "training.tf32", "type")), "bool");

    yajl_val env = at(root, "env", NULL, NULL);
    assert_true(YAJL_IS_OBJECT(env));
    assert_int_equal(env->u.object.len, 2);
    assert_string_equal(env->u.object.keys[0], "AORTA_RUN_ID");
    assert_string_equal(YAJL_GET_STRING(env->u.object.values[0]), "r\"1");
    assert_string_equal(YAJL_GET_STRING(at(root, "env", "NCCL_DEBUG", NULL)), "WARN");
    assert_null(at(root, "env", "PATH", NULL));
    yajl_tree_free(root);
    free(text);

    /* A config value that is not JSON: an error naming the key, and the
     * earlier run.json is left as it was (written through a temp file). */
    const ao_config_entry bad[] = {{"optimizer.betas", ao_json_raw("[0.9,"), "list", "x"}};
    fake_config fb = {bad, 1};
    h.config = &fb;
    h.host = NULL;
    stderr_capture c;
    capture_begin(&c);
    int rc = ao_run_json_write(path, &h);
    char *msg = capture_end(&c);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_contains(msg, "\"optimizer.betas\" is not valid JSON");
    free(msg);
    text = slurp(path, NULL);
    assert_contains(text, "node-7");
    free(text);

    /* Only run.json in the directory: no temporary file left behind. */
    char *tmp_glob = ao_asprintf("%s/run.json.tmp.%ld", f->dir, (long)getpid());
    assert_int_not_equal(access(tmp_glob, F_OK), 0);
    free(tmp_glob);
    free(path);
}

/* ---- records ----------------------------------------------------------------------- */

static void test_random_records_round_trip(void **state)
{
    fixture *f = *state;
    enum { N = 300 };
    ao_iter_record *want = calloc(N, sizeof *want);
    ao_jsonl_writer *w = ao_jsonl_open(f->path, 7);
    assert_non_null(w);
    for (int i = 0; i < N; i++) {
        random_record(&want[i], i);
        assert_int_equal(ao_jsonl_append(w, &want[i]), 0);
    }
    assert_int_equal(ao_jsonl_close(w), 0);

    ao_iter_record *got;
    size_t n;
    ao_jsonl_stats st;
    assert_int_equal(ao_jsonl_read_all(f->path, &got, &n, &st), 0);
    assert_int_equal(n, N);
    assert_int_equal(st.lines, N);
    assert_int_equal(st.records, N);
    assert_int_equal(st.truncated, 0);
    int nans = 0;
    for (int i = 0; i < N; i++) {
        assert_same_record(&want[i], &got[i]);
        nans += isnan(got[i].m.overlap_ratio) + isnan(got[i].loss);
    }
    assert_true(nans > 0); /* the null path was exercised */
    ao_iter_records_free(got, n);
    free(want);

    /* NAN and ±inf are written as null. */
    ao_iter_record r;
    plain_record(&r, 0);
    r.m.overlap_ratio = NAN;
    r.loss = INFINITY;
    r.samples = -1;
    char *line = ao_iter_record_format(&r, NULL);
    assert_contains(line, "\"overlap_ratio\":null");
    assert_contains(line, "\"loss\":null");
    assert_contains(line, "\"samples\":null");
    assert_contains(line, "\"compute_broadcast_ms\":0");
    assert_contains(line, "\"streams\":{\"compute\":{\"ops\":0,\"busy_ms\":0}");
    assert_contains(line, "\"collectives\":{\"allgather\":{\"ops\":0,\"bytes\":0,\"busy_ms\":0,"
                          "\"algbw_gbps\":0,\"busbw_gbps\":0}");
    assert_null(strstr(line, "\"ops\":["));
    assert_int_equal(strchr(line, '\n') - line, (long)strlen(line) - 1);
    free(line);
}

static void test_ops_round_trip(void **state)
{
    fixture *f = *state;
    const ao_op ops[] = {
        {0.5, 120.25, 0, "forward", 3, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE, 0, 0},
        {1.0, 99.0, 1ULL << 28, "allgather", 4, AO_STREAM_ALLGATHER, AO_CLASS_COMM,
         AO_KIND_ALLGATHER, 0, 0},
        {2.0, 2.0, 9223372036854775813ULL, "reducescatter", 0, AO_STREAM_REDUCESCATTER,
         AO_CLASS_COMM, AO_KIND_REDUCESCATTER, 0, 0},
        {3.0, 50.0, 4096, "bucket", -1, AO_STREAM_ALLREDUCE, AO_CLASS_COMM, AO_KIND_ALLREDUCE, 0,
         0},
        {4.0, 5.0, 64, "broadcast", -1, AO_STREAM_ALLREDUCE, AO_CLASS_COMM, AO_KIND_BROADCAST, 0,
         0},
        {1e9 + 0.125, 1e9 + 7.5, 1 << 20, "h2d", -1, AO_STREAM_H2D, AO_CLASS_COPY, AO_KIND_NONE, 0,
         0},
    };
    ao_jsonl_writer *w = ao_jsonl_open(f->path, 10);
    ao_iter_record a, b, empty;
    plain_record(&a, 1);
    a.ops = ops;
    a.nops = sizeof ops / sizeof ops[0];
    plain_record(&b, 2);
    plain_record(&empty, 3);
    empty.ops = ops; /* a profiled step with no ops: an empty array */
    empty.nops = 0;
    assert_int_equal(ao_jsonl_append(w, &a), 0);
    assert_int_equal(ao_jsonl_append(w, &b), 0);
    assert_int_equal(ao_jsonl_append(w, &empty), 0);
    assert_int_equal(ao_jsonl_close(w), 0);

    char *text = slurp(f->path, NULL);
    assert_contains(text, "{\"stream\":\"allgather\",\"name\":\"allgather\",\"class\":\"comm\","
                          "\"kind\":\"allgather\",\"unit\":4,\"start_us\":1,\"end_us\":99,"
                          "\"bytes\":268435456}");
    assert_contains(text, "\"kind\":null,\"unit\":null");
    assert_contains(text, "\"ops\":[]");
    free(text);

    ao_iter_record *got;
    size_t n;
    assert_int_equal(ao_jsonl_read_all(f->path, &got, &n, NULL), 0);
    assert_int_equal(n, 3);
    assert_same_record(&a, &got[0]);
    assert_same_record(&b, &got[1]);
    assert_null(got[1].ops);
    assert_int_equal(got[2].nops, 0);
    assert_non_null(got[2].ops);
    ao_iter_records_free(got, n);

    /* An op out of range is refused by the writer. */
    ao_op bad = ops[0];
    bad.stream = AO_NSTREAMS;
    a.ops = &bad;
    a.nops = 1;
    stderr_capture c;
    capture_begin(&c);
    char *line = ao_iter_record_format(&a, NULL);
    char *err = capture_end(&c);
    assert_null(line);
    assert_contains(err, "op 0 (forward) has stream 5");
    free(err);
}

static int extra_telemetry(void *ctx, yajl_gen g)
{
    int *fail = ctx;
    if (*fail) return 1;
    ao_json_gen_str(g, "gpu_temp_c");
    yajl_gen_integer(g, 61);
    ao_json_gen_str(g, "power_w");
    ao_json_gen_double(g, 612.5);
    return 0;
}

static int check_extra(void *ctx, ao_iter_record *r, yajl_val line)
{
    int *seen = ctx;
    const char *path[] = {"extra", "gpu_temp_c", NULL};
    assert_int_equal(YAJL_GET_INTEGER(yajl_tree_get(line, path, yajl_t_number)), 61);
    assert_int_equal(r->step, 4);
    (*seen)++;
    return 0;
}

static void test_extra_hook(void **state)
{
    fixture *f = *state;
    int fail = 0, seen = 0;
    ao_iter_record r;
    plain_record(&r, 4);
    r.extra = extra_telemetry;
    r.extra_ctx = &fail;
    ao_jsonl_writer *w = ao_jsonl_open(f->path, 1);
    assert_int_equal(ao_jsonl_append(w, &r), 0);
    fail = 1;
    stderr_capture c;
    capture_begin(&c);
    int rc = ao_jsonl_append(w, &r);
    char *err = capture_end(&c);
    assert_int_equal(rc, -1);
    assert_contains(err, "step 4: the \"extra\" writer failed");
    free(err);
    assert_int_equal(ao_jsonl_close(w), 0);

    ao_jsonl_stats st;
    assert_int_equal(ao_jsonl_read(f->path, check_extra, &seen, &st), 0);
    assert_int_equal(seen, 1); /* the failed append wrote nothing */
    assert_int_equal(st.lines, 1);
}

/* ---- writer ------------------------------------------------------------------------ */

static void test_never_appends(void **state)
{
    fixture *f = *state;
    write_records(f->path, 2, 1);
    size_t before;
    free(slurp(f->path, &before));
    stderr_capture c;
    capture_begin(&c);
    ao_jsonl_writer *w = ao_jsonl_open(f->path, 1);
    char *err = capture_end(&c);
    assert_null(w);
    assert_contains(err, "rank_00_metrics.jsonl: the metrics file already exists; aorta never "
                         "appends");
    free(err);
    size_t after;
    free(slurp(f->path, &after));
    assert_int_equal(before, after);

    char *missing = ao_asprintf("%s/no/such/dir/x.jsonl", f->dir);
    capture_begin(&c);
    w = ao_jsonl_open(missing, 1);
    err = capture_end(&c);
    assert_null(w);
    assert_contains(err, "cannot create the metrics file: No such file or directory");
    free(err);
    free(missing);
    assert_int_equal(ao_jsonl_close(NULL), 0);
}

static off_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static void test_flush_cadence(void **state)
{
    fixture *f = *state;
    ao_jsonl_writer *w = ao_jsonl_open(f->path, 3);
    ao_iter_record r;
    plain_record(&r, 0);
    size_t len;
    char *line = ao_iter_record_format(&r, &len);
    free(line);
    for (int i = 0; i < 2; i++) assert_int_equal(ao_jsonl_append(w, &r), 0);
    assert_int_equal(file_size(f->path), 0); /* buffered */
    assert_int_equal(ao_jsonl_append(w, &r), 0);
    assert_int_equal(file_size(f->path), (off_t)(3 * len));
    assert_int_equal(ao_jsonl_append(w, &r), 0);
    assert_int_equal(file_size(f->path), (off_t)(3 * len));
    assert_int_equal(ao_jsonl_flush(w), 0);
    assert_int_equal(file_size(f->path), (off_t)(4 * len));
    assert_int_equal(ao_jsonl_append(w, &r), 0);
    assert_int_equal(ao_jsonl_close(w), 0);
    assert_int_equal(file_size(f->path), (off_t)(5 * len));
}

/* ---- reader ------------------------------------------------------------------------ */

static void test_truncated_last_line(void **state)
{
    fixture *f = *state;
    write_records(f->path, 5, 1);
    ao_iter_record r;
    plain_record(&r, 5);
    size_t len;
    char *line = ao_iter_record_format(&r, &len);
    int fd = open(f->path, O_WRONLY | O_APPEND);
    assert_int_equal(write(fd, line, len / 2), (ssize_t)(len / 2));
    close(fd);

    ao_iter_record *got;
    size_t n;
    ao_jsonl_stats st;
    stderr_capture c;
    capture_begin(&c);
    int rc = ao_jsonl_read_all(f->path, &got, &n, &st);
    char *err = capture_end(&c);
    assert_int_equal(rc, 0);
    assert_int_equal(n, 5);
    assert_int_equal(st.records, 5);
    assert_int_equal(st.lines, 6);
    assert_int_equal(st.truncated, 1);
    assert_contains(err, "aorta: warning: ");
    assert_contains(err, "rank_00_metrics.jsonl:6: the last line is incomplete");
    assert_int_equal(got[4].step, 4);
    ao_iter_records_free(got, n);
    free(err);

    /* A complete last object without its newline is a record, not a loss. */
    unlink(f->path);
    write_records(f->path, 2, 1);
    fd = open(f->path, O_WRONLY | O_APPEND);
    assert_int_equal(write(fd, line, len - 1), (ssize_t)(len - 1));
    close(fd);
    assert_int_equal(ao_jsonl_read_all(f->path, &got, &n, &st), 0);
    assert_int_equal(n, 3);
    assert_int_equal(st.truncated, 0);
    assert_int_equal(got[2].step, 5);
    ao_iter_records_free(got, n);
    free(line);
}

static void test_corrupt_middle_line(void **state)
{
    fixture *f = *state;
    write_records(f->path, 5, 1);
    char *text = slurp(f->path, NULL);
    /* Cut line 3 short but keep its newline: a bad line, not a truncated end. */
    char *l3 = text;
    for (int i = 0; i < 2; i++) l3 = strchr(l3, '\n') + 1;
    char *end3 = strchr(l3, '\n');
    memmove(l3 + 40, end3, strlen(end3) + 1);
    write_text(f->path, text);
    free(text);

    ao_jsonl_stats st;
    char *err = read_expect_error(f->path, AO_EXIT_USAGE, &st);
    assert_contains(err, "rank_00_metrics.jsonl:3: not a valid JSON line");
    assert_int_equal(st.records, 2);
    free(err);

    /* A line that is JSON but not an object. */
    write_text(f->path, "[1,2]\n");
    err = read_expect_error(f->path, AO_EXIT_USAGE, NULL);
    assert_contains(err, ":1: a metrics record must be a JSON object");
    free(err);

    /* Blank lines are skipped, counted, and do not shift line numbers. */
    char *good = edited_line("\"step\":3", "\"step\":3");
    char *bad = edited_line("\"step\":3", "\"step\":\"3\"");
    char *mixed = ao_asprintf("%s\n%s%s", good, good, bad);
    write_text(f->path, mixed);
    err = read_expect_error(f->path, AO_EXIT_USAGE, &st);
    assert_contains(err, ":4: field \"step\" must be an integer");
    assert_int_equal(st.blank, 1);
    free(err);
    free(mixed);
    free(good);
    free(bad);

    stderr_capture c;
    capture_begin(&c);
    char *missing = ao_asprintf("%s/none.jsonl", f->dir);
    int rc = ao_jsonl_read(missing, NULL, NULL, &st);
    err = capture_end(&c);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_contains(err, "none.jsonl: cannot read the metrics file: No such file or directory");
    free(err);
    free(missing);
}

static void test_schema_mismatch(void **state)
{
    fixture *f = *state;
    char *good = edited_line("\"schema\":1", "\"schema\":1");
    char *v2 = edited_line("\"schema\":1", "\"schema\":2");
    char *text = ao_asprintf("%s%s%s", good, good, v2);
    write_text(f->path, text);
    char *err = read_expect_error(f->path, AO_EXIT_USAGE, NULL);
    assert_contains(err, "rank_00_metrics.jsonl:3: the record has schema 2; this aorta reads "
                         "schema 1");
    free(err);
    free(text);
    free(v2);
    free(good);

    char *none = edited_line("\"schema\":1,", "");
    write_text(f->path, none);
    err = read_expect_error(f->path, AO_EXIT_USAGE, NULL);
    assert_contains(err, ":1: field \"schema\" is missing");
    free(err);
    free(none);
}

static void expect_field_error(const char *path, const char *from, const char *to, const char *want)
{
    char *line = edited_line(from, to);
    write_text(path, line);
    char *err = read_expect_error(path, AO_EXIT_USAGE, NULL);
    assert_contains(err, want);
    free(err);
    free(line);
}

static void test_missing_and_mistyped_fields(void **state)
{
    fixture *f = *state;
    const char *p = f->path;
    expect_field_error(
        p, "\"step_ms\":", "\"step_xx\":", "rank_00_metrics.jsonl:1: field \"step_ms\" is missing");
    expect_field_error(
        p, "\"compute_allreduce_ms\":", "\"x\":", ":1: field \"compute_allreduce_ms\" is missing");
    expect_field_error(p, "\"compute\":{\"ops\":0,\"busy_ms\":0}", "\"compute\":{\"ops\":0}",
                       ":1: field \"streams.compute.busy_ms\" is missing");
    expect_field_error(p, "\"h2d\":{", "\"h3d\":{", ":1: field \"streams.h2d\" is missing");
    expect_field_error(p, "\"broadcast\":{\"ops\":0,\"bytes\":0",
                       "\"broadcast\":{\"ops\":0,\"bytes\":-1",
                       ":1: field \"collectives.broadcast.bytes\" must be a non-negative integer");
    expect_field_error(p, "\"phase\":\"train\"", "\"phase\":3",
                       ":1: field \"phase\" must be a string");
    expect_field_error(p, "\"phase\":\"train\"", "\"phase\":\"eval\"",
                       ":1: field \"phase\" is \"eval\", which is not a known name");
    expect_field_error(p, "\"loss\":0.5", "\"loss\":\"0.5\"",
                       ":1: field \"loss\" must be a number or null");
    expect_field_error(p, "\"rank\":1", "\"rank\":2", ":1: field \"rank\" is 2; allowed: 0 to 1");
    expect_field_error(p, ",\"samples\":null", "", ":1: field \"samples\" is missing");
    expect_field_error(p, "\"streams\":{", "\"streams\":[{",
                       ":1: not a valid JSON line"); /* unbalanced */
    expect_field_error(p, "\"samples\":null", "\"samples\":null,\"ops\":{}",
                       ":1: field \"ops\" must be an array");
    expect_field_error(p, "\"samples\":null",
                       "\"samples\":null,\"ops\":[{\"stream\":\"compute\",\"name\":\"f\","
                       "\"class\":\"compute\",\"kind\":null,\"unit\":null,\"start_us\":1}]",
                       ":1: field \"ops[0].end_us\" is missing");
    expect_field_error(p, "\"samples\":null", "\"samples\":null,\"ops\":[{\"stream\":\"nvlink\"}]",
                       ":1: field \"ops[0].stream\" is \"nvlink\", which is not a known name");
}

/* Deletes the first occurrence of `what` from s (in place). */
static void cut(char *s, const char *what)
{
    char *at = strstr(s, what);
    assert_non_null(at);
    memmove(at, at + strlen(what), strlen(at + strlen(what)) + 1);
}

/* Fields added after schema 1 was first written round-trip when present and
 * read as absent (NAN, no issue time) from an older file's lines. */
static void test_optional_fields(void **state)
{
    (void)state;
    ao_iter_record r, back;
    plain_record(&r, 3);
    r.data_wait_ms = 1.5;
    r.mem_peak_mb = 64.25;
    r.m.host_wait_ms = 2.5;
    r.m.exposed_kind_ms[AO_KIND_ALLGATHER] = 0.75;
    ao_op ops[1] = {{.start_us = 5,
                     .end_us = 9,
                     .name = "forward",
                     .unit = 0,
                     .stream = AO_STREAM_COMPUTE,
                     .cls = AO_CLASS_COMPUTE,
                     .kind = AO_KIND_NONE,
                     .has_issue = 1,
                     .issue_us = 2.25}};
    r.ops = ops;
    r.nops = 1;
    char *line = ao_iter_record_format(&r, NULL);
    assert_non_null(line);
    char err[128];
    yajl_val v = yajl_tree_parse(line, err, sizeof err);
    assert_non_null(v);
    assert_int_equal(ao_iter_record_parse(v, "t:1", &back), 0);
    assert_true(back.data_wait_ms == 1.5 && back.mem_peak_mb == 64.25);
    assert_true(back.m.host_wait_ms == 2.5 && back.m.exposed_kind_ms[AO_KIND_ALLGATHER] == 0.75);
    assert_true(back.nops == 1 && back.ops[0].has_issue && back.ops[0].issue_us == 2.25);
    ao_iter_record_free(&back);
    yajl_tree_free(v);
    cut(line, "\"data_wait_ms\":1.5,");
    cut(line, "\"mem_peak_mb\":64.25,");
    cut(line, "\"host_wait_ms\":2.5,");
    cut(line, "\"exposed_allgather_ms\":0.75,");
    cut(line, ",\"issue_us\":2.25");
    v = yajl_tree_parse(line, err, sizeof err);
    assert_non_null(v);
    assert_int_equal(ao_iter_record_parse(v, "t:1", &back), 0);
    assert_true(isnan(back.data_wait_ms) && isnan(back.mem_peak_mb));
    assert_true(isnan(back.m.host_wait_ms) && isnan(back.m.exposed_kind_ms[AO_KIND_ALLGATHER]));
    assert_true(back.nops == 1 && !back.ops[0].has_issue);
    ao_iter_record_free(&back);
    yajl_tree_free(v);
    free(line);
}

static int count_steps(void *ctx, ao_iter_record *r, yajl_val line)
{
    long long *sum = ctx;
    *sum += r->step;
    return 0;
}

static int stop_at_two(void *ctx, ao_iter_record *r, yajl_val line)
{
    return r->step == 2 ? 7 : 0;
}

static void test_ten_thousand_lines(void **state)
{
    fixture *f = *state;
    enum { N = 10000 };
    ao_jsonl_writer *w = ao_jsonl_open(f->path, 100);
    for (int i = 0; i < N; i++) {
        ao_iter_record r;
        random_record(&r, i);
        assert_int_equal(ao_jsonl_append(w, &r), 0);
    }
    assert_int_equal(ao_jsonl_close(w), 0);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long long sum = 0;
    ao_jsonl_stats st;
    assert_int_equal(ao_jsonl_read(f->path, count_steps, &sum, &st), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    print_message("read %d lines (%lld bytes) in %.3f s\n", N, (long long)file_size(f->path), s);
    assert_int_equal(st.records, N);
    assert_int_equal(sum, (long long)N * (N - 1) / 2);
    /* Only a bound against a pathological reader: the rate is a benchmark's
     * business (a loaded machine took 40 s of wall time here). */
    assert_true(s < 300.0);

    /* A callback's nonzero return stops the read and is returned. */
    assert_int_equal(ao_jsonl_read(f->path, stop_at_two, NULL, &st), 7);
    assert_int_equal(st.records, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_doubles),
        cmocka_unit_test(test_env_filter),
        cmocka_unit_test_setup_teardown(test_run_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_end_recorded_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_records_round_trip, setup, teardown),
        cmocka_unit_test(test_json_double_text),
        cmocka_unit_test(test_optional_fields),
        cmocka_unit_test_setup_teardown(test_ops_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extra_hook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_never_appends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_cadence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_last_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_middle_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schema_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_and_mistyped_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ten_thousand_lines, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
