/* `aorta analyze`'s driver: find the traces; read and analyse the ranks in
 * parallel (pass 1: what every rank keeps, its collectives); match the
 * collectives across ranks; then per rank, in parallel again, what the late
 * rank's windows held and its records (pass 2, reading a trace again when
 * it was not kept: memory stays ranks x collectives beyond the budget); the
 * run directory staged and renamed into place; the tables. */
#include "ingest/analyze_run.h"

#include <dirent.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
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
#include "ingest/analyze_internal.h"
#include "ingest/xrank.h"

/* Kernel names shared by the ranks' top-kernel lists: one copy each, so a
 * thousand ranks of one job keep one set of names. */
typedef struct name_pool {
    pthread_mutex_t lock;
    char **v;
    size_t n, cap;
} name_pool;

static const char *pool_name(name_pool *p, const char *s)
{
    pthread_mutex_lock(&p->lock);
    const char *r = NULL;
    for (size_t i = p->n; i-- > 0 && !r;)
        if (strcmp(p->v[i], s) == 0) r = p->v[i];
    if (!r) {
        if (p->n == p->cap) {
            p->cap = p->cap ? 2 * p->cap : 64;
            p->v = ao_realloc(p->v, p->cap * sizeof *p->v);
        }
        r = p->v[p->n++] = ao_strdup(s);
    }
    pthread_mutex_unlock(&p->lock);
    return r;
}

static void name_pool_free(name_pool *p)
{
    for (size_t i = 0; i < p->n; i++) free(p->v[i]);
    free(p->v);
}

typedef struct pool {
    job *jobs;
    size_t njobs;
    atomic_size_t next;
    atomic_int failed;
    const ao_classifier *cls;
    int world_size;
    int pass;                 /* 1 or 2 */
    atomic_size_t kept_bytes; /* pass 1: the traces kept so far */
    size_t keep_bytes;        /* the budget */
    run_ctx *c;               /* pass 2 */
    name_pool names;
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
    l->v[l->n].said_rank = -1;
    l->v[l->n].world_size = -1;
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

/* ---- pass 1: read, analyse, keep what the run needs ---------------------------- */

static int by_total(const void *a, const void *b)
{
    const ao_kernel_stat *x = a, *y = b;
    return (x->total_us < y->total_us) - (x->total_us > y->total_us);
}

static int read_job(job *j, const ao_classifier *cls, int world_size)
{
    int rc = j->fmt == AO_TRACE_AORTA ? ao_read_aorta_trace(j->path, j->aorta_rank, &j->trace)
                                      : ao_trace_read(j->path, j->fmt, &j->trace);
    if (rc) return rc;
    int ws = j->trace.world_size > 0 ? j->trace.world_size : world_size;
    rc = ao_analyze_trace(&j->trace, cls, ws, &j->res);
    if (rc) {
        ao_trace_free(&j->trace);
        return rc;
    }
    j->kept = 1;
    return 0;
}

static void drop_job(job *j)
{
    if (!j->kept) return;
    ao_rank_result_free(&j->res);
    ao_trace_free(&j->trace);
    j->kept = 0;
#ifdef __GLIBC__
    /* A trace's arrays freed between the small blocks the run keeps would
     * stay resident: give their pages back, so that memory follows the
     * ranks' collectives, not the traces read. */
    malloc_trim(0);
#endif
}

/* What the run keeps of a rank whatever happens to its trace. */
static void keep_brief(job *j, name_pool *names)
{
    const ao_trace *t = &j->trace;
    const ao_rank_result *r = &j->res;
    j->said_rank = t->rank;
    j->world_size = t->world_size;
    const char *dev = ao_trace_get_meta(t, "device_name");
    j->device = dev ? ao_strdup(dev) : NULL;
    j->first_us = INFINITY;
    for (size_t i = 0; i < t->nacts; i++)
        if (t->acts[i].start_us < j->first_us) j->first_us = t->acts[i].start_us;
    j->unattributed = r->unattributed;
    j->stepless = r->stepless;
    j->steps = ao_malloc((r->nsteps ? r->nsteps : 1) * sizeof *j->steps);
    j->nsteps = r->nsteps;
    for (size_t s = 0; s < r->nsteps; s++) {
        const ao_overlap *m = &r->steps[s].m;
        double hw = isfinite(m->host_wait_ms) ? m->host_wait_ms : 0;
        j->steps[s] = (step_brief){r->steps[s].step, m->step_ms, m->compute_ms + hw};
    }
    j->total = r->total;
    j->total.ops = NULL;
    j->total.nops = 0;
    memcpy(j->class_us, r->class_us, sizeof j->class_us);
    j->hta = r->hta;
    j->ntop = r->nkernels < AO_ANALYZE_TOP_KERNELS ? r->nkernels : AO_ANALYZE_TOP_KERNELS;
    j->top = ao_malloc((j->ntop ? j->ntop : 1) * sizeof *j->top);
    for (size_t k = 0; k < j->ntop; k++) {
        j->top[k] = r->kernels[k];
        j->top[k].name = pool_name(names, r->kernels[k].name);
    }
    qsort(j->top, j->ntop, sizeof *j->top, by_total);
    ao_xrank_entries(t, r, -1, 0, &j->coll); /* the trace's clock; shifted once all are read */
}

static void pass2_job(pool *p, job *j);

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->njobs || atomic_load(&p->failed)) break;
        job *j = &p->jobs[i];
        if (p->pass == 2) {
            pass2_job(p, j);
        } else {
            j->rc = read_job(j, p->cls, p->world_size);
            if (j->rc == 0) {
                keep_brief(j, &p->names);
                /* keep the trace for pass 2 while the budget allows */
                size_t b = ao_trace_bytes(&j->trace) +
                           (j->res.total.nops * 2 + j->res.ncomms) * sizeof(ao_op);
                if (atomic_fetch_add(&p->kept_bytes, b) + b > p->keep_bytes) drop_job(j);
            }
        }
        if (j->rc) atomic_store(&p->failed, 1);
    }
    return NULL;
}

static int run_pool(pool *p, job *jobs, size_t n, int threads)
{
    p->jobs = jobs;
    p->njobs = n;
    atomic_init(&p->next, 0);
    atomic_init(&p->failed, 0);
    if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    if ((size_t)threads > n) threads = (int)n;
    pthread_t *tid = ao_malloc((size_t)threads * sizeof *tid);
    int started = 0;
    for (int i = 1; i < threads; i++)
        if (pthread_create(&tid[started], NULL, worker, p) == 0) started++;
    worker(p); /* this thread works too */
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    free(tid);
    for (size_t i = 0; i < n; i++)
        if (jobs[i].rc) return jobs[i].rc;
    return atomic_load(&p->failed) ? AO_EXIT_USAGE : 0;
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
            jobs[i].said_rank >= 0 ? jobs[i].said_rank : rank_from_name(jobs[i].path);
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
        jobs[i].coll.rank = (int)i;
    }
    if (!dense)
        ao_warn("the traces are of ranks %d..%d, not 0..%zu: numbered 0..%zu in order (each "
                "record's extra.trace_rank keeps the original)",
                jobs[0].trace_rank, jobs[n - 1].trace_rank, n - 1, n - 1);
    return 0;
}

/* ---- across ranks ---------------------------------------------------------------- */

static step_cmp *find_cmp(run_ctx *c, long long step)
{
    for (size_t i = 0; i < c->ncmp; i++)
        if (c->cmp[i].step == step) return &c->cmp[i];
    return NULL;
}

/* Every step that more than one rank ran: its slowest rank by the one
 * definition (runs/rundata.h: the rank the others waited for, else the most
 * time of its own) and its slowest and fastest step times. */
static void compare_ranks(run_ctx *c)
{
    for (size_t j = 0; j < c->n; j++) {
        const job *jb = &c->jobs[j];
        for (size_t s = 0; s < jb->nsteps; s++) {
            const step_brief *b = &jb->steps[s];
            step_cmp *e = find_cmp(c, b->step);
            if (!e) {
                c->cmp = ao_realloc(c->cmp, (c->ncmp + 1) * sizeof *c->cmp);
                e = &c->cmp[c->ncmp++];
                *e = (step_cmp){b->step, -1, (int)j, "own_time", b->step_ms, b->step_ms};
            }
            if (b->step_ms > e->slowest_ms) e->slowest_ms = b->step_ms;
            if (b->step_ms < e->fastest_ms) e->fastest_ms = b->step_ms, e->fastest = (int)j;
        }
    }
    for (size_t i = 0; i < c->ncmp; i++) {
        step_cmp *e = &c->cmp[i];
        for (size_t k = 0; k < c->coll_sum.nsteps; k++)
            if (c->coll_sum.steps[k].step == e->step && c->coll_sum.steps[k].late_rank >= 0) {
                e->slowest = c->coll_sum.steps[k].late_rank;
                e->by = "waited_for";
            }
        if (e->slowest >= 0) continue;
        double best = -INFINITY;
        for (size_t j = 0; j < c->n; j++)
            for (size_t s = 0; s < c->jobs[j].nsteps; s++)
                if (c->jobs[j].steps[s].step == e->step && c->jobs[j].steps[s].own_ms > best) {
                    best = c->jobs[j].steps[s].own_ms;
                    e->slowest = (int)j;
                }
    }
}

/* The collectives on the run's axis, matched. */
static void match_collectives(run_ctx *c)
{
    ao_coll_rank *ranks = ao_malloc(c->n * sizeof *ranks);
    for (size_t j = 0; j < c->n; j++) {
        ao_coll_rank *r = &c->jobs[j].coll;
        for (size_t i = 0; i < r->n; i++) {
            r->v[i].issue_us -= c->origin_us;
            r->v[i].start_us -= c->origin_us;
            r->v[i].end_us -= c->origin_us;
        }
        ranks[j] = *r;
    }
    ao_coll_match(ranks, c->n, &c->coll);
    free(ranks);
    snprintf(c->coll.clock, sizeof c->coll.clock,
             "the traces' own clocks, taken as one (processes of one host share it: Kineto, "
             "CUPTI and the profilers stamp the host's clock)");
    ao_coll_summarize(&c->coll, (int)c->n, &c->coll_sum);
}

/* ---- pass 2: the late windows and the records ------------------------------------ */

static void pass2_job(pool *p, job *j)
{
    run_ctx *c = p->c;
    if (!j->kept) j->rc = read_job(j, p->cls, p->world_size);
    if (j->rc == 0) {
        if (c->n > 1) ao_xrank_breakdowns(&j->trace, &j->res, j->rank, c->origin_us, &c->coll);
        j->rc = ao_analyze_write_rank(c, j);
    }
    drop_job(j);
}

static void free_job(job *j)
{
    drop_job(j);
    ao_coll_rank_free(&j->coll);
    free(j->top);
    free(j->steps);
    free(j->device);
    free(j->path);
}

/* run.json's versions: what the first rank's trace names. */
static void keep_versions(run_ctx *c, const ao_trace *t0)
{
    c->version_keys = ao_malloc((t0->nmeta + 1) * sizeof *c->version_keys);
    c->version_values = ao_malloc((t0->nmeta + 1) * sizeof *c->version_values);
    for (size_t i = 0; i < t0->nmeta; i++) {
        const char *k = t0->meta[i].key;
        if (!strstr(k, "version") && strcmp(k, "pytorch") != 0 &&
            strcmp(k, "baseTimeNanoseconds") != 0)
            continue;
        c->version_keys[c->nversions] = ao_strdup(k);
        c->version_values[c->nversions++] = ao_strdup(t0->meta[i].value);
    }
}

static int start_run_dir(run_ctx *c)
{
    char id[AO_RUN_ID_MAX];
    const char *run_id = c->o->run_name;
    if (!run_id) {
        ao_rundir_make_id(id, sizeof id);
        run_id = id;
    } else if (ao_rundir_validate_name(run_id, "--run-name")) {
        return AO_EXIT_USAGE;
    }
    return ao_rundir_create_staged(c->o->output_dir ? c->o->output_dir : "artifacts", run_id,
                                   &c->dir);
}

int ao_analyze_run(const ao_analyze_run_opts *o)
{
    ao_classifier cls;
    if (ao_classifier_init(&cls, o->step_regex, o->comm_regex)) return AO_EXIT_USAGE;
    file_list l = {0};
    int rc = collect(o, &l);
    run_ctx c = {.o = o};
    pool p = {.cls = &cls,
              .pass = 1,
              .keep_bytes = o->keep_bytes,
              .names = {.lock = PTHREAD_MUTEX_INITIALIZER}};
    atomic_init(&p.kept_bytes, 0);
    if (rc == 0 && l.v[0].fmt == AO_TRACE_AORTA) {
        /* One file, every rank: rank 0 first says how many there are. */
        p.world_size = 1;
        rc = run_pool(&p, l.v, 1, 1);
        int nr = rc == 0 ? l.v[0].world_size : 0;
        for (int r = 1; r < nr; r++) {
            add_file(&l, l.v[0].path, AO_TRACE_AORTA);
            l.v[l.n - 1].aorta_rank = r;
        }
        p.world_size = nr;
        if (rc == 0 && l.n > 1) rc = run_pool(&p, l.v + 1, l.n - 1, o->threads);
    } else if (rc == 0) {
        p.world_size = (int)l.n;
        rc = run_pool(&p, l.v, l.n, o->threads);
    }
    if (rc == 0) rc = assign_ranks(l.v, l.n);
    if (rc == 0) {
        c.jobs = l.v;
        c.n = l.n;
        c.format_name = ao_trace_format_name(l.v[0].fmt);
        c.world_size = l.v[0].world_size > 0 ? l.v[0].world_size : (int)l.n;
        if ((size_t)c.world_size < l.n) c.world_size = (int)l.n;
        c.origin_us = INFINITY;
        for (size_t j = 0; j < l.n; j++) {
            if (l.v[j].first_us < c.origin_us) c.origin_us = l.v[j].first_us;
            if (l.v[j].stepless)
                ao_warn("%s: no step marks (%s); analysed as one window", l.v[j].path,
                        o->step_regex ? "--step matched nothing" : "no ProfilerStep#N");
            if (l.v[j].unattributed)
                ao_warn("%s: %zu device activities launched outside every step are in the "
                        "totals only",
                        l.v[j].path, l.v[j].unattributed);
        }
        if (l.n > 1) match_collectives(&c);
        compare_ranks(&c);
        /* the first rank's versions: read again if it was not kept */
        job *j0 = &l.v[0];
        if (!j0->kept) rc = read_job(j0, &cls, p.world_size);
        if (rc == 0) keep_versions(&c, &j0->trace);
        if (rc == 0) rc = start_run_dir(&c);
        if (rc == 0) {
            rc = ao_analyze_write_run_json(&c);
            p.pass = 2;
            p.c = &c;
            if (rc == 0) rc = run_pool(&p, l.v, l.n, o->threads);
            if (rc == 0) rc = ao_analyze_write_summary(&c);
            if (rc == 0)
                rc = ao_rundir_commit(&c.dir);
            else
                ao_rundir_abandon(&c.dir);
            if (rc == 0 && o->table) {
                ao_analyze_print_tables(o->table, &c);
                fprintf(o->table, "\nrun directory: %s\n", c.dir.path);
            }
            ao_rundir_free(&c.dir);
        }
    }
    for (size_t j = 0; j < l.n; j++) free_job(&l.v[j]);
    free(l.v);
    free(c.cmp);
    for (size_t i = 0; i < c.nversions; i++) {
        free(c.version_keys[i]);
        free(c.version_values[i]);
    }
    free(c.version_keys);
    free(c.version_values);
    ao_coll_set_free(&c.coll);
    ao_coll_summary_free(&c.coll_sum);
    name_pool_free(&p.names);
    ao_classifier_free(&cls);
    return rc;
}
