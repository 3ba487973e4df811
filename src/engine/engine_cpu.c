/* The engine's small kernels on the cpu device: stream closures running the
 * ops_ref.h reference (engine_backend.h). The closures read the device
 * scalars when they run, in stream order, as a GPU kernel would. */
#include <math.h>

#include "core/error.h"
#include "engine/engine_backend.h"
#include "model/ops_ref.h"

struct k_accum {
    float *acc;
    const float *red;
    size_t n;
};
static void run_accum(void *arg)
{
    struct k_accum *a = arg;
    for (size_t i = 0; i < a->n; i++) a->acc[i] += a->red[i];
}

static void cpu_accumulate(ao_stream *s, float *acc, const float *red, size_t n)
{
    struct k_accum a = {acc, red, n};
    ao_launch_host(s, run_accum, &a, sizeof a);
}

struct k_sumsq {
    const float *g;
    size_t n;
    double *out;
};
static void run_sumsq(void *arg)
{
    struct k_sumsq *a = arg;
    a->out[0] = ao_sum_squares(a->g, a->n);
}

static void cpu_sum_squares(ao_stream *s, double *out, const float *g, size_t n, void *workspace)
{
    (void)workspace;
    struct k_sumsq k = {g, n, out};
    ao_launch_host(s, run_sumsq, &k, sizeof k);
}

struct k_scalars {
    const double *sq;
    int nsq;
    const float *loss;
    int nloss;
    double scale;
    double stop;
    double *out; /* [3] */
};
static void run_scalars(void *arg)
{
    struct k_scalars *a = arg;
    double sq = 0, loss = 0;
    for (int i = 0; i < a->nsq; i++) sq += a->sq[i];
    for (int i = 0; i < a->nloss; i++) loss += a->loss[i];
    a->out[0] = sq * a->scale;
    a->out[1] = loss;
    a->out[2] = a->stop;
}

static void cpu_step_scalars(ao_stream *s, double *out, const double *sq, int nsq, double scale,
                             const float *loss, int nloss, double stop)
{
    struct k_scalars k = {sq, nsq, loss, nloss, scale, stop, out};
    ao_launch_host(s, run_scalars, &k, sizeof k);
}

struct k_adamw {
    float *p, *m, *v;
    const float *g;
    size_t n;
    ao_adamw_hparams h;
    float lr, max_norm, grad_scale;
    int64_t step;
    const double *global; /* [1]: squared norm */
    double *result;       /* [2]: norm, coefficient */
};
static void run_adamw(void *arg)
{
    struct k_adamw *a = arg;
    a->result[0] = sqrt(a->global[0]);
    if (!isfinite(a->global[0])) {
        a->result[1] = 0.0; /* skipped */
        return;
    }
    float coef = ao_clip_coef(a->global[0], a->max_norm);
    a->result[1] = coef;
    ao_adamw_step(a->p, a->g, a->m, a->v, a->n, &a->h, a->lr, a->step, coef * a->grad_scale);
}

static void cpu_adamw(ao_stream *s, float *p, void *p16, ao_dtype p16_type, float *m, float *v,
                      const float *g, size_t n, const ao_adamw_hparams *h, float lr, float max_norm,
                      float grad_scale, int64_t step, const double *global_sq, double *result,
                      void *workspace)
{
    (void)workspace;
    (void)p16_type;
    if (p16) /* no cast here, so the engine gathers fp32 and never asks */
        ao_fatal(AO_EXIT_FAIL, "engine", "the cpu backend keeps no 16-bit parameter copy");
    struct k_adamw k = {p, m, v, g, n, *h, lr, max_norm, grad_scale, step, global_sq, result};
    ao_launch_host(s, run_adamw, &k, sizeof k);
}

const struct ao_engine_backend ao_engine_cpu_backend = {
    .device_backend = "cpu",
    .workspace_bytes = 0,
    .set_compute = NULL,
    .cast = NULL,
    .accumulate = cpu_accumulate,
    .sum_squares = cpu_sum_squares,
    .step_scalars = cpu_step_scalars,
    .adamw = cpu_adamw,
};
