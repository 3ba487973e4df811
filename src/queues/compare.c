/* `aorta queues compare A.json B.json`: the train reports' comparison rule
 * (runs/compare.h: bootstrap CI of the difference of medians, a verdict
 * that ignores changes under 1 %) applied per stream count to the samples
 * each record keeps per iteration. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "queues/queues.h"
#include "runs/compare.h"

typedef struct metric {
    const char *name;
    ao_better better;
} metric;

/* Per iteration: latency, throughput (its ops over its latency) and
 * concurrency, which has no better direction (more streams at once is what
 * the queues allow, not a goal). */
static const metric metrics[] = {
    {"latency_us", AO_BETTER_LOWER},
    {"throughput_ops_per_s", AO_BETTER_HIGHER},
    {"concurrency", AO_BETTER_NEITHER},
};
#define NMETRICS 3

static yajl_val load(const char *path)
{
    char why[512];
    yajl_val doc = ao_json_read_file(path, why, sizeof why);
    if (!doc) {
        ao_error(path, "%s", why);
        return NULL;
    }
    yajl_val cmd = ao_json_member(doc, "command"), res = ao_json_member(doc, "results");
    const char *c = YAJL_IS_STRING(cmd) ? YAJL_GET_STRING(cmd) : NULL;
    if (!YAJL_IS_OBJECT(doc) || !c || strcmp(c, "queues") != 0 || !YAJL_IS_ARRAY(res)) {
        ao_error(path, "not an `aorta queues --json` record (no \"command\": \"queues\" with "
                       "\"results\")");
        yajl_tree_free(doc);
        return NULL;
    }
    return doc;
}

static const char *str(yajl_val obj, const char *key)
{
    yajl_val v = ao_json_member(obj, key);
    return YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : NULL;
}

static yajl_val find_count(yajl_val doc, long long streams)
{
    yajl_val res = ao_json_member(doc, "results");
    for (size_t i = 0; i < res->u.array.len; i++) {
        yajl_val s = ao_json_member(res->u.array.values[i], "streams");
        if (YAJL_IS_INTEGER(s) && YAJL_GET_INTEGER(s) == streams) return res->u.array.values[i];
    }
    return NULL;
}

/* The per-iteration samples of metric m; a heap array, *n of them. */
static double *samples(const char *path, yajl_val r, int m, size_t *n, int *bad)
{
    yajl_val lat = ao_json_member(r, "latency_samples_us");
    yajl_val src = m == 2 ? ao_json_member(r, "concurrency_samples") : lat;
    yajl_val ops = ao_json_member(r, "ops_per_iteration");
    *n = 0;
    if (!YAJL_IS_ARRAY(src) || !YAJL_IS_INTEGER(ops)) {
        ao_error(path, "a result without per-iteration samples (%s)",
                 m == 2 ? "concurrency_samples" : "latency_samples_us");
        *bad = 1;
        return NULL;
    }
    double *v = ao_malloc((src->u.array.len + 1) * sizeof *v);
    for (size_t i = 0; i < src->u.array.len; i++) {
        double x =
            YAJL_IS_NUMBER(src->u.array.values[i]) ? ao_json_number(src->u.array.values[i]) : NAN;
        if (m == 1) x = x > 0 ? (double)YAJL_GET_INTEGER(ops) / (x * 1e-6) : NAN;
        v[(*n)++] = x;
    }
    return v;
}

static void print_diffs(yajl_val a, yajl_val b)
{
    static const char *const keys[] = {"workload", "backend", "device", "sync", NULL};
    for (const char *const *k = keys; *k; k++) {
        const char *x = str(a, *k), *y = str(b, *k);
        if (x && y && strcmp(x, y) != 0) printf("#   %-30s %s -> %s\n", *k, x, y);
    }
    yajl_val ea = ao_json_member(a, "env"), eb = ao_json_member(b, "env");
    for (int side = 0; side < 2; side++) {
        yajl_val e = side ? eb : ea, other = side ? ea : eb;
        for (size_t i = 0; YAJL_IS_OBJECT(e) && i < e->u.object.len; i++) {
            const char *k = e->u.object.keys[i];
            yajl_val o = YAJL_IS_OBJECT(other) ? ao_json_member(other, k) : NULL;
            if (side && o) continue; /* printed from the reference's side */
            const char *x = YAJL_GET_STRING(side ? o : e->u.object.values[i]);
            const char *y = YAJL_GET_STRING(side ? e->u.object.values[i] : o);
            if ((x == NULL) != (y == NULL) || (x && strcmp(x, y) != 0))
                printf("#   env.%-26s %s -> %s\n", k, x ? x : "(unset)", y ? y : "(unset)");
        }
    }
}

int ao_queues_compare(const char *ref_path, const char *cand_path, const char *json_out)
{
    yajl_val a = load(ref_path);
    yajl_val b = a ? load(cand_path) : NULL;
    if (!a || !b) {
        yajl_tree_free(a);
        return AO_EXIT_USAGE;
    }
    const char *wa = str(a, "workload"), *wb = str(b, "workload");
    if (!wa || !wb || strcmp(wa, wb) != 0) {
        ao_error(cand_path, "workload '%s' against '%s' in %s: compare runs of one workload",
                 wb ? wb : "?", wa ? wa : "?", ref_path);
        yajl_tree_free(a);
        yajl_tree_free(b);
        return AO_EXIT_USAGE;
    }
    printf("# aorta queues compare: %s, reference %s, candidate %s\n", wa, ref_path, cand_path);
    printf("# what differs:\n");
    print_diffs(a, b);
    printf("# %7s  %-22s %12s %12s %8s %12s  %-27s %s\n", "streams", "metric (median)", "reference",
           "candidate", "ratio", "diff", "95% CI of diff", "verdict");
    ao_json_writer w = {.g = json_out ? ao_json_gen_new(1) : NULL};
    if (w.g) {
        ao_jw_open(&w, NULL);
        ao_jw_str(&w, "reference", ref_path);
        ao_jw_str(&w, "candidate", cand_path);
        ao_jw_aopen(&w, "comparisons");
    }
    int rc = 0, common = 0;
    yajl_val res = ao_json_member(a, "results");
    for (size_t i = 0; rc == 0 && i < res->u.array.len; i++) {
        yajl_val ra = res->u.array.values[i], s = ao_json_member(ra, "streams");
        if (!YAJL_IS_INTEGER(s)) continue;
        yajl_val rb = find_count(b, YAJL_GET_INTEGER(s));
        if (!rb) continue;
        common++;
        for (int m = 0; m < NMETRICS && rc == 0; m++) {
            size_t na, nb;
            int bad = 0;
            double *xa = samples(ref_path, ra, m, &na, &bad);
            double *xb = bad ? NULL : samples(cand_path, rb, m, &nb, &bad);
            if (bad) {
                free(xa);
                rc = AO_EXIT_USAGE;
                break;
            }
            ao_stats_ci ci;
            ao_stats_bootstrap_median_diff(xa, na, xb, nb, AO_COMPARE_RESAMPLES, AO_COMPARE_LEVEL,
                                           AO_COMPARE_SEED, &ci);
            double ma = ao_stats_median(xa, na), mb = ao_stats_median(xb, nb);
            ao_verdict v = ao_compare_verdict(metrics[m].better, ma, mb, &ci);
            char civ[64];
            snprintf(civ, sizeof civ, "[%.4g, %.4g]", ci.lo, ci.hi);
            printf("  %7lld  %-22s %12.4g %12.4g %8.3f %12.4g  %-27s %s\n", YAJL_GET_INTEGER(s),
                   metrics[m].name, ma, mb, ma != 0 ? mb / ma : NAN, mb - ma, civ,
                   ao_verdict_name(v));
            if (w.g) {
                ao_jw_open(&w, NULL);
                ao_jw_int(&w, "streams", YAJL_GET_INTEGER(s));
                ao_jw_str(&w, "metric", metrics[m].name);
                ao_jw_double(&w, "reference_median", ma);
                ao_jw_double(&w, "candidate_median", mb);
                ao_jw_double(&w, "ci_lo", ci.lo);
                ao_jw_double(&w, "ci_hi", ci.hi);
                ao_jw_str(&w, "verdict", ao_verdict_name(v));
                ao_jw_close(&w);
            }
            free(xa);
            free(xb);
        }
    }
    if (rc == 0 && common == 0) {
        ao_error(cand_path, "no stream count in common with %s", ref_path);
        rc = AO_EXIT_USAGE;
    }
    if (w.g) {
        ao_jw_aclose(&w);
        ao_jw_close(&w);
        if (rc == 0 && (w.st != yajl_gen_status_ok || ao_json_write_atomic(json_out, w.g)))
            rc = AO_EXIT_FAIL;
        yajl_gen_free(w.g);
    }
    yajl_tree_free(a);
    yajl_tree_free(b);
    return rc;
}
