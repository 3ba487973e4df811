/* The price of overlap as a finding (DESIGN §7 "Contention", §13): compute
 * kernels that ran longer beside a collective than the same kernels alone,
 * in ms per step on the critical rank, with the kernels that paid it and the
 * decomposition's own view. The knobs are what measurements say, no more. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/text.h"
#include "diagnose/internal.h"
#include "runs/decompose.h"

/* "name" shortened to its first n characters (kernel names run long). */
static void short_name(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%.48s%s", name, strlen(name) > 48 ? "..." : "");
}

static void where_and_evidence(const ao_run_data *run, const ao_diag_terms *t, int c, ao_finding *f)
{
    const ao_rank_data *rd = &run->ranks[c];
    const ao_contention_evidence *ev = &rd->contention;
    double steps = ev->steps ? (double)ev->steps : NAN;
    snprintf(f->where, sizeof f->where,
             "rank %d: %.3g ms of compute kernels a step ran beside a collective (%.3g ms of it "
             "with no alone reference, unpriced)",
             rd->rank, ev->beside_ms / steps, ev->unpriced_ms / steps);
    for (size_t i = 0; i < ev->n && i < 3; i++) {
        const ao_contention_kernel *k = &ev->k[i];
        if (!k->priced) continue;
        char nm[64];
        short_name(nm, sizeof nm, k->name);
        ao_appendf(f->evidence, sizeof f->evidence,
                   "%s%s: %.3g a step beside, %.0f us against %.0f us alone (%zu alone), %+.3g ms "
                   "a step",
                   *f->evidence ? "; " : "", nm, (double)k->beside / steps,
                   k->beside_us / (double)k->priced, k->alone_us / (double)k->priced, k->alone,
                   k->excess_ms / steps);
    }
    ao_decomp x;
    ao_decomp_of(run, 1, c, &x);
    if (x.have)
        ao_appendf(f->evidence, sizeof f->evidence,
                   "; the decomposition (%s): compute %.3g ms a step against %.3g ms alone "
                   "(%+.3g ms)",
                   x.kernels ? "kernel time" : "events", x.compute_ms, x.d.compute_isolated_ms,
                   x.d.contention_ms);
    int others = 0;
    for (int i = 0; i < run->nranks; i++) {
        if (i == c) continue;
        double v = t[i].contention;
        if (!isfinite(v)) continue;
        ao_appendf(f->evidence, sizeof f->evidence, "%s rank %d %.3g ms",
                   others++ ? "," : "; others:", run->ranks[i].rank, v);
    }
}

/* Only what was measured: the knobs tried and what they did, the ones a
 * sweep measures next (bench/multigpu.sh sweep), the structural lever. */
static void knobs(const ao_run_data *run, ao_finding *f)
{
    yajl_val cmd = ao_run_config_value(run, "command");
    int own = !YAJL_IS_STRING(cmd) || strcmp(cmd->u.string, "train") == 0;
    ao_appendf(f->knobs, sizeof f->knobs,
               "no knob is known yet to remove it: on 2 H100s (config/large.yaml) "
               "%s (0, 4, 8, 16) and %s (0, 120) moved it only between 3.9 and 5.3 ms a step; "
               "max_ctas 4 made communication 30 ms and sm_count_target 120 added 2.7 ms of "
               "compute (docs/DESIGN.md §7, contention)",
               own ? "distributed.nccl.max_ctas" : "NCCL's CTA limit",
               own ? "compute.sm_count_target" : "the GEMMs' SM count");
    ao_appendf(f->knobs, sizeof f->knobs,
               "; measured next by bench/multigpu.sh sweep, per setting: NCCL_MIN_NCHANNELS / "
               "NCCL_MAX_NCHANNELS, NCCL_PROTO, %s, CUDA_DEVICE_MAX_CONNECTIONS",
               own ? "streams.*.priority" : "the collective streams' priority");
    char strategy[32];
    ao_json_value_text(ao_run_config_value(run, "fsdp.sharding_strategy"), strategy,
                       sizeof strategy);
    if (own && strcmp(strategy, "full_shard") == 0)
        ao_appendf(f->knobs, sizeof f->knobs,
                   "; fewer collectives beside compute: fsdp.sharding_strategy shard_grad_op "
                   "gathers once a step, not twice (4 H100s: 47.9 ms against 48.7-48.9 ms a "
                   "step, more memory: `aorta plan`)");
}

void ao_diag_contention(const ao_run_data *run, const ao_diag_terms *t, int c, ao_diagnosis *d)
{
    const ao_rank_data *rd = &run->ranks[c];
    ao_decomp x;
    ao_decomp_of(run, 1, c, &x);
    if (x.have && !x.kernels)
        ao_diag_note_add(&d->limits, &d->nlimits, "decomposition_events",
                         "the decomposition is in events (no kernel trace): an op's event pair "
                         "also holds launch gaps and waits that differ between baseline and "
                         "train steps (docs/DESIGN.md §7); profiling.kernel_trace measures it in "
                         "kernel time and prices contention kernel by kernel");
    double ms = t[c].contention;
    if (!(ms > 0)) return;
    ao_finding *f = ao_diag_add_finding(d, AO_FIND_CONTENTION, ms, rd->rank);
    snprintf(f->what, sizeof f->what,
             "contention: compute kernels ran %.3g ms a step longer beside collectives than the "
             "same kernels alone",
             ms);
    where_and_evidence(run, t, c, f);
    knobs(run, f);
    snprintf(f->gain, sizeof f->gain,
             "at most %.3g ms a step, if every kernel beside a collective ran at its alone "
             "speed; less where the slowed kernels were off the critical path",
             ms);
}
