/* The report's charts, drawn with cairo as PNG and SVG (same drawing code
 * for both surfaces). Each function writes {dir}/{name}.png and
 * {dir}/{name}.svg and returns 0, or AO_EXIT_FAIL after printing why.
 * Built only with cairo (AORTA_HAVE_CAIRO), into libaorta_cairo.so: report.c
 * reaches them through ao_report_charts_cairo (core/plugin.h).
 *
 * Every chart has axis labels with units, "nice" tick values (1, 2, 5 x 10^k),
 * a legend outside the plot area, and text placed after measuring its extents
 * so that labels do not overlap (tick labels that would collide are thinned). */
#ifndef AORTA_REPORT_CHARTS_H
#define AORTA_REPORT_CHARTS_H

#include <stddef.h>

#include "core/intervals.h"
#include "runs/compare.h"
#include "runs/rundata.h"
#include "runs/summary.h"

/* {label}_timeline: step, compute, comm and exposed comm per step; thin
 * lines per rank, the median over ranks bold. Long runs are binned (mean per
 * bin) to at most 1000 points, and the axis says so. */
/* The time-per-step axis stops at AO_TIMELINE_CAP_FACTOR x the 95th
 * percentile of the plotted values (INFINITY when n is 0); values above it
 * are outliers, marked on the top edge. */
#define AO_TIMELINE_CAP_FACTOR 1.5
double ao_timeline_cap(const double *y, size_t n);

int ao_chart_timeline(const char *dir, const char *label, const ao_run_data *runs, size_t nruns);

/* {label}_streams: one iteration as lanes per stream per rank, ops as bars,
 * compute/communication overlap shaded. The iteration is the profiled step
 * (a step every rank recorded ops for) whose slowest rank's step time is the
 * median of those steps. Without ops: per-stream busy medians as bars from
 * 0, and the chart says it is a degraded view. */
int ao_chart_streams(const char *dir, const char *label, const ao_run_data *runs, size_t nruns);

/* The streams chart's layout, for tests: its lanes (streams with an op in
 * the chosen step on any rank; used[s] set for each, the count returned)
 * and one rank's shaded intervals, C ∩ M of its ops (heap array in *out,
 * the count returned). */
int ao_streams_lanes(const ao_iter_record *const *recs, int nranks, int used[AO_NSTREAMS]);
size_t ao_streams_shaded(const ao_iter_record *r, ao_ival **out);

/* overlap_breakdown: per label a stacked bar of median overlapped, exposed
 * communication, compute alone and idle time. */
int ao_chart_overlap_breakdown(const char *dir, const ao_summary *sums, size_t n);

/* comparison_{candidate}: per metric, the candidate's change relative to the reference
 * (percent) with the bootstrap CI as whiskers, coloured by verdict; the axis
 * clipped at ao_comparison_cap, a row beyond cut with an arrow and its
 * change written. */
int ao_chart_comparison(const char *dir, const ao_comparison *c);
/* The comparison axis' reach (percent) for rows whose CIs are [lo[i], hi[i]]:
 * 4 x the median row's farthest end from zero, 10 at least; INFINITY for none. */
double ao_comparison_cap(const double *lo, const double *hi, size_t n);

/* configs_{metric}: one metric across configs (the matrix's column), one
 * horizontal bar per config from the metric's natural zero: its median with
 * the CI as an error bar, coloured by verdict, the reference dark with its
 * value dashed through every row; the axis clipped like the time-per-step
 * chart's (ao_timeline_cap), a config beyond it cut with an arrow head. */
int ao_chart_configs(const char *dir, size_t metric, const ao_config_value *v, size_t n);

/* The charts report.c draws, as libaorta_cairo.so exports them. */
struct ao_report_charts {
    int (*timeline)(const char *dir, const char *label, const ao_run_data *runs, size_t nruns);
    int (*streams)(const char *dir, const char *label, const ao_run_data *runs, size_t nruns);
    int (*overlap_breakdown)(const char *dir, const ao_summary *sums, size_t n);
    int (*comparison)(const char *dir, const ao_comparison *c);
    int (*configs)(const char *dir, size_t metric, const ao_config_value *v, size_t n);
};

#endif
