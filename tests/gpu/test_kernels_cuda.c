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
 * Fresh random data each run; the seed is printed and AORTA_TEST_SEED
 * replays it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "runtime/device.h"

#ifdef AORTA_HAVE_CUDA

#include "bench/values.h"
#include "data/data.h"
#include "model/kernels_cuda.h"
#include "model/ops_ref.h"
#include "runtime/device_cuda.h"

static unsigned long long rng_state;

static float uniform(float lo, float hi)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (double)(rng_state >> 11) / 9007199254740992.0;
    return (float)(lo + (hi - lo) * u);
}

static float *random_floats(size_t n, float lo, float hi)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = uniform(lo, hi);
    return p;
}

static ao_device *dev;
static ao_stream *stream;

static cudaStream_t cs(void)
{
    return ao_cuda_stream(stream);
}

static void *upload(const void *host, size_t bytes)
{
    void *d = ao_dev_alloc(dev, bytes ? bytes : 4);
    if (bytes) ao_copy_async(dev, d, host, bytes, AO_H2D, stream);
    return d;
}

static void download(void *host, const void *d, size_t bytes)
{
    ao_copy_async(dev, host, d, bytes, AO_D2H, stream);
    ao_stream_sync(stream);
}

static float *download_floats(const float *d, size_t n)
{
    float *h = malloc(sizeof(float) * (n ? n : 1));
    download(h, d, sizeof(float) * n);
    return h;
}

static void *download_bytes(const void *d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    download(h, d, bytes);
    return h;
}

static void report_bits(const char *kernel, const char *shape, const void *d_got,
                        const void *d_want, size_t bytes)
{
    unsigned char *got = download_bytes(d_got, bytes), *want = download_bytes(d_want, bytes);
    size_t diff = 0;
    for (size_t i = 0; i < bytes; i++) diff += got[i] != want[i];
    printf("%s %-28s %-34s %zu of %zu bytes differ from the unfused chain (want 0)\n",
           diff ? "FAIL" : "PASS", kernel, shape, diff, bytes);
    CHECK(diff == 0, "%s %s: %zu bytes differ from the unfused chain", kernel, shape, diff);
    free(got), free(want);
}

static void report(const char *kernel, const char *shape, double err, double bound)
{
    const int ok = err <= bound;
    printf("%s %-28s %-26s rel err %.3g (bound %.0e)\n", ok ? "PASS" : "FAIL", kernel, shape, err,
           bound);
    CHECK(ok, "%s %s: rel err %.3g > %.0e", kernel, shape, err, bound);
}

static void report_same(const char *kernel, const void *a, const void *b, size_t bytes)
{
    const int same = memcmp(a, b, bytes) == 0;
    printf("%s %-28s repeat run gives the same bits: %s\n", same ? "PASS" : "FAIL", kernel,
           same ? "yes" : "no");
    CHECK(same, "%s: two runs on the same input differ", kernel);
}

#define K(call) AO_CUDA_CHECK(call)

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
    K(ao_cuda_embedding_bag_mean_forward(d_out, d_ids, d_table, n, s, e, cs()));
    float *got = download_floats(d_out, ne);
    report("embedding_bag_mean_forward", shape, check_rel_err(got, out, ne), 1e-5);
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

static void test_casts(void)
{
    const size_t n = 40003; /* float4 steps and a 3-element tail */
    float *x = random_floats(n, -300, 300);
    x[0] = 0.0f, x[1] = -0.0f, x[2] = INFINITY, x[3] = 1e-30f, x[4] = 65504.0f;
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
        for (size_t i = 0; i < n; i++) diff += got[i] != want[i];
        char name[40];
        snprintf(name, sizeof name, "cast float->%s", ao_dtype_name(nt));
        printf("%s %-28s n=%zu: %zu of %zu values differ from the host rounding (want 0)\n",
               diff ? "FAIL" : "PASS", name, n, diff, n);
        CHECK(diff == 0, "%s: %zu values differ", name, diff);

        K(ao_cuda_cast(d_back, AO_F32, d_n, nt, n, cs()));
        float *back = download_floats(d_back, n);
        snprintf(name, sizeof name, "cast %s->float", ao_dtype_name(nt));
        report(name, "exact widening", check_rel_err(back, back_ref, n), 0);
        /* the round trip: within the storage type's precision (DESIGN: 1e-2) */
        double max_err = 0, max_ref = 0;
        for (size_t i = 5; i < n; i++) {
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
        diff += got[i] != h16[0];
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

/* ---- fused chains ---------------------------------------------------------------- */

/* Each fused launcher against the chain of plain launchers it replaces, on the
 * same device and data: the outputs must be the same bytes, for every output
 * type. */

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
        /* backward, in place over the 16-bit dy */
        K(ao_cuda_dropout(d_tmp, d_dyw, batch, per_row, &key, cs()));
        K(ao_cuda_gelu_backward(d_tmp, d_tmp, d_hw, n, cs()));
        K(ao_cuda_cast(d_ref, ht, d_tmp, AO_F32, n, cs()));
        K(ao_cuda_dropout_gelu_backward(NULL, d_dy16, ht, d_dy16, d_h16, ht, batch, per_row, &key,
                                        p > 0 ? d_mask : NULL, cs()));
        snprintf(name, sizeof name, "dropout_gelu_bwd %s in, mask", ao_dtype_name(ht));
        report_bits(name, shape, d_dy16, d_ref, 2 * n);
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
    }
    test_outer_gelu_backward(37, 8192);
    test_outer_gelu_backward(21, 2051);  /* scalar columns, a partial last thread */
    test_outer_gelu_backward(600000, 8); /* more row blocks than a grid's y */
    test_probs_mask(37);                 /* no mask bytes: T % 4 != 0 */
    test_probs_mask(64);
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
    const char *seed_env = getenv("AORTA_TEST_SEED");
    rng_state = seed_env ? strtoull(seed_env, NULL, 10)
                         : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32);
    printf("seed %llu (AORTA_TEST_SEED=%llu replays it)\n", rng_state, rng_state);
    dev = ao_device_open("cuda", 0);
    CHECK(dev != NULL, "cannot open cuda:0");
    if (!dev) return check_result("test_kernels_cuda");
    stream = ao_stream_create(dev, "compute", 0);

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
    test_bce();
    test_norms_and_flags();
    test_adamw();
    test_casts();
    test_data_fill(AO_TARGET_RANDOM);
    test_data_fill(AO_TARGET_TEACHER);
    test_fused();

    ao_stream_destroy(stream);
    ao_device_close(dev);
    return check_result("test_kernels_cuda");
}

#else

int main(void)
{
    GPU_SKIP_UNLESS(0, "built without CUDA");
    return 0;
}

#endif
