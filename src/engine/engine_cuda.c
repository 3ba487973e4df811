/* The engine's small kernels on the cuda device (engine_backend.h), through
 * the launchers of kernels_cuda.h on the given stream. Like the cpu closures
 * they read the device scalars (squared norms, losses) on the device, so the
 * host never waits inside a step.
 *
 * Workspace (one per stream the engine enqueues them on, used in order
 * there): the sum of squares' partials, then the clip coefficient. */
#include "engine/engine_backend.h"
#include "engine/memory.h"
#include "model/kernels_cuda.h"
#include "model/model_cuda.h"
#include "runtime/device_cuda.h"

#define PARTIALS_BYTES (AO_CUDA_REDUCE_PARTIALS * sizeof(double))

static double *partials_of(void *workspace)
{
    return workspace;
}

static float *coef_of(void *workspace)
{
    return (float *)((char *)workspace + PARTIALS_BYTES);
}

static void cuda_set_compute(ao_model *m, ao_compute_mode mode)
{
    ao_model_cuda_set_compute(m, mode);
}

_Static_assert(AO_ENGINE_CAST_PARTS <= AO_CUDA_CAST_PARTS, "a cast's parts fit one launch");

static void cuda_cast(ao_stream *s, void *dst, ao_dtype dst_type, const void *src,
                      ao_dtype src_type, const size_t (*parts)[2], int nparts)
{
    AO_CUDA_CHECK(
        ao_cuda_cast_parts(dst, dst_type, src, src_type, parts, nparts, ao_cuda_stream(s)));
}

static void cuda_accumulate(ao_stream *s, float *acc, const float *red, size_t n)
{
    AO_CUDA_CHECK(ao_cuda_add(acc, acc, red, n, ao_cuda_stream(s)));
}

static void cuda_sum_squares(ao_stream *s, double *out, const float *g, size_t n, void *workspace)
{
    AO_CUDA_CHECK(ao_cuda_sum_squares(out, g, n, partials_of(workspace), ao_cuda_stream(s)));
}

static void cuda_step_scalars(ao_stream *s, double *out, const double *sq, int nsq, double scale,
                              const float *loss, int nloss, double stop)
{
    AO_CUDA_CHECK(ao_cuda_step_scalars(out, sq, nsq, scale, loss, nloss, stop, ao_cuda_stream(s)));
}

static void cuda_adamw(ao_stream *s, float *p, void *p16, ao_dtype p16_type, float *m, float *v,
                       const float *g, size_t n, const ao_adamw_hparams *h, float lr,
                       float max_norm, float grad_scale, int64_t step, const double *global_sq,
                       double *result, void *workspace)
{
    cudaStream_t cs = ao_cuda_stream(s);
    float *coef = coef_of(workspace);
    ao_cuda_adamw hp = {h->beta1, h->beta2, h->eps, h->weight_decay};
    /* coef: the clip coefficient, 0 when the norm is not finite (the update
     * is then skipped); grad_scale undoes the loss scale. */
    AO_CUDA_CHECK(ao_cuda_clip_coef(coef, global_sq, max_norm, 1.0f, cs));
    AO_CUDA_CHECK(ao_cuda_norm_result(result, global_sq, coef, cs));
    AO_CUDA_CHECK(
        ao_cuda_adamw_step(p, p16, p16_type, g, m, v, n, &hp, lr, step, grad_scale, coef, cs));
}

const struct ao_engine_backend ao_engine_cuda_backend = {
    .device_backend = AO_GPU_BACKEND,
    .workspace_bytes = AO_ENGINE_GPU_WORKSPACE_BYTES, /* memory.h: what the plan counts */
    .set_compute = cuda_set_compute,
    .set_dependent_launch = ao_cuda_set_dependent_launch,
    .cast = cuda_cast,
    .share_params16 = ao_model_cuda_share_params16,
    .fp32_parts = ao_model_cuda_fp32_parts,
    .accumulate = cuda_accumulate,
    .sum_squares = cuda_sum_squares,
    .step_scalars = cuda_step_scalars,
    .adamw = cuda_adamw,
};
