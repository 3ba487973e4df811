/* The model on the cuda device: ops_ref.h's composition, step for step, with
 * cuBLASLt GEMMs (ao_gemm, row-major) and the kernels of kernels_cuda.h.
 *
 * Storage is fp32 (activations, saved buffers, gradients, parameters). GEMMs
 * are fp32, TF32 tensor-core products of the fp32 storage, or (bf16 / fp16,
 * ao_model_cuda_set_compute) products of 16-bit operands: each GEMM operand is
 * cast from its fp32 storage into a 16-bit copy right before its use, and the
 * GEMM accumulates in fp32. A 16-bit operand cast inside the GEMM (cuBLAS's
 * COMPUTE_32F_FAST_16BF) would run at TF32 speed; stored 16-bit operands run
 * at the dense bf16 rate.
 *
 * Buffers that only GEMMs, a bias gradient, softmax or the GELU kernels read have no
 * fp32 values in 16-bit modes, only their 16-bit copy, as autocast keeps
 * them:
 *   - written by a fused kernel, each the cast of what the fp32 chain would
 *     store, bit for bit (test_fused_cuda): attention's dropped
 *     probabilities and its dS, the FFN activation after GELU and dropout,
 *     the gradient entering each residual branch (LayerNorm backward's
 *     dropout) and the FFN's gradient through GELU;
 *   - written by the GEMM that computes them (mc_gemm_bias's out16: cuBLASLt
 *     rounds its fp32 result once, as the cast would): attention's q, k, v,
 *     the FFN's h and the head's hidden (their bias is added in 16 bits,
 *     autocast's rounding), each residual branch's end (read only by the
 *     dropout, residual add and LayerNorm pass), attention's context and its
 *     gradient, the gradient of q, k, v, and the gradients reaching GELU and
 *     attention's dropped probabilities (whose backward kernels then read
 *     them, and h, in 16 bits), and the scores q k^T (autocast's scores;
 *     attn_forward). The head's fc2 input gradient is not stored at all
 *     (ao_cuda_outer_gelu_backward).
 * A linear layer's bias gradient sums the 16-bit copy of its output
 * gradient, the operand its weight gradient multiplies (autocast's
 * numbers). This saves a cast pass and half of each write and read of those
 * buffers: config/large.yaml on an H200, bench/RESULTS.md. Where the 16-bit
 * copies live, and which are current: operand16_cuda.h.
 *
 * Attention's per-head products (q k^T, P v and their gradients) are one
 * two-level batched GEMM each: within a sample, head j of q/k/v sits hd
 * columns after head j-1 of the [N, 3d] qkv rows and its [T, T] scores T*T
 * floats after the previous head's; samples are T rows, or h T*T blocks,
 * apart (ao_gemm_desc.batch_outer: one launch on cuda, instead of B).
 *
 * Activations and scratch are one device allocation laid out as
 * model_backend.h says (the same layout as the cpu backend), plus the
 * embedding-bag backward's sort workspace. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/kernels_cuda.h"
#include "model/model.h"
#include "model/model_backend.h"
#include "model/model_cuda.h"
#include "model/model_cuda_impl.h"
#include "model/operand16_cuda.h"
#include "model/ops_ref.h"
#include "model/sizes.h"
#include "runtime/device_cuda.h"

/* ---- dropout keys ----------------------------------------------------------------- */

static ao_cuda_dropout_key dropout_key(const ao_model *m, int layer, int64_t step,
                                       const ao_batch *b, uint32_t site)
{
    ao_cuda_dropout_key k = {
        .p = m->shape.dropout,
        .seed = m->shape.seed,
        .step = (uint64_t)step,
        .layer = (uint32_t)layer,
        .site = site,
        .first_sample = (uint64_t)b->first_sample,
        .heads = site == AO_DROP_ATTN_PROBS ? m->shape.heads : 0,
    };
    return k;
}

/* The keys of an encoder layer's four dropout sites in one micro-batch. */
typedef struct {
    ao_cuda_dropout_key probs, attn, hidden, ffn;
} layer_keys;

static layer_keys layer_keys_of(const ao_model *m, int layer, int64_t step, const ao_batch *b)
{
    layer_keys k = {dropout_key(m, layer, step, b, AO_DROP_ATTN_PROBS),
                    dropout_key(m, layer, step, b, AO_DROP_ATTN_OUT),
                    dropout_key(m, layer, step, b, AO_DROP_FFN_HIDDEN),
                    dropout_key(m, layer, step, b, AO_DROP_FFN_OUT)};
    return k;
}

static int same_key(const ao_cuda_dropout_key *a, const ao_cuda_dropout_key *b)
{
    return a->p == b->p && a->seed == b->seed && a->step == b->step && a->layer == b->layer &&
           a->site == b->site && a->first_sample == b->first_sample && a->heads == b->heads;
}

static void masks_alloc(ao_model *m, site_masks *sm, size_t bytes)
{
    const int L = m->shape.layers;
    sm->bytes = bytes;
    sm->key = ao_calloc((size_t)L + 1, sizeof *sm->key);
    sm->mem = bytes ? ao_dev_alloc(m->dev, (size_t)L * bytes) : NULL; /* 0: no dropout */
}

static void masks_free(ao_model *m, site_masks *sm)
{
    if (sm->mem) ao_dev_free(m->dev, sm->mem);
    free(sm->key);
}

/* Where layer l's forward stores its mask under key k (NULL: none stored). */
static uint8_t *masks_out(site_masks *sm, int layer, const ao_cuda_dropout_key *k)
{
    sm->key[layer].p = 0.0f;
    if (!sm->mem || k->p <= 0.0f) return NULL;
    sm->key[layer] = *k;
    return sm->mem + (size_t)(layer - 1) * sm->bytes;
}

/* The mask layer l's forward stored under key k, or NULL (draw again). */
static const uint8_t *masks_in(const site_masks *sm, int layer, const ao_cuda_dropout_key *k)
{
    if (!sm->mem || k->p <= 0.0f || !same_key(&sm->key[layer], k)) return NULL;
    return sm->mem + (size_t)(layer - 1) * sm->bytes;
}

/* ---- attention --------------------------------------------------------------------- */

/* Layer l's (1-based) slice of cm->stats. */
static float *probs_stats(const ao_model *m, int layer)
{
    const cuda_model *cm = m->impl;
    const ao_model_shape *sh = &m->shape;
    return cm->stats + (size_t)(layer - 1) * 2 * sh->batch * sh->heads * sh->seq;
}

/* Per-sample views of one layer's attention buffers. */
typedef struct {
    int B, T, d, H, hd, d3;
    float scale;
} attn_dims;

static attn_dims attn_dims_of(const ao_model_shape *sh)
{
    attn_dims a = {sh->batch, sh->seq, sh->dim, sh->heads, sh->dim / sh->heads, 3 * sh->dim, 0};
    a.scale = (float)(1.0 / sqrt((double)a.hd));
    return a;
}

/* Every head of every sample in one GEMM: within a sample the heads are
 * sa, sb, sc apart, samples oa, ob, oc apart (the [N, 3d] qkv rows and the
 * [B, h, T, T] blocks do not share one stride). */
static gemm_batch heads_batch(const attn_dims *a, long long sa, long long sb, long long sc,
                              long long oa, long long ob, long long oc)
{
    gemm_batch g = {a->H, sa, sb, sc, a->B, oa, ob, oc};
    return g;
}

/* The probabilities after dropout, the P of P v: layer l's (1-based) slice
 * of cm->a.extra, or saved->att itself when dropout is off. Each layer keeps
 * its own, written by its forward (in 16-bit modes only the twin, the GEMM
 * operand) and read by its backward: drawing the masks again there cost a
 * Philox-bound pass over the T x T probabilities per layer (~1.2 ms of a
 * config/large.yaml step on an H200, bench/RESULTS.md), for 3 bytes of device
 * memory per probability. */
static const float *attn_probs(const ao_model *m, const ao_attn_saved *sv, int layer,
                               const ao_cuda_dropout_key *k)
{
    const cuda_model *cm = m->impl;
    const ao_model_shape *sh = &m->shape;
    const size_t np = (size_t)sh->batch * sh->heads * sh->seq * sh->seq;
    return k->p > 0.0f ? cm->a.extra + (size_t)(layer - 1) * np : sv->att;
}

/* Whether attention runs fused (flash.cu): 16-bit GEMMs, a supported
 * shape, and model.attention fused. The fused kernels read q, k, v
 * and write ctx and dq, dk, dv as the 16-bit copies the GEMMs around them
 * take, and keep only each row's logsumexp (and the mask) for the backward. */
static int attn_fused(const ao_model *m)
{
    const cuda_model *cm = m->impl;
    const ao_model_shape *sh = &m->shape;
    return sh->fused_attention && cm->op.half != AO_F32 &&
           ao_cuda_flash_attention_supported(cm->op.half, sh->seq, sh->dim / sh->heads);
}

/* The unfused chain between the projections: scores, softmax and dropout,
 * ctx = P v, leaving ctx's 16-bit copy current (qkv's is, on entry). */
static void attn_context_unfused(ao_model *m, ao_stream *s, int layer, const ao_attn_saved *sv,
                                 const ao_cuda_dropout_key *kp)
{
    cuda_model *cm = m->impl;
    const attn_dims a = attn_dims_of(&m->shape);
    const int N = a.B * a.T;
    const long long TT = (long long)a.T * a.T;
    const long long Td3 = (long long)a.T * a.d3, Td = (long long)a.T * a.d, HTT = a.H * TT;
    /* scores = scale q k^T. In 16-bit modes they are written in 16 bits
     * (autocast's scores) into att's own bytes, and the softmax keeps each
     * row's (max, 1/sum) instead of its probabilities, from which the
     * backward computes them again: att's floats are not written. */
    ao_gemm_desc scores =
        mc_gemm_desc(m, s, 0, 1, a.T, a.T, a.hd, a.scale, sv->qkv, a.d3, sv->qkv + a.d, a.d3, 0.0f,
                     sv->att, a.T, heads_batch(&a, a.hd, a.hd, TT, Td3, Td3, HTT));
    const int half = cm->op.half != AO_F32;
    if (half) scores.c_type = cm->op.half;
    ao_gemm(m->dev, s, &scores);
    /* softmax, dropout and (16-bit modes) the operand cast in one pass: in
     * 16-bit modes the dropped probabilities exist only as the twin */
    const float *P = attn_probs(m, sv, layer, kp);
    const size_t np = (size_t)a.B * a.H * TT;
    KCHECK(ao_cuda_softmax_dropout_forward(
        half ? NULL : sv->att, half ? probs_stats(m, layer) : NULL,
        half ? ao_op16_twin_of(&cm->op, P) : (void *)P, cm->op.half, sv->att, cm->op.half, a.B, a.H,
        a.T, kp, masks_out(&cm->probs_masks, layer, kp), ao_cuda_stream(s)));
    ao_op16_mark_current(&cm->op, s, P, np, 0);
    /* ctx = P v, heads concatenated (16-bit modes: only its 16-bit copy) */
    const int direct =
        mc_gemm_operand(m, s, 0, 0, a.T, a.hd, a.T, 1.0f, P, a.T, sv->qkv + 2 * a.d, a.d3, sv->ctx,
                        a.d, heads_batch(&a, TT, a.hd, a.hd, HTT, Td3, Td));
    ao_op16_mark_current(&cm->op, s, sv->ctx, (size_t)N * a.d, !direct);
}

/* out: the branch's end, as mc_linear_forward_branch writes it; returns
 * whether only its 16-bit copy was. */
static int attn_forward(ao_model *m, ao_stream *s, int layer, float *out, const ao_attn_saved *sv,
                        const float *x, const ao_attn_weights *w, const ao_cuda_dropout_key *kp)
{
    cuda_model *cm = m->impl;
    const attn_dims a = attn_dims_of(&m->shape);
    const int N = a.B * a.T;

    const int mark = cm->op.nprepared;
    /* q, k, v (16-bit modes: only their 16-bit copy), current through both
     * products (only att, extra, ctx and out are written until the marks
     * are dropped) */
    mc_linear_forward_operand(m, s, sv->qkv, x, w->in_w, w->in_b, N, a.d, a.d3);
    cm->fused[layer] = (unsigned char)attn_fused(m);
    if (cm->fused[layer]) {
        const uint8_t *pre = masks_in(&cm->probs_masks, layer, kp); /* cuda_predraw's */
        KCHECK(ao_cuda_flash_attention_forward(
            ao_op16_twin_of(&cm->op, sv->ctx), probs_stats(m, layer),
            ao_op16_twin_of(&cm->op, sv->qkv), cm->op.half, a.B, a.H, a.T, a.hd, a.scale, kp, pre,
            pre ? NULL : masks_out(&cm->probs_masks, layer, kp), ao_cuda_stream(s)));
        ao_op16_mark_current(&cm->op, s, sv->ctx, (size_t)N * a.d, 0);
    } else {
        attn_context_unfused(m, s, layer, sv, kp);
    }
    const int out16 = mc_linear_forward_branch(m, s, out, sv->ctx, w->out_w, w->out_b, N, a.d, a.d);
    cm->op.nprepared = mark;
    return out16;
}

/* ao_attn_backward, with the dropped probabilities the forward kept
 * (attn_probs); dx = the input gradient + residual (the gradient around the
 * branch). */
static void attn_backward(ao_model *m, ao_stream *s, int layer, float *dx, const float *residual,
                          const ao_attn_weights *g, const float *dout, const float *x,
                          const ao_attn_weights *w, const ao_attn_saved *sv,
                          const ao_cuda_dropout_key *kp, float *scratch)
{
    cuda_model *cm = m->impl;
    const attn_dims a = attn_dims_of(&m->shape);
    const int N = a.B * a.T;
    const long long TT = (long long)a.T * a.T;
    cudaStream_t cs = ao_cuda_stream(s);
    float *dqkv = scratch, *dctx = dqkv + (size_t)N * a.d3, *dp = dctx + (size_t)N * a.d;

    /* qkv stays current through both loops (they write dP and dqkv only);
     * P and dctx (16-bit modes: only its 16-bit copy) through the first */
    const int mark = cm->op.nprepared;
    ao_op16_prepare(&cm->op, s, sv->qkv, (size_t)N * a.d3);
    const int mark_qkv = cm->op.nprepared;
    mc_linear_backward_plus(m, s, dctx, NULL, g->out_w, g->out_b, dout, sv->ctx, w->out_w, N, a.d,
                            a.d, 1);
    if (cm->fused[layer]) {
        /* dctx's copy is current (mc_linear_backward_plus), ctx's is the
         * forward's; dP's scratch (4 bytes a probability) holds the rows'
         * delta and dS (ao_cuda_flash_backward_scratch_bytes: 2 bytes a
         * probability and 4 a row) */
        ao_op16_mark_current(&cm->op, s, sv->ctx, (size_t)N * a.d, !cm->saved_current[layer]);
        KCHECK(ao_cuda_flash_attention_backward(
            ao_op16_twin_of(&cm->op, dqkv), dp, ao_op16_twin_of(&cm->op, dctx),
            ao_op16_twin_of(&cm->op, sv->ctx), probs_stats(m, layer),
            ao_op16_twin_of(&cm->op, sv->qkv), cm->op.half, a.B, a.H, a.T, a.hd, a.scale, kp,
            masks_in(&cm->probs_masks, layer, kp), cs));
        const ao_gemm_desc dq = ao_cuda_flash_dq_gemm(ao_op16_twin_of(&cm->op, dqkv), dp,
                                                      ao_op16_twin_of(&cm->op, sv->qkv),
                                                      cm->op.half, a.B, a.H, a.T, a.hd);
        ao_gemm(m->dev, s, &dq);
        cm->op.nprepared = mark;
        ao_op16_mark_current(&cm->op, s, dqkv, (size_t)N * a.d3, 0);
        mc_linear_backward_plus(m, s, dx, residual, g->in_w, g->in_b, dqkv, x, w->in_w, N, a.d,
                                a.d3, 0);
        return;
    }
    const float *P = attn_probs(m, sv, layer, kp);
    const size_t np = (size_t)a.B * a.H * TT;
    /* P's twin is the forward's unless that forward ran in fp32 */
    ao_op16_mark_current(&cm->op, s, P, np, !cm->saved_current[layer]);
    const long long Td3 = (long long)a.T * a.d3, Td = (long long)a.T * a.d, HTT = a.H * TT;
    /* d(dropped P) = dctx v^T; dv = P_dropped^T dctx; dq, dk, dv go into
     * dqkv's 16-bit copy alone in 16-bit modes (the three mc_gemm_operand
     * calls decide alike: same buffer, no bias) */
    const int dp16 = mc_gemm_operand(m, s, 0, 1, a.T, a.T, a.hd, 1.0f, dctx, a.d, sv->qkv + 2 * a.d,
                                     a.d3, dp, a.T, heads_batch(&a, a.hd, a.hd, TT, Td, Td3, HTT));
    mc_gemm_operand(m, s, 1, 0, a.T, a.hd, a.T, 1.0f, P, a.T, dctx, a.d, dqkv + 2 * a.d, a.d3,
                    heads_batch(&a, TT, a.hd, a.hd, HTT, Td, Td3));
    cm->op.nprepared = mark_qkv;
    /* through the dropout, then the softmax (scale folded in): dS, in
     * 16-bit modes from dP's 16-bit copy into that copy (its only one); the
     * probabilities as the forward kept them (attn_forward) */
    ao_dtype dp_type;
    const void *dp_in = ao_op16_input_of(&cm->op, dp, dp16, &dp_type);
    ao_cuda_softmax_saved saved = {sv->att, NULL, AO_F32, NULL};
    if (cm->saved_current[layer])
        saved = (ao_cuda_softmax_saved){NULL, sv->att, cm->op.half, probs_stats(m, layer)};
    KCHECK(ao_cuda_softmax_dropout_backward(
        cm->op.half != AO_F32 ? ao_op16_twin_of(&cm->op, dp) : dp, cm->op.half, dp_in, dp_type,
        &saved, a.scale, a.B, a.H, a.T, kp, masks_in(&cm->probs_masks, layer, kp), cs));
    ao_op16_mark_current(&cm->op, s, dp, np, 0);
    /* dq = dS k; dk = dS^T q */
    mc_gemm_operand(m, s, 0, 0, a.T, a.hd, a.T, 1.0f, dp, a.T, sv->qkv + a.d, a.d3, dqkv, a.d3,
                    heads_batch(&a, TT, a.hd, a.hd, HTT, Td3, Td3));
    const int direct =
        mc_gemm_operand(m, s, 1, 0, a.T, a.hd, a.T, 1.0f, dp, a.T, sv->qkv, a.d3, dqkv + a.d, a.d3,
                        heads_batch(&a, TT, a.hd, a.hd, HTT, Td3, Td3));
    cm->op.nprepared = mark;
    ao_op16_mark_current(&cm->op, s, dqkv, (size_t)N * a.d3, !direct);
    mc_linear_backward_plus(m, s, dx, residual, g->in_w, g->in_b, dqkv, x, w->in_w, N, a.d, a.d3,
                            0);
}

/* ---- encoder layer ------------------------------------------------------------------- */

static void encoder_forward(ao_model *m, ao_stream *s, int layer, float *y,
                            const ao_encoder_saved *sv, const float *x, const ao_encoder_weights *w,
                            const ao_batch *b, int64_t step)
{
    cuda_model *cm = m->impl;
    const ao_model_shape *sh = &m->shape;
    const int N = sh->batch * sh->seq, d = sh->dim, ff = sh->ff;
    const size_t nd = (size_t)N * d, nff = (size_t)N * ff;
    const size_t tok_ff = (size_t)sh->seq * ff;
    const layer_keys k = layer_keys_of(m, layer, step, b);
    cudaStream_t cs = ao_cuda_stream(s);

    /* each branch's end (in 16-bit modes its 16-bit copy only), its dropout,
     * the residual add and the LayerNorm in one pass, which stores the fp32
     * sum (r1, r2: the LayerNorm backward's input); each LayerNorm writes its
     * output's 16-bit copy too (the next GEMM's operand) */
    const int r1_16 = attn_forward(m, s, layer, sv->r1, &sv->attn, x, &w->attn, &k.probs);
    ao_dtype br_type;
    const void *br = ao_op16_input_of(&cm->op, sv->r1, r1_16, &br_type);
    KCHECK(ao_cuda_dropout_residual_layernorm(sv->r1, sv->x1, ao_op16_twin_or_null(&cm->op, sv->x1),
                                              cm->op.half, sv->ln1_mean, sv->ln1_rstd, br, br_type,
                                              x, w->ln1_w, w->ln1_b, N, d, sh->batch, &k.attn, cs));
    const int mark = cm->op.nprepared;
    ao_op16_mark_current(&cm->op, s, sv->x1, nd, 0);
    /* h: in 16-bit modes only its 16-bit copy, which both GELU kernels read
     * (the backward knows it from saved_current: the unit is staged, so
     * its bias has a 16-bit copy) */
    const int h16 = mc_gemm_bias(m, s, 0, 1, N, ff, d, 1.0f, sv->x1, d, w->lin1_w, d, 0.0f, sv->h,
                                 ff, single, w->lin1_b, NULL, 1);
    if (h16 != (cm->op.half != AO_F32))
        ao_fatal(AO_EXIT_FAIL, "model", "layer %d: the FFN input not written in 16 bits", layer);
    ao_dtype h_type;
    const void *h = ao_op16_input_of(&cm->op, sv->h, h16, &h_type);
    /* GELU and dropout in one pass; in 16-bit modes `a` is only stored as
     * the GEMM operand (its twin), which this layer's backward reuses. The
     * mask: cuda_predraw's, else drawn here and stored for the backward. */
    const uint8_t *pre = masks_in(&cm->hidden_masks, layer, &k.hidden);
    uint8_t *mask_out = pre ? NULL : masks_out(&cm->hidden_masks, layer, &k.hidden);
    if (cm->op.half != AO_F32) {
        KCHECK(ao_cuda_gelu_dropout(ao_op16_twin_of(&cm->op, sv->a), cm->op.half, h, h_type,
                                    sh->batch, tok_ff, &k.hidden, pre, mask_out, cs));
        ao_op16_mark_current(&cm->op, s, sv->a, nff, 0);
    } else {
        KCHECK(ao_cuda_gelu_dropout(sv->a, AO_F32, h, h_type, sh->batch, tok_ff, &k.hidden, pre,
                                    mask_out, cs));
    }
    const int r2_16 = mc_linear_forward_branch(m, s, sv->r2, sv->a, w->lin2_w, w->lin2_b, N, ff, d);
    cm->op.nprepared = mark;
    br = ao_op16_input_of(&cm->op, sv->r2, r2_16, &br_type);
    KCHECK(ao_cuda_dropout_residual_layernorm(
        sv->r2, y, ao_op16_twin_or_null(&cm->op, y), cm->op.half, sv->ln2_mean, sv->ln2_rstd, br,
        br_type, sv->x1, w->ln2_w, w->ln2_b, N, d, sh->batch, &k.ffn, cs));
    cm->input_current[layer] = cm->op.half != AO_F32;
}

static void encoder_backward(ao_model *m, ao_stream *s, int layer, float *dx,
                             const ao_encoder_weights *g, const float *dy, const float *x,
                             const ao_encoder_weights *w, const ao_encoder_saved *sv,
                             const ao_batch *b, int64_t step, float *scratch)
{
    cuda_model *cm = m->impl;
    const ao_model_shape *sh = &m->shape;
    const int N = sh->batch * sh->seq, d = sh->dim, ff = sh->ff;
    const size_t nd = (size_t)N * d, nff = (size_t)N * ff;
    const size_t tok_ff = (size_t)sh->seq * ff;
    const layer_keys k = layer_keys_of(m, layer, step, b);
    cudaStream_t cs = ao_cuda_stream(s);
    float *dr = scratch;       /* [N, d]: dr2, later dr1 */
    float *dbranch = dr + nd;  /* [N, d]: gradient entering a residual branch */
    float *dx1 = dbranch + nd; /* [N, d] */
    float *da = dx1 + nd;      /* [N, ff] */
    float *attn_scratch = da + nff;
    fresh_grads fg = {0};
    mc_fresh_add(&fg, g->attn.in_b, 3 * (size_t)d);
    mc_fresh_add(&fg, g->attn.out_b, (size_t)d);
    mc_fresh_add(&fg, g->lin1_b, (size_t)ff);
    mc_fresh_add(&fg, g->lin2_b, (size_t)d);
    mc_fresh_add(&fg, g->ln1_w, (size_t)d);
    mc_fresh_add(&fg, g->ln1_b, (size_t)d);
    mc_fresh_add(&fg, g->ln2_w, (size_t)d);
    mc_fresh_add(&fg, g->ln2_b, (size_t)d);
    mc_fresh_zero(m, s, &fg);

    /* LayerNorm's backward and the FFN branch's gradient through its dropout,
     * in fp32 (the bias gradient) and 16 bits (the GEMMs), in one pass; each
     * 16-bit copy stays current until its GEMMs are enqueued */
    const int mark = cm->op.nprepared;
    KCHECK(ao_cuda_layernorm_backward_dropout(
        dr, g->ln2_w, g->ln2_b, dy, sv->r2, sv->ln2_mean, sv->ln2_rstd, w->ln2_w, N, d,
        ao_op16_fp32_or_null(&cm->op, dbranch), ao_op16_twin_or_null(&cm->op, dbranch), cm->op.half,
        sh->batch, &k.ffn, cs));
    ao_op16_mark_current(&cm->op, s, dbranch, nd, 0);
    /* da in the precision of h: 16 bits where the forward ran in 16 bits */
    const int h16 = cm->saved_current[layer];
    const int da16 = mc_linear_backward_plus(m, s, da, NULL, g->lin2_w, g->lin2_b, dbranch, sv->a,
                                             w->lin2_w, N, ff, d, h16);
    cm->op.nprepared = mark;
    if (da16 != h16)
        ao_fatal(AO_EXIT_FAIL, "model", "layer %d: FFN gradient in %d bits, its input in %d", layer,
                 da16 ? 16 : 32, h16 ? 16 : 32);
    /* dropout and GELU backward in one pass, in 16-bit modes only into da's
     * 16-bit copy (over its input there, element for element), which both
     * lin1 GEMMs read, with lin1's bias gradient (the sums of that copy) */
    ao_dtype in_type;
    const void *h_in = ao_op16_input_of(&cm->op, sv->h, h16, &in_type);
    const void *da_in = ao_op16_input_of(&cm->op, da, h16, &in_type);
    KCHECK(ao_cuda_dropout_gelu_backward_bias(
        ao_op16_fp32_or_null(&cm->op, da), ao_op16_twin_or_null(&cm->op, da), cm->op.half, da_in,
        h_in, in_type, sh->batch, tok_ff, &k.hidden, masks_in(&cm->hidden_masks, layer, &k.hidden),
        g->lin1_b, ff, cs));
    ao_op16_mark_current(&cm->op, s, da, nff, 0);
    /* with the residual around the FFN */
    mc_linear_backward_plus(m, s, dx1, dr, g->lin1_w, NULL, da, sv->x1, w->lin1_w, N, d, ff, 0);
    cm->op.nprepared = mark;

    /* attention branch, its gradient as the FFN's */
    KCHECK(ao_cuda_layernorm_backward_dropout(
        dr, g->ln1_w, g->ln1_b, dx1, sv->r1, sv->ln1_mean, sv->ln1_rstd, w->ln1_w, N, d,
        ao_op16_fp32_or_null(&cm->op, dbranch), ao_op16_twin_or_null(&cm->op, dbranch), cm->op.half,
        sh->batch, &k.attn, cs));
    ao_op16_mark_current(&cm->op, s, dbranch, nd, 0);
    /* with the residual around attention */
    attn_backward(m, s, layer, dx, dr, &g->attn, dbranch, x, &w->attn, &sv->attn, &k.probs,
                  attn_scratch);
    cm->op.nprepared = mark;
}

/* ---- binding ------------------------------------------------------------------------- */

/* The weight matrices each pass multiplies, staged in 16 bits at its start:
 * an encoder layer's whole unit (its matrices and the small vectors between
 * them), the root's matrices but not its embedding table (not a GEMM
 * operand). */
static void stage_layer(cuda_model *cm, ao_stream *s, const ao_model_shape *sh, const float *params)
{
    const ao_encoder_shape es = ao_model_encoder_shape(sh);
    const ao_op16_range r = {params, ao_encoder_param_count(&es)};
    ao_op16_stage_weights(&cm->op, s, &r, 1);
}

static void stage_input(cuda_model *cm, ao_stream *s, const ao_input_shape *is,
                        const ao_input_weights *iw, int with_dense)
{
    const ao_op16_range r[2] = {{iw->sparse_w, (size_t)is->dim * is->emb_dim},
                                {iw->dense_w, (size_t)is->dim * is->dense_in}};
    ao_op16_stage_weights(&cm->op, s, r, with_dense ? 2 : 1);
}

/* fc1's weights, fc1's bias and fc2's weights, adjacent (ao_head_weights_bind):
 * one range, so that fc1 finds its bias's 16-bit copy and writes its hidden
 * only in 16 bits (mc_gemm_bias's out16). */
static void stage_head(cuda_model *cm, ao_stream *s, const ao_head_shape *hs,
                       const ao_head_weights *hw)
{
    const ao_op16_range r = {hw->fc1_w, ao_head_staged_floats(hs)};
    ao_op16_stage_weights(&cm->op, s, &r, 1);
}

/* ---- the backend ------------------------------------------------------------------------ */

static int cuda_create(ao_model *m)
{
    const ao_model_shape *s = &m->shape;
    const int L = s->layers;
    const size_t N = (size_t)s->batch * s->seq;
    if (N * s->sparse > (size_t)INT32_MAX) {
        ao_error("model",
                 "batch_size x sequence_length x sparse_features = %zu ids; the cuda "
                 "embedding backward sorts at most 2^31 - 1 per micro-batch",
                 N * s->sparse);
        return AO_EXIT_USAGE;
    }
    /* model/sizes.h: the sizes `aorta plan` adds up */
    ao_model_cuda_sizes z;
    ao_model_cuda_sizes_of(s, &z);
    cuda_model *c = ao_calloc(1, sizeof *c);
    c->compute = AO_COMPUTE_DEFAULT;
    c->op.half = AO_F32;
    c->saved_current = ao_calloc((size_t)L + 1, 1);
    c->input_current = ao_calloc((size_t)L + 1, 1);
    c->fused = ao_calloc((size_t)L + 1, 1);
    masks_alloc(m, &c->hidden_masks, z.hidden_mask_bytes);
    masks_alloc(m, &c->probs_masks, z.probs_mask_bytes);
    /* extra: every layer's dropped attention probabilities (attn_probs) */
    ao_model_acts_alloc(m, &c->a, z.extra_floats, z.scratch_floats);
    c->op.arena = c->a.mem;
    c->op.arena_floats = c->a.floats;
    if (z.stats_bytes) c->stats = ao_dev_alloc(m->dev, z.stats_bytes);
    const size_t ws = ao_cuda_embedding_bag_backward_workspace((int)N, s->sparse, s->vocab);
    c->emb_workspace = ws ? ao_dev_alloc(m->dev, ws) : NULL;
    m->impl = c;
    return 0;
}

static void cuda_destroy(ao_model *m)
{
    cuda_model *c = m->impl;
    ao_model_acts_free(m, &c->a);
    if (c->emb_workspace) ao_dev_free(m->dev, c->emb_workspace);
    ao_op16_free(&c->op, m->dev);
    free(c->saved_current);
    free(c->input_current);
    free(c->fused);
    masks_free(m, &c->hidden_masks);
    masks_free(m, &c->probs_masks);
    if (c->stats) ao_dev_free(m->dev, c->stats);
    free(c);
}

static void cuda_forward_input(ao_model *m, ao_stream *s, const float *root, const ao_batch *b,
                               int64_t step)
{
    (void)step;
    cuda_model *c = m->impl;
    const ao_input_shape is = ao_model_input_shape(&m->shape);
    ao_input_weights iw;
    ao_head_weights hw;
    ao_model_bind_root(&m->shape, (float *)root, &iw, &hw);
    stage_input(c, s, &is, &iw, 1);
    cudaStream_t cs = ao_cuda_stream(s);
    /* ao_input_forward: dense projection, pooled embeddings, sparse projection */
    mc_linear_forward(m, s, c->a.x[0], b->dense, iw.dense_w, iw.dense_b, is.n, is.dense_in, is.dim);
    /* the engine's 16-bit copy of the table where it gathered one: the
     * engine casts only what the model reads in fp32 (fp32_parts) */
    const void *t16 = ao_op16_shared_copy(&c->op, iw.table, (size_t)is.vocab * is.emb_dim);
    KCHECK(ao_cuda_embedding_bag_mean_forward(c->a.pooled, b->ids, t16 ? t16 : iw.table,
                                              t16 ? c->op.half : AO_F32, is.n, is.sparse,
                                              is.emb_dim, cs));
    mc_gemm_bias(m, s, 0, 1, is.n, is.dim, is.emb_dim, 1.0f, c->a.pooled, is.emb_dim, iw.sparse_w,
                 is.emb_dim, 1.0f, c->a.x[0], is.dim, single, iw.sparse_b, NULL, 0);
}

static void cuda_forward_layer(ao_model *m, ao_stream *s, int layer, const float *params,
                               const ao_batch *b, int64_t step)
{
    cuda_model *c = m->impl;
    const ao_encoder_shape es = ao_model_encoder_shape(&m->shape);
    ao_encoder_weights w;
    ao_encoder_weights_bind(&w, (float *)params, &es);
    stage_layer(c, s, &m->shape, params);
    if (c->input_current[layer - 1])
        ao_op16_mark_current(&c->op, s, c->a.x[layer - 1],
                             (size_t)m->shape.batch * m->shape.seq * m->shape.dim, 0);
    encoder_forward(m, s, layer, c->a.x[layer], &c->a.layer_saved[layer - 1], c->a.x[layer - 1], &w,
                    b, step);
    c->saved_current[layer] = c->op.half != AO_F32;
}

/* The head's GELU goes through the FFN's fused kernels with no dropout. */
static const ao_cuda_dropout_key no_dropout = {0};

static void cuda_forward_head(ao_model *m, ao_stream *s, const float *root, const ao_batch *b,
                              double normalizer, float *loss_dev)
{
    cuda_model *c = m->impl;
    const ao_head_shape hs = ao_model_head_shape(&m->shape);
    const ao_head_saved *sv = &c->a.head_saved;
    ao_input_weights iw;
    ao_head_weights hw;
    ao_model_bind_root(&m->shape, (float *)root, &iw, &hw);
    stage_head(c, s, &hs, &hw);
    cudaStream_t cs = ao_cuda_stream(s);
    /* ao_head_forward, then the loss */
    KCHECK(ao_cuda_layernorm_forward(sv->ln_out, ao_op16_twin_or_null(&c->op, sv->ln_out),
                                     c->op.half, sv->ln_mean, sv->ln_rstd, c->a.x[m->shape.layers],
                                     hw.ln_w, hw.ln_b, hs.n, hs.dim, cs));
    const int mark = c->op.nprepared;
    ao_op16_mark_current(&c->op, s, sv->ln_out, (size_t)hs.n * hs.dim, 0);
    /* as the encoder's FFN: in 16-bit modes fc1 writes hid only in 16 bits
     * and GELU its activation only as the fc2 operand, no dropout (p 0) */
    const size_t nh = (size_t)hs.n * hs.hidden;
    const int h16 =
        mc_gemm_bias(m, s, 0, 1, hs.n, hs.hidden, hs.dim, 1.0f, sv->ln_out, hs.dim, hw.fc1_w,
                     hs.dim, 0.0f, sv->hid, hs.hidden, single, hw.fc1_b, NULL, 1);
    ao_dtype h_type;
    const void *h = ao_op16_input_of(&c->op, sv->hid, h16, &h_type);
    KCHECK(ao_cuda_gelu_dropout(c->op.half != AO_F32 ? ao_op16_twin_of(&c->op, sv->act) : sv->act,
                                c->op.half, h, h_type, 1, nh, &no_dropout, NULL, NULL, cs));
    ao_op16_mark_current(&c->op, s, sv->act, nh, 0);
    c->head_h16 = h16;
    mc_linear_forward(m, s, c->a.z, sv->act, hw.fc2_w, hw.fc2_b, hs.n, hs.hidden, 1);
    c->op.nprepared = mark;
    KCHECK(ao_cuda_bce_loss(loss_dev, c->a.z, b->target, b->weight, hs.n, normalizer, cs));
}

static void cuda_backward_head(ao_model *m, ao_stream *s, const float *root, float *root_grad,
                               const ao_batch *b, double normalizer)
{
    cuda_model *c = m->impl;
    const int L = m->shape.layers;
    const ao_head_shape hs = ao_model_head_shape(&m->shape);
    const ao_head_saved *sv = &c->a.head_saved;
    ao_input_weights iw, ig;
    ao_head_weights hw, hg;
    ao_model_bind_root(&m->shape, (float *)root, &iw, &hw);
    ao_model_bind_root(&m->shape, root_grad, &ig, &hg);
    stage_head(c, s, &hs, &hw);
    cudaStream_t cs = ao_cuda_stream(s);
    float *dact = c->a.scratch, *dln = c->a.scratch + (size_t)hs.n * hs.hidden;
    fresh_grads fg = {0};
    mc_fresh_add(&fg, hg.ln_w, (size_t)hs.dim);
    mc_fresh_add(&fg, hg.ln_b, (size_t)hs.dim);
    mc_fresh_add(&fg, hg.fc1_b, (size_t)hs.hidden);
    mc_fresh_add(&fg, hg.fc2_b, 1);
    mc_fresh_zero(m, s, &fg);

    KCHECK(ao_cuda_bce_loss_backward(c->a.dz, c->a.z, b->target, b->weight, hs.n, normalizer, cs));
    /* ao_head_backward, as the encoder's FFN: dact in the precision of hid,
     * GELU's backward then only into dact's 16-bit copy in 16-bit modes */
    const size_t nh = (size_t)hs.n * hs.hidden;
    const int mark = c->op.nprepared;
    const int h16 = c->head_h16;
    if (c->op.half != AO_F32) { /* the forward's 16-bit copies, still whole */
        ao_op16_mark_current(&c->op, s, sv->act, nh, 0);
        ao_op16_mark_current(&c->op, s, sv->ln_out, (size_t)hs.n * hs.dim, 0);
    }
    /* fc2 has one output, so its input gradient dz w is an outer product: in
     * 16-bit modes it is formed inside GELU's backward, never stored */
    const void *w2_16 = h16 ? ao_op16_staged_copy(&c->op, hw.fc2_w, (size_t)hs.hidden) : NULL;
    if (w2_16) {
        mc_linear_backward_plus(m, s, NULL, NULL, hg.fc2_w, hg.fc2_b, c->a.dz, sv->act, hw.fc2_w,
                                hs.n, hs.hidden, 1, 0);
        KCHECK(ao_cuda_outer_gelu_backward(ao_op16_twin_of(&c->op, dact), c->op.half, c->a.dz,
                                           w2_16, ao_op16_twin_of(&c->op, sv->hid), hs.n, hs.hidden,
                                           cs));
    } else {
        const int dact16 = mc_linear_backward_plus(m, s, dact, NULL, hg.fc2_w, hg.fc2_b, c->a.dz,
                                                   sv->act, hw.fc2_w, hs.n, hs.hidden, 1, h16);
        if (dact16 != h16)
            ao_fatal(AO_EXIT_FAIL, "model", "head: gradient in %d bits, its input in %d",
                     dact16 ? 16 : 32, h16 ? 16 : 32);
        ao_dtype in_type;
        const void *h_in = ao_op16_input_of(&c->op, sv->hid, h16, &in_type);
        const void *dact_in = ao_op16_input_of(&c->op, dact, h16, &in_type);
        KCHECK(ao_cuda_dropout_gelu_backward(ao_op16_fp32_or_null(&c->op, dact),
                                             ao_op16_twin_or_null(&c->op, dact), c->op.half,
                                             dact_in, h_in, in_type, 1, nh, &no_dropout, NULL, cs));
    }
    ao_op16_mark_current(&c->op, s, dact, nh, 0);
    mc_linear_backward(m, s, dln, hg.fc1_w, hg.fc1_b, dact, sv->ln_out, hw.fc1_w, hs.n, hs.dim,
                       hs.hidden);
    c->op.nprepared = mark;
    KCHECK(ao_cuda_layernorm_backward(c->a.dx[L % 2], hg.ln_w, hg.ln_b, dln, c->a.x[L], sv->ln_mean,
                                      sv->ln_rstd, hw.ln_w, hs.n, hs.dim, cs));
}

static void cuda_backward_layer(ao_model *m, ao_stream *s, int layer, const float *params,
                                float *grad, const ao_batch *b, int64_t step)
{
    cuda_model *c = m->impl;
    const ao_encoder_shape es = ao_model_encoder_shape(&m->shape);
    ao_encoder_weights w, g;
    ao_encoder_weights_bind(&w, (float *)params, &es);
    ao_encoder_weights_bind(&g, grad, &es);
    stage_layer(c, s, &m->shape, params);
    if (c->saved_current[layer]) {
        const ao_encoder_saved *sv = &c->a.layer_saved[layer - 1];
        const size_t N = (size_t)m->shape.batch * m->shape.seq, d = (size_t)m->shape.dim;
        ao_op16_mark_current(&c->op, s, c->a.x[layer - 1], N * d, 0);
        ao_op16_mark_current(&c->op, s, sv->attn.qkv, N * 3 * d, 0);
        ao_op16_mark_current(&c->op, s, sv->attn.ctx, N * d, 0);
        ao_op16_mark_current(&c->op, s, sv->x1, N * d, 0);
        ao_op16_mark_current(&c->op, s, sv->a, N * (size_t)m->shape.ff, 0);
    }
    encoder_backward(m, s, layer, c->a.dx[(layer - 1) % 2], &g, c->a.dx[layer % 2],
                     c->a.x[layer - 1], &w, &c->a.layer_saved[layer - 1], b, step, c->a.scratch);
}

static void cuda_backward_input(ao_model *m, ao_stream *s, const float *root, float *root_grad,
                                const ao_batch *b)
{
    cuda_model *c = m->impl;
    const ao_input_shape is = ao_model_input_shape(&m->shape);
    ao_input_weights iw, ig;
    ao_head_weights hw, hg;
    ao_model_bind_root(&m->shape, (float *)root, &iw, &hw);
    ao_model_bind_root(&m->shape, root_grad, &ig, &hg);
    stage_input(c, s, &is, &iw, 0); /* dense_w's input gradient is not computed */
    float *dpooled = c->a.scratch;
    fresh_grads fg = {0};
    mc_fresh_add(&fg, ig.dense_b, (size_t)is.dim);
    mc_fresh_add(&fg, ig.table, (size_t)is.vocab * is.emb_dim);
    mc_fresh_add(&fg, ig.sparse_b, (size_t)is.dim);
    mc_fresh_zero(m, s, &fg);
    /* ao_input_backward; both projections' GEMMs read the same dy, cast
     * once (each backward would cast it again) */
    const int mark = c->op.nprepared;
    ao_op16_prepare(&c->op, s, c->a.dx[0], (size_t)is.n * is.dim);
    mc_linear_backward(m, s, NULL, ig.dense_w, ig.dense_b, c->a.dx[0], b->dense, iw.dense_w, is.n,
                       is.dense_in, is.dim);
    mc_linear_backward(m, s, dpooled, ig.sparse_w, ig.sparse_b, c->a.dx[0], c->a.pooled,
                       iw.sparse_w, is.n, is.emb_dim, is.dim);
    c->op.nprepared = mark;
    KCHECK(ao_cuda_embedding_bag_mean_backward(ig.table, dpooled, b->ids, is.n, is.sparse,
                                               is.emb_dim, is.vocab, c->emb_workspace,
                                               ao_cuda_stream(s)));
}

/* ao_model_predraw: each layer's hidden mask and, where attention runs
 * fused, its probability mask, stored under the keys of (step, b) where
 * the forward's masks_in finds them; in one launch of 16 jobs, capped at
 * 2 blocks an SM so that the update beside it keeps the rest (a mask the
 * launch cannot take is drawn by its forward). */
static void cuda_predraw(ao_model *m, ao_stream *s, int64_t step, const ao_batch *b)
{
    cuda_model *cm = m->impl;
    const ao_model_shape *sh = &m->shape;
    const size_t hidden = (size_t)sh->seq * sh->ff, probs = (size_t)sh->seq * sh->seq;
    ao_cuda_mask_job *jobs = ao_calloc(2 * (size_t)sh->layers, sizeof *jobs);
    int n = 0;
    for (int layer = 1; layer <= sh->layers; layer++) {
        const layer_keys k = layer_keys_of(m, layer, step, b);
        if (hidden % 128 == 0 && cm->hidden_masks.mem && cm->hidden_masks.bytes % 16 == 0)
            jobs[n++] = (ao_cuda_mask_job){masks_out(&cm->hidden_masks, layer, &k.hidden),
                                           sh->batch, hidden, k.hidden};
        if (attn_fused(m) && probs % 128 == 0 && cm->probs_masks.mem &&
            cm->probs_masks.bytes % 16 == 0)
            jobs[n++] = (ao_cuda_mask_job){masks_out(&cm->probs_masks, layer, &k.probs),
                                           sh->batch * sh->heads, probs, k.probs};
    }
    KCHECK(ao_cuda_draw_masks(jobs, n, 2, ao_cuda_stream(s)));
    free(jobs);
}

const struct ao_model_backend ao_model_cuda_backend = {
    .device_backend = AO_GPU_BACKEND,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .forward_input = cuda_forward_input,
    .forward_layer = cuda_forward_layer,
    .forward_head = cuda_forward_head,
    .backward_head = cuda_backward_head,
    .backward_layer = cuda_backward_layer,
    .backward_input = cuda_backward_input,
    .can_overwrite_grads = 1,
    .predraw = cuda_predraw,
};

/* ---- CUDA-only extras (model_cuda.h) ------------------------------------------------------ */

void ao_model_cuda_set_compute(ao_model *m, ao_compute_mode mode)
{
    if (m->backend != &ao_model_cuda_backend)
        ao_fatal(AO_EXIT_FAIL, "model", "ao_model_cuda_set_compute on a %s model",
                 m->backend->device_backend);
    cuda_model *c = m->impl;
    c->compute = mode;
    const ao_dtype half = mode == AO_COMPUTE_BF16  ? AO_BF16
                          : mode == AO_COMPUTE_F16 ? AO_F16
                                                   : AO_F32;
    /* Without 16-bit support the mode's fp32-operand GEMMs (cuBLAS rounds
     * inside) are the fallback. */
    const ao_dtype was = c->op.half;
    c->op.half = half != AO_F32 && ao_device_supports(m->dev, half) ? half : AO_F32;
    if (c->op.half != was) {
        memset(c->saved_current, 0, (size_t)m->shape.layers + 1);
        memset(c->input_current, 0, (size_t)m->shape.layers + 1);
    }
    if (c->op.half == AO_F32 || c->op.twin) return;
    /* First 16-bit mode: its copies, 2 bytes an element whichever type. */
    ao_model_cuda_sizes z;
    ao_model_cuda_sizes_of(&m->shape, &z);
    ao_op16_alloc(&c->op, m->dev, z.w16_elements, z.outside_elements);
}

void ao_model_cuda_share_params16(ao_model *m, const float *fp32, const void *half, ao_dtype type,
                                  size_t n)
{
    cuda_model *c = m->impl;
    ao_op16_share(&c->op, fp32, half, type, n);
}

int ao_model_cuda_fp32_parts(const ao_model *m, int unit, const float *params, size_t (*parts)[2],
                             int max)
{
    const cuda_model *cm = m->impl;
    const ao_model_shape *sh = &m->shape;
    const size_t n = ao_model_unit_params(sh, unit);
    if (max < 1) return 0;
    if (cm->op.half == AO_F32 || !ao_op16_shared_copy(&cm->op, params, n)) {
        parts[0][0] = 0, parts[0][1] = n;
        return 1;
    }
    /* The matrices the passes multiply (stage_layer, stage_input,
     * stage_head) and the embedding table (cuda_forward_input), in layout
     * order: only their 16-bit copy is read. */
    ao_op16_range w[5];
    int nw = 0;
    if (unit > 0) {
        const ao_encoder_shape es = ao_model_encoder_shape(sh);
        ao_encoder_weights ew;
        ao_encoder_weights_bind(&ew, (float *)params, &es);
        const size_t d = (size_t)sh->dim, ff = (size_t)sh->ff;
        w[nw++] = (ao_op16_range){ew.attn.in_w, 3 * d * d};
        w[nw++] = (ao_op16_range){ew.attn.out_w, d * d};
        w[nw++] = (ao_op16_range){ew.lin1_w, ff * d};
        w[nw++] = (ao_op16_range){ew.lin2_w, d * ff};
    } else {
        const ao_input_shape is = ao_model_input_shape(sh);
        const ao_head_shape hs = ao_model_head_shape(sh);
        ao_input_weights iw;
        ao_head_weights hw;
        ao_model_bind_root(sh, (float *)params, &iw, &hw);
        w[nw++] = (ao_op16_range){iw.dense_w, (size_t)is.dim * is.dense_in};
        w[nw++] = (ao_op16_range){iw.table, (size_t)is.vocab * is.emb_dim};
        w[nw++] = (ao_op16_range){iw.sparse_w, (size_t)is.dim * is.emb_dim};
        w[nw++] = (ao_op16_range){hw.fc1_w, (size_t)hs.hidden * hs.dim};
        w[nw++] = (ao_op16_range){hw.fc2_w, (size_t)hs.hidden};
    }
    int count = 0;
    size_t at = 0;
    for (int i = 0; i <= nw; i++) {
        const size_t end = i < nw ? (size_t)(w[i].p - params) : n;
        if (end > at) {
            if (count == max) return -1;
            parts[count][0] = at, parts[count][1] = end - at;
            count++;
        }
        if (i < nw) at = end + w[i].n;
    }
    return count;
}

void ao_model_cuda_data_fill(ao_stream *s, const ao_data_shape *shape, uint64_t seed,
                             int target_kind, uint64_t first_global_index, int batch, float *dense,
                             int32_t *ids, float *target, float *weight)
{
    KCHECK(ao_cuda_data_fill(shape, seed, target_kind, first_global_index, batch, dense, ids,
                             target, weight, ao_cuda_stream(s)));
}
