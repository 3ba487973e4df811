/* Matching collectives across ranks, their per-instance numbers, and the
 * late rank's windows (collectives.h). */
#include "runs/collectives.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* A member ending this long before the last one started means the ranks'
 * clocks disagree: no rank can finish a gather, reduce or all-to-all before
 * every rank has joined it. */
#define ALIGN_TOL_US 2.0

const char *ao_pass_name(ao_pass p)
{
    static const char *const names[AO_NPASSES] = {"unknown", "forward", "backward", "optimizer"};
    return (unsigned)p < AO_NPASSES ? names[p] : "unknown";
}

const char *ao_late_cause_name(ao_late_cause c)
{
    static const char *const names[AO_NCAUSES] = {"host_wait",   "data_wait",  "compute",
                                                  "device_wait", "collective", "unknown"};
    return (unsigned)c < AO_NCAUSES ? names[c] : "unknown";
}

ao_late_cause ao_late_cause_top(const double us[AO_NCAUSES])
{
    int best = AO_CAUSE_UNKNOWN;
    double most = 0;
    for (int c = 0; c < AO_NCAUSES; c++)
        if (us[c] > most) {
            most = us[c];
            best = c;
        }
    return (ao_late_cause)best;
}

/* ---- a rank's entries ---------------------------------------------------------- */

int32_t ao_coll_rank_str(ao_coll_rank *r, const char *s)
{
    if (!s) return -1;
    for (size_t i = 0; i < r->nstrs; i++)
        if (strcmp(r->strs[i], s) == 0) return (int32_t)i;
    if (r->nstrs == r->cap_strs) {
        r->cap_strs = r->cap_strs ? 2 * r->cap_strs : 16;
        r->strs = ao_realloc(r->strs, r->cap_strs * sizeof *r->strs);
    }
    r->strs[r->nstrs] = ao_strdup(s);
    return (int32_t)r->nstrs++;
}

ao_coll_entry *ao_coll_rank_add(ao_coll_rank *r)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->v = ao_realloc(r->v, r->cap * sizeof *r->v);
    }
    ao_coll_entry *e = &r->v[r->n++];
    *e = (ao_coll_entry){.seq = -1,
                         .op_index = -1,
                         .group = -1,
                         .op = -1,
                         .dtype = -1,
                         .unit = -1,
                         .group_size = -1,
                         .kind = "other",
                         .count = -1,
                         .issue_us = NAN};
    return e;
}

void ao_coll_rank_free(ao_coll_rank *r)
{
    for (size_t i = 0; i < r->nstrs; i++) free(r->strs[i]);
    free(r->strs);
    free(r->v);
    memset(r, 0, sizeof *r);
}

/* ---- the set's strings ---------------------------------------------------------- */

const char *ao_coll_set_str(ao_coll_set *s, const char *str)
{
    if (!str) return NULL;
    /* few distinct strings (groups, ops, dtypes, units): a linear probe of
     * the last ones first, where repeats are */
    for (size_t i = s->nstrs; i-- > 0;)
        if (strcmp(s->strs[i], str) == 0) return s->strs[i];
    if (s->nstrs == s->cap_strs) {
        s->cap_strs = s->cap_strs ? 2 * s->cap_strs : 32;
        s->strs = ao_realloc(s->strs, s->cap_strs * sizeof *s->strs);
    }
    s->strs[s->nstrs] = ao_strdup(str);
    return s->strs[s->nstrs++];
}

void ao_coll_set_free(ao_coll_set *s)
{
    for (size_t i = 0; i < s->nstrs; i++) free(s->strs[i]);
    free(s->strs);
    free(s->inst);
    free(s->members);
    memset(s, 0, sizeof *s);
}

/* ---- matching ------------------------------------------------------------------- */

typedef struct keyed {
    long long step, seq;
    const char *group; /* the set's string: the group's name, else "kind:<kind>" */
    size_t order;      /* position among the rank's entries */
    int rank;
    const ao_coll_entry *e;
    const ao_coll_rank *r;
} keyed;

static int cmp_ll(long long a, long long b)
{
    return (a > b) - (a < b);
}

/* Strings are interned: compared by address, an order that is the same
 * for every rank within one run of the matcher. */
static int cmp_ptr(const void *a, const void *b)
{
    return (a > b) - (a < b);
}

static int by_rank_group(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    int c = cmp_ll(a->rank, b->rank);
    if (!c) c = cmp_ll(a->step, b->step);
    if (!c) c = cmp_ptr(a->group, b->group);
    if (!c) c = cmp_ll((long long)a->order, (long long)b->order);
    return c;
}

static int by_key(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    int c = cmp_ll(a->step, b->step);
    if (!c) c = cmp_ptr(a->group, b->group);
    if (!c) c = cmp_ll(a->seq, b->seq);
    if (!c) c = cmp_ll(a->rank, b->rank);
    return c;
}

static int by_step_start(const void *pa, const void *pb)
{
    const ao_coll_instance *a = pa, *b = pb;
    int c = cmp_ll(a->step, b->step);
    if (!c) c = (a->first_start_us > b->first_start_us) - (a->first_start_us < b->first_start_us);
    if (!c) c = cmp_ll(a->seq, b->seq);
    return c;
}

/* nccl-tests' bus bandwidth factor by kind name; NAN when it has none. */
static double busbw_factor(const char *kind, int n)
{
    if (n < 1) return NAN;
    if (strcmp(kind, "allreduce") == 0) return 2.0 * (n - 1) / n;
    if (strcmp(kind, "allgather") == 0 || strcmp(kind, "reducescatter") == 0 ||
        strcmp(kind, "alltoall") == 0)
        return (double)(n - 1) / n;
    if (strcmp(kind, "broadcast") == 0 || strcmp(kind, "sendrecv") == 0) return 1.0;
    return NAN;
}

/* Whether every rank must have joined before any can finish. */
static int all_to_all_kind(const char *kind)
{
    return strcmp(kind, "allgather") == 0 || strcmp(kind, "reducescatter") == 0 ||
           strcmp(kind, "allreduce") == 0 || strcmp(kind, "alltoall") == 0;
}

static const char *rank_str(const ao_coll_rank *r, int32_t id)
{
    return id >= 0 && (size_t)id < r->nstrs ? r->strs[id] : NULL;
}

static void fill_instance(ao_coll_set *s, ao_coll_instance *in, const keyed *k, size_t n)
{
    const ao_coll_entry *e0 = k[0].e;
    memset(in, 0, sizeof *in);
    in->step = k[0].step;
    in->seq = k[0].seq;
    in->group = ao_coll_set_str(s, rank_str(k[0].r, e0->group));
    in->kind = ao_coll_set_str(s, e0->kind);
    in->group_size = -1;
    in->count = -1;
    in->consistent = 1;
    in->first = s->nmembers;
    in->n = n;
    in->late_rank = -1;
    in->first_start_us = INFINITY;
    in->last_start_us = in->last_end_us = -INFINITY;
    double min_end = INFINITY;
    for (size_t i = 0; i < n; i++) {
        const ao_coll_entry *e = k[i].e;
        const ao_coll_rank *r = k[i].r;
        if (!in->op) in->op = ao_coll_set_str(s, rank_str(r, e->op));
        if (!in->dtype) in->dtype = ao_coll_set_str(s, rank_str(r, e->dtype));
        if (!in->unit) in->unit = ao_coll_set_str(s, rank_str(r, e->unit));
        if (in->pass == AO_PASS_UNKNOWN) in->pass = e->pass;
        if (in->group_size < 0) in->group_size = e->group_size;
        if (strcmp(e->kind, e0->kind) != 0 || (e->bytes && e0->bytes && e->bytes != e0->bytes))
            in->consistent = 0;
        if (e->bytes > in->bytes) in->bytes = e->bytes;
        if (e->count > in->count) in->count = e->count;
        s->members[s->nmembers++] = (ao_coll_member){.rank = k[i].rank,
                                                     .op_index = e->op_index,
                                                     .issue_us = e->issue_us,
                                                     .start_us = e->start_us,
                                                     .end_us = e->end_us};
        if (e->start_us < in->first_start_us) in->first_start_us = e->start_us;
        if (e->start_us > in->last_start_us) {
            in->last_start_us = e->start_us;
            in->late_rank = k[i].rank;
        }
        if (e->end_us > in->last_end_us) in->last_end_us = e->end_us;
        if (e->end_us < min_end) min_end = e->end_us;
    }
    in->skew_us = in->last_start_us - in->first_start_us;
    if (n < 2 || !(in->skew_us > 0)) in->late_rank = -1; /* nobody waited */
    in->transfer_us = in->last_end_us - in->last_start_us;
    if (in->transfer_us < 0) in->transfer_us = 0;
    int group = in->group_size > 0 ? in->group_size : (int)n;
    in->complete = (int)n >= group;
    in->aligned =
        !(all_to_all_kind(in->kind) && n > 1 && min_end < in->last_start_us - ALIGN_TOL_US);
    in->algbw_gbps = in->busbw_gbps = NAN;
    if (in->bytes && in->transfer_us > 0) {
        in->algbw_gbps = (double)in->bytes / (in->transfer_us * 1e3);
        in->busbw_gbps = in->algbw_gbps * busbw_factor(in->kind, group);
    }
    for (int c = 0; c < AO_NCAUSES; c++) in->cause_us[c] = NAN;
    s->inconsistent += !in->consistent;
    s->partial += !in->complete;
    s->misaligned += !in->aligned;
    s->single += n < 2;
}

void ao_coll_match(const ao_coll_rank *ranks, size_t n, ao_coll_set *out)
{
    memset(out, 0, sizeof *out);
    size_t total = 0;
    for (size_t r = 0; r < n; r++) total += ranks[r].n;
    out->nranks = (int)n;
    keyed *k = ao_malloc((total ? total : 1) * sizeof *k);
    size_t m = 0;
    for (size_t r = 0; r < n; r++) {
        const ao_coll_rank *cr = &ranks[r];
        for (size_t i = 0; i < cr->n; i++) {
            const ao_coll_entry *e = &cr->v[i];
            const char *g = rank_str(cr, e->group);
            char byk[64];
            if (!g) {
                snprintf(byk, sizeof byk, "kind:%s", e->kind);
                g = byk;
            }
            k[m++] = (keyed){.step = e->step,
                             .seq = e->seq,
                             .group = ao_coll_set_str(out, g),
                             .order = i,
                             .rank = cr->rank,
                             .e = e,
                             .r = cr};
        }
    }
    /* Entries without the communicator's number: their order among the
     * rank's entries of the same step and communicator. */
    qsort(k, m, sizeof *k, by_rank_group);
    for (size_t i = 0; i < m;) {
        size_t j = i;
        long long ord = 0;
        while (j < m && k[j].rank == k[i].rank && k[j].step == k[i].step &&
               k[j].group == k[i].group) {
            if (k[j].seq < 0) k[j].seq = ord;
            ord++;
            j++;
        }
        i = j;
    }
    qsort(k, m, sizeof *k, by_key);
    out->members = ao_malloc((m ? m : 1) * sizeof *out->members);
    size_t ninst = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i + 1;
        while (j < m && k[j].step == k[i].step && k[j].group == k[i].group && k[j].seq == k[i].seq)
            j++;
        ninst++;
        i = j;
    }
    out->inst = ao_malloc((ninst ? ninst : 1) * sizeof *out->inst);
    for (size_t i = 0; i < m;) {
        size_t j = i + 1;
        while (j < m && k[j].step == k[i].step && k[j].group == k[i].group &&
               k[j].seq == k[i].seq) {
            /* one rank twice under one key: keep its first sighting */
            if (k[j].rank == k[j - 1].rank) {
                memmove(&k[j], &k[j + 1], (m - j - 1) * sizeof *k);
                m--;
                continue;
            }
            j++;
        }
        fill_instance(out, &out->inst[out->ninst++], k + i, j - i);
        i = j;
    }
    free(k);
    qsort(out->inst, out->ninst, sizeof *out->inst, by_step_start);
}

/* ---- the late rank's windows ------------------------------------------------------ */

typedef struct win_key {
    double b;
    size_t inst;
} win_key;

static int by_b(const void *pa, const void *pb)
{
    const win_key *a = pa, *b = pb;
    if (a->b != b->b) return (a->b > b->b) - (a->b < b->b);
    return (a->inst > b->inst) - (a->inst < b->inst);
}

size_t ao_coll_late_windows(const ao_coll_set *s, int rank, ao_late_window **out)
{
    size_t n = 0;
    for (size_t i = 0; i < s->ninst; i++) n += s->inst[i].late_rank == rank;
    win_key *w = ao_malloc((n ? n : 1) * sizeof *w);
    n = 0;
    for (size_t i = 0; i < s->ninst; i++)
        if (s->inst[i].late_rank == rank) w[n++] = (win_key){s->inst[i].last_start_us, i};
    qsort(w, n, sizeof *w, by_b);
    *out = ao_malloc((n ? n : 1) * sizeof **out);
    double covered = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        const ao_coll_instance *in = &s->inst[w[i].inst];
        double a = in->first_start_us > covered ? in->first_start_us : covered;
        double b = in->last_start_us, issued = NAN;
        for (size_t m = 0; m < in->n; m++)
            if (s->members[in->first + m].rank == rank) issued = s->members[in->first + m].issue_us;
        (*out)[i] = (ao_late_window){w[i].inst, a < b ? a : b, b, issued};
        if (b > covered) covered = b;
    }
    free(w);
    return n;
}

/* ---- what the timeline held ----------------------------------------------------- */

void ao_late_breakdown(const ao_op *ops, size_t n, const ao_ival *data, size_t ndata, double a,
                       double b, double issued, double cover_from, double us[AO_NCAUSES])
{
    for (int c = 0; c < AO_NCAUSES; c++) us[c] = 0;
    if (!(b > a)) return;
    if (cover_from > a) {
        us[AO_CAUSE_UNKNOWN] = (cover_from < b ? cover_from : b) - a;
        a = cover_from;
        if (!(b > a)) return;
    }
    if (issued > a) {
        /* not issued yet: the collective waited for this rank's host */
        ao_ival h = {a, issued < b ? issued : b};
        double d = ndata ? ao_iv_intersect_length(&h, 1, data, ndata) : 0;
        us[AO_CAUSE_DATA_WAIT] += d;
        us[AO_CAUSE_HOST_WAIT] += h.end - h.start - d;
        a = h.end;
        if (!(b > a)) return;
    }
    /* busy (compute and copies), other collectives, queued work, within
     * [a, b); then the derived sets, each with the room its operation needs
     * (busy and comm come from n ops between them) */
    ao_ival *buf = ao_malloc((12 * n + 12) * sizeof *buf);
    ao_ival *busy = buf, *comm = busy + n, *queued = comm + n;
    ao_ival *comm_only = queued + n + 1, *any = comm_only + n, *idle = any + 2 * n + 1;
    ao_ival *host = idle + 2 * n + 2;
    size_t nb = 0, nc = 0, nq = 0;
    if (!isnan(issued)) queued[nq++] = (ao_ival){a, b}; /* this collective, issued by a */
    for (size_t i = 0; i < n; i++) {
        const ao_op *o = &ops[i];
        double s = o->start_us > a ? o->start_us : a, e = o->end_us < b ? o->end_us : b;
        if (e > s) {
            if (o->cls == AO_CLASS_COMM)
                comm[nc++] = (ao_ival){s, e};
            else
                busy[nb++] = (ao_ival){s, e};
        }
        if (o->has_issue && o->issue_us < o->start_us) {
            double qs = o->issue_us > a ? o->issue_us : a, qe = o->start_us < b ? o->start_us : b;
            if (qe > qs) queued[nq++] = (ao_ival){qs, qe};
        }
    }
    nb = ao_iv_normalize(busy, nb);
    nc = ao_iv_normalize(comm, nc);
    nq = ao_iv_normalize(queued, nq);
    us[AO_CAUSE_COMPUTE] = ao_iv_length(busy, nb);
    /* the other collectives where nothing of its own ran */
    size_t nco = ao_iv_subtract(comm, nc, busy, nb, comm_only);
    us[AO_CAUSE_COLLECTIVE] = ao_iv_length(comm_only, nco);
    /* idle: the window less both; queued work in it is a device wait */
    ao_ival win = {a, b};
    size_t nany = ao_iv_union(busy, nb, comm_only, nco, any);
    size_t ni = ao_iv_subtract(&win, 1, any, nany, idle);
    double idle_us = ao_iv_length(idle, ni);
    double dev = ao_iv_intersect_length(idle, ni, queued, nq);
    us[AO_CAUSE_DEVICE_WAIT] = dev;
    size_t nh = ao_iv_subtract(idle, ni, queued, nq, host);
    double data_us = ndata ? ao_iv_intersect_length(host, nh, data, ndata) : 0;
    us[AO_CAUSE_DATA_WAIT] += data_us;
    us[AO_CAUSE_HOST_WAIT] += idle_us - dev - data_us > 0 ? idle_us - dev - data_us : 0;
    free(buf);
}

void ao_ops_index_init(ao_ops_index *x, const ao_op *ops, size_t n)
{
    *x = (ao_ops_index){ops, n, 0, 0};
    for (size_t i = 0; i < n; i++) {
        if (ops[i].end_us - ops[i].start_us > x->max_dur)
            x->max_dur = ops[i].end_us - ops[i].start_us;
        if (ops[i].has_issue && ops[i].start_us - ops[i].issue_us > x->max_queue)
            x->max_queue = ops[i].start_us - ops[i].issue_us;
    }
}

/* The first op starting at or after t. */
static size_t first_from(const ao_ops_index *x, double t)
{
    size_t lo = 0, hi = x->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (x->ops[mid].start_us < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void ao_ops_index_breakdown(const ao_ops_index *x, const ao_ival *data, size_t ndata,
                            const ao_late_window *w, double offset, double cover_from,
                            double us[AO_NCAUSES])
{
    double a = w->a + offset, b = w->b + offset;
    /* an op reaches [a, b) when it runs into it (start > a - longest) or
     * was queued in it (start < b + longest queueing) */
    size_t lo = first_from(x, a - x->max_dur), hi = first_from(x, b + x->max_queue + 1e-9);
    ao_late_breakdown(x->ops + lo, hi > lo ? hi - lo : 0, data, ndata, a, b, w->issued + offset,
                      cover_from, us);
}
