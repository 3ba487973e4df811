/* The model on the cpu device: each pass is one stream closure running the
 * ops_ref.h reference operators over the activations of model_backend.h's
 * layout, all of them in one device allocation made at create. */
#include <stdlib.h>

#include "core/error.h"
#include "model/model.h"
#include "model/model_backend.h"
#include "model/ops_ref.h"

/* The cpu backend keeps nothing beyond the shared activations. */
typedef ao_model_acts cpu_model;

enum pass { FWD_INPUT, FWD_LAYER, FWD_HEAD, BWD_HEAD, BWD_LAYER, BWD_INPUT };

/* A pass's closure arguments: pointers and scalars only (the batch by value,
 * so the caller's ao_batch may go away), copied inline by the stream. */
typedef struct {
    ao_model *m;
    const float *params;
    float *grad;
    float *loss;
    ao_batch b;
    int64_t step;
    double normalizer;
    int pass;
    int layer;
} pass_args;

_Static_assert(sizeof(pass_args) <= 160, "a pass's arguments fit a cpu stream slot inline");

static ao_dropout_cfg dropout_of(const ao_model *m, const pass_args *a)
{
    ao_dropout_cfg c = {m->shape.dropout, m->shape.seed, (uint64_t)a->step, (uint32_t)a->layer,
                        (uint64_t)a->b.first_sample};
    return c;
}

static void run_pass(void *arg)
{
    const pass_args *a = arg;
    const ao_model_shape *s = &a->m->shape;
    cpu_model *c = a->m->impl;
    const int L = s->layers;
    const size_t N = (size_t)s->batch * s->seq;
    ao_input_shape is = ao_model_input_shape(s);
    ao_encoder_shape es = ao_model_encoder_shape(s);
    ao_head_shape hs = ao_model_head_shape(s);
    ao_dropout_cfg drop = dropout_of(a->m, a);
    ao_input_weights iw, ig;
    ao_head_weights hw, hg;
    ao_encoder_weights ew, eg;

    switch ((enum pass)a->pass) {
    case FWD_INPUT:
        ao_model_bind_root(s, (float *)a->params, &iw, &hw);
        ao_input_forward(c->x[0], c->pooled, a->b.dense, a->b.ids, &iw, &is);
        break;
    case FWD_LAYER:
        ao_encoder_weights_bind(&ew, (float *)a->params, &es);
        ao_encoder_forward(c->x[a->layer], &c->layer_saved[a->layer - 1], c->x[a->layer - 1], &ew,
                           &es, &drop);
        break;
    case FWD_HEAD:
        ao_model_bind_root(s, (float *)a->params, &iw, &hw);
        ao_head_forward(c->z, &c->head_saved, c->x[L], &hw, &hs);
        a->loss[0] = (float)ao_bce_loss(c->z, a->b.target, a->b.weight, N, a->normalizer);
        break;
    case BWD_HEAD:
        ao_model_bind_root(s, (float *)a->params, &iw, &hw);
        ao_model_bind_root(s, a->grad, &ig, &hg);
        ao_bce_loss_backward(c->dz, c->z, a->b.target, a->b.weight, N, a->normalizer);
        ao_head_backward(c->dx[L % 2], &hg, c->dz, c->x[L], &hw, &c->head_saved, &hs, c->scratch);
        break;
    case BWD_LAYER:
        ao_encoder_weights_bind(&ew, (float *)a->params, &es);
        ao_encoder_weights_bind(&eg, a->grad, &es);
        ao_encoder_backward(c->dx[(a->layer - 1) % 2], &eg, c->dx[a->layer % 2], c->x[a->layer - 1],
                            &ew, &c->layer_saved[a->layer - 1], &es, &drop, c->scratch);
        break;
    case BWD_INPUT:
        ao_model_bind_root(s, (float *)a->params, &iw, &hw);
        ao_model_bind_root(s, a->grad, &ig, &hg);
        ao_input_backward(&ig, c->dx[0], a->b.dense, a->b.ids, c->pooled, &iw, &is, c->scratch);
        break;
    }
}

static void enqueue(ao_stream *s, const pass_args *a)
{
    ao_launch_host(s, run_pass, a, sizeof *a);
}

static int cpu_create(ao_model *m)
{
    const ao_model_shape *s = &m->shape;
    cpu_model *c = ao_malloc(sizeof *c);
    ao_model_acts_alloc(m, c, 0, ao_model_ref_scratch_floats(s));
    m->impl = c;
    return 0;
}

static void cpu_destroy(ao_model *m)
{
    cpu_model *c = m->impl;
    ao_model_acts_free(m, c);
    free(c);
}

static void cpu_forward_input(ao_model *m, ao_stream *s, const float *root, const ao_batch *b,
                              int64_t step)
{
    pass_args a = {.m = m, .params = root, .b = *b, .step = step, .pass = FWD_INPUT};
    enqueue(s, &a);
}

static void cpu_forward_layer(ao_model *m, ao_stream *s, int layer, const float *params,
                              const ao_batch *b, int64_t step)
{
    pass_args a = {
        .m = m, .params = params, .b = *b, .step = step, .pass = FWD_LAYER, .layer = layer};
    enqueue(s, &a);
}

static void cpu_forward_head(ao_model *m, ao_stream *s, const float *root, const ao_batch *b,
                             double normalizer, float *loss_dev)
{
    pass_args a = {.m = m,
                   .params = root,
                   .loss = loss_dev,
                   .b = *b,
                   .normalizer = normalizer,
                   .pass = FWD_HEAD};
    enqueue(s, &a);
}

static void cpu_backward_head(ao_model *m, ao_stream *s, const float *root, float *root_grad,
                              const ao_batch *b, double normalizer)
{
    pass_args a = {.m = m,
                   .params = root,
                   .grad = root_grad,
                   .b = *b,
                   .normalizer = normalizer,
                   .pass = BWD_HEAD};
    enqueue(s, &a);
}

static void cpu_backward_layer(ao_model *m, ao_stream *s, int layer, const float *params,
                               float *grad, const ao_batch *b, int64_t step)
{
    pass_args a = {.m = m,
                   .params = params,
                   .grad = grad,
                   .b = *b,
                   .step = step,
                   .pass = BWD_LAYER,
                   .layer = layer};
    enqueue(s, &a);
}

static void cpu_backward_input(ao_model *m, ao_stream *s, const float *root, float *root_grad,
                               const ao_batch *b)
{
    pass_args a = {.m = m, .params = root, .grad = root_grad, .b = *b, .pass = BWD_INPUT};
    enqueue(s, &a);
}

const struct ao_model_backend ao_model_cpu_backend = {
    .device_backend = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .forward_input = cpu_forward_input,
    .forward_layer = cpu_forward_layer,
    .forward_head = cpu_forward_head,
    .backward_head = cpu_backward_head,
    .backward_layer = cpu_backward_layer,
    .backward_input = cpu_backward_input,
};
