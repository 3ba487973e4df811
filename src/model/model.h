/* The synthetic ranking model as FSDP units over flat parameter buffers
 * (DESIGN §6), computed on any device backend.
 *
 * Units: unit 0 is the root (input projections + embedding table + head),
 * units 1..L are the encoder layers. Each unit's parameters are one flat
 * buffer in the layout of ops_ref.h's *_weights_bind functions (PyTorch
 * state_dict order; the root is input then head). The sharding engine owns
 * the buffers (shards, gathered copies, gradients); the model only computes:
 * every function below ENQUEUES work on stream `s` and returns at once.
 *
 * Activations for one micro-batch live in the model (device memory), so a
 * micro-batch's forward must be followed by its backward before the next
 * forward. Parameter gradients are ACCUMULATED into the caller's buffers
 * (zero them once per step); parameters and gradients here are fp32 device
 * memory (the engine casts to and from param_dtype/reduce_dtype for
 * communication).
 *
 * Backends: the cpu device runs ops_ref.h in stream closures (one closure
 * per unit pass); other backends plug in through model_backend.h. */
#ifndef AORTA_MODEL_MODEL_H
#define AORTA_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "data/data.h"
#include "runtime/device.h"

typedef struct ao_model_shape {
    int batch;      /* micro-batch per rank, B */
    int seq;        /* T */
    int num_dense;  /* F */
    int dense_dim;  /* D */
    int sparse;     /* S ids per token */
    int vocab;      /* V */
    int emb_dim;    /* E */
    int dim;        /* d (model_dim) */
    int heads;      /* h */
    int layers;     /* L */
    int ff;         /* encoder FFN width */
    int mlp_hidden; /* head width H */
    float dropout;  /* p, every dropout site */
    uint64_t seed;  /* dropout masks and parameter init */
    /* model.attention fused: the fused attention kernels where supported
     * (model_cuda.c; last, so positional initializers stay valid) */
    int fused_attention;
} ao_model_shape;

typedef struct ao_model ao_model;

int ao_model_units(const ao_model_shape *shape); /* L + 1 */
/* Parameter count of a unit (unpadded). */
size_t ao_model_unit_params(const ao_model_shape *shape, int unit);
/* The device bytes a backend's model allocates: model/sizes.h. */
struct ao_config;
/* The model's shape as the configuration gives it. */
void ao_model_shape_of(const struct ao_config *cfg, ao_model_shape *s);
/* Deterministic initial values of a unit's parameters (host fp32), a pure
 * function of (seed, unit): PyTorch's default inits (uniform ±1/sqrt(fan_in)
 * for linears, N(0,1) embeddings, LayerNorm weight 1 bias 0). */
void ao_model_init_unit(const ao_model_shape *shape, int unit, float *host_params);

/* Allocates activations and scratch on `dev`. Returns NULL after printing
 * why (e.g. a backend with no model implementation). */
ao_model *ao_model_create(ao_device *dev, const ao_model_shape *shape);
/* Call once the streams that ran its passes are synced (a pass still queued
 * would use freed activations). NULL is a no-op. */
void ao_model_destroy(ao_model *m);

/* Forward of one micro-batch, unit by unit (root input first, layers 1..L,
 * then the head and the loss), and backward in reverse (head, layers L..1,
 * root input). `step` keys the dropout masks. The loss is the weighted BCE
 * summed over the micro-batch divided by `normalizer` (the global count of
 * tokens in the step), written to loss_dev[0] (fp32, device memory). */
void ao_model_forward_input(ao_model *m, ao_stream *s, const float *root, const ao_batch *b,
                            int64_t step);
void ao_model_forward_layer(ao_model *m, ao_stream *s, int layer, const float *params,
                            const ao_batch *b, int64_t step);
void ao_model_forward_head(ao_model *m, ao_stream *s, const float *root, const ao_batch *b,
                           double normalizer, float *loss_dev);
void ao_model_backward_head(ao_model *m, ao_stream *s, const float *root, float *root_grad,
                            const ao_batch *b, double normalizer);
void ao_model_backward_layer(ao_model *m, ao_stream *s, int layer, const float *params, float *grad,
                             const ao_batch *b, int64_t step);
void ao_model_backward_input(ao_model *m, ao_stream *s, const float *root, float *root_grad,
                             const ao_batch *b);
/* From now on each backward writes its gradients instead of adding them to
 * what the gradient buffers hold, so that they need no zeroing between
 * steps (the engine's one-rank, one-micro-batch mode). Returns 0, changing
 * nothing, where the backend does not support it (the caller then zeroes). */
int ao_model_overwrite_grads(ao_model *m);
/* Whether ao_model_predraw draws anything (the backend can, and dropout is on). */
int ao_model_predraws(const ao_model *m);
/* Draws on s the dropout masks the forward of (step, b) would draw, ahead
 * of it (the engine: beside the update), so that the forward, ordered after
 * s, reads them instead. Only where ao_model_predraws, and after the
 * backward that read the previous masks. */
void ao_model_predraw(ao_model *m, ao_stream *s, int64_t step, const ao_batch *b);

/* Multiply-adds of one micro-batch's forward (backward is twice that), for
 * achieved TFLOP/s: the GEMMs and attention matmuls, as 2*m*n*k. */
double ao_model_forward_flops(const ao_model_shape *shape);

#endif
