/* What model_cuda.c and linear_cuda.c share: the cuda model's state and
 * the GEMM helpers every layer is built from (row-major, fp32 storage; in
 * 16-bit modes the operands' 16-bit copies, operand16_cuda.h). Internal to
 * src/model. */
#ifndef AORTA_MODEL_CUDA_IMPL_H
#define AORTA_MODEL_CUDA_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "model/kernels_cuda.h"
#include "model/model.h"
#include "model/model_backend.h"
#include "model/operand16_cuda.h"
#include "runtime/device_cuda.h"

/* A dropout site's masks (kernels_cuda.h's bytes), a slice per layer,
 * written by the layer's forward under key[l] and read by its backward
 * under the same key instead of drawing them again: the backward kernels
 * were Philox-bound (bench/RESULTS.md). */
typedef struct {
    uint8_t *mem;             /* NULL without dropout */
    size_t bytes;             /* per layer */
    ao_cuda_dropout_key *key; /* [L + 1]; p == 0: nothing stored */
} site_masks;

typedef struct {
    ao_model_acts a;     /* a.extra: [L][B, h, T, T] attention probabilities after dropout */
    void *emb_workspace; /* embedding-bag backward (sort buffers) */
    ao_compute_mode compute;
    /* the 16-bit GEMM operands (op.half: AO_F32 until a 16-bit mode is set) */
    ao_operand16 op;
    /* [L + 1]: encoder layer l's forward ran in 16 bits, so the twin still
     * holds the GEMM inputs it saved (its x, qkv, ctx, x1, a: cast whole,
     * and rewritten in fp32 only by its next forward); its backward reuses
     * them. */
    unsigned char *saved_current;
    /* [L + 1]: x[l]'s twin was written with it by layer l's last LayerNorm
     * in 16 bits, so layer l + 1's forward multiplies it without a cast */
    unsigned char *input_current;
    /* the head's forward wrote its hidden pre-activation only as its 16-bit
     * copy, and its activation's copy is current: the backward reads them */
    int head_h16;
    /* the masks of the FFN-hidden and attention-probabilities dropouts */
    site_masks hidden_masks, probs_masks;
    /* [L][B * h * T][2]: each softmax row's max and 1/sum, kept by a 16-bit
     * forward in place of its probabilities (attn_forward), or the fused
     * forward's logsumexp (the first B * h * T floats) */
    float *stats;
    /* [L + 1]: layer l's forward ran the fused attention (attn_fused), so its
     * backward must too: it kept no probabilities */
    unsigned char *fused;
} cuda_model;

#define KCHECK(call) AO_CUDA_CHECK(call)

/* ---- GEMM helpers (linear_cuda.c) ------------------------------------------------- */

/* A GEMM's batch: `batch` products `stride_x` apart, in `outer` groups
 * `outer_x` apart (attention: heads within samples, ao_gemm_desc). */
typedef struct {
    int batch;
    long long stride_a, stride_b, stride_c;
    int outer;
    long long outer_a, outer_b, outer_c;
} gemm_batch;

/* one product, no batch */
static const gemm_batch single = {1, 0, 0, 0, 1, 0, 0, 0};

/* ao_model_overwrite_grads: the weight gradients' GEMMs overwrite theirs
 * (beta 0); the gradients that kernels add to (biases, LayerNorm, the
 * embedding table) are zeroed first, in one launch a unit. */
#define MAX_FRESH 8
typedef struct {
    float *p[MAX_FRESH];
    size_t n[MAX_FRESH];
    int k;
} fresh_grads;

/* The GEMM c = alpha op(a) op(b) + beta c, with its operands' 16-bit copies
 * in 16-bit modes (cast now where not current). */
ao_gemm_desc mc_gemm_desc(ao_model *m, ao_stream *s, int ta, int tb, int rows, int cols, int inner,
                          float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                          float *c, int ldc, gemm_batch bt);

/* out: NULL, or where the result goes with c only read (ao_gemm_desc.d).
 * out16: in 16-bit modes write the result only as c's 16-bit copy (c an
 * arena buffer whose readers all take that copy; no out, beta 0), a bias
 * then in its staged 16-bit copy. Returns whether it did: the caller marks c
 * current where GEMMs read it. */
int mc_gemm_bias(ao_model *m, ao_stream *s, int ta, int tb, int rows, int cols, int inner,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc, gemm_batch bt, const float *bias, float *out, int out16);

/* mc_gemm_bias without a bias, into fp32 c */
void mc_gemm(ao_model *m, ao_stream *s, int ta, int tb, int rows, int cols, int inner, float alpha,
             const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
             gemm_batch bt);

/* mc_gemm into an arena buffer whose readers all take its 16-bit copy
 * (mc_gemm_bias's out16); returns whether only that copy was written. */
int mc_gemm_operand(ao_model *m, ao_stream *s, int ta, int tb, int rows, int cols, int inner,
                    float alpha, const float *a, int lda, const float *b, int ldb, float *c,
                    int ldc, gemm_batch bt);

/* ao_linear_forward: y[n, out] = x[n, in] w[out, in]^T + b, the bias added
 * in the GEMM's epilogue (fp32, after the fp32 accumulation: the sum a
 * separate pass would make). */
void mc_linear_forward(ao_model *m, ao_stream *s, float *y, const float *x, const float *w,
                       const float *b, int n, int in, int out);

/* mc_linear_forward of a residual branch's end, which only
 * ao_cuda_dropout_residual_layernorm reads: in 16-bit modes written only as
 * its 16-bit copy (autocast's 16-bit linear output; half the bytes to write
 * and read again); returns whether. */
int mc_linear_forward_branch(ao_model *m, ao_stream *s, float *y, const float *x, const float *w,
                             const float *b, int n, int in, int out);

/* mc_linear_forward of a y that only GEMMs read: in 16-bit modes written only
 * as its 16-bit copy (mc_gemm_bias's out16), which it leaves marked current
 * (cast when the GEMM could not write it). The caller drops the mark. */
void mc_linear_forward_operand(ao_model *m, ao_stream *s, float *y, const float *x, const float *w,
                               const float *b, int n, int in, int out);

/* ao_linear_backward: dx = dy w (+ residual, when not NULL: the gradient
 * reaching x around the layer, added in the GEMM's epilogue instead of a
 * pass of its own) when dx, dw += dy^T x, db += column sums. dy feeds both
 * GEMMs and the bias gradient: in 16-bit modes cast once (unless current),
 * and the sums are of that copy. dx_operand: dx is read only by GEMMs or
 * kernels that take its 16-bit copy (no residual), written as mc_gemm_operand
 * does and left marked current; returns whether only that copy was
 * written. */
int mc_linear_backward_plus(ao_model *m, ao_stream *s, float *dx, const float *residual, float *dw,
                            float *db, const float *dy, const float *x, const float *w, int n,
                            int in, int out, int dx_operand);

/* one more gradient for mc_fresh_zero (at most MAX_FRESH a unit) */
void mc_fresh_add(fresh_grads *f, float *p, size_t n);

/* zeroes them in one launch, where the backward overwrites the gradients */
void mc_fresh_zero(ao_model *m, ao_stream *s, const fresh_grads *f);

/* mc_linear_backward_plus without a residual, dx in fp32 */
void mc_linear_backward(ao_model *m, ao_stream *s, float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w, int n, int in, int out);

#endif
