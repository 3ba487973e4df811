#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/intervals.h"
#include "core/stats.h"
#include "chart/chart.h"
#include "report/charts.h"

/* Series colours; grid and text colours are the shared ones (chart/chart.h). */
static const ao_rgb C_STEP = {0.20, 0.20, 0.20}, C_COMPUTE = {0.16, 0.42, 0.75},
                    C_COMM = {0.93, 0.53, 0.13}, C_EXPOSED = {0.80, 0.15, 0.15},
                    C_COPY = {0.20, 0.63, 0.30}, C_OVERLAP = {0.55, 0.35, 0.75},
                    C_IDLE = {0.70, 0.70, 0.70}, C_OVERLAP_LIGHT = {0.86, 0.81, 0.93};

/* {dir}/{name}.png and .svg. */
static int render(const char *dir, const char *name, double w, double h, ao_draw_fn fn,
                  const void *ctx)
{
    char *png = ao_asprintf("%s/%s.png", dir, name), *svg = ao_asprintf("%s/%s.svg", dir, name);
    int rc = ao_chart_render(png, svg, w, h, fn, ctx);
    free(png);
    free(svg);
    return rc;
}

/* ---- timeline ------------------------------------------------------------------ */

#define TIMELINE_MAX_POINTS 1000

typedef struct series_set {
    size_t nseries; /* rank series, over all runs */
    size_t nbins;
    size_t per_bin;
    double *x;         /* [nseries][nbins] mean step of the bin, NAN when empty */
    double *y[4];      /* [nseries][nbins] per metric */
    const char *label; /* chart title */
} series_set;

static const char *const timeline_metrics[4] = {"step_ms", "compute_ms", "comm_ms",
                                                "exposed_comm_ms"};
static const char *const timeline_names[4] = {"step", "compute", "comm", "exposed comm"};

static ao_rgb timeline_color(int i)
{
    const ao_rgb c[4] = {C_STEP, C_COMPUTE, C_COMM, C_EXPOSED};
    return c[i];
}

double ao_timeline_cap(const double *y, size_t n)
{
    if (n == 0) return INFINITY;
    double p = ao_stats_percentile(y, n, 95);
    return p > 0 ? AO_TIMELINE_CAP_FACTOR * p : INFINITY;
}

static void draw_timeline(cairo_t *cr, double w, double h, const void *ctx)
{
    const series_set *ss = ctx;
    size_t nb = ss->nbins, ns = ss->nseries;
    double xlo = INFINITY, xhi = -INFINITY, ymax = 0;
    double *ys = ao_malloc((4 * ns * nb + 1) * sizeof *ys);
    size_t ny = 0;
    for (size_t i = 0; i < ns * nb; i++) {
        if (isnan(ss->x[i])) continue;
        xlo = fmin(xlo, ss->x[i]);
        xhi = fmax(xhi, ss->x[i]);
        for (int m = 0; m < 4; m++)
            if (!isnan(ss->y[m][i])) ymax = fmax(ymax, ys[ny++] = ss->y[m][i]);
    }
    /* Robust axis: one slow step must not flatten the rest; points above
     * the cap are drawn as marks on the top edge and counted in the title. */
    double cap = ao_timeline_cap(ys, ny);
    ao_legend_item leg[6];
    for (int m = 0; m < 4; m++) leg[m] = (ao_legend_item){timeline_names[m], timeline_color(m), 0};
    leg[4] = (ao_legend_item){"bold: median of ranks", AO_C_TEXT, 0};
    leg[5] = (ao_legend_item){"thin: one rank", C_IDLE, 0};
    ao_frame f;
    ao_int_axis(xlo, xhi, 8, &f.ax); /* steps: 2, 3, 4, never 2.2 */
    ao_nice_axis(0, fmin(ymax, cap), 6, &f.ay);
    size_t nout = 0;
    for (size_t i = 0; i < ny; i++) nout += ys[i] > f.ay.hi;
    free(ys);
    f.x0 = 30 + ao_y_ticks_width(cr, &f.ay) + 10;
    f.x1 = w - ao_legend_width(cr, leg, 6) - 20;
    f.y0 = 56;
    f.y1 = h - 50;
    char title[300], xlabel[128], note[200];
    snprintf(title, sizeof title, "%s: time per step", ss->label);
    snprintf(note, sizeof note,
             "axis clipped near %.1f x the 95th percentile: %zu point(s) above %.4g ms, up to "
             "%.4g ms, marked as triangles on the top edge",
             AO_TIMELINE_CAP_FACTOR, nout, f.ay.hi, ymax);
    ao_draw_title(cr, w, title, nout ? note : NULL);
    if (ss->per_bin > 1)
        snprintf(xlabel, sizeof xlabel, "step (mean of %zu steps per point)", ss->per_bin);
    else
        snprintf(xlabel, sizeof xlabel, "step");
    ao_draw_axes(cr, &f, xlabel, "time (ms)", 1);
    cairo_save(cr);
    cairo_rectangle(cr, f.x0, f.y0, f.x1 - f.x0, f.y1 - f.y0);
    cairo_clip(cr);
    double *med = ao_malloc((ns + 1) * sizeof *med);
    for (int m = 0; m < 4; m++) {
        cairo_set_line_width(cr, 0.8);
        ao_set_rgb(cr, timeline_color(m), 0.35);
        for (size_t s = 0; s < ns; s++) {
            int pen = 0;
            for (size_t b = 0; b < nb; b++) {
                double x = ss->x[s * nb + b], y = ss->y[m][s * nb + b];
                if (isnan(x) || isnan(y)) {
                    pen = 0;
                    continue;
                }
                if (pen)
                    cairo_line_to(cr, ao_px(&f, x), ao_py(&f, y));
                else
                    cairo_move_to(cr, ao_px(&f, x), ao_py(&f, y));
                pen = 1;
            }
            cairo_stroke(cr);
        }
        /* the median over ranks, at the mean x of the bin */
        cairo_set_line_width(cr, 2.2);
        ao_set_rgb(cr, timeline_color(m), 1);
        int pen = 0;
        for (size_t b = 0; b < nb; b++) {
            size_t k = 0;
            double xs = 0;
            for (size_t s = 0; s < ns; s++) {
                if (isnan(ss->x[s * nb + b]) || isnan(ss->y[m][s * nb + b])) continue;
                med[k++] = ss->y[m][s * nb + b];
                xs += ss->x[s * nb + b];
            }
            if (k == 0) {
                pen = 0;
                continue;
            }
            double x = ao_px(&f, xs / (double)k), y = ao_py(&f, ao_stats_median(med, k));
            if (pen)
                cairo_line_to(cr, x, y);
            else
                cairo_move_to(cr, x, y);
            pen = 1;
        }
        cairo_stroke(cr);
    }
    free(med);
    cairo_restore(cr);
    for (int m = 0; m < 4 && nout; m++) {
        ao_set_rgb(cr, timeline_color(m), 1);
        for (size_t i = 0; i < ns * nb; i++) {
            double x = ss->x[i], y = ss->y[m][i];
            if (isnan(x) || !(y > f.ay.hi)) continue;
            double px = ao_px(&f, x);
            cairo_move_to(cr, px, f.y0 - 1);
            cairo_line_to(cr, px - 4, f.y0 + 6);
            cairo_line_to(cr, px + 4, f.y0 + 6);
            cairo_close_path(cr);
            cairo_fill(cr);
        }
    }
    ao_draw_legend(cr, f.x1 + 20, f.y0 + 8, leg, 6);
}

int ao_chart_timeline(const char *dir, const char *label, const ao_run_data *runs, size_t nruns)
{
    series_set ss = {0};
    ss.label = label;
    size_t maxn = 0;
    for (size_t r = 0; r < nruns; r++) {
        for (int k = 0; k < runs[r].nranks; k++) {
            ss.nseries++;
            if (runs[r].ranks[k].n > maxn) maxn = runs[r].ranks[k].n;
        }
    }
    ss.per_bin =
        maxn > TIMELINE_MAX_POINTS ? (maxn + TIMELINE_MAX_POINTS - 1) / TIMELINE_MAX_POINTS : 1;
    ss.nbins = maxn ? (maxn + ss.per_bin - 1) / ss.per_bin : 1;
    size_t cells = ss.nseries * ss.nbins + 1;
    ss.x = ao_malloc(cells * sizeof *ss.x);
    int mi[4];
    for (int m = 0; m < 4; m++) {
        ss.y[m] = ao_malloc(cells * sizeof *ss.y[m]);
        mi[m] = ao_metric_find(timeline_metrics[m]);
    }
    size_t nm = ao_metric_count(), s = 0;
    for (size_t r = 0; r < nruns; r++) {
        for (int k = 0; k < runs[r].nranks; k++, s++) {
            const ao_rank_data *rd = &runs[r].ranks[k];
            for (size_t b = 0; b < ss.nbins; b++) {
                size_t lo = b * ss.per_bin, hi = lo + ss.per_bin;
                if (hi > rd->n) hi = rd->n;
                double xs = 0, ys[4] = {0}, cnt[4] = {0};
                for (size_t i = lo; i < hi; i++) {
                    xs += (double)rd->steps[i];
                    for (int m = 0; m < 4; m++) {
                        double v = rd->rows[i * nm + (size_t)mi[m]];
                        if (isnan(v)) continue;
                        ys[m] += v;
                        cnt[m]++;
                    }
                }
                ss.x[s * ss.nbins + b] = hi > lo ? xs / (double)(hi - lo) : NAN;
                for (int m = 0; m < 4; m++)
                    ss.y[m][s * ss.nbins + b] = cnt[m] ? ys[m] / cnt[m] : NAN;
            }
        }
    }
    char *name = ao_asprintf("%s_timeline", label);
    int rc = render(dir, name, 1000, 420, draw_timeline, &ss);
    free(name);
    free(ss.x);
    for (int m = 0; m < 4; m++) free(ss.y[m]);
    return rc;
}

/* ---- streams --------------------------------------------------------------------- */

typedef struct streams_ctx {
    const char *label;
    int nranks;
    const ao_iter_record **recs; /* [nranks] the chosen step per rank, NULL: degraded */
    const ao_run_data *run;      /* degraded view: busy medians */
    long long step;
} streams_ctx;

static ao_rgb class_color(int cls)
{
    return cls == AO_CLASS_COMPUTE ? C_COMPUTE : cls == AO_CLASS_COMM ? C_COMM : C_COPY;
}

size_t ao_streams_shaded(const ao_iter_record *r, ao_ival **out)
{
    size_t n = r->nops;
    ao_ival *c = ao_malloc((2 * n + 1) * sizeof *c), *m = c + n;
    ao_ival *x = ao_malloc((2 * n + 1) * sizeof *x);
    size_t nc = 0, nmm = 0;
    for (size_t i = 0; i < n; i++) {
        ao_ival iv = {r->ops[i].start_us, r->ops[i].end_us};
        if (r->ops[i].cls == AO_CLASS_COMPUTE) c[nc++] = iv;
        if (r->ops[i].cls == AO_CLASS_COMM) m[nmm++] = iv;
    }
    nc = ao_iv_normalize(c, nc);
    nmm = ao_iv_normalize(m, nmm);
    size_t nx = ao_iv_intersect(c, nc, m, nmm, x);
    free(c);
    *out = x;
    return nx;
}

int ao_streams_lanes(const ao_iter_record *const *recs, int nranks, int used[AO_NSTREAMS])
{
    int n = 0;
    for (int s = 0; s < AO_NSTREAMS; s++) used[s] = 0;
    for (int k = 0; k < nranks; k++)
        for (size_t i = 0; i < recs[k]->nops; i++) used[recs[k]->ops[i].stream] = 1;
    for (int s = 0; s < AO_NSTREAMS; s++) n += used[s];
    return n;
}

/* Shade |C ∩ M| of one rank's ops between y0 and y1. */
static void shade_overlap(cairo_t *cr, const ao_frame *f, const ao_iter_record *r, double t0,
                          double y0, double y1)
{
    ao_ival *x;
    size_t nx = ao_streams_shaded(r, &x);
    ao_set_rgb(cr, C_OVERLAP, 0.18);
    for (size_t i = 0; i < nx; i++) {
        double a = ao_px(f, (x[i].start - t0) / 1000), b = ao_px(f, (x[i].end - t0) / 1000);
        cairo_rectangle(cr, a, y0, b - a, y1 - y0);
        cairo_fill(cr);
    }
    free(x);
}

#define LANE_H   16.0
#define LANE_GAP 4.0
#define RANK_GAP 12.0

/* An op's unit and kind inside its bar when they fit ("u3 allgather",
 * "u3 fwd" from the op's name for compute). */
static void op_label(cairo_t *cr, const ao_op *op, double a, double b, double y)
{
    char text[96];
    const char *what = op->kind != AO_KIND_NONE ? ao_coll_kind_name((ao_coll_kind)op->kind)
                       : op->name               ? op->name
                                                : "";
    if (op->unit >= 0)
        snprintf(text, sizeof text, "u%d %s", op->unit, what);
    else
        snprintf(text, sizeof text, "%s", what);
    ao_font(cr, AO_FONT_SIZE - 3, 0);
    if (!text[0] || ao_text_width(cr, text) + 4 > b - a) return;
    cairo_set_source_rgb(cr, 1, 1, 1);
    ao_text_at(cr, (a + b) / 2, y + LANE_H / 2, 0.5, text);
}

static void draw_streams(cairo_t *cr, double w, double h, const void *vctx)
{
    const streams_ctx *sc = vctx;
    int used[AO_NSTREAMS] = {0}, nlanes = 0;
    double t0[64], tmax = 0;
    double busy[64][AO_NSTREAMS];
    int nr = sc->nranks > 64 ? 64 : sc->nranks;
    if (sc->recs) {
        ao_streams_lanes(sc->recs, nr, used);
        /* Each rank from its own first op: ranks' clocks have their own
         * anchors, so their absolute times are not comparable. */
        for (int k = 0; k < nr; k++) {
            const ao_iter_record *r = sc->recs[k];
            t0[k] = INFINITY;
            for (size_t i = 0; i < r->nops; i++) t0[k] = fmin(t0[k], r->ops[i].start_us);
            for (size_t i = 0; i < r->nops; i++)
                tmax = fmax(tmax, (r->ops[i].end_us - t0[k]) / 1000);
        }
    } else {
        int first = ao_metric_find("busy_compute_ms");
        for (int k = 0; k < nr; k++) {
            const ao_rank_data *rd = &sc->run->ranks[k];
            double *col = ao_malloc((rd->n + 1) * sizeof *col);
            for (int s = 0; s < AO_NSTREAMS; s++) {
                ao_rank_column(rd, (size_t)(first + s), col);
                busy[k][s] = ao_stats_median(col, rd->n);
                if (busy[k][s] > 0) {
                    used[s] = 1;
                    tmax = fmax(tmax, busy[k][s]);
                }
            }
            free(col);
        }
    }
    for (int s = 0; s < AO_NSTREAMS; s++) nlanes += used[s];
    ao_legend_item leg[4] = {{"compute", C_COMPUTE, 1},
                             {"communication", C_COMM, 1},
                             {"copy", C_COPY, 1},
                             {"overlap (compute and comm)", C_OVERLAP_LIGHT, 1}};
    size_t nleg = sc->recs ? 4 : 3;
    ao_frame f;
    ao_nice_axis(0, tmax > 0 ? tmax : 1, 8, &f.ax);
    f.ay = (ao_axis){0, 1, 1};
    ao_font(cr, AO_FONT_SIZE, 0);
    double lw = 0;
    char lane[96];
    for (int s = 0; s < AO_NSTREAMS; s++) {
        snprintf(lane, sizeof lane, "rank %d %s", nr - 1, ao_stream_id_name((ao_stream_id)s));
        lw = fmax(lw, ao_text_width(cr, lane));
    }
    f.x0 = lw + 20;
    f.x1 = w - ao_legend_width(cr, leg, nleg) - 20;
    f.y0 = 56;
    f.y1 = h - 50;
    char title[300];
    if (sc->recs)
        snprintf(title, sizeof title, "%s: streams of step %lld (median profiled step)", sc->label,
                 sc->step);
    else
        snprintf(title, sizeof title, "%s: busy time per stream (median step)", sc->label);
    ao_draw_title(cr, w, title,
                  sc->recs ? NULL
                           : "degraded view: no counted step has per-op intervals; bars are busy "
                             "totals. For lanes: aorta train --override profiling.enabled=true");
    ao_draw_axes(cr, &f,
                 sc->recs ? "time from the rank's first op of the step (ms)" : "busy time (ms)",
                 NULL, 0);
    double y = f.y0 + 8;
    for (int k = 0; k < nr; k++) {
        double ytop = y;
        double ybot = y + nlanes * (LANE_H + LANE_GAP) - LANE_GAP;
        if (sc->recs) shade_overlap(cr, &f, sc->recs[k], t0[k], ytop - 2, ybot + 2);
        for (int s = 0; s < AO_NSTREAMS; s++) {
            if (!used[s]) continue;
            ao_set_rgb(cr, AO_C_TEXT, 1);
            ao_font(cr, AO_FONT_SIZE, 0);
            snprintf(lane, sizeof lane, "rank %d %s", sc->recs ? sc->recs[k]->rank : k,
                     ao_stream_id_name((ao_stream_id)s));
            ao_text_at(cr, f.x0 - 6, y + LANE_H / 2, 1, lane);
            if (sc->recs) {
                const ao_iter_record *r = sc->recs[k];
                for (size_t i = 0; i < r->nops; i++) {
                    const ao_op *op = &r->ops[i];
                    if (op->stream != s) continue;
                    double a = ao_px(&f, (op->start_us - t0[k]) / 1000);
                    double b = ao_px(&f, (op->end_us - t0[k]) / 1000);
                    ao_set_rgb(cr, class_color(op->cls), 0.9);
                    cairo_rectangle(cr, a, y, fmax(b - a, 0.8), LANE_H);
                    cairo_fill(cr);
                    op_label(cr, op, a, b, y);
                }
            } else if (busy[k][s] > 0) {
                ao_rgb c = s == AO_STREAM_COMPUTE ? C_COMPUTE
                           : s == AO_STREAM_H2D   ? C_COPY
                                                  : C_COMM;
                ao_set_rgb(cr, c, 0.9);
                cairo_rectangle(cr, f.x0, y, ao_px(&f, busy[k][s]) - f.x0, LANE_H);
                cairo_fill(cr);
            }
            y += LANE_H + LANE_GAP;
        }
        y = ybot + RANK_GAP;
    }
    ao_draw_legend(cr, f.x1 + 20, f.y0 + 8, leg, nleg);
}

int ao_chart_streams(const char *dir, const char *label, const ao_run_data *runs, size_t nruns)
{
    if (nruns == 0) return 0;
    const ao_run_data *run = &runs[0];
    int nr = run->nranks > 64 ? 64 : run->nranks;
    streams_ctx sc = {label, nr, NULL, run, -1};
    sc.step = ao_run_median_profiled_step(run);
    const ao_iter_record **recs = NULL;
    if (sc.step >= 0) {
        recs = ao_malloc((size_t)nr * sizeof *recs);
        for (int k = 0; k < nr; k++) recs[k] = ao_run_profiled_step(&run->ranks[k], sc.step);
        sc.recs = recs;
    }
    /* lanes: streams with an op in the chosen step (or busy time) on any rank */
    int used[AO_NSTREAMS] = {0}, nlanes = 0;
    if (recs) {
        nlanes = ao_streams_lanes(recs, nr, used);
    } else {
        for (int k = 0; k < nr; k++)
            for (int s = 0; s < AO_NSTREAMS; s++)
                used[s] |= run->ranks[k].n > 0 &&
                           run->ranks[k].rows[(size_t)(ao_metric_find("busy_compute_ms") + s)] > 0;
        for (int s = 0; s < AO_NSTREAMS; s++) nlanes += used[s];
    }
    double h = 120 + nr * (nlanes * (LANE_H + LANE_GAP) + RANK_GAP);
    char *name = ao_asprintf("%s_streams", label);
    int rc = render(dir, name, 1000, h, draw_streams, &sc);
    free(name);
    free(recs);
    return rc;
}

/* ---- overlap breakdown -------------------------------------------------------------- */

typedef struct breakdown_ctx {
    const ao_summary *s;
    size_t n;
} breakdown_ctx;

#define NPARTS AO_BREAKDOWN_PARTS

/* The summary's split of the median step: the parts add up to it. */
static void breakdown_parts(const ao_summary *s, double part[NPARTS])
{
    for (int i = 0; i < NPARTS; i++) part[i] = s->breakdown_ms[i];
}

static void draw_breakdown(cairo_t *cr, double w, double h, const void *vctx)
{
    const breakdown_ctx *bc = vctx;
    ao_legend_item leg[NPARTS] = {{ao_breakdown_names[0], C_OVERLAP, 1},
                                  {ao_breakdown_names[1], C_EXPOSED, 1},
                                  {ao_breakdown_names[2], C_COMPUTE, 1},
                                  {ao_breakdown_names[3], C_IDLE, 1},
                                  {ao_breakdown_names[4], C_COPY, 1}};
    double tmax = 0, lw = 0;
    ao_font(cr, AO_FONT_SIZE, 0);
    for (size_t i = 0; i < bc->n; i++) {
        double p[NPARTS], sum = 0;
        breakdown_parts(&bc->s[i], p);
        for (int j = 0; j < NPARTS; j++) sum += p[j];
        tmax = fmax(tmax, sum);
        lw = fmax(lw, ao_text_width(cr, bc->s[i].label));
    }
    ao_frame f;
    ao_nice_axis(0, tmax > 0 ? tmax : 1, 8, &f.ax);
    f.ay = (ao_axis){0, 1, 1};
    f.x0 = lw + 20;
    f.x1 = w - ao_legend_width(cr, leg, NPARTS) - 20;
    f.y0 = 50;
    f.y1 = h - 50;
    ao_draw_title(
        cr, w, "Where the median step's time goes",
        "each part's share of all steps' time, times the median step (" AO_STEP_MS_DEFINITION
        "): the bar is the median step");
    ao_draw_axes(cr, &f, "time per step (ms)", NULL, 0);
    double row = (f.y1 - f.y0) / (double)bc->n, bar = fmin(row * 0.6, 40);
    const ao_rgb colors[NPARTS] = {C_OVERLAP, C_EXPOSED, C_COMPUTE, C_IDLE, C_COPY};
    for (size_t i = 0; i < bc->n; i++) {
        double p[NPARTS], x = 0, yc = f.y0 + row * ((double)i + 0.5);
        breakdown_parts(&bc->s[i], p);
        for (int j = 0; j < NPARTS; j++) {
            ao_set_rgb(cr, colors[j], 0.9);
            cairo_rectangle(cr, ao_px(&f, x), yc - bar / 2, ao_px(&f, x + p[j]) - ao_px(&f, x),
                            bar);
            cairo_fill(cr);
            x += p[j];
        }
        ao_set_rgb(cr, AO_C_TEXT, 1);
        ao_font(cr, AO_FONT_SIZE, 0);
        ao_text_at(cr, f.x0 - 6, yc, 1, bc->s[i].label);
    }
    ao_draw_legend(cr, f.x1 + 20, f.y0 + 8, leg, NPARTS);
}

int ao_chart_overlap_breakdown(const char *dir, const ao_summary *sums, size_t n)
{
    if (n == 0) return 0;
    breakdown_ctx bc = {sums, n};
    return render(dir, "overlap_breakdown", 1000, 150 + 60 * (double)n, draw_breakdown, &bc);
}

/* ---- comparison ---------------------------------------------------------------------- */

typedef struct cmp_row {
    const char *name;
    double pct, lo, hi;
    ao_verdict v;
} cmp_row;

typedef struct cmp_ctx {
    const ao_comparison *c;
    cmp_row *rows;
    size_t n;
} cmp_ctx;

static ao_rgb verdict_color(ao_verdict v)
{
    const ao_rgb better = {0.15, 0.55, 0.25}, worse = {0.80, 0.15, 0.15}, diff = {0.85, 0.50, 0.10};
    return v == AO_VERDICT_BETTER      ? better
           : v == AO_VERDICT_WORSE     ? worse
           : v == AO_VERDICT_DIFFERENT ? diff
                                       : C_IDLE;
}

/* A metric whose reference is near zero can change by 900x and flatten
 * every other row: the axis stops at CMP_CAP_FACTOR x the median row's
 * reach (the end of its CI farthest from zero), 10 % at least; a row beyond
 * is cut at the edge with an arrow head and its change written there. */
#define CMP_CAP_FACTOR 4.0

double ao_comparison_cap(const double *lo, const double *hi, size_t n)
{
    if (n == 0) return INFINITY;
    double *reach = ao_malloc(n * sizeof *reach);
    for (size_t i = 0; i < n; i++) reach[i] = fmax(fabs(lo[i]), fabs(hi[i]));
    double cap = fmax(10, CMP_CAP_FACTOR * ao_stats_percentile(reach, n, 50));
    free(reach);
    return cap;
}

/* An arrow head at the plot's edge x pointing outward (dir +1 right, -1 left). */
static void edge_arrow(cairo_t *cr, double x, double yc, int dir)
{
    cairo_move_to(cr, x, yc);
    cairo_line_to(cr, x - dir * 9, yc - 6);
    cairo_line_to(cr, x - dir * 9, yc + 6);
    cairo_close_path(cr);
    cairo_fill(cr);
}

static void draw_comparison(cairo_t *cr, double w, double h, const void *vctx)
{
    const cmp_ctx *cc = vctx;
    double lo = 0, hi = 0, lw = 0, vw = 0;
    double *los = ao_malloc((cc->n + 1) * sizeof *los), *his = ao_malloc((cc->n + 1) * sizeof *his);
    for (size_t i = 0; i < cc->n; i++) {
        los[i] = cc->rows[i].lo;
        his[i] = cc->rows[i].hi;
    }
    double cap = ao_comparison_cap(los, his, cc->n);
    free(los);
    free(his);
    size_t nout = 0;
    ao_font(cr, AO_FONT_SIZE, 0);
    for (size_t i = 0; i < cc->n; i++) {
        const cmp_row *r = &cc->rows[i];
        nout += r->lo < -cap || r->hi > cap;
        lo = fmin(lo, fmax(r->lo, -cap));
        hi = fmax(hi, fmin(r->hi, cap));
        lw = fmax(lw, ao_text_width(cr, r->name));
        vw = fmax(vw, ao_text_width(cr, ao_verdict_name(r->v)));
    }
    ao_legend_item leg[4] = {{"better", verdict_color(AO_VERDICT_BETTER), 1},
                             {"worse", verdict_color(AO_VERDICT_WORSE), 1},
                             {"no significant difference", verdict_color(AO_VERDICT_SAME), 1},
                             {"different (no direction)", verdict_color(AO_VERDICT_DIFFERENT), 1}};
    ao_frame f;
    ao_nice_axis(lo, hi, 8, &f.ax);
    f.ay = (ao_axis){0, 1, 1};
    f.x0 = lw + 20;
    f.x1 = w - fmax(ao_legend_width(cr, leg, 4), vw + 10) - 20;
    f.y0 = 50;
    f.y1 = h - 50;
    char title[400];
    snprintf(title, sizeof title, "%s vs %s (reference): change of the median, 95%% CI",
             cc->c->candidate, cc->c->reference);
    char note[160];
    snprintf(note, sizeof note,
             "axis clipped at %.0f %% .. %.0f %%: %zu metric(s) beyond, cut with an arrow and "
             "their change written",
             f.ax.lo, f.ax.hi, nout);
    ao_draw_title(cr, w, title, nout ? note : NULL);
    ao_draw_axes(cr, &f, "change vs reference (%)", NULL, 0);
    ao_set_rgb(cr, AO_C_TEXT, 1);
    cairo_set_line_width(cr, 1.2);
    cairo_move_to(cr, ao_px(&f, 0), f.y0);
    cairo_line_to(cr, ao_px(&f, 0), f.y1);
    cairo_stroke(cr);
    double row = (f.y1 - f.y0) / (double)(cc->n ? cc->n : 1);
    for (size_t i = 0; i < cc->n; i++) {
        const cmp_row *r = &cc->rows[i];
        double yc = f.y0 + row * ((double)i + 0.5);
        double rlo = fmax(r->lo, f.ax.lo), rhi = fmin(r->hi, f.ax.hi);
        ao_set_rgb(cr, verdict_color(r->v), 1);
        cairo_set_line_width(cr, 2);
        cairo_move_to(cr, ao_px(&f, rlo), yc);
        cairo_line_to(cr, ao_px(&f, rhi), yc);
        for (int e = 0; e < 2; e++) { /* whiskers, where the CI ends inside the axis */
            double v = e ? r->hi : r->lo, x = ao_px(&f, e ? rhi : rlo);
            if (v < f.ax.lo || v > f.ax.hi) continue;
            cairo_move_to(cr, x, yc - 5);
            cairo_line_to(cr, x, yc + 5);
        }
        cairo_stroke(cr);
        if (r->hi > f.ax.hi) edge_arrow(cr, f.x1, yc, 1);
        if (r->lo < f.ax.lo) edge_arrow(cr, f.x0, yc, -1);
        if (r->pct >= f.ax.lo && r->pct <= f.ax.hi) {
            cairo_arc(cr, ao_px(&f, r->pct), yc, 4.5, 0, 2 * M_PI);
            cairo_fill(cr);
        }
        if (r->lo < f.ax.lo || r->hi > f.ax.hi) {
            char pct[48];
            snprintf(pct, sizeof pct, "%+.4g %%", r->pct);
            int right = r->hi > f.ax.hi;
            ao_text_at(cr, right ? f.x1 - 14 : f.x0 + 14, yc - 9, right ? 1 : 0, pct);
        }
        ao_set_rgb(cr, AO_C_TEXT, 1);
        ao_font(cr, AO_FONT_SIZE, 0);
        ao_text_at(cr, f.x0 - 6, yc, 1, r->name);
    }
    ao_draw_legend(cr, f.x1 + 20, f.y0 + 8, leg, 4);
}

int ao_chart_comparison(const char *dir, const ao_comparison *c)
{
    cmp_ctx cc = {c, ao_calloc(c->nmetrics + 1, sizeof(cmp_row)), 0};
    for (size_t i = 0; i < c->nmetrics; i++) {
        const ao_metric_cmp *m = &c->metrics[i];
        if (m->verdict == AO_VERDICT_NA || !(fabs(m->ref_median) > 0)) continue;
        double s = 100 / fabs(m->ref_median);
        cc.rows[cc.n++] = (cmp_row){ao_metric(m->metric)->name, m->diff * s, m->ci.lo * s,
                                    m->ci.hi * s, m->verdict};
    }
    char *name = ao_asprintf("comparison_%s", c->candidate);
    int rc = render(dir, name, 1000, 110 + 28 * (double)(cc.n ? cc.n : 1), draw_comparison, &cc);
    free(name);
    free(cc.rows);
    return rc;
}

/* ---- a metric across configs ----------------------------------------------------------- */

typedef struct configs_ctx {
    size_t metric;
    const ao_config_value *v;
    size_t n;
} configs_ctx;

#define CONFIG_ROW 26.0

/* "12.35 (1.103x)", "704332 (0.939x)": the value as the page's tables print it. */
static void value_text(char *buf, size_t n, const ao_config_value *v)
{
    double x = v->median;
    int dec = fabs(x) >= 1e4 ? 0 : fabs(x) >= 100 ? 1 : 3;
    snprintf(buf, n, "%.*f (%.3fx)", dec, x, v->ratio);
}

static void draw_configs(cairo_t *cr, double w, double h, const void *vctx)
{
    const configs_ctx *cc = vctx;
    const ao_metric_def *d = ao_metric(cc->metric);
    double lo = 0, hi = 0, lw = 0, vw = 0, *med = ao_malloc((cc->n + 1) * sizeof *med);
    size_t nmed = 0;
    char text[200];
    ao_font(cr, AO_FONT_SIZE, 0);
    for (size_t i = 0; i < cc->n; i++) {
        const ao_config_value *v = &cc->v[i];
        snprintf(text, sizeof text, "%s%s", v->label, v->reference ? " (reference)" : "");
        ao_font(cr, AO_FONT_SIZE, v->reference); /* drawn bold */
        lw = fmax(lw, ao_text_width(cr, text));
        ao_font(cr, AO_FONT_SIZE, 0);
        if (isnan(v->median)) continue;
        med[nmed++] = v->median;
        lo = fmin(lo, fmin(v->median, isnan(v->ci.lo) ? v->median : v->ci.lo));
        hi = fmax(hi, fmax(v->median, isnan(v->ci.hi) ? v->median : v->ci.hi));
        value_text(text, sizeof text, v);
        vw = fmax(vw, ao_text_width(cr, text));
    }
    /* Robust axis, as the time-per-step chart: a config far above the rest
     * is cut at the edge and marked, its value still printed. */
    double cap = ao_timeline_cap(med, nmed);
    free(med);
    ao_legend_item leg[5] = {{"better", verdict_color(AO_VERDICT_BETTER), 1},
                             {"worse", verdict_color(AO_VERDICT_WORSE), 1},
                             {"no significant difference", verdict_color(AO_VERDICT_SAME), 1},
                             {"different (no direction)", verdict_color(AO_VERDICT_DIFFERENT), 1},
                             {"reference", C_STEP, 1}};
    ao_frame f;
    hi = fmin(hi, cap);
    ao_nice_axis(lo, hi > lo ? hi : lo + 1, 8, &f.ax); /* all zero: still from zero */
    f.ay = (ao_axis){0, 1, 1};
    f.x0 = lw + 20;
    f.x1 = w - ao_legend_width(cr, leg, 5) - vw - 40;
    f.y0 = 50;
    f.y1 = h - 50;
    char title[300], xlabel[200];
    snprintf(title, sizeof title, "%s across configs: median and 95%% CI", d->name);
    snprintf(xlabel, sizeof xlabel, "%s%s%s%s", d->name, d->unit[0] ? " (" : "", d->unit,
             d->unit[0] ? ")" : "");
    ao_draw_title(cr, w, title, NULL);
    ao_draw_axes(cr, &f, xlabel, NULL, 0);
    double x0 = ao_px(&f, fmax(f.ax.lo, 0)), ref_x = NAN;
    for (size_t i = 0; i < cc->n; i++) {
        const ao_config_value *v = &cc->v[i];
        double yc = f.y0 + CONFIG_ROW * ((double)i + 0.5), bar = CONFIG_ROW * 0.6;
        ao_set_rgb(cr, AO_C_TEXT, 1);
        ao_font(cr, AO_FONT_SIZE, v->reference);
        snprintf(text, sizeof text, "%s%s", v->label, v->reference ? " (reference)" : "");
        ao_text_at(cr, f.x0 - 6, yc, 1, text);
        if (isnan(v->median)) {
            ao_font(cr, AO_FONT_SIZE, 0);
            ao_text_at(cr, f.x1 + 8, yc, 0, "no value");
            continue;
        }
        double x = ao_px(&f, fmin(v->median, f.ax.hi));
        if (v->reference) ref_x = x;
        ao_set_rgb(cr, v->reference ? C_STEP : verdict_color(v->verdict), 0.85);
        /* at least a hairline: a zero is a value, unlike "no value" */
        cairo_rectangle(cr, fmin(x0, x), yc - bar / 2, fmax(fabs(x - x0), 1), bar);
        cairo_fill(cr);
        if (v->median > f.ax.hi) { /* cut at the edge: an arrow head */
            cairo_move_to(cr, f.x1 + 7, yc);
            cairo_line_to(cr, f.x1, yc - bar / 2);
            cairo_line_to(cr, f.x1, yc + bar / 2);
            cairo_close_path(cr);
            cairo_fill(cr);
        }
        if (!isnan(v->ci.lo) && !isnan(v->ci.hi)) {
            double a = ao_px(&f, fmax(v->ci.lo, f.ax.lo)), b = ao_px(&f, fmin(v->ci.hi, f.ax.hi));
            ao_set_rgb(cr, AO_C_TEXT, 1);
            cairo_set_line_width(cr, 1.5);
            cairo_move_to(cr, a, yc);
            cairo_line_to(cr, b, yc);
            cairo_move_to(cr, a, yc - 5);
            cairo_line_to(cr, a, yc + 5);
            cairo_move_to(cr, b, yc - 5);
            cairo_line_to(cr, b, yc + 5);
            cairo_stroke(cr);
        }
        ao_set_rgb(cr, AO_C_TEXT, 1);
        ao_font(cr, AO_FONT_SIZE, 0);
        value_text(text, sizeof text, v);
        ao_text_at(cr, f.x1 + 12, yc, 0, text);
    }
    if (!isnan(ref_x)) { /* the reference's value through every row */
        ao_set_rgb(cr, C_STEP, 1);
        cairo_set_line_width(cr, 1);
        const double dash[2] = {4, 3};
        cairo_set_dash(cr, dash, 2, 0);
        cairo_move_to(cr, ref_x, f.y0);
        cairo_line_to(cr, ref_x, f.y1);
        cairo_stroke(cr);
        cairo_set_dash(cr, NULL, 0, 0);
    }
    ao_draw_legend(cr, w - ao_legend_width(cr, leg, 5) - 10, f.y0 + 8, leg, 5);
}

int ao_chart_configs(const char *dir, size_t metric, const ao_config_value *v, size_t n)
{
    configs_ctx cc = {metric, v, n};
    char *name = ao_asprintf("configs_%s", ao_metric(metric)->name);
    int rc = render(dir, name, 1000, 100 + CONFIG_ROW * (double)(n ? n : 1), draw_configs, &cc);
    free(name);
    return rc;
}

const struct ao_report_charts ao_report_charts_cairo = {
    .timeline = ao_chart_timeline,
    .streams = ao_chart_streams,
    .overlap_breakdown = ao_chart_overlap_breakdown,
    .comparison = ao_chart_comparison,
    .configs = ao_chart_configs,
};
