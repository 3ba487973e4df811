/* `aorta report` without the flag parsing: load each label's runs, write
 * summary.json, the charts and index.html to the output directory, print the
 * summaries and verdicts. */
#ifndef AORTA_REPORT_REPORT_H
#define AORTA_REPORT_REPORT_H

#include <stddef.h>
#include <stdio.h>

typedef struct ao_report_opts {
    const char *const *log_dirs; /* one per label */
    const char *const *labels;
    size_t nlabels;
    const char *output;
    const char *reference;         /* NULL: no comparison */
    const char *const *candidates; /* judged against the reference; none: every other label */
    size_t ncandidates;
    int traces;                /* write {label}_trace.json of each label's first run */
    long long skip_steps;      /* < 0: each run's training.summary_skip_steps */
    int all_runs;              /* an output directory gives all its runs */
    const char *const *sweeps; /* output directories (a sweep's): each run in one is a label */
    size_t nsweeps;
    int charts; /* draw charts (when built with cairo) */
    FILE *out;  /* tables and verdicts; NULL: quiet */
} ao_report_opts;

/* A label is used in file names: [A-Za-z0-9._-], 1 to 64 characters, not
 * starting with '.'. Returns 0 or AO_EXIT_USAGE after an error naming it. */
int ao_report_check_label(const char *label);
/* Every label checked, and no two alike: 0, or AO_EXIT_USAGE after one error. */
int ao_report_check_labels(const char *const *labels, size_t n);

/* Returns 0, AO_EXIT_USAGE (bad input, printed as one line) or AO_EXIT_FAIL
 * (cannot write the output). */
int ao_report_generate(const ao_report_opts *o);

#endif
