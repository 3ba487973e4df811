/* aorta train: flag parsing, the launcher parent (config check, run
 * directory, spawn), then the rank side in train/train. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/config.h"
#include "core/error.h"
#include "core/rundir.h"
#include "core/units.h"
#include "engine/engine.h"
#include "launch/launch.h"
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
    "  --backend B          auto (default: a GPU when one is visible, else cpu), cuda, cpu\n"
    "  --run-name NAME      run directory name under training.output_dir (default: UTC time,\n"
    "                       host and pid); a name that exists is an error, never reused\n"
    "  --all-ranks          show every rank's output (default: rank 0's)\n"
    "  --rdzv-file PATH     under a launcher without MPI: rank 0 writes the NCCL id there\n"
    "  -h, --help           this help\n"
    "\n"
    "Writes {training.output_dir}/{run}/: run.json, rank_NN_metrics.jsonl (one record per\n"
    "iteration), rank_NN.log, summary.json; prints a log line every training.log_interval\n"
    "steps and a summary table at the end. Ctrl-C stops every rank after the current step.\n"
    "Precision: this build stores parameters and gradients and communicates in fp32 on every\n"
    "backend; bf16/fp16 storage is not yet implemented on GPUs, so training.mixed_precision,\n"
    "fsdp.param_dtype and fsdp.reduce_dtype run as fp32, with one warning. training.tf32 runs\n"
    "the GEMMs through TF32 on cuda; the cpu backend computes in fp32 (warned).\n"
    "exit codes: 0 ok, 1 run failed, 2 bad flag or config\n";

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

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
#define VALUE(...) ((r = cli_take_value(argc, argv, &i, NAMES(__VA_ARGS__), &v)) != 0)
        if (cli_is_override(arg)) {
            if (cli_take_overrides("train", usage, argc, argv, &i, &a->ov)) return AO_EXIT_USAGE;
        } else if (cli_is_flag(arg, NAMES("--all-ranks"))) {
            a->all_ranks = 1;
        } else if (VALUE("--config", "-c")) {
            if (r < 0) return cli_usage_error("train", usage, "--config needs a file");
            a->config = v;
        } else if (VALUE("--nproc")) {
            if (r < 0 || ao_parse_int("--nproc", v, 1, 4096, &a->nproc)) return AO_EXIT_USAGE;
        } else if (VALUE("--backend")) {
            if (r < 0) return cli_usage_error("train", usage, "--backend needs a value");
            a->backend = v;
        } else if (VALUE("--run-name")) {
            if (r < 0) return cli_usage_error("train", usage, "--run-name needs a value");
            if (ao_rundir_validate_name(v, "--run-name")) return AO_EXIT_USAGE;
            a->run_name = v;
        } else if (VALUE("--rdzv-file")) {
            if (r < 0) return cli_usage_error("train", usage, "--rdzv-file needs a path");
            a->rdzv_file = v;
        } else {
            return cli_usage_error("train", usage, "unknown option '%s'", arg);
        }
#undef VALUE
    }
    if (cli_resolve_backend(&a->backend) != 0) return AO_EXIT_USAGE;
    return 0;
}

/* Parent: the run directory, made once, before any rank starts. */
static int make_rundir(const struct ao_config *cfg, const char *run_name)
{
    char id[AO_RUN_ID_MAX];
    if (run_name)
        snprintf(id, sizeof id, "%s", run_name);
    else if (ao_rundir_make_id(id, sizeof id) != 0)
        return AO_EXIT_FAIL;
    ao_rundir d;
    int rc = ao_rundir_create(cfg->training.output_dir, id, &d);
    if (rc) return rc;
    ao_rundir_free(&d);
    if (setenv(AO_RUN_ID_ENV, id, 1) != 0) {
        ao_error("train", "cannot export %s", AO_RUN_ID_ENV);
        return AO_EXIT_FAIL;
    }
    return 0;
}

static int run(int argc, char **argv, train_args *a, struct ao_config *cfg)
{
    int rc = ao_config_load(cfg, a->config, a->ov.words, a->ov.n);
    if (rc) return rc;
    /* logging.level from here on; the configuration's own warnings (no-op
     * keys) came before the level was known and print at every level. */
    ao_set_log_level((int)cfg->logging.level);
    ao_rank_info ri;
    int launched = ao_launch_detect(&ri, NULL);
    if (launched < 0) return AO_EXIT_USAGE;
    ao_train_opts o = {.backend = a->backend,
                       .run_name = a->run_name,
                       .rdzv_file = a->rdzv_file,
                       .argc = argc,
                       .argv = argv};
    if (launched) {
        if (a->nproc && a->nproc != ri.world_size)
            ao_warn("--nproc %d ignored: the launcher started %d ranks", a->nproc, ri.world_size);
        ao_launch_install_stop_handler();
        return ao_train_rank(cfg, &o, &ri);
    }
    int nproc = a->nproc;
    if (nproc == 0) nproc = strcmp(a->backend, "cpu") == 0 ? 1 : ao_device_count(a->backend);
    if (nproc < 1) {
        ao_error("--backend", "the %s backend sees no device", a->backend);
        return AO_EXIT_USAGE;
    }
    if ((rc = ao_engine_check_config(cfg, nproc, nproc)) != 0) return rc;
    if ((rc = make_rundir(cfg, a->run_name)) != 0) return rc;
    if (nproc > 1) {
        ao_launch_opts lo = {.nproc = nproc,
                             .backend = a->backend,
                             .comm_backend = ao_comm_backend_for(a->backend),
                             .all_ranks_output = a->all_ranks,
                             .grace_s = 5.0};
        return ao_launch_spawn(argc, argv, &lo);
    }
    ri = (ao_rank_info){.rank = 0, .world_size = 1, .local_rank = 0, .local_world_size = 1};
    /* Only here does rank 0 own the terminal: under a launcher its output goes
     * through a line prefixer, where an in-place line would be noise. */
    o.progress = isatty(STDOUT_FILENO);
    ao_launch_install_stop_handler();
    return ao_train_rank(cfg, &o, &ri);
}

int cmd_train(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            cli_print_help(stdout, usage, help);
            return AO_EXIT_OK;
        }
    }
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
