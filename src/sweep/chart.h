/* The sweep's chart of its metric (built only with cairo, AORTA_HAVE_CAIRO,
 * into libaorta_cairo.so: run.c reaches it through ao_sweep_chart_cairo).
 *
 * Given every result row's dimension values (axes, variables, coll's size)
 * and metric value, the chart keeps the dimensions that vary: one varying
 * dimension gives a line chart over it; two give a heatmap (x: `size` when
 * it varies, else the first; y: the other); more give a line chart over the
 * x dimension with one line per combination of the others. */
#ifndef AORTA_SWEEP_CHART_H
#define AORTA_SWEEP_CHART_H

typedef struct ao_sweep_chart_data {
    const char *title;
    const char *metric;
    int nrows, ndims;
    const char **dim_names; /* ndims */
    char **cells;           /* nrows x ndims: the text of each dimension */
    double *values;         /* nrows; NAN for a failed point */
} ao_sweep_chart_data;

/* Write the chart as PNG and SVG. 0; 1 when nothing varies or no value is
 * finite (no chart, nothing printed); -1 after printing an I/O error. */
int ao_sweep_chart_write(const ao_sweep_chart_data *d, const char *png, const char *svg);

/* ao_sweep_chart_write as libaorta_cairo.so exports it. */
struct ao_sweep_chart {
    int (*write)(const ao_sweep_chart_data *d, const char *png, const char *svg);
};

#endif
