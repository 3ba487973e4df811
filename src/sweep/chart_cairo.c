#include <cairo-svg.h>
#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (!L->heatmap && L->lo > 0) L->lo = 0;
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

static void text_at(cairo_t *cr, double x, double y, const char *s, double align)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - align * e.width, y);
    cairo_show_text(cr, s);
}

static void color(double t, double *r, double *g, double *b)
{
    /* Dark blue -> teal -> yellow: readable in print and for most colour vision. */
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    *r = t < 0.5 ? 0.15 + 0.1 * t : 0.2 + 1.5 * (t - 0.5);
    *g = 0.1 + 0.8 * t;
    *b = t < 0.5 ? 0.45 + 0.2 * t : 0.55 - 0.9 * (t - 0.5);
}

static const double palette[][3] = {{0.12, 0.47, 0.71}, {1.0, 0.5, 0.05},  {0.17, 0.63, 0.17},
                                    {0.84, 0.15, 0.16}, {0.58, 0.4, 0.74}, {0.55, 0.34, 0.29},
                                    {0.89, 0.47, 0.76}, {0.5, 0.5, 0.5}};

static void draw(cairo_t *cr, const layout *L)
{
    const ao_sweep_chart_data *d = L->d;
    double pw = W - ML - MR, ph = H - MT - MB;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 15);
    char title[256];
    snprintf(title, sizeof title, "%s: %s", d->title, d->metric);
    text_at(cr, W / 2.0, 28, title, 0.5);
    cairo_set_font_size(cr, 11);
    char buf[64];
    int step = L->nx > 12 ? (L->nx + 11) / 12 : 1;
    if (L->heatmap) {
        double cw = pw / L->nx, ch = ph / L->ny;
        for (int yi = 0; yi < L->ny; yi++)
            for (int xi = 0; xi < L->nx; xi++) {
                double v = L->v[yi * L->nx + xi], r = 0.85, g = 0.85, b = 0.85;
                if (isfinite(v)) color((v - L->lo) / (L->hi - L->lo), &r, &g, &b);
                cairo_set_source_rgb(cr, r, g, b);
                cairo_rectangle(cr, ML + xi * cw, MT + yi * ch, cw - 1, ch - 1);
                cairo_fill(cr);
                if (cw > 40 && ch > 16) {
                    snprintf(buf, sizeof buf, isfinite(v) ? "%.3g" : "fail", v);
                    cairo_set_source_rgb(
                        cr, isfinite(v) && (v - L->lo) / (L->hi - L->lo) > 0.6 ? 0 : 1,
                        isfinite(v) && (v - L->lo) / (L->hi - L->lo) > 0.6 ? 0 : 1,
                        isfinite(v) && (v - L->lo) / (L->hi - L->lo) > 0.6 ? 0 : 1);
                    text_at(cr, ML + (xi + 0.5) * cw, MT + (yi + 0.5) * ch + 4, buf, 0.5);
                }
            }
        cairo_set_source_rgb(cr, 0, 0, 0);
        for (int yi = 0; yi < L->ny; yi++)
            text_at(cr, ML - 6, MT + (yi + 0.5) * ch + 4, L->y[yi], 1);
        for (int xi = 0; xi < L->nx; xi += step)
            text_at(cr, ML + (xi + 0.5) * cw, MT + ph + 16, L->x[xi], 0.5);
        /* The colour scale. */
        for (int i = 0; i < 100; i++) {
            double r, g, b;
            color(i / 99.0, &r, &g, &b);
            cairo_set_source_rgb(cr, r, g, b);
            cairo_rectangle(cr, W - MR + 30, MT + ph - (i + 1) * ph / 100, 16, ph / 100 + 0.5);
            cairo_fill(cr);
        }
        cairo_set_source_rgb(cr, 0, 0, 0);
        snprintf(buf, sizeof buf, "%.4g", L->hi);
        text_at(cr, W - MR + 52, MT + 10, buf, 0);
        snprintf(buf, sizeof buf, "%.4g", L->lo);
        text_at(cr, W - MR + 52, MT + ph, buf, 0);
    } else {
        cairo_set_line_width(cr, 1);
        for (int t = 0; t <= 5; t++) {
            double v = L->lo + (L->hi - L->lo) * t / 5, y = MT + ph - ph * t / 5;
            cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
            cairo_move_to(cr, ML, y);
            cairo_line_to(cr, ML + pw, y);
            cairo_stroke(cr);
            cairo_set_source_rgb(cr, 0, 0, 0);
            snprintf(buf, sizeof buf, "%.4g", v);
            text_at(cr, ML - 6, y + 4, buf, 1);
        }
        double dx = L->nx > 1 ? pw / (L->nx - 1) : 0, x0 = L->nx > 1 ? ML : ML + pw / 2;
        for (int xi = 0; xi < L->nx; xi += step)
            text_at(cr, x0 + xi * dx, MT + ph + 16, L->x[xi], 0.5);
        for (int yi = 0; yi < L->ny; yi++) {
            const double *c = palette[yi % 8];
            cairo_set_source_rgb(cr, c[0], c[1], c[2]);
            cairo_set_line_width(cr, 2);
            int pen = 0;
            for (int xi = 0; xi < L->nx; xi++) {
                double v = L->v[yi * L->nx + xi];
                if (!isfinite(v)) {
                    pen = 0;
                    continue;
                }
                double x = x0 + xi * dx, y = MT + ph - ph * (v - L->lo) / (L->hi - L->lo);
                if (pen)
                    cairo_line_to(cr, x, y);
                else
                    cairo_move_to(cr, x, y);
                pen = 1;
            }
            cairo_stroke(cr);
            for (int xi = 0; xi < L->nx; xi++) {
                double v = L->v[yi * L->nx + xi];
                if (!isfinite(v)) continue;
                cairo_arc(cr, x0 + xi * dx, MT + ph - ph * (v - L->lo) / (L->hi - L->lo), 3, 0,
                          2 * M_PI);
                cairo_fill(cr);
            }
            if (yi < 24) {
                cairo_rectangle(cr, W - MR + 16, MT + 14 * yi, 12, 8);
                cairo_fill(cr);
                cairo_set_source_rgb(cr, 0, 0, 0);
                char legend[40]; /* what fits beside the plot */
                snprintf(legend, sizeof legend, "%s", L->y[yi]);
                if (strlen(L->y[yi]) >= 30) strcpy(legend + 27, "...");
                text_at(cr, W - MR + 34, MT + 14 * yi + 8, legend, 0);
            }
        }
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_set_line_width(cr, 1);
        cairo_rectangle(cr, ML, MT, pw, ph);
        cairo_stroke(cr);
    }
    cairo_set_font_size(cr, 12);
    text_at(cr, ML + pw / 2, H - 18, L->x_name, 0.5);
    cairo_save(cr);
    cairo_move_to(cr, 18, MT + ph / 2);
    cairo_rotate(cr, -M_PI / 2);
    cairo_text_extents_t e;
    const char *yl = L->heatmap ? L->y_name : d->metric;
    cairo_text_extents(cr, yl, &e);
    cairo_rel_move_to(cr, -e.width / 2, 0);
    cairo_show_text(cr, yl);
    cairo_restore(cr);
}

int ao_sweep_chart_write(const ao_sweep_chart_data *d, const char *png, const char *svg)
{
    layout L;
    if (make_layout(d, &L)) return 1;
    int rc = 0;
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
    cairo_t *cr = cairo_create(s);
    draw(cr, &L);
    cairo_destroy(cr);
    if (cairo_surface_write_to_png(s, png) != CAIRO_STATUS_SUCCESS) {
        ao_error(png, "cannot write the chart");
        rc = -1;
    }
    cairo_surface_destroy(s);
    s = cairo_svg_surface_create(svg, W, H);
    cr = cairo_create(s);
    draw(cr, &L);
    cairo_destroy(cr);
    cairo_surface_finish(s);
    if (rc == 0 && cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        ao_error(svg, "cannot write the chart");
        rc = -1;
    }
    cairo_surface_destroy(s);
    free_layout(&L);
    return rc;
}
