/* The run configuration: one typed struct, filled from the schema's defaults,
 * then a YAML file, then `--override key=value` words, then cross-checked.
 *
 * Code reads values directly (`cfg->training.batch_size`,
 * `cfg->fsdp.sharding_strategy`). Every key is described once, in the schema
 * table (core/schema.c): type, default, range, help. `aorta config doc`
 * prints that table, so the documentation cannot drift from the code.
 *
 * Every value remembers where it came from ("default", "FILE:LINE:COL",
 * "--override" or whatever origin ao_config_set was given), so run.json and
 * `aorta config show` can say why a value is what it is. */
#ifndef AORTA_CORE_CONFIG_H
#define AORTA_CORE_CONFIG_H

#include <stdio.h>

#include "core/error.h"

enum ao_log_level { AO_LOG_DEBUG, AO_LOG_INFO, AO_LOG_WARNING, AO_LOG_ERROR };
_Static_assert((int)AO_LOG_DEBUG == (int)AO_LEVEL_DEBUG && (int)AO_LOG_ERROR == (int)AO_LEVEL_ERROR,
               "logging.level maps onto core/error.h's levels");

/* Floating-point formats for training.mixed_precision (NONE = fp32 compute)
 * and fsdp.param_dtype / fsdp.reduce_dtype. AUTO is param_dtype's null:
 * follow training.mixed_precision. */
enum ao_precision {
    AO_PRECISION_AUTO = -1,
    AO_PRECISION_FP32 = 0,
    AO_PRECISION_FP16,
    AO_PRECISION_BF16,
};

enum ao_sharding { AO_SHARD_FULL, AO_SHARD_GRAD_OP, AO_SHARD_NONE, AO_SHARD_HYBRID };
enum ao_backward_prefetch { AO_PREFETCH_BACKWARD_PRE, AO_PREFETCH_BACKWARD_POST, AO_PREFETCH_NONE };
enum ao_dist_mode { AO_MODE_FSDP, AO_MODE_DDP };
enum ao_data_placement { AO_PLACEMENT_HOST, AO_PLACEMENT_DEVICE };
/* model.attention: the unfused chain, or the fused kernels where the backend has them */
enum ao_attention { AO_ATTENTION_UNFUSED, AO_ATTENTION_FUSED };
/* The same values as data/data.h's enum ao_target_kind (a value passes to
 * ao_data_fill as is); other names, so both headers fit in one file. */
enum ao_data_target { AO_DATASET_TARGET_RANDOM = 0, AO_DATASET_TARGET_TEACHER = 1 };

struct ao_stream_config {
    int priority; /* CUDA convention: 0 default, negative = higher priority */
};

struct ao_config {
    struct {
        enum ao_log_level level;
    } logging;
    struct {
        int epochs;
        int batch_size; /* per rank, per micro-batch */
        int gradient_accumulation;
        enum ao_precision mixed_precision; /* FP32 (none), FP16 or BF16 */
        double grad_clip_norm;             /* 0 = no clipping */
        double loss_scale;                 /* fp16: the dynamic loss scale's initial value */
        int log_interval;
        int max_steps;
        char *output_dir;
        int summary_skip_steps;
        int baseline_steps;
        int tf32;
    } training;
    struct {
        double lr;
        double weight_decay;
        double betas[2];
        double eps;
    } optimizer;
    struct {
        int warmup_steps;
        int total_steps;
    } scheduler;
    struct {
        int num_samples;
        int sequence_length;
        int dense_dim;
        int sparse_features;
        int vocab_size;
        int num_dense_features;
        int seed;
        enum ao_data_placement placement;
        enum ao_data_target target;
    } dataset;
    struct {
        int vocab_size;
        int embedding_dim;
        int num_dense_features;
        int dense_dim;
        int model_dim;
        int num_heads;
        int num_layers;
        double dropout;
        enum ao_attention attention;
        int mlp_hidden_dim;
        int ff_dim; /* 0 = null: use mlp_hidden_dim; read it through ao_config_ff_dim */
    } model;
    struct {
        enum ao_sharding sharding_strategy;
        enum ao_backward_prefetch backward_prefetch;
        int use_orig_params;   /* no effect in aorta */
        int limit_all_gathers; /* gathered buffers in flight; 0 = unlimited */
        int forward_prefetch;
        int sync_module_states;
        char *param_init_device;       /* no effect in aorta */
        enum ao_precision param_dtype; /* AUTO = follow mixed_precision */
        enum ao_precision reduce_dtype;
        int reduce_every_microbatch;
        int shard_group_size; /* hybrid_shard only; 0 = the ranks of one node */
    } fsdp;
    struct { /* the seed's torch.compile block: no effect in aorta */
        int enabled;
        char *backend;
        char *mode;
        int fullgraph;
        int dynamic;
        char *options; /* the mapping as JSON-style flow text */
    } compile;
    struct {
        enum ao_dist_mode mode;
        int enable_overlap;                   /* 0: every collective on the compute stream */
        int overlap_reduce_scatter;           /* no effect in aorta */
        int overlap_clone_for_reduce_scatter; /* no effect in aorta */
        int comm_per_stream;
        double timeout_s;
        double bucket_cap_mb;
        struct {
            int min_ctas; /* 0 = library default, for all three */
            int max_ctas;
            int cga_cluster_size;
        } nccl;
    } distributed;
    struct {
        int num_workers;
        int pin_memory;
    } dataloader;
    /* Named members in metrics.h's ao_stream_id order, so code may also index
     * by_id[AO_STREAM_ALLGATHER]. */
    union {
        struct {
            struct ao_stream_config compute, allgather, reducescatter, allreduce, h2d;
        };
        struct ao_stream_config by_id[5];
    } streams;
    struct {
        int gemm_chunks;
        int sm_count_target; /* 0 = off */
    } compute;
    struct {
        int enabled;
        int interval_ms;
    } telemetry;
    struct {
        int enabled;
        int skip_first; /* -1: the first counted train step (after warm-up and baselines) */
        int wait;
        int warmup;
        int active;
        int repeat;
        int record_shapes;  /* no effect in aorta */
        int profile_memory; /* no effect in aorta */
        int with_stack;     /* no effect in aorta */
        int with_flops;     /* no effect in aorta */
        int tensorboard;    /* no effect in aorta */
        int chrome_trace;
        char *trace_filename;
        int timing;
        int kernel_trace;
        int nvtx;
        int prometheus_port;     /* 0: off; else /metrics served live (export/export.h) */
        char *prometheus_listen; /* the address it listens on */
    } profiling;

    /* Bookkeeping, one entry per schema row; use the functions below. */
    struct ao_config_meta *meta;
};

/* Defaults, then the YAML file at `path` (NULL: defaults only), then each
 * "key=value" of `overrides` in order (a later one wins), then
 * ao_config_validate. Returns 0, or AO_EXIT_USAGE after printing one error
 * line; on error *cfg holds nothing to free (ao_config_free is still safe). */
int ao_config_load(struct ao_config *cfg, const char *path, char *const *overrides,
                   int n_overrides);
void ao_config_free(struct ao_config *cfg);

/* ao_config_load without the cross-key checks (for `aorta config show`, and
 * for sweeps that set more keys before calling ao_config_validate). */
int ao_config_resolve(struct ao_config *cfg, const char *path, char *const *overrides,
                      int n_overrides);

/* Set one key from text typed by the schema (YAML scalar or flow list:
 * "3e-4", "true", "[0.9,0.95]", "null", enums case-insensitive). `origin`
 * is recorded with the value and names the place in error messages
 * ("--override", "sweep.yaml:4:7"). Does not re-run cross-key checks.
 * Returns 0 or AO_EXIT_USAGE after printing. */
int ao_config_set(struct ao_config *cfg, const char *key, const char *value, const char *origin);

/* The cross-key checks (divisibility, matching model/dataset shapes, step
 * counts, ...). Returns 0 or AO_EXIT_USAGE after printing. */
int ao_config_validate(const struct ao_config *cfg);

/* Resolved YAML; with_origins appends "# <origin>" to every value. Seed keys
 * with no effect in aorta that still hold their default are printed commented
 * out, so the output loads back without warnings. */
void ao_config_print_yaml(FILE *out, const struct ao_config *cfg, int with_origins);
/* The markdown reference of every key (docs/config.md). */
void ao_config_print_doc(FILE *out);

enum ao_config_type {
    AO_CFG_INT,
    AO_CFG_FLOAT,
    AO_CFG_BOOL,
    AO_CFG_STRING,
    AO_CFG_ENUM,
    AO_CFG_FLOAT_LIST,
    AO_CFG_INT_OR_BOOL,
    AO_CFG_MAP,
};

struct ao_config_item {
    const char *key; /* "training.batch_size" */
    enum ao_config_type type;
    const char *value; /* as text: "8", "0.0003", "true", "bf16", "[0.9, 0.98]", "null" */
    int is_null;
    const char *origin; /* "default", "config/x.yaml:12:3", "--override" */
    int no_effect;      /* a seed key aorta accepts but ignores */
};

/* Calls visit once per key, in schema order (for run.json). The strings live
 * until visit returns. */
void ao_config_foreach(const struct ao_config *cfg,
                       void (*visit)(void *ctx, const struct ao_config_item *item), void *ctx);

/* The origin of one key, or NULL for a key the schema does not have. */
const char *ao_config_origin(const struct ao_config *cfg, const char *key);

/* How many "has no effect in aorta" warnings the load printed (one per key). */
int ao_config_noop_warnings(const struct ao_config *cfg);

/* Derived values. */
int ao_config_ff_dim(const struct ao_config *cfg);                    /* ff_dim or mlp_hidden_dim */
enum ao_precision ao_config_param_dtype(const struct ao_config *cfg); /* resolves AUTO */
/* Optimizer steps the run makes on `world_size` ranks:
 * min(max_steps, epochs * ceil(num_samples / (world * batch * accumulation))). */
int ao_config_total_steps(const struct ao_config *cfg, int world_size);

const char *ao_precision_name(enum ao_precision p); /* "fp32", "fp16", "bf16" */

#endif
