/* The model on the cpu device (model.h): a whole forward and backward equals
 * the direct composition of the ops_ref operators bit for bit; the gradients
 * of every unit against central finite differences of the loss; dropout masks
 * that follow the global sample index, not the batch position; parameter init
 * (deterministic, PyTorch's ranges); gradient accumulation over micro-batches;
 * the FLOP count; and the errors of create. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "assert_close.h"
#include "data/data.h"
#include "model/model.h"
#include "model/model_backend.h"
#include "model/ops_ref.h"
#include "runtime/device.h"

#define MAX_UNITS 4

/* B=2 T=3 F=2 D=3 S=2 V=5 E=4 d=8 h=2 L=2 ff=12 H=6 */
static const ao_model_shape TINY = {2, 3, 2, 3, 2, 5, 4, 8, 2, 2, 12, 6, 0.25f, 77, 0};

typedef struct {
    ao_device *dev;
    ao_stream *s;
    ao_model_shape shape;
    ao_model *m;
    float *params[MAX_UNITS];
    float *grads[MAX_UNITS];
    size_t counts[MAX_UNITS];
    float *loss; /* device scalar */
    /* the batch (device memory is host memory on cpu) */
    float *dense, *target, *weight;
    int32_t *ids;
    ao_batch b;
} fixture;

static void fixture_open(fixture *f, const ao_model_shape *shape)
{
    memset(f, 0, sizeof *f);
    f->shape = *shape;
    f->dev = ao_device_open("cpu", 0);
    assert_non_null(f->dev);
    f->s = ao_stream_create(f->dev, "compute", 0);
    f->m = ao_model_create(f->dev, shape);
    assert_non_null(f->m);
    int units = ao_model_units(shape);
    assert_true(units <= MAX_UNITS);
    for (int u = 0; u < units; u++) {
        f->counts[u] = ao_model_unit_params(shape, u);
        f->params[u] = ao_dev_alloc(f->dev, f->counts[u] * sizeof(float));
        f->grads[u] = ao_dev_alloc(f->dev, f->counts[u] * sizeof(float));
        ao_model_init_unit(shape, u, f->params[u]);
        memset(f->grads[u], 0, f->counts[u] * sizeof(float));
    }
    f->loss = ao_dev_alloc(f->dev, sizeof(float));
    const size_t tok = (size_t)shape->batch * shape->seq;
    f->dense = ao_dev_alloc(f->dev, tok * shape->num_dense * shape->dense_dim * sizeof(float));
    f->ids = ao_dev_alloc(f->dev, tok * shape->sparse * sizeof(int32_t));
    f->target = ao_dev_alloc(f->dev, tok * sizeof(float));
    f->weight = ao_dev_alloc(f->dev, tok * sizeof(float));
    f->b = (ao_batch){f->dense, f->ids, f->target, f->weight, 0};
}

static void fixture_close(fixture *f)
{
    for (int u = 0; u < ao_model_units(&f->shape); u++) {
        ao_dev_free(f->dev, f->params[u]);
        ao_dev_free(f->dev, f->grads[u]);
    }
    ao_dev_free(f->dev, f->loss);
    ao_dev_free(f->dev, f->dense);
    ao_dev_free(f->dev, f->ids);
    ao_dev_free(f->dev, f->target);
    ao_dev_free(f->dev, f->weight);
    ao_model_destroy(f->m);
    ao_stream_destroy(f->s);
    ao_device_close(f->dev);
}

static ao_data_shape data_shape_of(const ao_model_shape *s)
{
    ao_data_shape d = {s->seq, s->num_dense, s->dense_dim, s->sparse, s->vocab};
    return d;
}

/* Samples data_first.. of the dataset, batch keyed (dropout) at first_sample. */
static void load_batch(fixture *f, uint64_t data_first, int64_t first_sample)
{
    ao_data_shape d = data_shape_of(&f->shape);
    assert_int_equal(ao_data_fill(&d, 5, AO_TARGET_TEACHER, data_first, f->shape.batch, f->dense,
                                  f->ids, f->target, f->weight),
                     0);
    f->b.first_sample = first_sample;
}

static float model_forward(fixture *f, int64_t step, double normalizer)
{
    ao_model_forward_input(f->m, f->s, f->params[0], &f->b, step);
    for (int l = 1; l <= f->shape.layers; l++)
        ao_model_forward_layer(f->m, f->s, l, f->params[l], &f->b, step);
    ao_model_forward_head(f->m, f->s, f->params[0], &f->b, normalizer, f->loss);
    ao_stream_sync(f->s);
    return f->loss[0];
}

static float model_step(fixture *f, int64_t step, double normalizer)
{
    float loss = model_forward(f, step, normalizer);
    ao_model_backward_head(f->m, f->s, f->params[0], f->grads[0], &f->b, normalizer);
    for (int l = f->shape.layers; l >= 1; l--)
        ao_model_backward_layer(f->m, f->s, l, f->params[l], f->grads[l], &f->b, step);
    ao_model_backward_input(f->m, f->s, f->params[0], f->grads[0], &f->b);
    ao_stream_sync(f->s);
    return loss;
}

static void zero_grads(fixture *f)
{
    for (int u = 0; u < ao_model_units(&f->shape); u++)
        memset(f->grads[u], 0, f->counts[u] * sizeof(float));
}

/* ---- (1) the model is the composition of the reference ops ------------------- */

/* Forward and backward of one micro-batch by direct ops_ref calls; returns the
 * loss, writes the gradients (zeroed first) into grads[u]. */
static float reference_step(const ao_model_shape *s, float *const *params, float **grads,
                            const ao_batch *b, int64_t step, double normalizer)
{
    const int L = s->layers;
    const size_t N = (size_t)s->batch * s->seq, d = (size_t)s->dim;
    ao_input_shape is = ao_model_input_shape(s);
    ao_encoder_shape es = ao_model_encoder_shape(s);
    ao_head_shape hs = ao_model_head_shape(s);
    ao_input_weights iw, ig;
    ao_head_weights hw, hg;
    ao_input_weights_bind(&iw, params[0], &is);
    ao_input_weights_bind(&ig, grads[0], &is);
    ao_head_weights_bind(&hw, params[0] + ao_model_root_head_offset(s), &hs);
    ao_head_weights_bind(&hg, grads[0] + ao_model_root_head_offset(s), &hs);

    float *x[MAX_UNITS], *saved[MAX_UNITS];
    ao_encoder_saved es_saved[MAX_UNITS];
    for (int l = 0; l <= L; l++) x[l] = calloc(N * d, sizeof(float));
    for (int l = 0; l < L; l++) {
        saved[l] = calloc(ao_encoder_saved_floats(&es), sizeof(float));
        ao_encoder_saved_bind(&es_saved[l], saved[l], &es);
    }
    float *pooled = calloc(N * s->emb_dim, sizeof(float));
    float *head_saved_mem = calloc(ao_head_saved_floats(&hs), sizeof(float));
    ao_head_saved head_saved;
    ao_head_saved_bind(&head_saved, head_saved_mem, &hs);
    float *z = calloc(N, sizeof(float)), *dz = calloc(N, sizeof(float));
    float *dx_a = calloc(N * d, sizeof(float)), *dx_b = calloc(N * d, sizeof(float));
    size_t scratch_n = ao_encoder_backward_scratch_floats(&es);
    if (ao_head_backward_scratch_floats(&hs) > scratch_n)
        scratch_n = ao_head_backward_scratch_floats(&hs);
    if (N * s->emb_dim > scratch_n) scratch_n = N * s->emb_dim;
    float *scratch = calloc(scratch_n, sizeof(float));

    ao_input_forward(x[0], pooled, b->dense, b->ids, &iw, &is);
    for (int l = 1; l <= L; l++) {
        ao_encoder_weights w;
        ao_encoder_weights_bind(&w, params[l], &es);
        ao_dropout_cfg drop = {s->dropout, s->seed, (uint64_t)step, (uint32_t)l,
                               (uint64_t)b->first_sample};
        ao_encoder_forward(x[l], &es_saved[l - 1], x[l - 1], &w, &es, &drop);
    }
    ao_head_forward(z, &head_saved, x[L], &hw, &hs);
    float loss = (float)ao_bce_loss(z, b->target, b->weight, N, normalizer);

    ao_bce_loss_backward(dz, z, b->target, b->weight, N, normalizer);
    float *dy = dx_a, *dx = dx_b;
    ao_head_backward(dy, &hg, dz, x[L], &hw, &head_saved, &hs, scratch);
    for (int l = L; l >= 1; l--) {
        ao_encoder_weights w, g;
        ao_encoder_weights_bind(&w, params[l], &es);
        ao_encoder_weights_bind(&g, grads[l], &es);
        ao_dropout_cfg drop = {s->dropout, s->seed, (uint64_t)step, (uint32_t)l,
                               (uint64_t)b->first_sample};
        ao_encoder_backward(dx, &g, dy, x[l - 1], &w, &es_saved[l - 1], &es, &drop, scratch);
        float *t = dy;
        dy = dx;
        dx = t;
    }
    ao_input_backward(&ig, dy, b->dense, b->ids, pooled, &iw, &is, scratch);

    for (int l = 0; l <= L; l++) free(x[l]);
    for (int l = 0; l < L; l++) free(saved[l]);
    free(pooled);
    free(head_saved_mem);
    free(z);
    free(dz);
    free(dx_a);
    free(dx_b);
    free(scratch);
    return loss;
}

static void check_against_reference(const ao_model_shape *shape)
{
    fixture f;
    fixture_open(&f, shape);
    load_batch(&f, 40, 40);
    const double normalizer = 3.0 * shape->batch * shape->seq; /* as if 3 ranks */
    float loss = model_step(&f, 9, normalizer);

    float *ref_grads[MAX_UNITS];
    for (int u = 0; u < ao_model_units(shape); u++)
        ref_grads[u] = calloc(f.counts[u], sizeof(float));
    float ref_loss = reference_step(shape, f.params, ref_grads, &f.b, 9, normalizer);

    assert_true(isfinite(loss) && loss > 0.0f);
    assert_memory_equal(&loss, &ref_loss, sizeof loss);
    for (int u = 0; u < ao_model_units(shape); u++) {
        assert_true(ao_sum_squares(ref_grads[u], f.counts[u]) > 0.0);
        assert_memory_equal(f.grads[u], ref_grads[u], f.counts[u] * sizeof(float));
        free(ref_grads[u]);
    }
    fixture_close(&f);
}

static void test_model_equals_reference_composition(void **state)
{
    (void)state;
    check_against_reference(&TINY);
    ao_model_shape s = TINY;
    s.layers = 0; /* the head reads the input stage's output */
    check_against_reference(&s);
    s.layers = 3; /* an odd depth: the gradient ping-pong ends on the other buffer */
    s.dropout = 0.0f;
    check_against_reference(&s);
}

/* ---- (2) gradients against finite differences ------------------------------------ */

static void test_gradients_match_finite_differences(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, &TINY);
    load_batch(&f, 3, 3);
    const int64_t step = 4;
    const double normalizer = 1.0; /* the sum: larger numbers, same relative precision */
    model_step(&f, step, normalizer);

    const int samples = 48;
    const float eps = 1e-2f;
    ao_rng_stream pick = ao_rng_root(11, AO_RNG_PARAM_INIT);
    for (int u = 0; u < ao_model_units(&TINY); u++) {
        double err2 = 0.0, ref2 = 0.0;
        for (int k = 0; k < samples; k++) {
            size_t i = ao_rng_u32_below(ao_rng_u32(pick, (uint64_t)(u * samples + k)),
                                        (uint32_t)f.counts[u]);
            float keep = f.params[u][i];
            f.params[u][i] = keep + eps;
            double up = model_forward(&f, step, normalizer);
            f.params[u][i] = keep - eps;
            double down = model_forward(&f, step, normalizer);
            f.params[u][i] = keep;
            double fd = (up - down) / (2.0 * eps);
            double g = f.grads[u][i];
            err2 += (fd - g) * (fd - g);
            ref2 += g * g;
        }
        double rel = sqrt(err2 / ref2);
        if (!(rel < 1e-2)) {
            print_error("unit %d: |fd - grad| / |grad| = %g over %d parameters\n", u, rel, samples);
            fail();
        }
        assert_true(ref2 > 0.0);
    }
    fixture_close(&f);
}

/* ---- (3) dropout follows the global sample index --------------------------------- */

/* Loss (normalizer 1: the sum over tokens) and gradients of a batch of
 * `batch` samples starting at dataset sample `first`. */
static float run_split(const ao_model_shape *base, int batch, uint64_t first, int64_t key_first,
                       float **grads_out)
{
    ao_model_shape s = *base;
    s.batch = batch;
    fixture f;
    fixture_open(&f, &s);
    load_batch(&f, first, key_first);
    float loss = model_step(&f, 2, 1.0);
    for (int u = 0; u < ao_model_units(&s); u++) {
        grads_out[u] = malloc(f.counts[u] * sizeof(float));
        memcpy(grads_out[u], f.grads[u], f.counts[u] * sizeof(float));
    }
    fixture_close(&f);
    return loss;
}

static void test_dropout_masks_follow_the_sample(void **state)
{
    (void)state;
    ao_model_shape s = TINY;
    s.dropout = 0.5f; /* a wrong mask changes the loss by a lot */
    float *both[MAX_UNITS], *r0[MAX_UNITS], *r1[MAX_UNITS], *wrong[MAX_UNITS];
    /* one rank, B = 2: samples 20, 21; "rank 0" and "rank 1" with B = 1 */
    float l_both = run_split(&s, 2, 20, 20, both);
    float l_r0 = run_split(&s, 1, 20, 20, r0);
    float l_r1 = run_split(&s, 1, 21, 21, r1);
    /* sample 21 keyed as if it were at position 0 of sample 20's batch */
    float l_wrong = run_split(&s, 1, 21, 20, wrong);

    assert_close(l_r0 + l_r1, l_both, 1e-5 * fabs(l_both));
    assert_true(fabs(l_wrong - l_r1) > 1e-3 * fabs(l_r1));
    for (int u = 0; u < ao_model_units(&s); u++) {
        size_t n = ao_model_unit_params(&s, u);
        for (size_t i = 0; i < n; i++)
            assert_close(r0[u][i] + r1[u][i], both[u][i], 1e-5 + 1e-4 * fabs(both[u][i]));
        free(both[u]);
        free(r0[u]);
        free(r1[u]);
        free(wrong[u]);
    }
}

/* ---- (4) init ---------------------------------------------------------------------- */

static void assert_uniform_in(const float *x, size_t n, double bound)
{
    double max_abs = 0.0, mean = 0.0;
    for (size_t i = 0; i < n; i++) {
        assert_true(fabs(x[i]) <= bound);
        if (fabs(x[i]) > max_abs) max_abs = fabs(x[i]);
        mean += x[i];
    }
    mean /= (double)n;
    /* spread over the range, centred */
    if (n >= 64) {
        assert_true(max_abs > 0.9 * bound);
        assert_true(fabs(mean) < 0.15 * bound);
    }
}

static void assert_all(const float *x, size_t n, float v)
{
    for (size_t i = 0; i < n; i++) assert_true(x[i] == v);
}

static void test_init_deterministic_and_pytorch_ranges(void **state)
{
    (void)state;
    const ao_model_shape s = {2, 3, 4, 8, 2, 1000, 16, 32, 4, 2, 64, 24, 0.1f, 3, 0};
    size_t n0 = ao_model_unit_params(&s, 0), n1 = ao_model_unit_params(&s, 1);
    float *root = malloc(n0 * sizeof(float)), *root2 = malloc(n0 * sizeof(float));
    float *l1 = malloc(n1 * sizeof(float)), *l2 = malloc(n1 * sizeof(float));
    ao_model_init_unit(&s, 0, root);
    ao_model_init_unit(&s, 0, root2);
    assert_memory_equal(root, root2, n0 * sizeof(float));
    ao_model_init_unit(&s, 1, l1);
    ao_model_init_unit(&s, 2, l2);
    assert_memory_not_equal(l1, l2, n1 * sizeof(float));
    ao_model_shape other = s;
    other.seed = 4;
    ao_model_init_unit(&other, 0, root2);
    assert_memory_not_equal(root, root2, n0 * sizeof(float));

    const size_t d = 32, ff = 64, H = 24, FD = 32, E = 16, V = 1000;
    ao_input_shape is = ao_model_input_shape(&s);
    ao_head_shape hs = ao_model_head_shape(&s);
    ao_encoder_shape es = ao_model_encoder_shape(&s);
    assert_int_equal(n0, ao_input_param_count(&is) + ao_head_param_count(&hs));
    assert_int_equal(n1, ao_encoder_param_count(&es));
    ao_input_weights iw;
    ao_head_weights hw;
    ao_encoder_weights w;
    ao_input_weights_bind(&iw, root, &is);
    ao_head_weights_bind(&hw, root + ao_model_root_head_offset(&s), &hs);
    ao_encoder_weights_bind(&w, l1, &es);

    assert_uniform_in(iw.dense_w, d * FD, 1 / sqrt(FD));
    assert_uniform_in(iw.dense_b, d, 1 / sqrt(FD));
    assert_uniform_in(iw.sparse_w, d * E, 1 / sqrt(E));
    assert_uniform_in(iw.sparse_b, d, 1 / sqrt(E));
    double mean = 0, sq = 0;
    for (size_t i = 0; i < V * E; i++) {
        mean += iw.table[i];
        sq += (double)iw.table[i] * iw.table[i];
    }
    mean /= (double)(V * E);
    assert_close(mean, 0.0, 0.03);
    assert_close(sqrt(sq / (double)(V * E) - mean * mean), 1.0, 0.03);
    assert_all(hw.ln_w, d, 1.0f);
    assert_all(hw.ln_b, d, 0.0f);
    assert_uniform_in(hw.fc1_w, H * d, 1 / sqrt(d));
    assert_uniform_in(hw.fc1_b, H, 1 / sqrt(d));
    assert_uniform_in(hw.fc2_w, H, 1 / sqrt(H));
    assert_uniform_in(hw.fc2_b, 1, 1 / sqrt(H));

    assert_uniform_in(w.attn.in_w, 3 * d * d, sqrt(6.0 / (4.0 * d)));
    assert_all(w.attn.in_b, 3 * d, 0.0f);
    assert_uniform_in(w.attn.out_w, d * d, 1 / sqrt(d));
    assert_all(w.attn.out_b, d, 0.0f);
    assert_uniform_in(w.lin1_w, ff * d, 1 / sqrt(d));
    assert_uniform_in(w.lin1_b, ff, 1 / sqrt(d));
    assert_uniform_in(w.lin2_w, d * ff, 1 / sqrt(ff));
    assert_uniform_in(w.lin2_b, d, 1 / sqrt(ff));
    assert_all(w.ln1_w, d, 1.0f);
    assert_all(w.ln1_b, d, 0.0f);
    assert_all(w.ln2_w, d, 1.0f);
    assert_all(w.ln2_b, d, 0.0f);
    /* tensors draw from their own streams: dense_b is not a prefix of dense_w's */
    assert_memory_not_equal(iw.dense_b, iw.dense_w, d * sizeof(float));
    free(root);
    free(root2);
    free(l1);
    free(l2);
}

/* ---- (5) gradient accumulation ----------------------------------------------------- */

static void test_gradients_accumulate_over_micro_batches(void **state)
{
    (void)state;
    fixture f;
    fixture_open(&f, &TINY);
    const int units = ao_model_units(&TINY);
    float *g1[MAX_UNITS], *g2[MAX_UNITS];
    load_batch(&f, 0, 0);
    model_step(&f, 1, 12.0);
    for (int u = 0; u < units; u++) {
        g1[u] = malloc(f.counts[u] * sizeof(float));
        memcpy(g1[u], f.grads[u], f.counts[u] * sizeof(float));
    }
    zero_grads(&f);
    load_batch(&f, 2, 2);
    model_step(&f, 1, 12.0);
    for (int u = 0; u < units; u++) {
        g2[u] = malloc(f.counts[u] * sizeof(float));
        memcpy(g2[u], f.grads[u], f.counts[u] * sizeof(float));
    }
    zero_grads(&f);
    load_batch(&f, 0, 0);
    model_step(&f, 1, 12.0);
    load_batch(&f, 2, 2);
    model_step(&f, 1, 12.0);
    for (int u = 0; u < units; u++) {
        for (size_t i = 0; i < f.counts[u]; i++)
            assert_close(f.grads[u][i], g1[u][i] + g2[u][i],
                         1e-7 + 1e-6 * fabs(g1[u][i] + g2[u][i]));
        assert_memory_not_equal(g1[u], g2[u], f.counts[u] * sizeof(float));
        free(g1[u]);
        free(g2[u]);
    }
    fixture_close(&f);
}

/* ---- (6) FLOPs ------------------------------------------------------------------------ */

static void test_forward_flops_by_hand(void **state)
{
    (void)state;
    /* N = 6 tokens:
     * input  2*6*6*8 + 2*6*4*8                               =   960
     * layer  2*6*8*24 + 2*(2*2*3*3*8) + 2*6*8*8 + 2*(2*6*8*12) = 5952, x2 = 11904
     * head   2*6*8*6 + 2*6*6                                 =   648 */
    assert_close(ao_model_forward_flops(&TINY), 960.0 + 11904.0 + 648.0, 0.0);
    ao_model_shape no_layers = TINY;
    no_layers.layers = 0;
    assert_close(ao_model_forward_flops(&no_layers), 960.0 + 648.0, 0.0);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void test_create_rejects_bad_shapes(void **state)
{
    (void)state;
    ao_device *dev = ao_device_open("cpu", 0);
    ao_model_shape s = TINY;
    s.heads = 3; /* 8 % 3 != 0 */
    assert_null(ao_model_create(dev, &s));
    s = TINY;
    s.dropout = 1.0f;
    assert_null(ao_model_create(dev, &s));
    s = TINY;
    s.vocab = 0;
    assert_null(ao_model_create(dev, &s));
    s = TINY;
    s.layers = -1;
    assert_null(ao_model_create(dev, &s));
    ao_device_close(dev);
}

/* A device of a backend with no model implementation: the cpu backend's ops
 * under a name no backend has (cuda and hip have model implementations). */
static void test_create_refuses_backend_without_model(void **state)
{
    (void)state;
    struct ao_device_ops ops = ao_cpu_device_ops;
    ops.name = "no-such-backend";
    struct ao_device_base fake = {&ops};
    assert_null(ao_model_create((ao_device *)&fake, &TINY));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_equals_reference_composition),
        cmocka_unit_test(test_gradients_match_finite_differences),
        cmocka_unit_test(test_dropout_masks_follow_the_sample),
        cmocka_unit_test(test_init_deterministic_and_pytorch_ranges),
        cmocka_unit_test(test_gradients_accumulate_over_micro_batches),
        cmocka_unit_test(test_forward_flops_by_hand),
        cmocka_unit_test(test_create_rejects_bad_shapes),
        cmocka_unit_test(test_create_refuses_backend_without_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
