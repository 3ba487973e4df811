/* aorta sdma: flag parsing; the benchmark is bench/sdma. */
#include <stdio.h>
#include <string.h>

#include "bench/sdma.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/error.h"
#include "core/rundir.h"
#include "core/units.h"

static const char usage[] =
    "usage: aorta sdma [--device D] [--matrix-size N] [--dtype T] [--copy-mb M] "
    "[--iterations I]\n"
    "                  [--warmup W] [--direction h2d|d2h|d2d|p2p] [--engine dma|kernel]\n"
    "                  [--json FILE] [--backend auto|cuda|cpu]";

static const char help[] =
    "GEMM vs copy overlap: an NxNxN GEMM on the lowest-priority stream, a copy on the\n"
    "highest-priority one, timed by events on the stream that runs each, in four modes:\n"
    "gemm alone, copy alone, serial (copy after GEMM on one stream) and overlap (both\n"
    "streams released together). Prints mean/min/max ms per mode, GEMM TFLOP/s (2 N^3 / time)\n"
    "and copy GB/s (bytes / time, 1e9) in each mode, then\n"
    "  savings    = (serial - overlap) / serial\n"
    "  achieved   = (serial - overlap) / (serial - max(gemm, copy))   (1 = perfect overlap)\n"
    "  concurrent = overlapped iterations whose copy interval intersects the GEMM's.\n"
    "The copied bytes are checked against their source at the end; a mismatch exits 1.\n"
    "\n"
    "  --device D         device ordinal (default 0; under a launcher, the local rank's)\n"
    "  --matrix-size N    GEMM size N (default 4096)\n"
    "  --dtype T          GEMM dtype: bfloat16, half, float, double (default bf16 on GPUs,\n"
    "                     float on cpu)\n"
    "  --copy-mb M        copy size in MiB, exactly M x 2^20 bytes (default 64)\n"
    "  --iterations I     timed iterations per mode (default 20)\n"
    "  --warmup W         untimed iterations before them (default 3)\n"
    "  --direction DIR    h2d (pinned host to device; default), d2h, d2d (two buffers on the\n"
    "                     device), p2p (device D to device D+1; needs two devices, so not on\n"
    "                     the cpu backend, which has one: use d2d there)\n"
    "  --engine E         dma: copy engines (cudaMemcpyAsync; default); kernel: SM threads\n"
    "                     (not for p2p)\n"
    "  --json FILE        write every number as one JSON object\n"
    "  --backend B        auto (default: the GPU; no GPU is an error), cuda, cpu\n"
    "  -h, --help         this help\n"
    "\n"
    "Under a launcher (mpirun, srun, torchrun) every rank runs on its own device; rank 0\n"
    "prints and writes the JSON.\n";

static int parse(int argc, char **argv, ao_sdma_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        long mb;
/* The spellings from bench/sdma.h's table, which sweeps check axes against. */
#define FLAG(f) ((r = cli_take_value(argc, argv, &i, ao_sdma_flags[f].names, &v)) != 0)
        if (FLAG(AO_SDMA_F_DEVICE)) {
            if (r < 0 || ao_parse_int("--device", v, 0, 1023, &o->device)) return -1;
        } else if (FLAG(AO_SDMA_F_MATRIX_SIZE)) {
            if (r < 0 || ao_parse_int("--matrix-size", v, 1, 65536, &o->matrix)) return -1;
        } else if (FLAG(AO_SDMA_F_DTYPE)) {
            if (r < 0) return -1;
            if (ao_dtype_parse(v, &o->dtype) != 0 || (o->dtype != AO_F32 && o->dtype != AO_F16 &&
                                                      o->dtype != AO_BF16 && o->dtype != AO_F64)) {
                ao_error("--dtype",
                         "'%s' is not a GEMM dtype; allowed: bfloat16, half, float, "
                         "double (or bf16, fp16, fp32, f64)",
                         v);
                return -1;
            }
            o->dtype_set = 1;
        } else if (FLAG(AO_SDMA_F_COPY_MB)) {
            if (r < 0 || ao_parse_long("--copy-mb", v, 1, 1L << 20, &mb)) return -1;
            o->copy_bytes = (size_t)mb << 20;
        } else if (FLAG(AO_SDMA_F_ITERATIONS)) {
            if (r < 0 || ao_parse_int("--iterations", v, 1, 1000000, &o->iterations)) return -1;
        } else if (FLAG(AO_SDMA_F_WARMUP)) {
            if (r < 0 || ao_parse_int("--warmup", v, 0, 1000000, &o->warmup)) return -1;
        } else if (FLAG(AO_SDMA_F_DIRECTION)) {
            if (r < 0 || ao_sdma_direction_parse("--direction", v, &o->direction)) return -1;
        } else if (FLAG(AO_SDMA_F_ENGINE)) {
            if (r < 0 || ao_sdma_engine_parse("--engine", v, &o->engine)) return -1;
        } else if (FLAG(AO_SDMA_F_JSON)) {
            if (r < 0) return -1;
            o->json_path = v;
        } else if (FLAG(AO_SDMA_F_BACKEND)) {
            if (r < 0) return -1;
            o->backend = v;
        } else {
            cli_unknown_option("sdma", usage, help, argv[i]);
            return -1;
        }
#undef FLAG
    }
    return cli_resolve_backend("sdma", &o->backend);
}

int cmd_sdma(int argc, char **argv)
{
    if (cli_help_requested(argc, argv, usage, help)) return AO_EXIT_OK;
    ao_sdma_opts o;
    ao_sdma_defaults(&o);
    if (parse(argc, argv, &o) != 0 ||
        (o.json_path && ao_check_output_file("--json", o.json_path))) {
        fprintf(stderr, "%s\n", usage);
        return AO_EXIT_USAGE;
    }
    return ao_sdma_run(&o);
}
