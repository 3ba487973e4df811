#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/json.h"
#include "core/rundir.h"
#include "runs/rundata.h"
#include "runs/trace.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the metric table --------------------------------------------------------- */

typedef enum msrc {
    SRC_OVERLAP,      /* a double field of ao_overlap at `off` */
    SRC_COMPUTE_KIND, /* compute_kind_ms[idx] */
    SRC_EXPOSED_KIND, /* exposed_kind_ms[idx]; older records: busy - compute (an upper bound) */
    SRC_BUSBW,        /* kinds[idx].busbw_gbps, NAN when the kind ran no op */
    SRC_COLL_BUSY,    /* kinds[idx].busy_ms, NAN when the kind ran no op */
    SRC_STREAM_BUSY,  /* streams[idx].busy_ms */
    SRC_RECORD,       /* a double field of ao_iter_record at `off` */
    SRC_EXTRA,        /* extra[obj][key] of the record's line, read by the loader */
} msrc;

typedef struct metric {
    ao_metric_def def;
    msrc src;
    size_t off;
    int idx;
    const char *obj, *key; /* SRC_EXTRA */
} metric;

#define OVF(name, unit, better, head)                                                              \
    {                                                                                              \
        {#name, unit, better, head}, SRC_OVERLAP, offsetof(ao_overlap, name), 0, NULL, NULL        \
    }
#define RECF(name, unit, better, head)                                                             \
    {                                                                                              \
        {#name, unit, better, head}, SRC_RECORD, offsetof(ao_iter_record, name), 0, NULL, NULL     \
    }
#define IDX(name, unit, better, head, src, i)                                                      \
    {                                                                                              \
        {name, unit, better, head}, src, 0, i, NULL, NULL                                          \
    }
#define EXTRA(name, unit, better, obj, key)                                                        \
    {                                                                                              \
        {name, unit, better, 0}, SRC_EXTRA, 0, 0, obj, key                                         \
    }

/* Direction: less time waiting or exposed is better, more overlap and
 * bandwidth is better; per-stream busy time and the loss are reported without
 * a judgement (more busy time can mean more work or slower work). */
static const metric metrics[] = {
    OVF(step_ms, "ms", AO_BETTER_LOWER, 1),
    RECF(tokens_per_s, "tokens/s", AO_BETTER_HIGHER, 1),
    OVF(compute_ms, "ms", AO_BETTER_LOWER, 1),
    OVF(comm_ms, "ms", AO_BETTER_LOWER, 1),
    OVF(copy_ms, "ms", AO_BETTER_LOWER, 0),
    OVF(overlap_ms, "ms", AO_BETTER_HIGHER, 1),
    OVF(exposed_comm_ms, "ms", AO_BETTER_LOWER, 1),
    OVF(idle_ms, "ms", AO_BETTER_LOWER, 1),
    OVF(host_wait_ms, "ms", AO_BETTER_LOWER, 0),
    RECF(data_wait_ms, "ms", AO_BETTER_LOWER, 0),
    RECF(mem_peak_mb, "MiB", AO_BETTER_LOWER, 0),
    RECF(host_gap_ms, "ms", AO_BETTER_LOWER, 0),
    OVF(overlap_ratio, "ratio", AO_BETTER_HIGHER, 1),
    OVF(compute_covered_ratio, "ratio", AO_BETTER_HIGHER, 1),
    OVF(overlap_efficiency, "ratio", AO_BETTER_HIGHER, 1),
    IDX("compute_allgather_ms", "ms", AO_BETTER_HIGHER, 0, SRC_COMPUTE_KIND, AO_KIND_ALLGATHER),
    IDX("compute_reducescatter_ms", "ms", AO_BETTER_HIGHER, 0, SRC_COMPUTE_KIND,
        AO_KIND_REDUCESCATTER),
    IDX("compute_allreduce_ms", "ms", AO_BETTER_HIGHER, 0, SRC_COMPUTE_KIND, AO_KIND_ALLREDUCE),
    IDX("compute_broadcast_ms", "ms", AO_BETTER_HIGHER, 0, SRC_COMPUTE_KIND, AO_KIND_BROADCAST),
    IDX("exposed_allgather_ms", "ms", AO_BETTER_LOWER, 0, SRC_EXPOSED_KIND, AO_KIND_ALLGATHER),
    IDX("exposed_reducescatter_ms", "ms", AO_BETTER_LOWER, 0, SRC_EXPOSED_KIND,
        AO_KIND_REDUCESCATTER),
    IDX("exposed_allreduce_ms", "ms", AO_BETTER_LOWER, 0, SRC_EXPOSED_KIND, AO_KIND_ALLREDUCE),
    IDX("exposed_broadcast_ms", "ms", AO_BETTER_LOWER, 0, SRC_EXPOSED_KIND, AO_KIND_BROADCAST),
    IDX("busbw_allgather_gbps", "GB/s", AO_BETTER_HIGHER, 1, SRC_BUSBW, AO_KIND_ALLGATHER),
    IDX("busbw_reducescatter_gbps", "GB/s", AO_BETTER_HIGHER, 1, SRC_BUSBW, AO_KIND_REDUCESCATTER),
    IDX("busbw_allreduce_gbps", "GB/s", AO_BETTER_HIGHER, 1, SRC_BUSBW, AO_KIND_ALLREDUCE),
    IDX("busbw_broadcast_gbps", "GB/s", AO_BETTER_HIGHER, 0, SRC_BUSBW, AO_KIND_BROADCAST),
    IDX("allgather_ms", "ms", AO_BETTER_LOWER, 0, SRC_COLL_BUSY, AO_KIND_ALLGATHER),
    IDX("reducescatter_ms", "ms", AO_BETTER_LOWER, 0, SRC_COLL_BUSY, AO_KIND_REDUCESCATTER),
    IDX("allreduce_ms", "ms", AO_BETTER_LOWER, 0, SRC_COLL_BUSY, AO_KIND_ALLREDUCE),
    IDX("broadcast_ms", "ms", AO_BETTER_LOWER, 0, SRC_COLL_BUSY, AO_KIND_BROADCAST),
    IDX("busy_compute_ms", "ms", AO_BETTER_NEITHER, 0, SRC_STREAM_BUSY, AO_STREAM_COMPUTE),
    IDX("busy_allgather_ms", "ms", AO_BETTER_NEITHER, 0, SRC_STREAM_BUSY, AO_STREAM_ALLGATHER),
    IDX("busy_reducescatter_ms", "ms", AO_BETTER_NEITHER, 0, SRC_STREAM_BUSY,
        AO_STREAM_REDUCESCATTER),
    IDX("busy_allreduce_ms", "ms", AO_BETTER_NEITHER, 0, SRC_STREAM_BUSY, AO_STREAM_ALLREDUCE),
    IDX("busy_h2d_ms", "ms", AO_BETTER_NEITHER, 0, SRC_STREAM_BUSY, AO_STREAM_H2D),
    RECF(loss, "", AO_BETTER_NEITHER, 0),
    RECF(grad_norm, "", AO_BETTER_NEITHER, 0),
    /* aorta train's kernel trace (profiling.kernel_trace) */
    EXTRA("kernel_step_ms", "ms", AO_BETTER_LOWER, "overlap_kernels", "step_ms"),
    EXTRA("kernel_compute_ms", "ms", AO_BETTER_LOWER, "overlap_kernels", "compute_ms"),
    EXTRA("kernel_comm_ms", "ms", AO_BETTER_LOWER, "overlap_kernels", "comm_ms"),
    /* any kernel-level source: train's kernel trace, analyze, attach */
    EXTRA("contention_ms", "ms", AO_BETTER_LOWER, "contention", "ms"),
};

size_t ao_metric_count(void)
{
    return NELEM(metrics);
}

const ao_metric_def *ao_metric(size_t i)
{
    return i < NELEM(metrics) ? &metrics[i].def : NULL;
}

int ao_metric_find(const char *name)
{
    for (size_t i = 0; i < NELEM(metrics); i++)
        if (strcmp(metrics[i].def.name, name) == 0) return (int)i;
    return -1;
}

double ao_metric_value(size_t i, const ao_iter_record *r)
{
    const metric *m = &metrics[i];
    switch (m->src) {
    case SRC_OVERLAP:
        return *(const double *)((const char *)&r->m + m->off);
    case SRC_RECORD:
        return *(const double *)((const char *)r + m->off);
    case SRC_COMPUTE_KIND:
        return r->m.kinds[m->idx].ops > 0 ? r->m.compute_kind_ms[m->idx] : NAN;
    case SRC_EXPOSED_KIND:
        if (r->m.kinds[m->idx].ops == 0) return NAN;
        return isnan(r->m.exposed_kind_ms[m->idx])
                   ? r->m.kinds[m->idx].busy_ms - r->m.compute_kind_ms[m->idx]
                   : r->m.exposed_kind_ms[m->idx];
    case SRC_BUSBW:
        return r->m.kinds[m->idx].ops > 0 ? r->m.kinds[m->idx].busbw_gbps : NAN;
    case SRC_COLL_BUSY:
        return r->m.kinds[m->idx].ops > 0 ? r->m.kinds[m->idx].busy_ms : NAN;
    case SRC_STREAM_BUSY:
        return r->m.streams[m->idx].busy_ms;
    case SRC_EXTRA:
        return NAN; /* not in the struct: extra_value */
    }
    return NAN;
}

/* extra[obj][key] of a record's line as a number, NAN when absent or null. */
static double extra_value(yajl_val line, const char *obj, const char *key)
{
    yajl_val v = ao_json_member(ao_json_member(ao_json_member(line, "extra"), obj), key);
    return YAJL_IS_NUMBER(v) ? ao_json_number(v) : NAN;
}

static ao_kernel_view kernel_view(yajl_val line)
{
    return (ao_kernel_view){extra_value(line, "overlap_kernels", "step_ms"),
                            extra_value(line, "overlap_kernels", "compute_ms"),
                            extra_value(line, "overlap_kernels", "comm_ms")};
}

void ao_rank_column(const ao_rank_data *rd, size_t m, double *out)
{
    size_t nm = NELEM(metrics);
    for (size_t i = 0; i < rd->n; i++) out[i] = rd->rows[i * nm + m];
}

/* ---- reading one rank's file ------------------------------------------------ */

typedef struct rank_job {
    char *path;
    int expect_rank;
    int keep_ops; /* keep the records' op lists (profiled) */
    long long skip;
    ao_rank_data *rd;
    int world_size;      /* of the first record, 0 before it */
    long long last_step; /* of the last train record, -1 before it */
    int rc;
} rank_job;

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    *cap = c;
    return ao_realloc(p, c * elem);
}

static ao_telemetry_series *telemetry_series(ao_rank_data *rd, const char *key)
{
    for (size_t i = 0; i < rd->ntelemetry; i++)
        if (strcmp(rd->telemetry[i].key, key) == 0) return &rd->telemetry[i];
    rd->telemetry = ao_realloc(rd->telemetry, (rd->ntelemetry + 1) * sizeof *rd->telemetry);
    ao_telemetry_series *s = &rd->telemetry[rd->ntelemetry++];
    memset(s, 0, sizeof *s);
    s->key = ao_strdup(key);
    return s;
}

static void telemetry_add(ao_rank_data *rd, const char *key, yajl_val v)
{
    if (!YAJL_IS_NUMBER(v)) return;
    ao_telemetry_series *s = telemetry_series(rd, key);
    s->values = grow(s->values, &s->cap, s->n + 1, sizeof *s->values);
    s->values[s->n++] = ao_json_number(v);
}

/* Numeric members of extra.telemetry, and of objects one level down
 * ("gpu0.power_w"); anything else is not a series and is ignored. */
static void take_telemetry(ao_rank_data *rd, yajl_val line)
{
    yajl_val t = ao_json_member(ao_json_member(line, "extra"), "telemetry");
    if (!YAJL_IS_OBJECT(t)) return;
    for (size_t i = 0; i < t->u.object.len; i++) {
        const char *k = t->u.object.keys[i];
        yajl_val v = t->u.object.values[i];
        if (YAJL_IS_OBJECT(v)) {
            for (size_t j = 0; j < v->u.object.len; j++) {
                char key[256];
                snprintf(key, sizeof key, "%s.%s", k, v->u.object.keys[j]);
                telemetry_add(rd, key, v->u.object.values[j]);
            }
        } else {
            telemetry_add(rd, k, v);
        }
    }
}

/* The record's kernel trace, read by the trace's own parser. */
static int take_kernels(rank_job *job, const ao_iter_record *r, yajl_val line)
{
    ao_op *ops;
    size_t n;
    int rc = ao_trace_record_kernels(line, job->path, r->step, &ops, &n);
    if (rc == 0 && ops) ao_kernel_table_add(&job->rd->kernels, ops, n, r->m.step_ms);
    free(ops);
    return rc;
}

static int on_record(void *ctx, ao_iter_record *r, yajl_val line)
{
    rank_job *job = ctx;
    ao_rank_data *rd = job->rd;
    if (r->rank != job->expect_rank) {
        ao_error(job->path, "step %lld has rank %d; the file name says rank %d", r->step, r->rank,
                 job->expect_rank);
        return AO_EXIT_USAGE;
    }
    if (job->world_size == 0) job->world_size = r->world_size;
    if (r->world_size != job->world_size) {
        ao_error(job->path, "step %lld has world_size %d; earlier records have %d", r->step,
                 r->world_size, job->world_size);
        return AO_EXIT_USAGE;
    }
    /* a baseline's kernel view grows in step with its §7 fields (the same
     * capacity before and after) */
    if (strcmp(r->phase, "compute_only") == 0) {
        size_t cap = rd->cap_compute_only;
        rd->compute_only = grow(rd->compute_only, &rd->cap_compute_only, rd->ncompute_only + 1,
                                sizeof *rd->compute_only);
        rd->compute_only_k =
            grow(rd->compute_only_k, &cap, rd->ncompute_only + 1, sizeof *rd->compute_only_k);
        rd->compute_only_k[rd->ncompute_only] = kernel_view(line);
        rd->compute_only[rd->ncompute_only++] = r->m;
        return 0;
    }
    if (strcmp(r->phase, "comm_only") == 0) {
        size_t cap = rd->cap_comm_only;
        rd->comm_only =
            grow(rd->comm_only, &rd->cap_comm_only, rd->ncomm_only + 1, sizeof *rd->comm_only);
        rd->comm_only_k = grow(rd->comm_only_k, &cap, rd->ncomm_only + 1, sizeof *rd->comm_only_k);
        rd->comm_only_k[rd->ncomm_only] = kernel_view(line);
        rd->comm_only[rd->ncomm_only++] = r->m;
        return 0;
    }
    /* A writer appends steps in order: anything else is not one run's file
     * (two concatenated, or edited), and step-indexed readers assume it. */
    if (r->step <= job->last_step) {
        char *where = ao_asprintf("%s:%zu", job->path, r->line);
        ao_error(where, "step %lld after step %lld: train records must be in ascending step order",
                 r->step, job->last_step);
        free(where);
        return AO_EXIT_USAGE;
    }
    job->last_step = r->step;
    if ((long long)rd->skipped < job->skip) {
        rd->skipped++;
        return 0;
    }
    size_t nm = NELEM(metrics);
    if (rd->n == rd->cap) {
        rd->cap = rd->cap ? 2 * rd->cap : 16; /* thousands of ranks: small first */
        rd->steps = ao_realloc(rd->steps, rd->cap * sizeof *rd->steps);
        rd->wall = ao_realloc(rd->wall, rd->cap * sizeof *rd->wall);
        rd->rows = ao_realloc(rd->rows, rd->cap * nm * sizeof *rd->rows);
    }
    rd->steps[rd->n] = r->step;
    rd->wall[rd->n] = r->wall_time;
    double *row = &rd->rows[rd->n * nm];
    for (size_t m = 0; m < nm; m++)
        row[m] = metrics[m].src == SRC_EXTRA ? extra_value(line, metrics[m].obj, metrics[m].key)
                                             : ao_metric_value(m, r);
    rd->n++;
    ao_contention_evidence_add(&rd->contention,
                               ao_json_member(ao_json_member(line, "extra"), "contention"));
    if (r->ops && !job->keep_ops) {
        rd->profiled_dropped++;
    } else if (r->ops) {
        if (rd->nprofiled < AO_RUNDATA_MAX_PROFILED) {
            if (!rd->profiled)
                rd->profiled = ao_calloc(AO_RUNDATA_MAX_PROFILED, sizeof *rd->profiled);
            ao_iter_record_move(&rd->profiled[rd->nprofiled++], r);
        } else {
            rd->profiled_dropped++;
        }
    }
    take_telemetry(rd, line);
    return take_kernels(job, r, line);
}

static void *read_rank(void *arg)
{
    rank_job *job = arg;
    ao_jsonl_stats st;
    job->rc = ao_jsonl_read(job->path, on_record, job, &st);
    job->rd->truncated = st.truncated;
    ao_kernel_table_sort(&job->rd->kernels);
    ao_contention_evidence_sort(&job->rd->contention);
    return NULL;
}

/* Jobs handed out one at a time to a few threads. */
typedef struct job_queue {
    pthread_mutex_t lock;
    rank_job *jobs;
    size_t n, next;
} job_queue;

static void *worker(void *arg)
{
    job_queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        size_t i = q->next < q->n ? q->next++ : q->n;
        pthread_mutex_unlock(&q->lock);
        if (i == q->n) return NULL;
        read_rank(&q->jobs[i]);
    }
}

static void run_jobs(rank_job *jobs, size_t n)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t nthreads = cores > 1 ? (size_t)cores : 1;
    if (nthreads > n) nthreads = n;
    if (nthreads > 16) nthreads = 16;
    job_queue q = {PTHREAD_MUTEX_INITIALIZER, jobs, n, 0};
    pthread_t tid[16];
    size_t started = 0;
    for (size_t t = 1; t < nthreads; t++) {
        if (pthread_create(&tid[started], NULL, worker, &q) != 0) break;
        started++;
    }
    worker(&q); /* this thread works too; with one core it does everything */
    for (size_t t = 0; t < started; t++) pthread_join(tid[t], NULL);
}

/* ---- run directories -------------------------------------------------------- */

/* rank number of "rank_NN_metrics.jsonl", or -1. */
static int metrics_file_rank(const char *name)
{
    if (strncmp(name, "rank_", 5) != 0) return -1;
    const char *p = name + 5;
    size_t digits = strspn(p, "0123456789");
    if (digits == 0 || digits > 7 || strcmp(p + digits, AO_RANK_METRICS) != 0) return -1;
    return atoi(p);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* Whether dir looks like a run directory: run.json or a metrics file. */
static int is_run_dir(const char *dir)
{
    char *rj = ao_asprintf("%s/%s", dir, AO_RUN_JSON);
    int yes = file_exists(rj);
    free(rj);
    if (yes) return 1;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while (!yes && (e = readdir(d))) yes = metrics_file_rank(e->d_name) >= 0;
    closedir(d);
    return yes;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int ao_run_dirs_resolve(const char *log_dir, int all_runs, char ***dirs, size_t *n)
{
    *dirs = NULL;
    *n = 0;
    if (!is_dir(log_dir)) {
        ao_error("--log-dir", "%s: %s", log_dir,
                 file_exists(log_dir) ? "not a directory" : "no such directory");
        return AO_EXIT_USAGE;
    }
    if (is_run_dir(log_dir)) {
        *dirs = ao_malloc(sizeof **dirs);
        (*dirs)[0] = ao_strdup(log_dir);
        *n = 1;
        return 0;
    }
    if (!all_runs) {
        char *latest = ao_asprintf("%s/%s", log_dir, AO_RUN_LATEST);
        int ok = is_dir(latest) && is_run_dir(latest);
        if (ok) {
            *dirs = ao_malloc(sizeof **dirs);
            (*dirs)[0] = latest;
            *n = 1;
            return 0;
        }
        free(latest);
        ao_error("--log-dir", "%s has no run.json, no rank_NN_metrics.jsonl and no `latest` run",
                 log_dir);
        ao_hint("give a run directory, an output directory with a `latest` link, or --all-runs");
        return AO_EXIT_USAGE;
    }
    DIR *d = opendir(log_dir);
    if (!d) {
        ao_error("--log-dir", "%s: %s", log_dir, strerror(errno));
        return AO_EXIT_USAGE;
    }
    struct dirent *e;
    size_t cap = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, AO_RUN_LATEST) == 0) continue;
        char *p = ao_asprintf("%s/%s", log_dir, e->d_name);
        if (is_dir(p) && is_run_dir(p)) {
            *dirs = grow(*dirs, &cap, *n + 1, sizeof **dirs);
            (*dirs)[(*n)++] = p;
        } else {
            free(p);
        }
    }
    closedir(d);
    if (*n == 0) {
        ao_error("--log-dir", "%s holds no run directory (none has run.json or metrics files)",
                 log_dir);
        return AO_EXIT_USAGE;
    }
    qsort(*dirs, *n, sizeof **dirs, cmp_str);
    return 0;
}

void ao_run_dirs_free(char **dirs, size_t n)
{
    for (size_t i = 0; i < n; i++) free(dirs[i]);
    free(dirs);
}

/* The parsed JSON of path, NULL when it does not exist (*missing set), cannot
 * be read or does not parse (err holds why). */
static yajl_val read_json_file(const char *path, char *err, size_t errlen, int *missing)
{
    *missing = 0;
    err[0] = '\0';
    char *buf = ao_file_read(path, NULL);
    if (!buf) {
        *missing = errno == ENOENT;
        snprintf(err, errlen, "cannot read it: %s",
                 errno == EISDIR   ? "a directory, not a file"
                 : errno == EINVAL ? "not a regular file"
                                   : strerror(errno));
        return NULL;
    }
    char why[256] = "";
    yajl_val v = yajl_tree_parse(buf, why, sizeof why);
    free(buf);
    why[strcspn(why, "\n")] = '\0';
    if (!v) snprintf(err, errlen, "not a JSON object: %s", why);
    return v;
}

/* Why the member `key` of run.json is not what its readers take it for
 * (kind: 's' string, 'b' boolean, 'n' integer >= lo), or NULL; absent is
 * fine unless required. */
static const char *member_problem(yajl_val obj, const char *key, char kind, long long lo,
                                  int required)
{
    yajl_val v = ao_json_member(obj, key);
    if (!v) return required ? "missing" : NULL;
    switch (kind) {
    case 's':
        return YAJL_IS_STRING(v) ? NULL : "not a string";
    case 'b':
        return YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v) ? NULL : "not true or false";
    default:
        return YAJL_IS_INTEGER(v) && YAJL_GET_INTEGER(v) >= lo
                   ? NULL
                   : (lo > 0 ? "not a whole number >= 1" : "not a whole number >= 0");
    }
}

/* The fields the readers of a run interpret, each of its type: a run.json
 * that says otherwise is refused, never read as the defaults. 0, or
 * AO_EXIT_USAGE after one error naming the file and the field. */
static int check_run_json(const char *path, yajl_val run)
{
    static const struct {
        const char *key;
        char kind;
        long long lo;
        int required;
    } fields[] = {
        {"run_id", 's', 0, 0},    {"world_size", 'n', 1, 1}, {"planned_steps", 'n', 0, 0},
        {"completed", 'b', 0, 0}, {"end", 's', 0, 0},
    };
    for (size_t i = 0; i < NELEM(fields); i++) {
        const char *why =
            member_problem(run, fields[i].key, fields[i].kind, fields[i].lo, fields[i].required);
        if (why) {
            ao_error(path, "\"%s\" is %s", fields[i].key, why);
            return AO_EXIT_USAGE;
        }
    }
    /* absent in a run that ended before its first event (the trace needs it) */
    yajl_val anchor = ao_json_member(run, "anchor");
    const char *why = !anchor ? NULL
                      : YAJL_IS_OBJECT(anchor)
                          ? member_problem(anchor, "realtime_ns", 'n', LLONG_MIN, 1)
                          : "not an object";
    if (why) {
        ao_error(path, "\"anchor%s\" is %s", YAJL_IS_OBJECT(anchor) ? ".realtime_ns" : "", why);
        return AO_EXIT_USAGE;
    }
    yajl_val cfg = ao_json_member(run, "config");
    if (cfg && !YAJL_IS_OBJECT(cfg)) {
        ao_error(path, "\"config\" is not an object");
        return AO_EXIT_USAGE;
    }
    for (size_t i = 0; cfg && i < cfg->u.object.len; i++) {
        yajl_val e = cfg->u.object.values[i];
        const char *key = cfg->u.object.keys[i];
        why = !YAJL_IS_OBJECT(e) || !ao_json_member(e, "value") ? "not an object with a \"value\""
              : strcmp(key, "training.summary_skip_steps") == 0
                  ? member_problem(e, "value", 'n', 0, 1)
                  : NULL;
        if (why) {
            ao_error(path, "\"config\".\"%s\"%s is %s", key, YAJL_IS_OBJECT(e) ? ".value" : "",
                     why);
            return AO_EXIT_USAGE;
        }
    }
    return 0;
}

static int load_run_json(const char *dir, yajl_val *out)
{
    char *path = ao_asprintf("%s/%s", dir, AO_RUN_JSON);
    char err[256];
    int missing;
    *out = read_json_file(path, err, sizeof err, &missing);
    if (missing) {
        ao_warn("%s: no run.json; the configuration and environment are unknown", dir);
        free(path);
        return 0;
    }
    int rc = 0;
    if (!*out || !YAJL_IS_OBJECT(*out)) {
        ao_error(path, "%s", *out ? "not a JSON object: another JSON value" : err);
        rc = AO_EXIT_USAGE;
    } else {
        yajl_val sch = ao_json_member(*out, "schema");
        if (!YAJL_IS_INTEGER(sch) || YAJL_GET_INTEGER(sch) != AO_RUN_JSON_SCHEMA) {
            ao_error(path, "run.json schema is not %d; this aorta cannot read it",
                     AO_RUN_JSON_SCHEMA);
            rc = AO_EXIT_USAGE;
        } else {
            rc = check_run_json(path, *out);
        }
    }
    if (rc) {
        yajl_tree_free(*out);
        *out = NULL;
    }
    free(path);
    return rc;
}

/* summary.json when it holds aorta analyze's "analyze" block; an unreadable
 * one only loses that block (the report recomputes the rest). */
static yajl_val load_analyze_summary(const char *dir)
{
    char *path = ao_asprintf("%s/%s", dir, AO_RUN_SUMMARY);
    char err[256];
    int missing;
    yajl_val v = read_json_file(path, err, sizeof err, &missing);
    if (!missing && !v) ao_warn("%s: %s; its trace analysis is left out", path, err);
    free(path);
    if (v && !YAJL_IS_OBJECT(ao_json_member(v, "analyze"))) {
        yajl_tree_free(v);
        v = NULL;
    }
    return v;
}

yajl_val ao_run_config_value(const ao_run_data *r, const char *key)
{
    if (!r->run) return NULL;
    if (!strchr(key, '.')) return ao_json_member(r->run, key);
    return ao_json_member(ao_json_member(ao_json_member(r->run, "config"), key), "value");
}

void ao_json_value_text(yajl_val v, char *buf, size_t n)
{
    if (n == 0) return;
    buf[0] = '\0';
    if (!v) return;
    if (YAJL_IS_STRING(v)) {
        snprintf(buf, n, "%s", v->u.string);
        return;
    }
    yajl_gen g = ao_json_gen_new(0);
    ao_json_gen_tree(g, v);
    const unsigned char *out;
    size_t len;
    yajl_gen_get_buf(g, &out, &len);
    snprintf(buf, n, "%.*s", (int)len, (const char *)out);
    yajl_gen_free(g);
}

static long long skip_from_run(const ao_run_data *r, const char **origin)
{
    yajl_val v = ao_run_config_value(r, "training.summary_skip_steps");
    if (YAJL_IS_INTEGER(v) && YAJL_GET_INTEGER(v) >= 0) {
        *origin = "run.json";
        return YAJL_GET_INTEGER(v);
    }
    *origin = "default";
    return 5; /* the schema's default for training.summary_skip_steps */
}

static const char *base_name(const char *path)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    const char *p = path + len;
    while (p > path && p[-1] != '/') p--;
    return p;
}

/* collectives.jsonl, when the run has one. */
static int load_collectives(ao_run_data *r)
{
    char *path = ao_asprintf("%s/%s", r->dir, AO_COLLECTIVES_FILE);
    int rc = 0;
    if (file_exists(path)) {
        r->coll = ao_calloc(1, sizeof *r->coll);
        rc = ao_coll_read(path, r->coll);
        if (rc == 0) {
            int n = r->world_size > r->nranks ? r->world_size : r->nranks;
            if (r->coll->nranks > n) n = r->coll->nranks;
            r->coll_sum = ao_calloc(1, sizeof *r->coll_sum);
            ao_coll_summarize(r->coll, n, r->coll_sum);
        }
    }
    free(path);
    return rc;
}

static int load(const char *dir, long long skip_steps, int keep_ops, ao_run_data *out);

int ao_run_load(const char *dir, long long skip_steps, ao_run_data *out)
{
    return load(dir, skip_steps, 1, out);
}

int ao_run_load_summary(const char *dir, long long skip_steps, ao_run_data *out)
{
    return load(dir, skip_steps, 0, out);
}

static int load(const char *dir, long long skip_steps, int keep_ops, ao_run_data *out)
{
    memset(out, 0, sizeof *out);
    out->dir = ao_strdup(dir);
    if (!is_dir(dir)) {
        ao_error(dir, "not a directory");
        return AO_EXIT_USAGE;
    }
    if (load_run_json(dir, &out->run) != 0) return AO_EXIT_USAGE;
    out->summary = load_analyze_summary(dir);
    yajl_val id = ao_run_config_value(out, "run_id");
    if (YAJL_IS_STRING(id)) {
        out->run_id = ao_strdup(id->u.string);
    } else {
        out->run_id = ao_strdup(base_name(dir));
        out->run_id[strcspn(out->run_id, "/")] = '\0';
    }
    if (skip_steps >= 0) {
        out->skip_steps = skip_steps;
        out->skip_origin = "--skip-steps";
    } else {
        out->skip_steps = skip_from_run(out, &out->skip_origin);
    }

    DIR *d = opendir(dir);
    if (!d) {
        ao_error(dir, "cannot list the directory: %s", strerror(errno));
        return AO_EXIT_USAGE;
    }
    int *ranks = NULL;
    size_t nr = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int rk = metrics_file_rank(e->d_name);
        if (rk < 0) continue;
        ranks = grow(ranks, &cap, nr + 1, sizeof *ranks);
        ranks[nr++] = rk;
    }
    closedir(d);
    if (nr == 0) {
        ao_error(dir, "no rank_NN_metrics.jsonl files");
        ao_hint("give the directory of a run of `aorta train` (or its output directory)");
        free(ranks);
        return AO_EXIT_USAGE;
    }
    qsort(ranks, nr, sizeof *ranks, cmp_int);

    out->nranks = (int)nr;
    out->ranks = ao_calloc(nr, sizeof *out->ranks);
    rank_job *jobs = ao_calloc(nr, sizeof *jobs);
    for (size_t i = 0; i < nr; i++) {
        /* The writer pads NN to the width world_size - 1 needs; find the
         * file by listing, not by guessing the width. */
        char *name = NULL;
        d = opendir(dir);
        while (d && (e = readdir(d)))
            if (metrics_file_rank(e->d_name) == ranks[i] && !name) name = ao_strdup(e->d_name);
        if (d) closedir(d);
        jobs[i].path = ao_asprintf("%s/%s", dir, name ? name : "?");
        free(name);
        jobs[i].expect_rank = ranks[i];
        jobs[i].skip = out->skip_steps;
        jobs[i].last_step = -1;
        jobs[i].keep_ops = keep_ops;
        jobs[i].rd = &out->ranks[i];
        out->ranks[i].rank = ranks[i];
    }
    run_jobs(jobs, nr);
    int rc = 0, ws = 0;
    for (size_t i = 0; i < nr && rc == 0; i++) {
        rc = jobs[i].rc;
        if (rc == 0 && jobs[i].world_size) {
            if (ws && jobs[i].world_size != ws) {
                ao_error(jobs[i].path, "world_size %d; other ranks of this run have %d",
                         jobs[i].world_size, ws);
                rc = AO_EXIT_USAGE;
            }
            ws = jobs[i].world_size;
        }
    }
    for (size_t i = 0; i < nr; i++) free(jobs[i].path);
    free(jobs);
    free(ranks);
    if (rc != 0) return AO_EXIT_USAGE;

    yajl_val w = ao_run_config_value(out, "world_size");
    out->world_size = YAJL_IS_INTEGER(w) ? (int)YAJL_GET_INTEGER(w) : ws;
    if (ws && out->world_size != ws) {
        ao_error(dir, "run.json says world_size %d, the metrics files %d", out->world_size, ws);
        return AO_EXIT_USAGE;
    }
    /* A run.json without an anchor is one of a run that never ran a step. */
    int records = 0;
    for (int k = 0; k < out->nranks; k++)
        records |= out->ranks[k].n || out->ranks[k].skipped || out->ranks[k].ncompute_only;
    if (out->run && records && !ao_json_member(out->run, "anchor")) {
        ao_error(dir, "run.json has no \"anchor\", but the metrics files have records (their times "
                      "count from it)");
        return AO_EXIT_USAGE;
    }
    if (out->world_size > out->nranks)
        ao_warn("%s: %d of %d ranks have a metrics file; the others are left out", dir, out->nranks,
                out->world_size);
    return load_collectives(out);
}

void ao_run_free(ao_run_data *r)
{
    for (int i = 0; i < r->nranks && r->ranks; i++) {
        ao_rank_data *rd = &r->ranks[i];
        free(rd->steps);
        free(rd->rows);
        free(rd->wall);
        free(rd->compute_only);
        free(rd->comm_only);
        free(rd->compute_only_k);
        free(rd->comm_only_k);
        ao_contention_evidence_free(&rd->contention);
        for (size_t p = 0; p < rd->nprofiled; p++) ao_iter_record_free(&rd->profiled[p]);
        free(rd->profiled);
        for (size_t t = 0; t < rd->ntelemetry; t++) {
            free(rd->telemetry[t].key);
            free(rd->telemetry[t].values);
        }
        free(rd->telemetry);
        ao_kernel_table_free(&rd->kernels);
    }
    free(r->ranks);
    if (r->coll) ao_coll_set_free(r->coll);
    free(r->coll);
    if (r->coll_sum) ao_coll_summary_free(r->coll_sum);
    free(r->coll_sum);
    if (r->run) yajl_tree_free(r->run);
    if (r->summary) yajl_tree_free(r->summary);
    free(r->dir);
    free(r->run_id);
    memset(r, 0, sizeof *r);
}

int ao_run_no_steps_error(const char *what, long long skip_steps)
{
    ao_error(what, "no train step is left after skipping %lld warm-up step(s) per rank",
             skip_steps);
    ao_hint("lower --skip-steps, or run more steps");
    return AO_EXIT_USAGE;
}

int ao_run_require_steps(const ao_run_data *r, const char *what)
{
    for (int k = 0; k < r->nranks; k++)
        if (r->ranks[k].n) return 0;
    return ao_run_no_steps_error(what, r->skip_steps);
}

/* ---- the median profiled step ---------------------------------------------- */

static int cmp_key(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

const ao_iter_record *ao_run_profiled_step(const ao_rank_data *rd, long long step)
{
    for (size_t i = 0; i < rd->nprofiled; i++)
        if (rd->profiled[i].step == step) return &rd->profiled[i];
    return NULL;
}

long long ao_run_median_profiled_step(const ao_run_data *run)
{
    if (run->nranks == 0) return -1;
    /* steps every rank profiled, keyed by their slowest rank's step time */
    const ao_rank_data *r0 = &run->ranks[0];
    double *keys = ao_malloc((r0->nprofiled + 1) * 2 * sizeof *keys);
    size_t nk = 0;
    for (size_t i = 0; i < r0->nprofiled; i++) {
        long long step = r0->profiled[i].step;
        double slowest = r0->profiled[i].m.step_ms;
        int all = 1;
        for (int k = 1; k < run->nranks && all; k++) {
            const ao_iter_record *r = ao_run_profiled_step(&run->ranks[k], step);
            if (!r)
                all = 0;
            else
                slowest = fmax(slowest, r->m.step_ms);
        }
        if (!all) continue;
        keys[2 * nk] = slowest;
        keys[2 * nk + 1] = (double)step;
        nk++;
    }
    long long step = -1;
    if (nk > 0) {
        qsort(keys, nk, 2 * sizeof *keys, cmp_key);
        step = (long long)keys[2 * ((nk - 1) / 2) + 1];
    }
    free(keys);
    return step;
}
