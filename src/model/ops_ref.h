/* The workload model's operators in plain fp32 C: the numerical reference for
 * the GPU kernels and the code the CPU backend runs (the llm.c pattern).
 *
 * Conventions, for every function here:
 * - Pure functions over caller-owned float arrays: no allocation, no threads of
 *   our own (cblas_sgemm may use OpenBLAS's), no device API, no global state.
 * - Row-major. N is the number of rows (tokens: N = B*T). A weight W of a
 *   linear map in->out is [out, in] as in PyTorch, so y = x W^T + b.
 * - Forward writes its outputs and the activations its backward needs into
 *   caller buffers (the *_saved structs; every buffer's shape is documented).
 * - Backward WRITES input gradients (dx = ...) and ACCUMULATES parameter
 *   gradients (dW += ...), so gradient accumulation over micro-batches is a
 *   matter of not zeroing the gradient buffers. An input gradient pointer may be
 *   NULL where noted (no gradient wanted). Outputs must not alias inputs unless
 *   a function says so.
 * - Precision: storage and GEMMs (cblas_sgemm) are fp32. Reductions whose
 *   length grows with the model (layernorm statistics, attention dot products
 *   and softmax sums, bias gradients, the loss, norms) accumulate in double and
 *   round once, so this reference sits closer to the exact result than any
 *   fp32 kernel it is compared with.
 * - Dropout masks come from the counter-based RNG (rng.h) keyed by (seed, step,
 *   layer, site, global sample index, element), never stored: backward
 *   recomputes them, and any split of the batch across ranks sees the same
 *   masks for the same samples.
 *
 * The composed encoder layer is exactly torch.nn.TransformerEncoderLayer with
 * activation="gelu", batch_first=True, norm_first=False. */
#ifndef AORTA_MODEL_OPS_REF_H
#define AORTA_MODEL_OPS_REF_H

#include <stddef.h>
#include <stdint.h>

#include "data/rng.h"

#define AO_LN_EPS 1e-5f

/* ---- linear: y[N, out] = x[N, in] W[out, in]^T + b[out] ------------------- */

/* b may be NULL (no bias). */
void ao_linear_forward(float *y, const float *x, const float *w, const float *b, int n, int in,
                       int out);
/* dx[N, in] = dy W (skipped when dx is NULL); dw[out, in] += dy^T x;
 * db[out] += column sums of dy (skipped when db is NULL). */
void ao_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int n, int in, int out);

/* ---- embedding bag, mean mode ---------------------------------------------- */

/* out[N, E] = mean over s of table[ids[i, s], :]; ids [N, S], table [V, E].
 * Precondition: 0 <= ids < V (the data generator guarantees it). */
void ao_embedding_bag_mean_forward(float *out, const int32_t *ids, const float *table, int n, int s,
                                   int e);
/* dtable[V, E] += scatter of dout[N, E] / S, in row order i then s (so the
 * result is deterministic even when ids repeat). */
void ao_embedding_bag_mean_backward(float *dtable, const float *dout, const int32_t *ids, int n,
                                    int s, int e);

/* ---- layernorm over the last dim (biased variance, eps AO_LN_EPS) ---------- */

/* y[N, C] = (x - mean) * rstd * gamma + beta; saves mean[N], rstd[N]. */
void ao_layernorm_forward(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                          const float *beta, int n, int c);
/* dx[N, C] written; dgamma[C], dbeta[C] accumulated. */
void ao_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                           const float *mean, const float *rstd, const float *gamma, int n, int c);

/* ---- GELU, exact erf form (PyTorch's default approximate="none") ---------- */

/* y = x * Phi(x). y may alias x. */
void ao_gelu_forward(float *y, const float *x, size_t n);
/* dx = dy * (Phi(x) + x phi(x)). dx may alias dy. */
void ao_gelu_backward(float *dx, const float *dy, const float *x, size_t n);

/* ---- dropout ---------------------------------------------------------------- */

/* What keys the masks of one micro-batch. */
typedef struct {
    float p;               /* drop probability; 0 disables dropout (also eval) */
    uint64_t seed;         /* run seed */
    uint64_t step;         /* training step (masks change every step) */
    uint32_t layer;        /* encoder layer index */
    uint64_t first_sample; /* global index of the micro-batch's sample 0 */
} ao_dropout_cfg;

/* y[B, per_sample] = x * factor, the factor of element e of batch row b being
 * ao_dropout_factor(ao_dropout_stream(seed, step, layer, site,
 * first_sample + b), e, p). y may alias x. */
void ao_dropout_forward(float *y, const float *x, int batch, size_t per_sample, uint32_t site,
                        const ao_dropout_cfg *cfg);
/* dx = dy * the same factor (recomputed, not stored). dx may alias dy. */
void ao_dropout_backward(float *dx, const float *dy, int batch, size_t per_sample, uint32_t site,
                         const ao_dropout_cfg *cfg);

/* ---- multi-head self-attention (nn.MultiheadAttention, batch_first) -------- */

typedef struct {
    int batch; /* B */
    int seq;   /* T */
    int dim;   /* d (embed_dim) */
    int heads; /* h; d % h == 0, head dim hd = d / h */
} ao_attn_shape;

/* Parameters, or (same layout) their gradients. */
typedef struct {
    float *in_w;  /* [3d, d]: rows 0..d-1 make q, d..2d-1 k, 2d..3d-1 v */
    float *in_b;  /* [3d] */
    float *out_w; /* [d, d] */
    float *out_b; /* [d] */
} ao_attn_weights;

typedef struct {
    float *qkv; /* [B*T, 3d]: x in_w^T + in_b; head j of q is columns j*hd..(j+1)*hd-1 */
    float *att; /* [B, h, T, T]: softmax(q k^T / sqrt(hd)) over keys, before dropout */
    float *ctx; /* [B*T, d]: dropout(att) v, heads concatenated (out-projection input) */
} ao_attn_saved;

/* out[B*T, d] = ctx out_w^T + out_b; fills saved's buffers. Attention-probability dropout uses site
 * AO_DROP_ATTN_PROBS with one more key level, the head: element i*T + j of
 * ao_rng_child(ao_dropout_stream(.., AO_DROP_ATTN_PROBS, g), head). */
void ao_attn_forward(float *out, const ao_attn_saved *saved, const float *x,
                     const ao_attn_weights *w, const ao_attn_shape *shape,
                     const ao_dropout_cfg *drop);
/* Floats of scratch ao_attn_backward needs: dqkv [B*T, 3d], dctx [B*T, d], one
 * row [T]. */
size_t ao_attn_backward_scratch_floats(const ao_attn_shape *shape);
/* dx[B*T, d] written (dx may be NULL); grads accumulated. */
void ao_attn_backward(float *dx, const ao_attn_weights *grads, const float *dout, const float *x,
                      const ao_attn_weights *w, const ao_attn_saved *saved,
                      const ao_attn_shape *shape, const ao_dropout_cfg *drop, float *scratch);

/* ---- post-LN transformer encoder layer --------------------------------------
 *   r1 = x + Dropout1(SelfAttn(x))          x1 = LN1(r1)
 *   h  = Linear1(x1)  a = Dropout(GELU(h))  r2 = x1 + Dropout2(Linear2(a))
 *   y  = LN2(r2)
 * Dropout sites: AO_DROP_ATTN_PROBS (inside attention), AO_DROP_ATTN_OUT,
 * AO_DROP_FFN_HIDDEN, AO_DROP_FFN_OUT; layer index from ao_dropout_cfg. */

typedef struct {
    int batch, seq, dim, heads; /* B, T, d, h */
    int ff;                     /* dim_feedforward */
} ao_encoder_shape;

/* Parameters, or (same layout) their gradients. The flat layout of
 * ao_encoder_weights_bind follows the state_dict order of
 * nn.TransformerEncoderLayer. */
typedef struct {
    ao_attn_weights attn; /* self_attn.{in_proj_weight, in_proj_bias, out_proj.weight, .bias} */
    float *lin1_w;        /* [ff, d] */
    float *lin1_b;        /* [ff] */
    float *lin2_w;        /* [d, ff] */
    float *lin2_b;        /* [d] */
    float *ln1_w, *ln1_b; /* [d] norm1 */
    float *ln2_w, *ln2_b; /* [d] norm2 */
} ao_encoder_weights;

size_t ao_encoder_param_count(const ao_encoder_shape *shape);
/* Points w's fields into flat[ao_encoder_param_count] (state_dict order). */
void ao_encoder_weights_bind(ao_encoder_weights *w, float *flat, const ao_encoder_shape *shape);

/* What forward saves for backward (N = B*T). */
typedef struct {
    ao_attn_saved attn;         /* see ao_attn_saved */
    float *r1;                  /* [N, d] x + dropout1(attention) */
    float *x1;                  /* [N, d] LN1(r1) */
    float *ln1_mean, *ln1_rstd; /* [N] */
    float *h;                   /* [N, ff] Linear1 output, before GELU */
    float *a;                   /* [N, ff] dropout(GELU(h)), Linear2's input */
    float *r2;                  /* [N, d] x1 + dropout2(Linear2(a)) */
    float *ln2_mean, *ln2_rstd; /* [N] */
} ao_encoder_saved;

size_t ao_encoder_saved_floats(const ao_encoder_shape *shape);
/* Points s's fields into flat[ao_encoder_saved_floats]. */
void ao_encoder_saved_bind(ao_encoder_saved *s, float *flat, const ao_encoder_shape *shape);

/* y[N, d] = the layer applied to x[N, d]. */
void ao_encoder_forward(float *y, const ao_encoder_saved *saved, const float *x,
                        const ao_encoder_weights *w, const ao_encoder_shape *shape,
                        const ao_dropout_cfg *drop);
/* Scratch floats for backward: 3 [N, d] + [N, ff] + the attention's. */
size_t ao_encoder_backward_scratch_floats(const ao_encoder_shape *shape);
/* dx[N, d] written (must not alias dy); grads accumulated. */
void ao_encoder_backward(float *dx, const ao_encoder_weights *grads, const float *dy,
                         const float *x, const ao_encoder_weights *w, const ao_encoder_saved *saved,
                         const ao_encoder_shape *shape, const ao_dropout_cfg *drop, float *scratch);

/* ---- input stage: dense and sparse features to the model width --------------
 *   out[N, d] = dense[N, F*D] Wd^T + bd + EmbBagMean(ids[N, S]) Ws^T + bs */

typedef struct {
    int n;        /* N = B*T tokens */
    int dense_in; /* F*D */
    int sparse;   /* S ids per token */
    int vocab;    /* V */
    int emb_dim;  /* E */
    int dim;      /* d */
} ao_input_shape;

typedef struct {
    float *dense_w;  /* [d, F*D] */
    float *dense_b;  /* [d] */
    float *table;    /* [V, E] embedding table */
    float *sparse_w; /* [d, E] */
    float *sparse_b; /* [d] */
} ao_input_weights;

size_t ao_input_param_count(const ao_input_shape *shape);
/* Points w's fields into flat[ao_input_param_count] in the order above. */
void ao_input_weights_bind(ao_input_weights *w, float *flat, const ao_input_shape *shape);
/* out[N, d]; pooled[N, E] (saved: the mean embeddings, Ws's input). */
void ao_input_forward(float *out, float *pooled, const float *dense, const int32_t *ids,
                      const ao_input_weights *w, const ao_input_shape *shape);
/* grads accumulated (the inputs are data: no input gradient). scratch [N, E]. */
void ao_input_backward(const ao_input_weights *grads, const float *dout, const float *dense,
                       const int32_t *ids, const float *pooled, const ao_input_weights *w,
                       const ao_input_shape *shape, float *scratch);

/* ---- head: LayerNorm -> Linear(d->H) -> GELU -> Linear(H->1) -> z[N] ------- */

typedef struct {
    int n;      /* N = B*T */
    int dim;    /* d */
    int hidden; /* H (mlp_hidden_dim) */
} ao_head_shape;

typedef struct {
    float *ln_w, *ln_b; /* [d] */
    float *fc1_w;       /* [H, d] */
    float *fc1_b;       /* [H] */
    float *fc2_w;       /* [1, H] */
    float *fc2_b;       /* [1] */
} ao_head_weights;

size_t ao_head_param_count(const ao_head_shape *shape);
/* Points w's fields into flat[ao_head_param_count] in the order above. */
void ao_head_weights_bind(ao_head_weights *w, float *flat, const ao_head_shape *shape);
/* fc1_w through fc2_w: the adjacent span of the head's GEMM weights and fc1's
 * bias, the one range a GPU backend copies to 16 bits. */
size_t ao_head_staged_floats(const ao_head_shape *shape);

typedef struct {
    float *ln_out;            /* [N, d] */
    float *ln_mean, *ln_rstd; /* [N] */
    float *hid;               /* [N, H] before GELU */
    float *act;               /* [N, H] after GELU */
} ao_head_saved;

size_t ao_head_saved_floats(const ao_head_shape *shape);
void ao_head_saved_bind(ao_head_saved *s, float *flat, const ao_head_shape *shape);

/* z[N]: the logits (scores). */
void ao_head_forward(float *z, const ao_head_saved *saved, const float *x, const ao_head_weights *w,
                     const ao_head_shape *shape);
/* Scratch floats for backward: [N, H] + [N, d]. */
size_t ao_head_backward_scratch_floats(const ao_head_shape *shape);
/* dx[N, d] written; grads accumulated. */
void ao_head_backward(float *dx, const ao_head_weights *grads, const float *dz, const float *x,
                      const ao_head_weights *w, const ao_head_saved *saved,
                      const ao_head_shape *shape, float *scratch);

/* ---- loss: importance-weighted binary cross-entropy with logits ------------
 * loss = (1/normalizer) sum_i w_i (max(z_i, 0) - z_i y_i + log(1 + exp(-|z_i|)))
 * normalizer is the number of tokens the mean is over: the local N for a
 * rank's own loss, the global B*T*W for the global mean (gradients of all
 * ranks then sum to the gradient of the global loss). */
double ao_bce_loss(const float *z, const float *y, const float *w, size_t n, double normalizer);
/* dz[i] = w_i (sigmoid(z_i) - y_i) / normalizer (written). */
void ao_bce_loss_backward(float *dz, const float *z, const float *y, const float *w, size_t n,
                          double normalizer);

/* ---- optimizer ------------------------------------------------------------- */

typedef struct {
    float beta1, beta2; /* torch defaults 0.9, 0.999 */
    float eps;          /* 1e-8 */
    float weight_decay; /* decoupled (AdamW); torch default 1e-2 */
} ao_adamw_hparams;

/* One torch.optim.AdamW update of n parameters (the single-tensor algorithm):
 *   g = grad * grad_scale                 (unscale and clip folded in)
 *   p *= 1 - lr * wd
 *   m += (1 - b1) (g - m);  v = b2 v + (1 - b2) g^2
 *   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * t = step, counted from 1 for the first update. */
void ao_adamw_step(float *param, const float *grad, float *m, float *v, size_t n,
                   const ao_adamw_hparams *h, float lr, int64_t step, float grad_scale);

/* Learning rate of the update with 0-based index `step` (the number of updates
 * done before it), as transformers.get_linear_schedule_with_warmup:
 *   step < warmup: base * step / warmup
 *   else:          base * max(0, (total - step) / max(1, total - warmup))
 * so it ramps from 0, peaks at step = warmup and reaches 0 at step = total,
 * staying 0 after. total_steps <= 0 means no decay (base after warm-up). */
float ao_lr_at(float base_lr, int64_t step, int64_t warmup_steps, int64_t total_steps);

/* Sum of squares in double (a shard's part of the global squared norm). */
double ao_sum_squares(const float *x, size_t n);
/* The factor torch.nn.utils.clip_grad_norm_ multiplies gradients by, given the
 * GLOBAL squared norm (summed over all shards): min(1, max_norm / (norm + 1e-6)).
 * max_norm <= 0 disables clipping (1). */
float ao_clip_coef(double global_sq_norm, float max_norm);

/* 1 when any of x[0..n) is inf or NaN. */
int ao_has_nonfinite(const float *x, size_t n);

/* Dynamic loss scaling for fp16, as torch.cuda.amp.GradScaler. */
typedef struct {
    float scale;          /* current scale; loss is multiplied by it before backward */
    float growth_factor;  /* 2 */
    float backoff_factor; /* 0.5 */
    int growth_interval;  /* 2000 good steps between growths */
    int good_steps;       /* consecutive steps without inf/NaN since the last change */
} ao_loss_scaler;

/* scale `initial` (GradScaler's default: 2^16), x2 every 2000 good steps,
 * x0.5 on overflow. */
void ao_loss_scaler_init(ao_loss_scaler *s, float initial);
/* Records one step's outcome (found_nonfinite: any gradient inf/NaN, on any
 * rank) and updates the scale. Returns 1 when the optimizer step must run, 0
 * when it must be skipped. */
int ao_loss_scaler_update(ao_loss_scaler *s, int found_nonfinite);

#endif
