/* Values derived from several keys, and the checks across keys that a
 * single key's type and range cannot express. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/config_internal.h"
#include "core/error.h"
#include "core/text.h"

/* ---- derived values and cross-key checks ------------------------------- */

int ao_config_ff_dim(const struct ao_config *cfg)
{
    return cfg->model.ff_dim ? cfg->model.ff_dim : cfg->model.mlp_hidden_dim;
}

enum ao_precision ao_config_param_dtype(const struct ao_config *cfg)
{
    return cfg->fsdp.param_dtype == AO_PRECISION_AUTO ? cfg->training.mixed_precision
                                                      : cfg->fsdp.param_dtype;
}

int ao_config_total_steps(const struct ao_config *cfg, int world_size)
{
    double global =
        (double)world_size * cfg->training.batch_size * cfg->training.gradient_accumulation;
    double per_epoch = ceil(cfg->dataset.num_samples / global);
    double steps = per_epoch * cfg->training.epochs;
    return steps < cfg->training.max_steps ? (int)steps : cfg->training.max_steps;
}

const char *ao_precision_name(enum ao_precision p)
{
    switch (p) {
    case AO_PRECISION_FP16:
        return "fp16";
    case AO_PRECISION_BF16:
        return "bf16";
    case AO_PRECISION_FP32:
        return "fp32";
    case AO_PRECISION_AUTO:
        break;
    }
    return "auto";
}

/* "model.num_heads = 7 (--override)" */
static char *describe(const struct ao_config *cfg, const char *key)
{
    int row = ao_cfg_row_of(key);
    assert(row >= 0);
    int is_null;
    char *value = ao_cfg_value_text(cfg, row, &is_null); /* as `config show` prints it */
    char *s = ao_asprintf("%s = %s (%s)", key, value, origin_of(cfg, row));
    free(value);
    return s;
}

static int cross_error(const struct ao_config *cfg, const char *key_a, const char *key_b,
                       const char *why)
{
    char *a = describe(cfg, key_a);
    char *b = key_b ? describe(cfg, key_b) : NULL;
    if (b)
        ao_error("config", "%s and %s: %s", a, b, why);
    else
        ao_error("config", "%s: %s", a, why);
    free(a);
    free(b);
    return AO_EXIT_USAGE;
}

int ao_config_validate(const struct ao_config *cfg)
{
    const struct {
        const char *model_key, *data_key;
        int model_value, data_value;
    } same[] = {
        {"model.vocab_size", "dataset.vocab_size", cfg->model.vocab_size, cfg->dataset.vocab_size},
        {"model.dense_dim", "dataset.dense_dim", cfg->model.dense_dim, cfg->dataset.dense_dim},
        {"model.num_dense_features", "dataset.num_dense_features", cfg->model.num_dense_features,
         cfg->dataset.num_dense_features},
    };
    if (cfg->model.model_dim % cfg->model.num_heads)
        return cross_error(cfg, "model.model_dim", "model.num_heads",
                           "model_dim must be divisible by num_heads");
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (same[i].model_value != same[i].data_value)
            return cross_error(cfg, same[i].model_key, same[i].data_key,
                               "the model and the dataset must agree");

    /* Steps: warm-up, then the baselines (compute-only and comm-only), then at
     * least one step to measure. */
    long long need =
        (long long)cfg->training.summary_skip_steps + 2LL * cfg->training.baseline_steps + 1;
    if (cfg->training.baseline_steps > 0 && cfg->training.max_steps < need) {
        char why[160];
        snprintf(why, sizeof why,
                 "warm-up plus 2 x baseline_steps leaves no step to measure; "
                 "training.max_steps must be at least %lld",
                 need);
        return cross_error(cfg, "training.baseline_steps", "training.summary_skip_steps", why);
    }
    if (cfg->training.max_steps < need)
        return cross_error(cfg, "training.max_steps", "training.summary_skip_steps",
                           "max_steps must exceed summary_skip_steps, or no step is measured");
    if (ao_config_total_steps(cfg, 1) < need) {
        char why[200];
        snprintf(why, sizeof why,
                 "epochs x ceil(num_samples / (batch_size x gradient_accumulation)) = %d steps "
                 "even on one rank, fewer than the %lld needed after warm-up",
                 ao_config_total_steps(cfg, 1), need);
        return cross_error(cfg, "training.epochs", "dataset.num_samples", why);
    }
    if (cfg->scheduler.warmup_steps > cfg->scheduler.total_steps)
        return cross_error(cfg, "scheduler.warmup_steps", "scheduler.total_steps",
                           "warm-up cannot be longer than the schedule");
    if (cfg->fsdp.shard_group_size && cfg->fsdp.sharding_strategy != AO_SHARD_HYBRID)
        return cross_error(cfg, "fsdp.shard_group_size", "fsdp.sharding_strategy",
                           "a shard group size applies only to hybrid_shard (use 0 otherwise)");
    if (cfg->distributed.nccl.min_ctas && cfg->distributed.nccl.max_ctas &&
        cfg->distributed.nccl.min_ctas > cfg->distributed.nccl.max_ctas)
        return cross_error(cfg, "distributed.nccl.min_ctas", "distributed.nccl.max_ctas",
                           "min_ctas cannot exceed max_ctas");
    if (!cfg->training.output_dir[0])
        return cross_error(cfg, "training.output_dir", NULL, "must not be empty");
    const char *trace = cfg->profiling.trace_filename;
    char why[512];
    if (ao_plain_name_problem(trace, 255, "file name", why, sizeof why))
        return cross_error(cfg, "profiling.trace_filename", NULL,
                           "must be a plain file name (written inside the run directory): no '/', "
                           "not . or .., not starting with '-'");
    return 0;
}
