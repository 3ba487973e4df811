/* What `aorta queues` prints and writes: the table (nccl-tests style, one
 * row per stream count; the same cells go to --csv), the per-op latencies,
 * the JSON record with every sample, and the queue variables in effect. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/table.h"
#include "core/error.h"
#include "core/json.h"
#include "core/text.h"
#include "queues/internal.h"

extern char **environ;

/* ---- the queue variables ---------------------------------------------------- */

/* Always listed (null when unset): CUDA's and HIP's number of hardware
 * queues, and the switch that serializes every launch. */
static const char *const fixed_vars[] = {"CUDA_DEVICE_MAX_CONNECTIONS", "GPU_MAX_HW_QUEUES",
                                         "CUDA_LAUNCH_BLOCKING", NULL};
/* Listed when set: ROCm's queue, scheduling and signalling knobs live here. */
static const char *const prefixes[] = {"HIP_", "AMD_", "HSA_", NULL};

static void env_add(ao_qenv *e, const char *name, const char *value)
{
    e->names = ao_realloc(e->names, (size_t)(e->n + 1) * sizeof *e->names);
    e->values = ao_realloc(e->values, (size_t)(e->n + 1) * sizeof *e->values);
    e->names[e->n] = ao_strdup(name);
    e->values[e->n] = value ? ao_strdup(value) : NULL;
    e->n++;
}

static void env_read(ao_qenv *e)
{
    memset(e, 0, sizeof *e);
    for (const char *const *v = fixed_vars; *v; v++) env_add(e, *v, getenv(*v));
    for (char **kv = environ; kv && *kv; kv++) {
        const char *eq = strchr(*kv, '=');
        if (!eq) continue;
        int match = 0;
        for (const char *const *p = prefixes; *p; p++) match |= ao_starts_with(*kv, *p);
        if (!match) continue;
        char *name = ao_strdup(*kv);
        name[eq - *kv] = 0;
        env_add(e, name, eq + 1);
        free(name);
    }
}

unsigned ao_qenv_user_mask(void)
{
    unsigned mask = 0;
    for (int i = 0; fixed_vars[i]; i++)
        if (getenv(fixed_vars[i])) mask |= 1u << i;
    return mask;
}

void ao_qenv_effective(unsigned user_mask, ao_qenv *eff)
{
    env_read(eff);
    /* The fixed variables come first, in fixed_vars' order; aorta sets only
     * those (the CUDA backend's 32 connections), never a HIP_/AMD_/HSA_ one. */
    for (int i = 0; fixed_vars[i]; i++) {
        if (!eff->values[i] || (user_mask & (1u << i))) continue;
        eff->set_by_aorta =
            ao_realloc(eff->set_by_aorta, (size_t)(eff->nset + 1) * sizeof *eff->set_by_aorta);
        eff->set_by_aorta[eff->nset++] = ao_strdup(eff->names[i]);
    }
}

void ao_qenv_free(ao_qenv *e)
{
    for (int i = 0; i < e->n; i++) {
        free(e->names[i]);
        free(e->values[i]);
    }
    for (int i = 0; i < e->nset; i++) free(e->set_by_aorta[i]);
    free(e->names);
    free(e->values);
    free(e->set_by_aorta);
    memset(e, 0, sizeof *e);
}

/* ---- the table ---------------------------------------------------------------- */

enum {
    C_STREAMS,
    C_OPS,
    C_LAT_MEAN,
    C_LAT_P50,
    C_LAT_P95,
    C_LAT_P99,
    C_THR,
    C_PER_STREAM,
    C_EFF,
    C_CONC,
    C_CONC_PCT,
    C_MAX,
    C_INTRA,
    C_INTER,
    C_BUSY,
    C_SUM,
    C_CONC_MS,
    C_INTRA_MEAN,
    C_INTER_MEAN,
    C_NINTRA,
    C_NINTER,
    C_KCONC,
    C_KDIFF,
    C_FIXED
};

static const ao_column fixed_cols[C_FIXED] = {
    {"streams", "streams", "", 8, 0, 0},
    {"ops_per_iteration", "ops/it", "", 7, 0, 0},
    {"latency_mean_us", "mean", "(us)", 10, 1, 0},
    {"latency_p50_us", "p50", "(us)", 10, 1, 0},
    {"latency_p95_us", "p95", "(us)", 10, 1, 0},
    {"latency_p99_us", "p99", "(us)", 10, 1, 0},
    {"throughput_ops_per_s", "ops/s", "", 10, 0, 0},
    {"per_stream_ops_per_s", "per-strm", "(ops/s)", 9, 0, 0},
    {"scaling_efficiency", "effic", "", 6, 3, 0},
    {"concurrency", "conc", "(strm)", 6, 2, 0},
    {"concurrent_pct", ">1strm", "(%)", 6, 1, 0},
    {"max_streams", "max", "", 4, 0, 0},
    {"intra_gap_p50_us", "intra", "(us)", 7, 1, 0},
    {"inter_gap_p50_us", "inter", "(us)", 7, 1, 0},
    {"busy_ms", "busy", "", 0, 4, AO_COL_NO_TEXT},
    {"sum_ms", "sum", "", 0, 4, AO_COL_NO_TEXT},
    {"concurrent_ms", "concurrent", "", 0, 4, AO_COL_NO_TEXT},
    {"intra_gap_mean_us", "", "", 0, 2, AO_COL_NO_TEXT},
    {"inter_gap_mean_us", "", "", 0, 2, AO_COL_NO_TEXT},
    {"intra_gaps", "", "", 0, 0, AO_COL_NO_TEXT},
    {"inter_gaps", "", "", 0, 0, AO_COL_NO_TEXT},
    {"kernel_concurrency", "", "", 0, 3, AO_COL_NO_TEXT},
    {"kernel_concurrency_diff_pct", "", "", 0, 2, AO_COL_NO_TEXT},
};

/* Per op name, in CSV only: NAME_n, _dur_p50_us, _lat_p50_us, _lat_p95_us, _lat_p99_us. */
static const char *const name_fields[] = {"n", "dur_p50_us", "lat_p50_us", "lat_p95_us",
                                          "lat_p99_us"};
#define NFIELDS 5

void ao_qtable_header(ao_qrun *r, FILE *out)
{
    const ao_queues_opts *o = r->o;
    r->ncols = C_FIXED + NFIELDS * r->nnames;
    r->cols = ao_calloc((size_t)r->ncols, sizeof *r->cols);
    memcpy(r->cols, fixed_cols, sizeof fixed_cols);
    for (int i = 0; i < r->nnames; i++)
        for (int f = 0; f < NFIELDS; f++)
            r->cols[C_FIXED + NFIELDS * i + f] =
                (ao_column){ao_asprintf("%s_%s", r->names[i], name_fields[f]),
                            "",
                            "",
                            0,
                            f ? 2 : 0,
                            AO_COL_NO_TEXT};
    r->t = ao_table_new(r->cols, r->ncols);
    fprintf(out, "# aorta queues: %s on %s (%s), sync %s%s, %d iterations after %d warm-up\n",
            o->workload, r->device_name, r->backend, ao_qsync_name(o->sync),
            o->hold ? "" : ", no hold", o->iterations, o->warmup);
    fprintf(out, "# queue variables:");
    for (int i = 0; i < r->env.n; i++) {
        int by_aorta = 0;
        for (int k = 0; k < r->env.nset; k++)
            by_aorta |= strcmp(r->env.set_by_aorta[k], r->env.names[i]) == 0;
        if (r->env.values[i])
            fprintf(out, " %s=%s%s", r->env.names[i], r->env.values[i],
                    by_aorta ? " (set by aorta)" : "");
    }
    int any = 0;
    for (int i = 0; i < r->env.n; i++) any |= r->env.values[i] != NULL;
    fprintf(out, "%s\n", any ? "" : " none set (the runtime's defaults)");
    if (r->note) fprintf(out, "# note: %s\n", r->note);
    fprintf(out, "#\n#%*s latency per iteration%*s throughput%*s concurrency%*s launch gap p50\n",
            17, "", 22, "", 16, "", 12, "");
    ao_table_print_header(r->t, out);
}

static void set(ao_qrun *r, int row, int col, double v)
{
    ao_table_set_num(r->t, row, col, v);
}

void ao_qtable_row(ao_qrun *r, const ao_qresult *q, FILE *out)
{
    int row = ao_table_add_row(r->t);
    ao_table_set_int(r->t, row, C_STREAMS, q->streams);
    ao_table_set_int(r->t, row, C_OPS, q->ops_per_iter);
    set(r, row, C_LAT_MEAN, q->lat.mean);
    set(r, row, C_LAT_P50, q->lat.p50);
    set(r, row, C_LAT_P95, q->lat_p95);
    set(r, row, C_LAT_P99, q->lat.p99);
    set(r, row, C_THR, q->throughput);
    set(r, row, C_PER_STREAM, q->per_stream);
    set(r, row, C_EFF, q->efficiency);
    set(r, row, C_CONC, q->u.concurrency);
    set(r, row, C_CONC_PCT, q->u.busy_us > 0 ? q->u.concurrent_us / q->u.busy_us * 100 : NAN);
    ao_table_set_int(r->t, row, C_MAX, q->u.max_streams);
    set(r, row, C_INTRA, q->intra.p50);
    set(r, row, C_INTER, q->inter.p50);
    set(r, row, C_BUSY, q->u.busy_us / 1e3);
    set(r, row, C_SUM, q->u.sum_us / 1e3);
    set(r, row, C_CONC_MS, q->u.concurrent_us / 1e3);
    set(r, row, C_INTRA_MEAN, q->intra.mean);
    set(r, row, C_INTER_MEAN, q->inter.mean);
    ao_table_set_int(r->t, row, C_NINTRA, (long long)q->nintra);
    ao_table_set_int(r->t, row, C_NINTER, (long long)q->ninter);
    if (q->have_kernels) {
        set(r, row, C_KCONC, q->ku.concurrency);
        set(r, row, C_KDIFF, q->conc_diff_pct);
    }
    for (int i = 0; i < q->nnames; i++) {
        const ao_qname_stats *ns = &q->names[i];
        int c = C_FIXED + NFIELDS * i;
        ao_table_set_int(r->t, row, c, (long long)ns->n);
        set(r, row, c + 1, ns->dur.p50);
        set(r, row, c + 2, ns->lat.p50);
        set(r, row, c + 3, ns->lat_p95);
        set(r, row, c + 4, ns->lat.p99);
    }
    ao_table_print_row(r->t, row, out);
}

void ao_qtable_footer(const ao_qrun *r, FILE *out)
{
    fprintf(out, "#\n# per op: duration (end - start) and latency (end - ready: from when its "
                 "stream, its go and the ops it waits for let it run), us\n");
    fprintf(out, "# %7s  %-14s %7s %10s %10s %10s %10s\n", "streams", "op", "n", "dur_p50",
            "lat_p50", "lat_p95", "lat_p99");
    for (int k = 0; k < r->nres; k++)
        for (int i = 0; i < r->res[k].nnames; i++) {
            const ao_qname_stats *ns = &r->res[k].names[i];
            fprintf(out, "  %7d  %-14s %7zu %10.1f %10.1f %10.1f %10.1f\n", r->res[k].streams,
                    ns->name, ns->n, ns->dur.p50, ns->lat.p50, ns->lat_p95, ns->lat.p99);
        }
    for (int k = 0; k < r->nres; k++) {
        const ao_qresult *q = &r->res[k];
        if (!q->have_kernels) continue;
        fprintf(out,
                "# kernels (CUPTI), %2d streams: %zu activities, concurrency %.3f (events %.3f, "
                "%+.2f %%), >1 stream %.3f ms (events %.3f ms)\n",
                q->streams, q->kernels, q->ku.concurrency, q->u.concurrency, q->conc_diff_pct,
                q->ku.concurrent_us / 1e3, q->u.concurrent_us / 1e3);
    }
    int counts[AO_QUEUES_MAX_COUNTS];
    double eff[AO_QUEUES_MAX_COUNTS];
    for (int k = 0; k < r->nres; k++) {
        counts[k] = r->res[k].streams;
        eff[k] = r->res[k].efficiency;
    }
    if (r->nres > 1 && r->res[0].streams == 1) {
        int knee = ao_qknee(counts, eff, r->nres);
        fprintf(out, "# knee: %d stream%s (the most before effic falls below 90 %% of its best)\n",
                knee, knee == 1 ? "" : "s");
    }
    fprintf(out, "# effic = ops/s / ops/s on 1 stream x ops/it on 1 stream / ops/it (= ops/s / "
                 "(streams x ops/s on 1) where each stream brings the same work)\n"
                 "# conc = sum of per-stream busy / busy: streams with an op in flight (its event "
                 "pair open) on average while any had one\n");
}

void ao_qtable_free(ao_qrun *r)
{
    ao_table_free(r->t);
    for (int j = C_FIXED; j < r->ncols; j++) free((char *)r->cols[j].key);
    free(r->cols);
    r->t = NULL;
    r->cols = NULL;
}

int ao_qwrite_csv(const ao_qrun *r, const char *path)
{
    return ao_table_write_csv(r->t, path) ? -1 : 0;
}

/* ---- JSON ------------------------------------------------------------------------ */

static void gen_summary(ao_json_writer *w, const char *k, const ao_stats_summary *s, double p95)
{
    ao_jw_open(w, k);
    ao_jw_int(w, "n", (long long)s->n);
    ao_jw_double(w, "mean", s->mean);
    ao_jw_double(w, "p50", s->p50);
    ao_jw_double(w, "p95", p95);
    ao_jw_double(w, "p99", s->p99);
    ao_jw_double(w, "min", s->min);
    ao_jw_double(w, "max", s->max);
    ao_jw_close(w);
}

static void gen_array(ao_json_writer *w, const char *k, const double *v, int n)
{
    ao_jw_aopen(w, k);
    for (int i = 0; i < n; i++) ao_jw_double(w, NULL, v[i]);
    ao_jw_aclose(w);
}

static void gen_union(ao_json_writer *w, const char *k, const ao_qunion *u)
{
    ao_jw_open(w, k);
    ao_jw_double(w, "busy_ms", u->busy_us / 1e3);
    ao_jw_double(w, "sum_ms", u->sum_us / 1e3);
    ao_jw_double(w, "concurrent_ms", u->concurrent_us / 1e3);
    ao_jw_double(w, "concurrent_pct", u->busy_us > 0 ? u->concurrent_us / u->busy_us * 100 : NAN);
    ao_jw_double(w, "concurrency", u->concurrency);
    ao_jw_int(w, "max_streams", u->max_streams);
    ao_jw_close(w);
}

static void gen_result(ao_json_writer *w, const ao_qresult *q)
{
    ao_jw_open(w, NULL);
    ao_jw_int(w, "streams", q->streams);
    ao_jw_int(w, "ops_per_iteration", q->ops_per_iter);
    gen_summary(w, "latency_us", &q->lat, q->lat_p95);
    ao_jw_double(w, "span_ms", q->span_us / 1e3);
    ao_jw_double(w, "throughput_ops_per_s", q->throughput);
    ao_jw_double(w, "throughput_per_stream_ops_per_s", q->per_stream);
    ao_jw_double(w, "scaling_efficiency", q->efficiency);
    gen_union(w, "union", &q->u);
    ao_jw_double(w, "concurrency_iteration_mean", q->conc_iter_mean);
    ao_jw_open(w, "gaps_us");
    gen_summary(w, "intra_stream", &q->intra, q->intra_p95);
    gen_summary(w, "inter_stream", &q->inter, q->inter_p95);
    ao_jw_close(w);
    ao_jw_aopen(w, "ops");
    for (int i = 0; i < q->nnames; i++) {
        const ao_qname_stats *ns = &q->names[i];
        ao_jw_open(w, NULL);
        ao_jw_str(w, "name", ns->name);
        gen_summary(w, "duration_us", &ns->dur, NAN);
        gen_summary(w, "latency_us", &ns->lat, ns->lat_p95);
        ao_jw_close(w);
    }
    ao_jw_aclose(w);
    if (q->have_kernels) {
        ao_jw_open(w, "kernels");
        ao_jw_int(w, "activities", (long long)q->kernels);
        gen_union(w, "union", &q->ku);
        ao_jw_double(w, "concurrency_diff_pct", q->conc_diff_pct);
        ao_jw_close(w);
    } else {
        ao_jw_null(w, "kernels");
    }
    gen_array(w, "latency_samples_us", q->latency_us, q->iterations);
    gen_array(w, "concurrency_samples", q->concurrency, q->iterations);
    ao_jw_close(w);
}

int ao_qwrite_json(const ao_qrun *r, const char *path)
{
    const ao_queues_opts *o = r->o;
    ao_json_writer w = {.g = ao_json_gen_new(1)};
    ao_jw_open(&w, NULL);
    const ao_json_field head[] = {
        {"schema", ao_json_int(1)},
        {"command", ao_json_str("queues")},
        {"workload", ao_json_str(o->workload)},
        {"backend", ao_json_str(r->backend)},
        {"device", ao_json_str(r->device_name)},
        {"sync", ao_json_str(ao_qsync_name(o->sync))},
        {"iterations", ao_json_int(o->iterations)},
        {"warmup", ao_json_int(o->warmup)},
        {"kernel_trace", ao_json_bool(o->kernel_trace)},
        {"hold", ao_json_bool(o->hold)},
        {"note", ao_json_str(r->note)},
    };
    for (size_t i = 0; i < sizeof head / sizeof *head; i++)
        ao_jw_value(&w, head[i].key, &head[i].v);
    ao_jw_open(&w, "env");
    for (int i = 0; i < r->env.n; i++) ao_jw_str(&w, r->env.names[i], r->env.values[i]);
    ao_jw_close(&w);
    ao_jw_aopen(&w, "env_set_by_aorta");
    for (int i = 0; i < r->env.nset; i++) ao_jw_str(&w, NULL, r->env.set_by_aorta[i]);
    ao_jw_aclose(&w);
    ao_jw_aopen(&w, "results");
    for (int i = 0; i < r->nres; i++) gen_result(&w, &r->res[i]);
    ao_jw_aclose(&w);
    ao_jw_close(&w);
    int rc = w.st == yajl_gen_status_ok ? ao_json_write_atomic(path, w.g) : -1;
    if (w.st != yajl_gen_status_ok) ao_error(path, "cannot generate the JSON record");
    yajl_gen_free(w.g);
    return rc;
}
