/* Collectives from the records' op lists (aorta train's profiling windows,
 * aorta attach's steps): entries on one axis, matched, the late windows
 * broken down, collectives.jsonl written (DESIGN §14 "Collectives across
 * ranks"). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/error.h"
#include "runs/collectives.h"
#include "runs/rundata.h"

/* A rank's anchor: UNIX seconds at its records' time 0. */
static double anchor_of(const ao_rank_data *rd)
{
    for (size_t i = 0; i < rd->nprofiled; i++) {
        const ao_iter_record *r = &rd->profiled[i];
        if (isfinite(r->wall_time) && isfinite(r->m.window_start_us))
            return r->wall_time - r->m.window_start_us * 1e-6;
    }
    return NAN;
}

static int cfg_is(const ao_run_data *run, const char *key, const char *value)
{
    char buf[64];
    ao_json_value_text(ao_run_config_value(run, key), buf, sizeof buf);
    return strcasecmp(buf, value) == 0;
}

/* The communicator of a collective of aorta's engine: hybrid_shard gathers
 * and reduce-scatters within groups of consecutive ranks, all-reduces
 * across them (engine/setup.c); else one group of every rank per kind. */
static const char *engine_group(int hybrid, int group, int rank, ao_coll_kind k, char *buf,
                                size_t n, int *size, int world)
{
    *size = world;
    if (!hybrid) return NULL;
    if (k == AO_KIND_ALLREDUCE) {
        snprintf(buf, n, "replicas %d", rank % group);
        *size = world / group;
    } else {
        snprintf(buf, n, "shard group %d", rank / group);
        *size = group;
    }
    return buf;
}

/* One rank's entries, in the order its records list the ops (issue order). */
static void rank_entries(const ao_run_data *run, int idx, double offset, int engine, int hybrid,
                         int group, ao_coll_rank *out)
{
    const ao_rank_data *rd = &run->ranks[idx];
    out->rank = rd->rank;
    char gbuf[48], ubuf[32];
    for (size_t p = 0; p < rd->nprofiled; p++) {
        const ao_iter_record *r = &rd->profiled[p];
        ao_pass pass = engine ? AO_PASS_FORWARD : AO_PASS_UNKNOWN;
        for (size_t i = 0; i < r->nops; i++) {
            const ao_op *o = &r->ops[i];
            if (engine && o->cls == AO_CLASS_COMPUTE && o->name) {
                if (pass == AO_PASS_FORWARD && strcmp(o->name, "backward") == 0)
                    pass = AO_PASS_BACKWARD;
                if (strcmp(o->name, "clip") == 0 || strcmp(o->name, "optimizer") == 0)
                    pass = AO_PASS_OPTIMIZER;
            }
            if (o->cls != AO_CLASS_COMM) continue;
            ao_coll_entry *e = ao_coll_rank_add(out);
            int size;
            const char *g = engine_group(hybrid, group, rd->rank, (ao_coll_kind)o->kind, gbuf,
                                         sizeof gbuf, &size, run->world_size);
            e->step = r->step;
            e->op_index = (int32_t)i;
            e->group = ao_coll_rank_str(out, g);
            e->group_size = size;
            e->kind = o->kind >= 0 ? ao_coll_kind_name((ao_coll_kind)o->kind) : "other";
            e->bytes = o->bytes;
            e->pass = (uint8_t)pass;
            if (engine && o->unit >= 0) {
                snprintf(ubuf, sizeof ubuf, "unit %d", o->unit);
                e->unit = ao_coll_rank_str(out, ubuf);
            }
            e->issue_us = o->has_issue ? o->issue_us + offset : NAN;
            e->start_us = o->start_us + offset;
            e->end_us = o->end_us + offset;
        }
    }
}

static int by_start(const void *pa, const void *pb)
{
    const ao_op *a = pa, *b = pb;
    return (a->start_us > b->start_us) - (a->start_us < b->start_us);
}

/* The first record window of the run of consecutive profiled steps that
 * ends at `step`: before it the records say nothing. */
static double cover_of(const ao_rank_data *rd, long long step)
{
    double from = NAN;
    for (long long s = step;; s--) {
        const ao_iter_record *r = ao_run_profiled_step(rd, s);
        if (!r) break;
        from = r->m.window_start_us;
    }
    return from;
}

/* What held rank idx in the windows where it was late, from its records'
 * ops; the host wait of a step up to its data_wait_ms counts as data wait
 * (the records do not say when in the step the loader held the host). */
static void rank_breakdowns(const ao_run_data *run, int idx, double offset, ao_coll_set *s)
{
    const ao_rank_data *rd = &run->ranks[idx];
    ao_late_window *w;
    size_t nw = ao_coll_late_windows(s, rd->rank, &w);
    size_t n = 0;
    for (size_t p = 0; p < rd->nprofiled; p++) n += rd->profiled[p].nops;
    ao_op *ops = ao_malloc((n ? n : 1) * sizeof *ops);
    n = 0;
    for (size_t p = 0; p < rd->nprofiled; p++)
        for (size_t i = 0; i < rd->profiled[p].nops; i++) ops[n++] = rd->profiled[p].ops[i];
    qsort(ops, n, sizeof *ops, by_start);
    ao_ops_index x;
    ao_ops_index_init(&x, ops, n);
    long long budget_step = LLONG_MIN;
    double budget = 0;
    for (size_t i = 0; i < nw; i++) {
        ao_coll_instance *in = &s->inst[w[i].inst];
        double cover = cover_of(rd, in->step);
        ao_ops_index_breakdown(&x, NULL, 0, &w[i], -offset, isnan(cover) ? INFINITY : cover,
                               in->cause_us);
        if (in->step != budget_step) {
            const ao_iter_record *r = ao_run_profiled_step(rd, in->step);
            budget_step = in->step;
            budget = r && isfinite(r->data_wait_ms) ? r->data_wait_ms * 1e3 : 0;
        }
        double d = fmin(budget, in->cause_us[AO_CAUSE_HOST_WAIT]);
        in->cause_us[AO_CAUSE_HOST_WAIT] -= d;
        in->cause_us[AO_CAUSE_DATA_WAIT] += d;
        budget -= d;
    }
    free(ops);
    free(w);
}

/* Match and write; 0 or AO_EXIT_FAIL (cannot write). */
static int build(ao_run_data *run, const char *path)
{
    int with_ops = 0;
    for (int i = 0; i < run->nranks; i++) with_ops += run->ranks[i].nprofiled > 0;
    if (with_ops < 2) return 0;
    yajl_val cmd = ao_run_config_value(run, "command");
    int engine = YAJL_IS_STRING(cmd) && strcmp(cmd->u.string, "train") == 0;
    int hybrid = engine && cfg_is(run, "fsdp.sharding_strategy", "hybrid_shard") &&
                 cfg_is(run, "distributed.mode", "fsdp");
    int group = 0;
    if (hybrid) {
        char buf[32];
        ao_json_value_text(ao_run_config_value(run, "fsdp.shard_group_size"), buf, sizeof buf);
        group = atoi(buf);
        if (group <= 0 || run->world_size % group) {
            ao_warn("%s: hybrid_shard with the group size of a node: its groups are not in "
                    "run.json, so the collectives are not matched across ranks",
                    run->dir);
            return 0;
        }
    }
    double *anchor = ao_malloc((size_t)run->nranks * sizeof *anchor), first = INFINITY;
    for (int i = 0; i < run->nranks; i++) {
        anchor[i] = anchor_of(&run->ranks[i]);
        if (anchor[i] < first) first = anchor[i];
    }
    ao_coll_rank *ranks = ao_calloc((size_t)run->nranks, sizeof *ranks);
    double *offset = ao_malloc((size_t)run->nranks * sizeof *offset);
    for (int i = 0; i < run->nranks; i++) {
        offset[i] = isfinite(anchor[i]) ? (anchor[i] - first) * 1e6 : 0;
        rank_entries(run, i, offset[i], engine, hybrid, group, &ranks[i]);
    }
    ao_coll_set *s = ao_calloc(1, sizeof *s);
    ao_coll_match(ranks, (size_t)run->nranks, s);
    snprintf(s->clock, sizeof s->clock,
             "each rank's records from its own anchor, on one axis by the anchors' "
             "CLOCK_REALTIME (wall_time - window_start_us): one host's clock, NTP's across hosts");
    for (int i = 0; i < run->nranks; i++) {
        rank_breakdowns(run, i, offset[i], s);
        ao_coll_rank_free(&ranks[i]);
    }
    free(ranks);
    free(anchor);
    free(offset);
    int rc = ao_coll_write(path, s);
    if (rc) {
        ao_coll_set_free(s);
        free(s);
        return rc;
    }
    run->coll = s;
    run->coll_sum = ao_calloc(1, sizeof *run->coll_sum);
    int n = run->world_size > run->nranks ? run->world_size : run->nranks;
    ao_coll_summarize(s, n, run->coll_sum);
    return 0;
}

int ao_coll_from_records(ao_run_data *run)
{
    if (run->coll || run->nranks < 2) return 0;
    char *path = ao_asprintf("%s/%s", run->dir, AO_COLLECTIVES_FILE);
    /* a file there already is another writer's, and rundata read it */
    int rc = access(path, F_OK) == 0 ? 0 : build(run, path);
    free(path);
    return rc;
}
