/* The sharding engine's per-backend kernels (engine_backend.h): the cpu
 * table against the ops_ref reference it wraps (accumulation, step scalars,
 * clipped AdamW reading the norm from device memory), and the engine's clear
 * refusal of a device backend that has no table. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/config.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/engine_backend.h"
#include "model/ops_ref.h"
#include "runtime/device.h"

#define N 37

static void fill(float *x, size_t n, float base)
{
    for (size_t i = 0; i < n; i++) x[i] = base + 0.01f * (float)((i * 7) % 13) - 0.05f;
}

static void test_cpu_table_matches_the_reference(void **state)
{
    (void)state;
    const struct ao_engine_backend *be = &ao_engine_cpu_backend;
    assert_string_equal(be->device_backend, "cpu");
    assert_null(be->set_compute); /* the engine warns instead */
    assert_null(be->cast);
    ao_device *dev = ao_device_open("cpu", 0);
    ao_stream *s = ao_stream_create(dev, "compute", 0);
    float *acc = ao_dev_alloc(dev, N * sizeof *acc), *r1 = ao_dev_alloc(dev, N * sizeof *r1);
    float *r2 = ao_dev_alloc(dev, N * sizeof *r2), *loss = ao_dev_alloc(dev, 2 * sizeof *loss);
    float *p = ao_dev_alloc(dev, N * sizeof *p), *m = ao_dev_alloc(dev, N * sizeof *m);
    float *v = ao_dev_alloc(dev, N * sizeof *v);
    double *scal = ao_dev_alloc(dev, 3 * sizeof *scal), *res = ao_dev_alloc(dev, 2 * sizeof *res);
    fill(r1, N, 0.5f);
    fill(r2, N, -0.25f);
    loss[0] = 0.5f;
    loss[1] = 0.25f;
    memset(m, 0, N * sizeof *m);
    memset(v, 0, N * sizeof *v);
    fill(p, N, 0.1f);

    ao_copy_async(dev, acc, r1, N * sizeof *acc, AO_D2D, s); /* a step's first reduction */
    be->accumulate(s, acc, r2, N);
    be->sum_squares(s, scal, acc, N, NULL);
    be->step_scalars(s, scal, scal, 1, 0.5, loss, 2, 1.0);
    ao_adamw_hparams h = {0.9f, 0.98f, 1e-8f, 0.01f};
    be->adamw(s, p, NULL, AO_F32, m, v, acc, N, &h, 1e-3f, 0.1f, 1.0f, 1, scal, res, NULL);
    ao_stream_sync(s);

    float want_acc[N], want_p[N], want_m[N] = {0}, want_v[N] = {0};
    for (int i = 0; i < N; i++) want_acc[i] = r1[i] + r2[i];
    assert_memory_equal(acc, want_acc, sizeof want_acc);
    double sq = ao_sum_squares(want_acc, N) * 0.5;
    assert_true(scal[0] == sq);
    assert_true(scal[1] == 0.75);
    assert_true(scal[2] == 1.0);
    float coef = ao_clip_coef(sq, 0.1f);
    assert_true(coef < 1.0f); /* clipping active */
    assert_true(res[0] == sqrt(sq));
    assert_true(res[1] == coef);
    fill(want_p, N, 0.1f);
    ao_adamw_step(want_p, want_acc, want_m, want_v, N, &h, 1e-3f, 1, coef);
    assert_memory_equal(p, want_p, sizeof want_p);
    assert_memory_equal(m, want_m, sizeof want_m);
    assert_memory_equal(v, want_v, sizeof want_v);

    /* fp16 loss scaling: gradients 2^10 too large, grad_scale 2^-10 undoes
     * it exactly. */
    float p2[N], m2[N], v2[N], big[N];
    memcpy(p2, p, sizeof p2);
    memcpy(m2, m, sizeof m2);
    memcpy(v2, v, sizeof v2);
    for (int i = 0; i < N; i++) big[i] = acc[i] * 1024.0f;
    memcpy(acc, big, sizeof big);
    be->adamw(s, p, NULL, AO_F32, m, v, acc, N, &h, 1e-3f, 0.1f, 1.0f / 1024.0f, 2, scal, res,
              NULL);
    ao_stream_sync(s);
    ao_adamw_step(p2, want_acc, m2, v2, N, &h, 1e-3f, 2, coef);
    assert_memory_equal(p, p2, sizeof p2);
    assert_memory_equal(m, m2, sizeof m2);

    /* An overflow (a non-finite squared norm) skips the update: nothing moves,
     * the coefficient reads 0. */
    const double bad[] = {INFINITY, NAN};
    for (int k = 0; k < 2; k++) {
        memcpy(p2, p, sizeof p2);
        memcpy(m2, m, sizeof m2);
        memcpy(v2, v, sizeof v2);
        scal[0] = bad[k];
        be->adamw(s, p, NULL, AO_F32, m, v, acc, N, &h, 1e-3f, 0.1f, 1.0f, 3, scal, res, NULL);
        ao_stream_sync(s);
        assert_true(res[1] == 0.0);
        assert_false(isfinite(res[0]));
        assert_memory_equal(p, p2, sizeof p2);
        assert_memory_equal(m, m2, sizeof m2);
        assert_memory_equal(v, v2, sizeof v2);
    }

    void *bufs[] = {acc, r1, r2, loss, p, m, v, scal, res};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ao_dev_free(dev, bufs[i]);
    ao_stream_destroy(s);
    ao_device_close(dev);
}

static void test_backend_without_table_is_refused(void **state)
{
    (void)state;
    struct ao_config cfg;
    memset(&cfg, 0, sizeof cfg);
    assert_int_equal(ao_config_load(&cfg, NULL, NULL, 0), 0);
    struct ao_device_ops ops = ao_cpu_device_ops;
    ops.name = "nokernels";
    struct ao_device_base fake = {&ops};
    ao_rank_info ri = {.rank = 0, .world_size = 1, .local_rank = 0, .local_world_size = 1};
    ao_engine_setup s = {.cfg = &cfg, .ri = &ri, .dev = (ao_device *)&fake};
    int rc = -1;
    assert_null(ao_engine_create(&s, &rc));
    assert_int_equal(rc, AO_EXIT_USAGE);
    ao_config_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_table_matches_the_reference),
        cmocka_unit_test(test_backend_without_table_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
