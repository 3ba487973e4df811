/* The model's CUDA kernels (kernels/, one .cu file per op family), behind
 * extern "C" launchers.
 *
 * Each launcher enqueues its kernel(s) on `stream` and returns the launch's
 * error (cudaGetLastError); callers check it with AO_CUDA_CHECK. Every
 * kernel has a plain C reference in ops_ref.h (or data.h) and matches its
 * math: the same formulas, the same dropout masks (rng.h keyed identically),
 * and the same conventions (backward WRITES input gradients and ACCUMULATES
 * parameter gradients).
 *
 * Precision: fp32 storage, fp32 element-wise math; reductions whose length
 * grows with the model (layernorm statistics, softmax sums, column sums, the
 * loss, sums of squares) accumulate in double, as the reference does.
 *
 * Determinism: no floating-point atomics anywhere. Every reduction has a fixed
 * assignment of elements to threads and a fixed combining order, independent
 * of the device, so a run's numbers repeat bit for bit. The embedding-bag
 * backward sorts the (id, position) pairs with CUB's stable radix sort and
 * sums each table row's contributions in position order (the reference's
 * order), instead of scattering with atomics.
 *
 * Where each launcher lives (kernels/): layernorm.cu (LayerNorm and its
 * fused dropout), colsum.cu (the bias gradients' column sums), attention.cu
 * (softmax and its fused dropout), flash.cu (the fused flash-style
 * attention, 16-bit tensor-core products), elementwise.cu (add, scale, GELU,
 * dropout and GELU + dropout, the GELU backward with its bias gradient),
 * casts.cu, optimizer.cu (norms, flags, AdamW), embedding.cu, loss.cu,
 * data.cu and launch.cu; common.cuh, dtype.cuh, dropout.cuh and colsum.cuh
 * (the column sums of the bias and LayerNorm parameter gradients) hold what
 * they share.
 *
 * Only backend files include this header (it includes gpu_compat.h). */
#ifndef AORTA_MODEL_KERNELS_CUDA_H
#define AORTA_MODEL_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "data/data.h"
#include "model/sizes.h"
#include "runtime/device.h"
#include "runtime/gpu_compat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Programmatic dependent launch of the kernels below (kernels/common.cuh's
 * launch()), process-wide, on by default: each kernel is scheduled while the
 * one before it on its stream still runs, which hides the device's latency
 * between kernels. The waiting thread blocks hold SMs, though: a collective
 * launched beside them waits for SMs until a kernel boundary (time its event
 * pair counts as communication; bench/RESULTS.md). The engine turns it off
 * where collectives run beside the compute stream. */
void ao_cuda_set_dependent_launch(int on);

/* ---- element-wise and row-wise --------------------------------------------- */

/* db[c] += sum over rows of dy[n, c] (column sums in double, fixed order),
 * dy of dy_type: AO_F32, or AO_BF16 / AO_F16 (the 16-bit copy of dy that a
 * linear layer's GEMMs read in 16-bit modes; the same sums of its values,
 * bit for bit those of ao_cuda_bias_grad over its fp32 widening). Other
 * types: cudaErrorInvalidValue. */
cudaError_t ao_cuda_bias_grad(float *db, const void *dy, ao_dtype dy_type, int n, int c,
                              cudaStream_t stream);
/* p[r][0, n[r]) := 0 for r < k (k <= 8), in one launch. */
cudaError_t ao_cuda_zero_ranges(float *const *p, const size_t *n, int k, cudaStream_t stream);
/* y = a + b over n elements (y may alias a or b): residual connections. */
cudaError_t ao_cuda_add(float *y, const float *a, const float *b, size_t n, cudaStream_t stream);
/* y = alpha * x (y may alias x). */
cudaError_t ao_cuda_scale(float *y, const float *x, float alpha, size_t n, cudaStream_t stream);

/* Exact (erf) GELU. y may alias x; dx may alias dy. */
cudaError_t ao_cuda_gelu_forward(float *y, const float *x, size_t n, cudaStream_t stream);
cudaError_t ao_cuda_gelu_backward(float *dx, const float *dy, const float *x, size_t n,
                                  cudaStream_t stream);

/* ao_layernorm_forward / _backward. Forward also stores y in half_type
 * (AO_BF16 / AO_F16) at y16 unless y16 is NULL (the next GEMM's operand).
 * Backward writes dx and accumulates dgamma, dbeta (column sums in double). */
cudaError_t ao_cuda_layernorm_forward(float *y, void *y16, ao_dtype half_type, float *mean,
                                      float *rstd, const float *x, const float *gamma,
                                      const float *beta, int n, int c, cudaStream_t stream);
cudaError_t ao_cuda_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy,
                                       const float *x, const float *mean, const float *rstd,
                                       const float *gamma, int n, int c, cudaStream_t stream);

/* Row-wise softmax over the last dim of x[n, c] (max-subtracted; sum in
 * double). y may alias x. */
cudaError_t ao_cuda_softmax_forward(float *y, const float *x, int n, int c, cudaStream_t stream);
/* dx = scale * y * (dy - sum_j y_j dy_j), row by row, y the softmax output
 * (attention folds its 1/sqrt(hd) in here, as ops_ref does). dx may alias dy. */
cudaError_t ao_cuda_softmax_backward(float *dx, const float *dy, const float *y, float scale, int n,
                                     int c, cudaStream_t stream);

/* ---- dropout --------------------------------------------------------------- */

/* What keys a dropout call: ops_ref's ao_dropout_cfg plus the site. With
 * heads == 0 the rows are samples: row b uses ao_dropout_stream(seed, step,
 * layer, site, first_sample + b). With heads > 0 (attention probabilities)
 * the rows are (sample, head) pairs, row r = b * heads + head using
 * ao_rng_child(that stream, head). Element e of a row takes word e of its
 * stream, exactly as ops_ref's dropout and attention. */
typedef struct ao_cuda_dropout_key {
    float p;
    uint64_t seed, step;
    uint32_t layer, site;
    uint64_t first_sample;
    int heads;
} ao_cuda_dropout_key;

/* The mask bytes a dropout pass that stores its mask writes under key
 * (mask_out of ao_cuda_gelu_dropout, the fused attention's and the unfused
 * softmax's), drawn alone: rows = batch, or batch * key.heads for attention
 * probabilities; per_row elements, a multiple of 128; mask 16-byte aligned
 * (others: cudaErrorInvalidValue). p <= 0: nothing drawn. */
typedef struct ao_cuda_mask_job {
    uint8_t *mask;
    int rows;
    size_t per_row;
    ao_cuda_dropout_key key;
} ao_cuda_mask_job;
/* The n jobs' masks, 16 a launch. blocks_per_sm > 0 caps the launch at
 * that many blocks an SM (drawn beside another kernel: ao_model_predraw);
 * 0: as many as the work fills. */
cudaError_t ao_cuda_draw_masks(const ao_cuda_mask_job *jobs, int n, int blocks_per_sm,
                               cudaStream_t stream);
/* y[rows, per_row] = x * factor (forward and backward are the same map).
 * rows = batch (heads == 0) or batch * heads. y may alias x. p <= 0 copies. */
cudaError_t ao_cuda_dropout(float *y, const float *x, int batch, size_t per_row,
                            const ao_cuda_dropout_key *key, cudaStream_t stream);
/* y = dropout(x) + res (res NULL: no add) in fp32 and, unless y16 is NULL,
 * the same values in half_type (AO_BF16 / AO_F16) at y16: a residual
 * branch's end in forward, and in backward the branch's gradient that the
 * bias gradient reads in fp32 and the GEMMs in 16 bits. Bit-identical to
 * ao_cuda_dropout, then ao_cuda_add, then ao_cuda_cast. y may alias x or res
 * (element for element). */
cudaError_t ao_cuda_dropout_residual(float *y, void *y16, ao_dtype half_type, const float *x,
                                     const float *res, int batch, size_t per_row,
                                     const ao_cuda_dropout_key *key, cudaStream_t stream);
/* r = dropout(x) + res as ao_cuda_dropout_residual(r, NULL, AO_F32, x, res,
 * batch, (n / batch) * c, key) makes it, then ao_cuda_layernorm_forward of
 * r, in one pass over the rows where the shapes allow (c % 4 == 0, aligned,
 * rows that fit a block), bit for bit; the two calls otherwise. x is of
 * x_type (AO_F32, or a 16-bit type: a branch GEMM's 16-bit output, read as
 * those values widened to float). n must be a multiple of batch (tokens per
 * sample), key->heads 0; r may alias an fp32 x, or res; a 16-bit x must not
 * overlap r. */
cudaError_t ao_cuda_dropout_residual_layernorm(float *r, float *y, void *y16, ao_dtype half_type,
                                               float *mean, float *rstd, const void *x,
                                               ao_dtype x_type, const float *res,
                                               const float *gamma, const float *beta, int n, int c,
                                               int batch, const ao_cuda_dropout_key *key,
                                               cudaStream_t stream);
/* ao_cuda_layernorm_backward, then y = dropout(dx) (+ its half_type copy at
 * y16 unless NULL; y NULL: only that copy) as ao_cuda_dropout_residual(y,
 * y16, half_type, dx, NULL, batch, (n / batch) * c, key) would make it, in
 * the same pass over dx's rows where the shapes allow (c % 4 == 0, aligned,
 * no heads), bit for bit; the two calls otherwise. n must be a multiple of
 * batch (tokens per sample). */
cudaError_t ao_cuda_layernorm_backward_dropout(float *dx, float *dgamma, float *dbeta,
                                               const float *dy, const float *x, const float *mean,
                                               const float *rstd, const float *gamma, int n, int c,
                                               float *y, void *y16, ao_dtype half_type, int batch,
                                               const ao_cuda_dropout_key *key, cudaStream_t stream);

/* ---- fused chains ------------------------------------------------------------ */

/* Each does in one pass what a chain of the launchers above does, and gives
 * the same bits: the values go through the same operations (the same row
 * sums in the same order), only the fp32 intermediates are not written. The
 * result is stored in `out_type` (AO_F32, AO_BF16 or AO_F16, round to nearest
 * even as ao_cuda_cast), typically a GEMM operand; any other type returns
 * cudaErrorInvalidValue. A key with p <= 0 means no dropout (the chain
 * without it). */

/* A dropout's mask as bytes (the mask_out / mask_in arguments below): byte
 * r * ceil(per_row / 4) + g holds group g of row r (elements 4g .. 4g + 3),
 * bit l set where element 4g + l is kept; for the attention probabilities
 * the rows are (sample, head), per_row = T * T. A forward stores it, its
 * backward under the same key reads it instead of drawing the masks again:
 * the same factors, bit for bit, without the Philox draws. */
size_t ao_cuda_dropout_mask_bytes(int rows, size_t per_row);

/* att = softmax of scores' rows ([batch * heads * T, T]), out = dropout(att)
 * with the attention-probabilities keying (key->heads must equal heads, else
 * cudaErrorInvalidValue), in out_type: ao_cuda_softmax_forward,
 * ao_cuda_dropout over (batch, T * T), ao_cuda_cast. scores_type: AO_F32
 * (att may alias scores), or out_type (16-bit scores, widened exactly).
 * att: NULL, or where the probabilities go as floats. stats: NULL, or
 * [batch * heads * T][2]: each row's max and the reciprocal of its sum of
 * exps, from which the backward computes att again, bit for bit
 * (ao_cuda_softmax_saved). mask_out: NULL, or the mask's bytes (batch *
 * heads rows of T * T; stored only where T % 4 == 0). */
cudaError_t ao_cuda_softmax_dropout_forward(float *att, float *stats, void *out, ao_dtype out_type,
                                            const void *scores, ao_dtype scores_type, int batch,
                                            int heads, int T, const ao_cuda_dropout_key *key,
                                            uint8_t *mask_out, cudaStream_t stream);
/* The softmax a backward reads: the probabilities as floats (att), or, att
 * NULL, the scores the forward read (of scores_type) and the stats it stored
 * (ao_cuda_softmax_dropout_forward). */
typedef struct ao_cuda_softmax_saved {
    const float *att;
    const void *scores;
    ao_dtype scores_type;
    const float *stats;
} ao_cuda_softmax_saved;
/* out = softmax_backward(dropout(dp), att, scale) in out_type; dp is not
 * modified unless out aliases it (key->heads must equal heads):
 * ao_cuda_dropout(dp, dp), ao_cuda_softmax_backward(dp, dp, att, scale),
 * ao_cuda_cast. dp_type and saved->scores_type: AO_F32, or out_type (16 bits,
 * widened exactly; out may then alias dp, element for element). mask_in:
 * NULL (drawn), or the forward's stored mask (used where T % 4 == 0). */
cudaError_t ao_cuda_softmax_dropout_backward(void *out, ao_dtype out_type, const void *dp,
                                             ao_dtype dp_type, const ao_cuda_softmax_saved *saved,
                                             float scale, int batch, int heads, int T,
                                             const ao_cuda_dropout_key *key, const uint8_t *mask_in,
                                             cudaStream_t stream);
/* Fused (flash-style) attention, flash.cu: q, k, v of every head in the
 * 16-bit [batch * T, 3 * heads * head_dim] rows qkv (type AO_BF16 or AO_F16),
 * scores scale q k^T, probabilities softmax(scores) dropped as
 * ao_cuda_softmax_dropout_forward drops them (key->heads == heads, the same
 * mask bytes), ctx = P v in [batch * T, heads * head_dim] of type, with no
 * T x T matrix in memory. Supported: head_dim 64 or 128, T a multiple of 64
 * (ao_cuda_flash_attention_supported); others: cudaErrorInvalidValue. */
int ao_cuda_flash_attention_supported(ao_dtype type, int T, int head_dim);
/* lse: [batch * heads * T] each row's base-2 logsumexp of scores * log2(e)
 * (what the backward needs). mask_in: NULL (drawn), or the mask
 * ao_cuda_draw_masks drew under key; mask_out (without mask_in):
 * NULL, or where the drawn mask's bytes go. */
cudaError_t ao_cuda_flash_attention_forward(void *ctx, float *lse, const void *qkv, ao_dtype type,
                                            int batch, int heads, int T, int head_dim, float scale,
                                            const ao_cuda_dropout_key *key, const uint8_t *mask_in,
                                            uint8_t *mask_out, cudaStream_t stream);
/* dk, dv into dqkv (qkv's layout, of type) from dctx (ctx's layout) and
 * the forward's ctx, lse; scratch: ao_cuda_flash_backward_scratch_bytes,
 * 16-byte aligned (each row's delta, then dS^T as 16 bits a probability,
 * [batch, heads, key, query], the scale folded in). dq = dS k is the batched
 * GEMM ao_cuda_flash_dq_gemm describes, for the caller to run after it
 * (ao_gemm: one cuBLASLt launch for every head of every sample).
 * mask_in: NULL (drawn), or the forward's mask. Deterministic (no atomics). */
size_t ao_cuda_flash_backward_scratch_bytes(int batch, int heads, int T);
cudaError_t ao_cuda_flash_attention_backward(void *dqkv, void *scratch, const void *dctx,
                                             const void *ctx, const float *lse, const void *qkv,
                                             ao_dtype type, int batch, int heads, int T,
                                             int head_dim, float scale,
                                             const ao_cuda_dropout_key *key, const uint8_t *mask_in,
                                             cudaStream_t stream);
ao_gemm_desc ao_cuda_flash_dq_gemm(void *dqkv, const void *scratch, const void *qkv, ao_dtype type,
                                   int batch, int heads, int T, int head_dim);
/* out = dropout(gelu(h)) in out_type, sample rows (key->heads must be 0);
 * h is not modified: ao_cuda_gelu_forward, ao_cuda_dropout, ao_cuda_cast.
 * h_type: AO_F32, or out_type (a 16-bit h, widened exactly: the chain over
 * ao_cuda_cast(h, AO_F32)); others: cudaErrorInvalidValue. mask_in: NULL
 * (drawn), or the mask ao_cuda_draw_masks drew under key; mask_out
 * (without mask_in): NULL, or where the drawn mask goes
 * (ao_cuda_dropout_mask_bytes(batch, per_row)). */
cudaError_t ao_cuda_gelu_dropout(void *out, ao_dtype out_type, const void *h, ao_dtype h_type,
                                 int batch, size_t per_row, const ao_cuda_dropout_key *key,
                                 const uint8_t *mask_in, uint8_t *mask_out, cudaStream_t stream);
/* dx = gelu_backward(dropout(dy), h) as floats (dx may alias dy; key->heads
 * must be 0) and, when dx16 is not NULL, the same values in half_type
 * (AO_BF16 or AO_F16) in dx16: ao_cuda_dropout, ao_cuda_gelu_backward,
 * ao_cuda_cast. dx may be NULL when dx16 is not (only the 16-bit copy). dy
 * and h are of in_type: AO_F32, or half_type (widened exactly; dx16 may then
 * alias dy, element for element). mask_in: NULL (the masks are drawn), or
 * the mask ao_cuda_gelu_dropout stored under the same key. */
cudaError_t ao_cuda_dropout_gelu_backward(float *dx, void *dx16, ao_dtype half_type, const void *dy,
                                          const void *h, ao_dtype in_type, int batch,
                                          size_t per_row, const ao_cuda_dropout_key *key,
                                          const uint8_t *mask_in, cudaStream_t stream);
/* ao_cuda_dropout_gelu_backward, then db[j] += the column sums of what it
 * wrote (dx16 when set, else dx) as [batch * per_row / cols, cols] rows
 * (per_row % cols == 0): the bias gradient of the linear whose output
 * gradient dy is, ao_cuda_bias_grad's bits. With dx NULL, the mask read,
 * and 16-bit dy, h and dx16 of one type, the sums come from the pass's own
 * launch instead of a second read of dx16. */
cudaError_t ao_cuda_dropout_gelu_backward_bias(float *dx, void *dx16, ao_dtype half_type,
                                               const void *dy, const void *h, ao_dtype in_type,
                                               int batch, size_t per_row,
                                               const ao_cuda_dropout_key *key,
                                               const uint8_t *mask_in, float *db, int cols,
                                               cudaStream_t stream);
/* dx16[i, j] = gelu_backward(T(T(u[i]) * v[j]), h[i, j]) in half_type T
 * (AO_BF16 or AO_F16) for i < rows, j < cols; v [cols] and h [rows, cols]
 * of type T: the input gradient of a linear to one output (dy = u, w = v)
 * through the GELU before it, bit for bit that linear's k = 1 GEMM writing
 * T, then ao_cuda_dropout_gelu_backward at p = 0, without the product in
 * memory (the head: ao_head_backward). */
cudaError_t ao_cuda_outer_gelu_backward(void *dx16, ao_dtype half_type, const float *u,
                                        const void *v, const void *h, int rows, int cols,
                                        cudaStream_t stream);

/* ---- embedding bag (mean) ------------------------------------------------- */

/* out[n, e] = the mean of the s rows of table[V, e] each token's ids pick;
 * table_type fp32, bf16 or f16 (then read widened: the same sums as over
 * its fp32 copy). */
cudaError_t ao_cuda_embedding_bag_mean_forward(float *out, const int32_t *ids, const void *table,
                                               ao_dtype table_type, int n, int s, int e,
                                               cudaStream_t stream);
/* Bytes of device workspace the backward needs for n*s ids over `vocab`. */
size_t ao_cuda_embedding_bag_backward_workspace(int n, int s, int vocab);
/* dtable[V, e] += dout / s scattered by ids, each row's contributions added
 * in the reference's order (token i, then slot k). `workspace` holds
 * ao_cuda_embedding_bag_backward_workspace(n, s, vocab) bytes (256-aligned). */
cudaError_t ao_cuda_embedding_bag_mean_backward(float *dtable, const float *dout,
                                                const int32_t *ids, int n, int s, int e, int vocab,
                                                void *workspace, cudaStream_t stream);

/* ---- loss ------------------------------------------------------------------ */

/* loss[0] = (float)(sum_i w_i bce(z_i, y_i) / normalizer), one block, double. */
cudaError_t ao_cuda_bce_loss(float *loss, const float *z, const float *y, const float *w, int n,
                             double normalizer, cudaStream_t stream);
/* dz[i] = w_i (sigmoid(z_i) - y_i) / normalizer (written). */
cudaError_t ao_cuda_bce_loss_backward(float *dz, const float *z, const float *y, const float *w,
                                      int n, double normalizer, cudaStream_t stream);

/* ---- optimizer and norms --------------------------------------------------- */

/* AO_CUDA_REDUCE_PARTIALS (model/sizes.h): doubles of workspace the two-pass
 * reductions below need. */

/* out[0] = sum of x[i]^2 in double (written), deterministic: a fixed grid of
 * AO_CUDA_REDUCE_PARTIALS blocks, then one block over their partials.
 * `partials` holds AO_CUDA_REDUCE_PARTIALS doubles. */
cudaError_t ao_cuda_sum_squares(double *out, const float *x, size_t n, double *partials,
                                cudaStream_t stream);
/* flag[0] |= 1 when any x[i] is inf or NaN (the caller zeroes it once, and
 * may check several buffers into one flag). */
cudaError_t ao_cuda_has_nonfinite(int *flag, const float *x, size_t n, cudaStream_t stream);
/* coef[0] = ao_clip_coef(sq_norm[0], max_norm) * extra (computed on the
 * device, so clipping needs no host round trip); 0 when sq_norm[0] is not
 * finite, which makes ao_cuda_adamw_step skip the update. */
cudaError_t ao_cuda_clip_coef(float *coef, const double *sq_norm, float max_norm, float extra,
                              cudaStream_t stream);

/* The sharding engine's step scalars (engine_cuda.c's mirror of its cpu
 * closure), one thread: out[0] = norm_scale * the sum of sq[0..nsq) (sums of
 * squares, e.g. from ao_cuda_sum_squares; sq may be out), out[1] = sum of
 * loss[0..nloss), both in double in index order, out[2] = stop. */
cudaError_t ao_cuda_step_scalars(double *out, const double *sq, int nsq, double norm_scale,
                                 const float *loss, int nloss, double stop, cudaStream_t stream);
/* result[0] = sqrt(sq_norm[0]), result[1] = coef[0] (the clip coefficient of
 * ao_cuda_clip_coef), one thread. */
cudaError_t ao_cuda_norm_result(double *result, const double *sq_norm, const float *coef,
                                cudaStream_t stream);

/* AdamW hyper-parameters, as ops_ref's ao_adamw_hparams. */
typedef struct ao_cuda_adamw {
    float beta1, beta2, eps, weight_decay;
} ao_cuda_adamw;

/* ao_adamw_step on a flat shard. The gradient is multiplied by grad_scale
 * and, when grad_scale_dev is not NULL, by grad_scale_dev[0] too (a clip
 * coefficient computed on the device; 0 skips the update: nothing is
 * written). The bias corrections are computed on the host exactly as the
 * reference does. param16: NULL, or where the updated parameters also go in
 * param16_type (AO_BF16 / AO_F16; the cast of ao_cuda_cast, bit for bit):
 * the all-gather's 16-bit copy, written without reading param again. */
cudaError_t ao_cuda_adamw_step(float *param, void *param16, ao_dtype param16_type,
                               const float *grad, float *m, float *v, size_t n,
                               const ao_cuda_adamw *h, float lr, int64_t step, float grad_scale,
                               const float *grad_scale_dev, cudaStream_t stream);

/* ---- casts ------------------------------------------------------------------ */

/* dst[i] = src[i] converted, round to nearest even; F32, F16 and BF16 in any
 * pair (same type: a copy). Returns cudaErrorInvalidValue for other types. */
cudaError_t ao_cuda_cast(void *dst, ao_dtype dst_type, const void *src, ao_dtype src_type, size_t n,
                         cudaStream_t stream);

/* ao_cuda_cast over several (offset, count) parts of one buffer in one
 * launch, offsets and counts in elements: dst[o + i] = src[o + i] converted
 * for each part (a gathered unit's fp32 parts). At most AO_CUDA_CAST_PARTS
 * parts (cudaErrorInvalidValue beyond); one part is ao_cuda_cast. */
#define AO_CUDA_CAST_PARTS 8
cudaError_t ao_cuda_cast_parts(void *dst, ao_dtype dst_type, const void *src, ao_dtype src_type,
                               const size_t (*parts)[2], int nparts, cudaStream_t stream);

/* ---- synthetic data on the device (dataset.placement: device) -------------- */

/* ao_data_fill on the device: the same samples (data.h's per-element
 * functions). ids, weights and random targets are bit-identical to the host
 * generator; dense values and teacher targets agree except where a double
 * log/cos/exp result lies within ~1e-16 of a float rounding boundary. The
 * shape and target kind must have passed ao_data_shape_check (the caller's
 * job; this only enqueues). */
cudaError_t ao_cuda_data_fill(const ao_data_shape *shape, uint64_t seed, int target_kind,
                              uint64_t first_global_index, int batch, float *dense, int32_t *ids,
                              float *target, float *weight, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
