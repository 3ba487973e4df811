/* The drawing primitives every chart shares: the report's (report/charts)
 * and the sweep's (sweep/chart). Built only with cairo (AORTA_HAVE_CAIRO);
 * only *_cairo.c files include this header.
 *
 * Text is placed after measuring its extents, axes get "nice" ticks
 * (1, 2, 5 x 10^k), and one call draws the same picture into a PNG and an
 * SVG surface. */
#ifndef AORTA_CHART_CHART_H
#define AORTA_CHART_CHART_H

#include <cairo.h>
#include <stddef.h>

typedef struct ao_rgb {
    double r, g, b;
} ao_rgb;

#define AO_C_GRID     ((ao_rgb){0.88, 0.88, 0.88})
#define AO_C_TEXT     ((ao_rgb){0.10, 0.10, 0.10})
#define AO_FONT_SIZE  12.0
#define AO_TITLE_SIZE 15.0

void ao_set_rgb(cairo_t *cr, ao_rgb c, double alpha);
/* sans-serif at `size`, bold or not. */
void ao_font(cairo_t *cr, double size, int bold);
double ao_text_width(cairo_t *cr, const char *s);
/* Text anchored at (x, y): ax 0 left, 0.5 centre, 1 right; y is the middle
 * of the line. Returns the width drawn. */
double ao_text_at(cairo_t *cr, double x, double y, double ax, const char *s);

/* Ticks at 1, 2 or 5 x 10^k covering [lo, hi] with about `target` steps. */
typedef struct ao_axis {
    double lo, hi, step; /* step 0: no ticks (a category axis the caller labels) */
} ao_axis;
void ao_nice_axis(double lo, double hi, int target, ao_axis *a);
/* The same for a count (steps): ticks at whole numbers only. */
void ao_int_axis(double lo, double hi, int target, ao_axis *a);
/* A tick's label with as many decimals as the step needs. */
void ao_tick_text(char *buf, size_t n, double v, double step);

typedef struct ao_frame {
    double x0, y0, x1, y1; /* plot area in pixels */
    ao_axis ax, ay;
} ao_frame;
/* Data to pixels. */
double ao_px(const ao_frame *f, double v);
double ao_py(const ao_frame *f, double v);
/* Width of the widest y tick label. */
double ao_y_ticks_width(cairo_t *cr, const ao_axis *a);
/* Grid, ticks and labels, the frame and the axis names (ylabel NULL: none);
 * x tick labels that would touch the previous one are skipped, so they never
 * overlap. with_y 0: no y ticks (category charts). */
void ao_draw_axes(cairo_t *cr, const ao_frame *f, const char *xlabel, const char *ylabel,
                  int with_y);
/* The title centred at the top of a chart w wide, and an optional note under it. */
void ao_draw_title(cairo_t *cr, double w, const char *title, const char *note);

typedef struct ao_legend_item {
    const char *name;
    ao_rgb c;
    int box; /* 1: filled box, 0: line */
} ao_legend_item;
double ao_legend_width(cairo_t *cr, const ao_legend_item *it, size_t n);
/* A legend in the right margin, starting at (x, y). */
void ao_draw_legend(cairo_t *cr, double x, double y, const ao_legend_item *it, size_t n);

typedef void (*ao_draw_fn)(cairo_t *cr, double w, double h, const void *ctx);
/* Paint white, call fn, and write the PNG and the SVG. 0, or AO_EXIT_FAIL
 * after printing which file could not be drawn. */
int ao_chart_render(const char *png, const char *svg, double w, double h, ao_draw_fn fn,
                    const void *ctx);

#endif
