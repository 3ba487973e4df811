/* The drawing primitives every chart shares (chart/chart.h). */
#include "chart/chart.h"

#include <cairo-svg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"

void ao_set_rgb(cairo_t *cr, ao_rgb c, double alpha)
{
    cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha);
}

void ao_font(cairo_t *cr, double size, int bold)
{
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

double ao_text_width(cairo_t *cr, const char *s)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    return e.x_advance;
}

double ao_text_at(cairo_t *cr, double x, double y, double ax, const char *s)
{
    cairo_font_extents_t fe;
    cairo_font_extents(cr, &fe);
    double w = ao_text_width(cr, s);
    cairo_move_to(cr, x - ax * w, y + (fe.ascent - fe.descent) / 2);
    cairo_show_text(cr, s);
    return w;
}

void ao_nice_axis(double lo, double hi, int target, ao_axis *a)
{
    if (!(hi > lo)) {
        double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1;
        lo -= pad;
        hi += pad;
    }
    double raw = (hi - lo) / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
    double step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
    a->step = step;
    a->lo = floor(lo / step + 1e-9) * step;
    a->hi = ceil(hi / step - 1e-9) * step;
}

void ao_int_axis(double lo, double hi, int target, ao_axis *a)
{
    ao_nice_axis(lo, hi, target, a);
    if (a->step >= 1) return;
    a->step = 1;
    a->lo = floor(lo);
    a->hi = ceil(hi) > a->lo ? ceil(hi) : a->lo + 1;
}

void ao_tick_text(char *buf, size_t n, double v, double step)
{
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(v) < step * 1e-6) v = 0;
    if (fabs(v) >= 1e6 && step >= 1)
        snprintf(buf, n, "%.3g", v);
    else
        snprintf(buf, n, "%.*f", dec, v);
}

double ao_px(const ao_frame *f, double v)
{
    return f->x0 + (v - f->ax.lo) / (f->ax.hi - f->ax.lo) * (f->x1 - f->x0);
}
double ao_py(const ao_frame *f, double v)
{
    return f->y1 - (v - f->ay.lo) / (f->ay.hi - f->ay.lo) * (f->y1 - f->y0);
}

double ao_y_ticks_width(cairo_t *cr, const ao_axis *a)
{
    double w = 0;
    char buf[64];
    ao_font(cr, AO_FONT_SIZE, 0);
    for (double v = a->lo; v <= a->hi + a->step * 1e-6; v += a->step) {
        ao_tick_text(buf, sizeof buf, v, a->step);
        double tw = ao_text_width(cr, buf);
        if (tw > w) w = tw;
    }
    return w;
}

void ao_draw_axes(cairo_t *cr, const ao_frame *f, const char *xlabel, const char *ylabel,
                  int with_y)
{
    char buf[64];
    ao_font(cr, AO_FONT_SIZE, 0);
    cairo_set_line_width(cr, 1);
    if (with_y) {
        for (double v = f->ay.lo; v <= f->ay.hi + f->ay.step * 1e-6; v += f->ay.step) {
            double y = ao_py(f, v);
            ao_set_rgb(cr, AO_C_GRID, 1);
            cairo_move_to(cr, f->x0, y);
            cairo_line_to(cr, f->x1, y);
            cairo_stroke(cr);
            ao_set_rgb(cr, AO_C_TEXT, 1);
            ao_tick_text(buf, sizeof buf, v, f->ay.step);
            ao_text_at(cr, f->x0 - 6, y, 1, buf);
        }
    }
    double last_right = -1e9;
    for (double v = f->ax.lo; f->ax.step > 0 && v <= f->ax.hi + f->ax.step * 1e-6;
         v += f->ax.step) {
        double x = ao_px(f, v);
        ao_set_rgb(cr, AO_C_GRID, 1);
        cairo_move_to(cr, x, f->y0);
        cairo_line_to(cr, x, f->y1);
        cairo_stroke(cr);
        ao_tick_text(buf, sizeof buf, v, f->ax.step);
        double w = ao_text_width(cr, buf);
        if (x - w / 2 < last_right + 6) continue;
        ao_set_rgb(cr, AO_C_TEXT, 1);
        ao_text_at(cr, x, f->y1 + 12, 0.5, buf);
        last_right = x + w / 2;
    }
    ao_set_rgb(cr, AO_C_TEXT, 1);
    cairo_rectangle(cr, f->x0, f->y0, f->x1 - f->x0, f->y1 - f->y0);
    cairo_stroke(cr);
    ao_text_at(cr, (f->x0 + f->x1) / 2, f->y1 + 32, 0.5, xlabel);
    if (ylabel) {
        cairo_save(cr);
        cairo_translate(cr, 16, (f->y0 + f->y1) / 2);
        cairo_rotate(cr, -M_PI / 2);
        ao_text_at(cr, 0, 0, 0.5, ylabel);
        cairo_restore(cr);
    }
}

void ao_draw_title(cairo_t *cr, double w, const char *title, const char *note)
{
    ao_set_rgb(cr, AO_C_TEXT, 1);
    ao_font(cr, AO_TITLE_SIZE, 1);
    ao_text_at(cr, w / 2, 18, 0.5, title);
    if (note) {
        ao_font(cr, AO_FONT_SIZE, 0);
        cairo_set_source_rgb(cr, 0.6, 0.1, 0.1);
        ao_text_at(cr, w / 2, 38, 0.5, note);
    }
}

double ao_legend_width(cairo_t *cr, const ao_legend_item *it, size_t n)
{
    ao_font(cr, AO_FONT_SIZE, 0);
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double tw = ao_text_width(cr, it[i].name);
        if (tw > w) w = tw;
    }
    return w + 34;
}

void ao_draw_legend(cairo_t *cr, double x, double y, const ao_legend_item *it, size_t n)
{
    ao_font(cr, AO_FONT_SIZE, 0);
    for (size_t i = 0; i < n; i++) {
        double yy = y + 18 * (double)i;
        ao_set_rgb(cr, it[i].c, 1);
        if (it[i].box) {
            cairo_rectangle(cr, x, yy - 5, 16, 10);
            cairo_fill(cr);
        } else {
            cairo_set_line_width(cr, 2.5);
            cairo_move_to(cr, x, yy);
            cairo_line_to(cr, x + 16, yy);
            cairo_stroke(cr);
        }
        ao_set_rgb(cr, AO_C_TEXT, 1);
        ao_text_at(cr, x + 22, yy, 0, it[i].name);
    }
}

/* A file's bytes as cairo writes them, kept in memory. */
typedef struct bytes {
    unsigned char *p;
    size_t n, cap;
} bytes;

static cairo_status_t to_bytes(void *closure, const unsigned char *data, unsigned int n)
{
    bytes *b = closure;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = ao_realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    return CAIRO_STATUS_SUCCESS;
}

/* Both files are drawn in memory and written through a temporary file and
 * rename (ao_file_write_atomic): a full disk leaves no truncated chart. */
int ao_chart_render(const char *png, const char *svg, double w, double h, ao_draw_fn fn,
                    const void *ctx)
{
    int rc = 0;
    bytes out[2] = {{0}, {0}};
    cairo_surface_t *s[2] = {
        cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)w, (int)h),
        cairo_svg_surface_create_for_stream(to_bytes, &out[1], w, h),
    };
    for (int i = 0; i < 2; i++) {
        cairo_t *cr = cairo_create(s[i]);
        cairo_set_source_rgb(cr, 1, 1, 1);
        cairo_paint(cr);
        fn(cr, w, h, ctx);
        cairo_status_t st = cairo_status(cr);
        cairo_destroy(cr);
        if (i == 0 && st == CAIRO_STATUS_SUCCESS)
            st = cairo_surface_write_to_png_stream(s[i], to_bytes, &out[0]);
        cairo_surface_finish(s[i]);
        if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(s[i]);
        const char *path = i == 0 ? png : svg;
        if (st != CAIRO_STATUS_SUCCESS && rc == 0) {
            ao_error(path, "cannot draw the chart: %s", cairo_status_to_string(st));
            rc = AO_EXIT_FAIL;
        } else if (rc == 0 && ao_file_write_atomic(path, out[i].p, out[i].n) != 0) {
            rc = AO_EXIT_FAIL;
        }
        cairo_surface_destroy(s[i]);
        free(out[i].p);
    }
    return rc;
}
