/* aorta diagnose: flag parsing; the work is diagnose/diagnose. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/error.h"
#include "core/units.h"
#include "diagnose/diagnose.h"

static const char usage[] =
    "usage: aorta diagnose RUN_DIR... [--json] [--skip-steps N] [--coll-ref FILE]";

static const char help[] =
    "What bounds a step, from the records of a run (aorta train, analyze or attach): a\n"
    "classification (compute-bound, communication-exposed, input-bound, host-bound,\n"
    "straggler-bound, balanced) with the numbers and thresholds that decide it; findings\n"
    "ranked by the time they cost per step, each with where it sits (collective kind, unit,\n"
    "forward or backward, rank), the knobs that move it and the most it can gain; flags on\n"
    "the measurement (terms that do not add up, baselines that disagree with the steps, too\n"
    "few steps, high variance, throttling); steps far from the median; and what the records\n"
    "do not allow to say. With collectives matched across ranks (collectives.jsonl), who\n"
    "waited for whom: the late rank, what held it and what it cost the others\n"
    "(late_rank), skew no one rank explains (collective_skew), slow transfers. No GPU\n"
    "needed.\n"
    "\n"
    "  RUN_DIR          a run directory, or an output directory (its `latest` run)\n"
    "  --json           one JSON document on stdout instead of the text\n"
    "  --skip-steps N   warm-up train steps skipped per rank (default: the run's\n"
    "                   training.summary_skip_steps, else 5)\n"
    "  --coll-ref FILE  `aorta coll --json FILE`'s output on the same machine: collectives\n"
    "                   whose bus bandwidth is under half of it at their size are\n"
    "                   slow_transfer\n"
    "  -h, --help       this help\n"
    "\n"
    "Exit codes: 0 ok, 2 bad flags or a directory without records.\n";

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

int cmd_diagnose(int argc, char **argv)
{
    ao_diagnose_opts o = {.skip_steps = -1, .out = stdout};
    const char **dirs = ao_calloc((size_t)argc, sizeof *dirs);
    size_t ndirs = 0;
    int rc = -1;
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *v = NULL;
        int r;
        if (cli_is_help(argv[i])) {
            cli_print_help(stdout, usage, help);
            rc = AO_EXIT_OK;
        } else if (cli_is_flag(argv[i], NAMES("--json"))) {
            o.json = 1;
        } else if ((r = cli_take_value(argc, argv, &i, NAMES("--coll-ref"), &v)) != 0) {
            if (r < 0)
                rc = AO_EXIT_USAGE;
            else
                o.coll_ref = v;
        } else if ((r = cli_take_value(argc, argv, &i, NAMES("--skip-steps"), &v)) != 0) {
            long n;
            if (r < 0 || ao_parse_long("--skip-steps", v, 0, 1000000000L, &n))
                rc = AO_EXIT_USAGE;
            else
                o.skip_steps = n;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            rc = cli_unknown_option("diagnose", usage, help, argv[i]);
        } else {
            dirs[ndirs++] = argv[i];
        }
    }
    if (rc < 0 && ndirs == 0) rc = cli_usage_error("diagnose", usage, "give at least one RUN_DIR");
    if (rc < 0) {
        o.dirs = dirs;
        o.ndirs = ndirs;
        rc = ao_diagnose_dirs(&o);
    }
    free(dirs);
    return rc;
}
