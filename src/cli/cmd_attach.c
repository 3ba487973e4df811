/* aorta attach: flag parsing; the work is in src/attach. */
#include <stdio.h>
#include <string.h>

#include "attach/attach.h"
#include "attach/steps.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/error.h"
#include "core/rundir.h"
#include "core/units.h"
#include "export/export.h"

static const char usage[] =
    "usage: aorta attach [--output DIR] [--run-name N] [--step-nvtx REGEX | --step-kernel REGEX |\n"
    "                    --window-ms N] [--comm REGEX] [--skip-steps N]\n"
    "                    [--prometheus PORT [--listen ADDR]] -- COMMAND [ARGS...]";

static const char help[] =
    "Per-step overlap metrics (DESIGN §7) of an unmodified CUDA job: runs COMMAND (a plain\n"
    "binary, `torchrun ...`, `mpirun ...`) with aorta's CUPTI injection library loaded into\n"
    "every CUDA process (on ROCm, where this build has it, its rocprofiler-sdk tool in\n"
    "ROCP_TOOL_LIBRARIES; roctx ranges are the NVTX ones below). Each process writes\n"
    "rank_NN_metrics.jsonl, one line per step as it completes (tail -f works), classified as\n"
    "`aorta analyze` does: NCCL/RCCL kernels are communication, other kernels compute, memcpys\n"
    "and memsets copies (compute on the stream that runs the most compute). At exit: run.json\n"
    "(command line, environment, devices, versions, the step source each rank used) and\n"
    "summary.json, which `aorta report` reads.\n"
    "\n"
    "Steps, in this order of preference (the first flag below forces one):\n"
    "  --step-nvtx REGEX    NVTX ranges whose name matches (POSIX extended regex; default\n"
    "                       " AO_STEP_NVTX_DEFAULT "):\n"
    "                       torch.cuda.nvtx.range(\"step\"), Megatron's and NeMo's ranges\n"
    "  --step-kernel REGEX  the last kernel of a step (default: the optimizer's,\n"
    "                       " AO_STEP_KERNEL_DEFAULT ")\n"
    "  --window-ms N        fixed windows of N ms of device time (default 1000)\n"
    "  --comm REGEX         kernels that are communication (default: NCCL/RCCL kernel names)\n"
    "  --output DIR         where the run directory goes (default artifacts)\n"
    "  --run-name N         the run directory's name (default: UTC time, host, pid)\n"
    "  --skip-steps N       warm-up steps summary.json leaves out (default 1)\n"
    "  --prometheus PORT    while the job runs, serve every rank's latest step on\n"
    "                       http://127.0.0.1:PORT/metrics for Prometheus (docs/prometheus.md;\n"
    "                       0: any free port, named on stderr)\n"
    "  --listen ADDR        the address --prometheus listens on (default 127.0.0.1)\n"
    "  -h, --help           this help\n"
    "\n"
    "The job comes first: its exit code and signals pass through; a crash leaves every\n"
    "written line complete; where CUPTI cannot be used a process prints one warning and runs\n"
    "untraced; when the job starts its own CUPTI client (torch.profiler, nsys), attach steps\n"
    "aside and lists the steps it could not see in rank_NN_attach.json.\n";

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

int cmd_attach(int argc, char **argv)
{
    ao_attach_opts o = {"artifacts", NULL, "auto", NULL, NULL, NULL, 0, 1, 0, 0, NULL};
    int forced = 0, i = 1;
    for (; i < argc; i++) {
        const char *v = NULL;
        int r;
        long long_v;
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (argv[i][0] != '-') break; /* the command, without -- */
        if (cli_is_help(argv[i])) {
            cli_print_help(stdout, usage, help);
            return AO_EXIT_OK;
        }
#define VALUE(...) ((r = cli_take_value(argc, argv, &i, NAMES(__VA_ARGS__), &v)) != 0)
        if (VALUE("--output")) {
            if (r < 0) goto bad;
            o.output_dir = v;
        } else if (VALUE("--run-name")) {
            if (r < 0 || ao_rundir_validate_name(v, "--run-name")) goto bad;
            o.run_name = v;
        } else if (VALUE("--step-nvtx")) {
            if (r < 0 || ao_steps_regex_check("--step-nvtx", v)) goto bad;
            o.step_nvtx = v;
            o.source = "nvtx";
            forced++;
        } else if (VALUE("--step-kernel")) {
            if (r < 0 || ao_steps_regex_check("--step-kernel", v)) goto bad;
            o.step_kernel = v;
            o.source = "kernel";
            forced++;
        } else if (VALUE("--window-ms")) {
            if (r < 0 || ao_parse_double("--window-ms", v, 1, 3600e3, &o.window_ms)) goto bad;
            o.source = "window";
            forced++;
        } else if (VALUE("--comm")) {
            if (r < 0 || ao_steps_regex_check("--comm", v)) goto bad;
            o.comm = v;
        } else if (VALUE("--skip-steps")) {
            if (r < 0 || ao_parse_long("--skip-steps", v, 0, 1L << 30, &long_v)) goto bad;
            o.skip_steps = long_v;
        } else if (VALUE("--prometheus")) {
            if (r < 0 || ao_export_parse_port("--prometheus", v, 0, &o.prometheus_port)) goto bad;
            o.prometheus = 1;
        } else if (VALUE("--listen")) {
            if (r < 0) goto bad;
            o.listen_addr = v;
        } else {
            if (argv[i][0] == '-') return cli_unknown_option("attach", usage, help, argv[i]);
            return cli_usage_error("attach", usage, "'%s': the command goes after --", argv[i]);
        }
#undef VALUE
    }
    if (forced > 1)
        return cli_usage_error("attach", usage,
                               "--step-nvtx, --step-kernel and --window-ms exclude each other");
    if (o.listen_addr && !o.prometheus)
        return cli_usage_error("attach", usage, "--listen needs --prometheus PORT");
    if (i >= argc) return cli_usage_error("attach", usage, "no command after --");
    return ao_attach_run(&o, argc - i, argv + i);
bad:
    fprintf(stderr, "%s\n", usage);
    return AO_EXIT_USAGE;
}
