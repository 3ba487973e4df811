/* A trace's collectives as cross-rank entries, their host context, and the
 * late rank's windows from its trace (xrank.h). */
#include "ingest/xrank.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"

#define DATA_RANGE "enumerate(DataLoader)"

/* ---- what a host range says ------------------------------------------------------ */

ao_pass ao_xrank_range_pass(const char *name)
{
    if (!name) return AO_PASS_UNKNOWN;
    if (strncmp(name, "Optimizer.", 10) == 0 || strcasestr(name, "optimizer") ||
        strcasestr(name, "zero_grad"))
        return AO_PASS_OPTIMIZER;
    if (strcasestr(name, "backward") || strncmp(name, "autograd::engine", 16) == 0)
        return AO_PASS_BACKWARD;
    if (strcasestr(name, "forward")) return AO_PASS_FORWARD;
    return AO_PASS_UNKNOWN;
}

int ao_xrank_range_unit(const char *name, char *buf, size_t n)
{
    if (!name || strncmp(name, "FSDP::", 6) != 0) return 0;
    /* FSDP2 names the module: "FSDP::pre_forward (layers.3)"; the root's
     * path is empty, so its ranges have none */
    const char *open = strrchr(name, '(');
    size_t len = open ? strlen(open) : 0;
    if (open && len > 2 && open[len - 1] == ')') {
        snprintf(buf, n, "%.*s", (int)(len - 2), open + 1);
        return 1;
    }
    if (strstr(name, " for ")) return 0; /* "backward_prefetch for X": the target, not the caller */
    snprintf(buf, n, "root");
    return 1;
}

/* ---- the ranges enclosing each launch --------------------------------------------- */

typedef struct query {
    int64_t tid;
    double t;
    size_t entry;
} query;

static int by_tid_time(const void *pa, const void *pb)
{
    const query *a = pa, *b = pb;
    if (a->tid != b->tid) return (a->tid > b->tid) - (a->tid < b->tid);
    return (a->t > b->t) - (a->t < b->t);
}

static int by_tid_start(const void *pa, const void *pb, void *ctx)
{
    const ao_range *r = ctx;
    const ao_range *a = &r[*(const size_t *)pa], *b = &r[*(const size_t *)pb];
    if (a->tid != b->tid) return (a->tid > b->tid) - (a->tid < b->tid);
    if (a->start_us != b->start_us)
        return (a->start_us > b->start_us) - (a->start_us < b->start_us);
    return (a->end_us < b->end_us) - (a->end_us > b->end_us); /* the outer first */
}

/* Pass and unit of each entry from the ranges open on its launching thread
 * at its launch: the innermost range that says each. A sweep per thread
 * with a stack of open ranges. */
static void host_context(const ao_trace *t, query *q, size_t nq, ao_coll_rank *out)
{
    size_t nr = 0;
    size_t *idx = ao_malloc((t->nranges ? t->nranges : 1) * sizeof *idx);
    for (size_t i = 0; i < t->nranges; i++)
        if (!t->ranges[i].on_device && t->ranges[i].tid >= 0 && t->ranges[i].name) idx[nr++] = i;
    qsort_r(idx, nr, sizeof *idx, by_tid_start, t->ranges);
    qsort(q, nq, sizeof *q, by_tid_time);
    size_t *stack = ao_malloc((nr ? nr : 1) * sizeof *stack), depth = 0, next = 0;
    int64_t tid = INT64_MIN;
    char unit[256];
    for (size_t i = 0; i < nq; i++) {
        if (q[i].tid != tid) {
            tid = q[i].tid;
            depth = 0;
            while (next < nr && t->ranges[idx[next]].tid < tid) next++;
        }
        while (next < nr && t->ranges[idx[next]].tid == tid &&
               t->ranges[idx[next]].start_us <= q[i].t) {
            const ao_range *r = &t->ranges[idx[next]];
            while (depth && t->ranges[stack[depth - 1]].end_us <= r->start_us) depth--;
            stack[depth++] = idx[next++];
        }
        ao_coll_entry *e = &out->v[q[i].entry];
        int have_pass = 0, have_unit = 0;
        for (size_t k = depth; k-- > 0 && !(have_pass && have_unit);) {
            const ao_range *r = &t->ranges[stack[k]];
            if (!(r->end_us > q[i].t)) continue; /* ended: not around this launch */
            if (!have_pass) {
                ao_pass p = ao_xrank_range_pass(r->name);
                if (p != AO_PASS_UNKNOWN) {
                    e->pass = (uint8_t)p;
                    have_pass = 1;
                }
            }
            if (!have_unit && ao_xrank_range_unit(r->name, unit, sizeof unit)) {
                e->unit = ao_coll_rank_str(out, unit);
                have_unit = 1;
            }
        }
    }
    free(stack);
    free(idx);
}

/* ---- entries ------------------------------------------------------------------------ */

/* Bytes of one element of a PyTorch dtype name; 0 when unknown. */
static unsigned dtype_size(const char *d)
{
    static const struct {
        const char *name;
        unsigned size;
    } sizes[] = {{"Float", 4}, {"float", 4},         {"Float32", 4},     {"BFloat16", 2},
                 {"Half", 2},  {"Float16", 2},       {"Double", 8},      {"Int", 4},
                 {"Int32", 4}, {"Long", 8},          {"Int64", 8},       {"Short", 2},
                 {"Byte", 1},  {"Char", 1},          {"Bool", 1},        {"UInt8", 1},
                 {"Int8", 1},  {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1}, {"ComplexFloat", 8}};
    if (!d) return 0;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (strcmp(d, sizes[i].name) == 0) return sizes[i].size;
    return 0;
}

/* nccl-tests' size, in elements: all-gather's output, reduce-scatter's
 * input, the buffer of the others. */
static int64_t size_elems(ao_xkind k, const ao_coll_args *a)
{
    int64_t in = a->in_nelems, out = a->out_nelems;
    if (k == AO_X_ALLGATHER) return out >= 0 ? out : -1;
    if (k == AO_X_REDUCESCATTER) return in >= 0 ? in : -1;
    return in > out ? in : out;
}

void ao_xrank_entries(const ao_trace *t, const ao_rank_result *r, int rank, double origin_us,
                      ao_coll_rank *out)
{
    out->rank = rank;
    query *q = ao_malloc((r->ncomms ? r->ncomms : 1) * sizeof *q);
    size_t nq = 0;
    for (size_t i = 0; i < r->ncomms; i++) {
        const ao_comm_act *c = &r->comms[i];
        const ao_activity *a = &t->acts[c->act];
        ao_coll_entry *e = ao_coll_rank_add(out);
        e->step = c->step;
        e->op_index = c->op_index;
        e->kind = ao_xkind_name((ao_xkind)c->xkind);
        e->issue_us = isnan(c->issue_us) ? NAN : c->issue_us - origin_us;
        e->start_us = a->start_us - origin_us;
        e->end_us = a->end_us - origin_us;
        if (a->coll >= 0 && (size_t)a->coll < t->ncoll_args) {
            const ao_coll_args *ca = &t->coll_args[a->coll];
            e->group = ao_coll_rank_str(out, ca->group);
            e->op = ao_coll_rank_str(out, ca->op);
            e->dtype = ao_coll_rank_str(out, ca->dtype);
            e->seq = ca->seq;
            e->group_size =
                ca->group_size > 0 && ca->group_size < (1 << 24) ? (int32_t)ca->group_size : -1;
            int64_t count = size_elems((ao_xkind)c->xkind, ca);
            unsigned sz = dtype_size(ca->dtype);
            e->count = count;
            e->bytes = count > 0 && sz ? (uint64_t)count * sz : 0;
        }
        if (c->tid >= 0 && !isnan(c->launch_us))
            q[nq++] = (query){c->tid, c->launch_us, out->n - 1};
    }
    host_context(t, q, nq, out);
    free(q);
}

/* ---- breakdowns --------------------------------------------------------------------- */

void ao_xrank_breakdowns(const ao_trace *t, const ao_rank_result *r, int rank, double origin_us,
                         ao_coll_set *s)
{
    ao_late_window *w;
    size_t nw = ao_coll_late_windows(s, rank, &w);
    if (nw == 0) {
        free(w);
        return;
    }
    /* the host in the data loader: its ranges, normalized */
    ao_ival *data = ao_malloc((t->nranges ? t->nranges : 1) * sizeof *data);
    size_t nd = 0;
    for (size_t i = 0; i < t->nranges; i++) {
        const ao_range *g = &t->ranges[i];
        if (!g->on_device && g->name && strncmp(g->name, DATA_RANGE, sizeof DATA_RANGE - 1) == 0)
            data[nd++] = (ao_ival){g->start_us, g->end_us};
    }
    nd = ao_iv_normalize(data, nd);
    ao_ops_index x;
    ao_ops_index_init(&x, r->total.ops, r->total.nops);
    double cover = r->total.nops ? r->total.ops[0].start_us : INFINITY;
    for (size_t i = 0; i < nw; i++) {
        ao_coll_instance *in = &s->inst[w[i].inst];
        ao_ops_index_breakdown(&x, data, nd, &w[i], origin_us, cover, in->cause_us);
    }
    free(data);
    free(w);
}
