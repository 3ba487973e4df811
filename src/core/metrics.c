#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/intervals.h"
#include "core/metrics.h"

const char *ao_stream_id_name(ao_stream_id s)
{
    static const char *const names[AO_NSTREAMS] = {"compute", "allgather", "reducescatter",
                                                   "allreduce", "h2d"};
    return (unsigned)s < AO_NSTREAMS ? names[s] : "unknown";
}

const char *ao_op_class_name(ao_op_class c)
{
    static const char *const names[] = {"compute", "comm", "copy"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "unknown";
}

const char *ao_coll_kind_name(ao_coll_kind k)
{
    static const char *const names[AO_NKINDS] = {"allgather", "reducescatter", "allreduce",
                                                 "broadcast"};
    return k >= 0 && k < AO_NKINDS ? names[k] : "unknown";
}

double ao_busbw_factor(ao_coll_kind kind, int world_size)
{
    if (world_size < 1) return 0;
    double n = world_size;
    switch (kind) {
    case AO_KIND_ALLREDUCE:
        return 2.0 * (n - 1) / n;
    case AO_KIND_ALLGATHER:
    case AO_KIND_REDUCESCATTER:
        return (n - 1) / n;
    case AO_KIND_BROADCAST:
        return 1;
    default:
        return 0;
    }
}

#define NCLASSES   3
#define MAX_GROUPS ((int)AO_NSTREAMS)
_Static_assert((int)AO_NKINDS <= MAX_GROUPS && NCLASSES <= MAX_GROUPS, "grouping too small");

/* The ops of one iteration sorted into groups (by class, by collective kind,
 * by stream), each normalized in place: group g is v[off[g] .. off[g]+len[g]). */
typedef struct grouping {
    ao_ival *v;
    size_t off[MAX_GROUPS];
    size_t len[MAX_GROUPS];
} grouping;

/* key[i] is op i's group, or -1 for none. Counting sort, then normalize. */
static void group_ops(const ao_op *ops, size_t n, const int *key, int ngroups, grouping *g)
{
    size_t fill[MAX_GROUPS];
    for (int k = 0; k < ngroups; k++) g->len[k] = 0;
    for (size_t i = 0; i < n; i++)
        if (key[i] >= 0) g->len[key[i]]++;
    size_t at = 0;
    for (int k = 0; k < ngroups; k++) {
        g->off[k] = fill[k] = at;
        at += g->len[k];
    }
    for (size_t i = 0; i < n; i++)
        if (key[i] >= 0) g->v[fill[key[i]]++] = (ao_ival){ops[i].start_us, ops[i].end_us};
    for (int k = 0; k < ngroups; k++) g->len[k] = ao_iv_normalize(g->v + g->off[k], g->len[k]);
}

static const ao_ival *group(const grouping *g, int k)
{
    return g->v + g->off[k];
}

static double ratio_or_nan(double num, double den)
{
    return den > 0 ? num / den : NAN;
}

/* Most iterations have a few hundred ops: their scratch fits on the stack, so
 * the per-iteration path does not allocate. */
enum { STACK_IVALS = 4096 };

/* Idle time in which no op was enqueued (the device ran dry waiting for the
 * host): the window less what ran (all) and what was queued, [issue, start]
 * of each op. NAN when an op has no issue time (has_issue). scratch holds 5n + 2. */
static double host_wait_ms(const ao_op *ops, size_t n, const ao_ival *window, const ao_ival *all,
                           size_t nall, ao_ival *scratch)
{
    ao_ival *q = scratch, *busy = scratch + n, *rest = scratch + 3 * n + 1;
    size_t nq = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ops[i].has_issue || !isfinite(ops[i].issue_us)) return NAN;
        if (ops[i].issue_us < ops[i].start_us)
            q[nq++] = (ao_ival){ops[i].issue_us, ops[i].start_us};
    }
    nq = ao_iv_normalize(q, nq);
    size_t nb = ao_iv_union(q, nq, all, nall, busy);
    size_t nr = ao_iv_subtract(window, window->end > window->start, busy, nb, rest);
    return ao_iv_length(rest, nr) / 1000.0;
}

void ao_overlap_compute(const ao_op *ops, size_t n, int world_size, ao_overlap *out)
{
    memset(out, 0, sizeof *out);
    out->overlap_ratio = out->compute_covered_ratio = out->overlap_efficiency = NAN;
    out->host_wait_ms = out->first_issue_us = NAN;
    if (n == 0) return;

    /* Scratch: three groupings of n, the union of all classes (n), and a
     * result buffer for unions and subtractions (at most n + 1 pieces). */
    size_t need = 10 * n + 3; /* and host_wait_ms's 5n + 2 */
    ao_ival stack_buf[STACK_IVALS];
    ao_ival *buf = need <= STACK_IVALS ? stack_buf : ao_malloc(need * sizeof *buf);
    grouping by_class = {.v = buf}, by_kind = {.v = buf + n}, by_stream = {.v = buf + 2 * n};
    ao_ival *all = buf + 3 * n, *tmp = buf + 4 * n;
    int key_stack[STACK_IVALS];
    int *key = n <= STACK_IVALS ? key_stack : ao_malloc(n * sizeof *key);

    double w0 = ops[0].start_us, w1 = ops[0].end_us;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].start_us < w0) w0 = ops[i].start_us;
        if (ops[i].end_us > w1) w1 = ops[i].end_us;
    }
    out->window_start_us = w0;
    out->window_end_us = w1;
    out->step_ms = (w1 - w0) / 1000.0;

    for (size_t i = 0; i < n; i++) key[i] = ops[i].cls < NCLASSES ? ops[i].cls : -1;
    group_ops(ops, n, key, NCLASSES, &by_class);
    for (size_t i = 0; i < n; i++)
        key[i] = ops[i].cls == AO_CLASS_COMM && ops[i].kind >= 0 && ops[i].kind < AO_NKINDS
                     ? ops[i].kind
                     : -1;
    group_ops(ops, n, key, AO_NKINDS, &by_kind);
    for (size_t i = 0; i < n; i++) key[i] = ops[i].stream < AO_NSTREAMS ? ops[i].stream : -1;
    group_ops(ops, n, key, AO_NSTREAMS, &by_stream);

    const ao_ival *C = group(&by_class, AO_CLASS_COMPUTE), *M = group(&by_class, AO_CLASS_COMM),
                  *X = group(&by_class, AO_CLASS_COPY);
    size_t nc = by_class.len[AO_CLASS_COMPUTE], nm = by_class.len[AO_CLASS_COMM],
           nx = by_class.len[AO_CLASS_COPY];
    double c_us = ao_iv_length(C, nc), m_us = ao_iv_length(M, nm);
    out->compute_ms = c_us / 1000.0;
    out->comm_ms = m_us / 1000.0;
    out->copy_ms = ao_iv_length(X, nx) / 1000.0;

    double overlap_us = ao_iv_intersect_length(C, nc, M, nm);
    out->overlap_ms = overlap_us / 1000.0;
    out->exposed_comm_ms = ao_iv_length(tmp, ao_iv_subtract(M, nm, C, nc, tmp)) / 1000.0;

    /* all = C ∪ M ∪ X, built in two steps through tmp. */
    size_t ncm = ao_iv_union(C, nc, M, nm, tmp);
    size_t nall = ao_iv_union(tmp, ncm, X, nx, all);
    ao_ival window = {w0, w1};
    out->idle_ms = ao_iv_length(tmp, ao_iv_subtract(&window, w1 > w0, all, nall, tmp)) / 1000.0;
    out->host_wait_ms = host_wait_ms(ops, n, &window, all, nall, buf + 5 * n + 1);
    if (isfinite(out->host_wait_ms))
        for (size_t i = 0; i < n; i++)
            if (!(ops[i].issue_us >= out->first_issue_us)) out->first_issue_us = ops[i].issue_us;

    out->overlap_ratio = ratio_or_nan(overlap_us, m_us);
    out->compute_covered_ratio = ratio_or_nan(overlap_us, c_us);
    out->overlap_efficiency = ratio_or_nan(overlap_us, c_us < m_us ? c_us : m_us);

    for (size_t i = 0; i < n; i++) {
        if (ops[i].stream < AO_NSTREAMS) out->streams[ops[i].stream].ops++;
        if (ops[i].cls == AO_CLASS_COMM && ops[i].kind >= 0 && ops[i].kind < AO_NKINDS) {
            out->kinds[ops[i].kind].ops++;
            out->kinds[ops[i].kind].bytes += ops[i].bytes;
        }
    }
    for (int s = 0; s < AO_NSTREAMS; s++)
        out->streams[s].busy_ms = ao_iv_length(group(&by_stream, s), by_stream.len[s]) / 1000.0;
    for (int k = 0; k < AO_NKINDS; k++) {
        const ao_ival *Mk = group(&by_kind, k);
        size_t nk = by_kind.len[k];
        ao_kind_stats *ks = &out->kinds[k];
        double busy_us = ao_iv_length(Mk, nk);
        ks->busy_ms = busy_us / 1000.0;
        /* bytes / (busy_us * 1e-6 s) / 1e9 */
        ks->algbw_gbps = busy_us > 0 ? (double)ks->bytes / busy_us / 1e3 : 0;
        ks->busbw_gbps = ks->algbw_gbps * ao_busbw_factor((ao_coll_kind)k, world_size);
        out->compute_kind_ms[k] = ao_iv_intersect_length(C, nc, Mk, nk) / 1000.0;
        /* tmp holds at most nk + nc pieces, within its n + 1 */
        out->exposed_kind_ms[k] = ao_iv_length(tmp, ao_iv_subtract(Mk, nk, C, nc, tmp)) / 1000.0;
    }

    if (buf != stack_buf) free(buf);
    if (key != key_stack) free(key);
}

static double valid_or_nan(double isolated_ms)
{
    return isolated_ms > 0 ? isolated_ms : NAN; /* also maps NAN to NAN */
}

void ao_decompose(double compute_isolated_ms, double comm_isolated_ms, double step_ms,
                  double compute_ms, double comm_ms, ao_decomposition *out)
{
    double ci = valid_or_nan(compute_isolated_ms), mi = valid_or_nan(comm_isolated_ms);
    out->compute_isolated_ms = ci;
    out->comm_isolated_ms = mi;
    out->ideal_ms = isnan(ci) || isnan(mi) ? NAN : (ci > mi ? ci : mi);
    out->serial_ms = ci + mi;
    double room = out->serial_ms - out->ideal_ms;
    out->achieved = room != 0 ? (out->serial_ms - step_ms) / room : NAN;
    out->contention_ms = compute_ms - ci;
    out->comm_slowdown = comm_ms / mi;
}
