/* `aorta sweep`'s spec (declared in sweep/plan.h): reading a sweep file
 * (ranges, the YAML), the command-line changes (--axis, --env, --skip) and the
 * checks made before planning. The plan of a checked spec is in plan.c. */
#include "sweep/plan.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "bench/coll.h"
#include "bench/sdma.h"
#include "core/config.h"
#include "core/error.h"
#include "core/rundir.h"
#include "core/text.h"
#include "core/units.h"
#include "queues/queues.h"
#include "sweep/strs.h"

static const char *const command_names[] = {"train", "coll", "sdma", "queues"};

const char *ao_sweep_command_name(ao_sweep_command c)
{
    return command_names[c];
}

/* Axis keys coll, sdma and queues take besides `nproc`: their own flag
 * tables' axes (every spelling), coll's `size`, queues' `workload` and
 * `streams`. Train: config keys and --backend. */
static const char **flag_axis_keys(ao_sweep_command c)
{
    const ao_bench_flag *t = c == AO_SWEEP_COLL   ? ao_coll_flags
                             : c == AO_SWEEP_SDMA ? ao_sdma_flags
                                                  : ao_queues_flags;
    int n = c == AO_SWEEP_COLL   ? AO_COLL_NFLAGS
            : c == AO_SWEEP_SDMA ? AO_SDMA_NFLAGS
                                 : AO_QUEUES_NFLAGS;
    int k = 0;
    const char **keys = ao_calloc((size_t)(4 * n + 3), sizeof *keys);
    if (c == AO_SWEEP_COLL) keys[k++] = "size";
    if (c == AO_SWEEP_QUEUES) {
        keys[k++] = "workload";
        keys[k++] = "streams";
    }
    for (int f = 0; f < n; f++)
        for (int s = 0; t[f].axis && t[f].names[s]; s++) keys[k++] = t[f].names[s];
    return keys;
}
static const char *const train_flag_keys[] = {"--backend", NULL};

static const char *const coll_metrics[] = {"coll",       "size",  "time_us", "algbw_gbps",
                                           "busbw_gbps", "wrong", NULL};
static const char *const sdma_metrics[] = {"savings_pct",     "achieved",   "gemm_ms",
                                           "copy_ms",         "serial_ms",  "overlap_ms",
                                           "mean_overlap_ms", "concurrent", NULL};
static const char *const queues_metrics[] = {
    "streams",        "latency_mean_us",      "latency_p50_us",
    "latency_p99_us", "throughput_ops_per_s", "scaling_efficiency",
    "concurrency",    "concurrent_pct",       NULL};
static const char *const train_metrics[] = {"step_ms", "tokens_per_s", "overlap_ratio",
                                            "exposed_comm_ms", NULL};

const char *const *ao_sweep_metric_columns(ao_sweep_command c)
{
    return c == AO_SWEEP_COLL     ? coll_metrics
           : c == AO_SWEEP_SDMA   ? sdma_metrics
           : c == AO_SWEEP_QUEUES ? queues_metrics
                                  : train_metrics;
}

static int in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0) return 1;
    return 0;
}

static char *join(const char *const *list, const char *sep)
{
    size_t len = 1;
    for (const char *const *l = list; *l; l++) len += strlen(*l) + strlen(sep);
    char *out = ao_calloc(len, 1);
    for (const char *const *l = list; *l; l++) {
        if (l != list) strcat(out, sep);
        strcat(out, *l);
    }
    return out;
}

/* ---- ranges ---------------------------------------------------------------- */

#define MAX_RANGE_VALUES 100000

static int range_number(const char *where, const char *text, const char *part, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(part, &end, 10);
    if (!*part || *end || errno) {
        ao_error(where,
                 "'%s': '%s' is not a whole number; ranges are pow2:A:B or "
                 "lin:FIRST:LAST[:STEP]",
                 text, part);
        return -1;
    }
    *out = v;
    return 0;
}

int ao_sweep_expand(const char *where, const char *text, char ***vals, int *n)
{
    int is_pow2 = ao_starts_with(text, "pow2:"), is_lin = ao_starts_with(text, "lin:");
    if (!is_pow2 && !is_lin) {
        if (!*text) {
            ao_error(where, "an empty value");
            return AO_EXIT_USAGE;
        }
        push(vals, n, ao_strdup(text));
        return 0;
    }
    char *copy = ao_strdup(strchr(text, ':') + 1), *parts[4] = {0};
    int nparts = 0;
    for (char *p = copy, *tok; (tok = strsep(&p, ":")) != NULL;) {
        if (nparts == 3) {
            nparts = 4;
            break;
        }
        parts[nparts++] = tok;
    }
    int rc = AO_EXIT_USAGE;
    long long a, b, step = 1;
    if (is_pow2 && nparts != 2) {
        ao_error(where, "'%s': pow2 takes two exponents, pow2:A:B (e.g. pow2:8:13 = 256..8192)",
                 text);
    } else if (is_lin && nparts != 2 && nparts != 3) {
        ao_error(where, "'%s': lin takes lin:FIRST:LAST[:STEP] (e.g. lin:64:256:64)", text);
    } else if (range_number(where, text, parts[0], &a) || range_number(where, text, parts[1], &b) ||
               (nparts == 3 && range_number(where, text, parts[2], &step))) {
        /* printed */
    } else if (is_pow2 && (a < 0 || b > 62 || a > b)) {
        ao_error(where, "'%s': exponents must satisfy 0 <= A <= B <= 62", text);
    } else if (is_lin && (step <= 0 || a > b)) {
        ao_error(where, "'%s': needs FIRST <= LAST and a STEP > 0", text);
    } else if (is_lin &&
               ((unsigned long long)b - (unsigned long long)a) / (unsigned long long)step >=
                   MAX_RANGE_VALUES) {
        ao_error(where, "'%s': more than %d values", text, MAX_RANGE_VALUES);
    } else {
        /* Counted, in unsigned arithmetic: b - a and v + step overflow near
         * 2^63 (the loop on v never ended). */
        unsigned long long count =
            is_pow2
                ? (unsigned long long)(b - a) + 1
                : ((unsigned long long)b - (unsigned long long)a) / (unsigned long long)step + 1;
        for (unsigned long long i = 0; i < count; i++) {
            long long v = is_pow2
                              ? 1LL << (a + (long long)i)
                              : (long long)((unsigned long long)a + i * (unsigned long long)step);
            push(vals, n, ao_asprintf("%lld", v));
        }
        rc = 0;
    }
    free(copy);
    return rc;
}

/* ---- the YAML file ----------------------------------------------------------- */

struct reader {
    ao_sweep_spec *s;
    yaml_document_t *doc;
};

static char *node_where(const struct reader *r, const yaml_node_t *node)
{
    return ao_asprintf("%s:%zu", r->s->path, node->start_mark.line + 1);
}

static int node_error(const struct reader *r, const yaml_node_t *node, const char *fmt, ...)
    AO_PRINTF(3, 4);
static int node_error(const struct reader *r, const yaml_node_t *node, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    char *where = node_where(r, node);
    ao_error(where, "%s", why);
    free(where);
    return AO_EXIT_USAGE;
}

static yaml_node_t *node(const struct reader *r, int id)
{
    return yaml_document_get_node(r->doc, id);
}

static const char *scalar(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

static int want_scalar(const struct reader *r, const yaml_node_t *n, const char *what)
{
    if (n->type == YAML_SCALAR_NODE) return 0;
    return node_error(r, n, "%s must be a single value", what);
}

/* A scalar or a list of scalars, each expanded. */
static int read_values(const struct reader *r, const yaml_node_t *n, const char *what, char ***vals,
                       int *nvals)
{
    char *where = node_where(r, n);
    int rc = 0;
    if (n->type == YAML_SCALAR_NODE) {
        rc = ao_sweep_expand(where, scalar(n), vals, nvals);
    } else if (n->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = n->data.sequence.items.start;
             rc == 0 && it < n->data.sequence.items.top; it++) {
            yaml_node_t *item = node(r, *it);
            if ((rc = want_scalar(r, item, "each value of a list")) != 0) break;
            char *iw = node_where(r, item);
            rc = ao_sweep_expand(iw, scalar(item), vals, nvals);
            free(iw);
        }
        if (rc == 0 && *nvals == 0) {
            ao_error(where, "%s has no values (an empty list)", what);
            rc = AO_EXIT_USAGE;
        }
    } else {
        ao_error(where, "%s must be a value or a list of values", what);
        rc = AO_EXIT_USAGE;
    }
    free(where);
    return rc;
}

static int valid_env_name(const char *s)
{
    if (!*s || !(isalpha((unsigned char)*s) || *s == '_')) return 0;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_')) return 0;
    return 1;
}

static int read_axes(const struct reader *r, const yaml_node_t *map, ao_sweep_axis **axes,
                     int *naxes, int is_env)
{
    if (map->type != YAML_MAPPING_NODE)
        return node_error(r, map, "%s must be a mapping of name: values", is_env ? "env" : "axes");
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node(r, p->key), *v = node(r, p->value);
        if (want_scalar(r, k, "a name")) return AO_EXIT_USAGE;
        if (is_env && !valid_env_name(scalar(k)))
            return node_error(r, k, "'%s' is not an environment variable name", scalar(k));
        for (int i = 0; i < *naxes; i++)
            if (strcmp((*axes)[i].key, scalar(k)) == 0)
                return node_error(r, k, "'%s' is given twice", scalar(k));
        *axes = ao_realloc(*axes, (size_t)(*naxes + 1) * sizeof **axes);
        ao_sweep_axis *a = &(*axes)[(*naxes)++];
        memset(a, 0, sizeof *a);
        a->key = ao_strdup(scalar(k));
        a->where = node_where(r, k);
        if (read_values(r, v, a->key, &a->values, &a->nvalues)) return AO_EXIT_USAGE;
    }
    return 0;
}

static int read_zip(const struct reader *r, const yaml_node_t *seq)
{
    ao_sweep_spec *s = r->s;
    if (seq->type != YAML_SEQUENCE_NODE)
        return node_error(r, seq, "env_zip must be a list of {NAME: VALUE, ...} entries");
    if (seq->data.sequence.items.start == seq->data.sequence.items.top)
        return node_error(r, seq, "env_zip has no entries (an empty list)");
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *e = node(r, *it);
        if (e->type != YAML_MAPPING_NODE ||
            e->data.mapping.pairs.start == e->data.mapping.pairs.top)
            return node_error(r, e, "each env_zip entry is a non-empty {NAME: VALUE, ...}");
        s->zip = ao_realloc(s->zip, (size_t)(s->nzip + 1) * sizeof *s->zip);
        ao_sweep_zip *z = &s->zip[s->nzip++];
        memset(z, 0, sizeof *z);
        z->where = node_where(r, e);
        for (yaml_node_pair_t *p = e->data.mapping.pairs.start; p < e->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = node(r, p->key), *v = node(r, p->value);
            if (want_scalar(r, k, "a name") || want_scalar(r, v, "an env_zip value"))
                return AO_EXIT_USAGE;
            if (!valid_env_name(scalar(k)))
                return node_error(r, k, "'%s' is not an environment variable name", scalar(k));
            for (int i = 0; i < z->n; i++)
                if (strcmp(z->names[i], scalar(k)) == 0)
                    return node_error(r, k, "'%s' is given twice", scalar(k));
            int nv = z->n;
            push(&z->names, &nv, ao_strdup(scalar(k)));
            push(&z->values, &z->n, ao_strdup(scalar(v)));
        }
    }
    return 0;
}

static const char *const top_keys[] = {"name", "command", "args",   "config", "axes",
                                       "env",  "env_zip", "metric", NULL};

static int read_top(const struct reader *r, const yaml_node_t *root)
{
    ao_sweep_spec *s = r->s;
    if (!root || root->type != YAML_MAPPING_NODE) {
        ao_error(s->path, "a sweep file is a mapping with command:, axes:, env:, ...");
        return AO_EXIT_USAGE;
    }
    int have_command = 0;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node(r, p->key), *v = node(r, p->value);
        if (want_scalar(r, k, "a key")) return AO_EXIT_USAGE;
        const char *key = scalar(k);
        if (!in_list(top_keys, key)) {
            char *allowed = join(top_keys, ", ");
            node_error(r, k, "unknown key '%s'; allowed: %s", key, allowed);
            free(allowed);
            return AO_EXIT_USAGE;
        }
        /* A second `command:` or `axes:` would silently replace or add to the first. */
        for (yaml_node_pair_t *q = root->data.mapping.pairs.start; q < p; q++)
            if (strcmp(scalar(node(r, q->key)), key) == 0)
                return node_error(r, k, "'%s' is given twice (first at line %zu)", key,
                                  node(r, q->key)->start_mark.line + 1);
        if (strcmp(key, "name") == 0) {
            if (want_scalar(r, v, "name")) return AO_EXIT_USAGE;
            free(s->name);
            s->name = ao_strdup(scalar(v));
            /* The name becomes artifacts/sweeps/NAME: it must stay inside it. */
            char *where = node_where(r, v);
            int bad = ao_check_plain_name(s->name, 100, where, "sweep name");
            free(where);
            if (bad) return AO_EXIT_USAGE;
        } else if (strcmp(key, "command") == 0) {
            if (want_scalar(r, v, "command")) return AO_EXIT_USAGE;
            int found = 0;
            for (int c = 0; c < 4; c++)
                if (strcmp(scalar(v), command_names[c]) == 0) {
                    s->command = (ao_sweep_command)c;
                    found = 1;
                }
            if (!found)
                return node_error(r, v, "unknown command '%s'; allowed: train, coll, sdma, queues",
                                  scalar(v));
            have_command = 1;
        } else if (strcmp(key, "args") == 0) {
            if (v->type == YAML_SCALAR_NODE && !*scalar(v)) continue;
            if (v->type != YAML_SEQUENCE_NODE)
                return node_error(r, v, "args must be a list, e.g. [--coll, all_reduce]");
            for (yaml_node_item_t *it = v->data.sequence.items.start;
                 it < v->data.sequence.items.top; it++) {
                yaml_node_t *a = node(r, *it);
                if (want_scalar(r, a, "each argument")) return AO_EXIT_USAGE;
                push(&s->args, &s->nargs, ao_strdup(scalar(a)));
            }
        } else if (strcmp(key, "config") == 0) {
            if (want_scalar(r, v, "config")) return AO_EXIT_USAGE;
            free(s->config);
            free(s->config_where);
            s->config = ao_strdup(scalar(v));
            s->config_where = node_where(r, v);
        } else if (strcmp(key, "axes") == 0) {
            if (read_axes(r, v, &s->axes, &s->naxes, 0)) return AO_EXIT_USAGE;
        } else if (strcmp(key, "env") == 0) {
            if (read_axes(r, v, &s->env, &s->nenv, 1)) return AO_EXIT_USAGE;
        } else if (strcmp(key, "env_zip") == 0) {
            if (read_zip(r, v)) return AO_EXIT_USAGE;
        } else if (strcmp(key, "metric") == 0) {
            char **vals = NULL;
            int nvals = 0;
            if (v->type != YAML_SCALAR_NODE && v->type != YAML_SEQUENCE_NODE)
                return want_scalar(r, v, "metric");
            if (read_values(r, v, "metric", &vals, &nvals)) {
                free_strs(vals, nvals);
                return AO_EXIT_USAGE;
            }
            free(s->metric);
            free(s->metric_where);
            free_strs(s->more_metrics, s->nmore_metrics);
            s->metric = vals[0];
            s->more_metrics = nvals > 1 ? vals : NULL;
            s->nmore_metrics = nvals - 1;
            if (nvals > 1)
                memmove(vals, vals + 1, (size_t)(nvals - 1) * sizeof *vals);
            else
                free(vals);
            s->metric_where = node_where(r, v);
        }
    }
    if (!have_command) {
        ao_error(s->path, "no command: key; say which command the sweep runs (train, coll, sdma, "
                          "queues)");
        return AO_EXIT_USAGE;
    }
    return 0;
}

static int load(const char *where, FILE *f, const char *text, ao_sweep_spec *s)
{
    memset(s, 0, sizeof *s);
    s->path = ao_strdup(where);
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) ao_fatal(AO_EXIT_FAIL, "libyaml", "out of memory");
    if (f)
        yaml_parser_set_input_file(&parser, f);
    else
        yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
    int rc;
    if (!yaml_parser_load(&parser, &doc)) {
        char *at = ao_asprintf("%s:%zu", where, parser.problem_mark.line + 1);
        ao_error(at, "YAML syntax error: %s%s%s", parser.problem ? parser.problem : "unreadable",
                 parser.context ? " " : "", parser.context ? parser.context : "");
        free(at);
        yaml_parser_delete(&parser);
        return AO_EXIT_USAGE;
    }
    yaml_parser_delete(&parser);
    struct reader r = {s, &doc};
    rc = read_top(&r, yaml_document_get_root_node(&doc));
    yaml_document_delete(&doc);
    if (rc == 0 && !s->name) {
        /* The file's base name without its extension. */
        const char *base = strrchr(where, '/');
        base = base ? base + 1 : where;
        s->name = ao_strdup(base);
        char *dot = strrchr(s->name, '.');
        if (dot && dot != s->name) *dot = 0;
        rc = ao_check_plain_name(s->name, 100, where, "sweep name");
    }
    if (rc == 0 && !s->metric)
        s->metric = ao_strdup(s->command == AO_SWEEP_COLL     ? "busbw_gbps"
                              : s->command == AO_SWEEP_SDMA   ? "savings_pct"
                              : s->command == AO_SWEEP_QUEUES ? "latency_p99_us"
                                                              : "step_ms");
    return rc;
}

int ao_sweep_spec_load(const char *path, ao_sweep_spec *s)
{
    FILE *f = ao_open_input_file(path, "sweep file");
    if (!f) {
        memset(s, 0, sizeof *s);
        return AO_EXIT_USAGE;
    }
    int rc = load(path, f, NULL, s);
    fclose(f);
    return rc;
}

int ao_sweep_spec_load_text(const char *where, const char *text, ao_sweep_spec *s)
{
    return load(where, NULL, text, s);
}

static void free_axes(ao_sweep_axis *a, int n)
{
    for (int i = 0; i < n; i++) {
        free(a[i].key);
        free(a[i].where);
        free_strs(a[i].values, a[i].nvalues);
    }
    free(a);
}

void ao_sweep_spec_free(ao_sweep_spec *s)
{
    free(s->path);
    free(s->name);
    free_strs(s->args, s->nargs);
    free(s->config);
    free(s->config_where);
    free_axes(s->axes, s->naxes);
    free_axes(s->env, s->nenv);
    for (int i = 0; i < s->nzip; i++) {
        free_strs(s->zip[i].names, s->zip[i].n);
        free_strs(s->zip[i].values, s->zip[i].n);
        free(s->zip[i].where);
    }
    free(s->zip);
    free(s->metric);
    free(s->metric_where);
    free_strs(s->more_metrics, s->nmore_metrics);
    for (int i = 0; i < s->nskips; i++) {
        free(s->skips[i].key);
        free(s->skips[i].value);
    }
    free(s->skips);
    memset(s, 0, sizeof *s);
}

/* ---- command-line changes ---------------------------------------------------- */

static int split_kv(const char *flag, const char *kv, char **key, const char **val)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv || !eq[1]) {
        ao_error(flag, "'%s' is not KEY=VALUE[,VALUE...]", kv);
        return AO_EXIT_USAGE;
    }
    *key = ao_asprintf("%.*s", (int)(eq - kv), kv);
    *val = eq + 1;
    return 0;
}

static int set_list(ao_sweep_axis **axes, int *naxes, const char *flag, const char *kv, int is_env)
{
    char *key;
    const char *list;
    if (split_kv(flag, kv, &key, &list)) return AO_EXIT_USAGE;
    if (is_env && !valid_env_name(key)) {
        ao_error(flag, "'%s' is not an environment variable name", key);
        free(key);
        return AO_EXIT_USAGE;
    }
    char **vals = NULL;
    int n = 0, rc = 0;
    char *copy = ao_strdup(list);
    for (char *p = copy, *tok; rc == 0 && (tok = strsep(&p, ",")) != NULL;)
        rc = ao_sweep_expand(flag, tok, &vals, &n);
    free(copy);
    if (rc) {
        free(key);
        free_strs(vals, n);
        return rc;
    }
    ao_sweep_axis *a = NULL;
    for (int i = 0; i < *naxes; i++)
        if (strcmp((*axes)[i].key, key) == 0) a = &(*axes)[i];
    if (a) {
        free(key);
        free(a->where);
        free_strs(a->values, a->nvalues);
    } else {
        *axes = ao_realloc(*axes, (size_t)(*naxes + 1) * sizeof **axes);
        a = &(*axes)[(*naxes)++];
        a->key = key;
    }
    a->values = vals;
    a->nvalues = n;
    a->where = ao_strdup(flag);
    return 0;
}

int ao_sweep_spec_set_axis(ao_sweep_spec *s, const char *flag, const char *kv)
{
    return set_list(&s->axes, &s->naxes, flag, kv, 0);
}

int ao_sweep_spec_set_env(ao_sweep_spec *s, const char *flag, const char *kv)
{
    return set_list(&s->env, &s->nenv, flag, kv, 1);
}

int ao_sweep_spec_add_skip(ao_sweep_spec *s, const char *flag, const char *kv)
{
    char *key;
    const char *val;
    if (split_kv(flag, kv, &key, &val)) return AO_EXIT_USAGE;
    s->skips = ao_realloc(s->skips, (size_t)(s->nskips + 1) * sizeof *s->skips);
    s->skips[s->nskips++] = (ao_sweep_skip){key, ao_strdup(val)};
    return 0;
}

/* ---- checks ------------------------------------------------------------------ */

int ao_sweep_axis_index(const ao_sweep_spec *s, const char *key)
{
    for (int i = 0; i < s->naxes; i++)
        if (strcmp(s->axes[i].key, key) == 0) return i;
    return -1;
}

static int env_index(const ao_sweep_spec *s, const char *name)
{
    for (int i = 0; i < s->nenv; i++)
        if (strcmp(s->env[i].key, name) == 0) return i;
    return -1;
}

static int zip_has(const ao_sweep_spec *s, const char *name)
{
    for (int z = 0; z < s->nzip; z++)
        for (int i = 0; i < s->zip[z].n; i++)
            if (strcmp(s->zip[z].names[i], name) == 0) return 1;
    return 0;
}

static int check_train_axes(const ao_sweep_spec *s)
{
    struct ao_config cfg;
    if (ao_config_resolve(&cfg, s->config, NULL, 0) != 0) {
        if (s->config_where) ao_hint("the config is named at %s", s->config_where);
        ao_config_free(&cfg);
        return AO_EXIT_USAGE;
    }
    int rc = 0;
    for (int a = 0; rc == 0 && a < s->naxes; a++) {
        const ao_sweep_axis *ax = &s->axes[a];
        if (strcmp(ax->key, "nproc") == 0 || in_list(train_flag_keys, ax->key)) continue;
        if (ax->key[0] == '-') {
            ao_error(ax->where,
                     "train axes are config keys (training.batch_size), nproc or "
                     "--backend; '%s' is none of them",
                     ax->key);
            rc = AO_EXIT_USAGE;
            break;
        }
        /* Every value through the schema: unknown keys and wrong types fail here,
         * before anything runs, naming the sweep file's line. */
        for (int v = 0; rc == 0 && v < ax->nvalues; v++)
            rc = ao_config_set(&cfg, ax->key, ax->values[v], ax->where);
    }
    ao_config_free(&cfg);
    return rc ? AO_EXIT_USAGE : 0;
}

static int check_flag_axes(const ao_sweep_spec *s, const char *const *keys)
{
    for (int a = 0; a < s->naxes; a++) {
        const ao_sweep_axis *ax = &s->axes[a];
        if (strcmp(ax->key, "nproc") == 0) continue;
        if (!in_list(keys, ax->key)) {
            char *allowed = join(keys, ", ");
            ao_error(ax->where, "'%s' is not an axis of %s; allowed: %s%s", ax->key,
                     ao_sweep_command_name(s->command),
                     s->command == AO_SWEEP_COLL ? "nproc, " : "", allowed);
            free(allowed);
            return AO_EXIT_USAGE;
        }
        for (int v = 0; v < ax->nvalues; v++) {
            if (strcmp(ax->key, "size") == 0) {
                size_t bytes;
                if (ao_parse_size(ax->where, ax->values[v], &bytes)) return AO_EXIT_USAGE;
            } else if (strcmp(ax->key, "streams") == 0) {
                int n;
                if (ao_parse_int(ax->where, ax->values[v], 1, AO_QUEUES_MAX_STREAMS, &n))
                    return AO_EXIT_USAGE;
            } else if (strcmp(ax->key, "workload") == 0) {
                if (ao_queues_workload_check(ax->where, ax->values[v])) return AO_EXIT_USAGE;
            } else if (strcmp(ax->key, "--coll") == 0) {
                ao_coll list[AO_NCOLLS];
                int n;
                if (strchr(ax->values[v], ',') ||
                    ao_coll_list_parse(ax->where, ax->values[v], list, &n)) {
                    if (strchr(ax->values[v], ','))
                        ao_error(ax->where, "one collective per --coll value, not '%s'",
                                 ax->values[v]);
                    return AO_EXIT_USAGE;
                }
            }
        }
    }
    return 0;
}

int ao_sweep_spec_check(const ao_sweep_spec *s)
{
    for (int a = 0; a < s->naxes; a++) {
        if (s->axes[a].nvalues == 0) {
            ao_error(s->axes[a].where, "axis '%s' has no values", s->axes[a].key);
            return AO_EXIT_USAGE;
        }
        if (strcmp(s->axes[a].key, "nproc") != 0) continue;
        if (s->command == AO_SWEEP_SDMA || s->command == AO_SWEEP_QUEUES) {
            ao_error(s->axes[a].where, "%s runs one process; it has no nproc axis",
                     ao_sweep_command_name(s->command));
            return AO_EXIT_USAGE;
        }
        for (int v = 0; v < s->axes[a].nvalues; v++) {
            int np;
            if (ao_parse_int(s->axes[a].where, s->axes[a].values[v], 1, 4096, &np))
                return AO_EXIT_USAGE;
        }
    }
    for (int z = 0; z < s->nzip; z++)
        for (int i = 0; i < s->zip[z].n; i++) {
            int e = env_index(s, s->zip[z].names[i]);
            if (e >= 0) {
                ao_error(s->zip[z].where,
                         "%s is in both env (%s) and env_zip; a variable is either crossed "
                         "(env) or paired (env_zip), not both",
                         s->zip[z].names[i], s->env[e].where);
                return AO_EXIT_USAGE;
            }
        }
    if (s->config && s->command != AO_SWEEP_TRAIN) {
        ao_error(s->config_where, "config: is for train sweeps; %s takes its settings as args",
                 ao_sweep_command_name(s->command));
        return AO_EXIT_USAGE;
    }
    int rc;
    if (s->command == AO_SWEEP_TRAIN) {
        rc = check_train_axes(s);
    } else {
        const char **keys = flag_axis_keys(s->command);
        rc = check_flag_axes(s, keys);
        free((void *)keys);
    }
    if (rc) return rc;
    for (int k = 0; k < s->nskips; k++) {
        const char *key = s->skips[k].key;
        if (ao_sweep_axis_index(s, key) < 0 && env_index(s, key) < 0 && !zip_has(s, key)) {
            ao_error("--skip", "'%s' is neither an axis nor an environment variable of the sweep",
                     key);
            return AO_EXIT_USAGE;
        }
    }
    const char *const *metrics = ao_sweep_metric_columns(s->command);
    for (int m = -1; m < s->nmore_metrics; m++) {
        const char *name = m < 0 ? s->metric : s->more_metrics[m];
        if (in_list(metrics, name)) continue;
        char *allowed = join(metrics, ", ");
        ao_error(s->metric_where ? s->metric_where : s->path,
                 "'%s' is not a metric of %s sweeps; allowed: %s", name,
                 ao_sweep_command_name(s->command), allowed);
        free(allowed);
        return AO_EXIT_USAGE;
    }
    return 0;
}
