#include "queues/qmetrics.h"

#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/intervals.h"

typedef struct edge {
    double t;
    int delta; /* +1 a stream starts, -1 one stops */
} edge;

static int cmp_edge(const void *a, const void *b)
{
    const edge *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->delta - y->delta; /* stops before starts at one instant: touching is not overlap */
}

void ao_qunion_compute(const ao_qop *ops, size_t n, int nstreams, ao_qunion *out)
{
    *out = (ao_qunion){.concurrency = NAN};
    if (n == 0 || nstreams < 1) return;
    ao_ival *iv = ao_malloc(n * sizeof *iv);
    edge *e = ao_malloc(2 * n * sizeof *e);
    size_t ne = 0;
    /* Each stream's own union first, so that a stream counts once at a time
     * however its ops nest. */
    for (int s = 0; s < nstreams; s++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (ops[i].stream == s) iv[k++] = (ao_ival){ops[i].start_us, ops[i].end_us};
        k = ao_iv_normalize(iv, k);
        out->sum_us += ao_iv_length(iv, k);
        for (size_t i = 0; i < k; i++) {
            e[ne++] = (edge){iv[i].start, +1};
            e[ne++] = (edge){iv[i].end, -1};
        }
    }
    qsort(e, ne, sizeof *e, cmp_edge);
    int active = 0;
    for (size_t i = 0; i < ne; i++) {
        if (i > 0 && active > 0) {
            double dt = e[i].t - e[i - 1].t;
            out->busy_us += dt;
            if (active >= 2) out->concurrent_us += dt;
        }
        active += e[i].delta;
        if (active > out->max_streams) out->max_streams = active;
    }
    if (out->busy_us > 0) out->concurrency = out->sum_us / out->busy_us;
    free(e);
    free(iv);
}

typedef struct by_time {
    double t;
    size_t i;
} by_time;

static int cmp_by_time(const void *a, const void *b)
{
    const by_time *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

void ao_qgaps(const ao_qop *ops, size_t n, double *intra, size_t *nintra, double *inter,
              size_t *ninter)
{
    *nintra = *ninter = 0;
    if (n == 0) return;
    by_time *starts = ao_malloc(n * sizeof *starts), *ends = ao_malloc(n * sizeof *ends);
    for (size_t i = 0; i < n; i++) {
        starts[i] = (by_time){ops[i].start_us, i};
        ends[i] = (by_time){ops[i].end_us, i};
    }
    qsort(starts, n, sizeof *starts, cmp_by_time);
    qsort(ends, n, sizeof *ends, cmp_by_time);
    /* Walk the starts in order; `last` is the op with the latest end <= the
     * current start (ties: the one issued last). */
    size_t j = 0;
    long last = -1;
    for (size_t k = 0; k < n; k++) {
        const ao_qop *b = &ops[starts[k].i];
        while (j < n && ends[j].t <= b->start_us) {
            if (ends[j].i != starts[k].i) last = (long)ends[j].i;
            j++;
        }
        if (last < 0 || (size_t)last == starts[k].i) continue;
        const ao_qop *a = &ops[last];
        double gap = b->start_us - a->end_us;
        if (a->stream == b->stream)
            intra[(*nintra)++] = gap;
        else
            inter[(*ninter)++] = gap;
    }
    free(starts);
    free(ends);
}

double ao_qefficiency(double thr, int ops, double thr1, int ops1)
{
    if (!(thr > 0) || !(thr1 > 0) || ops < 1 || ops1 < 1) return NAN;
    return thr / thr1 * (double)ops1 / (double)ops;
}

int ao_qknee(const int *counts, const double *efficiency, int n)
{
    if (n < 1) return 0;
    int knee = counts[0];
    double best = 0;
    for (int i = 0; i < n; i++) {
        double e = isfinite(efficiency[i]) ? efficiency[i] : 0;
        if (e < 0.9 * best) break;
        best = fmax(best, e);
        knee = counts[i];
    }
    return knee;
}
