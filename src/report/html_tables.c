/* index.html's later sections: tables per label (headline statistics, per
 * collective kind, decomposition, telemetry) with the other charts, the
 * settings once, and the glossary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/jsonl.h"
#include "report/glossary.h"
#include "report/html_buf.h"
#include "runs/kernels.h"

static void headline_table(ao_hbuf *b, const ao_summary *s, size_t idx)
{
    ao_hprintf(b,
               "<table id=\"summary-%zu\"><thead><tr><th class=\"k\">metric</th><th>median</th>"
               "<th>p90</th><th>p99</th><th>min</th><th>max</th><th class=\"k\">unit</th>"
               "</tr></thead><tbody>\n",
               idx);
    for (size_t m = 0; m < ao_metric_count(); m++) {
        const ao_stats_summary *st = &s->metrics[m].all;
        const ao_metric_def *d = ao_metric(m);
        if (st->n == 0 || !d->headline) continue;
        ao_hprintf(b, "<tr><td class=\"k\"><a href=\"#g-%s\">%s</a>%s</td>", d->name, d->name,
                   strcmp(d->name, "step_ms") == 0 ? " (" AO_STEP_MS_DEFINITION ")" : "");
        const double v[5] = {st->p50, st->p90, st->p99, st->min, st->max};
        ao_hcells(b, v, 5);
        ao_hprintf(b, "<td class=\"k\">%s</td></tr>\n", d->unit);
    }
    ao_hputs(b, "</tbody></table>\n");
}

static double med(const ao_summary *s, const char *fmt, const char *kind)
{
    char name[64];
    snprintf(name, sizeof name, fmt, kind);
    int m = ao_metric_find(name);
    return m < 0 ? NAN : s->metrics[m].all.p50;
}

/* Per collective kind: time, hidden, exposed, busbw (medians per step). */
static void kind_table(ao_hbuf *b, const ao_summary *s, size_t idx)
{
    ao_hprintf(b,
               "<table id=\"kinds-%zu\"><thead><tr><th class=\"k\">collective kind</th>"
               "<th>time (ms)</th><th>hidden by compute (ms)</th><th>exposed (ms)</th>"
               "<th>busbw (GB/s)</th></tr></thead><tbody>\n",
               idx);
    size_t rows = 0;
    for (int k = 0; k < AO_NKINDS; k++) {
        const char *kn = ao_coll_kind_name((ao_coll_kind)k);
        double t = med(s, "%s_ms", kn);
        if (isnan(t)) continue;
        rows++;
        const double v[4] = {t, med(s, "compute_%s_ms", kn), med(s, "exposed_%s_ms", kn),
                             med(s, "busbw_%s_gbps", kn)};
        ao_hprintf(b, "<tr><td class=\"k\">%s</td>", kn);
        ao_hcells(b, v, 4);
        ao_hputs(b, "</tr>\n");
    }
    if (rows == 0) ao_hputs(b, "<tr><td class=\"k\" colspan=\"5\">no collective ran</td></tr>\n");
    ao_hputs(b, "</tbody></table>\n");
}

static void decomposition(ao_hbuf *b, const ao_summary *s, size_t idx)
{
    const ao_decomp *x = &s->dec;
    const ao_decomposition *d = &x->d;
    if (!x->have) {
        ao_hputs(b, "<p class=\"note\">No decomposition: the run had no compute-only and "
                    "comm-only baseline steps (training.baseline_steps).</p>\n");
        return;
    }
    if (x->flag) {
        ao_hprintf(b,
                   "<p class=\"flag\" id=\"decomposition-%zu\">Sanity flag: decomposition not "
                   "shown (%s; compute alone ",
                   idx, ao_decomp_source(x));
        ao_hnum(b, d->compute_isolated_ms);
        ao_hputs(b, " ms, comm alone ");
        ao_hnum(b, d->comm_isolated_ms);
        ao_hputs(b, " ms): ");
        ao_hesc(b, x->flag);
        ao_hputs(b, ".</p>\n");
        return;
    }
    ao_hprintf(b,
               "<table id=\"decomposition-%zu\"><thead><tr><th class=\"k\">decomposition (%s)"
               "</th><th>value</th></tr></thead><tbody>\n",
               idx, ao_decomp_source(x));
    const char *names[] = {"compute alone (ms)", "comm alone (ms)", "ideal (ms)",
                           "serial (ms)",        "step (ms)",       "over ideal (ms)",
                           "achieved (0..1)",    "contention (ms)", "comm slowdown (x)"};
    const double v[] = {d->compute_isolated_ms,
                        d->comm_isolated_ms,
                        d->ideal_ms,
                        d->serial_ms,
                        x->step_ms,
                        x->gap_ms,
                        d->achieved,
                        d->contention_ms,
                        d->comm_slowdown};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ao_hprintf(b, "<tr><td class=\"k\">%s</td>", names[i]);
        ao_hcells(b, &v[i], 1);
        ao_hputs(b, "</tr>\n");
    }
    ao_hputs(b, "</tbody></table>\n");
}

static void telemetry(ao_hbuf *b, const ao_summary *s, size_t idx)
{
    if (!s->ntelemetry) return;
    ao_hprintf(b,
               "<table id=\"telemetry-%zu\"><thead><tr><th class=\"k\">telemetry</th>"
               "<th>median</th><th>mean</th><th>max</th></tr></thead><tbody>\n",
               idx);
    for (size_t i = 0; i < s->ntelemetry; i++) {
        ao_hputs(b, "<tr><td class=\"k\">");
        ao_hesc(b, s->telemetry[i].key);
        ao_hputs(b, "</td>");
        const double v[3] = {s->telemetry[i].s.p50, s->telemetry[i].s.mean, s->telemetry[i].s.max};
        ao_hcells(b, v, 3);
        ao_hputs(b, "</tr>\n");
    }
    ao_hputs(b, "</tbody></table>\n");
}

/* A number member of a JSON object; NAN when absent or null. */
static double jnum(yajl_val obj, const char *key)
{
    yajl_val v = ao_json_member(obj, key);
    return YAJL_IS_NUMBER(v) ? ao_json_number(v) : NAN;
}

static const char *jstr(yajl_val obj, const char *key)
{
    yajl_val v = ao_json_member(obj, key);
    return YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : "";
}

static void cell(ao_hbuf *b, double v)
{
    ao_hcells(b, &v, 1);
}

static int class_index(const char *name)
{
    for (int c = AO_CLASS_COMPUTE; c <= AO_CLASS_COPY; c++)
        if (strcmp(name, ao_op_class_name((ao_op_class)c)) == 0) return c;
    return AO_CLASS_COMPUTE;
}

/* One rank's top kernels, for every source (runs/kernels.h): k[0..n) by
 * total time, window_ms the step time they were taken from. */
static void kernel_table(ao_hbuf *b, size_t idx, size_t i, int rank, const ao_top_kernel *k,
                         size_t n, double window_ms)
{
    ao_hprintf(b,
               "<table id=\"kernels-%zu-%zu\"><thead><tr><th class=\"k\">rank %d: top kernels"
               "</th><th class=\"k\">class</th><th>calls</th><th>total (ms)</th><th>share of "
               "step time</th><th>mean (&micro;s)</th><th>max (&micro;s)</th></tr></thead>"
               "<tbody>\n",
               idx, i, rank);
    for (size_t j = 0; j < n; j++) {
        char shown[160]; /* the function's name; the whole signature on hover */
        ao_kernel_short_name(k[j].name, shown, sizeof shown);
        ao_hputs(b, "<tr><td class=\"k\" title=\"");
        ao_hesc(b, k[j].name);
        ao_hputs(b, "\">");
        ao_hesc(b, shown);
        ao_hprintf(b, "</td><td class=\"k\">%s</td><td>%zu</td>",
                   ao_op_class_name((ao_op_class)k[j].cls), k[j].count);
        cell(b, k[j].total_us / 1000);
        if (window_ms > 0)
            ao_hprintf(b, "<td>%.1f%%</td>", 100 * k[j].total_us / 1000 / window_ms);
        else
            ao_hputs(b, "<td>&ndash;</td>");
        const double v[2] = {k[j].count ? k[j].total_us / (double)k[j].count : NAN, k[j].max_us};
        ao_hcells(b, v, 2);
        ao_hputs(b, "</tr>\n");
    }
    ao_hputs(b, "</tbody></table>\n");
}

static const char kernel_share_note[] =
    "<p class=\"note\">Share of step time: the kernel's total time over the summed windows "
    "of the steps it was taken from (kernels on different streams run at once, so shares can "
    "add up to more than 100%).</p>\n";

/* What `aorta analyze` adds for a job's own traces: HTA's numbers per rank,
 * idle split, exposure per collective kind, the slowest rank of each step,
 * the top kernels. */
static void analyze_section(ao_hbuf *b, yajl_val a, size_t idx)
{
    yajl_val ranks = ao_json_member(a, "ranks"), steps = ao_json_member(a, "steps");
    if (!YAJL_IS_ARRAY(ranks)) return;
    ao_hputs(b, "<h3>Trace analysis (");
    ao_hesc(b, jstr(a, "format"));
    ao_hputs(b, " traces)</h3>\n<p class=\"note\">Whole trace per rank. Overlap, idle, compute and "
                "non-compute follow Holistic Trace Analysis's conventions (its "
                "get_comm_comp_overlap and get_temporal_breakdown); host wait is idle time after "
                "which the next kernel's launch came after the device had run dry.</p>\n");
    ao_hprintf(
        b,
        "<table id=\"analyze-%zu\"><thead><tr><th class=\"k\">rank</th><th>overlap %%</th>"
        "<th>idle (us)</th><th>compute (us)</th><th>non-compute (us)</th><th>kernel (us)</th>"
        "<th>host wait (ms)</th><th>other idle (ms)</th><th>exposed comm (ms)</th>"
        "<th class=\"k\">exposed by kind (ms)</th></tr></thead><tbody>\n",
        idx);
    for (size_t i = 0; i < ranks->u.array.len; i++) {
        yajl_val r = ranks->u.array.values[i], h = ao_json_member(r, "hta"),
                 t = ao_json_member(r, "total");
        ao_hprintf(b, "<tr><td class=\"k\">%g</td>", jnum(r, "rank"));
        cell(b, jnum(h, "comm_comp_overlap_pctg"));
        cell(b, jnum(h, "idle_time_us"));
        cell(b, jnum(h, "compute_time_us"));
        cell(b, jnum(h, "non_compute_time_us"));
        cell(b, jnum(h, "kernel_time_us"));
        cell(b, jnum(t, "host_wait_ms"));
        cell(b, jnum(t, "idle_other_ms"));
        cell(b, jnum(t, "exposed_comm_ms"));
        ao_hputs(b, "<td class=\"k\">");
        yajl_val k = ao_json_member(t, "exposed_by_kind_ms");
        for (size_t j = 0; YAJL_IS_OBJECT(k) && j < k->u.object.len; j++) {
            double v = ao_json_number(k->u.object.values[j]);
            if (!(v > 0)) continue;
            ao_hesc(b, k->u.object.keys[j]);
            ao_hprintf(b, " %.3f ", v);
        }
        ao_hputs(b, "</td></tr>\n");
    }
    ao_hputs(b, "</tbody></table>\n");
    if (YAJL_IS_ARRAY(steps) && steps->u.array.len) {
        ao_hprintf(b,
                   "<table id=\"slowest-%zu\"><thead><tr><th class=\"k\">step</th>"
                   "<th>slowest rank</th><th>its step (ms)</th><th>fastest rank</th>"
                   "<th>slower by (ms)</th></tr></thead><tbody>\n",
                   idx);
        for (size_t i = 0; i < steps->u.array.len; i++) {
            yajl_val st = steps->u.array.values[i];
            ao_hprintf(b, "<tr><td class=\"k\">%g</td><td>%g</td>", jnum(st, "step"),
                       jnum(st, "slowest_rank"));
            cell(b, jnum(st, "slowest_step_ms"));
            ao_hprintf(b, "<td>%g</td>", jnum(st, "fastest_rank"));
            cell(b, jnum(st, "slowest_step_ms") - jnum(st, "fastest_step_ms"));
            ao_hputs(b, "</tr>\n");
        }
        ao_hputs(b, "</tbody></table>\n");
    }
    size_t tables = 0;
    for (size_t i = 0; i < ranks->u.array.len; i++) {
        yajl_val r = ranks->u.array.values[i], ks = ao_json_member(r, "kernels");
        if (!YAJL_IS_ARRAY(ks)) continue;
        size_t n = ks->u.array.len < AO_TOP_KERNELS ? ks->u.array.len : AO_TOP_KERNELS;
        ao_top_kernel *rows = ao_calloc(n + 1, sizeof *rows);
        for (size_t j = 0; j < n; j++) {
            yajl_val k = ks->u.array.values[j];
            double count = jnum(k, "count");
            rows[j] = (ao_top_kernel){jstr(k, "name"), class_index(jstr(k, "class")),
                                      count > 0 ? (size_t)count : 0, jnum(k, "total_us"),
                                      jnum(k, "max_us")};
        }
        /* whole trace: the share is of the rank's trace window */
        double rank = jnum(r, "rank");
        kernel_table(b, idx, i, isfinite(rank) ? (int)rank : (int)i, rows, n,
                     jnum(ao_json_member(r, "total"), "step_ms"));
        free(rows);
        tables++;
    }
    if (tables) ao_hputs(b, kernel_share_note);
}

/* aorta train's kernel trace (profiling.kernel_trace), per rank of the
 * label's first run. */
static void train_kernels_section(ao_hbuf *b, const ao_summary *s, size_t idx)
{
    size_t steps = 0;
    for (int k = 0; k < s->nkernel_ranks; k++)
        if (s->kernel_ranks[k].kernels.steps > steps) steps = s->kernel_ranks[k].kernels.steps;
    ao_hprintf(b,
               "<h3>Top kernels (kernel trace)</h3>\n<p class=\"note\">From the run's CUPTI "
               "kernel trace (<code>profiling.kernel_trace=true</code>): the kernels of the "
               "%zu counted step(s) in its profiling windows, per rank of its first run.</p>\n",
               steps);
    for (int k = 0; k < s->nkernel_ranks; k++) {
        const ao_kernel_table *t = &s->kernel_ranks[k].kernels;
        if (!t->steps) continue;
        kernel_table(b, idx, (size_t)k, s->kernel_ranks[k].rank, t->k,
                     t->n < AO_TOP_KERNELS ? t->n : AO_TOP_KERNELS, t->window_ms);
    }
    ao_hputs(b, kernel_share_note);
}

void ao_html_tables(ao_hbuf *b, const ao_html_page *p)
{
    ao_hputs(b, "<section id=\"tables\"><h2>Tables</h2>\n");
    for (size_t i = 0; i < p->nlabels; i++) {
        const ao_summary *s = p->labels[i].sum;
        ao_hputs(b, "<h3>");
        ao_hesc(b, s->label);
        ao_hputs(b, "</h3>\n");
        if (!isnan(s->skew.ratio))
            ao_hprintf(b,
                       "<p>Rank skew %.3f: rank %d is the slowest, rank %d the fastest "
                       "(median step per rank).</p>\n",
                       s->skew.ratio, s->skew.slowest_rank, s->skew.fastest_rank);
        if (s->truncated)
            ao_hprintf(b,
                       "<p class=\"flag\">%zu incomplete last line(s) skipped (a stopped "
                       "run).</p>\n",
                       s->truncated);
        if (s->completed != 1 && s->planned_steps > 0) {
            ao_hprintf(b,
                       "<p class=\"flag\"><strong>Cut short: %zu of %lld planned steps; the run "
                       "ended: ",
                       s->steps_run, s->planned_steps);
            ao_hesc(b, s->end ? s->end : "unknown");
            ao_hputs(b, ".</strong></p>\n");
        }
        headline_table(b, s, i);
        kind_table(b, s, i);
        decomposition(b, s, i);
        telemetry(b, s, i);
        if (s->analyze) analyze_section(b, s->analyze, i);
        if (s->kernel_ranks) train_kernels_section(b, s, i);
        char *name = ao_asprintf("%s_timeline", s->label);
        ao_html_figure(b, p, name,
                       "Time per step: step, compute, communication and exposed communication; "
                       "thin lines are ranks, bold the median over ranks.");
        free(name);
    }
    ao_hputs(b, "<p class=\"note\">All statistics and every table are in "
                "<a href=\"summary.json\"><code>summary.json</code></a>.</p>\n</section>\n");
}

/* ---- settings ------------------------------------------------------------------ */

static const char *knob_of(const ao_summary *s, const char *key)
{
    for (size_t i = 0; i < s->nknobs; i++)
        if (strcmp(s->knobs[i].key, key) == 0) return s->knobs[i].value;
    return NULL;
}

static int differs(const ao_html_page *p, const char *key)
{
    const char *v0 = knob_of(p->labels[0].sum, key);
    for (size_t i = 1; i < p->nlabels; i++) {
        const char *v = knob_of(p->labels[i].sum, key);
        if (!v0 != !v || (v && strcmp(v, v0) != 0)) return 1;
    }
    return 0;
}

static void env_text(const ao_run_data *r, const char *path, char *out, size_t n)
{
    out[0] = '\0';
    if (!r->run) return;
    char *parts[4];
    char *dup = ao_strdup(path);
    size_t np = 0;
    for (char *t = strtok(dup, "/"); t && np < 4; t = strtok(NULL, "/")) parts[np++] = t;
    yajl_val v = r->run;
    for (size_t i = 0; i < np && v; i++) {
        if (YAJL_IS_ARRAY(v)) v = YAJL_GET_ARRAY(v)->len ? YAJL_GET_ARRAY(v)->values[0] : NULL;
        const char *key[2] = {parts[i], NULL};
        v = v ? yajl_tree_get(v, key, yajl_t_any) : NULL;
    }
    ao_json_value_text(v, out, n);
    free(dup);
}

/* The environment rows, from run.json as each source writes it: aorta train
 * and attach under "versions" in their words; aorta analyze the profiler's
 * own fields (a Kineto trace's cuda_runtime_version 13000, nccl_version),
 * and its "host" is the machine that analysed, not the job's. */
enum {
    ENV_HOST,
    ENV_DEVICE,
    ENV_BACKEND,
    ENV_RUNTIME,
    ENV_DRIVER,
    ENV_COMM,
    ENV_SOURCE,
    ENV_AORTA,
    ENV_WORLD,
    ENV_ROWS
};
static const char *const env_rows[ENV_ROWS] = {"host",           "device", "backend",
                                               "device runtime", "driver", "communication",
                                               "recorded by",    "aorta",  "world size"};

/* "13000" (CUDA's integer version) as "13.0"; anything else as it is. */
static void cuda_version(char *v, size_t n)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (v[0] && !*end && x >= 1000) snprintf(v, n, "%ld.%ld", x / 1000, x % 1000 / 10);
}

static void env_row(const ao_run_data *r, int row, char *v, size_t n)
{
    char cmd[32], src[64];
    env_text(r, "command", cmd, sizeof cmd);
    env_text(r, "versions/source_format", src, sizeof src);
    int analyzed = strcmp(cmd, "analyze") == 0;
    v[0] = '\0';
    switch (row) {
    case ENV_HOST:
        if (!analyzed)
            env_text(r, "host", v, n);
        else
            snprintf(v, n, "(not in the traces)");
        break;
    case ENV_DEVICE:
        env_text(r, "devices/name", v, n);
        break;
    case ENV_BACKEND:
        env_text(r, "versions/device_backend", v, n);
        if (!v[0]) {
            env_text(r, "versions/cuda_runtime_version", v, n);
            if (v[0]) snprintf(v, n, "cuda");
        }
        break;
    case ENV_RUNTIME:
        env_text(r, "versions/device_runtime", v, n);
        if (!v[0]) env_text(r, "versions/cuda_runtime_version", v, n), cuda_version(v, n);
        break;
    case ENV_DRIVER:
        env_text(r, "versions/driver", v, n);
        if (!v[0]) env_text(r, "versions/cuda_driver_version", v, n), cuda_version(v, n);
        break;
    case ENV_COMM:
        env_text(r, "versions/comm", v, n);
        if (!v[0]) {
            char nccl[64];
            env_text(r, "versions/nccl_version", nccl, sizeof nccl);
            if (nccl[0]) snprintf(v, n, "NCCL %s", nccl);
        }
        break;
    case ENV_SOURCE:
        if (analyzed)
            snprintf(v, n, "aorta analyze of %s traces", src[0] ? src : "profiler");
        else
            snprintf(v, n, "aorta %s", cmd[0] ? cmd : "(unknown command)");
        break;
    case ENV_AORTA:
        env_text(r, "versions/aorta", v, n);
        break;
    case ENV_WORLD:
        env_text(r, "world_size", v, n);
        break;
    }
}

void ao_html_settings(ao_hbuf *b, const ao_html_page *p)
{
    ao_hputs(b, "<section id=\"settings\"><h2>Settings</h2>\n");
    ao_hputs(b, "<table id=\"settings-table\"><thead><tr><th class=\"k\">setting</th>");
    for (size_t i = 0; i < p->nlabels; i++) {
        ao_hputs(b, "<th class=\"k\">");
        ao_hesc(b, p->labels[i].sum->label);
        ao_hputs(b, "</th>");
    }
    ao_hputs(b, "</tr></thead><tbody>\n");
    /* the union of the labels' knobs, each key once, in first-seen order */
    size_t same = 0, shown = 0;
    for (size_t i = 0; i < p->nlabels; i++) {
        const ao_summary *s = p->labels[i].sum;
        for (size_t k = 0; k < s->nknobs; k++) {
            const char *key = s->knobs[k].key;
            int seen = 0;
            for (size_t j = 0; j < i && !seen; j++) seen = knob_of(p->labels[j].sum, key) != NULL;
            for (size_t j = 0; j < k && !seen; j++) seen = strcmp(s->knobs[j].key, key) == 0;
            if (seen) continue;
            if (p->nlabels > 1 && !differs(p, key)) {
                same++;
                continue;
            }
            shown++;
            ao_hputs(b, "<tr><td class=\"k\">");
            ao_hesc(b, key);
            ao_hputs(b, "</td>");
            for (size_t j = 0; j < p->nlabels; j++) {
                const char *v = knob_of(p->labels[j].sum, key);
                ao_hputs(b, "<td class=\"k\">");
                ao_hesc(b, v ? v : "(not set)");
                ao_hputs(b, "</td>");
            }
            ao_hputs(b, "</tr>\n");
        }
    }
    if (!shown)
        ao_hprintf(b, "<tr><td class=\"k\" colspan=\"%zu\">no setting differs</td></tr>\n",
                   p->nlabels + 1);
    ao_hprintf(b, "<tr><th class=\"k\" colspan=\"%zu\">environment of the job</th></tr>\n",
               p->nlabels + 1);
    char v[256];
    for (int e = 0; e < ENV_ROWS; e++) {
        ao_hputs(b, "<tr><td class=\"k\">");
        ao_hesc(b, env_rows[e]);
        ao_hputs(b, "</td>");
        for (size_t j = 0; j < p->nlabels; j++) {
            env_row(&p->labels[j].runs[0], e, v, sizeof v);
            ao_hputs(b, "<td class=\"k\">");
            ao_hesc(b, v[0] ? v : "(not recorded)");
            ao_hputs(b, "</td>");
        }
        ao_hputs(b, "</tr>\n");
    }
    ao_hputs(b, "</tbody></table>\n");
    if (same)
        ao_hprintf(b,
                   "<p class=\"note\">%zu other setting(s) are the same for every label (in "
                   "each run's <code>run.json</code>).</p>\n",
                   same);
    ao_hputs(b, "</section>\n");
}

/* ---- glossary ------------------------------------------------------------------ */

void ao_html_glossary(ao_hbuf *b)
{
    ao_hputs(b, "<section id=\"glossary\"><h2>Glossary</h2>\n<p class=\"note\">Per training "
                "step and rank. W: the step's window, C, M, X: the union of its compute, "
                "communication and copy intervals, Mₖ: of one collective kind (DESIGN "
                "§7).</p>\n<dl>\n");
    for (size_t m = 0; m < ao_metric_count(); m++) {
        const ao_metric_def *d = ao_metric(m);
        ao_glossary_entry g = ao_glossary(m);
        ao_hprintf(b, "<dt id=\"g-%s\">%s", d->name, d->name);
        if (d->unit[0]) ao_hprintf(b, " (%s)", d->unit);
        ao_hprintf(b, "</dt><dd>");
        ao_hesc(b, g.plain);
        ao_hputs(b, ". <code>");
        ao_hesc(b, g.definition);
        ao_hprintf(b, "</code>. %s</dd>\n",
                   d->better == AO_BETTER_LOWER    ? "Lower is better."
                   : d->better == AO_BETTER_HIGHER ? "Higher is better."
                                                   : "Neither direction is better.");
    }
    size_t nt;
    const ao_glossary_term *t = ao_glossary_terms(&nt);
    for (size_t i = 0; i < nt; i++) {
        ao_hputs(b, "<dt>decomposition: ");
        ao_hesc(b, t[i].name);
        ao_hputs(b, "</dt><dd>");
        ao_hesc(b, t[i].plain);
        ao_hputs(b, ". <code>");
        ao_hesc(b, t[i].definition);
        ao_hputs(b, "</code>. What to do: ");
        ao_hesc(b, t[i].act);
        ao_hputs(b, ".</dd>\n");
    }
    ao_hputs(b, "</dl>\n</section>\n");
}
