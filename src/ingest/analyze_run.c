/* `aorta analyze`'s driver: find the traces, read and analyse the ranks in
 * parallel, line the ranks up, write the run directory (staged), print the
 * tables. */
#include "ingest/analyze_run.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/jsonl.h"
#include "core/rundir.h"
#include "core/version.h"
#include "ingest/analyze.h"
#include "runs/summary.h"

#define TOP_KERNELS_STEP 5
#define TOP_KERNELS_RANK 20

typedef struct job {
    char *path;
    ao_trace_format fmt;
    int aorta_rank; /* AO_TRACE_AORTA: the rank to read */
    int rank;       /* in the run directory, 0..n-1 */
    int trace_rank; /* as the trace or file name says, -1 unknown */
    ao_trace trace;
    ao_rank_result res;
    int rc, read;
} job;

typedef struct pool {
    job *jobs;
    size_t njobs;
    atomic_size_t next;
    atomic_int failed;
    const ao_classifier *cls;
    int world_size;
} pool;

/* ---- finding the files -------------------------------------------------------- */

typedef struct file_list {
    job *v;
    size_t n, cap;
} file_list;

static void add_file(file_list *l, const char *path, ao_trace_format fmt)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = ao_realloc(l->v, l->cap * sizeof *l->v);
    }
    memset(&l->v[l->n], 0, sizeof l->v[l->n]);
    l->v[l->n].path = ao_strdup(path);
    l->v[l->n].fmt = fmt;
    l->v[l->n].trace_rank = -1;
    l->n++;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The traces in dir and, a few levels down, its subdirectories (rocprofv3
 * writes HOST/PID/PID_kernel_trace.csv; a job may keep one folder a rank).
 * A symbolic link is followed only to a file inside root, the directory
 * given: never out of it (a link to .. or /etc), never into a directory
 * twice. FIFOs and devices are skipped: opening one could block. */
static int scan_tree(file_list *l, const char *root, const char *dir, ao_trace_format forced,
                     int depth)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) {
        ao_error(dir, "cannot list the directory");
        return AO_EXIT_USAGE;
    }
    for (int i = 0; i < n; i++) {
        const char *nm = names[i]->d_name;
        if (nm[0] != '.') {
            char *p = ao_asprintf("%s/%s", dir, nm);
            struct stat st;
            int ok = lstat(p, &st) == 0;
            if (ok && S_ISLNK(st.st_mode)) {
                ok = ao_path_within(root, p) && stat(p, &st) == 0 && S_ISREG(st.st_mode);
                if (!ok)
                    ao_warn("%s: a symbolic link out of %s or to a directory; not followed", p,
                            root);
            }
            if (ok && S_ISREG(st.st_mode)) {
                ao_trace_format f = forced != AO_TRACE_AUTO ? forced : ao_trace_detect(p);
                /* rocprofv3 writes several CSVs a rank; its reader starts at
                 * the kernel trace and reads the siblings. */
                if (f == AO_TRACE_ROCPROF_CSV && !ends_with(nm, "kernel_trace.csv"))
                    f = AO_TRACE_AUTO;
                if (f != AO_TRACE_AUTO)
                    add_file(l, p, f);
                else if (!ends_with(nm, ".csv"))
                    ao_debug("%s: not a trace, skipped", p);
            } else if (ok && depth < 3 && S_ISDIR(st.st_mode)) {
                scan_tree(l, root, p, forced, depth + 1);
            }
            free(p);
        }
        free(names[i]);
    }
    free(names);
    return 0;
}

static int scan_dir(file_list *l, const char *dir, ao_trace_format forced)
{
    size_t before = l->n;
    if (scan_tree(l, dir, dir, forced, 0)) return AO_EXIT_USAGE;
    if (l->n == before) {
        ao_error(dir, "no trace files in the directory (Kineto .json/.json.gz, rocprofv3 "
                      "*kernel_trace.csv or .db, nsys .sqlite, aorta trace.json)");
        return AO_EXIT_USAGE;
    }
    return 0;
}

static int collect(const ao_analyze_run_opts *o, file_list *l)
{
    for (size_t i = 0; i < o->npaths; i++) {
        struct stat st;
        if (stat(o->paths[i], &st) != 0) {
            ao_error(o->paths[i], "no such file or directory");
            return AO_EXIT_USAGE;
        }
        if (S_ISDIR(st.st_mode)) {
            if (scan_dir(l, o->paths[i], o->format)) return AO_EXIT_USAGE;
        } else if (!S_ISREG(st.st_mode)) {
            /* a FIFO would block the reader's open */
            ao_error(o->paths[i], "not a regular file or a directory; give a trace file");
            return AO_EXIT_USAGE;
        } else {
            ao_trace_format f =
                o->format != AO_TRACE_AUTO ? o->format : ao_trace_detect(o->paths[i]);
            if (f == AO_TRACE_AUTO) {
                ao_error(o->paths[i], "not a trace aorta can read (Kineto JSON, rocprofv3 CSV or "
                                      "rocpd, nsys SQLite export, aorta trace.json)");
                ao_hint("name the format with --format");
                return AO_EXIT_USAGE;
            }
            add_file(l, o->paths[i], f);
        }
    }
    for (size_t i = 1; i < l->n; i++) {
        if (l->v[i].fmt != l->v[0].fmt) {
            ao_error(l->v[i].path,
                     "is a %s trace, but %s is %s: analyse one job's traces, of one "
                     "format, at a time",
                     ao_trace_format_name(l->v[i].fmt), l->v[0].path,
                     ao_trace_format_name(l->v[0].fmt));
            return AO_EXIT_USAGE;
        }
    }
    if (l->n > 1 && l->v[0].fmt == AO_TRACE_AORTA) {
        ao_error(l->v[1].path, "one aorta trace.json at a time (it holds every rank)");
        return AO_EXIT_USAGE;
    }
    return 0;
}

/* ---- reading in parallel -------------------------------------------------------- */

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->njobs || atomic_load(&p->failed)) break;
        job *j = &p->jobs[i];
        j->rc = j->fmt == AO_TRACE_AORTA ? ao_read_aorta_trace(j->path, j->aorta_rank, &j->trace)
                                         : ao_trace_read(j->path, j->fmt, &j->trace);
        if (j->rc == 0) {
            j->read = 1;
            int ws = j->trace.world_size > 0 ? j->trace.world_size : p->world_size;
            j->rc = ao_analyze_trace(&j->trace, p->cls, ws, &j->res);
        }
        if (j->rc) atomic_store(&p->failed, 1);
    }
    return NULL;
}

static int run_pool(job *jobs, size_t n, const ao_classifier *cls, int world_size, int threads)
{
    pool p = {.jobs = jobs, .njobs = n, .cls = cls, .world_size = world_size};
    atomic_init(&p.next, 0);
    atomic_init(&p.failed, 0);
    if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    if ((size_t)threads > n) threads = (int)n;
    pthread_t *tid = ao_malloc((size_t)threads * sizeof *tid);
    int started = 0;
    for (int i = 1; i < threads; i++)
        if (pthread_create(&tid[started], NULL, worker, &p) == 0) started++;
    worker(&p); /* this thread works too */
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    free(tid);
    for (size_t i = 0; i < n; i++)
        if (jobs[i].rc) return jobs[i].rc;
    return atomic_load(&p.failed) ? AO_EXIT_USAGE : 0;
}

/* ---- ranks -------------------------------------------------------------------- */

/* "rank<N>" (or rank_N, rank-N) in the path, the last one (a file name
 * before its folders: rocprofv3 keeps one folder a rank); -1 when none. A
 * number past 2^24 ranks is no rank (atoi would cut it to 32 bits). */
static int rank_from_name(const char *path)
{
    regex_t re;
    if (regcomp(&re, "rank[_-]?([0-9]+)", REG_EXTENDED | REG_ICASE)) return -1;
    regmatch_t g[2];
    int r = -1;
    for (const char *p = path; regexec(&re, p, 2, g, 0) == 0; p += g[0].rm_eo) {
        long v = (g[1].rm_eo - g[1].rm_so) <= 8 ? strtol(p + g[1].rm_so, NULL, 10) : -1;
        r = v >= 0 && v < (1L << 24) ? (int)v : -1;
    }
    regfree(&re);
    return r;
}

static int by_trace_rank(const void *a, const void *b)
{
    const job *x = a, *y = b;
    return (x->trace_rank > y->trace_rank) - (x->trace_rank < y->trace_rank);
}

/* Each job's rank: the trace's, else the file name's, else its order. */
static int assign_ranks(job *jobs, size_t n)
{
    int named = 0;
    for (size_t i = 0; i < n; i++) {
        jobs[i].trace_rank =
            jobs[i].trace.rank >= 0 ? jobs[i].trace.rank : rank_from_name(jobs[i].path);
        named += jobs[i].trace_rank >= 0;
    }
    if ((size_t)named < n)
        for (size_t i = 0; i < n; i++) jobs[i].trace_rank = (int)i;
    qsort(jobs, n, sizeof *jobs, by_trace_rank);
    int dense = 1;
    for (size_t i = 0; i < n; i++) {
        if (i && jobs[i].trace_rank == jobs[i - 1].trace_rank) {
            ao_error(jobs[i].path, "is rank %d, and so is %s: one trace per rank",
                     jobs[i].trace_rank, jobs[i - 1].path);
            return AO_EXIT_USAGE;
        }
        if (jobs[i].trace_rank != (int)i) dense = 0;
        jobs[i].rank = (int)i;
        jobs[i].res.rank = (int)i;
    }
    if (!dense)
        ao_warn("the traces are of ranks %d..%d, not 0..%zu: numbered 0..%zu in order (each "
                "record's extra.trace_rank keeps the original)",
                jobs[0].trace_rank, jobs[n - 1].trace_rank, n - 1, n - 1);
    return 0;
}

/* ---- the run directory -------------------------------------------------------- */

typedef struct step_cmp {
    long long step;
    int slowest, fastest;
    double slowest_ms, fastest_ms;
} step_cmp;

typedef struct run_ctx {
    const ao_analyze_run_opts *o;
    job *jobs;
    size_t n;
    int world_size;
    double origin_us; /* earliest activity of any rank: time 0 in the files */
    step_cmp *cmp;
    size_t ncmp;
} run_ctx;

static const step_cmp *find_cmp(const run_ctx *c, long long step)
{
    for (size_t i = 0; i < c->ncmp; i++)
        if (c->cmp[i].step == step) return &c->cmp[i];
    return NULL;
}

/* Slowest and fastest rank of every step that more than one rank ran. */
static void compare_ranks(run_ctx *c)
{
    for (size_t j = 0; j < c->n; j++) {
        const ao_rank_result *r = &c->jobs[j].res;
        for (size_t s = 0; s < r->nsteps; s++) {
            step_cmp *e = (step_cmp *)find_cmp(c, r->steps[s].step);
            double ms = r->steps[s].m.step_ms;
            if (!e) {
                c->cmp = ao_realloc(c->cmp, (c->ncmp + 1) * sizeof *c->cmp);
                e = &c->cmp[c->ncmp++];
                *e = (step_cmp){r->steps[s].step, (int)j, (int)j, ms, ms};
            } else {
                if (ms > e->slowest_ms) e->slowest_ms = ms, e->slowest = (int)j;
                if (ms < e->fastest_ms) e->fastest_ms = ms, e->fastest = (int)j;
            }
        }
    }
}

#define G(call)                                                                                    \
    do {                                                                                           \
        if ((st = (call)) != yajl_gen_status_ok) return st;                                        \
    } while (0)

static yajl_gen_status key(yajl_gen g, const char *k)
{
    return yajl_gen_string(g, (const unsigned char *)k, strlen(k));
}

static yajl_gen_status key_num(yajl_gen g, const char *k, double v)
{
    yajl_gen_status st;
    G(key(g, k));
    return ao_json_gen_double(g, v);
}

static yajl_gen_status gen_kernel(yajl_gen g, const ao_kernel_stat *k)
{
    yajl_gen_status st;
    G(yajl_gen_map_open(g));
    G(key(g, "name"));
    G(ao_json_gen_str(g, k->name));
    G(key(g, "class"));
    G(ao_json_gen_str(g, ao_op_class_name((ao_op_class)k->cls)));
    G(key(g, "kind"));
    G(ao_json_gen_str(g, k->cls == AO_CLASS_COMM ? ao_xkind_name((ao_xkind)k->xkind) : NULL));
    G(key(g, "count"));
    G(yajl_gen_integer(g, (long long)k->count));
    G(key_num(g, "total_us", k->total_us));
    G(key_num(g, "max_us", k->max_us));
    return yajl_gen_map_close(g);
}

typedef struct rec_ctx {
    const run_ctx *c;
    const job *j;
    const ao_step_result *s;
} rec_ctx;

static int by_us_desc(const void *a, const void *b)
{
    const ao_kernel_stat *x = a, *y = b;
    return (x->total_us < y->total_us) - (x->total_us > y->total_us);
}

/* A step's top kernels by total time. */
static size_t step_top(const ao_step_result *s, ao_kernel_stat *top, size_t cap)
{
    size_t n = 0, agg = 0;
    ao_kernel_stat *all = ao_calloc(s->nops ? s->nops : 1, sizeof *all);
    for (size_t i = 0; i < s->nops; i++) {
        const ao_op *o = &s->ops[i];
        size_t k = 0;
        while (k < agg && all[k].name != o->name) k++; /* names are interned */
        if (k == agg) {
            if (agg > 4096) continue; /* bounded: a step of thousands of distinct kernels */
            all[agg++] = (ao_kernel_stat){
                .name = o->name ? o->name : "?",
                .cls = (int8_t)o->cls,
                .xkind =
                    (int8_t)(o->cls == AO_CLASS_COMM ? (int)ao_xkind_of_name(o->name ? o->name : "")
                                                     : -1)};
        }
        double d = o->end_us > o->start_us ? o->end_us - o->start_us : 0;
        all[k].count++;
        all[k].total_us += d;
        if (d > all[k].max_us) all[k].max_us = d;
    }
    qsort(all, agg, sizeof *all, by_us_desc);
    n = agg < cap ? agg : cap;
    memcpy(top, all, n * sizeof *top);
    free(all);
    return n;
}

static int record_extra(void *vctx, yajl_gen g)
{
    rec_ctx *x = vctx;
    yajl_gen_status st = ao_step_result_gen_extra(g, x->s);
    if (st == yajl_gen_status_ok) st = key(g, "trace_rank");
    if (st == yajl_gen_status_ok) st = yajl_gen_integer(g, x->j->trace_rank);
    const step_cmp *e = find_cmp(x->c, x->s->step);
    if (st == yajl_gen_status_ok && e && x->c->n > 1) {
        st = key(g, "slowest_rank");
        if (st == yajl_gen_status_ok) st = yajl_gen_integer(g, e->slowest);
        if (st == yajl_gen_status_ok) st = key_num(g, "slowest_step_ms", e->slowest_ms);
        if (st == yajl_gen_status_ok) st = key_num(g, "fastest_step_ms", e->fastest_ms);
    }
    ao_kernel_stat top[TOP_KERNELS_STEP];
    size_t nt = step_top(x->s, top, TOP_KERNELS_STEP);
    if (st == yajl_gen_status_ok) st = key(g, "top_kernels");
    if (st == yajl_gen_status_ok) st = yajl_gen_array_open(g);
    for (size_t i = 0; i < nt && st == yajl_gen_status_ok; i++) st = gen_kernel(g, &top[i]);
    if (st == yajl_gen_status_ok) st = yajl_gen_array_close(g);
    return st != yajl_gen_status_ok;
}

static double base_seconds(const ao_trace *t)
{
    const char *b = ao_trace_get_meta(t, "baseTimeNanoseconds");
    return b ? strtod(b, NULL) / 1e9 : NAN;
}

static int write_rank(const run_ctx *c, const ao_rundir *d, const job *j)
{
    char *path = ao_rundir_rank_path(d, j->rank, (int)c->n, AO_RANK_METRICS);
    ao_jsonl_writer *w = ao_jsonl_open(path, 1 << 20);
    free(path);
    if (!w) return AO_EXIT_FAIL;
    int rc = 0;
    double base = base_seconds(&j->trace);
    for (size_t s = 0; s < j->res.nsteps && rc == 0; s++) {
        const ao_step_result *sr = &j->res.steps[s];
        ao_iter_record r;
        ao_iter_record_init(&r);
        r.rank = j->rank;
        r.world_size = c->world_size;
        r.step = sr->step;
        r.phase = "train";
        r.m = sr->m;
        r.wall_time = base + sr->m.window_start_us / 1e6;
        r.m.window_start_us -= c->origin_us;
        r.m.window_end_us -= c->origin_us;
        ao_op *ops = ao_malloc((sr->nops ? sr->nops : 1) * sizeof *ops);
        for (size_t i = 0; i < sr->nops; i++) {
            ops[i] = sr->ops[i];
            ops[i].start_us -= c->origin_us;
            ops[i].end_us -= c->origin_us;
        }
        r.ops = ops;
        r.nops = sr->nops;
        rec_ctx x = {c, j, sr};
        r.extra = record_extra;
        r.extra_ctx = &x;
        if (ao_jsonl_append(w, &r)) rc = AO_EXIT_FAIL;
        free(ops);
    }
    if (ao_jsonl_close(w) && rc == 0) rc = AO_EXIT_FAIL;
    return rc;
}

static void visit_config(const void *config, ao_config_emit_fn emit, void *emit_ctx)
{
    const run_ctx *c = config;
    ao_config_entry e = {.key = "training.summary_skip_steps",
                         .value = ao_json_int(0),
                         .type = "int",
                         .origin = "aorta analyze (every traced step counts)"};
    emit(emit_ctx, &e);
    ao_config_entry f = {.key = "analyze.format",
                         .value = ao_json_str(ao_trace_format_name(c->jobs[0].fmt)),
                         .type = "string",
                         .origin = "aorta analyze"};
    emit(emit_ctx, &f);
    ao_config_entry s = {
        .key = "analyze.step",
        .value = ao_json_str(c->o->step_regex ? c->o->step_regex : "^ProfilerStep#([0-9]+)"),
        .type = "string",
        .origin = c->o->step_regex ? "--step" : "default"};
    emit(emit_ctx, &s);
    ao_config_entry m = {.key = "analyze.comm",
                         .value = ao_json_str(c->o->comm_regex),
                         .type = "string",
                         .origin = c->o->comm_regex ? "--comm" : "default"};
    emit(emit_ctx, &m);
}

static int write_run_json(const run_ctx *c, const ao_rundir *d)
{
    const ao_trace *t0 = &c->jobs[0].trace;
    /* Versions the traces name (the first rank's), and the source. */
    ao_json_field versions[16];
    size_t nv = 0;
    versions[nv++] = (ao_json_field){"aorta", ao_json_str(AORTA_VERSION)};
    versions[nv++] = (ao_json_field){"git_commit", ao_json_str(ao_git_commit)};
    versions[nv++] = (ao_json_field){"source_format", ao_json_str(t0->format)};
    for (size_t i = 0; i < t0->nmeta && nv < sizeof versions / sizeof *versions; i++) {
        const char *k = t0->meta[i].key;
        if (strstr(k, "version") || strcmp(k, "pytorch") == 0)
            versions[nv++] = (ao_json_field){k, ao_json_str(t0->meta[i].value)};
    }
    ao_json_field *dev = ao_malloc(c->n * 4 * sizeof *dev);
    ao_json_object *devices = ao_malloc(c->n * sizeof *devices);
    for (size_t j = 0; j < c->n; j++) {
        const job *jb = &c->jobs[j];
        ao_json_field *f = dev + 4 * j;
        f[0] = (ao_json_field){"rank", ao_json_int(jb->rank)};
        f[1] = (ao_json_field){"name", ao_json_str(ao_trace_get_meta(&jb->trace, "device_name"))};
        f[2] = (ao_json_field){"trace", ao_json_str(jb->path)};
        f[3] = (ao_json_field){"trace_rank", ao_json_int(jb->trace_rank)};
        devices[j] = (ao_json_object){f, 4};
    }
    ao_run_header h = {.run_id = d->run_id,
                       .command = "analyze",
                       .argc = c->o->argc,
                       .argv = c->o->argv,
                       .world_size = c->world_size,
                       .config_visit = visit_config,
                       .config = c,
                       .versions = versions,
                       .nversions = nv,
                       .devices = devices,
                       .ndevices = c->n};
    char *path = ao_rundir_file(d, AO_RUN_JSON);
    int rc = ao_run_json_write(path, &h);
    free(path);
    free(dev);
    free(devices);
    return rc;
}

static yajl_gen_status gen_rank(yajl_gen g, const job *j)
{
    yajl_gen_status st;
    const ao_rank_result *r = &j->res;
    G(yajl_gen_map_open(g));
    G(key(g, "rank"));
    G(yajl_gen_integer(g, j->rank));
    G(key(g, "trace_rank"));
    G(yajl_gen_integer(g, j->trace_rank));
    G(key(g, "trace"));
    G(ao_json_gen_str(g, j->path));
    G(key(g, "steps"));
    G(yajl_gen_integer(g, (long long)r->nsteps));
    G(key(g, "stepless"));
    G(yajl_gen_bool(g, r->stepless));
    G(key(g, "unattributed_activities"));
    G(yajl_gen_integer(g, (long long)r->unattributed));
    G(key(g, "total"));
    G(yajl_gen_map_open(g));
    G(ao_overlap_gen_fields(g, &r->total.m, 1));
    G(ao_step_result_gen_extra(g, &r->total));
    G(yajl_gen_map_close(g));
    G(key(g, "class_ms"));
    G(yajl_gen_map_open(g));
    for (int k = 0; k < 3; k++)
        G(key_num(g, ao_op_class_name((ao_op_class)k), r->class_us[k] / 1e3));
    G(yajl_gen_map_close(g));
    G(key(g, "kernels"));
    G(yajl_gen_array_open(g));
    for (size_t k = 0; k < r->nkernels && k < TOP_KERNELS_RANK; k++)
        G(gen_kernel(g, &r->kernels[k]));
    G(yajl_gen_array_close(g));
    G(key(g, "hta"));
    if (!r->hta.valid) {
        G(yajl_gen_null(g));
        return yajl_gen_map_close(g);
    }
    G(yajl_gen_map_open(g));
    G(key_num(g, "comm_comp_overlap_pctg", r->hta.overlap_pct));
    G(key_num(g, "idle_time_us", r->hta.idle_us));
    G(key_num(g, "compute_time_us", r->hta.compute_us));
    G(key_num(g, "non_compute_time_us", r->hta.non_compute_us));
    G(key_num(g, "kernel_time_us", r->hta.kernel_us));
    G(yajl_gen_map_close(g));
    return yajl_gen_map_close(g);
}

static yajl_gen_status gen_summary(yajl_gen g, const run_ctx *c, const ao_summary *s)
{
    yajl_gen_status st;
    G(yajl_gen_map_open(g));
    G(key(g, "schema"));
    G(yajl_gen_integer(g, 1));
    G(key(g, "summary"));
    G(ao_summary_gen(g, s));
    G(key(g, "analyze"));
    G(yajl_gen_map_open(g));
    G(key(g, "format"));
    G(ao_json_gen_str(g, ao_trace_format_name(c->jobs[0].fmt)));
    G(key(g, "ranks"));
    G(yajl_gen_array_open(g));
    for (size_t j = 0; j < c->n; j++) G(gen_rank(g, &c->jobs[j]));
    G(yajl_gen_array_close(g));
    G(key(g, "steps"));
    G(yajl_gen_array_open(g));
    for (size_t i = 0; i < c->ncmp; i++) {
        G(yajl_gen_map_open(g));
        G(key(g, "step"));
        G(yajl_gen_integer(g, c->cmp[i].step));
        G(key(g, "slowest_rank"));
        G(yajl_gen_integer(g, c->cmp[i].slowest));
        G(key_num(g, "slowest_step_ms", c->cmp[i].slowest_ms));
        G(key(g, "fastest_rank"));
        G(yajl_gen_integer(g, c->cmp[i].fastest));
        G(key_num(g, "fastest_step_ms", c->cmp[i].fastest_ms));
        G(yajl_gen_map_close(g));
    }
    G(yajl_gen_array_close(g));
    G(yajl_gen_map_close(g));
    return yajl_gen_map_close(g);
}

static void print_tables(FILE *out, const run_ctx *c)
{
    fprintf(out, "\nper rank, whole trace (HTA's conventions: get_comm_comp_overlap, "
                 "get_temporal_breakdown)\n");
    fprintf(out, "%-5s %10s %12s %12s %14s %12s %10s %10s\n", "rank", "overlap%", "idle_us",
            "compute_us", "non_compute_us", "kernel_us", "host_wait", "steps");
    for (size_t j = 0; j < c->n; j++) {
        const ao_rank_result *r = &c->jobs[j].res;
        fprintf(out, "%-5d %10.2f %12.0f %12.0f %14.0f %12.0f %9.2fms %10zu\n", c->jobs[j].rank,
                r->hta.overlap_pct, r->hta.idle_us, r->hta.compute_us, r->hta.non_compute_us,
                r->hta.kernel_us, r->total.host_wait_ms, r->nsteps);
    }
    if (c->n > 1 && c->ncmp) {
        fprintf(out, "\nslowest rank per step\n%-8s %8s %12s %12s\n", "step", "rank", "step_ms",
                "+ms vs fastest");
        for (size_t i = 0; i < c->ncmp; i++)
            fprintf(out, "%-8lld %8d %12.3f %12.3f\n", c->cmp[i].step, c->cmp[i].slowest,
                    c->cmp[i].slowest_ms, c->cmp[i].slowest_ms - c->cmp[i].fastest_ms);
    }
    for (size_t j = 0; j < c->n; j++) {
        const ao_rank_result *r = &c->jobs[j].res;
        fprintf(out, "\nrank %d: top kernels by total time\n", c->jobs[j].rank);
        for (size_t k = 0; k < r->nkernels && k < 5; k++)
            fprintf(out, "  %10.1f us %6zu x  %-7s %.90s\n", r->kernels[k].total_us,
                    r->kernels[k].count, ao_op_class_name((ao_op_class)r->kernels[k].cls),
                    r->kernels[k].name);
    }
}

static int write_run(run_ctx *c)
{
    char id[AO_RUN_ID_MAX];
    const char *run_id = c->o->run_name;
    if (!run_id) {
        ao_rundir_make_id(id, sizeof id);
        run_id = id;
    } else if (ao_rundir_validate_name(run_id, "--run-name")) {
        return AO_EXIT_USAGE;
    }
    ao_rundir d;
    int rc = ao_rundir_create_staged(c->o->output_dir ? c->o->output_dir : "artifacts", run_id, &d);
    if (rc) return rc;
    rc = write_run_json(c, &d);
    for (size_t j = 0; j < c->n && rc == 0; j++) rc = write_rank(c, &d, &c->jobs[j]);
    if (rc == 0) {
        ao_run_data run;
        rc = ao_run_load(d.path, 0, &run);
        ao_summary s;
        if (rc == 0) rc = ao_summary_build(d.run_id, &run, 1, &s);
        if (rc == 0) {
            yajl_gen g = ao_json_gen_new(1);
            char *path = ao_rundir_file(&d, AO_RUN_SUMMARY);
            if (gen_summary(g, c, &s) != yajl_gen_status_ok) {
                ao_error(path, "JSON generation failed");
                rc = AO_EXIT_FAIL;
            } else if (ao_json_write_atomic(path, g) != 0) {
                rc = AO_EXIT_FAIL;
            }
            free(path);
            yajl_gen_free(g);
            if (rc == 0 && c->o->table) ao_summary_print(c->o->table, &s);
            ao_summary_free(&s);
        }
        ao_run_free(&run);
    }
    if (rc == 0)
        rc = ao_rundir_commit(&d);
    else
        ao_rundir_abandon(&d);
    if (rc == 0 && c->o->table) {
        print_tables(c->o->table, c);
        fprintf(c->o->table, "\nrun directory: %s\n", d.path);
    }
    ao_rundir_free(&d);
    return rc;
}

int ao_analyze_run(const ao_analyze_run_opts *o)
{
    ao_classifier cls;
    if (ao_classifier_init(&cls, o->step_regex, o->comm_regex)) return AO_EXIT_USAGE;
    file_list l = {0};
    int rc = collect(o, &l);
    run_ctx c = {.o = o};
    if (rc == 0 && l.v[0].fmt == AO_TRACE_AORTA) {
        /* One file, every rank: rank 0 first says how many there are. */
        rc = run_pool(l.v, 1, &cls, 1, 1);
        int nr = rc == 0 ? l.v[0].trace.world_size : 0;
        for (int r = 1; r < nr; r++) {
            add_file(&l, l.v[0].path, AO_TRACE_AORTA);
            l.v[l.n - 1].aorta_rank = r;
        }
        if (rc == 0 && l.n > 1) rc = run_pool(l.v + 1, l.n - 1, &cls, nr, o->threads);
    } else if (rc == 0) {
        rc = run_pool(l.v, l.n, &cls, (int)l.n, o->threads);
    }
    if (rc == 0) rc = assign_ranks(l.v, l.n);
    if (rc == 0) {
        c.jobs = l.v;
        c.n = l.n;
        c.world_size = l.v[0].trace.world_size > 0 ? l.v[0].trace.world_size : (int)l.n;
        if ((size_t)c.world_size < l.n) c.world_size = (int)l.n;
        c.origin_us = INFINITY;
        for (size_t j = 0; j < l.n; j++) {
            const ao_trace *t = &l.v[j].trace;
            for (size_t i = 0; i < t->nacts; i++)
                if (t->acts[i].start_us < c.origin_us) c.origin_us = t->acts[i].start_us;
            if (l.v[j].res.stepless)
                ao_warn("%s: no step marks (%s); analysed as one window", l.v[j].path,
                        o->step_regex ? "--step matched nothing" : "no ProfilerStep#N");
            if (l.v[j].res.unattributed)
                ao_warn("%s: %zu device activities launched outside every step are in the "
                        "totals only",
                        l.v[j].path, l.v[j].res.unattributed);
        }
        compare_ranks(&c);
        rc = write_run(&c);
    }
    for (size_t j = 0; j < l.n; j++) {
        ao_rank_result_free(&l.v[j].res);
        if (l.v[j].read) ao_trace_free(&l.v[j].trace);
        free(l.v[j].path);
    }
    free(l.v);
    free(c.cmp);
    ao_classifier_free(&cls);
    return rc;
}
