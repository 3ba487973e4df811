/* The sharding engine's cuda kernels (engine_cuda.c) against its cpu
 * closures (engine_cpu.c, the ops_ref reference), on the same inputs:
 * accumulation (copy, then add) bit for bit; the step scalars (squared norm
 * times scale: relative 1e-12, the sums run in another order; the loss sum
 * and the stop vote exactly); AdamW with clipping active and inactive (the
 * norm and coefficient read from device memory, parameters and moments within
 * 1e-6 relative of the reference). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/device.h"

#ifdef AORTA_HAVE_CUDA

#include "engine/engine_backend.h"

#define N 100003 /* not a multiple of any block size */

typedef struct {
    ao_device *dev;
    ao_stream *s;
    const struct ao_engine_backend *be;
    void *ws;
} side;

static void side_open(side *x, const char *backend, const struct ao_engine_backend *be)
{
    x->dev = ao_device_open(backend, 0);
    x->s = ao_stream_create(x->dev, "compute", 0);
    x->be = be;
    x->ws = be->workspace_bytes ? ao_dev_alloc(x->dev, be->workspace_bytes) : NULL;
}

static void side_close(side *x)
{
    if (x->ws) ao_dev_free(x->dev, x->ws);
    ao_stream_destroy(x->s);
    ao_device_close(x->dev);
}

static void *upload(side *x, const void *h, size_t bytes)
{
    void *d = ao_dev_alloc(x->dev, bytes);
    ao_copy_async(x->dev, d, h, bytes, AO_H2D, x->s);
    ao_stream_sync(x->s);
    return d;
}

static void download(side *x, void *h, const void *d, size_t bytes)
{
    ao_copy_async(x->dev, h, d, bytes, AO_D2H, x->s);
    ao_stream_sync(x->s);
}

static double max_rel(const float *a, const float *b, size_t n)
{
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    return scale > 0 ? worst / scale : worst;
}

static void fill(float *x, size_t n, unsigned seed, float lo, float hi)
{
    srand(seed);
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
}

/* Runs every kernel of one side on the same host inputs; outputs to the
 * caller's host arrays. */
typedef struct {
    float acc[N];
    double scal[3];
    float p[N], m[N], v[N];
    double result[2];
} outputs;

static void run_side(side *x, const float *red1, const float *red2, const float *loss, int nloss,
                     const float *p0, const float *m0, const float *v0, double global_sq,
                     float max_norm, float grad_scale, outputs *o)
{
    const size_t fb = N * sizeof(float);
    float *acc = ao_dev_alloc(x->dev, fb);
    float *r1 = upload(x, red1, fb), *r2 = upload(x, red2, fb);
    float *l = upload(x, loss, (size_t)nloss * sizeof(float));
    double *scal = ao_dev_alloc(x->dev, 3 * sizeof(double));
    double *gsq = upload(x, &global_sq, sizeof global_sq);
    double *result = ao_dev_alloc(x->dev, 2 * sizeof(double));
    float *p = upload(x, p0, fb), *m = upload(x, m0, fb), *v = upload(x, v0, fb);
    ao_adamw_hparams h = {0.9f, 0.98f, 1e-8f, 0.01f};

    ao_copy_async(x->dev, acc, r1, fb, AO_D2D, x->s); /* a step's first reduction */
    x->be->accumulate(x->s, acc, r2, N);
    x->be->sum_squares(x->s, scal, acc, N, x->ws);
    x->be->step_scalars(x->s, scal, scal, 1, 0.5, l, nloss, 1.0);
    x->be->adamw(x->s, p, NULL, AO_F32, m, v, acc, N, &h, 1e-3f, max_norm, grad_scale, 7, gsq,
                 result, x->ws);
    download(x, o->acc, acc, fb);
    download(x, o->scal, scal, sizeof o->scal);
    download(x, o->p, p, fb);
    download(x, o->m, m, fb);
    download(x, o->v, v, fb);
    download(x, o->result, result, sizeof o->result);
    void *bufs[] = {acc, r1, r2, l, scal, gsq, result, p, m, v};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ao_dev_free(x->dev, bufs[i]);
}

/* Equal, NaN included (an overflowed norm). */
static int same(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

static void compare_case(side *cpu, side *gpu, float max_norm, double global_sq, float grad_scale,
                         const char *what)
{
    static float red1[N], red2[N], p0[N], m0[N], v0[N];
    static outputs a, b;
    const float loss[3] = {0.25f, 0.125f, 0.0625f};
    fill(red1, N, 1, -1, 1);
    fill(red2, N, 2, -1, 1);
    fill(p0, N, 3, -0.5f, 0.5f);
    fill(m0, N, 4, -0.01f, 0.01f);
    fill(v0, N, 5, 0, 1e-4f);
    run_side(cpu, red1, red2, loss, 3, p0, m0, v0, global_sq, max_norm, grad_scale, &a);
    run_side(gpu, red1, red2, loss, 3, p0, m0, v0, global_sq, max_norm, grad_scale, &b);

    CHECK(memcmp(a.acc, b.acc, sizeof a.acc) == 0, "%s: accumulation differs", what);
    CHECK(fabs(b.scal[0] - a.scal[0]) <= 1e-12 * a.scal[0], "%s: squared norm %.17g vs %.17g", what,
          b.scal[0], a.scal[0]);
    CHECK(b.scal[1] == a.scal[1], "%s: loss sum %.17g vs %.17g", what, b.scal[1], a.scal[1]);
    CHECK(b.scal[2] == 1.0 && a.scal[2] == 1.0, "%s: stop vote %g vs %g", what, b.scal[2],
          a.scal[2]);
    CHECK(same(b.result[0], a.result[0]), "%s: norm %.17g vs %.17g", what, b.result[0],
          a.result[0]);
    CHECK(b.result[1] == a.result[1], "%s: clip coefficient %.9g vs %.9g", what, b.result[1],
          a.result[1]);
    double ep = max_rel(b.p, a.p, N), em = max_rel(b.m, a.m, N), ev = max_rel(b.v, a.v, N);
    CHECK(ep <= 1e-6 && em <= 1e-6 && ev <= 1e-6, "%s: AdamW p %.3e m %.3e v %.3e", what, ep, em,
          ev);
    printf("%s: coef %.6g, AdamW max relative p %.3e m %.3e v %.3e\n", what, a.result[1], ep, em,
           ev);
}

int main(void)
{
    GPU_SKIP_UNLESS(ao_device_count("cuda") > 0, "no CUDA device visible");
    side cpu, gpu;
    side_open(&cpu, "cpu", &ao_engine_cpu_backend);
    side_open(&gpu, "cuda", &ao_engine_cuda_backend);
    compare_case(&cpu, &gpu, 1.0f, 400.0, 1.0f, "clipping (norm 20, max 1)");
    compare_case(&cpu, &gpu, 100.0f, 400.0, 1.0f, "no clipping (norm 20, max 100)");
    compare_case(&cpu, &gpu, 0.0f, 400.0, 1.0f, "clipping off (max 0)");
    compare_case(&cpu, &gpu, 1.0f, 400.0, 1.0f / 1024, "loss scale 1024 undone");
    /* overflow under loss scaling: the update is skipped, p m v unchanged */
    compare_case(&cpu, &gpu, 1.0f, INFINITY, 1.0f, "overflow: inf norm");
    compare_case(&cpu, &gpu, 1.0f, NAN, 1.0f, "overflow: NaN norm");
    side_close(&gpu);
    side_close(&cpu);
    return check_result("test_engine_cuda");
}

#else

int main(void)
{
    GPU_SKIP_UNLESS(0, "built without CUDA");
    return 0;
}

#endif
