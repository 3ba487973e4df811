/* The §7 decomposition against the baselines (runs/decompose.h). */
#include "runs/decompose.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/stats.h"
#include "runs/compare.h"
#include "runs/summary.h"

const char *const ao_decomp_check_names[AO_DECOMP_NCHECKS] = {
    "compute_only_compute_ms", "comm_only_comm_ms", "train_compute_ms", "train_comm_ms"};

/* A growable list of doubles. */
typedef struct vals {
    double *v;
    size_t n, cap;
} vals;

static void push(vals *x, double v)
{
    if (x->n == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 64;
        x->v = ao_realloc(x->v, x->cap * sizeof *x->v);
    }
    x->v[x->n++] = v;
}

static double median_free(vals *x)
{
    double m = ao_stats_count(x->v, x->n) ? ao_stats_median(x->v, x->n) : NAN;
    free(x->v);
    memset(x, 0, sizeof *x);
    return m;
}

/* The ranks' data of every run (rank: an index into each run's ranks, or
 * -1 for all): a heap array, *n of them. */
static const ao_rank_data **ranks_of(const ao_run_data *runs, size_t nruns, int rank, size_t *n)
{
    size_t cap = 1;
    for (size_t r = 0; r < nruns; r++) cap += (size_t)runs[r].nranks;
    const ao_rank_data **v = ao_malloc(cap * sizeof *v);
    *n = 0;
    for (size_t r = 0; r < nruns; r++)
        for (int k = 0; k < runs[r].nranks; k++)
            if (rank < 0 || k == rank) v[(*n)++] = &runs[r].ranks[k];
    return v;
}

static void check_push(vals *x, double v, int *all_finite)
{
    if (!isfinite(v) && all_finite) *all_finite = 0;
    push(x, v);
}

/* A baseline field: off into ao_overlap for the events, into ao_kernel_view
 * for the kernels; its median over the ranks' baseline records of one kind. */
static double baseline(const ao_run_data *runs, size_t nruns, int rank, int comm, int kernels,
                       size_t off, int *all_finite)
{
    vals x = {0};
    size_t nr;
    const ao_rank_data **rs = ranks_of(runs, nruns, rank, &nr);
    for (size_t i = 0; i < nr; i++) {
        const ao_rank_data *rd = rs[i];
        size_t n = comm ? rd->ncomm_only : rd->ncompute_only;
        for (size_t j = 0; j < n; j++) {
            const void *rec =
                kernels ? (const void *)(comm ? &rd->comm_only_k[j] : &rd->compute_only_k[j])
                        : (const void *)(comm ? &rd->comm_only[j] : &rd->compute_only[j]);
            check_push(&x, *(const double *)((const char *)rec + off), all_finite);
        }
    }
    free(rs);
    return median_free(&x);
}

/* Metric `name` of the ranks' kept train records: pooled median, or with
 * step the per-step max over ranks (one rank: its own median). */
static double train(const ao_run_data *runs, size_t nruns, int rank, const char *name, int step,
                    int *all_finite)
{
    int m = ao_metric_find(name);
    vals x = {0};
    size_t nr;
    const ao_rank_data **rs = ranks_of(runs, nruns, rank, &nr);
    for (size_t k = 0; k < nr; k++)
        for (size_t i = 0; i < rs[k]->n; i++)
            check_push(&x, rs[k]->rows[i * ao_metric_count() + (size_t)m], all_finite);
    free(rs);
    if (step && rank < 0) {
        free(x.v);
        size_t n;
        x.v = ao_step_samples(runs, nruns, (size_t)m, &n);
        x.n = x.cap = n;
    }
    return median_free(&x);
}

void ao_decomp_of(const ao_run_data *runs, size_t nruns, int rank, ao_decomp *out)
{
    memset(out, 0, sizeof *out);
    size_t nr;
    const ao_rank_data **rs = ranks_of(runs, nruns, rank, &nr);
    for (size_t k = 0; k < nr; k++) {
        out->ncompute_only += rs[k]->ncompute_only;
        out->ncomm_only += rs[k]->ncomm_only;
    }
    free(rs);
    out->have = out->ncompute_only > 0 && out->ncomm_only > 0;
    const size_t ec = offsetof(ao_overlap, compute_ms), em = offsetof(ao_overlap, comm_ms),
                 es = offsetof(ao_overlap, step_ms), kc = offsetof(ao_kernel_view, compute_ms),
                 km = offsetof(ao_kernel_view, comm_ms), ks = offsetof(ao_kernel_view, step_ms);
    int all = out->have;
    double *ev = out->events_ms, *kv = out->kernels_ms;
    ev[AO_DECOMP_CHECK_COMPUTE_ONLY] = baseline(runs, nruns, rank, 0, 0, ec, NULL);
    ev[AO_DECOMP_CHECK_COMM_ONLY] = baseline(runs, nruns, rank, 1, 0, em, NULL);
    ev[AO_DECOMP_CHECK_COMPUTE] = train(runs, nruns, rank, "compute_ms", 0, NULL);
    ev[AO_DECOMP_CHECK_COMM] = train(runs, nruns, rank, "comm_ms", 0, NULL);
    kv[AO_DECOMP_CHECK_COMPUTE_ONLY] = baseline(runs, nruns, rank, 0, 1, kc, &all);
    kv[AO_DECOMP_CHECK_COMM_ONLY] = baseline(runs, nruns, rank, 1, 1, km, &all);
    kv[AO_DECOMP_CHECK_COMPUTE] = train(runs, nruns, rank, "kernel_compute_ms", 0, &all);
    kv[AO_DECOMP_CHECK_COMM] = train(runs, nruns, rank, "kernel_comm_ms", 0, &all);
    double kstep = train(runs, nruns, rank, "kernel_step_ms", 1, &all);
    out->kernels = all && isfinite(kstep);
    const double *use = out->kernels ? kv : ev;
    out->step_ms = out->kernels ? kstep : train(runs, nruns, rank, "step_ms", 1, NULL);
    out->compute_ms = use[AO_DECOMP_CHECK_COMPUTE];
    out->comm_ms = use[AO_DECOMP_CHECK_COMM];
    out->compute_only_step_ms =
        baseline(runs, nruns, rank, 0, out->kernels, out->kernels ? ks : es, NULL);
    out->comm_only_step_ms =
        baseline(runs, nruns, rank, 1, out->kernels, out->kernels ? ks : es, NULL);
    ao_decompose(use[AO_DECOMP_CHECK_COMPUTE_ONLY], use[AO_DECOMP_CHECK_COMM_ONLY], out->step_ms,
                 out->compute_ms, out->comm_ms, &out->d);
    out->gap_ms = out->step_ms - out->d.ideal_ms;
    out->flag = out->have ? ao_decomposition_flag(&out->d) : NULL;
}

const char *ao_decomp_source(const ao_decomp *d)
{
    return d->kernels ? "kernel time (profiling.kernel_trace)" : "events";
}
