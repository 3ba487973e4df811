/* The model's CUDA kernels (model/kernels_cuda.h) against the fp32 C
 * reference (model/ops_ref.h, data.h, bench/values.h for casts) on fresh
 * random data. One line per kernel: PASS/FAIL, the shape, the measured error
 * and its bound.
 *
 * Error metric: max |gpu - ref| / max |ref| over a kernel's outputs.
 * Bounds: fp32 1e-5 (DESIGN §11). Kernels whose every operation mirrors the
 * reference's (dropout masks, embedding-bag backward, AdamW, casts, the data
 * generator's integers and uniforms) must match exactly and are checked
 * with bound 0. Sums of squares are double on both sides: 1e-12.
 * Every kernel with a reduction also runs twice on the same input and must
 * give the same bits (no floating-point atomics anywhere).
 * Fresh random data each run (kernels_check.h). The fused chains have
 * test_fused_cuda.c. */
#include <float.h>

#include "check.h"
#include "runtime/device.h"

#ifdef AORTA_HAVE_CUDA

#include "bench/values.h"
#include "data/data.h"
#include "kernels_check.h"
#include "model/kernels_cuda.h"
#include "model/ops_ref.h"

/* ---- element-wise --------------------------------------------------------- */

/* Column sums over many row chunks (the tile's last block combines them):
 * the reference's values, and the same bits twice. From a 16-bit dy (eight
 * columns a thread where c % 8 == 0, else two; one at an odd address): the
 * bits of the fp32 sums over its widening. */
static void test_bias_grad_chunks(int n, int c)
{
    const size_t nc = (size_t)n * c;
    float *dy = random_floats(nc, -1, 1), *db = random_floats(c, -1, 1);
    float *x1 = random_floats(n, -1, 1), *w1 = random_floats(c, -1, 1), *dw1 = calloc(c, 4);
    float *db_ref = malloc(sizeof(float) * c);
    memcpy(db_ref, db, sizeof(float) * c);
    ao_linear_backward(NULL, dw1, db_ref, dy, x1, w1, n, 1, c);
    float *d_dy = upload(dy, 4 * nc), *d_db = upload(db, 4 * (size_t)c);
    float *d_db2 = upload(db, 4 * (size_t)c);
    K(ao_cuda_bias_grad(d_db, d_dy, AO_F32, n, c, cs()));
    K(ao_cuda_bias_grad(d_db2, d_dy, AO_F32, n, c, cs()));
    char shape[64];
    snprintf(shape, sizeof shape, "n=%d c=%d", n, c);
    float *got = download_floats(d_db, c), *again = download_floats(d_db2, c);
    report("bias_grad chunks", shape, check_rel_err(got, db_ref, c), 1e-5);
    report_same("bias_grad chunks", got, again, sizeof(float) * c);
    char *d_16 = ao_dev_alloc(dev, 2 * nc + 2);
    float *d_wide = ao_dev_alloc(dev, 4 * nc);
    for (int t = 0; t < 4; t++) { /* bf16, fp16; then at an odd address (one column a thread) */
        const ao_dtype ht = t % 2 ? AO_F16 : AO_BF16;
        char *p16 = d_16 + (t < 2 ? 0 : 2);
        K(ao_cuda_cast(p16, ht, d_dy, AO_F32, nc, cs()));
        K(ao_cuda_cast(d_wide, AO_F32, p16, ht, nc, cs()));
        ao_copy_async(dev, d_db, db, 4 * (size_t)c, AO_H2D, stream);
        ao_copy_async(dev, d_db2, db, 4 * (size_t)c, AO_H2D, stream);
        K(ao_cuda_bias_grad(d_db, d_wide, AO_F32, n, c, cs()));
        K(ao_cuda_bias_grad(d_db2, p16, ht, n, c, cs()));
        char name[64];
        snprintf(name, sizeof name, "bias_grad %s%s", ao_dtype_name(ht), t < 2 ? "" : " odd");
        report_bits(name, shape, d_db2, d_db, 4 * (size_t)c);
    }
    const int bad = ao_cuda_bias_grad(d_db2, d_16, AO_I32, n, c, cs()) == cudaErrorInvalidValue;
    CHECK(bad, "bias_grad accepted an int32 dy");
    ao_dev_free(dev, d_16), ao_dev_free(dev, d_wide);
    ao_dev_free(dev, d_dy), ao_dev_free(dev, d_db), ao_dev_free(dev, d_db2);
    free(dy), free(db), free(x1), free(w1), free(dw1), free(db_ref), free(got), free(again);
}

/* (The forward's bias add is cuBLASLt's epilogue: test_gemm_cuda.) */
static void test_bias_and_add(void)
{
    const int n = 333, c = 77;
    const size_t nc = (size_t)n * c;
    float *y = random_floats(nc, -1, 1);
    float *a2 = random_floats(nc, -1, 1);
    float *dy = y, *db = random_floats(c, -1, 1);
    char shape[64];
    snprintf(shape, sizeof shape, "n=%d c=%d", n, c);
    float *ref = malloc(sizeof(float) * nc), *got;

    /* bias grad: ao_linear_backward's db (in = 1 so its dw GEMM is trivial) */
    float *x1 = random_floats(n, -1, 1), *w1 = random_floats(c, -1, 1), *dw1 = calloc(c, 4);
    float *db_ref = malloc(sizeof(float) * c);
    memcpy(db_ref, db, sizeof(float) * c);
    ao_linear_backward(NULL, dw1, db_ref, dy, x1, w1, n, 1, c);
    float *dev_dy = upload(dy, sizeof(float) * nc), *dev_db = upload(db, sizeof(float) * c);
    K(ao_cuda_bias_grad(dev_db, dev_dy, AO_F32, n, c, cs()));
    got = download_floats(dev_db, c);
    report("bias_grad", shape, check_rel_err(got, db_ref, c), 1e-5);
    float *dev_db2 = upload(db, sizeof(float) * c);
    K(ao_cuda_bias_grad(dev_db2, dev_dy, AO_F32, n, c, cs()));
    float *again = download_floats(dev_db2, c);
    report_same("bias_grad", got, again, sizeof(float) * c);
    free(got), free(again);

    /* residual add and scale */
    for (size_t i = 0; i < nc; i++) ref[i] = y[i] + a2[i];
    float *dev_a2 = upload(a2, sizeof(float) * nc),
          *dev_sum = ao_dev_alloc(dev, sizeof(float) * nc);
    K(ao_cuda_add(dev_sum, dev_dy, dev_a2, nc, cs()));
    got = download_floats(dev_sum, nc);
    report("add", shape, check_rel_err(got, ref, nc), 0);
    free(got);
    for (size_t i = 0; i < nc; i++) ref[i] = 0.125f * y[i];
    K(ao_cuda_scale(dev_sum, dev_dy, 0.125f, nc, cs()));
    got = download_floats(dev_sum, nc);
    report("scale", shape, check_rel_err(got, ref, nc), 0);
    free(got);

    ao_dev_free(dev, dev_dy);
    ao_dev_free(dev, dev_db), ao_dev_free(dev, dev_db2), ao_dev_free(dev, dev_a2);
    ao_dev_free(dev, dev_sum);
    free(y), free(a2), free(db), free(ref), free(x1), free(w1), free(dw1), free(db_ref);
}

static void test_gelu(void)
{
    const size_t n = 100003;
    float *x = random_floats(n, -6, 6), *dy = random_floats(n, -1, 1);
    float *ref = malloc(sizeof(float) * n), *dref = malloc(sizeof(float) * n);
    ao_gelu_forward(ref, x, n);
    ao_gelu_backward(dref, dy, x, n);
    float *dx_ = upload(x, sizeof(float) * n), *ddy = upload(dy, sizeof(float) * n);
    float *dout = ao_dev_alloc(dev, sizeof(float) * n);
    K(ao_cuda_gelu_forward(dout, dx_, n, cs()));
    float *got = download_floats(dout, n);
    report("gelu_forward", "n=100003 x in [-6,6]", check_rel_err(got, ref, n), 1e-5);
    free(got);
    K(ao_cuda_gelu_backward(ddy, ddy, dx_, n, cs())); /* in place, as the model uses it */
    got = download_floats(ddy, n);
    report("gelu_backward", "n=100003 in place", check_rel_err(got, dref, n), 1e-5);
    free(got);
    ao_dev_free(dev, dx_), ao_dev_free(dev, ddy), ao_dev_free(dev, dout);
    free(x), free(dy), free(ref), free(dref);
}

/* ---- layernorm -------------------------------------------------------------- */

static void test_layernorm(int n, int c)
{
    const size_t nc = (size_t)n * c;
    char shape[64];
    snprintf(shape, sizeof shape, "n=%d c=%d", n, c);
    /* an offset mean stresses the two-pass variance */
    float *x = random_floats(nc, 2, 5), *g = random_floats(c, 0.5f, 1.5f);
    float *b = random_floats(c, -0.5f, 0.5f), *dy = random_floats(nc, -1, 1);
    float *dg0 = random_floats(c, -1, 1), *db0 = random_floats(c, -1, 1);
    float *y = malloc(4 * nc), *mean = malloc(4 * (size_t)n), *rstd = malloc(4 * (size_t)n);
    float *dx = malloc(4 * nc), *dg = malloc(4 * (size_t)c), *db = malloc(4 * (size_t)c);
    memcpy(dg, dg0, 4 * (size_t)c);
    memcpy(db, db0, 4 * (size_t)c);
    ao_layernorm_forward(y, mean, rstd, x, g, b, n, c);
    ao_layernorm_backward(dx, dg, db, dy, x, mean, rstd, g, n, c);

    float *d_x = upload(x, 4 * nc), *d_g = upload(g, 4 * (size_t)c),
          *d_b = upload(b, 4 * (size_t)c);
    float *d_y = ao_dev_alloc(dev, 4 * nc), *d_mean = ao_dev_alloc(dev, 4 * (size_t)n);
    float *d_rstd = ao_dev_alloc(dev, 4 * (size_t)n);
    K(ao_cuda_layernorm_forward(d_y, NULL, AO_F32, d_mean, d_rstd, d_x, d_g, d_b, n, c, cs()));
    float *got = download_floats(d_y, nc);
    report("layernorm_forward y", shape, check_rel_err(got, y, nc), 1e-5);
    free(got);
    /* with the 16-bit copy: y unchanged, the copy = the cast of y, bit for bit */
    const ao_dtype halves[2] = {AO_BF16, AO_F16};
    for (int t = 0; t < 2; t++) {
        float *d_y2 = ao_dev_alloc(dev, 4 * nc);
        void *d_y16 = ao_dev_alloc(dev, 2 * nc), *d_cast = ao_dev_alloc(dev, 2 * nc);
        K(ao_cuda_layernorm_forward(d_y2, d_y16, halves[t], d_mean, d_rstd, d_x, d_g, d_b, n, c,
                                    cs()));
        K(ao_cuda_cast(d_cast, halves[t], d_y, AO_F32, nc, cs()));
        char name[48];
        snprintf(name, sizeof name, "layernorm_forward y, %s", ao_dtype_name(halves[t]));
        report_bits(name, shape, d_y2, d_y, 4 * nc);
        snprintf(name, sizeof name, "layernorm_forward y16 %s", ao_dtype_name(halves[t]));
        report_bits(name, shape, d_y16, d_cast, 2 * nc);
        ao_dev_free(dev, d_y2), ao_dev_free(dev, d_y16), ao_dev_free(dev, d_cast);
    }
    got = download_floats(d_mean, n);
    report("layernorm_forward mean", shape, check_rel_err(got, mean, n), 1e-6);
    free(got);
    got = download_floats(d_rstd, n);
    report("layernorm_forward rstd", shape, check_rel_err(got, rstd, n), 1e-6);
    free(got);

    /* backward from the reference's saved statistics, so only backward is measured */
    float *d_dy = upload(dy, 4 * nc), *d_dx = ao_dev_alloc(dev, 4 * nc);
    float *d_dg = upload(dg0, 4 * (size_t)c), *d_db = upload(db0, 4 * (size_t)c);
    float *d_rmean = upload(mean, 4 * (size_t)n), *d_rrstd = upload(rstd, 4 * (size_t)n);
    K(ao_cuda_layernorm_backward(d_dx, d_dg, d_db, d_dy, d_x, d_rmean, d_rrstd, d_g, n, c, cs()));
    got = download_floats(d_dx, nc);
    report("layernorm_backward dx", shape, check_rel_err(got, dx, nc), 1e-5);
    free(got);
    float *got_dg = download_floats(d_dg, c), *got_db = download_floats(d_db, c);
    report("layernorm_backward dgamma", shape, check_rel_err(got_dg, dg, c), 1e-5);
    report("layernorm_backward dbeta", shape, check_rel_err(got_db, db, c), 1e-5);
    ao_copy_async(dev, d_dg, dg0, 4 * (size_t)c, AO_H2D, stream);
    K(ao_cuda_layernorm_backward(d_dx, d_dg, d_db, d_dy, d_x, d_rmean, d_rrstd, d_g, n, c, cs()));
    float *again = download_floats(d_dg, c);
    report_same("layernorm_backward dgamma", got_dg, again, 4 * (size_t)c);
    /* dy and x one float off 16-byte alignment: the parameter sums take a
     * column a thread instead of float4s (where c % 4 == 0), the same terms
     * in the same order, hence the same bits */
    float *dy_off = malloc(4 * (nc + 1)), *x_off = malloc(4 * (nc + 1));
    dy_off[0] = x_off[0] = 0.0f;
    memcpy(dy_off + 1, dy, 4 * nc);
    memcpy(x_off + 1, x, 4 * nc);
    float *d_dy_off = upload(dy_off, 4 * (nc + 1)), *d_x_off = upload(x_off, 4 * (nc + 1));
    float *d_dg2 = upload(dg0, 4 * (size_t)c), *d_db2 = upload(db0, 4 * (size_t)c);
    K(ao_cuda_layernorm_backward(d_dx, d_dg2, d_db2, d_dy_off + 1, d_x_off + 1, d_rmean, d_rrstd,
                                 d_g, n, c, cs()));
    float *scalar_dg = download_floats(d_dg2, c), *scalar_db = download_floats(d_db2, c);
    report_same("layernorm_backward dgamma, unaligned", got_dg, scalar_dg, 4 * (size_t)c);
    report_same("layernorm_backward dbeta, unaligned", got_db, scalar_db, 4 * (size_t)c);
    ao_dev_free(dev, d_dy_off), ao_dev_free(dev, d_x_off);
    ao_dev_free(dev, d_dg2), ao_dev_free(dev, d_db2);
    free(dy_off), free(x_off), free(scalar_dg), free(scalar_db);
    free(got_dg), free(got_db), free(again);

    ao_dev_free(dev, d_x), ao_dev_free(dev, d_g), ao_dev_free(dev, d_b), ao_dev_free(dev, d_y);
    ao_dev_free(dev, d_mean), ao_dev_free(dev, d_rstd), ao_dev_free(dev, d_dy);
    ao_dev_free(dev, d_dx), ao_dev_free(dev, d_dg), ao_dev_free(dev, d_db);
    ao_dev_free(dev, d_rmean), ao_dev_free(dev, d_rrstd);
    free(x), free(g), free(b), free(dy), free(dg0), free(db0), free(y), free(mean), free(rstd);
    free(dx), free(dg), free(db);
}

/* ---- softmax ---------------------------------------------------------------- */

/* The softmax inside ao_attn_forward / ao_attn_backward, row by row (ops_ref
 * has no stand-alone softmax; these are its lines). */
static void softmax_ref(float *y, const float *x, int n, int c)
{
    for (int i = 0; i < n; i++) {
        const float *row = x + (size_t)i * c;
        float maxv = -INFINITY;
        for (int j = 0; j < c; j++)
            if (row[j] > maxv) maxv = row[j];
        double sum = 0.0;
        for (int j = 0; j < c; j++) sum += exp((double)row[j] - maxv);
        for (int j = 0; j < c; j++)
            y[(size_t)i * c + j] = (float)(exp((double)row[j] - maxv) / sum);
    }
}

static void softmax_backward_ref(float *dx, const float *dy, const float *y, double scale, int n,
                                 int c)
{
    for (int i = 0; i < n; i++) {
        const float *p = y + (size_t)i * c, *dp = dy + (size_t)i * c;
        double dot = 0.0;
        for (int j = 0; j < c; j++) dot += (double)p[j] * dp[j];
        for (int j = 0; j < c; j++)
            dx[(size_t)i * c + j] = (float)((double)p[j] * (dp[j] - dot) * scale);
    }
}

static void test_softmax(int n, int c)
{
    const size_t nc = (size_t)n * c;
    char shape[64];
    snprintf(shape, sizeof shape, "n=%d c=%d", n, c);
    float *x = random_floats(nc, -8, 8), *dy = random_floats(nc, -1, 1);
    float *y = malloc(4 * nc), *dx = malloc(4 * nc);
    const float scale = 0.125f;
    softmax_ref(y, x, n, c);
    softmax_backward_ref(dx, dy, y, scale, n, c);
    float *d_x = upload(x, 4 * nc), *d_dy = upload(dy, 4 * nc), *d_y = upload(y, 4 * nc);
    K(ao_cuda_softmax_forward(d_x, d_x, n, c, cs())); /* in place, as attention uses it */
    float *got = download_floats(d_x, nc);
    report("softmax_forward", shape, check_rel_err(got, y, nc), 1e-5);
    free(got);
    K(ao_cuda_softmax_backward(d_dy, d_dy, d_y, scale, n, c, cs()));
    got = download_floats(d_dy, nc);
    report("softmax_backward", shape, check_rel_err(got, dx, nc), 1e-5);
    free(got);
    ao_dev_free(dev, d_x), ao_dev_free(dev, d_dy), ao_dev_free(dev, d_y);
    free(x), free(dy), free(y), free(dx);
}

/* ---- dropout ------------------------------------------------------------------ */

/* per_row: not a multiple of 4 (the scalar path) or one (float4 loads). */
static void test_dropout(float p, int heads, size_t per_row)
{
    const int batch = 3;
    const size_t rows = (size_t)batch * (heads ? heads : 1), total = rows * per_row;
    const ao_dropout_cfg cfg = {p, 1234567ull, 42, 3, 1000};
    const uint32_t site = heads ? AO_DROP_ATTN_PROBS : AO_DROP_FFN_HIDDEN;
    float *x = random_floats(total, 0.5f, 1.5f), *ref = malloc(4 * total);
    if (heads) {
        /* the attention's keying: element i*T + j of child(stream(b), head) */
        for (size_t r = 0; r < rows; r++) {
            const int b = (int)(r / (size_t)heads), h = (int)(r % (size_t)heads);
            const ao_rng_stream s = ao_rng_child(
                ao_dropout_stream(cfg.seed, cfg.step, cfg.layer, site, cfg.first_sample + b), h);
            for (size_t e = 0; e < per_row; e++)
                ref[r * per_row + e] = x[r * per_row + e] * ao_dropout_factor(s, e, p);
        }
    } else {
        ao_dropout_forward(ref, x, batch, per_row, site, &cfg);
    }
    const ao_cuda_dropout_key key = {p,    cfg.seed,         cfg.step, cfg.layer,
                                     site, cfg.first_sample, heads};
    float *d_x = upload(x, 4 * total), *d_y = ao_dev_alloc(dev, 4 * total);
    K(ao_cuda_dropout(d_y, d_x, batch, per_row, &key, cs()));
    float *got = download_floats(d_y, total);
    size_t dropped = 0;
    for (size_t i = 0; i < total; i++) dropped += got[i] == 0.0f;
    char shape[80];
    snprintf(shape, sizeof shape, "p=%.2f heads=%d rows=%zu x %zu", p, heads, rows, per_row);
    report(heads ? "dropout (attention probs)" : "dropout", shape, check_rel_err(got, ref, total),
           0);
    if (p > 0 && p < 1) {
        const double frac = (double)dropped / total;
        CHECK(fabs(frac - p) < 0.05, "dropout p=%.2f dropped a fraction %.3f", p, frac);
    }
    free(got);
    ao_dev_free(dev, d_x), ao_dev_free(dev, d_y);
    free(x), free(ref);
}

/* ---- embedding bag ------------------------------------------------------------ */

static void test_embedding_bag(int n, int s, int e, int vocab)
{
    const size_t ns = (size_t)n * s, ne = (size_t)n * e, ve = (size_t)vocab * e;
    char shape[80];
    snprintf(shape, sizeof shape, "n=%d s=%d e=%d V=%d", n, s, e, vocab);
    int32_t *ids = malloc(sizeof(int32_t) * ns);
    for (size_t i = 0; i < ns; i++) {
        /* skewed: half the ids hit the first few rows, so rows repeat a lot */
        const float u = uniform(0, 1);
        ids[i] = u < 0.5f ? (int32_t)(uniform(0, 1) * (vocab < 5 ? vocab : 5))
                          : (int32_t)(uniform(0, 1) * vocab);
        if (ids[i] >= vocab) ids[i] = vocab - 1;
    }
    float *table = random_floats(ve, -1, 1), *dout = random_floats(ne, -1, 1);
    float *dtable0 = random_floats(ve, -1, 1);
    float *out = malloc(4 * ne), *dtable = malloc(4 * ve);
    memcpy(dtable, dtable0, 4 * ve);
    ao_embedding_bag_mean_forward(out, ids, table, n, s, e);
    ao_embedding_bag_mean_backward(dtable, dout, ids, n, s, e);

    int32_t *d_ids = upload(ids, sizeof(int32_t) * ns);
    float *d_table = upload(table, 4 * ve), *d_out = ao_dev_alloc(dev, 4 * ne);
    K(ao_cuda_embedding_bag_mean_forward(d_out, d_ids, d_table, AO_F32, n, s, e, cs()));
    float *got = download_floats(d_out, ne);
    report("embedding_bag_mean_forward", shape, check_rel_err(got, out, ne), 1e-5);
    /* a 16-bit table gives the sums of its widened values, bit for bit */
    for (int h = 0; h < 2; h++) {
        const ao_dtype type = h ? AO_F16 : AO_BF16;
        void *d_t16 = ao_dev_alloc(dev, 2 * ve);
        float *d_wide = ao_dev_alloc(dev, 4 * ve);
        K(ao_cuda_cast(d_t16, type, d_table, AO_F32, ve, cs()));
        K(ao_cuda_cast(d_wide, AO_F32, d_t16, type, ve, cs()));
        K(ao_cuda_embedding_bag_mean_forward(d_out, d_ids, d_wide, AO_F32, n, s, e, cs()));
        float *wide = download_floats(d_out, ne);
        K(ao_cuda_embedding_bag_mean_forward(d_out, d_ids, d_t16, type, n, s, e, cs()));
        float *narrow = download_floats(d_out, ne);
        report_same(h ? "embedding_bag_mean_forward (f16 table)"
                      : "embedding_bag_mean_forward (bf16 table)",
                    narrow, wide, 4 * ne);
        free(wide), free(narrow);
        ao_dev_free(dev, d_t16), ao_dev_free(dev, d_wide);
    }
    free(got);

    const size_t ws_bytes = ao_cuda_embedding_bag_backward_workspace(n, s, vocab);
    void *ws = ao_dev_alloc(dev, ws_bytes);
    float *d_dout = upload(dout, 4 * ne), *d_dtable = upload(dtable0, 4 * ve);
    K(ao_cuda_embedding_bag_mean_backward(d_dtable, d_dout, d_ids, n, s, e, vocab, ws, cs()));
    got = download_floats(d_dtable, ve);
    /* the reference's order and operations exactly: bit-identical */
    report("embedding_bag_mean_backward", shape, check_rel_err(got, dtable, ve), 0);
    ao_copy_async(dev, d_dtable, dtable0, 4 * ve, AO_H2D, stream);
    K(ao_cuda_embedding_bag_mean_backward(d_dtable, d_dout, d_ids, n, s, e, vocab, ws, cs()));
    float *again = download_floats(d_dtable, ve);
    report_same("embedding_bag_mean_backward", got, again, 4 * ve);
    free(got), free(again);
    ao_dev_free(dev, ws), ao_dev_free(dev, d_ids), ao_dev_free(dev, d_table);
    ao_dev_free(dev, d_out), ao_dev_free(dev, d_dout), ao_dev_free(dev, d_dtable);
    free(ids), free(table), free(dout), free(dtable0), free(out), free(dtable);
}

/* ---- loss --------------------------------------------------------------------- */

static void test_bce(void)
{
    const int n = 10007;
    const double normalizer = 3.0 * n;
    float *z = random_floats(n, -12, 12), *y = random_floats(n, 0, 1);
    float *w = random_floats(n, 0.5f, 1.5f), *dz = malloc(4 * (size_t)n);
    const float loss_ref = (float)ao_bce_loss(z, y, w, n, normalizer);
    ao_bce_loss_backward(dz, z, y, w, n, normalizer);
    float *d_z = upload(z, 4 * (size_t)n), *d_y = upload(y, 4 * (size_t)n);
    float *d_w = upload(w, 4 * (size_t)n), *d_loss = ao_dev_alloc(dev, 4);
    float *d_dz = ao_dev_alloc(dev, 4 * (size_t)n);
    K(ao_cuda_bce_loss(d_loss, d_z, d_y, d_w, n, normalizer, cs()));
    float loss = 0, loss2 = 0;
    download(&loss, d_loss, 4);
    report("bce_loss", "n=10007", check_rel_err(&loss, &loss_ref, 1), 1e-6);
    K(ao_cuda_bce_loss(d_loss, d_z, d_y, d_w, n, normalizer, cs()));
    download(&loss2, d_loss, 4);
    report_same("bce_loss", &loss, &loss2, 4);
    K(ao_cuda_bce_loss_backward(d_dz, d_z, d_y, d_w, n, normalizer, cs()));
    float *got = download_floats(d_dz, n);
    report("bce_loss_backward", "n=10007", check_rel_err(got, dz, n), 1e-6);
    free(got);
    ao_dev_free(dev, d_z), ao_dev_free(dev, d_y), ao_dev_free(dev, d_w), ao_dev_free(dev, d_loss);
    ao_dev_free(dev, d_dz);
    free(z), free(y), free(w), free(dz);
}

/* ---- norms, flags, clip, AdamW --------------------------------------------------- */

static void test_norms_and_flags(void)
{
    const size_t n = 1000003;
    float *x = random_floats(n, -2, 2);
    const double ref = ao_sum_squares(x, n);
    float *d_x = upload(x, 4 * n);
    double *d_out = ao_dev_alloc(dev, sizeof(double));
    double *d_part = ao_dev_alloc(dev, sizeof(double) * AO_CUDA_REDUCE_PARTIALS);
    K(ao_cuda_sum_squares(d_out, d_x, n, d_part, cs()));
    double got = 0, again = 0;
    download(&got, d_out, sizeof got);
    const double err = fabs(got - ref) / ref;
    report("sum_squares", "n=1000003 (double)", err, 1e-12);
    K(ao_cuda_sum_squares(d_out, d_x, n, d_part, cs()));
    download(&again, d_out, sizeof again);
    report_same("sum_squares", &got, &again, sizeof got);

    /* clip coefficient from the device-side squared norm */
    float *d_coef = ao_dev_alloc(dev, 4);
    const float max_norm = (float)(sqrt(ref) * 0.25);
    K(ao_cuda_clip_coef(d_coef, d_out, max_norm, 0.5f, cs()));
    float coef = 0;
    download(&coef, d_coef, 4);
    const float coef_ref = ao_clip_coef(got, max_norm) * 0.5f;
    report("clip_coef", "max_norm = norm/4, extra 0.5", check_rel_err(&coef, &coef_ref, 1), 0);

    /* x + 1 is not 16-byte aligned: the scalar loop alone */
    K(ao_cuda_sum_squares(d_out, d_x + 1, n - 1, d_part, cs()));
    double unaligned = 0;
    download(&unaligned, d_out, sizeof unaligned);
    const double ref1 = ao_sum_squares(x + 1, n - 1);
    report("sum_squares", "n=1000002 at x + 1 (double)", fabs(unaligned - ref1) / ref1, 1e-12);

    /* has_nonfinite: clean, then an inf, then a NaN near the end */
    int *d_flag = ao_dev_alloc(dev, sizeof(int));
    int flags[3];
    const float poison[2] = {INFINITY, NAN};
    for (int t = 0; t < 3; t++) {
        if (t > 0) ao_copy_async(dev, d_x + n - 7 * t, &poison[t - 1], 4, AO_H2D, stream);
        ao_memset_async(dev, d_flag, 0, sizeof(int), stream);
        K(ao_cuda_has_nonfinite(d_flag, d_x, n, cs()));
        download(&flags[t], d_flag, sizeof(int));
    }
    const int ok = flags[0] == 0 && flags[1] == 1 && flags[2] == 1;
    printf("%s %-28s clean %d, with inf %d, with NaN %d (want 0 1 1)\n", ok ? "PASS" : "FAIL",
           "has_nonfinite", flags[0], flags[1], flags[2]);
    CHECK(ok, "has_nonfinite gave %d %d %d, want 0 1 1", flags[0], flags[1], flags[2]);

    ao_dev_free(dev, d_x), ao_dev_free(dev, d_out), ao_dev_free(dev, d_part);
    ao_dev_free(dev, d_coef), ao_dev_free(dev, d_flag);
    free(x);
}

static void test_adamw(void)
{
    const size_t n = 54321;
    float *p = random_floats(n, -1, 1), *m = calloc(n, 4), *v = calloc(n, 4);
    float *d_p = upload(p, 4 * n), *d_m = upload(m, 4 * n), *d_v = upload(v, 4 * n);
    float *d_g = ao_dev_alloc(dev, 4 * n), *d_scale = ao_dev_alloc(dev, 4);
    void *d_p16 = ao_dev_alloc(dev, 2 * n);
    const ao_adamw_hparams h = {0.9f, 0.999f, 1e-8f, 1e-2f};
    const ao_cuda_adamw hc = {h.beta1, h.beta2, h.eps, h.weight_decay};
    const float dev_scale = 0.75f;
    ao_copy_async(dev, d_scale, &dev_scale, 4, AO_H2D, stream);
    for (int64_t step = 1; step <= 3; step++) {
        float *g = random_floats(n, -3, 3);
        ao_copy_async(dev, d_g, g, 4 * n, AO_H2D, stream);
        /* the reference takes one scale; the device multiplies by both in turn */
        float *gs = malloc(4 * n);
        for (size_t i = 0; i < n; i++) gs[i] = (g[i] * 0.5f) * dev_scale;
        ao_adamw_step(p, gs, m, v, n, &h, 1e-3f, step, 1.0f);
        K(ao_cuda_adamw_step(d_p, d_p16, AO_BF16, d_g, d_m, d_v, n, &hc, 1e-3f, step, 0.5f, d_scale,
                             cs()));
        ao_stream_sync(stream);
        free(g), free(gs);
    }
    float *gp = download_floats(d_p, n), *gm = download_floats(d_m, n);
    float *gv = download_floats(d_v, n);
    report("adamw_step param", "n=54321, 3 steps", check_rel_err(gp, p, n), 0);
    report("adamw_step m", "n=54321, 3 steps", check_rel_err(gm, m, n), 0);
    report("adamw_step v", "n=54321, 3 steps", check_rel_err(gv, v, n), 0);
    /* the 16-bit copy written with the update: the cast of the result */
    void *d_ref16 = ao_dev_alloc(dev, 2 * n);
    K(ao_cuda_cast(d_ref16, AO_BF16, d_p, AO_F32, n, cs()));
    report_bits("adamw_step param16", "n=54321, bf16", d_p16, d_ref16, 2 * n);
    CHECK(ao_cuda_adamw_step(d_p, d_p16, AO_F32, d_g, d_m, d_v, n, &hc, 1e-3f, 4, 0.5f, d_scale,
                             cs()) == cudaErrorInvalidValue,
          "adamw_step accepted an fp32 16-bit copy");
    ao_dev_free(dev, d_p), ao_dev_free(dev, d_m), ao_dev_free(dev, d_v), ao_dev_free(dev, d_g);
    ao_dev_free(dev, d_scale), ao_dev_free(dev, d_p16), ao_dev_free(dev, d_ref16);
    free(p), free(m), free(v), free(gp), free(gm), free(gv);
}

/* ---- casts ---------------------------------------------------------------------- */

/* Whether two 16-bit values of type t differ: bits, except that any two
 * fp16 NaNs agree (the device writes its canonical NaN, the host twin a
 * quiet NaN of the input's sign; bf16 keeps the host's NaN bits). */
static int differ16(ao_dtype t, uint16_t a, uint16_t b)
{
    const int nan_a = (a & 0x7c00) == 0x7c00 && (a & 0x3ff),
              nan_b = (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
    return a != b && !(t == AO_F16 && nan_a && nan_b);
}

static void test_casts(void)
{
    const size_t n = 40003; /* float4 steps and a 3-element tail */
    float *x = random_floats(n, -300, 300);
    x[0] = 0.0f, x[1] = -0.0f, x[2] = INFINITY, x[3] = 1e-30f, x[4] = 65504.0f;
    /* NaN beside a finite value (the narrowing pairs them), a subnormal, a
     * value that rounds to infinity, and two bf16 ties (to even: down, up) */
    x[5] = NAN, x[6] = -1e-40f, x[7] = FLT_MAX, x[8] = 1.00390625f, x[9] = 1.01171875f;
    enum { specials = 10 };
    const ao_dtype narrow[2] = {AO_BF16, AO_F16};
    float *d_x = upload(x, 4 * n), *d_back = ao_dev_alloc(dev, 4 * n);
    void *d_n = ao_dev_alloc(dev, 2 * n), *d_other = ao_dev_alloc(dev, 2 * n);
    uint16_t *want = malloc(2 * n), *got = malloc(2 * n);
    float *back_ref = malloc(4 * n);
    for (int t = 0; t < 2; t++) {
        const ao_dtype nt = narrow[t];
        for (size_t i = 0; i < n; i++) {
            ao_value_store(nt, want, i, x[i]);
            back_ref[i] = (float)ao_value_load(nt, want, i);
        }
        K(ao_cuda_cast(d_n, nt, d_x, AO_F32, n, cs()));
        download(got, d_n, 2 * n);
        size_t diff = 0;
        for (size_t i = 0; i < n; i++) diff += differ16(nt, got[i], want[i]);
        char name[40];
        snprintf(name, sizeof name, "cast float->%s", ao_dtype_name(nt));
        printf("%s %-28s n=%zu: %zu of %zu values differ from the host rounding (want 0)\n",
               diff ? "FAIL" : "PASS", name, n, diff, n);
        CHECK(diff == 0, "%s: %zu values differ", name, diff);

        K(ao_cuda_cast(d_back, AO_F32, d_n, nt, n, cs()));
        float *back = download_floats(d_back, n);
        snprintf(name, sizeof name, "cast %s->float", ao_dtype_name(nt));
        /* (the NaN's widening is a NaN: its bits were compared above) */
        report(name, "exact widening",
               fmax(check_rel_err(back, back_ref, 5), check_rel_err(back + 6, back_ref + 6, n - 6)),
               0);
        /* the round trip: within the storage type's precision (DESIGN: 1e-2) */
        double max_err = 0, max_ref = 0;
        for (size_t i = specials; i < n; i++) {
            max_err = fmax(max_err, fabs((double)back[i] - x[i]));
            max_ref = fmax(max_ref, fabs((double)x[i]));
        }
        snprintf(name, sizeof name, "cast round trip %s", ao_dtype_name(nt));
        report(name, "float->narrow->float", max_err / max_ref, 1e-2);
        free(back);
    }
    /* bf16 -> fp16 goes through float */
    K(ao_cuda_cast(d_n, AO_BF16, d_x, AO_F32, n, cs()));
    K(ao_cuda_cast(d_other, AO_F16, d_n, AO_BF16, n, cs()));
    download(got, d_other, 2 * n);
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t b16[1], h16[1];
        ao_value_store(AO_BF16, b16, 0, x[i]);
        ao_value_store(AO_F16, h16, 0, ao_value_load(AO_BF16, b16, 0));
        diff += differ16(AO_F16, got[i], h16[0]);
    }
    printf("%s %-28s n=%zu: %zu values differ (want 0)\n", diff ? "FAIL" : "PASS",
           "cast bfloat16->half", n, diff);
    CHECK(diff == 0, "bf16->fp16: %zu values differ", diff);
    const int bad = ao_cuda_cast(d_n, AO_I32, d_x, AO_F32, n, cs()) == cudaErrorInvalidValue;
    (void)cudaGetLastError();
    printf("%s %-28s int32 target refused: %s\n", bad ? "PASS" : "FAIL", "cast",
           bad ? "yes" : "no");
    CHECK(bad, "cast to int32 was not refused");

    /* several parts in one launch (a gathered unit's fp32 parts): bf16 -> float
     * inside the parts, the sentinel everywhere else */
    const size_t parts[3][2] = {{0, 5}, {17, 20000}, {n - 3, 3}};
    float *sentinel = malloc(4 * n);
    for (size_t i = 0; i < n; i++) sentinel[i] = -7.0f;
    ao_copy_async(dev, d_back, sentinel, 4 * n, AO_H2D, stream);
    K(ao_cuda_cast(d_n, AO_BF16, d_x, AO_F32, n, cs()));
    K(ao_cuda_cast_parts(d_back, AO_F32, d_n, AO_BF16, parts, 3, cs()));
    float *pgot = download_floats(d_back, n);
    download(got, d_n, 2 * n);
    size_t pdiff = 0;
    for (size_t i = 0; i < n; i++) {
        int in = 0;
        for (int p = 0; p < 3; p++) in |= i >= parts[p][0] && i < parts[p][0] + parts[p][1];
        const float want_v = in ? (float)ao_value_load(AO_BF16, got, i) : -7.0f;
        pdiff += memcmp(&pgot[i], &want_v, sizeof want_v) != 0;
    }
    printf("%s %-28s 3 parts of n=%zu: %zu values wrong (want 0)\n", pdiff ? "FAIL" : "PASS",
           "cast_parts bfloat16->float", n, pdiff);
    CHECK(pdiff == 0, "cast_parts: %zu values wrong", pdiff);
    const size_t nine[9][2] = {{0, 1}};
    const int refused =
        ao_cuda_cast_parts(d_back, AO_F32, d_n, AO_BF16, nine, 9, cs()) == cudaErrorInvalidValue;
    (void)cudaGetLastError();
    CHECK(refused, "cast_parts with 9 parts was not refused");
    free(pgot), free(sentinel);
    ao_dev_free(dev, d_x), ao_dev_free(dev, d_back), ao_dev_free(dev, d_n);
    ao_dev_free(dev, d_other);
    free(x), free(want), free(got), free(back_ref);
}

/* ---- synthetic data ---------------------------------------------------------------- */

static void test_data_fill(int target_kind)
{
    const ao_data_shape shape = {
        .seq_len = 37, .num_dense = 3, .dense_dim = 5, .num_sparse = 6, .vocab = 1001};
    const int batch = 5;
    const uint64_t seed = 987654321ull, first = 123456789ull;
    const size_t nd = (size_t)batch * 37 * 3 * 5, ni = (size_t)batch * 37 * 6,
                 nt = (size_t)batch * 37;
    float *dense = malloc(4 * nd), *target = malloc(4 * nt), *weight = malloc(4 * nt);
    int32_t *ids = malloc(4 * ni);
    CHECK(ao_data_fill(&shape, seed, target_kind, first, batch, dense, ids, target, weight) == 0,
          "host data fill failed");
    float *d_dense = ao_dev_alloc(dev, 4 * nd), *d_target = ao_dev_alloc(dev, 4 * nt);
    float *d_weight = ao_dev_alloc(dev, 4 * nt);
    int32_t *d_ids = ao_dev_alloc(dev, 4 * ni);
    K(ao_cuda_data_fill(&shape, seed, target_kind, first, batch, d_dense, d_ids, d_target, d_weight,
                        cs()));
    float *g_dense = download_floats(d_dense, nd), *g_target = download_floats(d_target, nt);
    float *g_weight = download_floats(d_weight, nt);
    int32_t *g_ids = malloc(4 * ni);
    download(g_ids, d_ids, 4 * ni);
    const char *kind = target_kind == AO_TARGET_TEACHER ? "teacher" : "random";
    char name[48];
    snprintf(name, sizeof name, "data_fill dense (%s)", kind);
    report(name, "B=5 T=37 F=3 D=5", check_rel_err(g_dense, dense, nd), 1e-6);
    size_t id_diff = 0;
    for (size_t i = 0; i < ni; i++) id_diff += g_ids[i] != ids[i];
    printf("%s %-28s %zu of %zu ids differ (want 0)\n", id_diff ? "FAIL" : "PASS", "data_fill ids",
           id_diff, ni);
    CHECK(id_diff == 0, "%zu ids differ", id_diff);
    report("data_fill weight", "B=5 T=37", check_rel_err(g_weight, weight, nt), 0);
    snprintf(name, sizeof name, "data_fill target (%s)", kind);
    report(name, "B=5 T=37", check_rel_err(g_target, target, nt),
           target_kind == AO_TARGET_TEACHER ? 1e-5 : 0);
    ao_dev_free(dev, d_dense), ao_dev_free(dev, d_target), ao_dev_free(dev, d_weight);
    ao_dev_free(dev, d_ids);
    free(dense), free(target), free(weight), free(ids), free(g_dense), free(g_target);
    free(g_weight), free(g_ids);
}

int main(void)
{
    GPU_SKIP_UNLESS(ao_device_count("cuda") > 0, "no CUDA device visible");
    if (!kernels_check_open("test_kernels_cuda")) return check_result("test_kernels_cuda");

    test_bias_and_add();
    test_bias_grad_chunks(5000, 300);   /* 20 chunks x 10 tiles */
    test_bias_grad_chunks(5000, 1000);  /* 16-bit: 8 columns a thread, 4 tiles, the last partial */
    test_bias_grad_chunks(40000, 8);    /* many chunks, one tile */
    test_bias_grad_chunks(300, 140000); /* wider than one launch covers */
    test_gelu();
    test_layernorm(300, 257); /* a warp a row, scalar */
    test_layernorm(64, 1024); /* a block a row, a float4 a thread */
    test_layernorm(64, 2048); /* 2 float4s a thread (config/large.yaml's rows) */
    test_layernorm(9, 6000);  /* 8, the last partly idle */
    test_layernorm(4, 12288); /* wider than a block holds: a warp a row */
    test_softmax(200, 77);
    test_softmax(16, 1024);
    test_softmax(64, 512); /* the 4-float4-per-lane rows of T = 512 */
    test_dropout(0.1f, 0, 1001);
    test_dropout(0.5f, 0, 1001);
    test_dropout(0.1f, 4, 13 * 13);
    test_dropout(0.0f, 0, 1001);
    test_dropout(0.1f, 0, 4096); /* the model's shapes: float4 path */
    test_dropout(0.1f, 4, 64 * 64);
    test_embedding_bag(500, 7, 40, 37);
    test_embedding_bag(2048, 26, 64, 100003);
    test_embedding_bag(700, 9, 37, 50);   /* rows of scalars */
    test_embedding_bag(1024, 8, 300, 90); /* float4 rows in two chunks a lane */
    test_bce();
    test_norms_and_flags();
    test_adamw();
    test_casts();
    test_data_fill(AO_TARGET_RANDOM);
    test_data_fill(AO_TARGET_TEACHER);

    kernels_check_close();
    return check_result("test_kernels_cuda");
}

#else

int main(void)
{
    GPU_SKIP_UNLESS(0, "built without CUDA");
    return 0;
}

#endif
