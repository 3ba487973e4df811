/* aorta train: flag parsing and the config; the launcher parent and the
 * rank are train/train. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/config.h"
#include "core/error.h"
#include "core/rundir.h"
#include "core/units.h"
#include "train/train.h"

static const char usage[] =
    "usage: aorta train [--config FILE] [--override KEY=VALUE ...] [--nproc N]\n"
    "                   [--backend auto|cuda|cpu] [--run-name NAME] [--all-ranks]\n"
    "                   [--rdzv-file PATH]";

static const char help[] =
    "Run the synthetic ranking workload under FSDP or DDP and measure, on the device\n"
    "timeline, how much communication each step hides behind compute.\n"
    "\n"
    "  --config FILE        YAML config (default: schema defaults; see `aorta config doc`)\n"
    "  --override K=V ...   set keys after the file; repeatable, a later one wins\n"
    "  --nproc N            ranks to start when not under a launcher (default: the visible\n"
    "                       GPUs; 1 on the cpu backend, which runs several through mpirun)\n"
    "  --backend B          auto (default: the GPU; no GPU is an error), cuda, cpu\n"
    "  --run-name NAME      run directory name under training.output_dir (default: UTC time,\n"
    "                       host and pid); a name that exists is an error, never reused\n"
    "  --all-ranks          show every rank's output (default: rank 0's)\n"
    "  --rdzv-file PATH     under a launcher without MPI: rank 0 writes the NCCL id there\n"
    "  -h, --help           this help\n"
    "\n"
    "Writes {training.output_dir}/{run}/: run.json, rank_NN_metrics.jsonl (one record per\n"
    "iteration), rank_NN.log, summary.json; prints a log line every training.log_interval\n"
    "steps and a summary table at the end. Ctrl-C stops every rank after the current step.\n"
    "Precision: parameters, gradients, master weights and reductions are fp32. On cuda,\n"
    "training.mixed_precision bf16/fp16 multiplies 16-bit copies of the GEMM operands (fp32\n"
    "accumulation; fp16 adds dynamic loss scaling), fsdp.param_dtype bf16/fp16 gathers the\n"
    "parameters in that type, and training.tf32 runs fp32 GEMMs through TF32. fsdp.reduce_dtype\n"
    "other than fp32 runs as fp32, and the cpu backend computes and communicates in fp32 (each\n"
    "warned once).\n"
    "exit codes: 0 ok, 1 run failed, 2 bad flag or config\n";

typedef struct train_args {
    const char *config;
    struct cli_overrides ov;
    int nproc;
    const char *backend;
    const char *run_name;
    const char *rdzv_file;
    int all_ranks;
} train_args;

static int parse(int argc, char **argv, train_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *v = NULL, *arg = argv[i];
        int r;
        if (cli_is_override(arg)) {
            if (cli_take_overrides("train", usage, argc, argv, &i, &a->ov)) return AO_EXIT_USAGE;
        } else if (cli_is_flag(arg, CLI_NAMES("--all-ranks"))) {
            a->all_ranks = 1;
        } else if (CLI_VALUE("--config", "-c")) {
            if (r < 0) return cli_usage_line(usage);
            a->config = v;
        } else if (CLI_VALUE("--nproc")) {
            if (r < 0 || ao_parse_int("--nproc", v, 1, 4096, &a->nproc)) return AO_EXIT_USAGE;
        } else if (CLI_VALUE("--backend")) {
            if (r < 0) return cli_usage_line(usage);
            a->backend = v;
        } else if (CLI_VALUE("--run-name")) {
            if (r < 0) return cli_usage_line(usage);
            if (ao_rundir_validate_name(v, "--run-name")) return AO_EXIT_USAGE;
            a->run_name = v;
        } else if (CLI_VALUE("--rdzv-file")) {
            if (r < 0) return cli_usage_line(usage);
            a->rdzv_file = v;
        } else {
            return cli_unknown_option("train", usage, help, arg);
        }
    }
    if (cli_resolve_backend("train", &a->backend) != 0) return AO_EXIT_USAGE;
    return 0;
}

static int run(int argc, char **argv, train_args *a, struct ao_config *cfg)
{
    int rc = ao_config_load(cfg, a->config, a->ov.words, a->ov.n);
    if (rc) return rc;
    /* logging.level from here on; the configuration's own warnings (no-op
     * keys) came before the level was known and print at every level. */
    ao_set_log_level((int)cfg->logging.level);
    ao_train_opts o = {.backend = a->backend,
                       .run_name = a->run_name,
                       .rdzv_file = a->rdzv_file,
                       .nproc = a->nproc,
                       .all_ranks = a->all_ranks,
                       .argc = argc,
                       .argv = argv};
    return ao_train(cfg, &o);
}

int cmd_train(int argc, char **argv)
{
    if (cli_help_requested(argc, argv, usage, help)) return AO_EXIT_OK;
    train_args a = {.backend = "auto"};
    int rc = parse(argc, argv, &a);
    if (rc == 0) {
        struct ao_config cfg;
        memset(&cfg, 0, sizeof cfg);
        rc = run(argc, argv, &a, &cfg);
        ao_config_free(&cfg);
    }
    cli_overrides_free(&a.ov);
    return rc;
}
