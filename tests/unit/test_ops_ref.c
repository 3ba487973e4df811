/* The fp32 reference operators: forward values against naive loops or known
 * numbers, every input and parameter gradient against central finite
 * differences of a random projection of the output, dropout masks that do not
 * depend on how the batch is split, and the optimizer pieces against
 * hand-computed numbers.
 *
 * Gradient checks run backward twice on zeroed gradient buffers: parameter
 * gradients must come out doubled (they accumulate), input gradients single
 * (they are written). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "model/ops_ref.h"

/* ---- helpers ------------------------------------------------------------------ */

typedef struct {
    void *p[64];
    int n;
} arena;

static float *af(arena *a, size_t n)
{
    assert_true(a->n < 64);
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    a->p[a->n++] = p;
    return p;
}

static void arena_free(arena *a)
{
    for (int i = 0; i < a->n; i++) free(a->p[i]);
    a->n = 0;
}

/* x[i] = mean + sd * N(0,1), a different fixed sequence for each tag. */
static void randn(float *x, size_t n, uint64_t tag, float mean, float sd)
{
    ao_rng_fill_normal(x, n, ao_rng_child(ao_rng_root(2024, AO_RNG_PARAM_INIT), tag), 0, mean, sd);
}

static double dotf(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static void assert_close(const char *what, const float *got, const double *want, size_t n,
                         double tol)
{
    for (size_t i = 0; i < n; i++) {
        if (fabs(got[i] - want[i]) > tol * (1.0 + fabs(want[i]))) {
            print_error("%s[%zu]: got %.9g, want %.9g\n", what, i, (double)got[i], want[i]);
            fail();
        }
    }
}

typedef double (*loss_fn)(void *ctx);

typedef struct {
    const char *name;
    float *x;        /* the tensor perturbed */
    const float *g;  /* its analytic gradient (after two backward calls) */
    size_t n;        /* elements */
    double g_factor; /* 0.5 for accumulated parameter gradients, 1 for written input gradients */
} grad_case;

#define FD_EPS  5e-3f
#define FD_RTOL 1e-2

/* Central differences of f wrt every element of c->x against c->g. */
static void check_grad(const char *op, const grad_case *c, loss_fn f, void *ctx)
{
    double max_num = 0;
    double *num = calloc(c->n, sizeof(double));
    assert_non_null(num);
    for (size_t i = 0; i < c->n; i++) {
        const float saved = c->x[i];
        c->x[i] = saved + FD_EPS;
        const double lp = f(ctx);
        c->x[i] = saved - FD_EPS;
        const double lm = f(ctx);
        c->x[i] = saved;
        num[i] = (lp - lm) / (2.0 * (double)FD_EPS);
        if (fabs(num[i]) > max_num) max_num = fabs(num[i]);
    }
    f(ctx); /* leave the forward state as the unperturbed one */
    if (!(max_num > 1e-6)) {
        print_error("%s: d loss / d %s is zero everywhere: the check would be vacuous\n", op,
                    c->name);
        free(num);
        fail();
    }
    for (size_t i = 0; i < c->n; i++) {
        const double a = c->g[i] * c->g_factor;
        if (fabs(a - num[i]) > FD_RTOL * (fabs(num[i]) + max_num)) {
            print_error("%s: d loss / d %s[%zu]: analytic %.7g, finite difference %.7g\n", op,
                        c->name, i, a, num[i]);
            free(num);
            fail();
        }
    }
    free(num);
}

static void check_grads(const char *op, const grad_case *cases, size_t n, loss_fn f, void *ctx)
{
    for (size_t i = 0; i < n; i++) check_grad(op, &cases[i], f, ctx);
}

/* ---- linear --------------------------------------------------------------------- */

typedef struct {
    int n, in, out;
    float *x, *w, *b, *y, *proj;
} linear_ctx;

static double linear_loss(void *p)
{
    linear_ctx *c = p;
    ao_linear_forward(c->y, c->x, c->w, c->b, c->n, c->in, c->out);
    return dotf(c->y, c->proj, (size_t)c->n * c->out);
}

static void test_linear(void **state)
{
    (void)state;
    arena a = {0};
    linear_ctx c = {.n = 4, .in = 5, .out = 3};
    c.x = af(&a, 20), c.w = af(&a, 15), c.b = af(&a, 3), c.y = af(&a, 12), c.proj = af(&a, 12);
    randn(c.x, 20, 1, 0, 1), randn(c.w, 15, 2, 0, 1), randn(c.b, 3, 3, 0, 1);
    randn(c.proj, 12, 4, 0, 1);

    linear_loss(&c);
    double want[12];
    for (int i = 0; i < 4; i++)
        for (int o = 0; o < 3; o++) {
            want[i * 3 + o] = c.b[o];
            for (int k = 0; k < 5; k++) want[i * 3 + o] += (double)c.x[i * 5 + k] * c.w[o * 5 + k];
        }
    assert_close("linear y", c.y, want, 12, 1e-5);
    float *y_nobias = af(&a, 12);
    ao_linear_forward(y_nobias, c.x, c.w, NULL, 4, 5, 3);
    for (int i = 0; i < 12; i++) want[i] -= c.b[i % 3];
    assert_close("linear y without bias", y_nobias, want, 12, 1e-5);

    float *dx = af(&a, 20), *dw = af(&a, 15), *db = af(&a, 3);
    for (int rep = 0; rep < 2; rep++)
        ao_linear_backward(dx, dw, db, c.proj, c.x, c.w, c.n, c.in, c.out);
    const grad_case g[] = {{"x", c.x, dx, 20, 1}, {"w", c.w, dw, 15, 0.5}, {"b", c.b, db, 3, 0.5}};
    check_grads("linear", g, 3, linear_loss, &c);

    /* NULL dx and db are skipped, dw still accumulates */
    float *dw2 = af(&a, 15);
    ao_linear_backward(NULL, dw2, NULL, c.proj, c.x, c.w, c.n, c.in, c.out);
    for (int i = 0; i < 15; i++) assert_true(fabs(dw2[i] - 0.5f * dw[i]) <= 1e-5f);
    arena_free(&a);
}

/* ---- embedding bag ---------------------------------------------------------------- */

typedef struct {
    int n, s, e;
    const int32_t *ids;
    float *table, *out, *proj;
} emb_ctx;

static double emb_loss(void *p)
{
    emb_ctx *c = p;
    ao_embedding_bag_mean_forward(c->out, c->ids, c->table, c->n, c->s, c->e);
    return dotf(c->out, c->proj, (size_t)c->n * c->e);
}

static void test_embedding_bag(void **state)
{
    (void)state;
    arena a = {0};
    /* repeated ids within a bag and across bags; id 3 unused */
    static const int32_t ids[] = {0, 0, 5, 1, 2, 5, 4, 4, 4, 5, 1, 0};
    emb_ctx c = {.n = 4, .s = 3, .e = 4, .ids = ids};
    c.table = af(&a, 24), c.out = af(&a, 16), c.proj = af(&a, 16);
    randn(c.table, 24, 5, 0, 1), randn(c.proj, 16, 6, 0, 1);
    emb_loss(&c);
    double want[16];
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++) {
            want[i * 4 + k] = 0;
            for (int j = 0; j < 3; j++) want[i * 4 + k] += c.table[ids[i * 3 + j] * 4 + k] / 3.0;
        }
    assert_close("embedding bag out", c.out, want, 16, 1e-6);

    float *dt = af(&a, 24);
    for (int rep = 0; rep < 2; rep++)
        ao_embedding_bag_mean_backward(dt, c.proj, ids, c.n, c.s, c.e);
    for (int k = 0; k < 4; k++) assert_true(dt[3 * 4 + k] == 0.0f); /* id 3: no gradient */
    const grad_case g[] = {{"table", c.table, dt, 24, 0.5}};
    check_grads("embedding_bag", g, 1, emb_loss, &c);
    arena_free(&a);
}

/* ---- layernorm ----------------------------------------------------------------- */

typedef struct {
    int n, c;
    float *x, *gamma, *beta, *y, *mean, *rstd, *proj;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    ao_layernorm_forward(c->y, c->mean, c->rstd, c->x, c->gamma, c->beta, c->n, c->c);
    return dotf(c->y, c->proj, (size_t)c->n * c->c);
}

static void test_layernorm(void **state)
{
    (void)state;
    arena a = {0};
    ln_ctx c = {.n = 3, .c = 8};
    c.x = af(&a, 24), c.gamma = af(&a, 8), c.beta = af(&a, 8), c.y = af(&a, 24);
    c.mean = af(&a, 3), c.rstd = af(&a, 3), c.proj = af(&a, 24);
    randn(c.x, 24, 7, 2.0f, 3.0f), randn(c.gamma, 8, 8, 1, 0.3f), randn(c.beta, 8, 9, 0, 0.5f);
    randn(c.proj, 24, 10, 0, 1);
    ln_loss(&c);
    double want[24];
    for (int i = 0; i < 3; i++) {
        double m = 0, v = 0;
        for (int j = 0; j < 8; j++) m += c.x[i * 8 + j] / 8.0;
        for (int j = 0; j < 8; j++) v += (c.x[i * 8 + j] - m) * (c.x[i * 8 + j] - m) / 8.0;
        assert_true(fabs(c.mean[i] - m) < 1e-5 * (1 + fabs(m)));
        assert_true(fabs(c.rstd[i] - 1 / sqrt(v + 1e-5)) < 1e-5 / sqrt(v));
        for (int j = 0; j < 8; j++)
            want[i * 8 + j] = (c.x[i * 8 + j] - m) / sqrt(v + 1e-5) * c.gamma[j] + c.beta[j];
    }
    assert_close("layernorm y", c.y, want, 24, 1e-5);

    float *dx = af(&a, 24), *dg = af(&a, 8), *dbeta = af(&a, 8);
    for (int rep = 0; rep < 2; rep++)
        ao_layernorm_backward(dx, dg, dbeta, c.proj, c.x, c.mean, c.rstd, c.gamma, c.n, c.c);
    const grad_case g[] = {
        {"x", c.x, dx, 24, 1}, {"gamma", c.gamma, dg, 8, 0.5}, {"beta", c.beta, dbeta, 8, 0.5}};
    check_grads("layernorm", g, 3, ln_loss, &c);
    arena_free(&a);
}

/* ---- GELU ---------------------------------------------------------------------- */

typedef struct {
    float *x, *y, *proj;
    size_t n;
} gelu_ctx;

static double gelu_loss(void *p)
{
    gelu_ctx *c = p;
    ao_gelu_forward(c->y, c->x, c->n);
    return dotf(c->y, c->proj, c->n);
}

static void test_gelu(void **state)
{
    (void)state;
    /* x * Phi(x), exact values */
    const float xs[] = {0.0f, 1.0f, -1.0f, 3.0f, -3.0f, 0.5f};
    const double want[] = {0.0,
                           0.8413447460685429,
                           -0.15865525393145707,
                           2.9959502751731587,
                           -0.004049724826841348,
                           0.34573123063700656};
    float y[6];
    ao_gelu_forward(y, xs, 6);
    assert_close("gelu", y, want, 6, 1e-6);
    /* in place */
    float inplace[6];
    memcpy(inplace, xs, sizeof xs);
    ao_gelu_forward(inplace, inplace, 6);
    assert_memory_equal(inplace, y, sizeof y);

    arena a = {0};
    gelu_ctx c = {.n = 16};
    c.x = af(&a, 16), c.y = af(&a, 16), c.proj = af(&a, 16);
    randn(c.x, 16, 11, 0, 2.0f), randn(c.proj, 16, 12, 0, 1);
    float *dx = af(&a, 16);
    gelu_loss(&c);
    ao_gelu_backward(dx, c.proj, c.x, 16);
    const grad_case g[] = {{"x", c.x, dx, 16, 1}};
    check_grads("gelu", g, 1, gelu_loss, &c);
    /* dx may alias dy */
    float *d2 = af(&a, 16);
    memcpy(d2, c.proj, 16 * sizeof(float));
    ao_gelu_backward(d2, d2, c.x, 16);
    assert_memory_equal(d2, dx, 16 * sizeof(float));
    arena_free(&a);
}

/* ---- dropout ------------------------------------------------------------------- */

typedef struct {
    int batch;
    size_t per;
    const ao_dropout_cfg *cfg;
    float *x, *y, *proj;
} drop_ctx;

static double drop_loss(void *p)
{
    drop_ctx *c = p;
    ao_dropout_forward(c->y, c->x, c->batch, c->per, AO_DROP_FFN_HIDDEN, c->cfg);
    return dotf(c->y, c->proj, c->batch * c->per);
}

static void test_dropout(void **state)
{
    (void)state;
    arena a = {0};
    enum { B = 4, PER = 50 };
    const ao_dropout_cfg cfg = {.p = 0.4f, .seed = 3, .step = 17, .layer = 2, .first_sample = 40};
    drop_ctx c = {.batch = B, .per = PER, .cfg = &cfg};
    c.x = af(&a, B * PER), c.y = af(&a, B * PER), c.proj = af(&a, B * PER);
    randn(c.x, B * PER, 13, 0, 1), randn(c.proj, B * PER, 14, 0, 1);
    drop_loss(&c);
    int dropped = 0;
    for (int i = 0; i < B * PER; i++) {
        if (c.y[i] == 0.0f) {
            dropped++;
        } else {
            assert_true(c.y[i] == c.x[i] * (1.0f / (1.0f - 0.4f)));
        }
    }
    assert_true(dropped > B * PER / 5 && dropped < B * PER * 3 / 5);
    /* element by element, the factor a device kernel computes (PER is not a
     * multiple of 4: the tail of each sample's last block counts too) */
    for (int b = 0; b < B; b++) {
        const ao_rng_stream ms = ao_dropout_stream(3, 17, 2, AO_DROP_FFN_HIDDEN, 40 + (uint64_t)b);
        for (int e = 0; e < PER; e++)
            assert_true(c.y[b * PER + e] ==
                        c.x[b * PER + e] * ao_dropout_factor(ms, (uint64_t)e, 0.4f));
    }

    float *dx = af(&a, B * PER);
    ao_dropout_backward(dx, c.proj, B, PER, AO_DROP_FFN_HIDDEN, &cfg);
    for (int i = 0; i < B * PER; i++) assert_true((dx[i] == 0.0f) == (c.y[i] == 0.0f));
    const grad_case g[] = {{"x", c.x, dx, B * PER, 1}};
    check_grads("dropout", g, 1, drop_loss, &c);

    /* two ranks of 2 samples draw the masks of one rank of 4 */
    float *split = af(&a, B * PER);
    ao_dropout_cfg r0 = cfg, r1 = cfg;
    r1.first_sample = cfg.first_sample + 2;
    ao_dropout_forward(split, c.x, 2, PER, AO_DROP_FFN_HIDDEN, &r0);
    ao_dropout_forward(split + 2 * PER, c.x + 2 * PER, 2, PER, AO_DROP_FFN_HIDDEN, &r1);
    assert_memory_equal(split, c.y, sizeof(float) * B * PER);
    /* and another site, step or layer gives other masks */
    ao_dropout_forward(split, c.x, B, PER, AO_DROP_FFN_OUT, &cfg);
    assert_true(memcmp(split, c.y, sizeof(float) * B * PER) != 0);

    /* p = 0 or no cfg: identity, also in place */
    const ao_dropout_cfg off = {.p = 0.0f, .seed = 3};
    ao_dropout_forward(split, c.x, B, PER, AO_DROP_FFN_OUT, &off);
    assert_memory_equal(split, c.x, sizeof(float) * B * PER);
    ao_dropout_forward(split, split, B, PER, AO_DROP_FFN_OUT, NULL);
    assert_memory_equal(split, c.x, sizeof(float) * B * PER);
    arena_free(&a);
}

/* ---- attention ----------------------------------------------------------------- */

typedef struct {
    ao_attn_shape shape;
    const ao_dropout_cfg *drop;
    ao_attn_weights w;
    ao_attn_saved sv;
    float *x, *out, *proj;
} attn_ctx;

static double attn_loss(void *p)
{
    attn_ctx *c = p;
    ao_attn_forward(c->out, &c->sv, c->x, &c->w, &c->shape, c->drop);
    return dotf(c->out, c->proj, (size_t)c->shape.batch * c->shape.seq * c->shape.dim);
}

static void attn_alloc(arena *a, attn_ctx *c, const ao_attn_shape *s, const ao_dropout_cfg *drop)
{
    const size_t d = (size_t)s->dim, N = (size_t)s->batch * s->seq;
    c->shape = *s;
    c->drop = drop;
    c->w.in_w = af(a, 3 * d * d), c->w.in_b = af(a, 3 * d);
    c->w.out_w = af(a, d * d), c->w.out_b = af(a, d);
    c->sv.qkv = af(a, N * 3 * d), c->sv.ctx = af(a, N * d);
    c->sv.att = af(a, (size_t)s->batch * s->heads * s->seq * s->seq);
    c->x = af(a, N * d), c->out = af(a, N * d), c->proj = af(a, N * d);
    randn(c->w.in_w, 3 * d * d, 20, 0, 0.6f), randn(c->w.in_b, 3 * d, 21, 0, 0.2f);
    randn(c->w.out_w, d * d, 22, 0, 0.6f), randn(c->w.out_b, d, 23, 0, 0.2f);
    randn(c->x, N * d, 24, 0, 1), randn(c->proj, N * d, 25, 0, 1);
}

/* nn.MultiheadAttention's forward written out directly, in double. */
static void attn_naive(double *out, const attn_ctx *c)
{
    const int B = c->shape.batch, T = c->shape.seq, d = c->shape.dim, H = c->shape.heads;
    const int hd = d / H;
    double *q = calloc((size_t)T * d, sizeof(double)), *k = calloc((size_t)T * d, sizeof(double));
    double *v = calloc((size_t)T * d, sizeof(double)), *ctx = calloc((size_t)T * d, sizeof(double));
    double *p = calloc((size_t)T, sizeof(double));
    assert_true(q && k && v && ctx && p);
    for (int b = 0; b < B; b++) {
        const float *x = c->x + (size_t)b * T * d;
        for (int t = 0; t < T; t++)
            for (int o = 0; o < d; o++) {
                double sq = c->w.in_b[o], sk = c->w.in_b[d + o], sv = c->w.in_b[2 * d + o];
                for (int i = 0; i < d; i++) {
                    sq += (double)x[t * d + i] * c->w.in_w[o * d + i];
                    sk += (double)x[t * d + i] * c->w.in_w[(d + o) * d + i];
                    sv += (double)x[t * d + i] * c->w.in_w[(2 * d + o) * d + i];
                }
                q[t * d + o] = sq, k[t * d + o] = sk, v[t * d + o] = sv;
            }
        for (int h = 0; h < H; h++) {
            ao_rng_stream ms = ao_rng_child(ao_dropout_stream(c->drop->seed, c->drop->step,
                                                              c->drop->layer, AO_DROP_ATTN_PROBS,
                                                              c->drop->first_sample + (uint64_t)b),
                                            (uint64_t)h);
            for (int i = 0; i < T; i++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < T; j++) {
                    p[j] = 0;
                    for (int e = 0; e < hd; e++)
                        p[j] += q[i * d + h * hd + e] * k[j * d + h * hd + e];
                    p[j] /= sqrt((double)hd);
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j < T; j++) sum += exp(p[j] - mx);
                for (int j = 0; j < T; j++)
                    p[j] = exp(p[j] - mx) / sum *
                           ao_dropout_factor(ms, (uint64_t)i * T + j, c->drop->p);
                for (int e = 0; e < hd; e++) {
                    ctx[i * d + h * hd + e] = 0;
                    for (int j = 0; j < T; j++)
                        ctx[i * d + h * hd + e] += p[j] * v[j * d + h * hd + e];
                }
            }
        }
        for (int t = 0; t < T; t++)
            for (int o = 0; o < d; o++) {
                double s = c->w.out_b[o];
                for (int i = 0; i < d; i++) s += ctx[t * d + i] * c->w.out_w[o * d + i];
                out[((size_t)b * T + t) * d + o] = s;
            }
    }
    free(q), free(k), free(v), free(ctx), free(p);
}

static void check_attention(float p)
{
    arena a = {0};
    const ao_attn_shape s = {.batch = 2, .seq = 3, .dim = 4, .heads = 2};
    const ao_dropout_cfg drop = {.p = p, .seed = 5, .step = 2, .layer = 1, .first_sample = 6};
    attn_ctx c;
    attn_alloc(&a, &c, &s, &drop);
    attn_loss(&c);

    double want[24];
    attn_naive(want, &c);
    assert_close("attention out", c.out, want, 24, 1e-5);
    if (p > 0) {
        /* the masks really drop some probabilities and keep others */
        int dropped = 0;
        for (int b = 0; b < 2; b++)
            for (int h = 0; h < 2; h++) {
                ao_rng_stream ms = ao_rng_child(
                    ao_dropout_stream(5, 2, 1, AO_DROP_ATTN_PROBS, 6 + (uint64_t)b), (uint64_t)h);
                for (int e = 0; e < 9; e++) dropped += ao_dropout_factor(ms, (uint64_t)e, p) == 0;
            }
        assert_true(dropped > 0 && dropped < 36);
    }

    const size_t scratch_n = ao_attn_backward_scratch_floats(&s);
    assert_int_equal(scratch_n, 6 * 12 + 6 * 4 + 3);
    float *scratch = af(&a, scratch_n), *dx = af(&a, 24);
    ao_attn_weights g = {af(&a, 48), af(&a, 12), af(&a, 16), af(&a, 4)};
    for (int rep = 0; rep < 2; rep++)
        ao_attn_backward(dx, &g, c.proj, c.x, &c.w, &c.sv, &s, &drop, scratch);
    const grad_case cases[] = {
        {"x", c.x, dx, 24, 1},
        {"in_proj_weight", c.w.in_w, g.in_w, 48, 0.5},
        {"in_proj_bias", c.w.in_b, g.in_b, 12, 0.5},
        {"out_proj.weight", c.w.out_w, g.out_w, 16, 0.5},
        {"out_proj.bias", c.w.out_b, g.out_b, 4, 0.5},
    };
    check_grads(p > 0 ? "attention (dropout)" : "attention", cases, 5, attn_loss, &c);
    arena_free(&a);
}

static void test_attention(void **state)
{
    (void)state;
    check_attention(0.0f);
    check_attention(0.3f);
}

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]) / (1e-3 + fabs(b[i])));
    return m;
}

/* Sample g at position 0 of rank 1's batch gets the mask it gets at position
 * B of a single-rank batch of 2B. */
static void test_attention_dropout_independent_of_partition(void **state)
{
    (void)state;
    arena a = {0};
    enum { B = 2 };
    const ao_attn_shape whole = {.batch = 2 * B, .seq = 4, .dim = 4, .heads = 2};
    const ao_attn_shape half = {.batch = B, .seq = 4, .dim = 4, .heads = 2};
    const ao_dropout_cfg one = {.p = 0.5f, .seed = 8, .step = 3, .layer = 0, .first_sample = 100};
    ao_dropout_cfg rank1 = one;
    rank1.first_sample = one.first_sample + B;
    attn_ctx w, r;
    attn_alloc(&a, &w, &whole, &one);
    attn_alloc(&a, &r, &half, &rank1); /* same weights: same tags */
    memcpy(r.x, w.x + (size_t)B * 16, sizeof(float) * B * 16);
    attn_loss(&w);
    attn_loss(&r);
    const size_t half_n = (size_t)B * 16;
    assert_true(max_rel_diff(r.out, w.out + half_n, half_n) < 1e-5);
    assert_true(max_rel_diff(r.sv.ctx, w.sv.ctx + half_n, half_n) < 1e-5);

    /* keyed by the batch position instead, it would differ */
    ao_dropout_cfg wrong = one;
    r.drop = &wrong;
    attn_loss(&r);
    assert_true(max_rel_diff(r.out, w.out + half_n, half_n) > 1e-3);
    arena_free(&a);
}

/* ---- encoder layer --------------------------------------------------------------- */

typedef struct {
    ao_encoder_shape shape;
    const ao_dropout_cfg *drop;
    ao_encoder_weights w;
    ao_encoder_saved sv;
    float *x, *y, *proj;
} enc_ctx;

static double enc_loss(void *p)
{
    enc_ctx *c = p;
    ao_encoder_forward(c->y, &c->sv, c->x, &c->w, &c->shape, c->drop);
    return dotf(c->y, c->proj, (size_t)c->shape.batch * c->shape.seq * c->shape.dim);
}

static void check_encoder(float p)
{
    arena a = {0};
    const ao_encoder_shape s = {.batch = 2, .seq = 3, .dim = 4, .heads = 2, .ff = 6};
    const ao_dropout_cfg drop = {.p = p, .seed = 1, .step = 9, .layer = 3, .first_sample = 4};
    const size_t np = ao_encoder_param_count(&s), N = 6, d = 4;
    assert_int_equal(np, 3 * 16 + 12 + 16 + 4 + 24 + 6 + 24 + 4 + 16);
    enc_ctx c = {.shape = s, .drop = &drop};
    float *params = af(&a, np), *grads = af(&a, np);
    ao_encoder_weights_bind(&c.w, params, &s);
    ao_encoder_weights g;
    ao_encoder_weights_bind(&g, grads, &s);
    assert_true(c.w.ln2_b + d == params + np); /* the layout covers the buffer exactly */
    ao_encoder_saved_bind(&c.sv, af(&a, ao_encoder_saved_floats(&s)), &s);
    c.x = af(&a, N * d), c.y = af(&a, N * d), c.proj = af(&a, N * d);
    randn(params, np, 30, 0, 0.5f);
    randn(c.w.ln1_w, d, 31, 1, 0.2f), randn(c.w.ln2_w, d, 32, 1, 0.2f);
    randn(c.x, N * d, 33, 0, 1), randn(c.proj, N * d, 34, 0, 1);
    enc_loss(&c);
    if (p > 0) {
        /* dropout changes the output */
        float *y0 = af(&a, N * d);
        const ao_dropout_cfg off = {.p = 0};
        memcpy(y0, c.y, sizeof(float) * N * d);
        c.drop = &off;
        enc_loss(&c);
        assert_true(memcmp(y0, c.y, sizeof(float) * N * d) != 0);
        c.drop = &drop;
        enc_loss(&c);
    }
    /* post-LN: with its affine part removed, each output row is normalized */
    for (size_t i = 0; i < N; i++) {
        double m = 0, v = 0;
        for (size_t j = 0; j < d; j++) m += (c.y[i * d + j] - c.w.ln2_b[j]) / c.w.ln2_w[j] / d;
        for (size_t j = 0; j < d; j++) {
            const double z = (c.y[i * d + j] - c.w.ln2_b[j]) / c.w.ln2_w[j] - m;
            v += z * z / d;
        }
        assert_true(fabs(m) < 1e-4 && fabs(v - 1) < 1e-2);
    }

    float *dx = af(&a, N * d), *scratch = af(&a, ao_encoder_backward_scratch_floats(&s));
    for (int rep = 0; rep < 2; rep++)
        ao_encoder_backward(dx, &g, c.proj, c.x, &c.w, &c.sv, &s, &drop, scratch);
    const grad_case cases[] = {
        {"x", c.x, dx, N * d, 1},
        {"self_attn.in_proj_weight", c.w.attn.in_w, g.attn.in_w, 48, 0.5},
        {"self_attn.in_proj_bias", c.w.attn.in_b, g.attn.in_b, 12, 0.5},
        {"self_attn.out_proj.weight", c.w.attn.out_w, g.attn.out_w, 16, 0.5},
        {"self_attn.out_proj.bias", c.w.attn.out_b, g.attn.out_b, 4, 0.5},
        {"linear1.weight", c.w.lin1_w, g.lin1_w, 24, 0.5},
        {"linear1.bias", c.w.lin1_b, g.lin1_b, 6, 0.5},
        {"linear2.weight", c.w.lin2_w, g.lin2_w, 24, 0.5},
        {"linear2.bias", c.w.lin2_b, g.lin2_b, 4, 0.5},
        {"norm1.weight", c.w.ln1_w, g.ln1_w, 4, 0.5},
        {"norm1.bias", c.w.ln1_b, g.ln1_b, 4, 0.5},
        {"norm2.weight", c.w.ln2_w, g.ln2_w, 4, 0.5},
        {"norm2.bias", c.w.ln2_b, g.ln2_b, 4, 0.5},
    };
    check_grads(p > 0 ? "encoder layer (dropout)" : "encoder layer", cases,
                sizeof cases / sizeof cases[0], enc_loss, &c);
    arena_free(&a);
}

static void test_encoder_layer(void **state)
{
    (void)state;
    check_encoder(0.0f);
    check_encoder(0.2f);
}

/* ---- input stage ------------------------------------------------------------------ */

typedef struct {
    ao_input_shape shape;
    ao_input_weights w;
    float *dense, *out, *pooled, *proj;
    const int32_t *ids;
} input_ctx;

static double input_loss(void *p)
{
    input_ctx *c = p;
    ao_input_forward(c->out, c->pooled, c->dense, c->ids, &c->w, &c->shape);
    return dotf(c->out, c->proj, (size_t)c->shape.n * c->shape.dim);
}

static void test_input_stage(void **state)
{
    (void)state;
    arena a = {0};
    static const int32_t ids[] = {0, 4, 2, 2, 1, 3, 4, 4};
    const ao_input_shape s = {
        .n = 4, .dense_in = 6, .sparse = 2, .vocab = 5, .emb_dim = 3, .dim = 4};
    const size_t np = ao_input_param_count(&s);
    assert_int_equal(np, 24 + 4 + 15 + 12 + 4);
    input_ctx c = {.shape = s, .ids = ids};
    float *params = af(&a, np), *grads = af(&a, np);
    ao_input_weights g;
    ao_input_weights_bind(&c.w, params, &s);
    ao_input_weights_bind(&g, grads, &s);
    assert_true(c.w.sparse_b + 4 == params + np);
    c.dense = af(&a, 24), c.out = af(&a, 16), c.pooled = af(&a, 12), c.proj = af(&a, 16);
    randn(params, np, 40, 0, 0.7f), randn(c.dense, 24, 41, 0, 1), randn(c.proj, 16, 42, 0, 1);
    input_loss(&c);
    double want[16];
    for (int i = 0; i < 4; i++)
        for (int o = 0; o < 4; o++) {
            double v = c.w.dense_b[o] + c.w.sparse_b[o];
            for (int k = 0; k < 6; k++) v += (double)c.dense[i * 6 + k] * c.w.dense_w[o * 6 + k];
            for (int e = 0; e < 3; e++) {
                const double pooled =
                    (c.w.table[ids[i * 2] * 3 + e] + (double)c.w.table[ids[i * 2 + 1] * 3 + e]) / 2;
                v += pooled * c.w.sparse_w[o * 3 + e];
            }
            want[i * 4 + o] = v;
        }
    assert_close("input stage out", c.out, want, 16, 1e-5);

    float *scratch = af(&a, 12);
    for (int rep = 0; rep < 2; rep++)
        ao_input_backward(&g, c.proj, c.dense, ids, c.pooled, &c.w, &s, scratch);
    const grad_case cases[] = {
        {"dense.weight", c.w.dense_w, g.dense_w, 24, 0.5},
        {"dense.bias", c.w.dense_b, g.dense_b, 4, 0.5},
        {"embedding", c.w.table, g.table, 15, 0.5},
        {"sparse.weight", c.w.sparse_w, g.sparse_w, 12, 0.5},
        {"sparse.bias", c.w.sparse_b, g.sparse_b, 4, 0.5},
    };
    check_grads("input stage", cases, 5, input_loss, &c);
    arena_free(&a);
}

/* ---- head and loss --------------------------------------------------------------- */

typedef struct {
    ao_head_shape shape;
    ao_head_weights w;
    ao_head_saved sv;
    float *x, *z, *y, *wt;
    double normalizer;
} head_ctx;

static double head_loss(void *p)
{
    head_ctx *c = p;
    ao_head_forward(c->z, &c->sv, c->x, &c->w, &c->shape);
    return ao_bce_loss(c->z, c->y, c->wt, (size_t)c->shape.n, c->normalizer);
}

static void test_head_and_loss(void **state)
{
    (void)state;
    arena a = {0};
    const ao_head_shape s = {.n = 6, .dim = 4, .hidden = 5};
    const size_t np = ao_head_param_count(&s);
    assert_int_equal(np, 8 + 20 + 5 + 5 + 1);
    /* normalizer: the global token count, as if 2 ranks had 6 tokens each */
    head_ctx c = {.shape = s, .normalizer = 12.0};
    float *params = af(&a, np), *grads = af(&a, np);
    ao_head_weights g;
    ao_head_weights_bind(&c.w, params, &s);
    ao_head_weights_bind(&g, grads, &s);
    assert_true(c.w.fc2_b + 1 == params + np);
    ao_head_saved_bind(&c.sv, af(&a, ao_head_saved_floats(&s)), &s);
    c.x = af(&a, 24), c.z = af(&a, 6), c.y = af(&a, 6), c.wt = af(&a, 6);
    randn(params, np, 50, 0, 0.8f), randn(c.w.ln_w, 4, 51, 1, 0.2f), randn(c.x, 24, 52, 0, 1);
    ao_rng_fill_uniform(c.y, 6, ao_rng_root(1, 99), 0, 0.0f, 1.0f);
    ao_rng_fill_uniform(c.wt, 6, ao_rng_root(2, 99), 0, 0.5f, 1.5f);
    head_loss(&c);

    float *dz = af(&a, 6), *dx = af(&a, 24), *scratch = af(&a, ao_head_backward_scratch_floats(&s));
    ao_bce_loss_backward(dz, c.z, c.y, c.wt, 6, c.normalizer);
    for (int rep = 0; rep < 2; rep++) ao_head_backward(dx, &g, dz, c.x, &c.w, &c.sv, &s, scratch);
    const grad_case cases[] = {
        {"x", c.x, dx, 24, 1},
        {"norm.weight", c.w.ln_w, g.ln_w, 4, 0.5},
        {"norm.bias", c.w.ln_b, g.ln_b, 4, 0.5},
        {"fc1.weight", c.w.fc1_w, g.fc1_w, 20, 0.5},
        {"fc1.bias", c.w.fc1_b, g.fc1_b, 5, 0.5},
        {"fc2.weight", c.w.fc2_w, g.fc2_w, 5, 0.5},
        {"fc2.bias", c.w.fc2_b, g.fc2_b, 1, 0.5},
    };
    check_grads("head + loss", cases, sizeof cases / sizeof cases[0], head_loss, &c);
    arena_free(&a);
}

typedef struct {
    float z[5], y[5], w[5];
} bce_ctx;

static double bce_loss(void *p)
{
    bce_ctx *c = p;
    return ao_bce_loss(c->z, c->y, c->w, 5, 4.0);
}

static void test_bce_values(void **state)
{
    (void)state;
    bce_ctx c = {{0.0f, 10.0f, -30.0f, 30.0f, 0.7f},
                 {0.5f, 1.0f, 1.0f, 0.0f, 0.2f},
                 {1.0f, 2.0f, 1.0f, 1.0f, 0.5f}};
    /* per token w * (max(z,0) - z y + log(1 + exp(-|z|))), large |z| without overflow */
    double terms[5];
    for (int i = 0; i < 5; i++) {
        const double z = c.z[i], y = c.y[i];
        terms[i] = c.w[i] * (fmax(z, 0) - z * y + log1p(exp(-fabs(z))));
    }
    assert_true(fabs(terms[0] - log(2.0)) < 1e-15);
    assert_true(fabs(terms[2] - 30.0) < 1e-12); /* no overflow at large |z| */
    assert_true(fabs(terms[3] - 30.0) < 1e-12);
    double want = 0;
    for (int i = 0; i < 5; i++) {
        want += terms[i];
        assert_true(fabs(ao_bce_loss(&c.z[i], &c.y[i], &c.w[i], 1, 1.0) - terms[i]) <
                    1e-12 * (1 + terms[i]));
    }
    assert_true(fabs(bce_loss(&c) - want / 4.0) < 1e-12);

    float dz[5];
    ao_bce_loss_backward(dz, c.z, c.y, c.w, 5, 4.0);
    assert_true(fabs(dz[0]) < 1e-9);                /* sigmoid(0) = 0.5 = y */
    assert_true(fabs(dz[2] - (-1.0 / 4.0)) < 1e-6); /* sigmoid(-30) ~ 0 */
    assert_true(fabs(dz[3] - (1.0 / 4.0)) < 1e-6);  /* sigmoid(30) ~ 1 */
    const double sig = 1.0 / (1.0 + exp(-(double)c.z[4]));
    assert_true(fabs(dz[4] - 0.5 * (sig - c.y[4]) / 4.0) < 1e-8);
    /* FD on the moderate logits (the saturated ones have near-zero curvature
     * but also a gradient FD resolves) */
    const grad_case g[] = {{"z", c.z, dz, 5, 1}};
    check_grads("bce", g, 1, bce_loss, &c);
}

/* ---- optimizer pieces -------------------------------------------------------------- */

/* torch.optim.AdamW's single-tensor update written out in double. */
static void adamw_double(double *p, double g, double *m, double *v, double lr, double b1, double b2,
                         double eps, double wd, int t)
{
    *p *= 1 - lr * wd;
    *m = b1 * *m + (1 - b1) * g;
    *v = b2 * *v + (1 - b2) * g * g;
    const double mhat = *m / (1 - pow(b1, t)), vhat = *v / (1 - pow(b2, t));
    *p -= lr * mhat / (sqrt(vhat) + eps);
}

static void test_adamw(void **state)
{
    (void)state;
    const ao_adamw_hparams h = {
        .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f};
    /* step 1 by hand: p = 1, g = 0.5, lr = 0.1:
     * p = 0.999; m = 0.05; v = 0.00025; m_hat = 0.5; sqrt(v_hat) = 0.5;
     * p = 0.999 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.899 */
    float p = 1.0f, g = 0.5f, m = 0.0f, v = 0.0f;
    ao_adamw_step(&p, &g, &m, &v, 1, &h, 0.1f, 1, 1.0f);
    assert_true(fabs(p - 0.899) < 1e-6);
    assert_true(fabs(m - 0.05) < 1e-7);
    assert_true(fabs(v - 0.00025) < 1e-8); /* 1 - 0.999f = 0.00099998... */

    /* a few steps of a vector against the double formula */
    enum { N = 7 };
    float pf[N], mf[N] = {0}, vf[N] = {0}, gf[N];
    double pd[N], md[N] = {0}, vd[N] = {0};
    for (int i = 0; i < N; i++) pf[i] = (float)(pd[i] = 0.3 * i - 1.0);
    for (int t = 1; t <= 5; t++) {
        for (int i = 0; i < N; i++) gf[i] = (float)(0.1 * ((i * 7 + t * 3) % 5) - 0.2);
        ao_adamw_step(pf, gf, mf, vf, N, &h, 0.01f, t, 1.0f);
        for (int i = 0; i < N; i++)
            adamw_double(&pd[i], gf[i], &md[i], &vd[i], 0.01f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
    }
    for (int i = 0; i < N; i++) assert_true(fabs(pf[i] - pd[i]) < 1e-5);

    /* grad_scale folds unscaling and clipping in: g * s == (g s) * 1 */
    float p1 = 0.2f, m1 = 0, v1 = 0, g1 = 4.0f, p2 = 0.2f, m2 = 0, v2 = 0, g2 = 1.0f;
    ao_adamw_step(&p1, &g1, &m1, &v1, 1, &h, 0.05f, 1, 0.25f);
    ao_adamw_step(&p2, &g2, &m2, &v2, 1, &h, 0.05f, 1, 1.0f);
    assert_true(p1 == p2 && m1 == m2 && v1 == v2);

    /* zero gradient: only the decoupled decay acts */
    float p3 = 2.0f, m3 = 0, v3 = 0, g3 = 0;
    ao_adamw_step(&p3, &g3, &m3, &v3, 1, &h, 0.1f, 1, 1.0f);
    assert_true(fabs(p3 - 2.0 * (1 - 0.1 * 0.01)) < 1e-7);
}

static void test_lr_schedule(void **state)
{
    (void)state;
    /* warm-up 10, total 110, base 1 */
    assert_true(ao_lr_at(1.0f, 0, 10, 110) == 0.0f);
    assert_true(fabs(ao_lr_at(1.0f, 5, 10, 110) - 0.5) < 1e-7);
    assert_true(ao_lr_at(1.0f, 10, 10, 110) == 1.0f);
    assert_true(fabs(ao_lr_at(1.0f, 60, 10, 110) - 0.5) < 1e-7);
    assert_true(fabs(ao_lr_at(2.0f, 85, 10, 110) - 0.5) < 1e-7);
    assert_true(ao_lr_at(1.0f, 110, 10, 110) == 0.0f);
    assert_true(ao_lr_at(1.0f, 500, 10, 110) == 0.0f);
    /* no warm-up: starts at base and decays */
    assert_true(ao_lr_at(3e-4f, 0, 0, 100) == 3e-4f);
    assert_true(fabs(ao_lr_at(1.0f, 25, 0, 100) - 0.75) < 1e-7);
    /* no decay */
    assert_true(ao_lr_at(1.0f, 1000, 10, 0) == 1.0f);
    assert_true(fabs(ao_lr_at(1.0f, 4, 10, 0) - 0.4) < 1e-7);
    /* monotone up then down */
    float prev = -1;
    for (int64_t s = 0; s <= 20; s++) {
        const float lr = ao_lr_at(1.0f, s, 20, 40);
        assert_true(lr > prev);
        prev = lr;
    }
    for (int64_t s = 21; s <= 40; s++) {
        const float lr = ao_lr_at(1.0f, s, 20, 40);
        assert_true(lr < prev);
        prev = lr;
    }
}

static void test_clipping(void **state)
{
    (void)state;
    const float shard_a[] = {3.0f, 0.0f}, shard_b[] = {0.0f, 4.0f};
    /* the global norm is over all shards: 5 */
    const double sq = ao_sum_squares(shard_a, 2) + ao_sum_squares(shard_b, 2);
    assert_true(sq == 25.0);
    assert_true(fabs(ao_clip_coef(sq, 1.0f) - 1.0 / (5.0 + 1e-6)) < 1e-7);
    assert_true(ao_clip_coef(sq, 10.0f) == 1.0f); /* never scales up */
    assert_true(ao_clip_coef(sq, 0.0f) == 1.0f);  /* disabled */
    assert_true(ao_clip_coef(0.0, 1.0f) == 1.0f);
    /* a local-shard norm would have clipped differently: 3 vs 5 */
    assert_true(ao_clip_coef(ao_sum_squares(shard_a, 2), 1.0f) > ao_clip_coef(sq, 1.0f));
}

static void test_loss_scaler(void **state)
{
    (void)state;
    ao_loss_scaler s;
    ao_loss_scaler_init(&s, 65536.0f);
    assert_true(s.scale == 65536.0f);
    for (int i = 0; i < 1999; i++) assert_int_equal(ao_loss_scaler_update(&s, 0), 1);
    assert_true(s.scale == 65536.0f);
    assert_int_equal(ao_loss_scaler_update(&s, 0), 1); /* the 2000th good step */
    assert_true(s.scale == 131072.0f);
    assert_int_equal(s.good_steps, 0);
    for (int i = 0; i < 5; i++) ao_loss_scaler_update(&s, 0);
    assert_int_equal(ao_loss_scaler_update(&s, 1), 0); /* overflow: skip, halve, restart */
    assert_true(s.scale == 65536.0f);
    assert_int_equal(s.good_steps, 0);
    assert_int_equal(ao_loss_scaler_update(&s, 1), 0);
    assert_true(s.scale == 32768.0f);
    for (int i = 0; i < 1999; i++) ao_loss_scaler_update(&s, 0);
    assert_true(s.scale == 32768.0f); /* the count restarted at the overflow */
    ao_loss_scaler_update(&s, 0);
    assert_true(s.scale == 65536.0f);
    /* growth never overflows the scale itself */
    s.scale = FLT_MAX;
    s.good_steps = s.growth_interval - 1;
    ao_loss_scaler_update(&s, 0);
    assert_true(s.scale == FLT_MAX);

    const float ok[] = {1.0f, -2.0f, 0.0f};
    const float bad_inf[] = {1.0f, INFINITY}, bad_nan[] = {NAN, 0.0f};
    assert_int_equal(ao_has_nonfinite(ok, 3), 0);
    assert_int_equal(ao_has_nonfinite(bad_inf, 2), 1);
    assert_int_equal(ao_has_nonfinite(bad_nan, 2), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_embedding_bag),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_dropout_independent_of_partition),
        cmocka_unit_test(test_encoder_layer),
        cmocka_unit_test(test_input_stage),
        cmocka_unit_test(test_head_and_loss),
        cmocka_unit_test(test_bce_values),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_lr_schedule),
        cmocka_unit_test(test_clipping),
        cmocka_unit_test(test_loss_scaler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
