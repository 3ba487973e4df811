/* aorta sweep: flag parsing; the sweep is src/sweep. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/error.h"
#include "core/rundir.h"
#include "core/units.h"
#include "sweep/plan.h"
#include "sweep/run.h"

static const char usage[] =
    "usage: aorta sweep FILE [--dry-run] [--format table|csv|json] [--out FILE] [--resume]\n"
    "                   [--axis KEY=V1,V2] [--env NAME=V1,V2] [--skip KEY=V] [--fail-fast]\n"
    "                   [--work-dir DIR] [--chart-dir DIR] [--max-points N]";

static const char help[] =
    "Run train, coll, sdma or queues over axes and environment variables declared in a YAML\n"
    "file:\n"
    "\n"
    "  name: rccl_cta_sweep\n"
    "  command: coll                    # train | coll | sdma | queues\n"
    "  args: [--coll, all_reduce, -b, 1M, -e, 1G, -f, 4]   # fixed arguments\n"
    "  config: config/default.yaml      # train only\n"
    "  axes:                            # train: nproc and config keys; coll: nproc, size\n"
    "    nproc: [2]                     # and flags (--op, --dtype, --coll, ...); sdma: flags\n"
    "    size: pow2:20:30               # (--matrix-size, --copy-mb, ...); queues: workload,\n"
    "                                   # streams and flags (--sync, --iterations, ...)\n"
    "  env:                             # cartesian product\n"
    "    NCCL_MIN_CTAS: [32, 64]\n"
    "  env_zip:                         # entries taken as a whole, crossed with env\n"
    "    - {NCCL_MAX_CTAS: 64, NCCL_NTHREADS: 256}\n"
    "  metric: busbw_gbps               # the column the chart shows (a list: a chart each)\n"
    "\n"
    "Values are lists, single values or ranges: pow2:A:B (2^A..2^B), lin:FIRST:LAST[:STEP].\n"
    "Every (nproc, environment) pair is a launch group; its variables are set only in the\n"
    "processes started for it, before any library initializes. coll takes a group's sizes\n"
    "and --coll values in one launch, queues a group's streams; other axes (and every\n"
    "train or sdma point) are one launch each. Each launch runs this binary as a child\n"
    "('aorta coll --json ...') and its output goes to WORK_DIR/launch_NNN/output.log.\n"
    "\n"
    "  --dry-run            print the groups, launches and points; run nothing\n"
    "  --format F           table, csv or json (default: from --out's extension .csv or\n"
    "                       .json, else table)\n"
    "  --out FILE           write the results there (rewritten after every launch) instead\n"
    "                       of printing them at the end\n"
    "  --resume             skip points that already have successful rows in --out\n"
    "  --axis KEY=V1,V2     replace or add an axis (values may be ranges)\n"
    "  --env NAME=V1,V2     replace or add an environment variable of the product\n"
    "  --skip KEY=V         leave out the points whose axis or variable KEY is V\n"
    "  --fail-fast          stop at the first failed launch (default: record it, go on)\n"
    "  --work-dir DIR       launch directories (default artifacts/sweeps/NAME)\n"
    "  --chart-dir DIR      where NAME.png/.svg go (default: next to --out, else work dir)\n"
    "  --max-points N       refuse sweeps of more than N points (default 100000; the\n"
    "                       product of the axes and environments, before --skip)\n"
    "  -h, --help           this help\n"
    "\n"
    "AORTA_SWEEP_EXE=PROG runs PROG instead of this binary for every launch (a wrapper that\n"
    "profiles or logs, then runs aorta with the same arguments).\n"
    "\n"
    "Columns: the axes (leading dashes dropped), the variables, the metrics (coll: coll,\n"
    "size, time_us, algbw_gbps, busbw_gbps, wrong, out-of-place; sdma: savings_pct,\n"
    "achieved, gemm_ms, copy_ms, serial_ms, overlap_ms, mean_overlap_ms, concurrent; train:\n"
    "step_ms, tokens_per_s, overlap_ratio, exposed_comm_ms from summary.json; queues: streams,\n"
    "latency_mean_us, latency_p50_us, latency_p99_us, throughput_ops_per_s,\n"
    "scaling_efficiency, concurrency, concurrent_pct), run_dir,\n"
    "error. Exit 0 when every point ran, 1 when one failed, 2 for a bad file or flag.\n";

int cmd_sweep(int argc, char **argv)
{
    if (cli_help_requested(argc, argv, usage, help)) return AO_EXIT_OK;
    const char *file = NULL, *format = NULL;
    ao_sweep_run_opts o = {0};
    int dry_run = 0;
    long max_points = 0;
    /* Overrides apply after the file is read; keep them in order. */
    const char **changes = ao_calloc((size_t)argc, sizeof *changes);
    char *kinds = ao_calloc((size_t)argc, 1);
    int nchanges = 0, rc = 0;
    for (int i = 1; rc == 0 && i < argc; i++) {
        const char *v = NULL, *a = argv[i];
        int r;
        if (cli_is_flag(a, CLI_NAMES("--dry-run"))) {
            dry_run = 1;
        } else if (cli_is_flag(a, CLI_NAMES("--resume"))) {
            o.resume = 1;
        } else if (cli_is_flag(a, CLI_NAMES("--fail-fast"))) {
            o.fail_fast = 1;
        } else if (CLI_VALUE("--format")) {
            format = v;
            if (r < 0) rc = AO_EXIT_USAGE;
        } else if (CLI_VALUE("--out", "-o")) {
            o.out = v;
            if (r < 0) rc = AO_EXIT_USAGE;
        } else if (CLI_VALUE("--max-points")) {
            if (r < 0 || ao_parse_long(a, v, 1, 100000000L, &max_points)) rc = AO_EXIT_USAGE;
        } else if (CLI_VALUE("--work-dir")) {
            o.work_dir = v;
            if (r < 0) rc = AO_EXIT_USAGE;
        } else if (CLI_VALUE("--chart-dir")) {
            o.chart_dir = v;
            if (r < 0) rc = AO_EXIT_USAGE;
        } else if (CLI_VALUE("--axis", "--env", "--skip")) {
            if (r < 0) {
                rc = AO_EXIT_USAGE;
            } else {
                kinds[nchanges] = a[2];
                changes[nchanges++] = v;
            }
        } else if (a[0] == '-') {
            rc = cli_unknown_option("sweep", usage, help, a);
        } else if (file) {
            rc = cli_usage_error("sweep", usage, "one sweep file only; '%s' is extra", a);
        } else {
            file = a;
        }
    }
    /* A wrapper for every launch (a profiler, a test's launch counter). */
    const char *exe = getenv("AORTA_SWEEP_EXE");
    if (exe && *exe) o.exe = exe;
    if (rc == 0 && !file) rc = cli_usage_error("sweep", usage, "no sweep file given");
    /* before the work: the results are written after every launch */
    if (rc == 0 && o.out && ao_check_output_path("--out", o.out)) rc = AO_EXIT_USAGE;
    if (rc == 0 && !format) {
        /* No --format: the --out file's extension says it, else a table. */
        const char *dot = o.out ? strrchr(o.out, '.') : NULL;
        format = dot && (strcmp(dot, ".csv") == 0 || strcmp(dot, ".json") == 0) ? dot + 1 : "table";
    }
    if (rc == 0) {
        if (strcmp(format, "table") == 0)
            o.format = AO_SWEEP_TABLE;
        else if (strcmp(format, "csv") == 0)
            o.format = AO_SWEEP_CSV;
        else if (strcmp(format, "json") == 0)
            o.format = AO_SWEEP_JSON;
        else
            rc =
                cli_usage_error("sweep", usage, "--format '%s': allowed: table, csv, json", format);
    }
    ao_sweep_spec s = {0};
    ao_sweep_plan p = {0};
    if (rc == 0) rc = ao_sweep_spec_load(file, &s);
    s.max_points = max_points;
    for (int k = 0; rc == 0 && k < nchanges; k++)
        rc = kinds[k] == 'a'   ? ao_sweep_spec_set_axis(&s, "--axis", changes[k])
             : kinds[k] == 'e' ? ao_sweep_spec_set_env(&s, "--env", changes[k])
                               : ao_sweep_spec_add_skip(&s, "--skip", changes[k]);
    if (rc == 0) rc = ao_sweep_spec_check(&s);
    if (rc == 0) rc = ao_sweep_plan_make(&s, &p);
    if (rc == 0) rc = ao_sweep_check_train_points(&p);
    if (rc == 0) {
        if (dry_run)
            ao_sweep_plan_print(&p, stdout);
        else
            rc = ao_sweep_run(&p, &o);
    }
    ao_sweep_plan_free(&p);
    ao_sweep_spec_free(&s);
    free(changes);
    free(kinds);
    return rc;
}
