/* The fused attention kernels (flash.cu) against a plain C reference in
 * double over the same 16-bit q, k, v and output gradient: ctx, dq, dk and dv
 * within bf16 / fp16 tolerances, with and without dropout; the reference's
 * dropout factors come from ao_dropout_stream (the CPU model's keying). The
 * mask bytes the fused forward stores must equal, byte for byte, the ones the
 * unfused softmax-dropout kernel stores under the same key, and the backward
 * must give the same bits whether it reads that mask or draws it again.
 *
 * Tolerance: max |got - ref| / max |ref| <= 2e-2. The kernels round P and dS
 * to the 16-bit type before their products (8 significand bits for bf16:
 * 2^-9 relative a value, averaging out over the 64..192-term sums) and their
 * outputs once more; a wrong tile, head or mask bit is off by O(1). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime/device.h"

#ifdef AORTA_HAVE_CUDA

#include "data/rng.h"
#include "model/kernels_cuda.h"
#include "runtime/device_cuda.h"

#define K(call) AO_CUDA_CHECK(call)

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;

static float uniform(float lo, float hi)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (double)(rng_state >> 11) / 9007199254740992.0;
    return (float)(lo + (hi - lo) * u);
}

static ao_device *dev;
static ao_stream *stream;

/* v's bits in t: every value here is k / 128 with |k| < 256, exact in both
 * bf16 and fp16 (8 significant bits, normal in fp16). */
static uint16_t to_half_bits(float v, ao_dtype t)
{
    if (t == AO_F16) {
        if (v == 0.0f) return 0;
        int e;
        const float m = frexpf(fabsf(v), &e); /* |v| = 2m 2^(e - 1), 2m in [1, 2) */
        const uint16_t man = (uint16_t)((2.0f * m - 1.0f) * 1024.0f);
        return (uint16_t)((v < 0 ? 0x8000 : 0) | (uint16_t)(e - 1 + 15) << 10 | man);
    }
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return (uint16_t)(bits >> 16);
}

static float from_half_bits(uint16_t h, ao_dtype t)
{
    if (t == AO_F16) {
        const int e = (h >> 10) & 31, m = h & 1023;
        const float v = e == 0 ? ldexpf((float)m, -24) : ldexpf(1.0f + m / 1024.0f, e - 15);
        return h & 0x8000 ? -v : v;
    }
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* n random values k / 128 in (-range, range), range <= 2: the bits in t in
 * *h, the values returned. */
static float *random_half(size_t n, float range, ao_dtype t, uint16_t **h)
{
    float *v = malloc(4 * n);
    *h = malloc(2 * n);
    for (size_t i = 0; i < n; i++) {
        v[i] = floorf(uniform(-range, range) * 128.0f) / 128.0f;
        (*h)[i] = to_half_bits(v[i], t);
    }
    return v;
}

static float *download_half(const void *d, size_t n, ao_dtype t)
{
    uint16_t *h = malloc(2 * n);
    float *v = malloc(4 * n);
    ao_copy_async(dev, h, d, 2 * n, AO_D2H, stream);
    ao_stream_sync(stream);
    for (size_t i = 0; i < n; i++) v[i] = from_half_bits(h[i], t);
    free(h);
    return v;
}

static void *download_bytes(const void *d, size_t n)
{
    void *h = malloc(n ? n : 1);
    ao_copy_async(dev, h, d, n, AO_D2H, stream);
    ao_stream_sync(stream);
    return h;
}

static void report(const char *what, const char *shape, double err, double bound)
{
    const int ok = err <= bound;
    printf("%s %-22s %-36s rel err %.3g (bound %.0e)\n", ok ? "PASS" : "FAIL", what, shape, err,
           bound);
    CHECK(ok, "%s %s: rel err %.3g > %.0e", what, shape, err, bound);
}

static void report_same(const char *what, const char *shape, const void *a, const void *b,
                        size_t bytes)
{
    size_t diff = 0;
    for (size_t i = 0; i < bytes; i++) diff += ((const uint8_t *)a)[i] != ((const uint8_t *)b)[i];
    printf("%s %-22s %-36s %zu of %zu bytes differ (want 0)\n", diff ? "FAIL" : "PASS", what, shape,
           diff, bytes);
    CHECK(diff == 0, "%s %s: %zu bytes differ", what, shape, diff);
}

/* A case's shape and dropout key. */
typedef struct {
    int B, H, T, hd;
    float scale, p;
    ao_cuda_dropout_key key;
} flash_case;

static double factor(const flash_case *c, int b, int h, int i, int j)
{
    if (c->p <= 0.0f) return 1.0;
    const ao_rng_stream s = ao_rng_child(ao_dropout_stream(c->key.seed, c->key.step, c->key.layer,
                                                           c->key.site, c->key.first_sample + b),
                                         (uint64_t)h);
    return ao_dropout_factor(s, (uint64_t)i * c->T + j, c->p);
}

/* ctx and dq, dk, dv (dqkv in qkv's layout) in double, rounded to float. */
static void reference(const flash_case *c, const float *qkv, const float *dctx, float *ctx,
                      float *dqkv)
{
    const int T = c->T, hd = c->hd, d = c->H * hd, d3 = 3 * d;
    double *P = malloc(sizeof(double) * T * T), *F = malloc(sizeof(double) * T * T);
    double *G = malloc(sizeof(double) * T * T);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++) {
            const float *q = qkv + (size_t)b * T * d3 + h * hd, *k = q + d, *v = q + 2 * d;
            const float *dO = dctx + (size_t)b * T * d + h * hd;
            float *o = ctx + (size_t)b * T * d + h * hd;
            float *dq = dqkv + (size_t)b * T * d3 + h * hd, *dk = dq + d, *dv = dq + 2 * d;
            for (int i = 0; i < T; i++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < T; j++) {
                    double s = 0;
                    for (int e = 0; e < hd; e++)
                        s += (double)q[(size_t)i * d3 + e] * k[(size_t)j * d3 + e];
                    P[i * T + j] = s * c->scale;
                    if (P[i * T + j] > mx) mx = P[i * T + j];
                    F[i * T + j] = factor(c, b, h, i, j);
                }
                for (int j = 0; j < T; j++) sum += P[i * T + j] = exp(P[i * T + j] - mx);
                for (int j = 0; j < T; j++) P[i * T + j] /= sum;
                for (int e = 0; e < hd; e++) {
                    double acc = 0;
                    for (int j = 0; j < T; j++)
                        acc += P[i * T + j] * F[i * T + j] * v[(size_t)j * d3 + e];
                    o[(size_t)i * d + e] = (float)acc;
                }
                /* g = dropout backward of dP = dO v^T; dS = P (g - P.g) scale */
                double dot = 0;
                for (int j = 0; j < T; j++) {
                    double s = 0;
                    for (int e = 0; e < hd; e++)
                        s += (double)dO[(size_t)i * d + e] * v[(size_t)j * d3 + e];
                    G[i * T + j] = s * F[i * T + j];
                    dot += P[i * T + j] * G[i * T + j];
                }
                for (int j = 0; j < T; j++)
                    G[i * T + j] = P[i * T + j] * (G[i * T + j] - dot) * c->scale;
            }
            for (int i = 0; i < T; i++)
                for (int e = 0; e < hd; e++) {
                    double aq = 0, ak = 0, av = 0;
                    for (int j = 0; j < T; j++) {
                        aq += G[i * T + j] * k[(size_t)j * d3 + e];
                        ak += G[j * T + i] * q[(size_t)j * d3 + e];
                        av += P[j * T + i] * F[j * T + i] * dO[(size_t)j * d + e];
                    }
                    dq[(size_t)i * d3 + e] = (float)aq;
                    dk[(size_t)i * d3 + e] = (float)ak;
                    dv[(size_t)i * d3 + e] = (float)av;
                }
        }
    free(P), free(F), free(G);
}

static void test_flash(int B, int H, int T, int hd, float p, ao_dtype t)
{
    flash_case c = {B, H, T, hd, (float)(1.0 / sqrt((double)hd)), p, {.p = 0}};
    const ao_cuda_dropout_key key = {.p = p,
                                     .seed = 0x5eedull,
                                     .step = 77,
                                     .layer = 5,
                                     .site = AO_DROP_ATTN_PROBS,
                                     .first_sample = 31337,
                                     .heads = H};
    c.key = key;
    char shape[96];
    snprintf(shape, sizeof shape, "%s B=%d H=%d T=%d hd=%d p=%.2f", ao_dtype_name(t), B, H, T, hd,
             p);
    const int d = H * hd;
    const size_t N = (size_t)B * T, nqkv = N * 3 * d, nctx = N * d, rows = (size_t)B * H * T;
    uint16_t *hq, *hdo;
    float *qkv = random_half(nqkv, 1.99f, t, &hq), *dctx = random_half(nctx, 1.0f, t, &hdo);
    float *ref_ctx = malloc(4 * nctx), *ref_dqkv = malloc(4 * nqkv);
    reference(&c, qkv, dctx, ref_ctx, ref_dqkv);

    void *d_qkv = ao_dev_alloc(dev, 2 * nqkv), *d_dctx = ao_dev_alloc(dev, 2 * nctx);
    void *d_ctx = ao_dev_alloc(dev, 2 * nctx), *d_ctx2 = ao_dev_alloc(dev, 2 * nctx);
    void *d_dqkv = ao_dev_alloc(dev, 2 * nqkv), *d_dqkv2 = ao_dev_alloc(dev, 2 * nqkv);
    float *d_lse = ao_dev_alloc(dev, 4 * rows);
    void *d_scratch = ao_dev_alloc(dev, ao_cuda_flash_backward_scratch_bytes(B, H, T));
    const size_t mbytes = ao_cuda_dropout_mask_bytes(B * H, (size_t)T * T);
    uint8_t *d_mask = ao_dev_alloc(dev, mbytes), *d_mask_ref = ao_dev_alloc(dev, mbytes);
    ao_copy_async(dev, d_qkv, hq, 2 * nqkv, AO_H2D, stream);
    ao_copy_async(dev, d_dctx, hdo, 2 * nctx, AO_H2D, stream);

    K(ao_cuda_flash_attention_forward(d_ctx, d_lse, d_qkv, t, B, H, T, hd, c.scale, &key, NULL,
                                      p > 0 ? d_mask : NULL, ao_cuda_stream(stream)));
    K(ao_cuda_flash_attention_forward(d_ctx2, d_lse, d_qkv, t, B, H, T, hd, c.scale, &key, NULL,
                                      NULL, ao_cuda_stream(stream)));
    float *ctx = download_half(d_ctx, nctx, t), *ctx2 = download_half(d_ctx2, nctx, t);
    report("flash forward ctx", shape, check_rel_err(ctx, ref_ctx, nctx), 2e-2);
    if (p > 0) { /* the mask drawn alone, then read: the bytes and the bits of the stored one */
        const ao_cuda_mask_job job = {d_mask_ref, B * H, (size_t)T * T, key};
        K(ao_cuda_draw_masks(&job, 1, 1, ao_cuda_stream(stream)));
        uint8_t *m1 = download_bytes(d_mask, mbytes), *m2 = download_bytes(d_mask_ref, mbytes);
        report_same("flash mask alone", shape, m1, m2, mbytes);
        K(ao_cuda_flash_attention_forward(d_ctx2, d_lse, d_qkv, t, B, H, T, hd, c.scale, &key,
                                          d_mask_ref, NULL, ao_cuda_stream(stream)));
        float *ctx3 = download_half(d_ctx2, nctx, t);
        report_same("flash forward mask in", shape, ctx, ctx3, 4 * nctx);
        free(m1), free(m2), free(ctx3);
    }
    report_same("flash forward repeat", shape, ctx, ctx2, 4 * nctx);

    /* backward drawing the mask, then reading the forward's */
    K(ao_cuda_flash_attention_backward(d_dqkv, d_scratch, d_dctx, d_ctx, d_lse, d_qkv, t, B, H, T,
                                       hd, c.scale, &key, NULL, ao_cuda_stream(stream)));
    const ao_gemm_desc dq = ao_cuda_flash_dq_gemm(d_dqkv, d_scratch, d_qkv, t, B, H, T, hd);
    ao_gemm(dev, stream, &dq);
    float *dqkv = download_half(d_dqkv, nqkv, t);
    float *got[3], *want[3];
    for (int part = 0; part < 3; part++) {
        got[part] = malloc(4 * nctx);
        want[part] = malloc(4 * nctx);
        for (size_t r = 0; r < N; r++) {
            memcpy(got[part] + r * d, dqkv + r * 3 * d + (size_t)part * d, 4 * (size_t)d);
            memcpy(want[part] + r * d, ref_dqkv + r * 3 * d + (size_t)part * d, 4 * (size_t)d);
        }
        static const char *names[3] = {"flash backward dq", "flash backward dk",
                                       "flash backward dv"};
        report(names[part], shape, check_rel_err(got[part], want[part], nctx), 2e-2);
        free(got[part]), free(want[part]);
    }
    if (p > 0) {
        K(ao_cuda_flash_attention_backward(d_dqkv2, d_scratch, d_dctx, d_ctx, d_lse, d_qkv, t, B, H,
                                           T, hd, c.scale, &key, d_mask, ao_cuda_stream(stream)));
        const ao_gemm_desc dq2 = ao_cuda_flash_dq_gemm(d_dqkv2, d_scratch, d_qkv, t, B, H, T, hd);
        ao_gemm(dev, stream, &dq2);
        float *dqkv2 = download_half(d_dqkv2, nqkv, t);
        report_same("flash backward mask in", shape, dqkv, dqkv2, 4 * nqkv);
        free(dqkv2);
        /* the unfused kernel's mask under the same key (any scores) */
        float *d_scores = ao_dev_alloc(dev, 4 * (size_t)B * H * T * T);
        void *d_probs = ao_dev_alloc(dev, 4 * (size_t)B * H * T * T);
        K(cudaMemsetAsync(d_scores, 0, 4 * (size_t)B * H * T * T, ao_cuda_stream(stream)));
        K(ao_cuda_softmax_dropout_forward(d_scores, NULL, d_probs, AO_F32, d_scores, AO_F32, B, H,
                                          T, &key, d_mask_ref, ao_cuda_stream(stream)));
        uint8_t *m1 = download_bytes(d_mask, mbytes), *m2 = download_bytes(d_mask_ref, mbytes);
        report_same("flash mask = unfused", shape, m1, m2, mbytes);
        free(m1), free(m2);
        ao_dev_free(dev, d_scores), ao_dev_free(dev, d_probs);
    }
    ao_dev_free(dev, d_qkv), ao_dev_free(dev, d_dctx), ao_dev_free(dev, d_ctx);
    ao_dev_free(dev, d_ctx2), ao_dev_free(dev, d_dqkv), ao_dev_free(dev, d_dqkv2);
    ao_dev_free(dev, d_lse), ao_dev_free(dev, d_scratch), ao_dev_free(dev, d_mask);
    ao_dev_free(dev, d_mask_ref);
    free(qkv), free(dctx), free(hq), free(hdo), free(ref_ctx), free(ref_dqkv), free(ctx);
    free(ctx2), free(dqkv);
}

int main(void)
{
    GPU_SKIP_UNLESS(ao_device_count("cuda") > 0, "no CUDA device visible");
    dev = ao_device_open("cuda", 0);
    CHECK(dev != NULL, "cannot open cuda:0");
    if (!dev) return check_result("test_flash_cuda");
    stream = ao_stream_create(dev, "compute", 0);

    CHECK(ao_cuda_flash_attention_supported(AO_BF16, 512, 128), "large's shape unsupported");
    CHECK(!ao_cuda_flash_attention_supported(AO_BF16, 100, 64), "T = 100 claimed supported");
    CHECK(!ao_cuda_flash_attention_supported(AO_F32, 128, 64), "fp32 claimed supported");
    CHECK(!ao_cuda_flash_attention_supported(AO_BF16, 128, 32), "hd = 32 claimed supported");
    test_flash(2, 3, 128, 64, 0.0f, AO_BF16);
    test_flash(2, 3, 128, 64, 0.1f, AO_BF16);
    test_flash(1, 2, 192, 128, 0.0f, AO_BF16);
    test_flash(1, 2, 192, 128, 0.25f, AO_BF16);
    test_flash(2, 2, 64, 128, 0.1f, AO_F16);
    /* head dim 128 and T a multiple of 128: both wgmma kernels on sm_90 */
    test_flash(2, 2, 256, 128, 0.0f, AO_BF16);
    test_flash(1, 3, 384, 128, 0.1f, AO_BF16);
    test_flash(1, 2, 128, 128, 0.1f, AO_F16);
    test_flash(1, 1, 128, 64, 1.0f, AO_BF16); /* everything dropped */

    ao_stream_destroy(stream);
    ao_device_close(dev);
    return check_result("test_flash_cuda");
}

#else

int main(void)
{
    GPU_SKIP_UNLESS(0, "built without CUDA");
    return 0;
}

#endif
