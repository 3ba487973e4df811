#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart/chart.h"
#include "core/error.h"
#include "sweep/chart.h"

#define W  900
#define H  520
#define ML 80
#define MR 220
#define MT 50
#define MB 60

typedef struct layout {
    const ao_sweep_chart_data *d;
    int heatmap;
    char **x, **y; /* categories */
    int nx, ny;
    double *v; /* ny x nx */
    const char *x_name, *y_name;
    double lo, hi;
} layout;

static int index_of(char **list, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(list[i], s) == 0) return i;
    return -1;
}

static int all_numeric(char **list, int n)
{
    for (int i = 0; i < n; i++) {
        char *end;
        strtod(list[i], &end);
        if (!*list[i] || *end) return 0;
    }
    return 1;
}

static int cmp_num(const void *a, const void *b)
{
    double x = strtod(*(char *const *)a, NULL), y = strtod(*(char *const *)b, NULL);
    return x < y ? -1 : x > y;
}

/* The label of row i over the dimensions in dims (k=v, space separated). */
static char *label(const ao_sweep_chart_data *d, int i, const int *dims, int n)
{
    char *s = ao_strdup("");
    for (int k = 0; k < n; k++) {
        char *next = ao_asprintf("%s%s%s=%s", s, k ? " " : "", d->dim_names[dims[k]],
                                 d->cells[i * d->ndims + dims[k]]);
        free(s);
        s = next;
    }
    return s;
}

static int make_layout(const ao_sweep_chart_data *d, layout *L)
{
    memset(L, 0, sizeof *L);
    L->d = d;
    int *vary = ao_calloc((size_t)d->ndims + 1, sizeof *vary), nv = 0, xd = -1;
    for (int k = 0; k < d->ndims; k++) {
        for (int i = 1; i < d->nrows; i++)
            if (strcmp(d->cells[i * d->ndims + k], d->cells[k]) != 0) {
                vary[nv++] = k;
                if (strcmp(d->dim_names[k], "size") == 0 || strcmp(d->dim_names[k], "streams") == 0)
                    xd = k;
                break;
            }
    }
    int finite = 0;
    for (int i = 0; i < d->nrows; i++) finite |= isfinite(d->values[i]);
    if (nv == 0 || !finite) {
        free(vary);
        return 1;
    }
    if (xd < 0) xd = vary[0];
    int rest[64], nr = 0;
    for (int k = 0; k < nv && nr < 64; k++)
        if (vary[k] != xd) rest[nr++] = vary[k];
    /* Stream counts are a line each setting draws (queues), not a grid. */
    L->heatmap = nv == 2 && strcmp(d->dim_names[xd], "streams") != 0;
    L->x_name = d->dim_names[xd];
    L->y_name = nr == 1 ? d->dim_names[rest[0]] : "series";
    L->x = ao_calloc((size_t)d->nrows, sizeof *L->x);
    L->y = ao_calloc((size_t)d->nrows, sizeof *L->y);
    for (int i = 0; i < d->nrows; i++) {
        const char *xv = d->cells[i * d->ndims + xd];
        if (index_of(L->x, L->nx, xv) < 0) L->x[L->nx++] = ao_strdup(xv);
        char *yv = nr == 1 ? ao_strdup(d->cells[i * d->ndims + rest[0]]) : label(d, i, rest, nr);
        if (index_of(L->y, L->ny, yv) < 0)
            L->y[L->ny++] = yv;
        else
            free(yv);
    }
    if (all_numeric(L->x, L->nx)) qsort(L->x, (size_t)L->nx, sizeof *L->x, cmp_num);
    if (L->heatmap && all_numeric(L->y, L->ny)) qsort(L->y, (size_t)L->ny, sizeof *L->y, cmp_num);
    L->v = ao_calloc((size_t)(L->nx * L->ny), sizeof *L->v);
    for (int i = 0; i < L->nx * L->ny; i++) L->v[i] = NAN;
    L->lo = INFINITY;
    L->hi = -INFINITY;
    for (int i = 0; i < d->nrows; i++) {
        if (!isfinite(d->values[i])) continue;
        char *yv = nr == 1 ? ao_strdup(d->cells[i * d->ndims + rest[0]]) : label(d, i, rest, nr);
        int xi = index_of(L->x, L->nx, d->cells[i * d->ndims + xd]);
        int yi = index_of(L->y, L->ny, yv);
        free(yv);
        L->v[yi * L->nx + xi] = d->values[i];
        if (d->values[i] < L->lo) L->lo = d->values[i];
        if (d->values[i] > L->hi) L->hi = d->values[i];
    }
    /* Colours and bars start at the metric's natural zero: a scale over the
     * data's range alone paints 0 and 0.005 as opposite ends. */
    if (L->lo > 0) L->lo = 0;
    if (L->hi <= L->lo) L->hi = L->lo + 1;
    free(vary);
    return 0;
}

static void free_layout(layout *L)
{
    for (int i = 0; i < L->nx; i++) free(L->x[i]);
    for (int i = 0; i < L->ny; i++) free(L->y[i]);
    free(L->x);
    free(L->y);
    free(L->v);
}

/* Dark blue -> teal -> yellow: readable in print and for most colour vision. */
static ao_rgb heat(double t)
{
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    return (ao_rgb){t < 0.5 ? 0.15 + 0.1 * t : 0.2 + 1.5 * (t - 0.5), 0.1 + 0.8 * t,
                    t < 0.5 ? 0.45 + 0.2 * t : 0.55 - 0.9 * (t - 0.5)};
}

static const ao_rgb palette[8] = {{0.12, 0.47, 0.71}, {1.0, 0.5, 0.05},  {0.17, 0.63, 0.17},
                                  {0.84, 0.15, 0.16}, {0.58, 0.4, 0.74}, {0.55, 0.34, 0.29},
                                  {0.89, 0.47, 0.76}, {0.5, 0.5, 0.5}};

/* The x categories' labels, about 12 at most, centred on x0 + (i + shift) * dx. */
static void x_labels(cairo_t *cr, const layout *L, const ao_frame *f, double x0, double dx,
                     double shift)
{
    int step = L->nx > 12 ? (L->nx + 11) / 12 : 1;
    ao_set_rgb(cr, AO_C_TEXT, 1);
    for (int xi = 0; xi < L->nx; xi += step)
        ao_text_at(cr, x0 + (xi + shift) * dx, f->y1 + 12, 0.5, L->x[xi]);
}

static void draw_heatmap(cairo_t *cr, const layout *L, const ao_frame *f)
{
    double cw = (f->x1 - f->x0) / L->nx, ch = (f->y1 - f->y0) / L->ny;
    char buf[64];
    for (int yi = 0; yi < L->ny; yi++)
        for (int xi = 0; xi < L->nx; xi++) {
            double v = L->v[yi * L->nx + xi], t = (v - L->lo) / (L->hi - L->lo);
            ao_set_rgb(cr, isfinite(v) ? heat(t) : (ao_rgb){0.85, 0.85, 0.85}, 1);
            cairo_rectangle(cr, f->x0 + xi * cw, f->y0 + yi * ch, cw - 1, ch - 1);
            cairo_fill(cr);
            if (cw > 40 && ch > 16) {
                snprintf(buf, sizeof buf, isfinite(v) ? "%.3g" : "fail", v);
                double ink = isfinite(v) && t > 0.6 ? 0 : 1;
                cairo_set_source_rgb(cr, ink, ink, ink);
                ao_text_at(cr, f->x0 + (xi + 0.5) * cw, f->y0 + (yi + 0.5) * ch, 0.5, buf);
            }
        }
    ao_set_rgb(cr, AO_C_TEXT, 1);
    for (int yi = 0; yi < L->ny; yi++)
        ao_text_at(cr, f->x0 - 6, f->y0 + (yi + 0.5) * ch, 1, L->y[yi]);
    x_labels(cr, L, f, f->x0, cw, 0.5);
    /* The colour scale. */
    double ph = f->y1 - f->y0;
    for (int i = 0; i < 100; i++) {
        ao_set_rgb(cr, heat(i / 99.0), 1);
        cairo_rectangle(cr, f->x1 + 30, f->y1 - (i + 1) * ph / 100, 16, ph / 100 + 0.5);
        cairo_fill(cr);
    }
    ao_set_rgb(cr, AO_C_TEXT, 1);
    snprintf(buf, sizeof buf, "%.4g", L->hi);
    ao_text_at(cr, f->x1 + 52, f->y0 + 6, 0, buf);
    snprintf(buf, sizeof buf, "%.4g", L->lo);
    ao_text_at(cr, f->x1 + 52, f->y1 - 6, 0, buf);
}

static void draw_lines(cairo_t *cr, const layout *L, const ao_frame *f)
{
    for (int yi = 0; yi < L->ny; yi++) {
        ao_set_rgb(cr, palette[yi % 8], 1);
        cairo_set_line_width(cr, 2);
        int pen = 0;
        for (int xi = 0; xi < L->nx; xi++) {
            double v = L->v[yi * L->nx + xi];
            if (!isfinite(v)) {
                pen = 0;
                continue;
            }
            if (pen)
                cairo_line_to(cr, ao_px(f, xi), ao_py(f, v));
            else
                cairo_move_to(cr, ao_px(f, xi), ao_py(f, v));
            pen = 1;
        }
        cairo_stroke(cr);
        for (int xi = 0; xi < L->nx; xi++) {
            double v = L->v[yi * L->nx + xi];
            if (!isfinite(v)) continue;
            cairo_arc(cr, ao_px(f, xi), ao_py(f, v), 3, 0, 2 * M_PI);
            cairo_fill(cr);
        }
    }
    x_labels(cr, L, f, ao_px(f, 0), L->nx > 1 ? ao_px(f, 1) - ao_px(f, 0) : 0, 0);
    /* The legend: what fits beside the plot. */
    enum { MAX_LEGEND = 24, LEGEND_CHARS = 40 };
    char names[MAX_LEGEND][LEGEND_CHARS];
    ao_legend_item items[MAX_LEGEND];
    int n = L->ny < MAX_LEGEND ? L->ny : MAX_LEGEND;
    for (int yi = 0; yi < n; yi++) {
        snprintf(names[yi], LEGEND_CHARS, "%s", L->y[yi]);
        if (strlen(L->y[yi]) >= LEGEND_CHARS - 10) strcpy(names[yi] + LEGEND_CHARS - 13, "...");
        items[yi] = (ao_legend_item){names[yi], palette[yi % 8], 1};
    }
    ao_draw_legend(cr, f->x1 + 16, f->y0 + 8, items, (size_t)n);
}

static void draw(cairo_t *cr, double w, double h, const void *ctx)
{
    const layout *L = ctx;
    ao_frame f = {.x0 = ML, .y0 = MT, .x1 = w - MR, .y1 = h - MB};
    char title[256];
    snprintf(title, sizeof title, "%s: %s", L->d->title, L->d->metric);
    ao_draw_title(cr, w, title, NULL);
    ao_font(cr, AO_FONT_SIZE, 0);
    if (L->heatmap) {
        draw_heatmap(cr, L, &f);
        f.ax = f.ay = (ao_axis){0, 1, 0};
        ao_draw_axes(cr, &f, L->x_name, L->y_name, 0);
    } else {
        ao_nice_axis(L->lo, L->hi, 5, &f.ay);
        /* One point sits in the middle. */
        f.ax = L->nx > 1 ? (ao_axis){0, L->nx - 1, 0} : (ao_axis){-1, 1, 0};
        ao_draw_axes(cr, &f, L->x_name, L->d->metric, 1);
        draw_lines(cr, L, &f);
    }
}

int ao_sweep_chart_write(const ao_sweep_chart_data *d, const char *png, const char *svg)
{
    layout L;
    if (make_layout(d, &L)) return 1;
    int rc = ao_chart_render(png, svg, W, H, draw, &L) != 0 ? -1 : 0;
    free_layout(&L);
    return rc;
}

const struct ao_sweep_chart ao_sweep_chart_cairo = {.write = ao_sweep_chart_write};
