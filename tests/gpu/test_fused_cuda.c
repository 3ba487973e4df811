/* Each fused launcher of model/kernels_cuda.h against the chain of plain
 * launchers it replaces, on the same device and data: the outputs must be
 * the same bytes, for every output type (report_bits). The plain launchers
 * are held to the C reference by test_kernels_cuda.c. Fresh random data
 * each run (kernels_check.h). */
#include "check.h"
#include "runtime/device.h"

#ifdef AORTA_HAVE_CUDA

#include "kernels_check.h"
#include "model/kernels_cuda.h"
#include "model/ops_ref.h"

static const ao_dtype out_types[3] = {AO_F32, AO_BF16, AO_F16};

static size_t dtype_bytes(ao_dtype t)
{
    return t == AO_F32 ? 4 : 2;
}

/* The fraction of zeros in out (as type t): about p when dropout ran, so a
 * test cannot pass with dropout silently skipped on both sides. */
static void check_dropped(const char *kernel, const void *d_out, ao_dtype t, size_t n, float p)
{
    float *as_f32 = ao_dev_alloc(dev, 4 * n);
    K(ao_cuda_cast(as_f32, AO_F32, d_out, t, n, cs()));
    float *h = download_floats(as_f32, n);
    size_t zeros = 0;
    for (size_t i = 0; i < n; i++) zeros += h[i] == 0.0f;
    const double frac = (double)zeros / (double)n;
    const int ok = p > 0 ? fabs(frac - p) < 0.05 : frac < 0.01;
    CHECK(ok, "%s: fraction of zeros %.3f with p=%.2f", kernel, frac, p);
    free(h);
    ao_dev_free(dev, as_f32);
}

static ao_cuda_dropout_key fused_key(float p, int heads, uint32_t site)
{
    const ao_cuda_dropout_key k = {p, 0x5eedull ^ rng_state, 77, 5, site, 31337, heads};
    return k;
}

/* d16 = host's n floats in type t (16-bit), through d_tmp (n floats). */
static void upload_half(void *d16, ao_dtype t, const float *host, float *d_tmp, size_t n)
{
    ao_copy_async(dev, d_tmp, host, 4 * n, AO_H2D, stream);
    K(ao_cuda_cast(d16, t, d_tmp, AO_F32, n, cs()));
}

/* The head's fc2 input gradient through GELU, fused, against the k = 1
 * product rounded to T (formed here from the same T values: exact in float)
 * then ao_cuda_dropout_gelu_backward at p = 0: the same bits. */
static void test_outer_gelu_backward(int rows, int cols)
{
    const size_t n = (size_t)rows * (size_t)cols;
    const ao_cuda_dropout_key key = fused_key(0.0f, 0, AO_DROP_FFN_HIDDEN);
    char shape[64];
    snprintf(shape, sizeof shape, "%d x %d", rows, cols);
    float *u = random_floats((size_t)rows, -1, 1), *v = random_floats((size_t)cols, -0.5f, 0.5f);
    float *h = random_floats(n, -6, 6), *prod = malloc(4 * n);
    float *d_u = upload(u, 4 * (size_t)rows), *d_tmp = ao_dev_alloc(dev, 4 * n);
    char *d_v = ao_dev_alloc(dev, 2 * (size_t)cols), *d_h = ao_dev_alloc(dev, 2 * n);
    char *d_ref = ao_dev_alloc(dev, 2 * n), *d_got = ao_dev_alloc(dev, 2 * n);
    const ao_dtype halves[2] = {AO_BF16, AO_F16};
    for (int t = 0; t < 2; t++) {
        const ao_dtype ht = halves[t];
        upload_half(d_v, ht, v, d_tmp, (size_t)cols);
        upload_half(d_h, ht, h, d_tmp, n);
        /* u and v as T, widened: their products are exact in float */
        char *d_u16 = ao_dev_alloc(dev, 2 * (size_t)rows);
        K(ao_cuda_cast(d_u16, ht, d_u, AO_F32, (size_t)rows, cs()));
        K(ao_cuda_cast(d_tmp, AO_F32, d_u16, ht, (size_t)rows, cs()));
        float *uw = download_floats(d_tmp, (size_t)rows);
        K(ao_cuda_cast(d_tmp, AO_F32, d_v, ht, (size_t)cols, cs()));
        float *vw = download_floats(d_tmp, (size_t)cols);
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) prod[(size_t)i * cols + j] = uw[i] * vw[j];
        upload_half(d_ref, ht, prod, d_tmp, n);
        K(ao_cuda_dropout_gelu_backward(NULL, d_ref, ht, d_ref, d_h, ht, 1, n, &key, NULL, cs()));
        K(ao_cuda_outer_gelu_backward(d_got, ht, d_u, d_v, d_h, rows, cols, cs()));
        char name[64];
        snprintf(name, sizeof name, "outer_gelu_backward %s", ao_dtype_name(ht));
        report_bits(name, shape, d_got, d_ref, 2 * n);
        ao_dev_free(dev, d_u16);
        free(uw), free(vw);
    }
    CHECK(ao_cuda_outer_gelu_backward(d_got, AO_F32, d_u, d_v, d_h, rows, cols, cs()) ==
              cudaErrorInvalidValue,
          "outer_gelu_backward accepted an fp32 output");
    ao_dev_free(dev, d_u), ao_dev_free(dev, d_tmp), ao_dev_free(dev, d_v), ao_dev_free(dev, d_h);
    ao_dev_free(dev, d_ref), ao_dev_free(dev, d_got);
    free(u), free(v), free(h), free(prod);
}

/* in_place: att aliases scores, as attention calls it. */
static void test_softmax_dropout_forward(int batch, int heads, int T, float p, int in_place)
{
    const size_t n = (size_t)batch * heads * T * T;
    const ao_cuda_dropout_key key = fused_key(p, heads, AO_DROP_ATTN_PROBS);
    char shape[96];
    snprintf(shape, sizeof shape, "B=%d H=%d T=%d p=%.2f%s", batch, heads, T, p,
             in_place ? " in place" : "");
    float *scores = random_floats(n, -8, 8);
    float *d_scores = upload(scores, 4 * n), *d_ref_att = upload(scores, 4 * n);
    float *d_att = in_place ? d_scores : ao_dev_alloc(dev, 4 * n);
    float *d_drop = ao_dev_alloc(dev, 4 * n);
    void *d_ref = ao_dev_alloc(dev, 4 * n), *d_out = ao_dev_alloc(dev, 4 * n);
    /* the unfused chain, as attn_forward does it */
    K(ao_cuda_softmax_forward(d_ref_att, d_ref_att, batch * heads * T, T, cs()));
    const float *probs = d_ref_att;
    if (p > 0) {
        K(ao_cuda_dropout(d_drop, d_ref_att, batch, (size_t)T * T, &key, cs()));
        probs = d_drop;
    }
    for (int t = 0; t < 3; t++) {
        const ao_dtype ot = out_types[t];
        if (in_place) ao_copy_async(dev, d_scores, scores, 4 * n, AO_H2D, stream);
        K(ao_cuda_cast(d_ref, ot, probs, AO_F32, n, cs()));
        K(ao_cuda_softmax_dropout_forward(d_att, NULL, d_out, ot, d_scores, AO_F32, batch, heads, T,
                                          &key, NULL, cs()));
        char name[64];
        snprintf(name, sizeof name, "softmax_dropout_fwd %s", ao_dtype_name(ot));
        report_bits(name, shape, d_out, d_ref, n * dtype_bytes(ot));
        report_bits("softmax_dropout_fwd att", shape, d_att, d_ref_att, 4 * n);
        if (t == 1) check_dropped(name, d_out, ot, n, p);
    }
    /* 16-bit scores (as attn_forward's 16-bit modes): the fp32 chain over
     * their widening, then the cast; att not written, the rows' stats kept */
    void *d_s16 = ao_dev_alloc(dev, 2 * n);
    float *d_stats = ao_dev_alloc(dev, 8 * (size_t)batch * heads * T);
    for (int t = 1; t < 3; t++) {
        const ao_dtype ot = out_types[t];
        upload_half(d_s16, ot, scores, d_ref_att, n);
        K(ao_cuda_cast(d_ref_att, AO_F32, d_s16, ot, n, cs()));
        K(ao_cuda_softmax_forward(d_ref_att, d_ref_att, batch * heads * T, T, cs()));
        if (p > 0) K(ao_cuda_dropout(d_drop, d_ref_att, batch, (size_t)T * T, &key, cs()));
        K(ao_cuda_cast(d_ref, ot, p > 0 ? d_drop : d_ref_att, AO_F32, n, cs()));
        K(ao_cuda_softmax_dropout_forward(NULL, d_stats, d_out, ot, d_s16, ot, batch, heads, T,
                                          &key, NULL, cs()));
        char name[64];
        snprintf(name, sizeof name, "softmax_dropout_fwd %s in", ao_dtype_name(ot));
        report_bits(name, shape, d_out, d_ref, n * dtype_bytes(ot));
    }
    const int bad =
        ao_cuda_softmax_dropout_forward(d_att, NULL, d_out, AO_I32, d_scores, AO_F32, batch, heads,
                                        T, &key, NULL, cs()) == cudaErrorInvalidValue;
    CHECK(bad, "softmax_dropout_forward accepted an int32 output");
    const int mixed =
        ao_cuda_softmax_dropout_forward(NULL, d_stats, d_out, AO_BF16, d_s16, AO_F16, batch, heads,
                                        T, &key, NULL, cs()) == cudaErrorInvalidValue;
    CHECK(mixed, "softmax_dropout_forward accepted f16 scores for a bf16 output");
    ao_dev_free(dev, d_scores), ao_dev_free(dev, d_ref_att), ao_dev_free(dev, d_drop);
    ao_dev_free(dev, d_ref), ao_dev_free(dev, d_out), ao_dev_free(dev, d_s16);
    ao_dev_free(dev, d_stats);
    if (!in_place) ao_dev_free(dev, d_att);
    free(scores);
}

static void test_softmax_dropout_backward(int batch, int heads, int T, float p)
{
    const size_t n = (size_t)batch * heads * T * T;
    const ao_cuda_dropout_key key = fused_key(p, heads, AO_DROP_ATTN_PROBS);
    const float scale = 1.0f / sqrtf(64.0f);
    char shape[96];
    snprintf(shape, sizeof shape, "B=%d H=%d T=%d p=%.2f", batch, heads, T, p);
    float *scores = random_floats(n, -8, 8), *dp = random_floats(n, -1, 1);
    float *d_att = upload(scores, 4 * n), *d_dp = upload(dp, 4 * n);
    float *d_tmp = ao_dev_alloc(dev, 4 * n);
    const ao_cuda_softmax_saved stored = {d_att, NULL, AO_F32, NULL};
    void *d_ref = ao_dev_alloc(dev, 4 * n), *d_out = ao_dev_alloc(dev, 4 * n);
    /* the forward's stored mask (kept where T % 4 == 0), on the same scores */
    uint8_t *d_mask = ao_dev_alloc(dev, ao_cuda_dropout_mask_bytes(batch * heads, (size_t)T * T));
    K(ao_cuda_softmax_dropout_forward(d_tmp, NULL, d_ref, AO_F32, d_att, AO_F32, batch, heads, T,
                                      &key, d_mask, cs()));
    K(ao_cuda_softmax_forward(d_att, d_att, batch * heads * T, T, cs()));
    /* the unfused chain, as attn_backward does it (on a copy of dp) */
    ao_copy_async(dev, d_tmp, dp, 4 * n, AO_H2D, stream);
    if (p > 0) K(ao_cuda_dropout(d_tmp, d_tmp, batch, (size_t)T * T, &key, cs()));
    K(ao_cuda_softmax_backward(d_tmp, d_tmp, d_att, scale, batch * heads * T, T, cs()));
    for (int t = 0; t < 3; t++) {
        const ao_dtype ot = out_types[t];
        K(ao_cuda_cast(d_ref, ot, d_tmp, AO_F32, n, cs()));
        K(ao_cuda_softmax_dropout_backward(d_out, ot, d_dp, AO_F32, &stored, scale, batch, heads, T,
                                           &key, NULL, cs()));
        char name[64];
        snprintf(name, sizeof name, "softmax_dropout_bwd %s", ao_dtype_name(ot));
        report_bits(name, shape, d_out, d_ref, n * dtype_bytes(ot));
    }
    float *dp_after = download_floats(d_dp, n);
    CHECK(memcmp(dp_after, dp, 4 * n) == 0, "softmax_dropout_backward modified dp (%s)", shape);
    /* a 16-bit dP, into its own buffer (as attn_backward runs it): the fp32
     * chain over its widening, then the cast; fp16 from the stored mask */
    for (int t = 1; t < 3; t++) {
        const ao_dtype ot = out_types[t];
        K(ao_cuda_cast(d_out, ot, d_dp, AO_F32, n, cs()));
        K(ao_cuda_cast(d_tmp, AO_F32, d_out, ot, n, cs()));
        if (p > 0) K(ao_cuda_dropout(d_tmp, d_tmp, batch, (size_t)T * T, &key, cs()));
        K(ao_cuda_softmax_backward(d_tmp, d_tmp, d_att, scale, batch * heads * T, T, cs()));
        K(ao_cuda_cast(d_ref, ot, d_tmp, AO_F32, n, cs()));
        K(ao_cuda_softmax_dropout_backward(d_out, ot, d_out, ot, &stored, scale, batch, heads, T,
                                           &key, t == 2 ? d_mask : NULL, cs()));
        char name[64];
        snprintf(name, sizeof name, "softmax_dropout_bwd %s in%s", ao_dtype_name(ot),
                 t == 2 ? ", mask" : "");
        report_bits(name, shape, d_out, d_ref, n * dtype_bytes(ot));
    }
    /* the probabilities computed again from 16-bit scores and the forward's
     * stats: the chain over the probabilities the forward computed from
     * those scores, stored as floats (16-bit dP, into its own buffer) */
    void *d_s16 = ao_dev_alloc(dev, 2 * n);
    float *d_stats = ao_dev_alloc(dev, 8 * (size_t)batch * heads * T);
    for (int t = 1; t < 3; t++) {
        const ao_dtype ot = out_types[t];
        upload_half(d_s16, ot, scores, d_tmp, n);
        K(ao_cuda_softmax_dropout_forward(NULL, d_stats, d_out, ot, d_s16, ot, batch, heads, T,
                                          &key, NULL, cs()));
        K(ao_cuda_cast(d_att, AO_F32, d_s16, ot, n, cs()));
        K(ao_cuda_softmax_forward(d_att, d_att, batch * heads * T, T, cs()));
        K(ao_cuda_cast(d_out, ot, d_dp, AO_F32, n, cs()));
        K(ao_cuda_softmax_dropout_backward(d_ref, ot, d_out, ot, &stored, scale, batch, heads, T,
                                           &key, NULL, cs()));
        const ao_cuda_softmax_saved again = {NULL, d_s16, ot, d_stats};
        K(ao_cuda_softmax_dropout_backward(d_out, ot, d_out, ot, &again, scale, batch, heads, T,
                                           &key, NULL, cs()));
        char name[64];
        snprintf(name, sizeof name, "softmax_dropout_bwd %s recomputed", ao_dtype_name(ot));
        report_bits(name, shape, d_out, d_ref, n * dtype_bytes(ot));
    }
    ao_dev_free(dev, d_s16), ao_dev_free(dev, d_stats);
    const int bad =
        ao_cuda_softmax_dropout_backward(d_out, AO_I32, d_dp, AO_F32, &stored, scale, batch, heads,
                                         T, &key, NULL, cs()) == cudaErrorInvalidValue;
    CHECK(bad, "softmax_dropout_backward accepted an int32 output");
    const int mixed =
        ao_cuda_softmax_dropout_backward(d_out, AO_BF16, d_dp, AO_F16, &stored, scale, batch, heads,
                                         T, &key, NULL, cs()) == cudaErrorInvalidValue;
    CHECK(mixed, "softmax_dropout_backward accepted an f16 dP for a bf16 output");
    ao_dev_free(dev, d_mask);
    ao_dev_free(dev, d_att), ao_dev_free(dev, d_dp), ao_dev_free(dev, d_tmp);
    ao_dev_free(dev, d_ref), ao_dev_free(dev, d_out);
    free(scores), free(dp), free(dp_after);
}

/* dropout + residual add (+ 16-bit copy) against ao_cuda_dropout, ao_cuda_add
 * and ao_cuda_cast: with and without the residual, in place (y = x) and not.
 * offset: x and the outputs start that many elements into their buffers (1:
 * misaligned, the scalar path). */
static void test_dropout_residual(float p, size_t per_row, size_t offset)
{
    const int batch = 3;
    const size_t n = (size_t)batch * per_row;
    const ao_cuda_dropout_key key = fused_key(p, 0, AO_DROP_FFN_OUT);
    char shape[96];
    snprintf(shape, sizeof shape, "p=%.2f %d x %zu +%zu", p, batch, per_row, offset);
    float *x = random_floats(n + offset, -2, 2), *r = random_floats(n + offset, -2, 2);
    float *d_x = upload(x, 4 * (n + offset)), *d_r = upload(r, 4 * (n + offset));
    float *d_ref = ao_dev_alloc(dev, 4 * n), *d_y = ao_dev_alloc(dev, 4 * (n + offset));
    char *d_ref16 = ao_dev_alloc(dev, 2 * n), *d_y16 = ao_dev_alloc(dev, 2 * (n + offset));
    for (int with_res = 0; with_res < 2; with_res++) {
        K(ao_cuda_dropout(d_ref, d_x + offset, batch, per_row, &key, cs()));
        if (with_res) K(ao_cuda_add(d_ref, d_ref, d_r + offset, n, cs()));
        for (int t = 0; t < 2; t++) {
            const ao_dtype ht = t ? AO_F16 : AO_BF16;
            K(ao_cuda_cast(d_ref16, ht, d_ref, AO_F32, n, cs()));
            /* in place on a copy of x, as the model's forward does */
            ao_copy_async(dev, d_y + offset, d_x + offset, 4 * n, AO_D2D, stream);
            K(ao_cuda_dropout_residual(d_y + offset, t ? d_y16 + 2 * offset : NULL, ht,
                                       d_y + offset, with_res ? d_r + offset : NULL, batch, per_row,
                                       &key, cs()));
            char name[64];
            snprintf(name, sizeof name, "dropout_residual%s%s", with_res ? " +res" : "",
                     t ? " +f16" : "");
            report_bits(name, shape, d_y + offset, d_ref, 4 * n);
            if (t) report_bits(name, shape, d_y16 + 2 * offset, d_ref16, 2 * n);
            if (t == 0) { /* out of place, with the bf16 copy */
                K(ao_cuda_dropout_residual(d_y + offset, d_y16 + 2 * offset, ht, d_x + offset,
                                           with_res ? d_r + offset : NULL, batch, per_row, &key,
                                           cs()));
                report_bits(name, shape, d_y + offset, d_ref, 4 * n);
                report_bits(name, shape, d_y16 + 2 * offset, d_ref16, 2 * n);
            }
        }
    }
    const int bad = ao_cuda_dropout_residual(d_y, d_y16, AO_F32, d_x, NULL, batch, per_row, &key,
                                             cs()) == cudaErrorInvalidValue;
    CHECK(bad, "dropout_residual accepted an fp32 16-bit copy");
    ao_dev_free(dev, d_x), ao_dev_free(dev, d_r), ao_dev_free(dev, d_ref), ao_dev_free(dev, d_y);
    ao_dev_free(dev, d_ref16), ao_dev_free(dev, d_y16);
    free(x), free(r);
}

/* Dropout, residual and LayerNorm forward in one pass against
 * ao_cuda_dropout_residual then ao_cuda_layernorm_forward: r (in place over
 * x, as the model calls it), y, y16, mean and rstd the same bytes; c = 1001
 * takes the two-call path. */
/* What both fused-LayerNorm tests take: 3 samples of 5 tokens of c floats,
 * x in [-2, 2] and a second operand (the residual, or dy) in [-1, 1], and
 * the LayerNorm's parameters, on the host and the device; the case's name. */
typedef struct {
    int batch, tokens, n;
    size_t nc;
    char shape[96];
    float *x, *o, *g, *b;
    float *d_x, *d_o, *d_g, *d_b;
} ln_rows;

static ln_rows ln_rows_make(float p, int c)
{
    ln_rows t = {.batch = 3, .tokens = 5, .n = 15};
    t.nc = (size_t)t.n * (size_t)c;
    snprintf(t.shape, sizeof t.shape, "p=%.2f %d x %d", p, t.n, c);
    t.x = random_floats(t.nc, -2, 2), t.o = random_floats(t.nc, -1, 1);
    t.g = random_floats((size_t)c, 0.5f, 1.5f), t.b = random_floats((size_t)c, -1, 1);
    t.d_x = upload(t.x, 4 * t.nc), t.d_o = upload(t.o, 4 * t.nc);
    t.d_g = upload(t.g, 4 * (size_t)c), t.d_b = upload(t.b, 4 * (size_t)c);
    return t;
}

static void ln_rows_free(ln_rows *t)
{
    ao_dev_free(dev, t->d_x), ao_dev_free(dev, t->d_o);
    ao_dev_free(dev, t->d_g), ao_dev_free(dev, t->d_b);
    free(t->x), free(t->o), free(t->g), free(t->b);
}

static void test_dropout_residual_layernorm(float p, int c)
{
    ln_rows t = ln_rows_make(p, c);
    const int batch = t.batch, tokens = t.tokens, n = t.n;
    const size_t nc = t.nc;
    const char *shape = t.shape;
    const ao_cuda_dropout_key key = fused_key(p, 0, AO_DROP_ATTN_OUT);
    float *d_x = t.d_x, *d_res = t.d_o, *d_g = t.d_g, *d_b = t.d_b;
    float *d_r[2], *d_y[2], *d_mean[2], *d_rstd[2];
    char *d_y16[2];
    for (int v = 0; v < 2; v++) {
        d_r[v] = ao_dev_alloc(dev, 4 * nc), d_y[v] = ao_dev_alloc(dev, 4 * nc);
        d_mean[v] = ao_dev_alloc(dev, 4 * (size_t)n), d_rstd[v] = ao_dev_alloc(dev, 4 * (size_t)n);
        d_y16[v] = ao_dev_alloc(dev, 2 * nc);
    }
    char *d_x16 = ao_dev_alloc(dev, 2 * nc);
    for (int k = 0; k < 4; k++) {
        /* x in fp32 (in place: r aliases it), then x as the 16-bit output of
         * a branch GEMM, against the fp32 chain on those values widened */
        const ao_dtype ht = k % 2 ? AO_F16 : AO_BF16, xt = k < 2 ? AO_F32 : ht;
        const float *x_ref = d_x;
        if (xt != AO_F32) {
            K(ao_cuda_cast(d_x16, xt, d_x, AO_F32, nc, cs()));
            K(ao_cuda_cast(d_y[0], AO_F32, d_x16, xt, nc, cs()));
            x_ref = d_y[0]; /* read before the LayerNorm below writes y */
        }
        K(ao_cuda_dropout_residual(d_r[0], NULL, AO_F32, x_ref, d_res, batch,
                                   (size_t)tokens * (size_t)c, &key, cs()));
        K(ao_cuda_layernorm_forward(d_y[0], d_y16[0], ht, d_mean[0], d_rstd[0], d_r[0], d_g, d_b, n,
                                    c, cs()));
        const void *x_in = d_x16;
        if (xt == AO_F32) {
            ao_copy_async(dev, d_r[1], d_x, 4 * nc, AO_D2D, stream);
            x_in = d_r[1];
        }
        K(ao_cuda_dropout_residual_layernorm(d_r[1], d_y[1], d_y16[1], ht, d_mean[1], d_rstd[1],
                                             x_in, xt, d_res, d_g, d_b, n, c, batch, &key, cs()));
        char name[64];
        snprintf(name, sizeof name, "dropout_residual_layernorm %s, x %s", ao_dtype_name(ht),
                 ao_dtype_name(xt));
        report_bits(name, shape, d_r[1], d_r[0], 4 * nc);
        report_bits(name, shape, d_y[1], d_y[0], 4 * nc);
        report_bits(name, shape, d_y16[1], d_y16[0], 2 * nc);
        report_bits(name, shape, d_mean[1], d_mean[0], 4 * (size_t)n);
        report_bits(name, shape, d_rstd[1], d_rstd[0], 4 * (size_t)n);
    }
    const int bad = ao_cuda_dropout_residual_layernorm(d_r[1], d_y[1], NULL, AO_F32, d_mean[1],
                                                       d_rstd[1], d_x, AO_F32, d_res, d_g, d_b, n,
                                                       c, 4, &key, cs()) == cudaErrorInvalidValue;
    CHECK(bad, "dropout_residual_layernorm accepted rows that are not whole samples");
    const int bad_type = ao_cuda_dropout_residual_layernorm(
                             d_r[1], d_y[1], NULL, AO_F32, d_mean[1], d_rstd[1], d_x, AO_I32, d_res,
                             d_g, d_b, n, c, batch, &key, cs()) == cudaErrorInvalidValue;
    CHECK(bad_type, "dropout_residual_layernorm accepted an int32 x");
    ao_dev_free(dev, d_x16);
    for (int v = 0; v < 2; v++) {
        ao_dev_free(dev, d_r[v]), ao_dev_free(dev, d_y[v]), ao_dev_free(dev, d_y16[v]);
        ao_dev_free(dev, d_mean[v]), ao_dev_free(dev, d_rstd[v]);
    }
    ln_rows_free(&t);
}

/* LayerNorm backward + the dropout of its dx (+ 16-bit copy) against
 * ao_cuda_layernorm_backward then ao_cuda_dropout_residual: dx, dgamma,
 * dbeta, y and y16 the same bytes; c = 1001 takes the unfused path. */
static void test_layernorm_backward_dropout(float p, int c)
{
    ln_rows r = ln_rows_make(p, c);
    const int batch = r.batch, tokens = r.tokens, n = r.n;
    const size_t nc = r.nc;
    const char *shape = r.shape;
    const ao_cuda_dropout_key key = fused_key(p, 0, AO_DROP_FFN_OUT);
    float *d_x = r.d_x, *d_dy = r.d_o, *d_g = r.d_g, *d_b = r.d_b;
    float *d_ln = ao_dev_alloc(dev, 4 * nc);
    float *d_mean = ao_dev_alloc(dev, 4 * (size_t)n), *d_rstd = ao_dev_alloc(dev, 4 * (size_t)n);
    K(ao_cuda_layernorm_forward(d_ln, NULL, AO_F32, d_mean, d_rstd, d_x, d_g, d_b, n, c, cs()));
    float *d_dx[2], *d_dg[2], *d_db[2], *d_y[2];
    char *d_y16[2];
    for (int v = 0; v < 2; v++) {
        d_dx[v] = ao_dev_alloc(dev, 4 * nc), d_y[v] = ao_dev_alloc(dev, 4 * nc);
        d_dg[v] = ao_dev_alloc(dev, 4 * (size_t)c), d_db[v] = ao_dev_alloc(dev, 4 * (size_t)c);
        d_y16[v] = ao_dev_alloc(dev, 2 * nc);
    }
    for (int t = 0; t < 2; t++) {
        const ao_dtype ht = t ? AO_F16 : AO_BF16;
        for (int v = 0; v < 2; v++) {
            ao_memset_async(dev, d_dg[v], 0, 4 * (size_t)c, stream);
            ao_memset_async(dev, d_db[v], 0, 4 * (size_t)c, stream);
        }
        K(ao_cuda_layernorm_backward(d_dx[0], d_dg[0], d_db[0], d_dy, d_x, d_mean, d_rstd, d_g, n,
                                     c, cs()));
        K(ao_cuda_dropout_residual(d_y[0], d_y16[0], ht, d_dx[0], NULL, batch,
                                   (size_t)tokens * (size_t)c, &key, cs()));
        K(ao_cuda_layernorm_backward_dropout(d_dx[1], d_dg[1], d_db[1], d_dy, d_x, d_mean, d_rstd,
                                             d_g, n, c, d_y[1], d_y16[1], ht, batch, &key, cs()));
        char name[64];
        snprintf(name, sizeof name, "layernorm_backward_dropout %s", ao_dtype_name(ht));
        report_bits(name, shape, d_dx[1], d_dx[0], 4 * nc);
        report_bits(name, shape, d_dg[1], d_dg[0], 4 * (size_t)c);
        report_bits(name, shape, d_db[1], d_db[0], 4 * (size_t)c);
        report_bits(name, shape, d_y[1], d_y[0], 4 * nc);
        report_bits(name, shape, d_y16[1], d_y16[0], 2 * nc);
        if (t == 0) check_dropped(name, d_y[1], AO_F32, nc, p);
        /* only the 16-bit copy (a 16-bit mode's branch gradient) */
        ao_memset_async(dev, d_y16[1], 0, 2 * nc, stream);
        for (int v = 0; v < 2; v++) {
            ao_memset_async(dev, d_dg[v], 0, 4 * (size_t)c, stream);
            ao_memset_async(dev, d_db[v], 0, 4 * (size_t)c, stream);
        }
        K(ao_cuda_layernorm_backward(d_dx[0], d_dg[0], d_db[0], d_dy, d_x, d_mean, d_rstd, d_g, n,
                                     c, cs()));
        K(ao_cuda_layernorm_backward_dropout(d_dx[1], d_dg[1], d_db[1], d_dy, d_x, d_mean, d_rstd,
                                             d_g, n, c, NULL, d_y16[1], ht, batch, &key, cs()));
        snprintf(name, sizeof name, "layernorm_backward_dropout %s only", ao_dtype_name(ht));
        report_bits(name, shape, d_dx[1], d_dx[0], 4 * nc);
        report_bits(name, shape, d_dg[1], d_dg[0], 4 * (size_t)c);
        report_bits(name, shape, d_y16[1], d_y16[0], 2 * nc);
    }
    const int bad = ao_cuda_layernorm_backward_dropout(d_dx[1], d_dg[1], d_db[1], d_dy, d_x, d_mean,
                                                       d_rstd, d_g, n, c, d_y[1], NULL, AO_F32, 4,
                                                       &key, cs()) == cudaErrorInvalidValue;
    (void)cudaGetLastError();
    CHECK(bad, "layernorm_backward_dropout accepted rows that are not whole samples");
    for (int v = 0; v < 2; v++) {
        ao_dev_free(dev, d_dx[v]), ao_dev_free(dev, d_y[v]), ao_dev_free(dev, d_y16[v]);
        ao_dev_free(dev, d_dg[v]), ao_dev_free(dev, d_db[v]);
    }
    ao_dev_free(dev, d_ln), ao_dev_free(dev, d_mean), ao_dev_free(dev, d_rstd);
    ln_rows_free(&r);
}

static void test_gelu_dropout(float p, size_t per_row, size_t offset)
{
    const int batch = 5;
    const size_t n = (size_t)batch * per_row;
    const ao_cuda_dropout_key key = fused_key(p, 0, AO_DROP_FFN_HIDDEN);
    char shape[96];
    snprintf(shape, sizeof shape, "p=%.2f %d x %zu +%zu", p, batch, per_row, offset);
    float *h = random_floats(n + offset, -6, 6);
    float *d_h = upload(h, 4 * (n + offset)), *d_tmp = ao_dev_alloc(dev, 4 * n);
    char *d_ref = ao_dev_alloc(dev, 4 * (n + offset)), *d_out = ao_dev_alloc(dev, 4 * (n + offset));
    /* the unfused chain, as encoder_forward does it */
    K(ao_cuda_gelu_forward(d_tmp, d_h + offset, n, cs()));
    K(ao_cuda_dropout(d_tmp, d_tmp, batch, per_row, &key, cs()));
    for (int t = 0; t < 3; t++) {
        const ao_dtype ot = out_types[t];
        const size_t eb = dtype_bytes(ot);
        K(ao_cuda_cast(d_ref, ot, d_tmp, AO_F32, n, cs()));
        K(ao_cuda_gelu_dropout(d_out + offset * eb, ot, d_h + offset, AO_F32, batch, per_row, &key,
                               NULL, NULL, cs()));
        char name[64];
        snprintf(name, sizeof name, "gelu_dropout %s", ao_dtype_name(ot));
        report_bits(name, shape, d_out + offset * eb, d_ref, n * eb);
    }
    /* the mask drawn alone (ao_model_predraw) is the bytes the pass stores,
     * and the pass that reads it gives the bits of the one that draws */
    const size_t mbytes = ao_cuda_dropout_mask_bytes(batch, per_row);
    uint8_t *d_mask = ao_dev_alloc(dev, mbytes), *d_pre = ao_dev_alloc(dev, mbytes);
    K(ao_cuda_gelu_dropout(d_out + offset * 2, AO_BF16, d_h + offset, AO_F32, batch, per_row, &key,
                           NULL, d_mask, cs()));
    const ao_cuda_mask_job job = {d_pre, batch, per_row, key};
    const int drawable = p > 0 && per_row % 128 == 0 && offset == 0;
    if (drawable) {
        K(ao_cuda_draw_masks(&job, 1, 1, cs()));
        report_bits("draw_masks alone", shape, d_pre, d_mask, mbytes);
    } else if (p > 0 && per_row % 128 != 0) {
        CHECK(ao_cuda_draw_masks(&job, 1, 0, cs()) == cudaErrorInvalidValue,
              "draw_masks accepted rows of %zu elements", per_row);
    }
    K(ao_cuda_cast(d_ref, AO_BF16, d_tmp, AO_F32, n, cs()));
    K(ao_cuda_gelu_dropout(d_out + offset * 2, AO_BF16, d_h + offset, AO_F32, batch, per_row, &key,
                           drawable ? d_pre : NULL, d_mask, cs()));
    report_bits("gelu_dropout mask in", shape, d_out + offset * 2, d_ref, n * 2);
    ao_dev_free(dev, d_mask), ao_dev_free(dev, d_pre);
    float *h_after = download_floats(d_h, n + offset);
    CHECK(memcmp(h_after, h, 4 * (n + offset)) == 0, "gelu_dropout modified h (%s)", shape);
    const int bad = ao_cuda_gelu_dropout(d_out, AO_I32, d_h, AO_F32, batch, per_row, &key, NULL,
                                         NULL, cs()) == cudaErrorInvalidValue;
    CHECK(bad, "gelu_dropout accepted an int32 output");
    ao_dev_free(dev, d_h), ao_dev_free(dev, d_tmp), ao_dev_free(dev, d_ref);
    ao_dev_free(dev, d_out);
    free(h), free(h_after);
}

/* dx in place over a copy of dy, as encoder_backward calls it; last with
 * the mask the forward (ao_cuda_gelu_dropout) stored instead of drawn. */
static void test_dropout_gelu_backward(float p, size_t per_row, size_t offset)
{
    const int batch = 5;
    const size_t n = (size_t)batch * per_row;
    const ao_cuda_dropout_key key = fused_key(p, 0, AO_DROP_FFN_HIDDEN);
    char shape[96];
    snprintf(shape, sizeof shape, "p=%.2f %d x %zu +%zu", p, batch, per_row, offset);
    float *h = random_floats(n + offset, -6, 6), *dy = random_floats(n + offset, -1, 1);
    float *d_h = upload(h, 4 * (n + offset)), *d_dx = ao_dev_alloc(dev, 4 * (n + offset));
    float *d_tmp = upload(dy + offset, 4 * n);
    char *d_ref16 = ao_dev_alloc(dev, 2 * (n + offset)),
         *d_16 = ao_dev_alloc(dev, 2 * (n + offset));
    K(ao_cuda_dropout(d_tmp, d_tmp, batch, per_row, &key, cs()));
    K(ao_cuda_gelu_backward(d_tmp, d_tmp, d_h + offset, n, cs()));
    uint8_t *d_mask = ao_dev_alloc(dev, ao_cuda_dropout_mask_bytes(batch, per_row));
    K(ao_cuda_gelu_dropout(d_ref16, AO_BF16, d_h + offset, AO_F32, batch, per_row, &key, NULL,
                           d_mask, cs()));
    const ao_dtype halves[2] = {AO_BF16, AO_F16};
    for (int t = 0; t < 5; t++) {
        /* fp32 and a half type, fp32 only, the half type only; both from the
         * stored mask */
        const int with16 = t != 2, with32 = t != 3;
        const ao_dtype ht = halves[t == 1];
        const uint8_t *mask = t == 4 ? d_mask : NULL;
        ao_copy_async(dev, d_dx, dy, 4 * (n + offset), AO_H2D, stream);
        if (!with32) { /* dy in its own buffer: no fp32 output to alias */
            float *d_dy = upload(dy + offset, 4 * n);
            K(ao_cuda_dropout_gelu_backward(NULL, d_16 + 2 * offset, ht, d_dy, d_h + offset, AO_F32,
                                            batch, per_row, &key, mask, cs()));
            ao_stream_sync(stream);
            ao_dev_free(dev, d_dy);
        } else {
            K(ao_cuda_dropout_gelu_backward(d_dx + offset, with16 ? d_16 + 2 * offset : NULL, ht,
                                            d_dx + offset, d_h + offset, AO_F32, batch, per_row,
                                            &key, mask, cs()));
        }
        char name[64];
        snprintf(name, sizeof name, "dropout_gelu_bwd %s%s%s%s", mask ? "mask " : "",
                 with32 ? "f32" : "",
                 with16 && with32 ? "+"
                 : with16         ? ""
                                  : " (no half)",
                 with16 ? ao_dtype_name(ht) : "");
        if (with32) report_bits(name, shape, d_dx + offset, d_tmp, 4 * n);
        if (with16) {
            K(ao_cuda_cast(d_ref16, ht, d_tmp, AO_F32, n, cs()));
            snprintf(name, sizeof name, "dropout_gelu_bwd %s%s", mask ? "mask " : "",
                     ao_dtype_name(ht));
            report_bits(name, shape, d_16 + 2 * offset, d_ref16, 2 * n);
        }
    }
    ao_dev_free(dev, d_mask);
    const int bad =
        ao_cuda_dropout_gelu_backward(d_dx, d_16, AO_F32, d_dx, d_h, AO_F32, batch, per_row, &key,
                                      NULL, cs()) == cudaErrorInvalidValue;
    CHECK(bad, "dropout_gelu_backward accepted an f32 half type");
    const int none =
        ao_cuda_dropout_gelu_backward(NULL, NULL, AO_BF16, d_dx, d_h, AO_F32, batch, per_row, &key,
                                      NULL, cs()) == cudaErrorInvalidValue;
    CHECK(none, "dropout_gelu_backward accepted neither output");
    ao_dev_free(dev, d_h), ao_dev_free(dev, d_dx), ao_dev_free(dev, d_tmp);
    ao_dev_free(dev, d_ref16), ao_dev_free(dev, d_16);
    free(h), free(dy);
}

/* The FFN's 16-bit path: GELU + dropout from a 16-bit h, and its backward
 * from a 16-bit dy and h into dy's own buffer (as encoder_backward runs it):
 * the bits of the fp32 chain over their exact widening, then the cast. */
static void test_ffn_half_inputs(float p, size_t per_row)
{
    const int batch = 3;
    const size_t n = (size_t)batch * per_row;
    const ao_cuda_dropout_key key = fused_key(p, 0, AO_DROP_FFN_HIDDEN);
    char shape[96];
    snprintf(shape, sizeof shape, "p=%.2f %d x %zu", p, batch, per_row);
    float *h = random_floats(n, -6, 6), *dy = random_floats(n, -1, 1);
    float *d_h = upload(h, 4 * n), *d_dy = upload(dy, 4 * n);
    float *d_hw = ao_dev_alloc(dev, 4 * n), *d_dyw = ao_dev_alloc(dev, 4 * n);
    float *d_tmp = ao_dev_alloc(dev, 4 * n);
    char *d_h16 = ao_dev_alloc(dev, 2 * n), *d_dy16 = ao_dev_alloc(dev, 2 * n);
    char *d_ref = ao_dev_alloc(dev, 2 * n), *d_out = ao_dev_alloc(dev, 2 * n);
    uint8_t *d_mask = ao_dev_alloc(dev, ao_cuda_dropout_mask_bytes(batch, per_row));
    for (int t = 1; t < 3; t++) {
        const ao_dtype ht = out_types[t];
        K(ao_cuda_cast(d_h16, ht, d_h, AO_F32, n, cs()));
        K(ao_cuda_cast(d_hw, AO_F32, d_h16, ht, n, cs()));
        K(ao_cuda_cast(d_dy16, ht, d_dy, AO_F32, n, cs()));
        K(ao_cuda_cast(d_dyw, AO_F32, d_dy16, ht, n, cs()));
        char name[64];
        /* forward */
        K(ao_cuda_gelu_forward(d_tmp, d_hw, n, cs()));
        K(ao_cuda_dropout(d_tmp, d_tmp, batch, per_row, &key, cs()));
        K(ao_cuda_cast(d_ref, ht, d_tmp, AO_F32, n, cs()));
        K(ao_cuda_gelu_dropout(d_out, ht, d_h16, ht, batch, per_row, &key, NULL, d_mask, cs()));
        snprintf(name, sizeof name, "gelu_dropout %s in", ao_dtype_name(ht));
        report_bits(name, shape, d_out, d_ref, 2 * n);
        /* with the stored mask (the forward after the draw: its own kernel
         * where per_row % 8 == 0) */
        K(ao_cuda_gelu_dropout(d_out, ht, d_h16, ht, batch, per_row, &key, p > 0 ? d_mask : NULL,
                               NULL, cs()));
        snprintf(name, sizeof name, "gelu_dropout %s in, mask in", ao_dtype_name(ht));
        report_bits(name, shape, d_out, d_ref, 2 * n);
        /* backward, in place over the 16-bit dy */
        K(ao_cuda_dropout(d_tmp, d_dyw, batch, per_row, &key, cs()));
        K(ao_cuda_gelu_backward(d_tmp, d_tmp, d_hw, n, cs()));
        K(ao_cuda_cast(d_ref, ht, d_tmp, AO_F32, n, cs()));
        K(ao_cuda_dropout_gelu_backward(NULL, d_dy16, ht, d_dy16, d_h16, ht, batch, per_row, &key,
                                        p > 0 ? d_mask : NULL, cs()));
        snprintf(name, sizeof name, "dropout_gelu_bwd %s in, mask", ao_dtype_name(ht));
        report_bits(name, shape, d_dy16, d_ref, 2 * n);
        /* again with the bias gradient of [n / cols, cols] rows (from the
         * pass's own launch where cols % 8 == 0 and the mask is read): the
         * same dx and ao_cuda_bias_grad's bits, added to what db held */
        const int cols = per_row % 64 == 0 ? 64 : (int)per_row; /* 384 rows: two chunks */
        float *db0 = random_floats((size_t)cols, -1, 1);
        float *d_db = upload(db0, 4 * (size_t)cols), *d_db_ref = upload(db0, 4 * (size_t)cols);
        K(ao_cuda_bias_grad(d_db_ref, d_ref, ht, (int)(n / (size_t)cols), cols, cs()));
        K(ao_cuda_cast(d_dy16, ht, d_dy, AO_F32, n, cs()));
        K(ao_cuda_dropout_gelu_backward_bias(NULL, d_dy16, ht, d_dy16, d_h16, ht, batch, per_row,
                                             &key, p > 0 ? d_mask : NULL, d_db, cols, cs()));
        snprintf(name, sizeof name, "dropout_gelu_bwd_bias %s, dx", ao_dtype_name(ht));
        report_bits(name, shape, d_dy16, d_ref, 2 * n);
        snprintf(name, sizeof name, "dropout_gelu_bwd_bias %s, db", ao_dtype_name(ht));
        report_bits(name, shape, d_db, d_db_ref, 4 * (size_t)cols);
        CHECK(ao_cuda_dropout_gelu_backward_bias(NULL, d_dy16, ht, d_dy16, d_h16, ht, batch,
                                                 per_row, &key, NULL, d_db, 7,
                                                 cs()) == cudaErrorInvalidValue ||
                  per_row % 7 == 0,
              "dropout_gelu_backward_bias accepted rows of %zu in %d columns", per_row, 7);
        ao_dev_free(dev, d_db), ao_dev_free(dev, d_db_ref);
        free(db0);
    }
    const int bad = ao_cuda_gelu_dropout(d_out, AO_BF16, d_h16, AO_F16, batch, per_row, &key, NULL,
                                         NULL, cs()) == cudaErrorInvalidValue;
    ao_dev_free(dev, d_mask);
    CHECK(bad, "gelu_dropout accepted an f16 h for a bf16 output");
    ao_dev_free(dev, d_h), ao_dev_free(dev, d_dy), ao_dev_free(dev, d_hw), ao_dev_free(dev, d_dyw);
    ao_dev_free(dev, d_tmp), ao_dev_free(dev, d_h16), ao_dev_free(dev, d_dy16);
    ao_dev_free(dev, d_ref), ao_dev_free(dev, d_out);
    free(h), free(dy);
}

/* The forward's mask against ops_ref's attention keying, element by
 * element, in the dropped values and (T % 4 == 0) in the stored mask
 * bytes (kernels_cuda.h's layout). */
static void test_probs_mask(int T)
{
    const int batch = 2, heads = 3;
    const size_t n = (size_t)batch * heads * T * T;
    const ao_cuda_dropout_key key = fused_key(0.5f, heads, AO_DROP_ATTN_PROBS);
    float *scores = random_floats(n, -2, 2), *ref = malloc(4 * n);
    for (size_t r = 0; r < (size_t)batch * heads; r++) {
        const ao_rng_stream s =
            ao_rng_child(ao_dropout_stream(key.seed, key.step, key.layer, key.site,
                                           key.first_sample + r / (size_t)heads),
                         r % (size_t)heads);
        for (size_t e = 0; e < (size_t)T * T; e++)
            ref[r * T * T + e] = ao_dropout_factor(s, e, key.p) == 0.0f ? 0.0f : 1.0f;
    }
    const size_t mbytes = ao_cuda_dropout_mask_bytes(batch * heads, (size_t)T * T);
    float *d_s = upload(scores, 4 * n), *d_out = ao_dev_alloc(dev, 4 * n);
    uint8_t *d_mask = ao_dev_alloc(dev, mbytes);
    ao_memset_async(dev, d_mask, 0, mbytes, stream);
    K(ao_cuda_softmax_dropout_forward(d_s, NULL, d_out, AO_F32, d_s, AO_F32, batch, heads, T, &key,
                                      d_mask, cs()));
    float *got = download_floats(d_out, n);
    unsigned char *mask = download_bytes(d_mask, mbytes);
    size_t diff = 0, mdiff = 0;
    for (size_t i = 0; i < n; i++) diff += (got[i] == 0.0f ? 0.0f : 1.0f) != ref[i];
    if (T % 4 == 0)
        for (size_t i = 0; i < n; i++) mdiff += (float)((mask[i / 4] >> (i % 4)) & 1) != ref[i];
    char shape[32];
    snprintf(shape, sizeof shape, "T=%d", T);
    printf("%s %-28s %-8s %zu of %zu mask bits differ from ops_ref's keying (want 0), %zu in "
           "the stored bytes\n",
           diff || mdiff ? "FAIL" : "PASS", "softmax_dropout_fwd mask", shape, diff, n, mdiff);
    CHECK(diff == 0 && mdiff == 0,
          "softmax_dropout_forward mask %s: %zu elements differ, %zu bytes", shape, diff, mdiff);
    ao_dev_free(dev, d_s), ao_dev_free(dev, d_out), ao_dev_free(dev, d_mask);
    free(scores), free(ref), free(got), free(mask);
}

static void test_fused(void)
{
    const float ps[2] = {0.1f, 0.0f};
    for (int i = 0; i < 2; i++) {
        const float p = ps[i];
        test_softmax_dropout_forward(2, 3, 64, p, 1);   /* 2 float4 per lane */
        test_softmax_dropout_forward(2, 2, 512, p, 1);  /* attention's T = 512 */
        test_softmax_dropout_forward(1, 2, 1024, p, 0); /* 8 float4 per lane */
        test_softmax_dropout_forward(2, 3, 37, p, 1);   /* odd: the scalar kernel */
        test_softmax_dropout_forward(1, 1, 1030, p, 0); /* scalar, rows at base % 4 == 2 */
        test_softmax_dropout_forward(1, 1, 1028, p, 1); /* scalar, float4 mask blocks */
        test_softmax_dropout_backward(2, 3, 64, p);
        test_softmax_dropout_backward(2, 2, 512, p);
        test_softmax_dropout_backward(2, 3, 37, p);
        test_softmax_dropout_backward(1, 2, 130, p); /* base % 4 == 2 rows, partial chunk */
        test_dropout_residual(p, 2048, 0);
        test_dropout_residual(p, 1001, 0);
        test_dropout_residual(p, 2048, 1); /* misaligned: scalar path */
        test_dropout_residual_layernorm(p, 2048);
        test_dropout_residual_layernorm(p, 1001); /* the two calls */
        test_layernorm_backward_dropout(p, 768);
        test_layernorm_backward_dropout(p, 2048);
        test_layernorm_backward_dropout(p, 1001); /* the unfused chain */
        test_gelu_dropout(p, 8192, 0);
        test_gelu_dropout(p, 1003, 0);
        test_gelu_dropout(p, 4096, 2); /* out 4-byte aligned only */
        test_dropout_gelu_backward(p, 8192, 0);
        test_dropout_gelu_backward(p, 1003, 0);
        test_dropout_gelu_backward(p, 4096, 1);
        test_ffn_half_inputs(p, 8192);
        test_ffn_half_inputs(p, 1003);
        test_ffn_half_inputs(p, 8200); /* n / 8 not a multiple of a warp */
    }
    test_outer_gelu_backward(37, 8192);
    test_outer_gelu_backward(21, 2051);  /* scalar columns, a partial last thread */
    test_outer_gelu_backward(600000, 8); /* more row blocks than a grid's y */
    test_probs_mask(37);                 /* no mask bytes: T % 4 != 0 */
    test_probs_mask(64);
}

int main(void)
{
    GPU_SKIP_UNLESS(ao_device_count("cuda") > 0, "no CUDA device visible");
    if (!kernels_check_open("test_fused_cuda")) return check_result("test_fused_cuda");
    test_fused();
    kernels_check_close();
    return check_result("test_fused_cuda");
}

#else

int main(void)
{
    GPU_SKIP_UNLESS(0, "built without CUDA");
    return 0;
}

#endif
