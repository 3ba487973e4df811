/* aorta queues: flag parsing; the workloads and their metrics are queues/. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/error.h"
#include "core/rundir.h"
#include "core/units.h"
#include "queues/queues.h"

static const char usage[] =
    "usage: aorta queues WORKLOAD [--streams 1,2,4,...] [--iterations N] [--warmup N]\n"
    "                    [--sync per_iteration|end_only|none] [--json F] [--csv F]\n"
    "                    [--kernel-trace] [--no-hold] [--device D] [--backend auto|cuda|cpu]\n"
    "       aorta queues list\n"
    "       aorta queues compare A.json B.json [--json F]";

static const char help[] =
    "How the number of streams and the device's hardware queues shape concurrency. A\n"
    "workload (aorta queues list) runs on each stream count in turn; every op has an event\n"
    "pair on its own stream. One row per stream count:\n"
    "  latency      an iteration's window (its go, or first op start, to its last op's end):\n"
    "               mean, p50, p95, p99 in us\n"
    "  ops/s        ops over the union of the iteration windows; per-strm = ops/s / streams\n"
    "  effic        ops/s / ops/s on one stream, over the work added (ops/it / ops/it on one):\n"
    "               where each stream brings the same work, ops/s / (streams x ops/s on one);\n"
    "               1 = each stream's work ran entirely beside the others'\n"
    "  conc         sum over streams of their busy time / the time any was busy (1 = serial);\n"
    "               busy = an op in flight (between its events), which includes waiting for\n"
    "               SMs another stream holds: --kernel-trace gives the executing view\n"
    "  >1strm       share of the busy time with two or more streams busy\n"
    "  intra/inter  launch gaps (p50): from the op that last finished to the next op's start,\n"
    "               on the same stream (intra) or another one (inter)\n"
    "then per op: duration and latency (end - ready, ready = when its stream, the iteration's\n"
    "go and the ops it waits for let it run). The queue variables in effect are printed and\n"
    "recorded (CUDA_DEVICE_MAX_CONNECTIONS, GPU_MAX_HW_QUEUES, HIP_*, AMD_*, HSA_*); sweep them\n"
    "with aorta sweep (examples/sweeps/queues_*.yaml).\n"
    "\n"
    "  --streams LIST     stream counts, 1 to 64 (default 1,2,4,8,16,32,64)\n"
    "  --iterations N     measured iterations per count (default 20)\n"
    "  --warmup N         iterations before them, not measured (default 3)\n"
    "  --sync MODE        per_iteration: the host waits for the device after each iteration\n"
    "                     (default); end_only: iterations are joined on the device (the next\n"
    "                     starts after every stream's last op), the host waits at the end;\n"
    "                     none: no join, each stream runs its iterations back to back\n"
    "  --json F, --csv F  every number (the JSON with per-iteration samples, for compare)\n"
    "  --no-hold          let the device start each op as soon as it is enqueued; by default\n"
    "                     it waits until an iteration's first 192 ops are (as when the host\n"
    "                     runs ahead, as frameworks do), so that the host's launch path is\n"
    "                     not inside the event pairs (cuda; the cpu backend never holds; a\n"
    "                     count's first iteration, warm-up or not, is never held)\n"
    "  --kernel-trace     also measure the concurrency from CUPTI's kernels over the same span\n"
    "                     and print how far the events are from it (cuda only)\n"
    "  --device D         device ordinal (default 0; under a launcher, the local rank's)\n"
    "  --backend B        auto (default: the GPU; no GPU is an error), cuda, cpu\n"
    "\n"
    "compare: per stream count in both records, the medians of latency, throughput and\n"
    "concurrency per iteration, a bootstrap 95 % CI of their difference and a verdict, as\n"
    "aorta report compares train runs; and what differs in the queue variables.\n"
    "\n"
    "Under a launcher (mpirun, srun, torchrun) every rank measures its own device; rank 0\n"
    "prints and writes the files.\n";

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

static int parse(int argc, char **argv, ao_queues_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
/* The spellings from queues/queues.h's table, which sweeps check axes against. */
#define FLAG(f) ((r = cli_take_value(argc, argv, &i, ao_queues_flags[f].names, &v)) != 0)
        if (FLAG(AO_QUEUES_F_STREAMS)) {
            if (r < 0 || ao_queues_parse_streams("--streams", v, o)) return -1;
        } else if (FLAG(AO_QUEUES_F_ITERATIONS)) {
            if (r < 0 || ao_parse_int("--iterations", v, 1, 1000000, &o->iterations)) return -1;
        } else if (FLAG(AO_QUEUES_F_WARMUP)) {
            if (r < 0 || ao_parse_int("--warmup", v, 0, 1000000, &o->warmup)) return -1;
        } else if (FLAG(AO_QUEUES_F_SYNC)) {
            if (r < 0 || ao_qsync_parse("--sync", v, &o->sync)) return -1;
        } else if (FLAG(AO_QUEUES_F_JSON)) {
            if (r < 0) return -1;
            o->json_path = v;
        } else if (FLAG(AO_QUEUES_F_CSV)) {
            if (r < 0) return -1;
            o->csv_path = v;
        } else if (FLAG(AO_QUEUES_F_DEVICE)) {
            if (r < 0 || ao_parse_int("--device", v, 0, 1023, &o->device)) return -1;
        } else if (FLAG(AO_QUEUES_F_BACKEND)) {
            if (r < 0) return -1;
            o->backend = v;
        } else if (cli_is_flag(argv[i], NAMES("--kernel-trace"))) {
            o->kernel_trace = 1;
        } else if (cli_is_flag(argv[i], NAMES("--no-hold"))) {
            o->hold = 0;
        } else if (argv[i][0] != '-' && !o->workload) {
            if (ao_queues_workload_check("queues", argv[i])) return -1;
            o->workload = argv[i];
        } else {
            cli_unknown_option("queues", usage, help, argv[i]);
            return -1;
        }
#undef FLAG
    }
    if (!o->workload) {
        ao_error("queues", "no workload; name one (aorta queues list)");
        return -1;
    }
    return cli_resolve_backend("queues", &o->backend);
}

static int list(void)
{
    for (int i = 0; i < ao_queues_workload_count(); i++)
        printf("%-10s %s\n", ao_queues_workload_name(i), ao_queues_workload_help(i));
    return AO_EXIT_OK;
}

static int compare(int argc, char **argv)
{
    const char *files[2] = {0}, *json = NULL;
    int nfiles = 0;
    for (int i = 2; i < argc; i++) {
        const char *v = NULL;
        int r = cli_take_value(argc, argv, &i, NAMES("--json"), &v);
        if (r < 0) return AO_EXIT_USAGE;
        if (r > 0) {
            json = v;
        } else if (argv[i][0] != '-' && nfiles < 2) {
            files[nfiles++] = argv[i];
        } else {
            return cli_usage_error("queues compare", usage, "unexpected argument '%s'", argv[i]);
        }
    }
    if (nfiles != 2)
        return cli_usage_error("queues compare", usage, "give two records: A.json B.json");
    if (json && ao_check_output_file("--json", json)) return AO_EXIT_USAGE;
    return ao_queues_compare(files[0], files[1], json);
}

int cmd_queues(int argc, char **argv)
{
    if (cli_help_requested(argc, argv, usage, help)) return AO_EXIT_OK;
    if (argc >= 2 && strcmp(argv[1], "list") == 0) {
        if (argc > 2) return cli_usage_error("queues list", usage, "list takes no arguments");
        return list();
    }
    if (argc >= 2 && strcmp(argv[1], "compare") == 0) return compare(argc, argv);
    ao_queues_opts o;
    ao_queues_defaults(&o);
    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "%s\n", usage);
        return AO_EXIT_USAGE;
    }
    /* before the work: a typo must not cost the whole measurement */
    if ((o.json_path && ao_check_output_file("--json", o.json_path)) ||
        (o.csv_path && ao_check_output_file("--csv", o.csv_path)))
        return AO_EXIT_USAGE;
    return ao_queues_run(&o);
}
