/* aorta report: flag parsing; the work is report/report. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/error.h"
#include "core/units.h"
#include "report/report.h"

static const char usage[] =
    "usage: aorta report (--log-dir D --label L | --sweep D) ... --output O\n"
    "                    [--reference L [--candidate L2]...] [--skip-steps N] [--all-runs] "
    "[--no-charts] [--no-trace]";

static const char help[] =
    "Summaries, comparisons and charts of training runs; no GPU needed.\n"
    "Writes to O: summary.json, {label}_timeline and {label}_streams, overlap_breakdown and\n"
    "comparison as PNG and SVG, and a self-contained index.html (verdicts first).\n"
    "\n"
    "  --log-dir D      a run directory, or an output directory (its `latest` run);\n"
    "                   repeat with one --label each\n"
    "  --label L        the name of that log dir in tables and file names ([A-Za-z0-9._-])\n"
    "  --output O       the report directory (made if missing)\n"
    "  --reference L    compare: the baseline label; without --candidate every other\n"
    "                   label is judged against it (a matrix of configs x metrics)\n"
    "  --candidate L    compare: a label judged against the reference; repeat for several\n"
    "                   (with two labels and neither flag, the first is the reference)\n"
    "  --skip-steps N   warm-up train steps skipped per rank (default: the run's\n"
    "                   training.summary_skip_steps from run.json, else 5)\n"
    "  --all-runs       an output directory gives every run in it, not only `latest`\n"
    "  --sweep D        an output directory (a sweep's): each run in it is a label of its\n"
    "                   own, named after its directory; repeatable\n"
    "  --no-charts      tables and summary.json only\n"
    "  --no-trace       no {label}_trace.json (Chrome/Perfetto trace of the first run)\n"
    "  -h, --help       this help\n"
    "\n"
    "Verdicts: per metric, the 95% bootstrap CI (1000 resamples, fixed seed) of the\n"
    "difference of per-step medians; \"no significant difference\" when it contains 0 or the\n"
    "change is below 1%; otherwise better or worse by the metric's direction (step_ms lower,\n"
    "tokens_per_s higher, overlap_ratio higher, exposed_comm_ms lower, ...).\n"
    "Exit codes: 0 ok, 1 cannot write the report, 2 bad flags or input.\n";

#define MAX_LABELS 64

int cmd_report(int argc, char **argv)
{
    const char *dirs[MAX_LABELS], *labels[MAX_LABELS], *cands[MAX_LABELS], *sweeps[MAX_LABELS];
    int ndirs = 0, nlabels = 0;
    size_t ncands = 0, nsweeps = 0;
    ao_report_opts o = {.skip_steps = -1, .charts = 1, .traces = 1, .out = stdout};
    if (cli_help_requested(argc, argv, usage, help)) return AO_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (CLI_VALUE("--log-dir")) {
            if (r < 0) return cli_usage_line(usage);
            if (ndirs == MAX_LABELS)
                return cli_usage_error("report", usage, "at most %d --log-dir", MAX_LABELS);
            dirs[ndirs++] = v;
        } else if (CLI_VALUE("--sweep")) {
            if (r < 0) return cli_usage_line(usage);
            if (nsweeps == MAX_LABELS)
                return cli_usage_error("report", usage, "at most %d --sweep", MAX_LABELS);
            sweeps[nsweeps++] = v;
        } else if (CLI_VALUE("--label")) {
            if (r < 0) return cli_usage_line(usage);
            if (nlabels == MAX_LABELS)
                return cli_usage_error("report", usage, "at most %d --label", MAX_LABELS);
            labels[nlabels++] = v;
        } else if (CLI_VALUE("--output", "-o")) {
            if (r < 0) return cli_usage_line(usage);
            o.output = v;
        } else if (CLI_VALUE("--reference")) {
            if (r < 0) return cli_usage_line(usage);
            o.reference = v;
        } else if (CLI_VALUE("--candidate")) {
            if (r < 0) return cli_usage_line(usage);
            if (ncands == MAX_LABELS)
                return cli_usage_error("report", usage, "at most %d --candidate", MAX_LABELS);
            cands[ncands++] = v;
        } else if (CLI_VALUE("--skip-steps")) {
            long n;
            if (r < 0 || ao_parse_long("--skip-steps", v, 0, 1000000000L, &n)) return AO_EXIT_USAGE;
            o.skip_steps = n;
        } else if (cli_is_flag(argv[i], CLI_NAMES("--all-runs"))) {
            o.all_runs = 1;
        } else if (cli_is_flag(argv[i], CLI_NAMES("--no-charts"))) {
            o.charts = 0;
        } else if (cli_is_flag(argv[i], CLI_NAMES("--no-trace"))) {
            o.traces = 0;
        } else {
            return cli_unknown_option("report", usage, help, argv[i]);
        }
    }
    if (ndirs == 0 && nsweeps == 0)
        return cli_usage_error("report", usage, "give at least one --log-dir or --sweep");
    if (nlabels != ndirs)
        return cli_usage_error("report", usage,
                               "%d --label for %d --log-dir; give one --label per --log-dir",
                               nlabels, ndirs);
    if (!o.output) return cli_usage_error("report", usage, "--output is required");
    if (ao_report_check_labels(labels, (size_t)ndirs)) return AO_EXIT_USAGE;
    if (!o.reference && ncands == 0 && ndirs == 2) {
        o.reference = labels[0];
        fprintf(stderr, "aorta: comparing %s against %s (the first label is the reference)\n",
                labels[1], labels[0]);
    }
    o.sweeps = sweeps;
    o.nsweeps = nsweeps;
    o.candidates = cands;
    o.ncandidates = ncands;
    o.log_dirs = dirs;
    o.labels = labels;
    o.nlabels = (size_t)ndirs;
    return ao_report_generate(&o);
}
