/* `aorta plan` (memplan.h). */
#include "memplan/memplan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/json.h"
#include "engine/engine.h"
#include "engine/memory.h"

typedef struct row {
    const char *strategy, *precision;
    int accum;
    ao_engine_memory m;
    int fits;       /* -1: no device memory given */
    long max_batch; /* largest training.batch_size that fits; 0 none, -1 not asked */
} row;

static const struct {
    const char *name, *mode, *sharding;
} strategies[] = {
    {"ddp", "ddp", "no_shard"},
    {"shard_grad_op", "fsdp", "shard_grad_op"},
    {"full_shard", "fsdp", "full_shard"},
    {"hybrid_shard", "fsdp", "hybrid_shard"},
};

static int set(struct ao_config *c, const char *key, const char *value)
{
    return ao_config_set(c, key, value, "aorta plan");
}

static int plan_one(struct ao_config *c, const ao_memplan_opts *o, row *r)
{
    int rc = ao_engine_memory_plan(c, o->world, o->local_world, o->cuda, &r->m);
    if (rc) return rc;
    r->fits = o->device_mem ? r->m.total <= o->device_mem : -1;
    r->max_batch = -1;
    if (!o->device_mem) return 0;
    /* memory grows with the batch: the largest that fits, by bisection */
    char buf[32];
    int batch = c->training.batch_size;
    long lo = 0, hi = 1;
    ao_engine_memory m;
    for (;;) {
        snprintf(buf, sizeof buf, "%ld", hi);
        if (set(c, "training.batch_size", buf) ||
            ao_engine_memory_plan(c, o->world, o->local_world, o->cuda, &m))
            break;
        if (m.total > o->device_mem || hi >= (1L << 24)) break;
        lo = hi;
        hi *= 2;
    }
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        snprintf(buf, sizeof buf, "%ld", mid);
        if (set(c, "training.batch_size", buf) ||
            ao_engine_memory_plan(c, o->world, o->local_world, o->cuda, &m))
            break;
        if (m.total <= o->device_mem)
            lo = mid;
        else
            hi = mid;
    }
    r->max_batch = lo;
    snprintf(buf, sizeof buf, "%d", batch);
    return set(c, "training.batch_size", buf);
}

static void print_rows(FILE *f, const row *rows, size_t n, const ao_memplan_opts *o,
                       const struct ao_config *cfg)
{
    size_t most = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i].m.total > most) most = rows[i].m.total;
    /* GiB, or MiB for a plan that is all below 1 GiB */
    const double unit_div = most < 1073741824 ? 1048576.0 : 1073741824.0;
#define gib(b) ((double)(b) / unit_div)
    fprintf(f,
            "device memory per rank (%s), %d rank(s), batch %d per rank, %s backend; "
            "activations at their peak (all of a micro-batch's, kept for the backward)\n",
            unit_div < 1073741824.0 ? "MiB" : "GiB", o->world, cfg->training.batch_size,
            o->cuda ? "cuda" : "cpu");
    fprintf(f, "%-14s %-5s %5s %8s %8s %9s %8s %8s %8s %8s %8s %8s %8s%s\n", "strategy", "prec",
            "accum", "params", "params16", "gathered", "grads", "optim", "acts", "acts16", "data",
            "other", "total", o->device_mem ? "  fits  max_batch" : "");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        char slots[16] = "";
        if (r->m.gather_slots) snprintf(slots, sizeof slots, "(%d)", r->m.gather_slots);
        fprintf(f, "%-14s %-5s %5d %8.3f %8.3f %5.3f%-4s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f",
                r->strategy, r->precision, r->accum, gib(r->m.params), gib(r->m.params16),
                gib(r->m.gathered), slots, gib(r->m.grads), gib(r->m.optimizer),
                gib(r->m.activations), gib(r->m.activations16), gib(r->m.data),
                gib(r->m.comm + r->m.baseline), gib(r->m.total));
        if (r->fits >= 0) fprintf(f, "  %-4s  %ld", r->fits ? "yes" : "no", r->max_batch);
        fputc('\n', f);
    }
    fprintf(f,
            "params: this rank's fp32 shard; params16: its 16-bit copy for the gathers; gathered: "
            "the root's and the layers' buffers (slots); grads: full gradients + reduced shard + "
            "reduction output; optim: AdamW's two moments; acts: the model's fp32 activations, "
            "scratch, dropout masks and workspaces; acts16: its 16-bit GEMM operand copies; "
            "other: scalars, workspaces and baseline scratch\n");
#undef gib
}

static void gen_rows(FILE *f, const row *rows, size_t n, const ao_memplan_opts *o)
{
    yajl_gen g = ao_json_gen_new(1);
    ao_json_writer w = {g, yajl_gen_status_ok};
    ao_jw_open(&w, NULL);
    ao_jw_int(&w, "schema", 1);
    ao_jw_int(&w, "world_size", o->world);
    ao_jw_u64(&w, "device_mem", o->device_mem);
    ao_jw_aopen(&w, "plans");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        ao_jw_open(&w, NULL);
        ao_jw_str(&w, "strategy", r->strategy);
        ao_jw_str(&w, "precision", r->precision);
        ao_jw_int(&w, "gradient_accumulation", r->accum);
        const struct {
            const char *k;
            size_t v;
        } parts[] = {{"params", r->m.params},
                     {"params16", r->m.params16},
                     {"gathered", r->m.gathered},
                     {"grads", r->m.grads},
                     {"optimizer", r->m.optimizer},
                     {"activations", r->m.activations},
                     {"activations16", r->m.activations16},
                     {"data", r->m.data},
                     {"comm", r->m.comm},
                     {"baseline", r->m.baseline},
                     {"total", r->m.total}};
        for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++)
            ao_jw_u64(&w, parts[p].k, parts[p].v);
        ao_jw_int(&w, "gather_slots", r->m.gather_slots);
        if (r->fits >= 0) {
            ao_json_value fits = ao_json_bool(r->fits);
            ao_jw_value(&w, "fits", &fits);
            ao_jw_int(&w, "max_batch", r->max_batch);
        }
        ao_jw_close(&w);
    }
    ao_jw_aclose(&w);
    ao_jw_close(&w);
    const unsigned char *buf;
    size_t len;
    yajl_gen_get_buf(g, &buf, &len);
    fwrite(buf, 1, len, f);
    fputc('\n', f);
    yajl_gen_free(g);
}

int ao_memplan_run(struct ao_config *cfg, const ao_memplan_opts *o)
{
    if (ao_engine_check_config(cfg, o->world, o->local_world)) return AO_EXIT_USAGE;
    const int user_group = cfg->fsdp.shard_group_size;
    int G = cfg->training.gradient_accumulation;
    int accums[2] = {1, G > 1 ? G : 4};
    static const char *const precisions[] = {"fp32", "bf16"};
    row rows[4 * 2 * 2];
    size_t n = 0;
    int rc = 0;
    char buf[32];
    for (size_t s = 0; s < 4 && rc == 0; s++) {
        /* hybrid_shard: the config's group, else one node's ranks, else two
         * groups (one group of all ranks is full_shard) */
        int hybrid = strcmp(strategies[s].sharding, "hybrid_shard") == 0;
        int group = user_group                  ? user_group
                    : o->local_world < o->world ? o->local_world
                                                : o->world / 2;
        if (hybrid && (group < 1 || group >= o->world || o->world % group)) continue;
        for (int p = 0; p < 2 && rc == 0; p++)
            for (int a = 0; a < 2 && rc == 0; a++) {
                rc = set(cfg, "distributed.mode", strategies[s].mode) ||
                     set(cfg, "fsdp.sharding_strategy", strategies[s].sharding) ||
                     set(cfg, "training.mixed_precision", p ? "bf16" : "none") ||
                     set(cfg, "fsdp.param_dtype", precisions[p]);
                snprintf(buf, sizeof buf, "%d", accums[a]);
                if (!rc) rc = set(cfg, "training.gradient_accumulation", buf);
                if (!rc && hybrid) {
                    snprintf(buf, sizeof buf, "%d", group);
                    rc = set(cfg, "fsdp.shard_group_size", buf);
                }
                if (rc) break;
                row *r = &rows[n];
                *r = (row){
                    .strategy = strategies[s].name, .precision = precisions[p], .accum = accums[a]};
                rc = plan_one(cfg, o, r);
                if (!rc) n++;
                snprintf(buf, sizeof buf, "%d", user_group);
                if (hybrid) rc = rc || set(cfg, "fsdp.shard_group_size", buf);
            }
    }
    if (rc) return AO_EXIT_USAGE;
    if (o->json)
        gen_rows(o->out, rows, n, o);
    else
        print_rows(o->out, rows, n, o, cfg);
    return 0;
}
