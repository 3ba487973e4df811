/* The cuda model's GEMM helpers (model_cuda_impl.h says what each does):
 * GEMM descriptors over the 16-bit operand copies, linear layers forward and
 * backward, and the summed gradients a backward zeroes first. */
#include "model/model_cuda_impl.h"

#include "core/error.h"

/* Elements a row-major rows x cols operand (ld, batched) reaches from its start. */
static size_t operand_span(int rows, int cols, int ld, int batch, long long stride, int outer,
                           long long outer_stride)
{
    return (size_t)(outer - 1) * (size_t)outer_stride + (size_t)(batch - 1) * (size_t)stride +
           (size_t)(rows - 1) * (size_t)ld + (size_t)cols;
}

ao_gemm_desc mc_gemm_desc(ao_model *m, ao_stream *s, int ta, int tb, int rows, int cols, int inner,
                          float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                          float *c, int ldc, gemm_batch bt)
{
    const cuda_model *cm = m->impl;
    ao_gemm_desc d = {
        .trans_a = ta,
        .trans_b = tb,
        .m = rows,
        .n = cols,
        .k = inner,
        .alpha = alpha,
        .beta = beta,
        .a = a,
        .lda = lda,
        .b = b,
        .ldb = ldb,
        .c = c,
        .ldc = ldc,
        .ab_type = AO_F32,
        .c_type = AO_F32,
        .compute = cm->compute,
        .batch_count = bt.batch,
        .stride_a = bt.stride_a,
        .stride_b = bt.stride_b,
        .stride_c = bt.stride_c,
        .batch_outer = bt.outer,
        .outer_stride_a = bt.outer_a,
        .outer_stride_b = bt.outer_b,
        .outer_stride_c = bt.outer_c,
    };
    if (cm->op.half != AO_F32 && rows > 0 && cols > 0) {
        size_t outside_used = 0;
        d.a = ao_op16_operand(&cm->op, s, a,
                              operand_span(ta ? inner : rows, ta ? rows : inner, lda, bt.batch,
                                           bt.stride_a, bt.outer, bt.outer_a),
                              &outside_used);
        d.b = ao_op16_operand(&cm->op, s, b,
                              operand_span(tb ? cols : inner, tb ? inner : cols, ldb, bt.batch,
                                           bt.stride_b, bt.outer, bt.outer_b),
                              &outside_used);
        d.ab_type = cm->op.half;
        d.compute = AO_COMPUTE_DEFAULT; /* 16-bit products, fp32 accumulation */
    }
    return d;
}

int mc_gemm_bias(ao_model *m, ao_stream *s, int ta, int tb, int rows, int cols, int inner,
                 float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc, gemm_batch bt, const float *bias, float *out, int out16)
{
    const cuda_model *cm = m->impl;
    ao_gemm_desc d =
        mc_gemm_desc(m, s, ta, tb, rows, cols, inner, alpha, a, lda, b, ldb, beta, c, ldc, bt);
    d.bias = bias;
    d.d = out;
    int direct = 0;
    if (out16 && cm->op.half != AO_F32 && rows > 0 && cols > 0 && !out && beta == 0.0f &&
        ao_op16_in_arena(
            &cm->op, c,
            operand_span(rows, cols, ldc, bt.batch, bt.stride_c, bt.outer, bt.outer_c))) {
        const void *bias16 = bias ? ao_op16_staged_copy(&cm->op, bias, (size_t)cols) : NULL;
        if (!bias || bias16) {
            d.c = ao_op16_twin_of(&cm->op, c);
            d.c_type = cm->op.half;
            d.bias = bias16;
            direct = 1;
        }
    }
    ao_gemm(m->dev, s, &d);
    return direct;
}

void mc_gemm(ao_model *m, ao_stream *s, int ta, int tb, int rows, int cols, int inner, float alpha,
             const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc,
             gemm_batch bt)
{
    mc_gemm_bias(m, s, ta, tb, rows, cols, inner, alpha, a, lda, b, ldb, beta, c, ldc, bt, NULL,
                 NULL, 0);
}

int mc_gemm_operand(ao_model *m, ao_stream *s, int ta, int tb, int rows, int cols, int inner,
                    float alpha, const float *a, int lda, const float *b, int ldb, float *c,
                    int ldc, gemm_batch bt)
{
    return mc_gemm_bias(m, s, ta, tb, rows, cols, inner, alpha, a, lda, b, ldb, 0.0f, c, ldc, bt,
                        NULL, NULL, 1);
}

void mc_linear_forward(ao_model *m, ao_stream *s, float *y, const float *x, const float *w,
                       const float *b, int n, int in, int out)
{
    mc_gemm_bias(m, s, 0, 1, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out, single, b, NULL, 0);
}

int mc_linear_forward_branch(ao_model *m, ao_stream *s, float *y, const float *x, const float *w,
                             const float *b, int n, int in, int out)
{
    return mc_gemm_bias(m, s, 0, 1, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out, single, b, NULL,
                        1);
}

void mc_linear_forward_operand(ao_model *m, ao_stream *s, float *y, const float *x, const float *w,
                               const float *b, int n, int in, int out)
{
    const int direct =
        mc_gemm_bias(m, s, 0, 1, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out, single, b, NULL, 1);
    ao_op16_mark_current(&((cuda_model *)m->impl)->op, s, y, (size_t)n * out, !direct);
}

int mc_linear_backward_plus(ao_model *m, ao_stream *s, float *dx, const float *residual, float *dw,
                            float *db, const float *dy, const float *x, const float *w, int n,
                            int in, int out, int dx_operand)
{
    cuda_model *cm = m->impl;
    const int mark = cm->op.nprepared;
    const size_t ndy = (size_t)n * out;
    ao_op16_prepare(&cm->op, s, dy, ndy);
    int direct = 0;
    if (dx && residual)
        mc_gemm_bias(m, s, 0, 0, n, in, out, 1.0f, dy, out, w, in, 1.0f, (float *)residual, in,
                     single, NULL, dx, 0);
    else if (dx)
        direct = mc_gemm_bias(m, s, 0, 0, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, single,
                              NULL, NULL, dx_operand);
    mc_gemm(m, s, 1, 0, out, in, n, 1.0f, dy, out, x, in, m->overwrite_grads ? 0.0f : 1.0f, dw, in,
            single);
    if (db) {
        cudaStream_t cs = ao_cuda_stream(s);
        if (cm->op.half != AO_F32 && ao_op16_in_arena(&cm->op, dy, ndy))
            KCHECK(ao_cuda_bias_grad(db, ao_op16_twin_of(&cm->op, dy), cm->op.half, n, out, cs));
        else
            KCHECK(ao_cuda_bias_grad(db, dy, AO_F32, n, out, cs));
    }
    cm->op.nprepared = mark;
    if (dx && dx_operand) ao_op16_mark_current(&cm->op, s, dx, (size_t)n * in, !direct);
    return direct;
}

void mc_fresh_add(fresh_grads *f, float *p, size_t n)
{
    if (f->k == MAX_FRESH)
        ao_fatal(AO_EXIT_FAIL, "model", "more than %d summed gradients", MAX_FRESH);
    f->p[f->k] = p;
    f->n[f->k++] = n;
}

void mc_fresh_zero(ao_model *m, ao_stream *s, const fresh_grads *f)
{
    if (m->overwrite_grads) KCHECK(ao_cuda_zero_ranges(f->p, f->n, f->k, ao_cuda_stream(s)));
}

void mc_linear_backward(ao_model *m, ao_stream *s, float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w, int n, int in, int out)
{
    mc_linear_backward_plus(m, s, dx, NULL, dw, db, dy, x, w, n, in, out, 0);
}
