/* aorta analyze: flag parsing; the work is ingest/analyze_run. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/error.h"
#include "core/units.h"
#include "ingest/analyze_run.h"

static const char usage[] =
    "usage: aorta analyze PATH... [--output DIR] [--run-name N]\n"
    "                     [--format auto|kineto|rocprof|rocpd|nsys|aorta] [--step REGEX]\n"
    "                     [--comm REGEX] [--threads N] [--keep-mb N]";

static const char help[] =
    "The DESIGN 7 overlap metrics, per step and per rank, of a job's own profiler traces;\n"
    "writes a run directory that `aorta report` reads like a `train` run. No GPU needed.\n"
    "\n"
    "  PATH             a trace file, or a directory with one trace per rank\n"
    "  --output DIR     where the run directory goes (default artifacts/)\n"
    "  --run-name N     its name (default: UTC time, host, pid)\n"
    "  --format F       auto (default: by content), kineto, rocprof, rocpd, nsys, aorta\n"
    "  --step REGEX     host ranges that mark steps (default ^ProfilerStep#([0-9]+)); the\n"
    "                   first group, when digits, numbers the step\n"
    "  --comm REGEX     more kernel names that are communication (besides nccl*, rccl*,\n"
    "                   *ncclDevKernel*, *ncclKernel*)\n"
    "  --threads N      ranks read at once (default: the online cores)\n"
    "  --keep-mb N      traces kept in memory between the two passes, MiB (default 2048);\n"
    "                   a trace beyond it is read again (many ranks: memory stays ranks x\n"
    "                   collectives)\n"
    "  -h, --help       this help\n"
    "\n"
    "What each format needs:\n"
    "  PyTorch/Kineto   torch.profiler.profile(activities=[ProfilerActivity.CPU,\n"
    "                   ProfilerActivity.CUDA], schedule=schedule(wait=1, warmup=1, active=3),\n"
    "                   on_trace_ready=tensorboard_trace_handler(DIR)) with prof.step() each\n"
    "                   step (ProfilerStep#N); CUDA or ROCm builds; .json or .json.gz\n"
    "  rocprofv3        rocprofv3 --kernel-trace --memory-copy-trace --marker-trace\n"
    "                   --output-format csv -- CMD  (steps: roctx ranges, --step names them);\n"
    "                   or the rocpd database (--output-format rocpd)\n"
    "  Nsight Systems   nsys profile -t cuda,nvtx -o job CMD; nsys export --type sqlite "
    "job.nsys-rep\n"
    "                   (steps: NVTX ranges, --step names them)\n"
    "  aorta            a train run's trace.json (profiling.chrome_trace=true)\n"
    "\n"
    "Communication: NCCL/RCCL kernels, with the collective kind from the name; copies:\n"
    "memcpy and memset; compute: every other kernel. A kernel belongs to the step whose\n"
    "range holds its launch call (correlation id), as in HTA. summary.json also holds,\n"
    "per rank, HTA's get_comm_comp_overlap and get_temporal_breakdown numbers under HTA's\n"
    "conventions, the kernel breakdown, idle split into host wait and the rest, exposed\n"
    "time per collective kind, and the slowest rank of each step. With several ranks,\n"
    "collectives.jsonl matches every collective across them: arrival skew, the late rank\n"
    "and what held it, transfer time, bytes, bus bandwidth, pass and unit (DESIGN 14).\n"
    "Exit codes: 0 ok, 1 cannot write, 2 bad flags or input (one line: file and byte\n"
    "offset, row or field).\n";

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define MAX_PATHS  4096

int cmd_analyze(int argc, char **argv)
{
    static char *paths[MAX_PATHS];
    ao_analyze_run_opts o = {.paths = paths,
                             .argc = argc,
                             .argv = argv,
                             .table = stdout,
                             .keep_bytes = (size_t)2048 << 20};
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            cli_print_help(stdout, usage, help);
            return AO_EXIT_OK;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
#define VALUE(...) ((r = cli_take_value(argc, argv, &i, NAMES(__VA_ARGS__), &v)) != 0)
        if (VALUE("--output", "-o")) {
            if (r < 0) return cli_usage_line(usage);
            o.output_dir = v;
        } else if (VALUE("--run-name")) {
            if (r < 0) return cli_usage_line(usage);
            o.run_name = v;
        } else if (VALUE("--format")) {
            if (r < 0) return cli_usage_line(usage);
            int f = ao_trace_format_parse(v);
            if (f < 0)
                return cli_usage_error(
                    "analyze", usage, "--format needs auto, kineto, rocprof, rocpd, nsys or aorta");
            o.format = (ao_trace_format)f;
        } else if (VALUE("--step")) {
            if (r < 0) return cli_usage_line(usage);
            o.step_regex = v;
        } else if (VALUE("--comm")) {
            if (r < 0) return cli_usage_line(usage);
            o.comm_regex = v;
        } else if (VALUE("--threads")) {
            if (r < 0 || ao_parse_int("--threads", v, 1, 4096, &o.threads)) return AO_EXIT_USAGE;
        } else if (VALUE("--keep-mb")) {
            long mb;
            if (r < 0 || ao_parse_long("--keep-mb", v, 0, 1L << 30, &mb)) return AO_EXIT_USAGE;
            o.keep_bytes = (size_t)mb << 20;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_unknown_option("analyze", usage, help, argv[i]);
        } else {
            if (o.npaths == MAX_PATHS)
                return cli_usage_error("analyze", usage, "at most %d paths", MAX_PATHS);
            paths[o.npaths++] = argv[i];
        }
#undef VALUE
    }
    if (o.npaths == 0) return cli_usage_error("analyze", usage, "give a trace file or directory");
    return ao_analyze_run(&o);
}
