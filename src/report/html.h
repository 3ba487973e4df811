/* index.html of `aorta report`: one self-contained page (the charts' SVG
 * inlined, no script, no network) in the order a performance engineer reads
 * it: findings (diagnose), verdicts with confidence intervals (a matrix when
 * several candidates share one reference, with a chart per metric across
 * configs), the median step's timeline, tables (top kernels where a kernel
 * trace exists), settings once (only what differs, plus the environment),
 * and a glossary of every metric. Simple CSS that reads on a laptop and prints. */
#ifndef AORTA_REPORT_HTML_H
#define AORTA_REPORT_HTML_H

#include <stddef.h>

#include "diagnose/diagnose.h"
#include "runs/compare.h"
#include "runs/summary.h"

typedef struct ao_html_chart {
    const char *name;    /* file base name in chart_dir: "{name}.svg" */
    const char *caption; /* one sentence under the chart */
} ao_html_chart;

typedef struct ao_html_label {
    const ao_summary *sum;
    const ao_diagnosis *diag; /* of the label's first run */
    const ao_run_data *runs;  /* the label's runs (directories, run.json) */
    size_t nruns;
    const char *trace;       /* a trace file in the output directory, or NULL */
    long long timeline_step; /* the step the timeline shows; < 0: no profiled step */
} ao_html_label;

typedef struct ao_html_page {
    const char *chart_dir; /* the output directory */
    const ao_html_label *labels;
    size_t nlabels;
    const ao_comparison *cmps; /* one per candidate, all against one reference */
    size_t ncmps;
    const ao_html_chart *charts; /* the other charts, in the tables section */
    size_t ncharts;
} ao_html_page;

/* Writes path atomically. A chart whose SVG is missing is replaced by a line
 * saying so. Returns 0 or AO_EXIT_FAIL. */
int ao_html_write(const char *path, const ao_html_page *p);

#endif
