/* fp32 reference of the model's operators; the contract is in ops_ref.h. */
#include "model/ops_ref.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* ---- linear ------------------------------------------------------------------ */

/* y[n, out] = x w^T + beta * y */
static void gemm_x_wt(float *y, const float *x, const float *w, int n, int in, int out, float beta)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, beta, y,
                out);
}

static void add_bias_rows(float *y, const float *b, int n, int out)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < out; j++) y[(size_t)i * out + j] += b[j];
}

void ao_linear_forward(float *y, const float *x, const float *w, const float *b, int n, int in,
                       int out)
{
    if (n <= 0 || out <= 0) return;
    if (in <= 0) {
        memset(y, 0, sizeof(float) * (size_t)n * out);
    } else {
        gemm_x_wt(y, x, w, n, in, out, 0.0f);
    }
    if (b) add_bias_rows(y, b, n, out);
}

/* db[out] += column sums of dy[n, out], summed in double. */
static void accumulate_column_sums(float *db, const float *dy, int n, int out)
{
    for (int j = 0; j < out; j++) {
        double s = 0.0;
        for (int i = 0; i < n; i++) s += dy[(size_t)i * out + j];
        db[j] += (float)s;
    }
}

void ao_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int n, int in, int out)
{
    if (n <= 0) return;
    if (dx) {
        if (out <= 0) {
            memset(dx, 0, sizeof(float) * (size_t)n * in);
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in,
                        0.0f, dx, in);
        }
    }
    if (out <= 0) return;
    if (in > 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 1.0f,
                    dw, in);
    if (db) accumulate_column_sums(db, dy, n, out);
}

/* ---- embedding bag ------------------------------------------------------------- */

void ao_embedding_bag_mean_forward(float *out, const int32_t *ids, const float *table, int n, int s,
                                   int e)
{
    for (int i = 0; i < n; i++) {
        float *o = out + (size_t)i * e;
        for (int c = 0; c < e; c++) {
            double acc = 0.0;
            for (int k = 0; k < s; k++) acc += table[(size_t)ids[(size_t)i * s + k] * e + c];
            o[c] = s > 0 ? (float)(acc / s) : 0.0f;
        }
    }
}

void ao_embedding_bag_mean_backward(float *dtable, const float *dout, const int32_t *ids, int n,
                                    int s, int e)
{
    if (s <= 0) return;
    const float inv = 1.0f / (float)s;
    for (int i = 0; i < n; i++) {
        const float *d = dout + (size_t)i * e;
        for (int k = 0; k < s; k++) {
            float *row = dtable + (size_t)ids[(size_t)i * s + k] * e;
            for (int c = 0; c < e; c++) row[c] += d[c] * inv;
        }
    }
}

/* ---- layernorm ----------------------------------------------------------------- */

void ao_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                          const float *beta, int n, int c)
{
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * c;
        double m = 0.0;
        for (int j = 0; j < c; j++) m += xi[j];
        m /= c;
        double var = 0.0;
        for (int j = 0; j < c; j++) var += (xi[j] - m) * (xi[j] - m);
        var /= c;
        const double rs = 1.0 / sqrt(var + (double)AO_LN_EPS);
        float *yi = y + (size_t)i * c;
        for (int j = 0; j < c; j++) yi[j] = (float)((xi[j] - m) * rs) * gamma[j] + beta[j];
        mean[i] = (float)m;
        rstd[i] = (float)rs;
    }
}

void ao_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                           const float *mean, const float *rstd, const float *gamma, int n, int c)
{
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * c, *dyi = dy + (size_t)i * c;
        const double m = mean[i], rs = rstd[i];
        /* dxhat = dy * gamma; dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) */
        double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
        for (int j = 0; j < c; j++) {
            const double xhat = (xi[j] - m) * rs, dxhat = (double)dyi[j] * gamma[j];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * xhat;
        }
        const double mean_dxhat = sum_dxhat / c, mean_dxhat_xhat = sum_dxhat_xhat / c;
        float *dxi = dx + (size_t)i * c;
        for (int j = 0; j < c; j++) {
            const double xhat = (xi[j] - m) * rs, dxhat = (double)dyi[j] * gamma[j];
            dxi[j] = (float)(rs * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
        }
    }
    /* Parameter gradients column by column so each sum is in double. */
    for (int j = 0; j < c; j++) {
        double dg = 0.0, db = 0.0;
        for (int i = 0; i < n; i++) {
            const double xhat = (x[(size_t)i * c + j] - (double)mean[i]) * rstd[i];
            dg += (double)dy[(size_t)i * c + j] * xhat;
            db += dy[(size_t)i * c + j];
        }
        dgamma[j] += (float)dg;
        dbeta[j] += (float)db;
    }
}

/* ---- GELU ---------------------------------------------------------------------- */

void ao_gelu_forward(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const double v = x[i];
        y[i] = (float)(0.5 * v * (1.0 + erf(v * M_SQRT1_2)));
    }
}

void ao_gelu_backward(float *dx, const float *dy, const float *x, size_t n)
{
    const double inv_sqrt_2pi = 0.3989422804014327;
    for (size_t i = 0; i < n; i++) {
        const double v = x[i];
        const double cdf = 0.5 * (1.0 + erf(v * M_SQRT1_2));
        const double pdf = inv_sqrt_2pi * exp(-0.5 * v * v);
        dx[i] = (float)((double)dy[i] * (cdf + v * pdf));
    }
}

/* ---- dropout ------------------------------------------------------------------- */

/* y = x * mask factor: forward and backward of dropout are the same map. */
static void dropout_apply(float *y, const float *x, int batch, size_t per_sample, uint32_t site,
                          const ao_dropout_cfg *cfg)
{
    const size_t total = (size_t)batch * per_sample;
    if (cfg == NULL || cfg->p <= 0.0f) {
        if (y != x) memmove(y, x, sizeof(float) * total);
        return;
    }
    for (int b = 0; b < batch; b++) {
        const ao_rng_stream s = ao_dropout_stream(cfg->seed, cfg->step, cfg->layer, site,
                                                  cfg->first_sample + (uint64_t)b);
        const size_t off = (size_t)b * per_sample;
        /* a whole Philox block per 4 elements rather than one per element */
        for (size_t e0 = 0; e0 < per_sample; e0 += 4) {
            const ao_u32x4 words = ao_rng_block(s, e0 >> 2);
            for (size_t l = 0; l < 4 && e0 + l < per_sample; l++)
                y[off + e0 + l] = x[off + e0 + l] * ao_dropout_factor_from_word(words.v[l], cfg->p);
        }
    }
}

void ao_dropout_forward(float *y, const float *x, int batch, size_t per_sample, uint32_t site,
                        const ao_dropout_cfg *cfg)
{
    dropout_apply(y, x, batch, per_sample, site, cfg);
}

void ao_dropout_backward(float *dx, const float *dy, int batch, size_t per_sample, uint32_t site,
                         const ao_dropout_cfg *cfg)
{
    dropout_apply(dx, dy, batch, per_sample, site, cfg);
}

/* ---- attention ----------------------------------------------------------------- */

static int dropout_on(const ao_dropout_cfg *cfg)
{
    return cfg != NULL && cfg->p > 0.0f;
}

#define ATTN_CTX_CHUNK 64

/* The probability-dropout stream of (batch row b, head). */
static ao_rng_stream attn_prob_stream(const ao_dropout_cfg *cfg, int b, int head)
{
    ao_rng_stream s = ao_dropout_stream(cfg->seed, cfg->step, cfg->layer, AO_DROP_ATTN_PROBS,
                                        cfg->first_sample + (uint64_t)b);
    return ao_rng_child(s, (uint64_t)head);
}

void ao_attn_forward(float *out, const ao_attn_saved *saved, const float *x,
                     const ao_attn_weights *w, const ao_attn_shape *shape,
                     const ao_dropout_cfg *drop)
{
    const int B = shape->batch, T = shape->seq, d = shape->dim, H = shape->heads;
    const int hd = d / H, N = B * T, d3 = 3 * d;
    const double scale = 1.0 / sqrt((double)hd);
    const int use_drop = dropout_on(drop);

    ao_linear_forward(saved->qkv, x, w->in_w, w->in_b, N, d, d3);
    for (int b = 0; b < B; b++) {
        const float *qkv = saved->qkv + (size_t)b * T * d3;
        for (int h = 0; h < H; h++) {
            const ao_rng_stream ms = use_drop ? attn_prob_stream(drop, b, h) : ao_rng_root(0, 0);
            float *att = saved->att + ((size_t)b * H + h) * T * T;
            for (int i = 0; i < T; i++) {
                const float *q = qkv + (size_t)i * d3 + h * hd;
                float *row = att + (size_t)i * T;
                float maxv = -INFINITY;
                for (int j = 0; j < T; j++) {
                    const float *k = qkv + (size_t)j * d3 + d + h * hd;
                    double dot = 0.0;
                    for (int c = 0; c < hd; c++) dot += (double)q[c] * k[c];
                    row[j] = (float)(dot * scale);
                    if (row[j] > maxv) maxv = row[j];
                }
                double sum = 0.0;
                for (int j = 0; j < T; j++) sum += exp((double)row[j] - maxv);
                for (int j = 0; j < T; j++) row[j] = (float)(exp((double)row[j] - maxv) / sum);

                /* ctx_i = sum_j dropout(P)[i,j] v_j, in double, a chunk of the
                 * head's columns at a time so each mask factor is drawn once a
                 * chunk rather than once a column */
                float *ctx = saved->ctx + ((size_t)b * T + i) * d + h * hd;
                for (int c0 = 0; c0 < hd; c0 += ATTN_CTX_CHUNK) {
                    const int nc = hd - c0 < ATTN_CTX_CHUNK ? hd - c0 : ATTN_CTX_CHUNK;
                    double acc[ATTN_CTX_CHUNK] = {0};
                    for (int j = 0; j < T; j++) {
                        const float pd =
                            use_drop ? row[j] * ao_dropout_factor(ms, (uint64_t)i * T + j, drop->p)
                                     : row[j];
                        const float *v = qkv + (size_t)j * d3 + 2 * d + h * hd + c0;
                        for (int c = 0; c < nc; c++) acc[c] += (double)pd * v[c];
                    }
                    for (int c = 0; c < nc; c++) ctx[c0 + c] = (float)acc[c];
                }
            }
        }
    }
    ao_linear_forward(out, saved->ctx, w->out_w, w->out_b, N, d, d);
}

size_t ao_attn_backward_scratch_floats(const ao_attn_shape *shape)
{
    const size_t N = (size_t)shape->batch * shape->seq;
    return N * 3 * shape->dim + N * shape->dim + (size_t)shape->seq;
}

void ao_attn_backward(float *dx, const ao_attn_weights *grads, const float *dout, const float *x,
                      const ao_attn_weights *w, const ao_attn_saved *saved,
                      const ao_attn_shape *shape, const ao_dropout_cfg *drop, float *scratch)
{
    const int B = shape->batch, T = shape->seq, d = shape->dim, H = shape->heads;
    const int hd = d / H, N = B * T, d3 = 3 * d;
    const double scale = 1.0 / sqrt((double)hd);
    const int use_drop = dropout_on(drop);
    float *dqkv = scratch, *dctx = dqkv + (size_t)N * d3, *dp = dctx + (size_t)N * d;

    ao_linear_backward(dctx, grads->out_w, grads->out_b, dout, saved->ctx, w->out_w, N, d, d);
    memset(dqkv, 0, sizeof(float) * (size_t)N * d3);
    for (int b = 0; b < B; b++) {
        const float *qkv = saved->qkv + (size_t)b * T * d3;
        float *dqkv_b = dqkv + (size_t)b * T * d3;
        for (int h = 0; h < H; h++) {
            const ao_rng_stream ms = use_drop ? attn_prob_stream(drop, b, h) : ao_rng_root(0, 0);
            const float *att = saved->att + ((size_t)b * H + h) * T * T;
            for (int i = 0; i < T; i++) {
                const float *row = att + (size_t)i * T;
                const float *dc = dctx + ((size_t)b * T + i) * d + h * hd;
                /* dP_dropped[j] = dctx_i . v_j; dv_j += P_dropped[i,j] dctx_i */
                double dot_pdp = 0.0;
                for (int j = 0; j < T; j++) {
                    const float *v = qkv + (size_t)j * d3 + 2 * d + h * hd;
                    float *dv = dqkv_b + (size_t)j * d3 + 2 * d + h * hd;
                    const float f =
                        use_drop ? ao_dropout_factor(ms, (uint64_t)i * T + j, drop->p) : 1.0f;
                    const float pd = row[j] * f;
                    double acc = 0.0;
                    for (int c = 0; c < hd; c++) {
                        acc += (double)dc[c] * v[c];
                        dv[c] += pd * dc[c];
                    }
                    dp[j] = (float)acc * f; /* through the dropout: gradient wrt P */
                    dot_pdp += (double)row[j] * dp[j];
                }
                /* softmax: dS_j = P_j (dP_j - sum_k P_k dP_k); S = scale q.k */
                const float *q = qkv + (size_t)i * d3 + h * hd;
                float *dq = dqkv_b + (size_t)i * d3 + h * hd;
                for (int j = 0; j < T; j++) {
                    const float ds = (float)((double)row[j] * (dp[j] - dot_pdp) * scale);
                    const float *k = qkv + (size_t)j * d3 + d + h * hd;
                    float *dk = dqkv_b + (size_t)j * d3 + d + h * hd;
                    for (int c = 0; c < hd; c++) {
                        dq[c] += ds * k[c];
                        dk[c] += ds * q[c];
                    }
                }
            }
        }
    }
    ao_linear_backward(dx, grads->in_w, grads->in_b, dqkv, x, w->in_w, N, d, d3);
}

/* ---- encoder layer --------------------------------------------------------------- */

/* Carves consecutive arrays out of one flat buffer. */
static float *take(float **cursor, size_t n)
{
    float *p = *cursor;
    *cursor += n;
    return p;
}

size_t ao_encoder_param_count(const ao_encoder_shape *s)
{
    const size_t d = (size_t)s->dim, ff = (size_t)s->ff;
    return 3 * d * d + 3 * d + d * d + d + ff * d + ff + d * ff + d + 4 * d;
}

void ao_encoder_weights_bind(ao_encoder_weights *w, float *flat, const ao_encoder_shape *s)
{
    const size_t d = (size_t)s->dim, ff = (size_t)s->ff;
    w->attn.in_w = take(&flat, 3 * d * d);
    w->attn.in_b = take(&flat, 3 * d);
    w->attn.out_w = take(&flat, d * d);
    w->attn.out_b = take(&flat, d);
    w->lin1_w = take(&flat, ff * d);
    w->lin1_b = take(&flat, ff);
    w->lin2_w = take(&flat, d * ff);
    w->lin2_b = take(&flat, d);
    w->ln1_w = take(&flat, d);
    w->ln1_b = take(&flat, d);
    w->ln2_w = take(&flat, d);
    w->ln2_b = take(&flat, d);
}

size_t ao_encoder_saved_floats(const ao_encoder_shape *s)
{
    const size_t N = (size_t)s->batch * s->seq, d = (size_t)s->dim, ff = (size_t)s->ff;
    const size_t attn = N * 3 * d + (size_t)s->batch * s->heads * s->seq * s->seq + N * d;
    return attn + 3 * N * d + 4 * N + 2 * N * ff;
}

void ao_encoder_saved_bind(ao_encoder_saved *sv, float *flat, const ao_encoder_shape *s)
{
    const size_t N = (size_t)s->batch * s->seq, d = (size_t)s->dim, ff = (size_t)s->ff;
    sv->attn.qkv = take(&flat, N * 3 * d);
    sv->attn.att = take(&flat, (size_t)s->batch * s->heads * s->seq * s->seq);
    sv->attn.ctx = take(&flat, N * d);
    sv->r1 = take(&flat, N * d);
    sv->x1 = take(&flat, N * d);
    sv->ln1_mean = take(&flat, N);
    sv->ln1_rstd = take(&flat, N);
    sv->h = take(&flat, N * ff);
    sv->a = take(&flat, N * ff);
    sv->r2 = take(&flat, N * d);
    sv->ln2_mean = take(&flat, N);
    sv->ln2_rstd = take(&flat, N);
}

static ao_attn_shape attn_shape_of(const ao_encoder_shape *s)
{
    ao_attn_shape a = {s->batch, s->seq, s->dim, s->heads};
    return a;
}

static void add_into(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

void ao_encoder_forward(float *y, const ao_encoder_saved *sv, const float *x,
                        const ao_encoder_weights *w, const ao_encoder_shape *s,
                        const ao_dropout_cfg *drop)
{
    const int N = s->batch * s->seq, d = s->dim, ff = s->ff;
    const size_t nd = (size_t)N * d, nff = (size_t)N * ff;
    const ao_attn_shape as = attn_shape_of(s);
    const size_t tok_d = (size_t)s->seq * d, tok_ff = (size_t)s->seq * ff;

    /* r1 = x + dropout1(attn(x)); r1 first holds the attention output */
    ao_attn_forward(sv->r1, &sv->attn, x, &w->attn, &as, drop);
    ao_dropout_forward(sv->r1, sv->r1, s->batch, tok_d, AO_DROP_ATTN_OUT, drop);
    add_into(sv->r1, x, nd);
    ao_layernorm_forward(sv->x1, sv->ln1_mean, sv->ln1_rstd, sv->r1, w->ln1_w, w->ln1_b, N, d);

    ao_linear_forward(sv->h, sv->x1, w->lin1_w, w->lin1_b, N, d, ff);
    ao_gelu_forward(sv->a, sv->h, nff);
    ao_dropout_forward(sv->a, sv->a, s->batch, tok_ff, AO_DROP_FFN_HIDDEN, drop);
    ao_linear_forward(sv->r2, sv->a, w->lin2_w, w->lin2_b, N, ff, d);
    ao_dropout_forward(sv->r2, sv->r2, s->batch, tok_d, AO_DROP_FFN_OUT, drop);
    add_into(sv->r2, sv->x1, nd);
    ao_layernorm_forward(y, sv->ln2_mean, sv->ln2_rstd, sv->r2, w->ln2_w, w->ln2_b, N, d);
}

size_t ao_encoder_backward_scratch_floats(const ao_encoder_shape *s)
{
    const ao_attn_shape as = attn_shape_of(s);
    const size_t N = (size_t)s->batch * s->seq;
    return 3 * N * s->dim + N * s->ff + ao_attn_backward_scratch_floats(&as);
}

void ao_encoder_backward(float *dx, const ao_encoder_weights *g, const float *dy, const float *x,
                         const ao_encoder_weights *w, const ao_encoder_saved *sv,
                         const ao_encoder_shape *s, const ao_dropout_cfg *drop, float *scratch)
{
    const int N = s->batch * s->seq, d = s->dim, ff = s->ff;
    const size_t nd = (size_t)N * d, nff = (size_t)N * ff;
    const size_t tok_d = (size_t)s->seq * d, tok_ff = (size_t)s->seq * ff;
    const ao_attn_shape as = attn_shape_of(s);
    float *dr = scratch;       /* [N, d]: dr2, later dr1 */
    float *dbranch = dr + nd;  /* [N, d]: gradient entering a residual branch */
    float *dx1 = dbranch + nd; /* [N, d] */
    float *da = dx1 + nd;      /* [N, ff] */
    float *attn_scratch = da + nff;

    ao_layernorm_backward(dr, g->ln2_w, g->ln2_b, dy, sv->r2, sv->ln2_mean, sv->ln2_rstd, w->ln2_w,
                          N, d);
    /* FFN branch */
    ao_dropout_backward(dbranch, dr, s->batch, tok_d, AO_DROP_FFN_OUT, drop);
    ao_linear_backward(da, g->lin2_w, g->lin2_b, dbranch, sv->a, w->lin2_w, N, ff, d);
    ao_dropout_backward(da, da, s->batch, tok_ff, AO_DROP_FFN_HIDDEN, drop);
    ao_gelu_backward(da, da, sv->h, nff);
    ao_linear_backward(dx1, g->lin1_w, g->lin1_b, da, sv->x1, w->lin1_w, N, d, ff);
    add_into(dx1, dr, nd); /* the residual around the FFN */

    ao_layernorm_backward(dr, g->ln1_w, g->ln1_b, dx1, sv->r1, sv->ln1_mean, sv->ln1_rstd, w->ln1_w,
                          N, d);
    /* attention branch */
    ao_dropout_backward(dbranch, dr, s->batch, tok_d, AO_DROP_ATTN_OUT, drop);
    ao_attn_backward(dx, &g->attn, dbranch, x, &w->attn, &sv->attn, &as, drop, attn_scratch);
    add_into(dx, dr, nd); /* the residual around attention */
}

/* ---- input stage ----------------------------------------------------------------- */

size_t ao_input_param_count(const ao_input_shape *s)
{
    const size_t d = (size_t)s->dim, e = (size_t)s->emb_dim;
    return d * s->dense_in + d + (size_t)s->vocab * e + d * e + d;
}

void ao_input_weights_bind(ao_input_weights *w, float *flat, const ao_input_shape *s)
{
    const size_t d = (size_t)s->dim, e = (size_t)s->emb_dim;
    w->dense_w = take(&flat, d * s->dense_in);
    w->dense_b = take(&flat, d);
    w->table = take(&flat, (size_t)s->vocab * e);
    w->sparse_w = take(&flat, d * e);
    w->sparse_b = take(&flat, d);
}

void ao_input_forward(float *out, float *pooled, const float *dense, const int32_t *ids,
                      const ao_input_weights *w, const ao_input_shape *s)
{
    ao_linear_forward(out, dense, w->dense_w, w->dense_b, s->n, s->dense_in, s->dim);
    ao_embedding_bag_mean_forward(pooled, ids, w->table, s->n, s->sparse, s->emb_dim);
    if (s->n > 0 && s->dim > 0 && s->emb_dim > 0)
        gemm_x_wt(out, pooled, w->sparse_w, s->n, s->emb_dim, s->dim, 1.0f);
    if (s->n > 0) add_bias_rows(out, w->sparse_b, s->n, s->dim);
}

void ao_input_backward(const ao_input_weights *g, const float *dout, const float *dense,
                       const int32_t *ids, const float *pooled, const ao_input_weights *w,
                       const ao_input_shape *s, float *scratch)
{
    ao_linear_backward(NULL, g->dense_w, g->dense_b, dout, dense, w->dense_w, s->n, s->dense_in,
                       s->dim);
    ao_linear_backward(scratch, g->sparse_w, g->sparse_b, dout, pooled, w->sparse_w, s->n,
                       s->emb_dim, s->dim);
    ao_embedding_bag_mean_backward(g->table, scratch, ids, s->n, s->sparse, s->emb_dim);
}

/* ---- head ------------------------------------------------------------------------ */

size_t ao_head_param_count(const ao_head_shape *s)
{
    const size_t d = (size_t)s->dim, H = (size_t)s->hidden;
    return 2 * d + H * d + H + H + 1;
}

void ao_head_weights_bind(ao_head_weights *w, float *flat, const ao_head_shape *s)
{
    const size_t d = (size_t)s->dim, H = (size_t)s->hidden;
    w->ln_w = take(&flat, d);
    w->ln_b = take(&flat, d);
    w->fc1_w = take(&flat, H * d);
    w->fc1_b = take(&flat, H);
    w->fc2_w = take(&flat, H);
    w->fc2_b = take(&flat, 1);
}

size_t ao_head_staged_floats(const ao_head_shape *s)
{
    return (size_t)s->hidden * s->dim + 2 * (size_t)s->hidden;
}

size_t ao_head_saved_floats(const ao_head_shape *s)
{
    const size_t N = (size_t)s->n;
    return N * s->dim + 2 * N + 2 * N * s->hidden;
}

void ao_head_saved_bind(ao_head_saved *sv, float *flat, const ao_head_shape *s)
{
    const size_t N = (size_t)s->n;
    sv->ln_out = take(&flat, N * s->dim);
    sv->ln_mean = take(&flat, N);
    sv->ln_rstd = take(&flat, N);
    sv->hid = take(&flat, N * s->hidden);
    sv->act = take(&flat, N * s->hidden);
}

void ao_head_forward(float *z, const ao_head_saved *sv, const float *x, const ao_head_weights *w,
                     const ao_head_shape *s)
{
    ao_layernorm_forward(sv->ln_out, sv->ln_mean, sv->ln_rstd, x, w->ln_w, w->ln_b, s->n, s->dim);
    ao_linear_forward(sv->hid, sv->ln_out, w->fc1_w, w->fc1_b, s->n, s->dim, s->hidden);
    ao_gelu_forward(sv->act, sv->hid, (size_t)s->n * s->hidden);
    ao_linear_forward(z, sv->act, w->fc2_w, w->fc2_b, s->n, s->hidden, 1);
}

size_t ao_head_backward_scratch_floats(const ao_head_shape *s)
{
    return (size_t)s->n * s->hidden + (size_t)s->n * s->dim;
}

void ao_head_backward(float *dx, const ao_head_weights *g, const float *dz, const float *x,
                      const ao_head_weights *w, const ao_head_saved *sv, const ao_head_shape *s,
                      float *scratch)
{
    float *dact = scratch, *dln = scratch + (size_t)s->n * s->hidden;
    ao_linear_backward(dact, g->fc2_w, g->fc2_b, dz, sv->act, w->fc2_w, s->n, s->hidden, 1);
    ao_gelu_backward(dact, dact, sv->hid, (size_t)s->n * s->hidden);
    ao_linear_backward(dln, g->fc1_w, g->fc1_b, dact, sv->ln_out, w->fc1_w, s->n, s->dim,
                       s->hidden);
    ao_layernorm_backward(dx, g->ln_w, g->ln_b, dln, x, sv->ln_mean, sv->ln_rstd, w->ln_w, s->n,
                          s->dim);
}

/* ---- loss ------------------------------------------------------------------------ */

double ao_bce_loss(const float *z, const float *y, const float *w, size_t n, double normalizer)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double zi = z[i];
        sum += (double)w[i] * (fmax(zi, 0.0) - zi * y[i] + log1p(exp(-fabs(zi))));
    }
    return sum / normalizer;
}

void ao_bce_loss_backward(float *dz, const float *z, const float *y, const float *w, size_t n,
                          double normalizer)
{
    for (size_t i = 0; i < n; i++) {
        const double sig = 1.0 / (1.0 + exp(-(double)z[i]));
        dz[i] = (float)((double)w[i] * (sig - y[i]) / normalizer);
    }
}

/* ---- optimizer ------------------------------------------------------------------- */

void ao_adamw_step(float *param, const float *grad, float *m, float *v, size_t n,
                   const ao_adamw_hparams *h, float lr, int64_t step, float grad_scale)
{
    /* Scalars in double then rounded, as torch computes them in Python floats. */
    const double bc1 = 1.0 - pow((double)h->beta1, (double)step);
    const double bc2 = 1.0 - pow((double)h->beta2, (double)step);
    const float step_size = (float)(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float decay = (float)(1.0 - (double)lr * h->weight_decay);
    const float one_minus_b1 = 1.0f - h->beta1, one_minus_b2 = 1.0f - h->beta2;
    for (size_t i = 0; i < n; i++) {
        const float g = grad[i] * grad_scale;
        param[i] *= decay;
        m[i] += one_minus_b1 * (g - m[i]);
        v[i] = v[i] * h->beta2 + one_minus_b2 * g * g;
        const float denom = sqrtf(v[i]) / bc2_sqrt + h->eps;
        param[i] -= step_size * (m[i] / denom);
    }
}

float ao_lr_at(float base_lr, int64_t step, int64_t warmup_steps, int64_t total_steps)
{
    if (step < 0) step = 0;
    if (step < warmup_steps) return (float)((double)base_lr * (double)step / (double)warmup_steps);
    if (total_steps <= 0) return base_lr;
    const int64_t span = total_steps - warmup_steps > 1 ? total_steps - warmup_steps : 1;
    const double f = (double)(total_steps - step) / (double)span;
    return f > 0.0 ? (float)((double)base_lr * f) : 0.0f;
}

double ao_sum_squares(const float *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

float ao_clip_coef(double global_sq_norm, float max_norm)
{
    if (max_norm <= 0.0f) return 1.0f;
    const double coef = (double)max_norm / (sqrt(global_sq_norm) + 1e-6);
    return coef < 1.0 ? (float)coef : 1.0f;
}

int ao_has_nonfinite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 1;
    return 0;
}

void ao_loss_scaler_init(ao_loss_scaler *s, float initial)
{
    s->scale = initial;
    s->growth_factor = 2.0f;
    s->backoff_factor = 0.5f;
    s->growth_interval = 2000;
    s->good_steps = 0;
}

int ao_loss_scaler_update(ao_loss_scaler *s, int found_nonfinite)
{
    if (found_nonfinite) {
        s->scale *= s->backoff_factor;
        s->good_steps = 0;
        return 0;
    }
    if (++s->good_steps >= s->growth_interval) {
        const float grown = s->scale * s->growth_factor;
        if (isfinite(grown)) s->scale = grown; /* torch keeps the scale rather than overflow */
        s->good_steps = 0;
    }
    return 1;
}
