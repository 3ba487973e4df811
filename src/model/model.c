/* The model's shape-level facts (units, parameter counts, init, FLOPs), its
 * argument checks, and the dispatch of each pass to the device backend's
 * implementation (model_backend.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "data/rng.h"
#include "model/model.h"
#include "model/model_backend.h"
#include "model/ops_ref.h"
#include "runtime/backend_table.h"

_Static_assert(offsetof(struct ao_model_backend, device_backend) == 0, "backend_table.h");

ao_input_shape ao_model_input_shape(const ao_model_shape *s)
{
    ao_input_shape is = {
        s->batch * s->seq, s->num_dense * s->dense_dim, s->sparse, s->vocab, s->emb_dim, s->dim};
    return is;
}

ao_encoder_shape ao_model_encoder_shape(const ao_model_shape *s)
{
    ao_encoder_shape es = {s->batch, s->seq, s->dim, s->heads, s->ff};
    return es;
}

ao_head_shape ao_model_head_shape(const ao_model_shape *s)
{
    ao_head_shape hs = {s->batch * s->seq, s->dim, s->mlp_hidden};
    return hs;
}

int ao_model_units(const ao_model_shape *shape)
{
    return shape->layers + 1;
}

void ao_model_bind_root(const ao_model_shape *shape, float *flat, ao_input_weights *iw,
                        ao_head_weights *hw)
{
    const ao_input_shape is = ao_model_input_shape(shape);
    const ao_head_shape hs = ao_model_head_shape(shape);
    ao_input_weights_bind(iw, flat, &is);
    ao_head_weights_bind(hw, flat + ao_model_root_head_offset(shape), &hs);
}

size_t ao_model_root_head_offset(const ao_model_shape *shape)
{
    ao_input_shape is = ao_model_input_shape(shape);
    return ao_input_param_count(&is);
}

size_t ao_model_unit_params(const ao_model_shape *shape, int unit)
{
    if (unit == 0) {
        ao_head_shape hs = ao_model_head_shape(shape);
        return ao_model_root_head_offset(shape) + ao_head_param_count(&hs);
    }
    ao_encoder_shape es = ao_model_encoder_shape(shape);
    return ao_encoder_param_count(&es);
}

/* ---- initial values ------------------------------------------------------------ */

/* Tensor `index` of a unit draws from the stream (seed, PARAM_INIT, unit,
 * index), element by element, so a value depends on nothing but its key. */
typedef struct {
    ao_rng_stream unit;
    uint64_t index; /* the next tensor's index in the unit's flat layout */
} init_cursor;

/* nn.Linear's default (kaiming_uniform with a = sqrt(5) for the weight, the
 * same bound for the bias): uniform in +-1/sqrt(fan_in). */
static void init_uniform_fan_in(init_cursor *c, float *p, size_t n, int fan_in)
{
    float bound = (float)(1.0 / sqrt((double)fan_in));
    ao_rng_fill_uniform(p, n, ao_rng_child(c->unit, c->index++), 0, -bound, bound);
}

static void init_normal(init_cursor *c, float *p, size_t n)
{
    ao_rng_fill_normal(p, n, ao_rng_child(c->unit, c->index++), 0, 0.0f, 1.0f);
}

/* xavier_uniform_ of a [fan_out, fan_in] weight: +-sqrt(6 / (fan_in + fan_out)). */
static void init_xavier(init_cursor *c, float *p, size_t n, int fan_in, int fan_out)
{
    float bound = (float)sqrt(6.0 / ((double)fan_in + fan_out));
    ao_rng_fill_uniform(p, n, ao_rng_child(c->unit, c->index++), 0, -bound, bound);
}

static void init_const(init_cursor *c, float *p, size_t n, float v)
{
    for (size_t i = 0; i < n; i++) p[i] = v;
    c->index++;
}

static void init_root(const ao_model_shape *s, init_cursor *c, float *flat)
{
    const size_t d = (size_t)s->dim;
    const ao_input_shape is = ao_model_input_shape(s);
    const ao_head_shape hs = ao_model_head_shape(s);
    ao_input_weights iw;
    ao_head_weights hw;
    ao_model_bind_root(s, flat, &iw, &hw);
    init_uniform_fan_in(c, iw.dense_w, d * is.dense_in, is.dense_in);
    init_uniform_fan_in(c, iw.dense_b, d, is.dense_in);
    init_normal(c, iw.table, (size_t)s->vocab * s->emb_dim); /* nn.Embedding */
    init_uniform_fan_in(c, iw.sparse_w, d * s->emb_dim, s->emb_dim);
    init_uniform_fan_in(c, iw.sparse_b, d, s->emb_dim);
    init_const(c, hw.ln_w, d, 1.0f);
    init_const(c, hw.ln_b, d, 0.0f);
    init_uniform_fan_in(c, hw.fc1_w, (size_t)hs.hidden * d, s->dim);
    init_uniform_fan_in(c, hw.fc1_b, (size_t)hs.hidden, s->dim);
    init_uniform_fan_in(c, hw.fc2_w, (size_t)hs.hidden, hs.hidden);
    init_uniform_fan_in(c, hw.fc2_b, 1, hs.hidden);
}

/* As nn.TransformerEncoderLayer: MultiheadAttention._reset_parameters makes
 * in_proj xavier-uniform with zero bias and zeroes out_proj's bias (its
 * weight keeps nn.Linear's default); the FFN linears are default nn.Linear. */
static void init_layer(const ao_model_shape *s, init_cursor *c, float *flat)
{
    const size_t d = (size_t)s->dim, ff = (size_t)s->ff;
    ao_encoder_shape es = ao_model_encoder_shape(s);
    ao_encoder_weights w;
    ao_encoder_weights_bind(&w, flat, &es);
    init_xavier(c, w.attn.in_w, 3 * d * d, s->dim, 3 * s->dim);
    init_const(c, w.attn.in_b, 3 * d, 0.0f);
    init_uniform_fan_in(c, w.attn.out_w, d * d, s->dim);
    init_const(c, w.attn.out_b, d, 0.0f);
    init_uniform_fan_in(c, w.lin1_w, ff * d, s->dim);
    init_uniform_fan_in(c, w.lin1_b, ff, s->dim);
    init_uniform_fan_in(c, w.lin2_w, d * ff, s->ff);
    init_uniform_fan_in(c, w.lin2_b, d, s->ff);
    init_const(c, w.ln1_w, d, 1.0f);
    init_const(c, w.ln1_b, d, 0.0f);
    init_const(c, w.ln2_w, d, 1.0f);
    init_const(c, w.ln2_b, d, 0.0f);
}

void ao_model_init_unit(const ao_model_shape *shape, int unit, float *host_params)
{
    init_cursor c = {ao_rng_child(ao_rng_root(shape->seed, AO_RNG_PARAM_INIT), (uint64_t)unit), 0};
    if (unit == 0)
        init_root(shape, &c, host_params);
    else
        init_layer(shape, &c, host_params);
}

/* ---- FLOPs ----------------------------------------------------------------------- */

/* 2*m*n*k for every GEMM of one micro-batch's forward, N = B*T tokens:
 *   input   2*N*(F*D)*d + 2*N*E*d                    (dense and sparse projections)
 *   layer   2*N*d*3d + 2*B*h*T*T*(d/h) * 2           (in_proj; q k^T and att v)
 *           + 2*N*d*d + 2*N*d*ff * 2                 (out_proj; linear1, linear2)
 *   head    2*N*d*H + 2*N*H                          (fc1, fc2)
 * The embedding lookup, softmax, layernorms and elementwise ops are not
 * counted (they are not matmuls). */
double ao_model_forward_flops(const ao_model_shape *s)
{
    const double B = s->batch, T = s->seq, N = B * T, d = s->dim, ff = s->ff;
    const double input = 2 * N * ((double)s->num_dense * s->dense_dim) * d + 2 * N * s->emb_dim * d;
    const double layer =
        2 * N * d * 3 * d + 2 * (2 * B * T * T * d) + 2 * N * d * d + 2 * (2 * N * d * ff);
    const double head = 2 * N * d * s->mlp_hidden + 2 * N * s->mlp_hidden;
    return input + s->layers * layer + head;
}

/* ---- create and dispatch ------------------------------------------------------- */

static int check_positive(int v, const char *key)
{
    if (v >= 1) return 0;
    ao_error("model", "%s must be at least 1, got %d", key, v);
    return AO_EXIT_USAGE;
}

static int check_shape(const ao_model_shape *s)
{
    if (check_positive(s->batch, "training.batch_size") ||
        check_positive(s->seq, "dataset.sequence_length") ||
        check_positive(s->num_dense, "model.num_dense_features") ||
        check_positive(s->dense_dim, "model.dense_dim") ||
        check_positive(s->sparse, "dataset.sparse_features") ||
        check_positive(s->vocab, "model.vocab_size") ||
        check_positive(s->emb_dim, "model.embedding_dim") ||
        check_positive(s->dim, "model.model_dim") || check_positive(s->heads, "model.num_heads") ||
        check_positive(s->ff, "model.ff_dim") ||
        check_positive(s->mlp_hidden, "model.mlp_hidden_dim"))
        return AO_EXIT_USAGE;
    if (s->layers < 0) {
        ao_error("model", "model.num_layers must be at least 0, got %d", s->layers);
        return AO_EXIT_USAGE;
    }
    if (s->dim % s->heads != 0) {
        ao_error("model", "model.model_dim (%d) must be a multiple of model.num_heads (%d)", s->dim,
                 s->heads);
        return AO_EXIT_USAGE;
    }
    if (!(s->dropout >= 0.0f && s->dropout < 1.0f)) {
        ao_error("model", "model.dropout must be in [0, 1), got %g", (double)s->dropout);
        return AO_EXIT_USAGE;
    }
    return 0;
}

ao_model *ao_model_create(ao_device *dev, const ao_model_shape *shape)
{
    if (check_shape(shape)) return NULL;
    const char *name = ao_device_backend(dev);
    const struct ao_model_backend *backend = AO_BACKEND_FIND(ao_model, dev);
    if (!backend) {
        ao_error("model", "the model has no %s implementation yet", name);
        ao_hint("the cpu backend runs the model");
        return NULL;
    }
    ao_model *m = ao_calloc(1, sizeof *m);
    m->dev = dev;
    m->shape = *shape;
    m->backend = backend;
    if (backend->create(m)) {
        free(m);
        return NULL;
    }
    return m;
}

void ao_model_destroy(ao_model *m)
{
    if (!m) return;
    m->backend->destroy(m);
    free(m);
}

/* A layer outside 1..L is a bug of the caller, not something a user can cause. */
static void check_layer(const ao_model *m, int layer)
{
    if (layer < 1 || layer > m->shape.layers)
        ao_fatal(AO_EXIT_FAIL, "model", "encoder layer %d does not exist (the model has 1..%d)",
                 layer, m->shape.layers);
}

void ao_model_forward_input(ao_model *m, ao_stream *s, const float *root, const ao_batch *b,
                            int64_t step)
{
    m->backend->forward_input(m, s, root, b, step);
}

void ao_model_forward_layer(ao_model *m, ao_stream *s, int layer, const float *params,
                            const ao_batch *b, int64_t step)
{
    check_layer(m, layer);
    m->backend->forward_layer(m, s, layer, params, b, step);
}

/* The loss's divisor counts tokens: anything else is a bug of the caller. */
static void check_normalizer(double normalizer)
{
    if (!(normalizer > 0.0))
        ao_fatal(AO_EXIT_FAIL, "model",
                 "the loss normalizer must be a positive token count, got %g", normalizer);
}

void ao_model_forward_head(ao_model *m, ao_stream *s, const float *root, const ao_batch *b,
                           double normalizer, float *loss_dev)
{
    check_normalizer(normalizer);
    m->backend->forward_head(m, s, root, b, normalizer, loss_dev);
}

void ao_model_backward_head(ao_model *m, ao_stream *s, const float *root, float *root_grad,
                            const ao_batch *b, double normalizer)
{
    check_normalizer(normalizer);
    m->backend->backward_head(m, s, root, root_grad, b, normalizer);
}

void ao_model_backward_layer(ao_model *m, ao_stream *s, int layer, const float *params, float *grad,
                             const ao_batch *b, int64_t step)
{
    check_layer(m, layer);
    m->backend->backward_layer(m, s, layer, params, grad, b, step);
}

void ao_model_backward_input(ao_model *m, ao_stream *s, const float *root, float *root_grad,
                             const ao_batch *b)
{
    m->backend->backward_input(m, s, root, root_grad, b);
}

int ao_model_predraws(const ao_model *m)
{
    return m->backend->predraw && m->shape.dropout > 0.0f && m->shape.layers > 0;
}

void ao_model_predraw(ao_model *m, ao_stream *s, int64_t step, const ao_batch *b)
{
    m->backend->predraw(m, s, step, b);
}

int ao_model_overwrite_grads(ao_model *m)
{
    m->overwrite_grads = m->backend->can_overwrite_grads;
    return m->overwrite_grads;
}

/* ---- activations shared by every backend ---------------------------------- */

static float *take(float **cursor, size_t n)
{
    float *p = *cursor;
    *cursor += n;
    return p;
}

void ao_model_shape_of(const struct ao_config *cfg, ao_model_shape *s)
{
    *s = (ao_model_shape){.batch = cfg->training.batch_size,
                          .seq = cfg->dataset.sequence_length,
                          .num_dense = cfg->model.num_dense_features,
                          .dense_dim = cfg->model.dense_dim,
                          .sparse = cfg->dataset.sparse_features,
                          .vocab = cfg->model.vocab_size,
                          .emb_dim = cfg->model.embedding_dim,
                          .dim = cfg->model.model_dim,
                          .heads = cfg->model.num_heads,
                          .layers = cfg->model.num_layers,
                          .ff = ao_config_ff_dim(cfg),
                          .mlp_hidden = cfg->model.mlp_hidden_dim,
                          .dropout = (float)cfg->model.dropout,
                          .fused_attention = cfg->model.attention == AO_ATTENTION_FUSED,
                          .seed = (uint64_t)cfg->dataset.seed};
}

size_t ao_model_acts_floats(const ao_model_shape *s, size_t extra_floats, size_t scratch_floats)
{
    const int L = s->layers;
    const size_t N = (size_t)s->batch * s->seq, d = (size_t)s->dim;
    ao_encoder_shape es = ao_model_encoder_shape(s);
    ao_head_shape hs = ao_model_head_shape(s);
    return (size_t)(L + 1) * N * d + 2 * N * d + N * s->emb_dim +
           (size_t)L * ao_encoder_saved_floats(&es) + ao_head_saved_floats(&hs) + 2 * N +
           extra_floats + scratch_floats;
}

size_t ao_model_ref_scratch_floats(const ao_model_shape *s)
{
    const size_t N = (size_t)s->batch * s->seq;
    ao_encoder_shape es = ao_model_encoder_shape(s);
    ao_head_shape hs = ao_model_head_shape(s);
    return ao_model_max3(ao_encoder_backward_scratch_floats(&es),
                         ao_head_backward_scratch_floats(&hs), N * s->emb_dim);
}

void ao_model_acts_alloc(ao_model *m, ao_model_acts *a, size_t extra_floats, size_t scratch_floats)
{
    const ao_model_shape *s = &m->shape;
    const int L = s->layers;
    const size_t N = (size_t)s->batch * s->seq, d = (size_t)s->dim;
    ao_encoder_shape es = ao_model_encoder_shape(s);
    ao_head_shape hs = ao_model_head_shape(s);
    const size_t enc_saved = ao_encoder_saved_floats(&es);
    const size_t total = ao_model_acts_floats(s, extra_floats, scratch_floats);

    memset(a, 0, sizeof *a);
    a->mem = ao_dev_alloc(m->dev, total * sizeof(float));
    a->floats = total;
    a->x = ao_malloc((size_t)(L + 1) * sizeof *a->x);
    a->layer_saved = ao_malloc((size_t)(L > 0 ? L : 1) * sizeof *a->layer_saved);
    float *cur = a->mem;
    for (int l = 0; l <= L; l++) a->x[l] = take(&cur, N * d);
    a->dx[0] = take(&cur, N * d);
    a->dx[1] = take(&cur, N * d);
    a->pooled = take(&cur, N * s->emb_dim);
    for (int l = 0; l < L; l++)
        ao_encoder_saved_bind(&a->layer_saved[l], take(&cur, enc_saved), &es);
    ao_head_saved_bind(&a->head_saved, take(&cur, ao_head_saved_floats(&hs)), &hs);
    a->z = take(&cur, N);
    a->dz = take(&cur, N);
    a->extra = extra_floats ? take(&cur, extra_floats) : NULL;
    a->scratch = take(&cur, scratch_floats);
}

void ao_model_acts_free(ao_model *m, ao_model_acts *a)
{
    ao_dev_free(m->dev, a->mem);
    free(a->x);
    free(a->layer_saved);
    memset(a, 0, sizeof *a);
}
