/* What a device backend implements to run the model (model.h), and the model
 * state every backend shares.
 *
 * model.c checks the shape and the arguments and dispatches each pass through
 * the table of the device's backend (found as runtime/backend_table.h says);
 * a backend only enqueues its work. A new backend adds its table
 * (ao_model_<name>_backend) here, and model.h's callers do not change.
 *
 * Activation layout, the same for every backend (N = B*T tokens):
 *   x[l], l = 0..L  [N, d]  input of encoder layer l+1 (x[0] the input stage's
 *                           output, x[L] the head's input)
 *   dx[l % 2]       [N, d]  gradient w.r.t. x[l] during backward (ping-pong)
 * plus what each op saves for its backward (ops_ref.h's *_saved) and one
 * scratch area sized for the largest backward. Dropout of encoder layer l
 * (unit l, 1..L) is keyed by ao_dropout_cfg.layer = l. */
#ifndef AORTA_MODEL_MODEL_BACKEND_H
#define AORTA_MODEL_MODEL_BACKEND_H

#include "model/model.h"
#include "model/ops_ref.h"

struct ao_model_backend {
    const char *device_backend; /* ao_device_backend() of the devices it serves */
    /* Allocates the activations of m->shape on m->dev into m->impl; 0 or
     * AO_EXIT_FAIL after printing why. */
    int (*create)(ao_model *m);
    void (*destroy)(ao_model *m);
    void (*forward_input)(ao_model *m, ao_stream *s, const float *root, const ao_batch *b,
                          int64_t step);
    void (*forward_layer)(ao_model *m, ao_stream *s, int layer, const float *params,
                          const ao_batch *b, int64_t step);
    void (*forward_head)(ao_model *m, ao_stream *s, const float *root, const ao_batch *b,
                         double normalizer, float *loss_dev);
    void (*backward_head)(ao_model *m, ao_stream *s, const float *root, float *root_grad,
                          const ao_batch *b, double normalizer);
    void (*backward_layer)(ao_model *m, ao_stream *s, int layer, const float *params, float *grad,
                           const ao_batch *b, int64_t step);
    void (*backward_input)(ao_model *m, ao_stream *s, const float *root, float *root_grad,
                           const ao_batch *b);
    int can_overwrite_grads; /* honours ao_model.overwrite_grads */
};

struct ao_model {
    ao_device *dev;
    ao_model_shape shape;
    const struct ao_model_backend *backend;
    void *impl;          /* the backend's state */
    int overwrite_grads; /* ao_model_overwrite_grads */
};

/* The activations of one micro-batch, laid out the same way by every backend
 * and carved from one device allocation: layer inputs, the gradient
 * ping-pong, the input stage's pooled embeddings, each layer's and the head's
 * saved buffers, logits and their gradient, then `extra` floats of the
 * backend's own (NULL when 0) and `scratch` floats for the largest backward. */
typedef struct ao_model_acts {
    float *mem;                    /* the one device allocation everything below points into */
    size_t floats;                 /* its size: every buffer below lies in mem[0, floats) */
    float **x;                     /* [L + 1] layer inputs, x[L] the head's input */
    float *dx[2];                  /* gradient w.r.t. x[l] is dx[l % 2] */
    float *pooled;                 /* [N, E] the input stage's saved mean embeddings */
    ao_encoder_saved *layer_saved; /* [L] */
    ao_head_saved head_saved;
    float *z, *dz;  /* [N] logits and their gradient */
    float *extra;   /* the backend's own buffers */
    float *scratch; /* the largest backward's scratch */
} ao_model_acts;

static inline size_t ao_model_max3(size_t a, size_t b, size_t c)
{
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* Allocates and lays out m's activations; ao_model_acts_free gives them back. */
void ao_model_acts_alloc(ao_model *m, ao_model_acts *a, size_t extra_floats, size_t scratch_floats);
/* The floats ao_model_acts_alloc allocates; the reference backward's scratch
 * (the cpu backend's). */
size_t ao_model_acts_floats(const ao_model_shape *s, size_t extra_floats, size_t scratch_floats);
size_t ao_model_ref_scratch_floats(const ao_model_shape *s);
void ao_model_acts_free(ao_model *m, ao_model_acts *a);

extern const struct ao_model_backend ao_model_cpu_backend;
#ifdef AORTA_HAVE_CUDA
extern const struct ao_model_backend ao_model_cuda_backend; /* model_cuda.c */
#endif

/* The ops_ref shapes of the model's parts for one micro-batch. */
ao_input_shape ao_model_input_shape(const ao_model_shape *shape);
ao_encoder_shape ao_model_encoder_shape(const ao_model_shape *shape);
ao_head_shape ao_model_head_shape(const ao_model_shape *shape);

/* Offsets of the input and head parts inside the root unit's flat buffer:
 * the input stage's parameters come first (ao_input_weights_bind), the head's
 * follow (ao_head_weights_bind). */
size_t ao_model_root_head_offset(const ao_model_shape *shape);

/* Views of the root unit's flat buffer: its input stage and its head. (The
 * ops_ref weight views are non-const; the forward passes only read them.) */
void ao_model_bind_root(const ao_model_shape *shape, float *flat, ao_input_weights *iw,
                        ao_head_weights *hw);

#endif
