/* Where a finding sits and which knobs move it. The advice is what
 * docs/tuning.md collects (the seeds' tuning table and bottleneck notes,
 * and what this project measured, bench/RESULTS.md); the user-facing text
 * cites that page. The run's own settings (run.json) decide which knob
 * comes first and which is already turned; its backend, which knobs apply
 * at all (no SM, stream or NCCL advice for a cpu run). */
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

const char *ao_diag_backend(const ao_run_data *run)
{
    yajl_val v = ao_json_member(ao_run_config_value(run, "versions"), "device_backend");
    if (YAJL_IS_STRING(v)) return v->u.string;
    /* a trace's run.json names the devices the trace names */
    yajl_val devs = ao_run_config_value(run, "devices");
    yajl_val d0 = YAJL_IS_ARRAY(devs) && devs->u.array.len ? devs->u.array.values[0] : NULL;
    yajl_val name = ao_json_member(d0, "name");
    if (YAJL_IS_STRING(name)) {
        if (strstr(name->u.string, "NVIDIA")) return "cuda";
        if (strstr(name->u.string, "AMD") || strstr(name->u.string, "Instinct")) return "hip";
    }
    return "";
}

static int gpu(const ao_run_data *run)
{
    return strcmp(ao_diag_backend(run), "cpu") != 0;
}

/* A single hardware queue serializes every stream: first for any exposure. */
static void one_queue(const ao_run_data *run, char *buf, size_t n)
{
    if (!gpu(run)) return;
    const char *q = env(run, "CUDA_DEVICE_MAX_CONNECTIONS");
    if (q && atoi(q) == 1)
        add(buf, n,
            "CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream in one hardware queue: unset it "
            "(aorta then uses 32; docs/tuning.md, \"Hardware queues\")");
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
            "dataloader.num_workers (now %s): more workers fill batches in parallel "
            "(docs/tuning.md, \"Input\")",
            *nw ? nw : "?");
        add(f->knobs, sizeof f->knobs,
            "dataset.placement: device generates the batches on the device, no host fill or copy");
        if (cfg_is(run, "dataloader.pin_memory", "false"))
            add(f->knobs, sizeof f->knobs,
                "dataloader.pin_memory: true (docs/tuning.md, \"Input\")");
    } else {
        add(f->knobs, sizeof f->knobs,
            "the loader's source (the records name no host placement: an external trace's "
            "loader; docs/tuning.md, \"Input\")");
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
    if (gpu(run))
        add(f->knobs, sizeof f->knobs,
            "fewer, larger launches: a larger training.batch_size per launch, CUDA graphs or "
            "fused kernels; see the host side with nsys (docs/tuning.md, \"Host launch\")");
    else
        add(f->knobs, sizeof f->knobs,
            "fewer, larger ops: a larger training.batch_size per launch (docs/tuning.md, \"Host "
            "launch\")");
    add(f->knobs, sizeof f->knobs,
        "keep other work off the host cores (CPU affinity; logging.level INFO, not DEBUG)");
}

void ao_diag_knobs_device_wait(const ao_run_data *run, char *buf, size_t n)
{
    add(buf, n,
        "the op boundaries the idle time sits at (bench/idle_gaps.py on a profiled step; "
        "docs/tuning.md, \"Device wait\")");
    if (gpu(run))
        add(buf, n,
            "stream priorities (streams.*.priority); CUDA_DEVICE_MAX_CONNECTIONS=32 "
            "(docs/tuning.md, \"Hardware queues\")");
    else
        add(buf, n, "on the cpu backend, its stream threads' wake-up latency: a quieter host");
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
        "NUMA and PCIe placement; compare ranks with `aorta coll` and `aorta sdma` "
        "(docs/tuning.md, \"A late rank\")");
}

/* ---- communication: where ----------------------------------------------------- */

#define MAX_PLACES 256

/* Exposed time at one (pass, unit). */
typedef struct place {
    uint8_t pass;
    char unit[64];
    double ms;
} place;

typedef struct exposure {
    double pass_ms[AO_NPASSES];
    place places[MAX_PLACES];
    size_t nplaces;
    double first_ms; /* the step's first op of the kind */
    char first_unit[64];
    int nsteps, ops, sized;
    uint64_t bytes;
} exposure;

static void add_place(exposure *x, uint8_t pass, const char *unit, double ms)
{
    for (size_t i = 0; i < x->nplaces; i++)
        if (x->places[i].pass == pass && strcmp(x->places[i].unit, unit) == 0) {
            x->places[i].ms += ms;
            return;
        }
    if (x->nplaces == MAX_PLACES) return;
    place *p = &x->places[x->nplaces++];
    p->pass = pass;
    snprintf(p->unit, sizeof p->unit, "%s", unit);
    p->ms = ms;
}

/* Exposure of every op of kind k in one record of rank `rank`, by pass
 * and unit: those of the collective it is (collectives.jsonl: the host's
 * context in a trace, the op order in aorta's records), else, in aorta's
 * own records, the op order (forward until the first backward compute op,
 * backward until the clip or optimizer) and the op's unit; else unknown. */
static void expose_record(const ao_run_data *run, int rank, int engine, const ao_iter_record *r,
                          ao_coll_kind k, exposure *x)
{
    size_t n = r->nops;
    ao_ival *c = ao_malloc((2 * n + 2) * sizeof *c), *tmp = c + n;
    size_t nc = 0;
    for (size_t i = 0; i < n; i++)
        if (r->ops[i].cls == AO_CLASS_COMPUTE)
            c[nc++] = (ao_ival){r->ops[i].start_us, r->ops[i].end_us};
    nc = ao_iv_normalize(c, nc);
    ao_pass pass = engine ? AO_PASS_FORWARD : AO_PASS_UNKNOWN;
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        const ao_op *op = &r->ops[i];
        if (engine && op->cls == AO_CLASS_COMPUTE && op->name) {
            if (pass == AO_PASS_FORWARD && strcmp(op->name, "backward") == 0)
                pass = AO_PASS_BACKWARD;
            if (strcmp(op->name, "clip") == 0 || strcmp(op->name, "optimizer") == 0)
                pass = AO_PASS_OPTIMIZER;
        }
        if (op->cls != AO_CLASS_COMM || op->kind != k) continue;
        const ao_coll_instance *in = ao_diag_coll_of_op(run, rank, r->step, (int)i);
        char unit[64] = "unit unknown";
        uint8_t p = in ? in->pass : (uint8_t)pass;
        if (in && in->unit)
            snprintf(unit, sizeof unit, "%s", in->unit);
        else if (!in && engine && op->unit >= 0)
            snprintf(unit, sizeof unit, "unit %d", op->unit);
        ao_ival iv = {op->start_us, op->end_us};
        double e = ao_iv_length(tmp, ao_iv_subtract(&iv, 1, c, nc, tmp)) / 1000.0;
        x->pass_ms[p] += e;
        add_place(x, p, unit, e);
        x->ops++;
        uint64_t bytes = op->bytes ? op->bytes : in ? in->bytes : 0;
        x->bytes += bytes;
        x->sized += bytes > 0;
        if (first) {
            x->first_ms += e;
            snprintf(x->first_unit, sizeof x->first_unit, "%s", unit);
            first = 0;
        }
    }
    x->nsteps++;
    free(c);
}

static int profiled_exposure(const ao_run_data *run, int c, ao_coll_kind k, exposure *x)
{
    const ao_rank_data *rd = &run->ranks[c];
    memset(x, 0, sizeof *x);
    yajl_val cmd = ao_run_config_value(run, "command");
    int engine = YAJL_IS_STRING(cmd) && strcmp(cmd->u.string, "train") == 0;
    for (size_t i = 0; i < rd->nprofiled; i++)
        if (rd->profiled[i].nops) expose_record(run, rd->rank, engine, &rd->profiled[i], k, x);
    return x->nsteps;
}

void ao_diag_where_comm(const ao_run_data *run, int c, ao_coll_kind k, ao_finding *f)
{
    const ao_rank_data *rd = &run->ranks[c];
    exposure *x = ao_malloc(sizeof *x);
    if (!profiled_exposure(run, c, k, x)) {
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
    /* The three (pass, unit) places that expose the most. */
    char top[160] = "";
    for (int pick = 0; pick < 3; pick++) {
        place *best = NULL;
        for (size_t i = 0; i < x->nplaces; i++)
            if (x->places[i].ms > 0 && (!best || x->places[i].ms > best->ms)) best = &x->places[i];
        if (!best || best->ms / ns < 0.001) break;
        add(top, sizeof top, "%s %s %.3g ms", ao_pass_name((ao_pass)best->pass), best->unit,
            best->ms / ns);
        best->ms = 0;
    }
    snprintf(f->where, sizeof f->where,
             "%s on rank %d: forward %.3g, backward %.3g, optimizer %.3g, pass unknown %.3g ms a "
             "step; most: %s",
             ao_coll_kind_name(k), rd->rank, x->pass_ms[AO_PASS_FORWARD] / ns,
             x->pass_ms[AO_PASS_BACKWARD] / ns, x->pass_ms[AO_PASS_OPTIMIZER] / ns,
             x->pass_ms[AO_PASS_UNKNOWN] / ns, *top ? top : "-");
    char size[48];
    if (x->sized)
        snprintf(size, sizeof size, "%.3g KiB", (double)x->bytes / x->sized / 1024.0);
    else
        snprintf(size, sizeof size, "a size the records do not give");
    snprintf(f->evidence, sizeof f->evidence,
             "exposed_%s_ms median over %zu steps of rank %d (the slowest); %d profiled steps: "
             "%.3g ops of %s a step, the step's first %s (%s) %.3g ms exposed",
             ao_coll_kind_name(k), rd->n, rd->rank, x->nsteps, x->ops / ns, size,
             ao_coll_kind_name(k), x->first_unit, x->first_ms / ns);
    free(x);
}

/* ---- communication: knobs ------------------------------------------------------ */

static void knobs_allgather(const ao_run_data *run, const exposure *x, int have_ops, char *b,
                            size_t n)
{
    char lim[32];
    cfg(run, "fsdp.limit_all_gathers", lim, sizeof lim);
    int fwd = !have_ops || x->pass_ms[AO_PASS_FORWARD] >= x->pass_ms[AO_PASS_BACKWARD];
    if (strcmp(lim, "1") == 0)
        add(b, n,
            "fsdp.limit_all_gathers: 1 leaves one gathered buffer, so no gather can be "
            "prefetched: raise it to 2 (true) (docs/tuning.md, \"Exposed all-gather\")");
    const char *first = fwd ? "fsdp.forward_prefetch" : "fsdp.backward_prefetch";
    for (int i = 0; i < 2; i++) {
        const char *key = i == 0 ? first : fwd ? "fsdp.backward_prefetch" : "fsdp.forward_prefetch";
        if (strcmp(key, "fsdp.forward_prefetch") == 0 && cfg_is(run, key, "false"))
            add(b, n,
                "fsdp.forward_prefetch: true issues unit i+1's gather before unit i's forward "
                "(docs/tuning.md, \"Exposed all-gather\")");
        if (strcmp(key, "fsdp.backward_prefetch") == 0 && !cfg_is(run, key, "BACKWARD_PRE") &&
            *cfg(run, key, lim, sizeof lim))
            add(b, n,
                "fsdp.backward_prefetch: BACKWARD_PRE (now %s) issues unit i-1's gather before "
                "unit i's backward (docs/tuning.md, \"Exposed all-gather\")",
                lim);
    }
    if (cfg_is(run, "fsdp.param_dtype", "fp32") || cfg_is(run, "fsdp.param_dtype", "null"))
        add(b, n, "fsdp.param_dtype: bf16 halves the gathered bytes");
    double all = 0;
    for (int p = 0; p < AO_NPASSES; p++) all += x->pass_ms[p];
    if (have_ops && x->first_ms > 0.5 * all)
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
    int have_ops = profiled_exposure(run, c, k, x) > 0;
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
                "(%.3g KiB each), each paying the launch and latency; 25 is DDP's default "
                "(docs/tuning.md, \"Exposed all-reduce\")",
                *cap ? cap : "?", isfinite(per_op) ? per_op / 1024 : mb * 1024);
        else
            add(b, n,
                "distributed.bucket_cap_mb (now %s): smaller buckets start reducing earlier in "
                "the backward, larger ones pay less per launch (docs/tuning.md, \"Exposed "
                "all-reduce\")",
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
    if (gpu(run))
        add(b, n,
            "collectives waiting for SMs behind GEMMs: streams.%s.priority (higher), "
            "distributed.nccl.max_ctas, compute.sm_count_target (docs/tuning.md, \"Collectives "
            "behind compute\")",
            ao_coll_kind_name(k));
    free(x);
}
