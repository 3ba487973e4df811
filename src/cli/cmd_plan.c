/* aorta plan: flag parsing; the work is memplan/memplan. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/config.h"
#include "core/error.h"
#include "core/units.h"
#include "memplan/memplan.h"

static const char usage[] =
    "usage: aorta plan [--config FILE] [--override KEY=VALUE ...] [--nproc N] [--local N]\n"
    "                  [--backend cpu|cuda] [--device-mem SIZE] [--json]";

static const char help[] =
    "Device memory per rank of `aorta train` for each sharding strategy (ddp / no_shard,\n"
    "shard_grad_op, full_shard, hybrid_shard over two groups when the ranks allow) x precision\n"
    "(fp32; bf16 compute and gathers) x gradient accumulation (1 and the config's, else 4),\n"
    "broken down into parameters (shard, 16-bit copy, gathered buffers with\n"
    "limit_all_gathers' slots), gradients, optimizer state, activations at peak and their\n"
    "16-bit copies, data and other buffers; with --device-mem, which fit and the largest\n"
    "training.batch_size each allows. The sizes are the ones the engine and the model\n"
    "allocate (what a run measures as mem_peak_mb); the cuda backend's runtime (context,\n"
    "NCCL, cuBLASLt) comes on top.\n"
    "\n"
    "  --config FILE      YAML config (default: schema defaults)\n"
    "  --override K=V     set a key (repeatable)\n"
    "  --nproc N          ranks (default 1)\n"
    "  --local N          ranks per node, hybrid_shard's default group (default: N)\n"
    "  --backend B        cpu or cuda (default cuda: 16-bit gathers and activation copies)\n"
    "  --device-mem SIZE  memory per device (80G, 141G, ...): the fit and max_batch columns\n"
    "  --json             one JSON document instead of the table\n"
    "  -h, --help         this help\n"
    "\n"
    "Exit codes: 0 ok, 2 bad flags or configuration.\n";

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

int cmd_plan(int argc, char **argv)
{
    const char *path = NULL;
    struct cli_overrides ov = {0};
    ao_memplan_opts o = {.world = 1, .cuda = 1, .out = stdout};
    int local = 0, rc = -1;
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *v = NULL;
        int r;
        if (cli_is_help(argv[i])) {
            cli_print_help(stdout, usage, help);
            rc = AO_EXIT_OK;
        } else if (cli_is_override(argv[i])) {
            if (cli_take_overrides("plan", usage, argc, argv, &i, &ov)) rc = AO_EXIT_USAGE;
        } else if (cli_is_flag(argv[i], NAMES("--json"))) {
            o.json = 1;
        } else if ((r = cli_take_value(argc, argv, &i, NAMES("--config"), &v)) != 0) {
            if (r < 0) rc = cli_usage_line(usage);
            path = v;
        } else if ((r = cli_take_value(argc, argv, &i, NAMES("--nproc"), &v)) != 0) {
            if (r < 0 || ao_parse_int("--nproc", v, 1, 1 << 20, &o.world)) rc = AO_EXIT_USAGE;
        } else if ((r = cli_take_value(argc, argv, &i, NAMES("--local"), &v)) != 0) {
            if (r < 0 || ao_parse_int("--local", v, 1, 1 << 20, &local)) rc = AO_EXIT_USAGE;
        } else if ((r = cli_take_value(argc, argv, &i, NAMES("--backend"), &v)) != 0) {
            if (r < 0)
                rc = cli_usage_line(usage);
            else if (strcmp(v, "cpu") != 0 && strcmp(v, "cuda") != 0)
                rc = cli_usage_error("plan", usage, "--backend is cpu or cuda");
            else
                o.cuda = strcmp(v, "cuda") == 0;
        } else if ((r = cli_take_value(argc, argv, &i, NAMES("--device-mem"), &v)) != 0) {
            if (r < 0 || ao_parse_size("--device-mem", v, &o.device_mem)) rc = AO_EXIT_USAGE;
        } else {
            rc = cli_unknown_option("plan", usage, help, argv[i]);
        }
    }
    if (rc < 0) {
        o.local_world = local ? local : o.world;
        struct ao_config cfg;
        rc = ao_config_load(&cfg, path, ov.words, ov.n);
        if (rc == 0) rc = ao_memplan_run(&cfg, &o);
        ao_config_free(&cfg);
    }
    cli_overrides_free(&ov);
    return rc;
}
