/* `aorta analyze`'s files: run.json, each rank's records, collectives.jsonl
 * and summary.json, into the staged run directory; and the final tables. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/jsonl.h"
#include "core/version.h"
#include "ingest/analyze_internal.h"
#include "runs/summary.h"

#define TOP_KERNELS_STEP 5

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

/* ---- the records ---------------------------------------------------------------- */

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

static const step_cmp *find_cmp(const run_ctx *c, long long step)
{
    for (size_t i = 0; i < c->ncmp; i++)
        if (c->cmp[i].step == step) return &c->cmp[i];
    return NULL;
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
        if (st == yajl_gen_status_ok) st = key(g, "slowest_rank_by");
        if (st == yajl_gen_status_ok) st = ao_json_gen_str(g, e->by);
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

int ao_analyze_write_rank(const run_ctx *c, const job *j)
{
    char *path = ao_rundir_rank_path(&c->dir, j->rank, (int)c->n, AO_RANK_METRICS);
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
        if (isfinite(r.m.first_issue_us)) r.m.first_issue_us -= c->origin_us;
        ao_op *ops = ao_malloc((sr->nops ? sr->nops : 1) * sizeof *ops);
        for (size_t i = 0; i < sr->nops; i++) {
            ops[i] = sr->ops[i];
            ops[i].start_us -= c->origin_us;
            ops[i].end_us -= c->origin_us;
            if (ops[i].has_issue) ops[i].issue_us -= c->origin_us;
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

/* ---- run.json --------------------------------------------------------------------- */

static void visit_config(const void *config, ao_config_emit_fn emit, void *emit_ctx)
{
    const run_ctx *c = config;
    ao_config_entry e = {.key = "training.summary_skip_steps",
                         .value = ao_json_int(0),
                         .type = "int",
                         .origin = "aorta analyze (every traced step counts)"};
    emit(emit_ctx, &e);
    ao_config_entry f = {.key = "analyze.format",
                         .value = ao_json_str(c->format_name),
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

int ao_analyze_write_run_json(const run_ctx *c)
{
    /* Versions the traces name (the first rank's), and the source. */
    ao_json_field versions[16];
    size_t nv = 0;
    versions[nv++] = (ao_json_field){"aorta", ao_json_str(AORTA_VERSION)};
    versions[nv++] = (ao_json_field){"git_commit", ao_json_str(ao_git_commit)};
    versions[nv++] = (ao_json_field){"source_format", ao_json_str(c->jobs[0].trace.format)};
    for (size_t i = 0; i < c->nversions && nv < sizeof versions / sizeof *versions; i++) {
        if (strcmp(c->version_keys[i], "baseTimeNanoseconds") == 0) continue;
        versions[nv++] = (ao_json_field){c->version_keys[i], ao_json_str(c->version_values[i])};
    }
    ao_json_field *dev = ao_malloc(c->n * 4 * sizeof *dev);
    ao_json_object *devices = ao_malloc(c->n * sizeof *devices);
    for (size_t j = 0; j < c->n; j++) {
        const job *jb = &c->jobs[j];
        ao_json_field *f = dev + 4 * j;
        f[0] = (ao_json_field){"rank", ao_json_int(jb->rank)};
        f[1] = (ao_json_field){"name", ao_json_str(jb->device)};
        f[2] = (ao_json_field){"trace", ao_json_str(jb->path)};
        f[3] = (ao_json_field){"trace_rank", ao_json_int(jb->trace_rank)};
        devices[j] = (ao_json_object){f, 4};
    }
    ao_run_header h = {.run_id = c->dir.run_id,
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
    char *path = ao_rundir_file(&c->dir, AO_RUN_JSON);
    int rc = ao_run_json_write(path, &h);
    free(path);
    free(dev);
    free(devices);
    return rc;
}

/* ---- summary.json ---------------------------------------------------------------- */

static yajl_gen_status gen_rank(yajl_gen g, const job *j)
{
    yajl_gen_status st;
    G(yajl_gen_map_open(g));
    G(key(g, "rank"));
    G(yajl_gen_integer(g, j->rank));
    G(key(g, "trace_rank"));
    G(yajl_gen_integer(g, j->trace_rank));
    G(key(g, "trace"));
    G(ao_json_gen_str(g, j->path));
    G(key(g, "steps"));
    G(yajl_gen_integer(g, (long long)j->nsteps));
    G(key(g, "stepless"));
    G(yajl_gen_bool(g, j->stepless));
    G(key(g, "unattributed_activities"));
    G(yajl_gen_integer(g, (long long)j->unattributed));
    G(key(g, "total"));
    G(yajl_gen_map_open(g));
    G(ao_overlap_gen_fields(g, &j->total.m, 1));
    G(ao_step_result_gen_extra(g, &j->total));
    G(yajl_gen_map_close(g));
    G(key(g, "class_ms"));
    G(yajl_gen_map_open(g));
    for (int k = 0; k < 3; k++)
        G(key_num(g, ao_op_class_name((ao_op_class)k), j->class_us[k] / 1e3));
    G(yajl_gen_map_close(g));
    G(key(g, "kernels"));
    G(yajl_gen_array_open(g));
    for (size_t k = 0; k < j->ntop; k++) G(gen_kernel(g, &j->top[k]));
    G(yajl_gen_array_close(g));
    G(key(g, "hta"));
    if (!j->hta.valid) {
        G(yajl_gen_null(g));
        return yajl_gen_map_close(g);
    }
    G(yajl_gen_map_open(g));
    G(key_num(g, "comm_comp_overlap_pctg", j->hta.overlap_pct));
    G(key_num(g, "idle_time_us", j->hta.idle_us));
    G(key_num(g, "compute_time_us", j->hta.compute_us));
    G(key_num(g, "non_compute_time_us", j->hta.non_compute_us));
    G(key_num(g, "kernel_time_us", j->hta.kernel_us));
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
    G(ao_json_gen_str(g, c->format_name));
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
        G(key(g, "slowest_rank_by"));
        G(ao_json_gen_str(g, c->cmp[i].by));
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

int ao_analyze_write_summary(run_ctx *c)
{
    int rc = 0;
    if (c->n > 1) {
        char *path = ao_rundir_file(&c->dir, AO_COLLECTIVES_FILE);
        rc = ao_coll_write(path, &c->coll);
        free(path);
    }
    ao_run_data run;
    if (rc == 0) rc = ao_run_load_summary(c->dir.path, 0, &run);
    if (rc) return rc;
    ao_summary s;
    rc = ao_summary_build(c->dir.run_id, &run, 1, &s);
    if (rc == 0) {
        yajl_gen g = ao_json_gen_new(1);
        char *path = ao_rundir_file(&c->dir, AO_RUN_SUMMARY);
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
    return rc;
}

/* ---- the tables ------------------------------------------------------------------- */

/* Per-rank tables show a screenful of ranks; summary.json has them all. */
#define SHOWN_RANKS 16

void ao_analyze_print_tables(FILE *out, const run_ctx *c)
{
    size_t shown = c->n > SHOWN_RANKS ? SHOWN_RANKS : c->n;
    fprintf(out, "\nper rank, whole trace (HTA's conventions: get_comm_comp_overlap, "
                 "get_temporal_breakdown)\n");
    fprintf(out, "%-5s %10s %12s %12s %14s %12s %10s %10s\n", "rank", "overlap%", "idle_us",
            "compute_us", "non_compute_us", "kernel_us", "host_wait", "steps");
    for (size_t j = 0; j < shown; j++) {
        const job *jb = &c->jobs[j];
        fprintf(out, "%-5d %10.2f %12.0f %12.0f %14.0f %12.0f %9.2fms %10zu\n", jb->rank,
                jb->hta.overlap_pct, jb->hta.idle_us, jb->hta.compute_us, jb->hta.non_compute_us,
                jb->hta.kernel_us, jb->total.m.host_wait_ms, jb->nsteps);
    }
    if (shown < c->n)
        fprintf(out, "(%zu more ranks: summary.json's analyze.ranks)\n", c->n - shown);
    if (c->n > 1 && c->ncmp) {
        fprintf(out,
                "\nslowest rank per step (the rank the others waited for, else the most "
                "time of its own)\n%-8s %8s %12s %12s\n",
                "step", "rank", "step_ms", "+ms vs fastest");
        for (size_t i = 0; i < c->ncmp; i++)
            fprintf(out, "%-8lld %8d %12.3f %12.3f\n", c->cmp[i].step, c->cmp[i].slowest,
                    c->cmp[i].slowest_ms, c->cmp[i].slowest_ms - c->cmp[i].fastest_ms);
    }
    if (c->coll.ninst) {
        const ao_coll_summary *cs = &c->coll_sum;
        fprintf(out,
                "\ncollectives across ranks: %zu (%zu not matched on every rank, %zu of "
                "different sizes, %zu with clocks that disagree)\n",
                c->coll.ninst, c->coll.partial, c->coll.inconsistent, c->coll.misaligned);
        fprintf(out, "%-5s %10s %16s %16s  %s\n", "rank", "late at", "others wait ms",
                "it waits ms", "(a step, mean)");
        /* the ranks the others wait for most, a screenful */
        int *order = ao_malloc((size_t)(cs->nranks > 0 ? cs->nranks : 1) * sizeof *order);
        for (int r = 0; r < cs->nranks; r++) order[r] = r;
        for (int i = 1; i < cs->nranks; i++)
            for (int k = i; k > 0 && cs->ranks[order[k]].cost_ms > cs->ranks[order[k - 1]].cost_ms;
                 k--) {
                int t = order[k];
                order[k] = order[k - 1];
                order[k - 1] = t;
            }
        int top = cs->nranks > SHOWN_RANKS ? SHOWN_RANKS : cs->nranks;
        for (int i = 0; i < top; i++) {
            const ao_coll_rank_stats *rs = &cs->ranks[order[i]];
            fprintf(out, "%-5d %10zu %16.3f %16.3f\n", rs->rank, rs->late, rs->cost_ms,
                    rs->waited_ms);
        }
        if (top < cs->nranks)
            fprintf(out, "(%d more ranks: summary.json's collectives.ranks)\n", cs->nranks - top);
        free(order);
    }
    for (size_t j = 0; j < shown; j++) {
        const job *jb = &c->jobs[j];
        fprintf(out, "\nrank %d: top kernels by total time\n", jb->rank);
        for (size_t k = 0; k < jb->ntop && k < 5; k++)
            fprintf(out, "  %10.1f us %6zu x  %-7s %.90s\n", jb->top[k].total_us, jb->top[k].count,
                    ao_op_class_name((ao_op_class)jb->top[k].cls), jb->top[k].name);
    }
}
