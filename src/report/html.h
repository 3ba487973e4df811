/* index.html of `aorta report`: one self-contained page (the charts' SVG
 * inlined, no script, no network), verdicts first, then the per-label
 * tables and the charts; simple CSS that reads on a laptop and prints. */
#ifndef AORTA_REPORT_HTML_H
#define AORTA_REPORT_HTML_H

#include <stddef.h>

#include "report/compare.h"
#include "report/summary.h"

typedef struct ao_html_chart {
    const char *name;    /* file base name in chart_dir: "{name}.svg" */
    const char *caption; /* one sentence under the chart */
} ao_html_chart;

/* Writes path atomically. cmp may be NULL (no comparison). A chart whose SVG
 * is missing is replaced by a line saying so. Returns 0 or AO_EXIT_FAIL. */
int ao_html_write(const char *path, const char *chart_dir, const ao_summary *sums, size_t n,
                  const ao_comparison *cmp, const ao_html_chart *charts, size_t ncharts);

#endif
