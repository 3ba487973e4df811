/* What a device backend implements to run the sharding engine's small
 * kernels (engine.c): gradient accumulation, the per-step scalars (squared
 * norm, loss sum, stop vote) and the clipped AdamW update of the shards.
 *
 * Every function only ENQUEUES its work on the stream it is given; none waits
 * for the device. Scalars that depend on earlier device work (the global
 * squared norm, the losses) are read by the device work itself, never by the
 * host, so a step needs no host synchronization. The engine finds the table
 * of its device's backend as runtime/backend_table.h says; a new backend adds
 * its table (ao_engine_<name>_backend) here. */
#ifndef AORTA_ENGINE_ENGINE_BACKEND_H
#define AORTA_ENGINE_ENGINE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "model/ops_ref.h"
#include "runtime/device.h"

/* The most (offset, count) parts one cast converts. */
#define AO_ENGINE_CAST_PARTS 8

struct ao_engine_backend {
    const char *device_backend; /* ao_device_backend() of the devices it serves */
    /* Bytes of device workspace the engine allocates twice (one for the
     * compute stream, one for the reduction streams) and passes to
     * sum_squares and adamw. */
    size_t workspace_bytes;
    /* How the model's GEMMs compute (training.tf32, mixed_precision): TF32,
     * bf16 or fp16 products of fp32 operands, fp32 accumulation. NULL when
     * the backend computes in plain fp32 only (the engine then warns). */
    void (*set_compute)(ao_model *m, ao_compute_mode mode);
    /* Whether the backend may schedule a kernel while the one before it runs
     * (kernels_cuda.h, ao_cuda_set_dependent_launch); NULL where it cannot. */
    void (*set_dependent_launch)(int on);
    /* dst[i] = src[i] converted between fp32, bf16 and fp16 (round to
     * nearest even) for i in each of the nparts (offset, count) parts, in
     * elements (at most AO_ENGINE_CAST_PARTS): parameters gathered in fsdp.param_dtype. NULL
     * when the backend communicates in fp32 only (the engine then warns). */
    void (*cast)(ao_stream *s, void *dst, ao_dtype dst_type, const void *src, ao_dtype src_type,
                 const size_t (*parts)[2], int nparts);
    /* Tells the model that `half` holds the n parameters at `fp32` in
     * `type` whenever a pass reads them (model_cuda.h's
     * ao_model_cuda_share_params16), so its 16-bit GEMMs use the gathered
     * copy instead of casting again. NULL: the backend has no 16-bit GEMMs. */
    void (*share_params16)(ao_model *m, const float *fp32, const void *half, ao_dtype type,
                           size_t n);
    /* The parts of unit u's full parameters at `params` the model reads in
     * fp32 (model_cuda.h's ao_model_cuda_fp32_parts): the engine casts only
     * those back from a 16-bit gather. NULL: all of them. */
    int (*fp32_parts)(const ao_model *m, int unit, const float *params, size_t (*parts)[2],
                      int max);
    /* acc += red, n floats (a step's later reductions: the first writes acc). */
    void (*accumulate)(ao_stream *s, float *acc, const float *red, size_t n);
    /* out[0] = the sum of g[i]^2 in double: one reduced gradient's share of
     * the squared norm. workspace: one of workspace_bytes no other stream
     * uses meanwhile (the engine keeps one for the reduction streams). */
    void (*sum_squares)(ao_stream *s, double *out, const float *g, size_t n, void *workspace);
    /* out[0] = scale * the sum of sq[0..nsq) (in order), out[1] = sum of
     * loss[0..nloss) (in order), out[2] = stop, all in double; sq may be
     * out. */
    void (*step_scalars)(ao_stream *s, double *out, const double *sq, int nsq, double scale,
                         const float *loss, int nloss, double stop);
    /* With coef = ao_clip_coef(global_sq[0], max_norm): result[0] =
     * sqrt(global_sq[0]), result[1] = coef, and ao_adamw_step(p, g, m, v, n,
     * h, lr, step, grad_scale * coef) (grad_scale: 1 / the loss scale).
     * A non-finite global_sq[0] (overflow under fp16 loss scaling) skips the
     * update: result[1] = 0 and p, m, v stay as they are. p16: NULL, or
     * where p's updated values also go in p16_type (the all-gather's wire
     * copy, cast as `cast` would; untouched when the update is skipped);
     * only backends with a cast get one. */
    void (*adamw)(ao_stream *s, float *p, void *p16, ao_dtype p16_type, float *m, float *v,
                  const float *g, size_t n, const ao_adamw_hparams *h, float lr, float max_norm,
                  float grad_scale, int64_t step, const double *global_sq, double *result,
                  void *workspace);
};

extern const struct ao_engine_backend ao_engine_cpu_backend; /* engine_cpu.c */
#ifdef AORTA_HAVE_CUDA
extern const struct ao_engine_backend ao_engine_cuda_backend; /* engine_cuda.c */
#endif

#endif
