#include "sweep/run.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "bench/table.h"
#include "comm/comm.h"
#include "core/config.h"
#include "core/error.h"
#include "core/json.h"
#include "core/plugin.h"
#include "core/rundir.h"
#include "launch/env.h"
#include "sweep/chart.h"

extern char **environ;

/* ---- the results table ------------------------------------------------------- */

enum col_role { ROLE_AXIS, ROLE_ENV, ROLE_METRIC, ROLE_RUN_DIR, ROLE_ERROR };

typedef struct results {
    const ao_sweep_plan *p;
    ao_column *cols;
    enum col_role *role;
    int *axis_of; /* ROLE_AXIS: spec axis index; ROLE_ENV: plan env index */
    int ncols;
    ao_table *t;
} results;

static char *strip_dashes(const char *k)
{
    while (*k == '-') k++;
    return ao_strdup(k);
}

static int metric_precision(const char *key)
{
    return strcmp(key, "size") == 0 || strcmp(key, "wrong") == 0 ||
                   strcmp(key, "concurrent") == 0 || strcmp(key, "streams") == 0
               ? 0
               : 3;
}

static void add_col(results *r, char *key, enum col_role role, int idx)
{
    r->cols = ao_realloc(r->cols, (size_t)(r->ncols + 1) * sizeof *r->cols);
    r->role = ao_realloc(r->role, (size_t)(r->ncols + 1) * sizeof *r->role);
    r->axis_of = ao_realloc(r->axis_of, (size_t)(r->ncols + 1) * sizeof *r->axis_of);
    int width = (int)strlen(key) > 10 ? (int)strlen(key) : 10;
    r->cols[r->ncols] = (ao_column){key, key, "", width, metric_precision(key), 0};
    r->role[r->ncols] = role;
    r->axis_of[r->ncols] = idx;
    r->ncols++;
}

static int col_index(const results *r, const char *key)
{
    for (int j = 0; j < r->ncols; j++)
        if (strcmp(r->cols[j].key, key) == 0) return j;
    return -1;
}

static void results_init(results *r, const ao_sweep_plan *p)
{
    memset(r, 0, sizeof *r);
    r->p = p;
    const ao_sweep_spec *s = p->spec;
    for (int a = 0; a < s->naxes; a++) add_col(r, strip_dashes(s->axes[a].key), ROLE_AXIS, a);
    for (int e = 0; e < p->nenv_names; e++) add_col(r, ao_strdup(p->env_names[e]), ROLE_ENV, e);
    for (const char *const *m = ao_sweep_metric_columns(s->command); *m; m++)
        if (col_index(r, *m) < 0) add_col(r, ao_strdup(*m), ROLE_METRIC, -1);
    add_col(r, ao_strdup("run_dir"), ROLE_RUN_DIR, -1);
    add_col(r, ao_strdup("error"), ROLE_ERROR, -1);
    r->t = ao_table_new(r->cols, r->ncols);
}

static void results_free(results *r)
{
    ao_table_free(r->t);
    for (int j = 0; j < r->ncols; j++) free((char *)r->cols[j].key);
    free(r->cols);
    free(r->role);
    free(r->axis_of);
}

static void set_str(results *r, int row, int col, const char *s)
{
    ao_table_set_str(r->t, row, col, s);
    int len = (int)strlen(s);
    if (len > r->cols[col].width) r->cols[col].width = len > 60 ? 60 : len;
}

static void set_metric(results *r, int row, const char *key, double v)
{
    int j = col_index(r, key);
    if (j >= 0 && r->role[j] == ROLE_METRIC) ao_table_set_num(r->t, row, j, v);
}

/* A point's identity: its axis and environment values, as the columns hold them. */
static char *point_id(const ao_sweep_plan *p, int point)
{
    const ao_sweep_point *pt = &p->points[point];
    const ao_sweep_group *g = &p->groups[pt->group];
    char *id = ao_strdup("");
    for (int a = 0; a < p->spec->naxes; a++) {
        char *next = ao_asprintf("%s%s\x1f", id, pt->values[a]);
        free(id);
        id = next;
    }
    for (int e = 0; e < p->nenv_names; e++) {
        char *next = ao_asprintf("%s%s\x1f", id, g->env_val[e] ? g->env_val[e] : "");
        free(id);
        id = next;
    }
    return id;
}

static int add_point_row(results *r, int point, const char *run_dir, const char *error)
{
    const ao_sweep_point *pt = &r->p->points[point];
    const ao_sweep_group *g = &r->p->groups[pt->group];
    int row = ao_table_add_row(r->t);
    for (int j = 0; j < r->ncols; j++) {
        if (r->role[j] == ROLE_AXIS) set_str(r, row, j, pt->values[r->axis_of[j]]);
        if (r->role[j] == ROLE_ENV && g->env_val[r->axis_of[j]])
            set_str(r, row, j, g->env_val[r->axis_of[j]]);
    }
    if (run_dir) set_str(r, row, col_index(r, "run_dir"), run_dir);
    if (error) set_str(r, row, col_index(r, "error"), error);
    return row;
}

/* ---- JSON helpers ------------------------------------------------------------ */

static yajl_val member(yajl_val obj, const char *key)
{
    const char *path[] = {key, NULL};
    return obj ? yajl_tree_get(obj, path, yajl_t_any) : NULL;
}

static double num(yajl_val v)
{
    return v && YAJL_IS_NUMBER(v) ? strtod(YAJL_GET_NUMBER(v), NULL) : NAN;
}

/* The first `key` anywhere in the document (depth first); an object found
 * there gives its "median" (summary.json keeps per-metric statistics). */
static double find_metric(yajl_val v, const char *key, int depth)
{
    if (!v || depth > 8) return NAN;
    if (YAJL_IS_OBJECT(v)) {
        for (size_t i = 0; i < v->u.object.len; i++) {
            yajl_val x = v->u.object.values[i];
            if (strcmp(v->u.object.keys[i], key) == 0) {
                if (YAJL_IS_NUMBER(x)) return num(x);
                if (YAJL_IS_OBJECT(x)) return num(member(x, "median"));
            }
        }
        for (size_t i = 0; i < v->u.object.len; i++) {
            double d = find_metric(v->u.object.values[i], key, depth + 1);
            if (!isnan(d)) return d;
        }
    } else if (YAJL_IS_ARRAY(v)) {
        for (size_t i = 0; i < v->u.array.len; i++) {
            double d = find_metric(v->u.array.values[i], key, depth + 1);
            if (!isnan(d)) return d;
        }
    }
    return NAN;
}

/* ---- reading a launch's results ------------------------------------------------ */

typedef struct launch_ctx {
    results *r;
    int li;
    const char *dir;
    const char *run_dir;     /* the column's value */
    const char *error;       /* NULL when the child exited 0 */
    const char *const *done; /* identities already in the results (resume) */
    int ndone;
} launch_ctx;

static int is_done(const launch_ctx *c, int point)
{
    char *id = point_id(c->r->p, point);
    int done = 0;
    for (int i = 0; i < c->ndone; i++) done |= strcmp(c->done[i], id) == 0;
    free(id);
    return done;
}

/* coll's rows name collectives as nccl-tests does ("allreduce"), the axis as
 * its flag does ("all_reduce"): compare what they denote. */
static int same_coll(const char *a, const char *b)
{
    ao_coll x, y;
    return a && ao_coll_parse(a, &x) == 0 && ao_coll_parse(b, &y) == 0 && x == y;
}

static int coll_rows(launch_ctx *c, yajl_val rows)
{
    const ao_sweep_plan *p = c->r->p;
    const ao_sweep_launch *l = &p->launches[c->li];
    int ca = ao_sweep_axis_index(p->spec, "--coll");
    for (int j = 0; j < l->npoints; j++) {
        int pi = l->points[j];
        if (is_done(c, pi)) continue;
        const char *want_coll = ca >= 0 ? p->points[pi].values[ca] : NULL;
        int want_k = ao_sweep_point_size_index(p, pi), k = 0, added = 0;
        for (size_t i = 0; i < rows->u.array.len; i++) {
            yajl_val row = rows->u.array.values[i];
            const char *coll = YAJL_GET_STRING(member(row, "coll"));
            if (want_coll && !same_coll(coll, want_coll)) continue;
            if (want_k >= 0 && k++ != want_k) continue;
            int out = add_point_row(c->r, pi, c->run_dir, c->error);
            if (coll && col_index(c->r, "coll") >= 0 &&
                c->r->role[col_index(c->r, "coll")] == ROLE_METRIC)
                set_str(c->r, out, col_index(c->r, "coll"), coll);
            set_metric(c->r, out, "size", num(member(row, "size")));
            double t = num(member(row, "oop_time_us"));
            set_metric(c->r, out, "time_us", isnan(t) ? num(member(row, "oop_p50_us")) : t);
            set_metric(c->r, out, "algbw_gbps", num(member(row, "oop_algbw_gbps")));
            set_metric(c->r, out, "busbw_gbps", num(member(row, "oop_busbw_gbps")));
            double w = num(member(row, "oop_wrong")), wi = num(member(row, "ip_wrong"));
            set_metric(c->r, out, "wrong", (isnan(w) ? 0 : w) + (isnan(wi) ? 0 : wi));
            added++;
        }
        if (!added)
            add_point_row(c->r, pi, c->run_dir,
                          c->error ? c->error : "no row for this point in the result file");
    }
    return 0;
}

static double sdma_mode_ms(yajl_val modes, const char *mode)
{
    for (size_t i = 0; modes && YAJL_IS_ARRAY(modes) && i < modes->u.array.len; i++) {
        const char *m = YAJL_GET_STRING(member(modes->u.array.values[i], "mode"));
        if (m && strcmp(m, mode) == 0) return num(member(modes->u.array.values[i], "mean_ms"));
    }
    return NAN;
}

static void sdma_row(launch_ctx *c, int pi, yajl_val doc)
{
    int out = add_point_row(c->r, pi, c->run_dir, c->error);
    set_metric(c->r, out, "savings_pct", num(member(doc, "savings_pct")));
    set_metric(c->r, out, "achieved", num(member(doc, "achieved")));
    yajl_val modes = member(doc, "modes");
    set_metric(c->r, out, "gemm_ms", sdma_mode_ms(modes, "gemm"));
    set_metric(c->r, out, "copy_ms", sdma_mode_ms(modes, "copy"));
    set_metric(c->r, out, "serial_ms", sdma_mode_ms(modes, "serial"));
    set_metric(c->r, out, "overlap_ms", sdma_mode_ms(modes, "overlap"));
    set_metric(c->r, out, "mean_overlap_ms", num(member(doc, "mean_overlap_ms")));
    set_metric(c->r, out, "concurrent", num(member(doc, "concurrent_iterations")));
}

/* queues: a row per stream count of the record the point asked for (all of
 * them without a streams axis). */
static void queues_rows(launch_ctx *c, yajl_val doc)
{
    const ao_sweep_plan *p = c->r->p;
    const ao_sweep_launch *l = &p->launches[c->li];
    int qa = ao_sweep_axis_index(p->spec, "streams");
    yajl_val res = member(doc, "results");
    for (int j = 0; j < l->npoints; j++) {
        int pi = l->points[j], added = 0;
        if (is_done(c, pi)) continue;
        for (size_t i = 0; YAJL_IS_ARRAY(res) && i < res->u.array.len; i++) {
            yajl_val row = res->u.array.values[i], u = member(row, "union");
            double streams = num(member(row, "streams"));
            if (qa >= 0 && streams != atof(p->points[pi].values[qa])) continue;
            int out = add_point_row(c->r, pi, c->run_dir, c->error);
            set_metric(c->r, out, "streams", streams);
            yajl_val lat = member(row, "latency_us");
            set_metric(c->r, out, "latency_mean_us", num(member(lat, "mean")));
            set_metric(c->r, out, "latency_p50_us", num(member(lat, "p50")));
            set_metric(c->r, out, "latency_p99_us", num(member(lat, "p99")));
            set_metric(c->r, out, "throughput_ops_per_s", num(member(row, "throughput_ops_per_s")));
            set_metric(c->r, out, "scaling_efficiency", num(member(row, "scaling_efficiency")));
            set_metric(c->r, out, "concurrency", num(member(u, "concurrency")));
            set_metric(c->r, out, "concurrent_pct", num(member(u, "concurrent_pct")));
            added++;
        }
        if (!added)
            add_point_row(c->r, pi, c->run_dir,
                          c->error ? c->error : "no row for this point in the result file");
    }
}

static void train_row(launch_ctx *c, int pi, yajl_val doc)
{
    int out = add_point_row(c->r, pi, c->run_dir, c->error);
    for (const char *const *m = ao_sweep_metric_columns(AO_SWEEP_TRAIN); *m; m++)
        set_metric(c->r, out, *m, find_metric(doc, *m, 0));
}

/* Rows for every point of the launch from `result` (the JSON the child
 * wrote); a missing or unreadable file becomes the points' error. */
static void collect(launch_ctx *c, const char *result)
{
    const ao_sweep_plan *p = c->r->p;
    const ao_sweep_launch *l = &p->launches[c->li];
    char why[512] = "";
    yajl_val doc = ao_json_read_file(result, why, sizeof why);
    if (doc && p->spec->command == AO_SWEEP_COLL && !YAJL_IS_ARRAY(doc)) {
        snprintf(why, sizeof why, "%s is not a JSON array of rows", result);
        yajl_tree_free(doc);
        doc = NULL;
    }
    if (!doc) {
        for (int j = 0; j < l->npoints; j++)
            if (!is_done(c, l->points[j]))
                add_point_row(c->r, l->points[j], c->run_dir, c->error ? c->error : why);
        return;
    }
    if (p->spec->command == AO_SWEEP_COLL) {
        coll_rows(c, doc);
    } else if (p->spec->command == AO_SWEEP_QUEUES) {
        queues_rows(c, doc);
    } else {
        for (int j = 0; j < l->npoints; j++) {
            if (is_done(c, l->points[j])) continue;
            if (p->spec->command == AO_SWEEP_SDMA)
                sdma_row(c, l->points[j], doc);
            else
                train_row(c, l->points[j], doc);
        }
    }
    yajl_tree_free(doc);
}

/* ---- running one launch -------------------------------------------------------- */

static int make_dirs(const char *path)
{
    char *p = ao_strdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        mkdir(p, 0777);
        *s = '/';
    }
    int rc = mkdir(p, 0777) == 0 || errno == EEXIST ? 0 : -1;
    if (rc) ao_error(path, "cannot create the directory: %s", strerror(errno));
    free(p);
    return rc;
}

/* The last line of the log that says "error:", for the results' error column. */
static char *error_from_log(const char *log, int status)
{
    char *found = NULL, line[1024];
    FILE *f = fopen(log, "r");
    while (f && fgets(line, sizeof line, f)) {
        char *e = strstr(line, "error:");
        if (!e) continue;
        line[strcspn(line, "\n")] = 0;
        free(found);
        found = ao_strdup(e + strlen("error:") + (e[6] == ' '));
    }
    if (f) fclose(f);
    char *head = WIFEXITED(status) ? ao_asprintf("exit %d", WEXITSTATUS(status))
                                   : ao_asprintf("killed by signal %d", WTERMSIG(status));
    char *msg = found ? ao_asprintf("%s: %s", head, found) : ao_strdup(head);
    free(head);
    free(found);
    return msg;
}

/* fork + execve with the group's variables in the child's envp only; the
 * child's stdout and stderr go to `log`. Returns the wait status, or -1. */
static int run_child(const char *exe, char **args, char **extra_env, const char *log)
{
    int n = 0;
    while (args[n]) n++;
    char **argv = ao_calloc((size_t)n + 2, sizeof *argv);
    argv[0] = (char *)exe;
    for (int i = 0; i < n; i++) argv[i + 1] = args[i];
    char **envp = ao_env_merge(environ, extra_env);
    int status = -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        execve(exe, argv, envp);
        dprintf(STDERR_FILENO, "aorta: error: %s: cannot run: %s\n", exe, strerror(errno));
        _exit(127);
    }
    if (pid < 0) {
        ao_error("sweep", "cannot start a process: %s", strerror(errno));
    } else {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    free(envp);
    free(argv);
    return status;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* train: where the run writes summary.json (output_dir of the point's config). */
static char *train_run_dir(const ao_sweep_plan *p, int point, const char *run_name)
{
    int n;
    const char *config;
    char **ov = ao_sweep_train_config(p, point, &n, &config);
    struct ao_config cfg;
    char *dir = NULL;
    if (ao_config_resolve(&cfg, config, ov, n) == 0)
        dir = ao_asprintf("%s/%s", cfg.training.output_dir, run_name);
    ao_config_free(&cfg);
    for (int i = 0; i < n; i++) free(ov[i]);
    free(ov);
    return dir;
}

static int run_launch(results *r, int li, const char *exe, const char *work_dir,
                      const char *const *done, int ndone)
{
    const ao_sweep_plan *p = r->p;
    const ao_sweep_launch *l = &p->launches[li];
    const ao_sweep_group *g = &p->groups[l->group];
    char *dir = ao_asprintf("%s/launch_%03d", work_dir, li);
    if (make_dirs(dir)) {
        free(dir);
        return AO_EXIT_FAIL;
    }
    char *result = ao_asprintf("%s/result.json", dir), *log = ao_asprintf("%s/output.log", dir);
    unlink(result);
    char id[AO_RUN_ID_MAX], *run_name = NULL, *run_dir = NULL;
    if (p->spec->command == AO_SWEEP_TRAIN) {
        ao_rundir_make_id(id, sizeof id);
        run_name = ao_asprintf("%.40s-%03d-%.50s", p->spec->name, li, id);
        for (char *c = run_name; *c; c++)
            if (*c == '/' || *c < 33 || *c > 126) *c = '-';
        run_dir = train_run_dir(p, l->points[0], run_name);
    }
    char **args = ao_sweep_launch_argv(p, li, result, run_name);

    fprintf(stderr, "sweep: launch %d/%d (group %d:", li + 1, p->nlaunches, l->group);
    for (char **e = g->env; *e; e++) fprintf(stderr, " %s", *e);
    fprintf(stderr, "%s):", *g->env ? "" : " inherited environment");
    for (char **a = args; *a; a++) fprintf(stderr, " %s", *a);
    fprintf(stderr, "\n");

    double t0 = now_s();
    int status = run_child(exe, args, g->env, log);
    int ok = status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    char *error = ok           ? NULL
                  : status < 0 ? ao_strdup("could not start")
                               : error_from_log(log, status);
    fprintf(stderr, "sweep: launch %d/%d %s in %.1f s%s%s (log: %s)\n", li + 1, p->nlaunches,
            ok ? "done" : "FAILED", now_s() - t0, error ? ": " : "", error ? error : "", log);

    launch_ctx c = {r, li, dir, run_dir ? run_dir : dir, error, done, ndone};
    char *summary = run_dir ? ao_asprintf("%s/%s", run_dir, AO_RUN_SUMMARY) : NULL;
    collect(&c, summary ? summary : result);
    int interrupted = status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGINT;

    free(summary);
    ao_sweep_argv_free(args);
    free(error);
    free(run_name);
    free(run_dir);
    free(result);
    free(log);
    free(dir);
    return interrupted ? -1 : ok ? 0 : AO_EXIT_FAIL;
}

/* ---- resume: the rows of an earlier results file -------------------------------- */

typedef struct old_row {
    char **keys, **vals; /* vals[i] NULL for null */
    int n;
    char *id;
    int ok;
} old_row;

static void old_row_add(old_row *o, const char *k, const char *v)
{
    o->keys = ao_realloc(o->keys, (size_t)(o->n + 1) * sizeof *o->keys);
    o->vals = ao_realloc(o->vals, (size_t)(o->n + 1) * sizeof *o->vals);
    o->keys[o->n] = ao_strdup(k);
    o->vals[o->n] = v ? ao_strdup(v) : NULL;
    o->n++;
}

static const char *old_val(const old_row *o, const char *k)
{
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->keys[i], k) == 0) return o->vals[i];
    return NULL;
}

/* One CSV field (RFC 4180) from *s; NULL at the end of the line. */
static char *csv_field(const char **s)
{
    if (**s == '\n' || **s == 0) return NULL;
    size_t cap = 64, n = 0;
    char *out = ao_malloc(cap);
    const char *c = *s;
    int quoted = *c == '"';
    if (quoted) c++;
    for (; *c; c++) {
        if (quoted && *c == '"') {
            if (c[1] == '"') {
                c++;
            } else {
                quoted = 0;
                continue;
            }
        } else if (!quoted && (*c == ',' || *c == '\n' || *c == '\r')) {
            break;
        }
        if (n + 2 > cap) out = ao_realloc(out, cap *= 2);
        out[n++] = *c;
    }
    out[n] = 0;
    if (*c == '\r') c++;
    if (*c == ',') {
        c++;
        if (*c == '\n' || *c == 0) { /* a trailing empty field */
        }
    }
    *s = c;
    return out;
}

/* The results file of an earlier run of this sweep: its header holds every
 * column the sweep writes, and no row has more fields than the header. Any
 * other file is refused (exit 2), never overwritten. */
static int read_old_csv(const results *r, const char *path, old_row **rows, int *nrows)
{
    const char *what;
    int fd = ao_open_regular(path, &what);
    if (fd < 0 && !what && errno == ENOENT) return 0; /* nothing to resume from */
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    if (!f) {
        if (fd >= 0) close(fd);
        ao_error("--resume", "%s: %s", path, what ? what : strerror(errno));
        return AO_EXIT_USAGE;
    }
    char **head = NULL, line[1 << 14];
    int nhead = 0, lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        const char *s = line;
        char *at = ao_asprintf("%s:%d", path, ++lineno);
        if (strlen(line) + 1 == sizeof line) {
            ao_error("--resume", "%s: a line longer than %zu bytes; not a results file", at,
                     sizeof line - 2);
            rc = AO_EXIT_USAGE;
        } else if (lineno == 1) {
            for (char *fld; (fld = csv_field(&s)) != NULL;) {
                head = ao_realloc(head, (size_t)(nhead + 1) * sizeof *head);
                head[nhead++] = fld;
                if (*s == '\n' || !*s) break;
            }
            for (int j = 0; rc == 0 && j < r->ncols; j++) {
                int found = 0;
                for (int i = 0; i < nhead; i++) found |= strcmp(head[i], r->cols[j].key) == 0;
                if (!found) {
                    ao_error("--resume",
                             "%s: the header has no column '%s'; not the results of this sweep", at,
                             r->cols[j].key);
                    ao_hint("move the file away, or run without --resume to write it anew");
                    rc = AO_EXIT_USAGE;
                }
            }
        } else {
            *rows = ao_realloc(*rows, (size_t)(*nrows + 1) * sizeof **rows);
            old_row *o = &(*rows)[(*nrows)++];
            memset(o, 0, sizeof *o);
            for (int i = 0; i < nhead; i++) {
                char *fld = csv_field(&s);
                old_row_add(o, head[i], fld && *fld ? fld : NULL);
                free(fld);
            }
            if (*s && *s != '\n' && *s != '\r') {
                ao_error("--resume", "%s: more fields than the header's %d; a corrupt results file",
                         at, nhead);
                rc = AO_EXIT_USAGE;
            }
        }
        free(at);
    }
    fclose(f);
    for (int i = 0; i < nhead; i++) free(head[i]);
    free(head);
    return rc;
}

static int read_old_json(const char *path, old_row **rows, int *nrows)
{
    if (access(path, F_OK) != 0) return 0;
    char why[512];
    yajl_val doc = ao_json_read_file(path, why, sizeof why);
    if (!doc || !YAJL_IS_ARRAY(doc)) {
        ao_error("--resume", "%s", doc ? "the results file is not a JSON array of rows" : why);
        yajl_tree_free(doc);
        return AO_EXIT_USAGE;
    }
    for (size_t i = 0; i < doc->u.array.len; i++) {
        yajl_val row = doc->u.array.values[i];
        if (!YAJL_IS_OBJECT(row)) continue;
        *rows = ao_realloc(*rows, (size_t)(*nrows + 1) * sizeof **rows);
        old_row *o = &(*rows)[(*nrows)++];
        memset(o, 0, sizeof *o);
        for (size_t k = 0; k < row->u.object.len; k++) {
            yajl_val v = row->u.object.values[k];
            const char *text = YAJL_IS_STRING(v)   ? YAJL_GET_STRING(v)
                               : YAJL_IS_NUMBER(v) ? YAJL_GET_NUMBER(v)
                                                   : NULL;
            old_row_add(o, row->u.object.keys[k], text);
        }
    }
    yajl_tree_free(doc);
    return 0;
}

static void old_rows_free(old_row *rows, int n)
{
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < rows[i].n; k++) {
            free(rows[i].keys[k]);
            free(rows[i].vals[k]);
        }
        free(rows[i].keys);
        free(rows[i].vals);
        free(rows[i].id);
    }
    free(rows);
}

static char *old_id(const results *r, const old_row *o)
{
    char *id = ao_strdup("");
    for (int j = 0; j < r->ncols; j++) {
        if (r->role[j] != ROLE_AXIS && r->role[j] != ROLE_ENV) continue;
        const char *v = old_val(o, r->cols[j].key);
        char *next = ao_asprintf("%s%s\x1f", id, v ? v : "");
        free(id);
        id = next;
    }
    return id;
}

static void old_row_to_table(results *r, const old_row *o)
{
    int row = ao_table_add_row(r->t);
    for (int j = 0; j < r->ncols; j++) {
        const char *v = old_val(o, r->cols[j].key);
        if (!v) continue;
        char *end;
        double d = strtod(v, &end);
        if (r->role[j] == ROLE_METRIC && *v && !*end)
            ao_table_set_num(r->t, row, j, d);
        else
            set_str(r, row, j, v);
    }
}

/* ---- output --------------------------------------------------------------------- */

static int write_results(results *r, const ao_sweep_run_opts *o)
{
    const char *path = o->out ? o->out : "/dev/stdout";
    if (o->format == AO_SWEEP_CSV) return ao_table_write_csv(r->t, path) ? AO_EXIT_FAIL : 0;
    if (o->format == AO_SWEEP_JSON) return ao_table_write_json(r->t, path) ? AO_EXIT_FAIL : 0;
    FILE *f = o->out ? fopen(path, "w") : stdout;
    if (!f) {
        ao_error(path, "cannot write the results: %s", strerror(errno));
        return AO_EXIT_FAIL;
    }
    ao_table_print_header(r->t, f);
    for (int i = 0; i < ao_table_rows(r->t); i++) ao_table_print_row(r->t, i, f);
    if (o->out && fclose(f) != 0) {
        ao_error(path, "cannot write the results: %s", strerror(errno));
        return AO_EXIT_FAIL;
    }
    return 0;
}

/* ---- the chart ---------------------------------------------------------------- */

static const char *cell_text(const results *r, int row, int col, char *buf, size_t n)
{
    double d = ao_table_num(r->t, row, col);
    if (!isnan(d)) {
        snprintf(buf, n, "%.15g", d);
        return buf;
    }
    return NULL;
}

/* Columns the chart may vary over: axes, variables, and coll's size. The
 * text of each row's cell is read back through a CSV-free path: strings are
 * kept by the table, so the chart uses the axis values from the plan. */
static void chart(results *r, const ao_sweep_run_opts *o, const char *chart_dir, const char *metric,
                  int first)
{
    int mc = col_index(r, metric), nrows = ao_table_rows(r->t);
    int ec = col_index(r, "error");
    int cand[64], nc = 0;
    for (int j = 0; j < r->ncols && nc < 64; j++)
        if (r->role[j] == ROLE_AXIS || r->role[j] == ROLE_ENV ||
            (r->role[j] == ROLE_METRIC &&
             (strcmp(r->cols[j].key, "size") == 0 || strcmp(r->cols[j].key, "coll") == 0 ||
              strcmp(r->cols[j].key, "streams") == 0)))
            if (j != mc) cand[nc++] = j;
    ao_sweep_chart_data d = {.metric = r->cols[mc].key, .title = r->p->spec->name};
    d.nrows = nrows;
    d.ndims = nc;
    d.dim_names = ao_calloc((size_t)nc + 1, sizeof *d.dim_names);
    d.cells = ao_calloc((size_t)(nrows * nc) + 1, sizeof *d.cells);
    d.values = ao_calloc((size_t)nrows + 1, sizeof *d.values);
    char buf[64];
    for (int k = 0; k < nc; k++) d.dim_names[k] = r->cols[cand[k]].key;
    for (int i = 0; i < nrows; i++) {
        int failed = ao_table_str(r->t, i, ec) != NULL;
        d.values[i] = failed ? NAN : ao_table_num(r->t, i, mc);
        for (int k = 0; k < nc; k++) {
            const char *s = ao_table_str(r->t, i, cand[k]);
            if (!s) s = cell_text(r, i, cand[k], buf, sizeof buf);
            d.cells[i * nc + k] = ao_strdup(s ? s : "");
        }
    }
    const char *base = o->out ? strrchr(o->out, '/') : NULL;
    base = base ? base + 1 : o->out ? o->out : r->p->spec->name;
    char *stem = ao_strdup(base), *dot = strrchr(stem, '.');
    if (dot && dot != stem) *dot = 0;
    /* The first metric's chart is STEM.png; each further one STEM_METRIC.png. */
    char *png = first ? ao_asprintf("%s/%s.png", chart_dir, stem)
                      : ao_asprintf("%s/%s_%s.png", chart_dir, stem, metric);
    char *svg = first ? ao_asprintf("%s/%s.svg", chart_dir, stem)
                      : ao_asprintf("%s/%s_%s.svg", chart_dir, stem, metric);
#ifdef AORTA_HAVE_CAIRO
    const struct ao_sweep_chart *ch = ao_plugin_sym("cairo", "ao_sweep_chart_cairo", 1);
    if (!ch)
        ao_warn("sweep: no chart %s: cannot load libaorta_cairo.so: %s", png,
                ao_plugin_why("cairo"));
    else if (ch->write(&d, png, svg) == 0)
        fprintf(stderr, "sweep: chart %s, %s\n", png, svg);
#else
    ao_debug("sweep: no chart %s: this aorta was built without cairo", png);
#endif
    free(png);
    free(svg);
    free(stem);
    for (int i = 0; i < nrows * nc; i++) free(d.cells[i]);
    free(d.cells);
    free(d.values);
    free(d.dim_names);
}

/* ---- the sweep ------------------------------------------------------------------- */

int ao_sweep_run(const ao_sweep_plan *p, const ao_sweep_run_opts *o)
{
    if (o->resume && (!o->out || o->format == AO_SWEEP_TABLE)) {
        ao_error("--resume", "needs the results file of the earlier run: --out FILE with "
                             "--format csv or json");
        return AO_EXIT_USAGE;
    }
    results r;
    results_init(&r, p);
    old_row *old = NULL;
    int nold = 0, rc = 0;
    if (o->resume) {
        rc = o->format == AO_SWEEP_JSON ? read_old_json(o->out, &old, &nold)
                                        : read_old_csv(&r, o->out, &old, &nold);
        if (rc) {
            old_rows_free(old, nold);
            results_free(&r);
            return rc;
        }
    }
    /* A point is done when it has rows and none of them has an error. */
    const char **done = ao_calloc((size_t)nold + 1, sizeof *done);
    int ndone = 0;
    for (int i = 0; i < nold; i++) {
        old[i].id = old_id(&r, &old[i]);
        old[i].ok = !old_val(&old[i], "error");
    }
    for (int i = 0; i < nold; i++) {
        int ok = 1;
        for (int k = 0; k < nold; k++)
            if (strcmp(old[k].id, old[i].id) == 0) ok &= old[k].ok;
        if (ok) {
            done[ndone++] = old[i].id;
            old_row_to_table(&r, &old[i]);
        }
    }
    if (o->out && strchr(o->out, '/')) {
        char *dir = ao_strdup(o->out);
        *strrchr(dir, '/') = 0;
        if (*dir && make_dirs(dir)) rc = AO_EXIT_FAIL;
        free(dir);
    }
    char *self = o->exe ? NULL : ao_self_exe();
    const char *exe = o->exe ? o->exe : self;
    char *work =
        o->work_dir ? ao_strdup(o->work_dir) : ao_asprintf("artifacts/sweeps/%s", p->spec->name);
    int failed = 0, ran = 0;
    if (!exe) rc = AO_EXIT_FAIL;
    for (int li = 0; rc == 0 && li < p->nlaunches; li++) {
        int pending = 0;
        for (int j = 0; j < p->launches[li].npoints; j++) {
            launch_ctx c = {.r = &r, .done = done, .ndone = ndone};
            pending |= !is_done(&c, p->launches[li].points[j]);
        }
        if (!pending) {
            fprintf(stderr, "sweep: launch %d/%d already in %s; skipped\n", li + 1, p->nlaunches,
                    o->out);
            continue;
        }
        int lrc = run_launch(&r, li, exe, work, done, ndone);
        ran++;
        if (lrc < 0) {
            ao_error("sweep", "interrupted; the results so far are kept");
            failed = 1;
            break;
        }
        if (lrc) failed = 1;
        if (o->out && write_results(&r, o) != 0) rc = AO_EXIT_FAIL;
        if (lrc && o->fail_fast) {
            ao_error("sweep", "stopping at the first failed launch (--fail-fast)");
            break;
        }
    }
    if (rc == 0 && (!o->out || ran == 0)) rc = write_results(&r, o);
    if (rc == 0 && ao_table_rows(r.t) > 0) {
        const char *cdir = o->chart_dir;
        char *outdir = NULL;
        if (!cdir && o->out) {
            outdir = ao_strdup(o->out);
            char *slash = strrchr(outdir, '/');
            if (slash)
                *slash = 0;
            else
                strcpy(outdir, ".");
            cdir = outdir;
        }
        if (!cdir) cdir = work;
        if (make_dirs(cdir) == 0) {
            chart(&r, o, cdir, p->spec->metric, 1);
            for (int m = 0; m < p->spec->nmore_metrics; m++)
                chart(&r, o, cdir, p->spec->more_metrics[m], 0);
        }
        free(outdir);
    }
    free(work);
    free(self);
    free(done);
    old_rows_free(old, nold);
    results_free(&r);
    if (rc) return rc;
    return failed ? AO_EXIT_FAIL : 0;
}
