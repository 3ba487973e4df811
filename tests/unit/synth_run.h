/* Synthetic run directories for the report tests and benchmark: run.json and
 * rank_NN_metrics.jsonl written with the real writers (ao_run_json_write,
 * ao_jsonl_*), each record computed from a realistic op set through
 * ao_overlap_compute. Until `aorta train` exists these stand in for its
 * output; the numbers are known, so tests can check verdicts.
 *
 * One step of one rank: an h2d copy, then forward (4 units) and backward
 * (4 units) on the compute stream for compute_ms in all; communication of
 * comm_ms in all (4 all-gathers then 4 reduce-scatters on their streams),
 * placed so that a share `hidden` of it runs under the compute and the rest
 * after it; then the optimizer. Noise: compute and comm times are scaled by
 * (1 + jitter * g) with g roughly standard normal, per rank and step. */
#ifndef AORTA_TESTS_SYNTH_RUN_H
#define AORTA_TESTS_SYNTH_RUN_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/jsonl.h"
#include "core/metrics.h"
#include "core/rundir.h"
#include "runs/run_end.h"

typedef struct synth_opts {
    int ranks, steps;
    int baseline_steps; /* compute_only and comm_only records after the train steps */
    double compute_ms, comm_ms, hidden, jitter;
    int slow_rank;      /* -1: none */
    double slow_factor; /* compute of slow_rank scaled by it */
    int profile_every;  /* every k-th step carries ops; 0: none */
    int telemetry;      /* write extra.telemetry */
    int kernels;        /* a kernel trace as profiling.kernel_trace writes it (the writer's own
                           ao_trace_gen_kernel_extra): overlap_kernels every step, kernels in
                           profiled steps, one kernel per op (synth_kernel_name) */
    const char *strategy, *nccl_algo; /* config knob and NCCL_ALGO (NULL: unset) */
    long long skip_config;            /* training.summary_skip_steps in run.json; < 0: absent */
    uint64_t seed;
} synth_opts;

static inline synth_opts synth_defaults(void)
{
    synth_opts o = {.ranks = 2,
                    .steps = 50,
                    .baseline_steps = 0,
                    .compute_ms = 10,
                    .comm_ms = 4,
                    .hidden = 0.75,
                    .jitter = 0.05,
                    .slow_rank = -1,
                    .slow_factor = 1,
                    .profile_every = 0,
                    .telemetry = 0,
                    .kernels = 0,
                    .strategy = "full_shard",
                    .nccl_algo = NULL,
                    .skip_config = 5,
                    .seed = 1};
    return o;
}

static inline double synth_uniform(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return (double)(x >> 11) * 0x1.0p-53;
}

/* Irwin-Hall: four uniforms, centred and scaled to unit variance. */
static inline double synth_normal(uint64_t *s)
{
    double sum = 0;
    for (int i = 0; i < 4; i++) sum += synth_uniform(s);
    return (sum - 2.0) * 1.7320508075688772;
}

typedef struct synth_config {
    const synth_opts *o;
    char skip[32];
} synth_config;

static inline void synth_visit(const void *config, ao_config_emit_fn emit, void *ctx)
{
    const synth_config *c = config;
    ao_config_entry e[] = {
        {"fsdp.sharding_strategy", ao_json_str(c->o->strategy), "enum", "--override"},
        {"fsdp.forward_prefetch", ao_json_bool(1), "bool", "default"},
        {"fsdp.param_dtype", ao_json_str("bf16"), "enum", "default"},
        {"streams.allgather.priority", ao_json_int(-1), "int", "default"},
        {"training.summary_skip_steps", ao_json_int(c->o->skip_config), "int", "default"},
    };
    size_t n = sizeof e / sizeof e[0];
    for (size_t i = 0; i < n; i++) {
        if (c->o->skip_config < 0 && i == n - 1) continue;
        emit(ctx, &e[i]);
    }
}

static inline int synth_telemetry(void *ctx, yajl_gen g)
{
    const double *v = ctx;
    ao_json_gen_str(g, "telemetry");
    yajl_gen_map_open(g);
    ao_json_gen_str(g, "gpu_util");
    ao_json_gen_double(g, v[0]);
    ao_json_gen_str(g, "power_w");
    ao_json_gen_double(g, v[1]);
    yajl_gen_map_close(g);
    return 0;
}

/* The kernel a synthetic op stands for, as CUPTI would name it. */
static inline const char *synth_kernel_name(const char *op)
{
    static const char *const map[][2] = {
        {"h2d", "memcpy HtoD"},
        {"forward", "sm90_xmma_gemm_bf16bf16_fwd"},
        {"backward", "sm90_xmma_gemm_bf16bf16_bwd"},
        {"allgather", "ncclDevKernel_AllGather_RING_LL"},
        {"reducescatter", "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"},
        {"optimizer", "multi_tensor_apply_kernel_adamw"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(op, map[i][0]) == 0) return map[i][1];
    return op;
}

typedef struct synth_extra {
    const double *tel; /* NULL: no telemetry */
    int kernels;
    ao_overlap kov;    /* of the kernels */
    const ao_op *kops; /* NULL: not a profiled step */
    size_t nk;
} synth_extra;

static inline int synth_extra_gen(void *ctx, yajl_gen g)
{
    const synth_extra *x = ctx;
    if (x->tel && synth_telemetry((void *)x->tel, g) != 0) return -1;
    if (x->kernels && ao_trace_gen_kernel_extra(g, &x->kov, x->kops, x->nk) != yajl_gen_status_ok)
        return -1;
    return 0;
}

/* The ops of one step starting at t0 (µs); returns how many (<= 20). */
static inline size_t synth_ops(ao_op *ops, double t0, double C, double M, double hidden,
                               const char *phase)
{
    size_t n = 0;
    int with_compute = strcmp(phase, "comm_only") != 0;
    int with_comm = strcmp(phase, "compute_only") != 0;
    double c0 = t0 + 0.05 * C * 1000; /* after the input copy */
    ops[n++] =
        (ao_op){t0, c0, 1 << 20, "h2d", -1, AO_STREAM_H2D, AO_CLASS_COPY, AO_KIND_NONE, 0, 0};
    double t = c0, cend = c0;
    if (with_compute) {
        for (int u = 0; u < 4; u++, t += 0.35 * C * 250)
            ops[n++] = (ao_op){t,
                               t + 0.35 * C * 250,
                               0,
                               "forward",
                               (int16_t)u,
                               AO_STREAM_COMPUTE,
                               AO_CLASS_COMPUTE,
                               AO_KIND_NONE,
                               0,
                               0};
        for (int u = 3; u >= 0; u--, t += 0.6 * C * 250)
            ops[n++] = (ao_op){t,
                               t + 0.6 * C * 250,
                               0,
                               "backward",
                               (int16_t)u,
                               AO_STREAM_COMPUTE,
                               AO_CLASS_COMPUTE,
                               AO_KIND_NONE,
                               0,
                               0};
        cend = t;
    }
    double mend = cend;
    if (with_comm) {
        double s = with_compute ? cend - hidden * M * 1000 : c0;
        if (s < c0) s = c0;
        for (int i = 0; i < 8; i++) {
            int ag = i < 4;
            double d = (ag ? 0.4 : 0.6) * M * 250;
            ops[n++] = (ao_op){s,
                               s + d,
                               ag ? 8u << 20 : 16u << 20,
                               ag ? "allgather" : "reducescatter",
                               (int16_t)(i % 4),
                               ag ? AO_STREAM_ALLGATHER : AO_STREAM_REDUCESCATTER,
                               AO_CLASS_COMM,
                               ag ? AO_KIND_ALLGATHER : AO_KIND_REDUCESCATTER,
                               0,
                               0};
            s += d;
        }
        mend = s;
    }
    if (with_compute) {
        double o0 = cend > mend ? cend : mend;
        ops[n++] = (ao_op){o0,
                           o0 + 0.05 * C * 1000,
                           0,
                           "optimizer",
                           -1,
                           AO_STREAM_COMPUTE,
                           AO_CLASS_COMPUTE,
                           AO_KIND_NONE,
                           0,
                           0};
    }
    return n;
}

/* Write the run directory `dir` (created; its parent must exist). 0 or -1. */
static inline int synth_run_write(const char *dir, const synth_opts *o)
{
    if (mkdir(dir, 0755) != 0) return -1;
    char *path = ao_asprintf("%s/%s", dir, AO_RUN_JSON);
    synth_config cfg = {o, ""};
    char algo[64];
    snprintf(algo, sizeof algo, "NCCL_ALGO=%s", o->nccl_algo ? o->nccl_algo : "");
    char *envp[] = {o->nccl_algo ? algo : "HOME=/root", "NCCL_DEBUG=WARN", NULL};
    char *argv[] = {"aorta", "train", NULL};
    const char *slash = strrchr(dir, '/');
    ao_run_header h = {.run_id = slash ? slash + 1 : dir,
                       .command = "train",
                       .argc = 2,
                       .argv = argv,
                       .host = "synthetic",
                       .world_size = o->ranks,
                       .config_visit = synth_visit,
                       .config = &cfg,
                       .envp = envp};
    int rc = ao_run_json_write(path, &h);
    free(path);
    if (rc) return -1;
    ao_op ops[24], kops[24];
    for (int r = 0; r < o->ranks && rc == 0; r++) {
        uint64_t rng = o->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)r * 7919 + 1;
        char *name = ao_rank_file_name(r, o->ranks, AO_RANK_METRICS);
        path = ao_asprintf("%s/%s", dir, name);
        free(name);
        ao_jsonl_writer *w = ao_jsonl_open(path, 256);
        free(path);
        if (!w) return -1;
        double t0 = 0;
        int total = o->steps + 2 * o->baseline_steps;
        for (int step = 0; step < total && rc == 0; step++) {
            const char *phase = step < o->steps                       ? "train"
                                : step < o->steps + o->baseline_steps ? "compute_only"
                                                                      : "comm_only";
            double C = o->compute_ms * (1 + o->jitter * synth_normal(&rng));
            double M = o->comm_ms * (1 + o->jitter * synth_normal(&rng));
            if (r == o->slow_rank) C *= o->slow_factor;
            size_t n = synth_ops(ops, t0, C, M, o->hidden, phase);
            ao_iter_record rec;
            ao_iter_record_init(&rec);
            rec.rank = r;
            rec.world_size = o->ranks;
            rec.step = step;
            rec.phase = phase;
            ao_overlap_compute(ops, n, o->ranks, &rec.m);
            rec.wall_time = 1.7e9 + rec.m.window_start_us * 1e-6;
            if (strcmp(phase, "train") == 0) {
                rec.loss = 0.7 - 0.0001 * step;
                rec.tokens_per_s = 4096.0 * o->ranks / (rec.m.step_ms * 1e-3);
                rec.samples = 32;
            }
            if (o->profile_every > 0 && step % o->profile_every == 0) {
                rec.ops = ops;
                rec.nops = n;
            }
            double tel[2] = {80 + 10 * synth_uniform(&rng), 300 + 50 * synth_uniform(&rng)};
            synth_extra x;
            memset(&x, 0, sizeof x);
            x.tel = o->telemetry ? tel : NULL;
            x.kernels = o->kernels;
            x.nk = n;
            if (o->kernels) {
                /* one kernel per op, on the op's stream as its lane */
                for (size_t i = 0; i < n; i++) {
                    kops[i] = ops[i];
                    kops[i].name = synth_kernel_name(ops[i].name);
                    kops[i].unit = -1;
                }
                ao_overlap_compute(kops, n, o->ranks, &x.kov);
                if (rec.ops) x.kops = kops;
            }
            if (o->telemetry || o->kernels) {
                rec.extra = synth_extra_gen;
                rec.extra_ctx = &x;
            }
            if (ao_jsonl_append(w, &rec) != 0) rc = -1;
            t0 = rec.m.window_end_us + 50;
        }
        if (ao_jsonl_close(w) != 0) rc = -1;
    }
    return rc;
}

#endif
