/* Where a finding sits and which knobs move it. The advice comes from the
 * seeds' tuning table (000), their bottleneck notes (003 T1-T8, T23) and
 * what this project measured (bench/RESULTS.md); the run's own settings
 * (run.json) decide which knob comes first and which is already turned. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/intervals.h"
#include "core/text.h"
#include "diagnose/internal.h"

/* ---- the run's settings ------------------------------------------------------- */

/* config[key] as text ("" when absent). */
static const char *cfg(const ao_run_data *run, const char *key, char *buf, size_t n)
{
    ao_json_value_text(ao_run_config_value(run, key), buf, n);
    return buf;
}

static int cfg_is(const ao_run_data *run, const char *key, const char *value)
{
    char buf[64];
    return strcasecmp(cfg(run, key, buf, sizeof buf), value) == 0;
}

/* An environment variable run.json recorded, or NULL. */
static const char *env(const ao_run_data *run, const char *name)
{
    yajl_val e = ao_json_member(ao_run_config_value(run, "env"), name);
    return YAJL_IS_STRING(e) ? e->u.string : NULL;
}

__attribute__((format(printf, 3, 4))) static void add(char *buf, size_t n, const char *fmt, ...)
{
    if (strlen(buf) + 3 >= n) return;
    if (*buf) ao_appendf(buf, n, "; ");
    va_list ap;
    va_start(ap, fmt);
    ao_vappendf(buf, n, fmt, ap);
    va_end(ap);
}

/* A single hardware queue serializes every stream: first for any exposure. */
static void one_queue(const ao_run_data *run, char *buf, size_t n)
{
    const char *q = env(run, "CUDA_DEVICE_MAX_CONNECTIONS");
    if (q && atoi(q) == 1)
        add(buf, n,
            "CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream in one hardware queue: unset it "
            "(aorta then uses 32; large 56.5 -> 52.4 ms a step on 2xH200, bench/RESULTS.md "
            "session 10)");
    q = env(run, "GPU_MAX_HW_QUEUES");
    if (q && atoi(q) == 1) add(buf, n, "GPU_MAX_HW_QUEUES=1: one hardware queue, raise it");
}

/* ---- input and host ------------------------------------------------------------ */

void ao_diag_where_input(const ao_run_data *run, ao_finding *f)
{
    char pl[32], nw[32], pin[32];
    snprintf(f->where, sizeof f->where,
             "the data loader of rank %d: dataset.placement %s, dataloader.num_workers %s, "
             "pin_memory %s",
             f->rank, *cfg(run, "dataset.placement", pl, sizeof pl) ? pl : "?",
             *cfg(run, "dataloader.num_workers", nw, sizeof nw) ? nw : "?",
             *cfg(run, "dataloader.pin_memory", pin, sizeof pin) ? pin : "?");
}

void ao_diag_knobs_input(const ao_run_data *run, ao_finding *f)
{
    char nw[32];
    cfg(run, "dataloader.num_workers", nw, sizeof nw);
    if (cfg_is(run, "dataset.placement", "host")) {
        add(f->knobs, sizeof f->knobs,
            "dataloader.num_workers (now %s): more workers fill batches in parallel (seed 003 T4)",
            *nw ? nw : "?");
        add(f->knobs, sizeof f->knobs,
            "dataset.placement: device generates the batches on the device, no host fill or copy");
        if (cfg_is(run, "dataloader.pin_memory", "false"))
            add(f->knobs, sizeof f->knobs, "dataloader.pin_memory: true (seed 003 T6)");
    } else {
        add(f->knobs, sizeof f->knobs,
            "the loader's source (the records name no host placement: an external trace's "
            "loader; seed 003 T4-T8)");
    }
}

void ao_diag_knobs_host(const ao_run_data *run, ao_finding *f)
{
    if (cfg_is(run, "profiling.nvtx", "true"))
        add(f->knobs, sizeof f->knobs, "profiling.nvtx: false (a range per op costs host time)");
    char ch[32];
    cfg(run, "compute.gemm_chunks", ch, sizeof ch);
    if (*ch && atoi(ch) > 1)
        add(f->knobs, sizeof f->knobs, "compute.gemm_chunks: 1 (now %s: more launches per GEMM)",
            ch);
    add(f->knobs, sizeof f->knobs,
        "fewer, larger launches: a larger training.batch_size per launch (seed 003 T18), CUDA "
        "graphs or fused kernels (seed 003 T15); see the host side with nsys (seed 003 T20)");
    add(f->knobs, sizeof f->knobs,
        "keep other work off the host cores (CPU affinity; logging.level INFO, not DEBUG)");
}

void ao_diag_knobs_straggler(const ao_run_data *run, const ao_diag_terms *t, int c, ao_finding *f)
{
    const char *slow = env(run, "AORTA_TEST_SLOW_RANK");
    if (slow)
        add(f->knobs, sizeof f->knobs,
            "AORTA_TEST_SLOW_RANK=%s is set: the test-only hook slowed that rank on purpose", slow);
    if (isfinite(t[c].data_wait) && t[c].data_wait > 0)
        add(f->knobs, sizeof f->knobs, "its loader (data wait %.3g ms a step on that rank)",
            t[c].data_wait);
    add(f->knobs, sizeof f->knobs,
        "that rank's device: clocks and throttling (telemetry.enabled), other jobs on it, its "
        "NUMA and PCIe placement; compare ranks with `aorta coll` and `aorta sdma`");
}

/* ---- communication: where ----------------------------------------------------- */

enum { PASS_FORWARD, PASS_BACKWARD, PASS_OPTIMIZER, NPASS };
static const char *const pass_names[NPASS] = {"forward", "backward", "after backward"};

#define MAX_UNITS 512

typedef struct exposure {
    double pass_ms[NPASS];
    double unit_ms[NPASS][MAX_UNITS];
    double first_ms; /* the step's first op of the kind (unit 0's gather) */
    int first_unit;
    int nsteps, ops;
    uint64_t bytes;
} exposure;

/* Exposure of every op of kind k in one record, by pass (the order ops were
 * issued: forward until the first backward compute op, backward until the
 * clip or optimizer) and unit. */
static void expose_record(const ao_iter_record *r, ao_coll_kind k, exposure *x)
{
    size_t n = r->nops;
    ao_ival *c = ao_malloc((2 * n + 2) * sizeof *c), *tmp = c + n;
    size_t nc = 0;
    for (size_t i = 0; i < n; i++)
        if (r->ops[i].cls == AO_CLASS_COMPUTE)
            c[nc++] = (ao_ival){r->ops[i].start_us, r->ops[i].end_us};
    nc = ao_iv_normalize(c, nc);
    int pass = PASS_FORWARD, first = 1;
    for (size_t i = 0; i < n; i++) {
        const ao_op *op = &r->ops[i];
        if (op->cls == AO_CLASS_COMPUTE && op->name) {
            if (pass == PASS_FORWARD && strcmp(op->name, "backward") == 0) pass = PASS_BACKWARD;
            if (strcmp(op->name, "clip") == 0 || strcmp(op->name, "optimizer") == 0)
                pass = PASS_OPTIMIZER;
        }
        if (op->cls != AO_CLASS_COMM || op->kind != k) continue;
        ao_ival iv = {op->start_us, op->end_us};
        double e = ao_iv_length(tmp, ao_iv_subtract(&iv, 1, c, nc, tmp)) / 1000.0;
        int u = op->unit >= 0 && op->unit < MAX_UNITS ? op->unit : 0;
        x->pass_ms[pass] += e;
        x->unit_ms[pass][u] += e;
        x->ops++;
        x->bytes += op->bytes;
        if (first) {
            x->first_ms += e;
            x->first_unit = op->unit;
            first = 0;
        }
    }
    x->nsteps++;
    free(c);
}

static int profiled_exposure(const ao_rank_data *rd, ao_coll_kind k, exposure *x)
{
    memset(x, 0, sizeof *x);
    x->first_unit = -1;
    for (size_t i = 0; i < rd->nprofiled; i++)
        if (rd->profiled[i].nops) expose_record(&rd->profiled[i], k, x);
    return x->nsteps;
}

void ao_diag_where_comm(const ao_run_data *run, int c, ao_coll_kind k, ao_finding *f)
{
    const ao_rank_data *rd = &run->ranks[c];
    exposure *x = ao_malloc(sizeof *x);
    if (!profiled_exposure(rd, k, x)) {
        snprintf(f->where, sizeof f->where,
                 "%s on rank %d (which unit, forward or backward: needs profiled steps, "
                 "profiling.enabled with active windows)",
                 ao_coll_kind_name(k), rd->rank);
        snprintf(f->evidence, sizeof f->evidence,
                 "exposed_%s_ms, median over %zu steps of rank %d (the slowest)",
                 ao_coll_kind_name(k), rd->n, rd->rank);
        free(x);
        return;
    }
    double ns = x->nsteps;
    /* The three (pass, unit) pairs that expose the most. */
    char top[120] = "";
    for (int pick = 0; pick < 3; pick++) {
        int bp = -1, bu = -1;
        double best = 0;
        for (int p = 0; p < NPASS; p++)
            for (int u = 0; u < MAX_UNITS; u++)
                if (x->unit_ms[p][u] > best) {
                    best = x->unit_ms[p][u];
                    bp = p;
                    bu = u;
                }
        if (bp < 0 || best / ns < 0.001) break;
        add(top, sizeof top, "%s unit %d %.3g ms", pass_names[bp], bu, best / ns);
        x->unit_ms[bp][bu] = 0;
    }
    snprintf(f->where, sizeof f->where,
             "%s on rank %d: forward %.3g, backward %.3g, after backward "
             "%.3g ms a step; most: %s",
             ao_coll_kind_name(k), rd->rank, x->pass_ms[0] / ns, x->pass_ms[1] / ns,
             x->pass_ms[2] / ns, *top ? top : "-");
    snprintf(f->evidence, sizeof f->evidence,
             "exposed_%s_ms median over %zu steps of rank %d (the slowest); %d profiled steps: "
             "%.3g ops of %.3g KiB a step, the step's first %s (unit %d) %.3g ms exposed",
             ao_coll_kind_name(k), rd->n, rd->rank, x->nsteps, x->ops / ns,
             x->ops ? (double)x->bytes / x->ops / 1024.0 : 0.0, ao_coll_kind_name(k), x->first_unit,
             x->first_ms / ns);
    free(x);
}

/* ---- communication: knobs ------------------------------------------------------ */

static void knobs_allgather(const ao_run_data *run, const exposure *x, int have_ops, char *b,
                            size_t n)
{
    char lim[32];
    cfg(run, "fsdp.limit_all_gathers", lim, sizeof lim);
    int fwd = !have_ops || x->pass_ms[PASS_FORWARD] >= x->pass_ms[PASS_BACKWARD];
    if (strcmp(lim, "1") == 0)
        add(b, n,
            "fsdp.limit_all_gathers: 1 leaves one gathered buffer, so no gather can be "
            "prefetched: raise it to 2 (true) (seed 000: limits outstanding all-gathers)");
    const char *first = fwd ? "fsdp.forward_prefetch" : "fsdp.backward_prefetch";
    for (int i = 0; i < 2; i++) {
        const char *key = i == 0 ? first : fwd ? "fsdp.backward_prefetch" : "fsdp.forward_prefetch";
        if (strcmp(key, "fsdp.forward_prefetch") == 0 && cfg_is(run, key, "false"))
            add(b, n,
                "fsdp.forward_prefetch: true issues unit i+1's gather before unit i's forward "
                "(seed 000)");
        if (strcmp(key, "fsdp.backward_prefetch") == 0 && !cfg_is(run, key, "BACKWARD_PRE") &&
            *cfg(run, key, lim, sizeof lim))
            add(b, n,
                "fsdp.backward_prefetch: BACKWARD_PRE (now %s) issues unit i-1's gather before "
                "unit i's backward (seed 000)",
                lim);
    }
    if (cfg_is(run, "fsdp.param_dtype", "fp32") || cfg_is(run, "fsdp.param_dtype", "null"))
        add(b, n, "fsdp.param_dtype: bf16 halves the gathered bytes");
    if (have_ops && x->first_ms > 0.5 * (x->pass_ms[0] + x->pass_ms[1] + x->pass_ms[2]))
        add(b, n,
            "the step's first gather has nothing to hide behind: fsdp.forward_prefetch and a "
            "larger training.batch_size give the next ones compute to hide under");
    if (cfg_is(run, "fsdp.sharding_strategy", "full_shard"))
        add(b, n,
            "fsdp.sharding_strategy: shard_grad_op gathers once a step, not twice (more memory: "
            "`aorta plan`)");
}

void ao_diag_knobs_comm(const ao_run_data *run, int c, ao_coll_kind k, ao_finding *f)
{
    char *b = f->knobs;
    size_t n = sizeof f->knobs;
    exposure *x = ao_malloc(sizeof *x);
    int have_ops = profiled_exposure(&run->ranks[c], k, x) > 0;
    one_queue(run, b, n);
    if (k == AO_KIND_ALLGATHER) knobs_allgather(run, x, have_ops, b, n);
    if (k == AO_KIND_ALLREDUCE) {
        char cap[32];
        cfg(run, "distributed.bucket_cap_mb", cap, sizeof cap);
        double mb = *cap ? atof(cap) : NAN;
        double per_op = have_ops && x->ops ? (double)x->bytes / x->ops : NAN;
        if (mb < 1 || per_op < 1048576)
            add(b, n,
                "distributed.bucket_cap_mb (now %s): tiny buckets make many small all-reduces "
                "(%.3g KiB each), each paying the launch and latency; 25 is DDP's default (seed "
                "003 T23)",
                *cap ? cap : "?", isfinite(per_op) ? per_op / 1024 : mb * 1024);
        else
            add(b, n,
                "distributed.bucket_cap_mb (now %s): smaller buckets start reducing earlier in "
                "the backward, larger ones pay less per launch (seed 003 T23)",
                cap);
    }
    if (k == AO_KIND_REDUCESCATTER) {
        add(b, n,
            "the last unit's reduce-scatter follows the last backward and cannot hide: a "
            "smaller root unit or fewer, larger layers shorten that tail");
        char g[32];
        if (atoi(cfg(run, "training.gradient_accumulation", g, sizeof g)) > 1 &&
            cfg_is(run, "fsdp.reduce_every_microbatch", "true"))
            add(b, n,
                "fsdp.reduce_every_microbatch: false reduces once a step, not per "
                "micro-batch");
    }
    add(b, n,
        "collectives waiting for SMs behind GEMMs: streams.%s.priority (higher), "
        "distributed.nccl.max_ctas, compute.sm_count_target (seed 000; bench/RESULTS.md "
        "sessions 8 and 10)",
        ao_coll_kind_name(k));
    free(x);
}
