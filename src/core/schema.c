/* Every configuration key, once. The key string is the struct member path, so
 * the table cannot name a member that does not exist. Rows of one section
 * stay together: the YAML printer nests by consecutive prefixes. Defaults are
 * the seed's config/default.yaml; keys the seed lacks have aorta's defaults. */
#include <limits.h>
#include <math.h>
#include <stddef.h>

#include "core/schema.h"

#define OFF(f) offsetof(struct ao_config, f)
#define BIG    ((double)INT_MAX)
#define NONE   HUGE_VAL

#define INT(f, d, lo, hi, h)                                                                       \
    {                                                                                              \
        .key = #f, .type = AO_CFG_INT, .offset = OFF(f), .def = d, .min = lo, .max = hi, .help = h \
    }
#define FLOAT(f, d, lo, hi, h)                                                                     \
    {                                                                                              \
        .key = #f, .type = AO_CFG_FLOAT, .offset = OFF(f), .def = d, .min = lo, .max = hi,         \
        .help = h                                                                                  \
    }
#define FLOAT_GT(f, d, lo, hi, h)                                                                  \
    {                                                                                              \
        .key = #f, .type = AO_CFG_FLOAT, .flags = AO_KEY_MIN_EXCLUSIVE, .offset = OFF(f),          \
        .def = d, .min = lo, .max = hi, .help = h                                                  \
    }
#define BOOL(f, d, h)                                                                              \
    {                                                                                              \
        .key = #f, .type = AO_CFG_BOOL, .offset = OFF(f), .def = d, .help = h                      \
    }
#define STRING(f, d, h)                                                                            \
    {                                                                                              \
        .key = #f, .type = AO_CFG_STRING, .offset = OFF(f), .def = d, .help = h                    \
    }
#define ENUM(f, d, n, h)                                                                           \
    {                                                                                              \
        .key = #f, .type = AO_CFG_ENUM, .offset = OFF(f), .def = d, .names = n, .help = h          \
    }
/* Seed keys with no meaning in aorta: typed as in the seed, warned about. */
#define NOOP_BOOL(f, d, h)                                                                         \
    {                                                                                              \
        .key = #f, .type = AO_CFG_BOOL, .flags = AO_KEY_NO_EFFECT, .offset = OFF(f), .def = d,     \
        .help = h                                                                                  \
    }
#define NOOP_STRING(f, d, h)                                                                       \
    {                                                                                              \
        .key = #f, .type = AO_CFG_STRING, .flags = AO_KEY_NO_EFFECT, .offset = OFF(f), .def = d,   \
        .help = h                                                                                  \
    }

static const struct ao_enum_name log_levels[] = {{"DEBUG", AO_LOG_DEBUG},
                                                 {"INFO", AO_LOG_INFO},
                                                 {"WARNING", AO_LOG_WARNING},
                                                 {"ERROR", AO_LOG_ERROR},
                                                 {NULL, 0}};
static const struct ao_enum_name mixed_precisions[] = {{"none", AO_PRECISION_FP32},
                                                       {"fp32", AO_PRECISION_FP32},
                                                       {"fp16", AO_PRECISION_FP16},
                                                       {"bf16", AO_PRECISION_BF16},
                                                       {NULL, 0}};
static const struct ao_enum_name dtypes[] = {{"fp32", AO_PRECISION_FP32},
                                             {"fp16", AO_PRECISION_FP16},
                                             {"bf16", AO_PRECISION_BF16},
                                             {NULL, 0}};
static const struct ao_enum_name placements[] = {
    {"host", AO_PLACEMENT_HOST}, {"device", AO_PLACEMENT_DEVICE}, {NULL, 0}};
static const struct ao_enum_name attentions[] = {
    {"unfused", AO_ATTENTION_UNFUSED}, {"fused", AO_ATTENTION_FUSED}, {NULL, 0}};
static const struct ao_enum_name targets[] = {
    {"teacher", AO_DATASET_TARGET_TEACHER}, {"random", AO_DATASET_TARGET_RANDOM}, {NULL, 0}};
static const struct ao_enum_name shardings[] = {{"full_shard", AO_SHARD_FULL},
                                                {"shard_grad_op", AO_SHARD_GRAD_OP},
                                                {"no_shard", AO_SHARD_NONE},
                                                {"hybrid_shard", AO_SHARD_HYBRID},
                                                {NULL, 0}};
static const struct ao_enum_name prefetches[] = {{"BACKWARD_PRE", AO_PREFETCH_BACKWARD_PRE},
                                                 {"BACKWARD_POST", AO_PREFETCH_BACKWARD_POST},
                                                 {"NONE", AO_PREFETCH_NONE},
                                                 {NULL, 0}};
static const struct ao_enum_name modes[] = {
    {"fsdp", AO_MODE_FSDP}, {"ddp", AO_MODE_DDP}, {NULL, 0}};

#define NOT_TORCH  "aorta has no torch.compile; its kernels are fixed C/CUDA."
#define NOT_KINETO "aorta records its own event timeline, not the PyTorch profiler's."

const struct ao_key ao_schema[] = {
    ENUM(logging.level, "INFO", log_levels,
         "Least severe lines printed: DEBUG (also every step's line and the launcher's), INFO "
         "(progress lines), WARNING (warnings and the final table only) or ERROR (no "
         "warnings); the run's log file keeps every line."),

    INT(training.epochs, "1", 1, BIG,
        "Passes over dataset.num_samples; steps = min(max_steps, epochs x ceil(num_samples / "
        "global batch)), global batch = ranks x batch_size x gradient_accumulation."),
    INT(training.batch_size, "8", 1, BIG, "Samples per rank per micro-batch."),
    INT(training.gradient_accumulation, "1", 1, 65536, "Micro-batches per optimizer step."),
    ENUM(training.mixed_precision, "bf16", mixed_precisions,
         "GEMM precision of forward and backward: none (fp32; TF32 with training.tf32), bf16 "
         "or fp16 (16-bit operands and fp32 accumulation; master weights, reductions and the "
         "residual stream in fp32, buffers that only GEMMs, softmax and GELU read in 16 bits; "
         "fp16 adds dynamic loss scaling); fp32 is accepted as a synonym of none."),
    FLOAT_GT(training.loss_scale, "65536", 0, 3.4e38,
             "fp16 only: initial dynamic loss scale (the loss is multiplied by it before backward; "
             "halved on inf/NaN gradients, which skip the step; doubled after 2000 good steps), "
             "as torch's GradScaler."),
    FLOAT(training.grad_clip_norm, "1.0", 0, NONE,
          "Clip the global gradient norm (across all shards) to this; 0 disables clipping."),
    INT(training.log_interval, "5", 1, BIG, "Steps between log lines and JSONL flushes."),
    INT(training.max_steps, "200", 1, BIG, "Upper bound on optimizer steps (see epochs)."),
    STRING(training.output_dir, "artifacts",
           "Directory that receives one sub-directory per run (never appended to)."),
    INT(training.summary_skip_steps, "5", 0, BIG,
        "Warm-up steps left out of summaries; baselines run right after them."),
    INT(training.baseline_steps, "0", 0, BIG,
        "After warm-up, this many compute-only steps and as many comm-only steps, for the "
        "isolated times of the overlap decomposition; 0 = none."),
    BOOL(training.tf32, "false", "Allow TF32 tensor-core math for fp32 GEMMs (CUDA)."),

    FLOAT_GT(optimizer.lr, "0.0003", 0, NONE, "AdamW peak learning rate."),
    FLOAT(optimizer.weight_decay, "0.01", 0, NONE, "AdamW decoupled weight decay."),
    {.key = "optimizer.betas",
     .type = AO_CFG_FLOAT_LIST,
     .flags = AO_KEY_MAX_EXCLUSIVE,
     .offset = OFF(optimizer.betas),
     .def = "[0.9, 0.98]",
     .min = 0,
     .max = 1,
     .len = 2,
     .help = "AdamW [beta1, beta2]."},
    FLOAT_GT(optimizer.eps, "1e-8", 0, 1, "AdamW epsilon added to the denominator."),

    INT(scheduler.warmup_steps, "100", 0, BIG,
        "Steps of linear learning-rate warm-up from 0 to optimizer.lr."),
    INT(scheduler.total_steps, "2000", 1, BIG,
        "Step at which the linear decay after warm-up reaches 0."),

    INT(dataset.num_samples, "10000", 1, BIG, "Samples in one epoch of the synthetic dataset."),
    INT(dataset.sequence_length, "64", 1, 1048576, "Tokens per sample (T)."),
    INT(dataset.dense_dim, "128", 1, 1048576,
        "Width of each dense feature (D); must equal model.dense_dim."),
    INT(dataset.sparse_features, "32", 1, 65536, "Categorical ids per token (S)."),
    INT(dataset.vocab_size, "60000", 1, BIG,
        "Categorical id range (V); must equal model.vocab_size."),
    INT(dataset.num_dense_features, "16", 1, 65536,
        "Dense features per token (F); must equal model.num_dense_features."),
    INT(dataset.seed, "42", 0, BIG,
        "Seed of the counter-based RNG: samples, initial weights and dropout masks."),
    ENUM(dataset.placement, "host", placements,
         "host: samples made by dataloader threads and copied on the h2d stream; device: made "
         "on the device, no copy."),
    ENUM(dataset.target, "random", targets,
         "Labels: random (no signal, the seed's behaviour) or teacher (a fixed random teacher "
         "network, so the loss can fall)."),

    INT(model.vocab_size, "60000", 1, BIG, "Embedding rows (V); must equal dataset.vocab_size."),
    INT(model.embedding_dim, "192", 1, 1048576, "Embedding width (E)."),
    INT(model.num_dense_features, "16", 1, 65536,
        "Dense features per token (F); must equal dataset.num_dense_features."),
    INT(model.dense_dim, "128", 1, 1048576,
        "Width of each dense feature (D); must equal dataset.dense_dim."),
    INT(model.model_dim, "768", 1, 1048576,
        "Transformer width (d); must be divisible by num_heads."),
    INT(model.num_heads, "12", 1, 4096, "Attention heads per encoder layer."),
    INT(model.num_layers, "8", 1, 4096, "Encoder layers (one FSDP unit each)."),
    {.key = "model.dropout",
     .type = AO_CFG_FLOAT,
     .flags = AO_KEY_MAX_EXCLUSIVE,
     .offset = OFF(model.dropout),
     .def = "0.1",
     .min = 0,
     .max = 1,
     .help = "Dropout probability in the encoder layers."},
    ENUM(model.attention, "fused", attentions,
         "fused: flash-style kernels (no T x T matrix in memory) where the backend has them "
         "(cuda, bf16/fp16 GEMMs, head dim 64 or 128, sequence length a multiple of 64), the "
         "unfused chain elsewhere; unfused: batched GEMMs around a softmax-dropout kernel "
         "everywhere (the chain the CPU reference computes)."),
    INT(model.mlp_hidden_dim, "2048", 1, 1048576,
        "Hidden width of the scoring head (and of the FFN when ff_dim is null)."),
    {.key = "model.ff_dim",
     .type = AO_CFG_INT,
     .flags = AO_KEY_NULLABLE,
     .offset = OFF(model.ff_dim),
     .def = "null",
     .min = 1,
     .max = 1048576,
     .null_value = 0,
     .help = "Hidden width of each encoder layer's FFN; null = model.mlp_hidden_dim."},

    ENUM(fsdp.sharding_strategy, "full_shard", shardings,
         "full_shard (ZeRO-3), shard_grad_op (ZeRO-2), no_shard (replicated, all-reduce), or "
         "hybrid_shard (full_shard within groups of shard_group_size, all-reduce across)."),
    ENUM(fsdp.backward_prefetch, "BACKWARD_PRE", prefetches,
         "When unit i-1's all-gather is issued in backward: BACKWARD_PRE before unit i's "
         "backward compute, BACKWARD_POST after it, NONE only when needed."),
    NOOP_BOOL(fsdp.use_orig_params, "true",
              "PyTorch FSDP's original-parameter views; aorta's units always own flat buffers."),
    {.key = "fsdp.limit_all_gathers",
     .type = AO_CFG_INT_OR_BOOL,
     .offset = OFF(fsdp.limit_all_gathers),
     .def = "true",
     .min = 0,
     .max = 1024,
     .help = "Gathered-parameter buffers in flight: true = 2, false or 0 = unlimited, an "
             "integer = that many; the all-gather stream waits on the device, never the host."},
    BOOL(fsdp.forward_prefetch, "true",
         "Issue unit i+1's all-gather before unit i's forward compute."),
    BOOL(fsdp.sync_module_states, "true",
         "Broadcast rank 0's initial parameters to all ranks at start-up."),
    NOOP_STRING(fsdp.param_init_device, "cpu",
                "PyTorch's device for parameter init; aorta initializes shards in place from "
                "dataset.seed."),
    {.key = "fsdp.param_dtype",
     .type = AO_CFG_ENUM,
     .flags = AO_KEY_NULLABLE,
     .offset = OFF(fsdp.param_dtype),
     .def = "null",
     .names = dtypes,
     .null_value = AO_PRECISION_AUTO,
     .help = "Format of gathered parameters (all-gather bytes): fp32, fp16, bf16, or null = "
             "follow training.mixed_precision."},
    ENUM(fsdp.reduce_dtype, "fp32", dtypes,
         "Format gradients are reduced in (reduce-scatter / all-reduce bytes)."),
    BOOL(fsdp.reduce_every_microbatch, "true",
         "Reduce-scatter gradients after every micro-batch (FSDP2 default); false = once per "
         "step, after the last one."),
    INT(fsdp.shard_group_size, "0", 0, 65536,
        "hybrid_shard only: ranks per sharding group; 0 = the ranks of one node."),

    NOOP_BOOL(compile.enabled, "false", NOT_TORCH),
    NOOP_STRING(compile.backend, "inductor", NOT_TORCH),
    NOOP_STRING(compile.mode, "max-autotune", NOT_TORCH),
    NOOP_BOOL(compile.fullgraph, "false", NOT_TORCH),
    NOOP_BOOL(compile.dynamic, "false", NOT_TORCH),
    {.key = "compile.options",
     .type = AO_CFG_MAP,
     .flags = AO_KEY_NO_EFFECT,
     .offset = OFF(compile.options),
     .def = "{}",
     .help = "aorta has no torch.compile; any mapping is accepted and ignored."},

    ENUM(distributed.mode, "fsdp", modes,
         "fsdp: shard as fsdp.sharding_strategy says; ddp: replicate and all-reduce gradient "
         "buckets (as no_shard)."),
    BOOL(distributed.enable_overlap, "true",
         "false runs every collective on the compute stream: the serialized baseline."),
    NOOP_BOOL(distributed.overlap_reduce_scatter, "true",
              "aorta always runs reduce-scatter on its own stream; use enable_overlap."),
    NOOP_BOOL(distributed.overlap_clone_for_reduce_scatter, "true",
              "a PyTorch hook's gradient copy; aorta reduces from its own flat buffers."),
    BOOL(distributed.comm_per_stream, "true",
         "One communicator per comm stream, so an all-gather and a reduce-scatter can run at "
         "once; false = one shared communicator."),
    FLOAT_GT(distributed.timeout_s, "300", 0, NONE,
             "Seconds before a collective or communicator init counts as hung and is aborted."),
    FLOAT_GT(distributed.bucket_cap_mb, "25", 0, NONE,
             "ddp / no_shard: gradient bucket size in MiB for all-reduce."),
    INT(distributed.nccl.min_ctas, "0", 0, 65536,
        "NCCL/RCCL communicator minCTAs; 0 = library default."),
    INT(distributed.nccl.max_ctas, "0", 0, 65536,
        "NCCL/RCCL communicator maxCTAs; 0 = library default."),
    INT(distributed.nccl.cga_cluster_size, "0", 0, 8,
        "NCCL communicator cgaClusterSize; 0 = library default."),

    INT(dataloader.num_workers, "4", 0, 1024,
        "Host threads making samples (placement host); 0 = made on the training thread."),
    BOOL(dataloader.pin_memory, "true",
         "Pinned host buffers for the h2d copies (false = pageable, the copy is synchronous)."),

    INT(streams.compute.priority, "0", -1024, 1024,
        "compute stream priority; 0 default, negative = higher (as CUDA), clamped to the "
        "device's range."),
    INT(streams.allgather.priority, "0", -1024, 1024, "allgather stream priority (as compute)."),
    INT(streams.reducescatter.priority, "0", -1024, 1024,
        "reducescatter stream priority (as compute)."),
    INT(streams.allreduce.priority, "0", -1024, 1024, "allreduce stream priority (as compute)."),
    INT(streams.h2d.priority, "0", -1024, 1024, "h2d copy stream priority (as compute)."),

    INT(compute.gemm_chunks, "1", 1, 1024,
        "Split each large GEMM into this many chunks so communication kernels can be "
        "scheduled between them."),
    INT(compute.sm_count_target, "0", 0, 65536,
        "cuBLASLt SM-count target for GEMMs (leaves SMs to communication); 0 = off."),

    BOOL(telemetry.enabled, "false",
         "Sample GPU clocks, power, temperature and utilization (NVML / rocm-smi)."),
    INT(telemetry.interval_ms, "100", 1, 3600000, "Milliseconds between telemetry samples."),

    BOOL(profiling.enabled, "false",
         "Record per-op intervals in the JSONL during active windows of the "
         "wait/warmup/active/repeat schedule."),
    INT(profiling.skip_first, "-1", -1, BIG,
        "Schedule: iterations before the first cycle (torch's skip_first); -1 = after "
        "training.summary_skip_steps and the baselines, so windows fall on counted steps."),
    INT(profiling.wait, "1", 0, BIG, "Schedule: steps skipped before each cycle."),
    INT(profiling.warmup, "1", 0, BIG, "Schedule: steps run but not recorded after wait."),
    INT(profiling.active, "2", 1, BIG, "Schedule: steps recorded per cycle."),
    INT(profiling.repeat, "1", 0, BIG, "Schedule: cycles; 0 = until the end of the run."),
    NOOP_BOOL(profiling.record_shapes, "true", NOT_KINETO),
    NOOP_BOOL(profiling.profile_memory, "true", NOT_KINETO),
    NOOP_BOOL(profiling.with_stack, "false", NOT_KINETO),
    NOOP_BOOL(profiling.with_flops, "false", NOT_KINETO),
    NOOP_BOOL(profiling.tensorboard, "true",
              "aorta writes no TensorBoard files; use chrome_trace or aorta report."),
    BOOL(profiling.chrome_trace, "false",
         "Write a Chrome/Perfetto trace of every rank's streams to trace_filename."),
    STRING(profiling.trace_filename, "trace.json",
           "File name of the Chrome trace inside the run directory (no '/')."),
    BOOL(profiling.timing, "true",
         "Event pairs around every op and per-iteration metrics; false = step time only."),
    BOOL(profiling.kernel_trace, "false",
         "Also record a CUPTI kernel trace to check the event timeline (CUDA); drains the "
         "device after each iteration."),
    BOOL(profiling.nvtx, "true", "NVTX / roctx ranges around steps and ops for nsys or rocprof."),
    INT(profiling.prometheus_port, "0", 0, 65535,
        "Serve every rank's latest step on http://prometheus_listen:PORT/metrics for "
        "Prometheus while the run lasts (docs/prometheus.md); 0 = off."),
    STRING(profiling.prometheus_listen, "127.0.0.1",
           "Numeric address prometheus_port listens on: 127.0.0.1 this host only, 0.0.0.0 or "
           ":: every interface."),
};

const int ao_schema_count = (int)(sizeof ao_schema / sizeof ao_schema[0]);
