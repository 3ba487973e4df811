/* cuBLASLt GEMMs of the CUDA backend against a double-precision reference
 * computed here on the host from the very inputs the GPU got (bf16/fp16
 * inputs are rounded first, so only the GPU's accumulation and output
 * rounding are measured).
 *
 * Error metric: max |gpu - ref| / max |ref| over the m x n (x batch) outputs.
 * Bounds (DESIGN §11): fp32 1e-5, tf32 1e-3, bf16 and fp16 1e-2.
 * The padding columns of C (ldc > n) must come back untouched. An epilogue
 * bias (in C's type) is checked on the odd, big and chunked shapes, a two-level
 * batch (ao_gemm_desc.batch_outer) in one launch and chunked.
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
#include "bench/values.h"
#include "runtime/device.h"

/* Stores v as dtype t at element i of buf; returns the value actually stored. */
static double store(void *buf, size_t i, ao_dtype t, float v)
{
    ao_value_store(t, buf, i, v);
    return ao_value_load(t, buf, i);
}

static double load(const void *buf, size_t i, ao_dtype t)
{
    return ao_value_load(t, buf, i);
}

static unsigned long long rng_state;

static float uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

struct gemm_case {
    int ta, tb, m, n, k, batch;
    ao_dtype ab, c;
    ao_compute_mode mode;
    float alpha, beta;
    int chunks, sm_target;
    int alone; /* ao_gemm_set_policy's: no workspace */
    double tol;
    int bias;  /* an epilogue bias of n random values of C's type */
    int outer; /* > 1: a two-level batch of outer groups of `batch` */
    int sep_d; /* the result into a separate D, C only read (batch 1) */
};

static const char *mode_name(const struct gemm_case *gc)
{
    if (gc->ab == AO_F32) return gc->mode == AO_COMPUTE_TF32 ? "tf32" : "fp32";
    return gc->ab == AO_BF16 ? "bf16" : "fp16";
}

static void run_case(ao_device *dev, ao_stream *s, const struct gemm_case *gc)
{
    const int pad = 3; /* leading dimensions beyond the row length */
    const int rows_a = gc->ta ? gc->k : gc->m, cols_a = gc->ta ? gc->m : gc->k;
    const int rows_b = gc->tb ? gc->n : gc->k, cols_b = gc->tb ? gc->k : gc->n;
    const int lda = cols_a + pad, ldb = cols_b + pad, ldc = gc->n + pad;
    const long long sa = (long long)rows_a * lda, sb = (long long)rows_b * ldb;
    const long long sc = (long long)gc->m * ldc;
    /* groups a gap apart, so that no single stride reaches every product */
    const int outer = gc->outer > 1 ? gc->outer : 1, gap = outer > 1 ? 64 : 0;
    const long long osa = sa * gc->batch + gap, osb = sb * gc->batch + gap;
    const long long osc = sc * gc->batch + gap;
    const size_t na = (size_t)osa * (size_t)outer, nb = (size_t)osb * (size_t)outer;
    const size_t nc = (size_t)osc * (size_t)outer;
    const size_t esz = ao_dtype_size(gc->ab), csz = ao_dtype_size(gc->c);

    void *ha = calloc(na, esz), *hb = calloc(nb, esz), *hc = calloc(nc, csz);
    void *out = calloc(nc, csz);
    double *ra = calloc(na, sizeof(double)), *rb = calloc(nb, sizeof(double));
    double *rc = calloc(nc, sizeof(double));
    for (size_t i = 0; i < na; i++) ra[i] = store(ha, i, gc->ab, uniform());
    for (size_t i = 0; i < nb; i++) rb[i] = store(hb, i, gc->ab, uniform());
    for (size_t i = 0; i < nc; i++) rc[i] = store(hc, i, gc->c, uniform());
    void *hbias = calloc((size_t)gc->n, csz);
    double *rbias = calloc((size_t)gc->n, sizeof *rbias);
    for (int j = 0; j < gc->n; j++) rbias[j] = store(hbias, (size_t)j, gc->c, uniform());

    void *da = ao_dev_alloc(dev, na * esz), *db = ao_dev_alloc(dev, nb * esz);
    void *dc = ao_dev_alloc(dev, nc * csz), *dd = gc->sep_d ? ao_dev_alloc(dev, nc * csz) : NULL;
    ao_copy_async(dev, da, ha, na * esz, AO_H2D, s);
    ao_copy_async(dev, db, hb, nb * esz, AO_H2D, s);
    ao_copy_async(dev, dc, hc, nc * csz, AO_H2D, s);
    if (dd) ao_copy_async(dev, dd, hc, nc * csz, AO_H2D, s); /* its padding, to check */
    void *dbias = ao_dev_alloc(dev, (size_t)gc->n * csz);
    ao_copy_async(dev, dbias, hbias, (size_t)gc->n * csz, AO_H2D, s);

    ao_gemm_set_policy(dev, gc->chunks, gc->sm_target, gc->alone);
    ao_gemm_desc d = {
        .trans_a = gc->ta,
        .trans_b = gc->tb,
        .m = gc->m,
        .n = gc->n,
        .k = gc->k,
        .alpha = gc->alpha,
        .beta = gc->beta,
        .a = da,
        .lda = lda,
        .b = db,
        .ldb = ldb,
        .c = dc,
        .ldc = ldc,
        .ab_type = gc->ab,
        .c_type = gc->c,
        .compute = gc->mode,
        .batch_count = gc->batch,
        .stride_a = gc->batch > 1 ? sa : 0,
        .stride_b = gc->batch > 1 ? sb : 0,
        .stride_c = gc->batch > 1 ? sc : 0,
        .bias = gc->bias ? dbias : NULL,
        .batch_outer = gc->outer,
        .outer_stride_a = osa,
        .outer_stride_b = osb,
        .outer_stride_c = osc,
        .d = dd,
    };
    ao_gemm(dev, s, &d);
    ao_copy_async(dev, out, dd ? dd : dc, nc * csz, AO_D2H, s);
    int c_changed = 0;
    if (dd) { /* C only read */
        void *c_after = calloc(nc, csz);
        ao_copy_async(dev, c_after, dc, nc * csz, AO_D2H, s);
        ao_stream_sync(s);
        c_changed = memcmp(c_after, hc, nc * csz) != 0;
        free(c_after);
    }
    ao_stream_sync(s);
    ao_gemm_set_policy(dev, 1, 0, 0);

    double max_err = 0, max_ref = 0;
    int pad_changed = 0;
    for (int g = 0; g < outer * gc->batch; g++) {
        const int o = g / gc->batch, b = g % gc->batch;
        const double *A = ra + (size_t)(o * osa + b * sa), *B = rb + (size_t)(o * osb + b * sb);
        for (int i = 0; i < gc->m; i++) {
            for (int j = 0; j < ldc; j++) {
                const size_t ci = (size_t)(o * osc + b * sc) + (size_t)i * (size_t)ldc + (size_t)j;
                const double got = load(out, ci, gc->c);
                if (j >= gc->n) {
                    if (got != rc[ci]) pad_changed++;
                    continue;
                }
                double acc = 0;
                for (int p = 0; p < gc->k; p++) {
                    const double av = gc->ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                    const double bv = gc->tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                    acc += av * bv;
                }
                const double ref =
                    gc->alpha * acc + gc->beta * rc[ci] + (gc->bias ? rbias[j] : 0.0);
                const double err = isnan(got) ? INFINITY : fabs(got - ref);
                if (err > max_err) max_err = err;
                if (fabs(ref) > max_ref) max_ref = fabs(ref);
            }
        }
    }
    const double rel = max_ref > 0 ? max_err / max_ref : max_err;
    printf("%s->%s ta=%d tb=%d m=%d n=%d k=%d batch=%d outer=%d chunks=%d sm_target=%d "
           "beta=%g%s%s%s: rel err %.3g (bound %.0e)\n",
           mode_name(gc), ao_dtype_name(gc->c), gc->ta, gc->tb, gc->m, gc->n, gc->k, gc->batch,
           outer, gc->chunks, gc->sm_target, gc->beta, gc->bias ? " bias" : "",
           gc->sep_d ? " separate D" : "", gc->alone ? " alone" : "", rel, gc->tol);
    CHECK(!c_changed, "a GEMM into a separate D wrote C");
    CHECK(rel <= gc->tol, "%s ta=%d tb=%d m=%d n=%d k=%d: %.3g > %.0e", mode_name(gc), gc->ta,
          gc->tb, gc->m, gc->n, gc->k, rel, gc->tol);
    CHECK(max_ref > 0, "reference is all zeros: the test data is degenerate");
    CHECK(pad_changed == 0, "%d padding elements of C (beyond n) were written", pad_changed);

    ao_dev_free(dev, da);
    ao_dev_free(dev, db);
    ao_dev_free(dev, dc);
    if (dd) ao_dev_free(dev, dd);
    ao_dev_free(dev, dbias);
    free(hbias), free(rbias);
    free(ha), free(hb), free(hc), free(out), free(ra), free(rb), free(rc);
}

int main(void)
{
    GPU_SKIP_UNLESS(ao_device_count("cuda") > 0, "no CUDA device visible");
    const char *seed_env = getenv("AORTA_TEST_SEED");
    rng_state = seed_env ? strtoull(seed_env, NULL, 10)
                         : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32);
    printf("seed %llu (AORTA_TEST_SEED=%llu replays it)\n", rng_state, rng_state);

    ao_device *dev = ao_device_open("cuda", 0);
    CHECK(dev != NULL, "cannot open cuda:0");
    if (!dev) return check_result("test_gemm_cuda");
    ao_stream *s = ao_stream_create(dev, "compute", 0);

    struct {
        ao_dtype ab, c;
        ao_compute_mode mode;
        double tol;
    } types[] = {
        {AO_F32, AO_F32, AO_COMPUTE_DEFAULT, 1e-5},  {AO_F32, AO_F32, AO_COMPUTE_TF32, 1e-3},
        {AO_BF16, AO_F32, AO_COMPUTE_DEFAULT, 1e-2}, {AO_BF16, AO_BF16, AO_COMPUTE_DEFAULT, 1e-2},
        {AO_F16, AO_F32, AO_COMPUTE_DEFAULT, 1e-2},  {AO_F16, AO_F16, AO_COMPUTE_DEFAULT, 1e-2},
    };
    const int ntypes = (int)(sizeof types / sizeof types[0]);
    for (int t = 0; t < ntypes; t++) {
        if (!ao_device_supports(dev, types[t].ab)) {
            printf("%s not supported on this device: skipped\n", ao_dtype_name(types[t].ab));
            continue;
        }
        for (int ta = 0; ta < 2; ta++) {
            for (int tb = 0; tb < 2; tb++) {
                const struct gemm_case base = {.ta = ta,
                                               .tb = tb,
                                               .batch = 1,
                                               .ab = types[t].ab,
                                               .c = types[t].c,
                                               .mode = types[t].mode,
                                               .alpha = 1.0f,
                                               .chunks = 1,
                                               .tol = types[t].tol};
                struct gemm_case odd = base;
                odd.m = 127, odd.n = 65, odd.k = 33;
                run_case(dev, s, &odd);
                struct gemm_case big = base;
                big.m = 256, big.n = 192, big.k = 512, big.alpha = 0.5f, big.beta = 0.75f;
                run_case(dev, s, &big);
                /* with no workspace offered (one rank: static schedules) */
                struct gemm_case alone = big;
                alone.alone = 1;
                run_case(dev, s, &alone);
                struct gemm_case batched = base;
                batched.m = 64, batched.n = 48, batched.k = 40, batched.batch = 3;
                batched.beta = 1.0f;
                run_case(dev, s, &batched);
                /* attention's shape of batch: heads within samples, once in
                 * one launch and once chunked (a launch per group) */
                struct gemm_case two = batched;
                two.outer = 2;
                run_case(dev, s, &two);
                two.chunks = 2;
                run_case(dev, s, &two);
                /* 127 rows in 3 launches (43 + 42 + 42), each on 32 SMs */
                struct gemm_case chunked = odd;
                chunked.batch = 2, chunked.beta = 0.5f, chunked.chunks = 3;
                chunked.sm_target = 32;
                run_case(dev, s, &chunked);
                /* the model's linear layers (16-bit C: attention's input
                 * projection, written as the GEMM operand it feeds) */
                odd.bias = chunked.bias = big.bias = 1;
                chunked.batch = 1; /* a bias needs batch_count 1 */
                run_case(dev, s, &odd);
                run_case(dev, s, &big);
                run_case(dev, s, &chunked);
                if (types[t].c == AO_F32) {
                    /* a residual added in the epilogue, into another
                     * buffer (the model's backward), chunked too */
                    struct gemm_case plus = odd;
                    plus.bias = 0, plus.beta = 1.0f, plus.sep_d = 1;
                    run_case(dev, s, &plus);
                    plus.chunks = 3;
                    run_case(dev, s, &plus);
                }
            }
        }
    }
    /* The same shape again: served from the algorithm cache, fresh data. */
    struct gemm_case again = {.m = 127,
                              .n = 65,
                              .k = 33,
                              .batch = 1,
                              .ab = AO_F32,
                              .c = AO_F32,
                              .mode = AO_COMPUTE_DEFAULT,
                              .alpha = 1.0f,
                              .chunks = 1,
                              .tol = 1e-5};
    run_case(dev, s, &again);

    ao_stream_destroy(s);
    ao_device_close(dev);
    return check_result("test_gemm_cuda");
}
