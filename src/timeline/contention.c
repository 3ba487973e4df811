/* The price of overlap: compute ops beside a collective against the same
 * ops alone (timeline/contention.h).
 *
 * One hash table holds three kinds of entries, each keyed by (lane, name,
 * bytes, occ):
 *   series  occ -2: a step's running count of launches with that lane, name
 *           and bytes, which numbers each launch's occurrence (reset lazily
 *           per step by a stamp);
 *   exact   occ >= 0: one launch of the step, learned across steps;
 *   pooled  occ -1, lane -1: every launch of that name and bytes, the
 *           fallback reference and the unit of the evidence. */
#include "timeline/contention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/intervals.h"
#include "core/json.h"

enum { OCC_SERIES = -2, OCC_POOLED = -1 };

typedef struct entry {
    char *name;
    uint64_t bytes, hash;
    int lane, occ;
    size_t alone;    /* exact, pooled: alone instances learned */
    double alone_us; /* their summed duration */
    /* series: launches counted in step `stamp`; pooled: the step's evidence */
    uint64_t stamp;
    int count;
    int beside, priced;
    double beside_us, ref_us;
} entry;

struct ao_contention {
    entry *e;
    size_t n, cap;
    size_t *slots; /* index + 1, 0 empty; power of two */
    size_t nslots;
    uint64_t stamp; /* one per classified step */
    size_t alone_total;
    /* per step scratch */
    ao_ival *comm;
    size_t comm_cap;
    size_t *touched; /* pooled entries with evidence this step */
    size_t touched_cap;
};

ao_contention *ao_contention_create(void)
{
    ao_contention *c = ao_calloc(1, sizeof *c);
    c->nslots = 1024;
    c->slots = ao_calloc(c->nslots, sizeof *c->slots);
    return c;
}

void ao_contention_destroy(ao_contention *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free(c->e[i].name);
    free(c->e);
    free(c->slots);
    free(c->comm);
    free(c->touched);
    free(c);
}

size_t ao_contention_alone(const ao_contention *c)
{
    return c->alone_total;
}

static uint64_t hash_key(const char *name, uint64_t bytes, int lane, int occ)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    uint64_t mix[3] = {bytes, (uint64_t)(int64_t)lane, (uint64_t)(int64_t)occ};
    for (int i = 0; i < 3; i++) h = (h ^ mix[i]) * 1099511628211ULL + (h >> 29);
    return h;
}

static void rehash(ao_contention *c)
{
    free(c->slots);
    c->nslots *= 2;
    c->slots = ao_calloc(c->nslots, sizeof *c->slots);
    for (size_t i = 0; i < c->n; i++) {
        size_t s = c->e[i].hash & (c->nslots - 1);
        while (c->slots[s]) s = (s + 1) & (c->nslots - 1);
        c->slots[s] = i + 1;
    }
}

/* The entry of the key, made when absent. */
static entry *get(ao_contention *c, const char *name, uint64_t bytes, int lane, int occ)
{
    uint64_t h = hash_key(name, bytes, lane, occ);
    size_t s = h & (c->nslots - 1);
    for (; c->slots[s]; s = (s + 1) & (c->nslots - 1)) {
        entry *x = &c->e[c->slots[s] - 1];
        if (x->hash == h && x->bytes == bytes && x->lane == lane && x->occ == occ &&
            strcmp(x->name, name) == 0)
            return x;
    }
    if (2 * (c->n + 1) > c->nslots) {
        rehash(c);
        return get(c, name, bytes, lane, occ);
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->e = ao_realloc(c->e, c->cap * sizeof *c->e);
    }
    entry *x = &c->e[c->n];
    memset(x, 0, sizeof *x);
    x->name = ao_strdup(name);
    x->bytes = bytes;
    x->hash = h;
    x->lane = lane;
    x->occ = occ;
    c->slots[s] = ++c->n;
    return x;
}

/* One compute op of a step, classified. */
typedef struct kop {
    size_t op;            /* index into ops */
    size_t exact, pooled; /* entry indexes */
    int beside;
    double us;
} kop;

static int by_start(const void *a, const void *b, void *ctx)
{
    const ao_op *ops = ctx;
    double x = ops[*(const size_t *)a].start_us, y = ops[*(const size_t *)b].start_us;
    if (x != y) return (x > y) - (x < y);
    return (*(const size_t *)a > *(const size_t *)b) - (*(const size_t *)a < *(const size_t *)b);
}

/* Whether [s, e) overlaps the normalized set v[0..n). */
static int overlaps(const ao_ival *v, size_t n, double s, double e)
{
    size_t lo = 0, hi = n; /* first interval ending after s */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].end <= s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].start < e;
}

/* The step's compute ops with their keys and whether a collective ran
 * beside them; *ncomm gets the communication ops' count. Heap array. */
static kop *classify(ao_contention *c, const ao_op *ops, size_t n, size_t *nk, size_t *ncomm)
{
    if (n > c->comm_cap) {
        c->comm_cap = n;
        c->comm = ao_realloc(c->comm, n * sizeof *c->comm);
    }
    size_t nc = 0, ncomp = 0;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].cls == AO_CLASS_COMM) c->comm[nc++] = (ao_ival){ops[i].start_us, ops[i].end_us};
        if (ops[i].cls == AO_CLASS_COMPUTE) ncomp++;
    }
    *ncomm = nc;
    nc = ao_iv_normalize(c->comm, nc);
    /* occurrences count in start order, whatever order the ops come in */
    size_t *order = ao_malloc((ncomp ? ncomp : 1) * sizeof *order);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (ops[i].cls == AO_CLASS_COMPUTE) order[m++] = i;
    qsort_r(order, m, sizeof *order, by_start, (void *)ops);
    kop *k = ao_malloc((m ? m : 1) * sizeof *k);
    c->stamp++;
    for (size_t j = 0; j < m; j++) {
        const ao_op *o = &ops[order[j]];
        const char *name = o->name ? o->name : "?";
        entry *series = get(c, name, o->bytes, o->stream, OCC_SERIES);
        if (series->stamp != c->stamp) {
            series->stamp = c->stamp;
            series->count = 0;
        }
        int occ = series->count++;
        size_t exact = (size_t)(get(c, name, o->bytes, o->stream, occ) - c->e);
        size_t pooled = (size_t)(get(c, name, o->bytes, -1, OCC_POOLED) - c->e);
        double us = o->end_us > o->start_us ? o->end_us - o->start_us : 0;
        k[j] = (kop){order[j], exact, pooled, overlaps(c->comm, nc, o->start_us, o->end_us), us};
    }
    free(order);
    *nk = m;
    return k;
}

void ao_contention_learn(ao_contention *c, const ao_op *ops, size_t n)
{
    size_t nk, ncomm;
    kop *k = classify(c, ops, n, &nk, &ncomm);
    for (size_t j = 0; j < nk; j++) {
        if (k[j].beside || !(k[j].us > 0)) continue;
        entry *ids[2] = {&c->e[k[j].exact], &c->e[k[j].pooled]};
        for (int i = 0; i < 2; i++) {
            ids[i]->alone++;
            ids[i]->alone_us += k[j].us;
        }
        c->alone_total++;
    }
    free(k);
}

static int by_excess(const void *a, const void *b)
{
    const ao_contention_item *x = a, *y = b;
    return (x->excess_ms < y->excess_ms) - (x->excess_ms > y->excess_ms);
}

void ao_contention_price(ao_contention *c, const ao_op *ops, size_t n, ao_contention_step *out)
{
    memset(out, 0, sizeof *out);
    size_t nk, ncomm, ntouched = 0;
    kop *k = classify(c, ops, n, &nk, &ncomm);
    if (ncomm == 0) {
        out->ms = out->beside_ms = out->unpriced_ms = NAN;
        free(k);
        return;
    }
    if (nk > c->touched_cap) {
        c->touched_cap = nk;
        c->touched = ao_realloc(c->touched, nk * sizeof *c->touched);
    }
    double excess_us = 0, beside_us = 0, unpriced_us = 0;
    const char **names = ao_calloc(nk ? nk : 1, sizeof *names); /* by touched index */
    for (size_t j = 0; j < nk; j++) {
        if (!k[j].beside) continue;
        entry *ex = &c->e[k[j].exact], *po = &c->e[k[j].pooled];
        out->beside++;
        beside_us += k[j].us;
        if (po->stamp != c->stamp) { /* first beside instance of this name this step */
            po->stamp = c->stamp;
            po->beside = po->priced = 0;
            po->beside_us = po->ref_us = 0;
            names[ntouched] = ops[k[j].op].name;
            c->touched[ntouched++] = k[j].pooled;
        }
        po->beside++;
        const entry *ref = ex->alone ? ex : po->alone ? po : NULL;
        if (!ref) {
            unpriced_us += k[j].us;
            continue;
        }
        double r = ref->alone_us / (double)ref->alone;
        out->priced++;
        po->priced++;
        po->beside_us += k[j].us;
        po->ref_us += r;
        excess_us += k[j].us - r;
    }
    out->ms = excess_us / 1000.0;
    out->beside_ms = beside_us / 1000.0;
    out->unpriced_ms = unpriced_us / 1000.0;
    /* the evidence: the step's kernels by their summed excess */
    ao_contention_item *items = ao_malloc((ntouched ? ntouched : 1) * sizeof *items);
    for (size_t t = 0; t < ntouched; t++) {
        const entry *po = &c->e[c->touched[t]];
        items[t] = (ao_contention_item){
            .name = names[t] ? names[t] : "?",
            .bytes = po->bytes,
            .beside = po->beside,
            .priced = po->priced,
            .alone = po->alone,
            .beside_us = po->priced ? po->beside_us / po->priced : NAN,
            .alone_us = po->priced ? po->ref_us / po->priced : NAN,
            .excess_ms = (po->beside_us - po->ref_us) / 1000.0,
        };
    }
    qsort(items, ntouched, sizeof *items, by_excess);
    out->ntop = ntouched < AO_CONTENTION_TOP ? ntouched : AO_CONTENTION_TOP;
    memcpy(out->top, items, out->ntop * sizeof *items);
    free(items);
    free(names);
    free(k);
}

yajl_gen_status ao_contention_step_gen(yajl_gen g, const ao_contention_step *s)
{
    ao_json_writer w = {g, yajl_gen_status_ok};
    ao_jw_open(&w, "contention");
    ao_jw_double(&w, "ms", s->ms);
    ao_jw_double(&w, "beside_ms", s->beside_ms);
    ao_jw_double(&w, "unpriced_ms", s->unpriced_ms);
    ao_jw_int(&w, "beside", s->beside);
    ao_jw_int(&w, "priced", s->priced);
    ao_jw_aopen(&w, "top");
    for (size_t i = 0; i < s->ntop; i++) {
        const ao_contention_item *it = &s->top[i];
        ao_jw_open(&w, NULL);
        ao_jw_str(&w, "name", it->name);
        ao_jw_u64(&w, "bytes", it->bytes);
        ao_jw_int(&w, "beside", it->beside);
        ao_jw_int(&w, "priced", it->priced);
        ao_jw_u64(&w, "alone", it->alone);
        ao_jw_double(&w, "beside_us", it->beside_us);
        ao_jw_double(&w, "alone_us", it->alone_us);
        ao_jw_double(&w, "excess_ms", it->excess_ms);
        ao_jw_close(&w);
    }
    ao_jw_aclose(&w);
    ao_jw_close(&w);
    return w.st;
}
