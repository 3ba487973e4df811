/* aorta coll: flag parsing; the benchmark is bench/coll. */
#include <stdio.h>
#include <string.h>

#include "bench/coll.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/error.h"
#include "core/rundir.h"
#include "core/units.h"

static const char usage[] =
    "usage: aorta coll [--coll LIST] [-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-n ITERS] "
    "[-w WARMUP]\n"
    "                  [--dtype T] [--op OP] [-c 0|1] [-a avg|min|max|rank0] [--root R] "
    "[--per-iter]\n"
    "                  [--json FILE] [--csv FILE] [--min-ctas N] [--max-ctas N] [--nproc N]\n"
    "                  [--rdzv-file PATH]\n"
    "                  [--backend auto|cuda|cpu] [--with-compute M,N,K[,DTYPE]]";

static const char help[] =
    "Collective bandwidth with nccl-tests' sizes, counts and columns (time, algbw, busbw,\n"
    "#wrong, out-of-place then in-place), on NCCL over GPUs or MPI over the cpu backend.\n"
    "\n"
    "  --coll LIST          comma list of all_reduce, all_gather, reduce_scatter, broadcast,\n"
    "                       reduce, alltoall, sendrecv (default all_reduce); one table each\n"
    "  -b, --minbytes SIZE  smallest size, bytes with K/M/G suffix (1024-based; default 32M)\n"
    "  -e, --maxbytes SIZE  largest size (default 32M)\n"
    "  -f, --stepfactor F   multiply the size by F (whole number >= 2; default 2)\n"
    "  -i, --stepbytes S    add S bytes instead of multiplying (K/M/G suffix allowed)\n"
    "  -n, --iters N        timed ops per size (default 20)\n"
    "  -w, --warmup N       untimed ops before them (default 5)\n"
    "  -d, --dtype T        float, half, bfloat16, double, int32, int8, uint8, int64, uint32,\n"
    "                       uint64 (or fp32, fp16, bf16, ...; default float)\n"
    "  -o, --op OP          sum, prod, max, min, avg (default sum)\n"
    "  -c, --check 0|1      fill integer-valued data, check every output element of every\n"
    "                       rank once per size and placement; #wrong = wrong elements summed\n"
    "                       over ranks; any wrong element makes the exit code 1 (default 1)\n"
    "  -a, --average HOW    combine ranks' times: avg (default), min, max, rank0; or\n"
    "                       nccl-tests' numbers 0=rank0 1=avg 2=min 3=max\n"
    "  -r, --root R         root rank of broadcast and reduce (default 0)\n"
    "  --per-iter           time every op with device events and print min, p50 and p99\n"
    "                       instead of the mean; algbw/busbw then use p50\n"
    "  --json FILE          write the rows as a JSON array (rank 0)\n"
    "  --csv FILE           write the same columns as CSV (rank 0)\n"
    "  --min-ctas N, --max-ctas N\n"
    "                       NCCL communicator CTA bounds (0 = NCCL's default)\n"
    "  --rdzv-file PATH     under a launcher without MPI (torchrun, srun in a non-MPI build):\n"
    "                       rank 0 writes the NCCL id there, the others wait for it (a fresh\n"
    "                       path on a filesystem every rank sees)\n"
    "  --nproc N            ranks to start when not under a launcher (default: the visible\n"
    "                       GPUs; 2 on the cpu backend, which runs them through mpirun)\n"
    "  --backend B          auto (default: the GPU; no GPU is an error), cuda, cpu\n"
    "  --with-compute M,N,K[,DTYPE]\n"
    "                       run an MxNxK GEMM loop (default bf16 on GPUs, float on cpu) on a\n"
    "                       lower-priority stream during an extra out-of-place run per size,\n"
    "                       and report the collective's busbw under compute, its slowdown, the\n"
    "                       GEMM's TFLOP/s alone and under the collective, and that slowdown\n"
    "  -h, --help           this help\n"
    "\n"
    "size is nccl-tests' size: the all_gather/alltoall receive buffer, the reduce_scatter send\n"
    "buffer, else the buffer; counts round down so it divides by ranks x dtype size.\n"
    "algbw = size / time (GB/s, 1e9); busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n\n"
    "(all_gather, reduce_scatter, alltoall) or 1. Only rank 0 prints.\n";

static int parse(int argc, char **argv, ao_coll_bench_opts *o, int *nproc)
{
    int factor_given = 0, step_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL, *a = argv[i];
        int r;
/* The spellings from bench/coll.h's table, which sweeps check axes against. */
#define FLAG(f) ((r = cli_take_value(argc, argv, &i, ao_coll_flags[f].names, &v)) != 0)
        if (cli_is_flag(a, CLI_NAMES("--per-iter"))) {
            o->per_iter = 1;
            continue;
        }
        if (FLAG(AO_COLL_F_COLL)) {
            if (r < 0 || ao_coll_list_parse("--coll", v, o->colls, &o->ncolls)) return -1;
        } else if (FLAG(AO_COLL_F_MINBYTES)) {
            if (r < 0 || ao_parse_size("-b", v, &o->min_bytes)) return -1;
        } else if (FLAG(AO_COLL_F_MAXBYTES)) {
            if (r < 0 || ao_parse_size("-e", v, &o->max_bytes)) return -1;
        } else if (FLAG(AO_COLL_F_STEPFACTOR)) {
            if (r < 0 || ao_parse_long("-f", v, 2, 1L << 20, &o->factor)) return -1;
            factor_given = 1;
        } else if (FLAG(AO_COLL_F_STEPBYTES)) {
            if (r < 0 || ao_parse_size("-i", v, &o->step)) return -1;
            if (o->step == 0) {
                ao_error("-i", "a step of 0 bytes would never reach the maximum");
                return -1;
            }
            step_given = 1;
        } else if (FLAG(AO_COLL_F_ITERS)) {
            if (r < 0 || ao_parse_int("-n", v, 1, 1000000, &o->iters)) return -1;
        } else if (FLAG(AO_COLL_F_WARMUP)) {
            if (r < 0 || ao_parse_int("-w", v, 0, 1000000, &o->warmup)) return -1;
        } else if (FLAG(AO_COLL_F_DTYPE)) {
            if (r < 0) return -1;
            if (ao_dtype_parse(v, &o->dtype) != 0) {
                ao_error("--dtype",
                         "'%s' is not a dtype; allowed: float, half, bfloat16, double, "
                         "int32, int8, uint8, int64, uint32, uint64",
                         v);
                return -1;
            }
        } else if (FLAG(AO_COLL_F_OP)) {
            if (r < 0) return -1;
            if (ao_redop_parse(v, &o->op) != 0) {
                ao_error("--op", "'%s' is not a reduction; allowed: sum, prod, max, min, avg", v);
                return -1;
            }
        } else if (FLAG(AO_COLL_F_CHECK)) {
            if (r < 0 || ao_parse_int("-c", v, 0, 1, &o->check)) return -1;
        } else if (FLAG(AO_COLL_F_AVERAGE)) {
            if (r < 0 || ao_time_combine_parse("-a", v, &o->combine)) return -1;
        } else if (FLAG(AO_COLL_F_ROOT)) {
            if (r < 0 || ao_parse_int("--root", v, 0, 1 << 20, &o->root)) return -1;
        } else if (FLAG(AO_COLL_F_JSON)) {
            if (r < 0) return -1;
            o->json_path = v;
        } else if (FLAG(AO_COLL_F_CSV)) {
            if (r < 0) return -1;
            o->csv_path = v;
        } else if (FLAG(AO_COLL_F_RDZV_FILE)) {
            if (r < 0) return -1;
            o->rdzv_file = v;
        } else if (FLAG(AO_COLL_F_MIN_CTAS)) {
            if (r < 0 || ao_parse_int("--min-ctas", v, 0, 1 << 16, &o->min_ctas)) return -1;
        } else if (FLAG(AO_COLL_F_MAX_CTAS)) {
            if (r < 0 || ao_parse_int("--max-ctas", v, 0, 1 << 16, &o->max_ctas)) return -1;
        } else if (FLAG(AO_COLL_F_NPROC)) {
            if (r < 0 || ao_parse_int("--nproc", v, 1, 4096, nproc)) return -1;
        } else if (FLAG(AO_COLL_F_BACKEND)) {
            if (r < 0) return -1;
            o->backend = v;
        } else if (FLAG(AO_COLL_F_WITH_COMPUTE)) {
            if (r < 0 || ao_gemm_shape_parse("--with-compute", v, &o->gemm_m, &o->gemm_n,
                                             &o->gemm_k, &o->gemm_dtype, &o->gemm_dtype_set))
                return -1;
            o->with_compute = 1;
        } else {
            cli_unknown_option("coll", usage, help, a);
            return -1;
        }
#undef FLAG
    }
    if (factor_given && step_given) {
        ao_error("-f/-i", "give a factor (-f) or a step (-i), not both");
        return -1;
    }
    if (step_given) o->factor = 0;
    if (o->min_bytes > o->max_bytes) {
        ao_error("-b/-e", "the minimum size (%zu bytes) is larger than the maximum (%zu bytes)",
                 o->min_bytes, o->max_bytes);
        return -1;
    }
    if (o->min_ctas && o->max_ctas && o->min_ctas > o->max_ctas) {
        ao_error("--min-ctas", "%d is more than --max-ctas %d", o->min_ctas, o->max_ctas);
        return -1;
    }
    return 0;
}

int cmd_coll(int argc, char **argv)
{
    if (cli_help_requested(argc, argv, usage, help)) return AO_EXIT_OK;
    ao_coll_bench_opts o;
    ao_coll_bench_defaults(&o);
    int nproc = 0;
    if (parse(argc, argv, &o, &nproc) != 0 || cli_resolve_backend("coll", &o.backend) != 0 ||
        (o.json_path && ao_check_output_file("--json", o.json_path)) ||
        (o.csv_path && ao_check_output_file("--csv", o.csv_path))) {
        fprintf(stderr, "%s\n", usage);
        return AO_EXIT_USAGE;
    }
    return ao_coll_bench(argc, argv, &o, nproc);
}
