/* The data loader (loader.h) on the cpu device: every batch equals
 * ao_data_fill of the global sample indices the formula gives (workers, no
 * workers, device placement, wrapping), 2 ranks x B concatenate to 1 rank x
 * 2B, buffers a pending copy or a consumer still reads are never overwritten
 * (slow copies, slow consumers, slow producers), requests out of order, clean
 * shutdown with workers blocked on a full ring, and the config errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "core/config.h"
#include "data/data.h"
#include "data/loader.h"
#include "runtime/device.h"

static const ao_data_shape SHAPE = {4, 2, 3, 2, 50}; /* T F D S V */

static ao_loader_config base_config(void)
{
    ao_loader_config c = {
        .data = SHAPE,
        .seed = 9,
        .target_kind = AO_TARGET_TEACHER,
        .batch = 3,
        .world = 1,
        .rank = 0,
        .accum = 1,
        .num_samples = 1000000,
        .placement = AO_PLACEMENT_HOST,
        .workers = 2,
        .pinned = 1,
        .depth = 2,
    };
    return c;
}

typedef struct {
    float *dense, *target, *weight;
    int32_t *ids;
    size_t dense_n, ids_n, tok_n; /* per batch */
} arrays;

static void arrays_alloc(arrays *a, int batch)
{
    a->tok_n = (size_t)batch * SHAPE.seq_len;
    a->dense_n = a->tok_n * SHAPE.num_dense * SHAPE.dense_dim;
    a->ids_n = a->tok_n * SHAPE.num_sparse;
    a->dense = malloc(a->dense_n * sizeof(float));
    a->ids = malloc(a->ids_n * sizeof(int32_t));
    a->target = malloc(a->tok_n * sizeof(float));
    a->weight = malloc(a->tok_n * sizeof(float));
}

static void arrays_free(arrays *a)
{
    free(a->dense);
    free(a->ids);
    free(a->target);
    free(a->weight);
}

/* What a batch at positions first.. must hold, one sample at a time with the
 * wrap done here (independently of the loader's runs). */
static void expected(arrays *a, const ao_loader_config *c, int64_t first)
{
    const size_t dn = a->dense_n / c->batch, in = a->ids_n / c->batch, tn = a->tok_n / c->batch;
    for (int i = 0; i < c->batch; i++) {
        uint64_t g = (uint64_t)((first + i) % c->num_samples);
        assert_int_equal(ao_data_fill(&c->data, c->seed, c->target_kind, g, 1, a->dense + i * dn,
                                      a->ids + i * in, a->target + i * tn, a->weight + i * tn),
                         0);
    }
}

static int batch_equals(const ao_batch *b, const arrays *a)
{
    return memcmp(b->dense, a->dense, a->dense_n * sizeof(float)) == 0 &&
           memcmp(b->ids, a->ids, a->ids_n * sizeof(int32_t)) == 0 &&
           memcmp(b->target, a->target, a->tok_n * sizeof(float)) == 0 &&
           memcmp(b->weight, a->weight, a->tok_n * sizeof(float)) == 0;
}

typedef struct {
    ao_device *dev;
    ao_stream *h2d;
    ao_stream *compute;
} env;

static void env_open(env *e)
{
    e->dev = ao_device_open("cpu", 0);
    assert_non_null(e->dev);
    e->h2d = ao_stream_create(e->dev, "h2d", 0);
    e->compute = ao_stream_create(e->dev, "compute", 0);
}

static void env_close(env *e)
{
    ao_stream_destroy(e->h2d);
    ao_stream_destroy(e->compute);
    ao_device_close(e->dev);
}

/* Every (step, micro) of a few steps, checked after its ready event. */
static void check_sequence(const ao_loader_config *c)
{
    env e;
    env_open(&e);
    ao_loader *l = ao_loader_create(e.dev, e.h2d, c);
    assert_non_null(l);
    arrays want;
    arrays_alloc(&want, c->batch);
    for (int64_t step = 0; step < 4; step++) {
        for (int micro = 0; micro < c->accum; micro++) {
            ao_event *ready = NULL;
            const ao_batch *b = ao_loader_next(l, step, micro, &ready);
            assert_non_null(ready);
            ao_event_sync(ready);
            int64_t first = ((step * c->accum + micro) * c->world + c->rank) * c->batch;
            assert_int_equal(b->first_sample, first);
            assert_int_equal(ao_loader_first_sample(c, step, micro), first);
            expected(&want, c, first);
            assert_true(batch_equals(b, &want));
        }
    }
    arrays_free(&want);
    ao_loader_destroy(l);
    env_close(&e);
}

static void test_batches_are_the_formula_samples(void **state)
{
    (void)state;
    ao_loader_config c = base_config();
    c.world = 3;
    c.rank = 2;
    c.accum = 2;
    check_sequence(&c); /* workers, pinned */
    c.workers = 0;
    c.pinned = 0;
    check_sequence(&c); /* filled in the caller */
    c.depth = 1;
    c.workers = 1;
    check_sequence(&c);
    c.target_kind = AO_TARGET_RANDOM;
    c.placement = AO_PLACEMENT_DEVICE;
    c.depth = 3;
    check_sequence(&c); /* generated on the device */
}

static void test_positions_wrap_around_the_dataset(void **state)
{
    (void)state;
    ao_loader_config c = base_config();
    c.num_samples = 5; /* batches straddle the end: positions 3,4,5 hold 3,4,0 */
    c.world = 2;
    check_sequence(&c);
    c.num_samples = 2; /* smaller than a batch: 3 samples wrap within one */
    c.workers = 0;
    check_sequence(&c);
    c.placement = AO_PLACEMENT_DEVICE;
    check_sequence(&c);
}

static void test_two_ranks_concatenate_to_one_rank_of_twice_the_batch(void **state)
{
    (void)state;
    env e;
    env_open(&e);
    ao_loader_config one = base_config(), r0 = base_config(), r1 = base_config();
    one.batch = 6;
    r0.world = r1.world = 2;
    r1.rank = 1;
    ao_loader *lone = ao_loader_create(e.dev, e.h2d, &one);
    ao_loader *l0 = ao_loader_create(e.dev, e.h2d, &r0);
    ao_loader *l1 = ao_loader_create(e.dev, e.h2d, &r1);
    assert_true(lone && l0 && l1);
    const size_t half = 3 * (size_t)SHAPE.seq_len;
    const size_t dense_half = half * SHAPE.num_dense * SHAPE.dense_dim;
    for (int64_t step = 0; step < 3; step++) {
        const ao_batch *a = ao_loader_next(lone, step, 0, NULL);
        const ao_batch *b0 = ao_loader_next(l0, step, 0, NULL);
        const ao_batch *b1 = ao_loader_next(l1, step, 0, NULL);
        ao_stream_sync(e.h2d);
        assert_int_equal(b0->first_sample, a->first_sample);
        assert_int_equal(b1->first_sample, a->first_sample + 3);
        assert_memory_equal(a->dense, b0->dense, dense_half * sizeof(float));
        assert_memory_equal(a->dense + dense_half, b1->dense, dense_half * sizeof(float));
        assert_memory_equal(a->ids, b0->ids, half * SHAPE.num_sparse * sizeof(int32_t));
        assert_memory_equal(a->ids + half * SHAPE.num_sparse, b1->ids,
                            half * SHAPE.num_sparse * sizeof(int32_t));
        assert_memory_equal(a->target, b0->target, half * sizeof(float));
        assert_memory_equal(a->target + half, b1->target, half * sizeof(float));
        assert_memory_equal(a->weight, b0->weight, half * sizeof(float));
        assert_memory_equal(a->weight + half, b1->weight, half * sizeof(float));
    }
    ao_loader_destroy(lone);
    ao_loader_destroy(l0);
    ao_loader_destroy(l1);
    env_close(&e);
}

/* ---- buffers in flight ----------------------------------------------------------- */

static void sleep_us(long us)
{
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static void sleep_closure(void *arg)
{
    sleep_us(*(const long *)arg);
}

/* The consumer's use of a batch, on the compute stream: after a while (so
 * later copies are enqueued meanwhile), compare it with what it must hold. */
typedef struct {
    const ao_batch *b;
    const arrays *want;
    long delay_us;
    int *bad;
} use_args;

static void use_closure(void *arg)
{
    const use_args *u = arg;
    sleep_us(u->delay_us);
    if (!batch_equals(u->b, u->want)) (*u->bad)++;
}

/* Runs `n` batches with h2d delayed by copy_delay before each copy and the
 * consumer taking use_delay per batch; returns the number of batches that
 * were not what they should be when the consumer read them. */
static int run_in_flight(ao_loader_config c, int n, long copy_delay, long use_delay)
{
    env e;
    env_open(&e);
    ao_loader *l = ao_loader_create(e.dev, e.h2d, &c);
    assert_non_null(l);
    arrays *want = calloc((size_t)n, sizeof *want);
    int bad = 0;
    for (int k = 0; k < n; k++) {
        arrays_alloc(&want[k], c.batch);
        expected(&want[k], &c, ao_loader_first_sample(&c, k, 0));
    }
    for (int k = 0; k < n; k++) {
        if (copy_delay) ao_launch_host(e.h2d, sleep_closure, &copy_delay, sizeof copy_delay);
        ao_event *ready;
        const ao_batch *b = ao_loader_next(l, k, 0, &ready);
        ao_stream_wait_event(e.compute, ready);
        use_args u = {b, &want[k], use_delay, &bad};
        ao_launch_host(e.compute, use_closure, &u, sizeof u);
        ao_loader_release(l, b, e.compute);
    }
    ao_stream_sync(e.compute);
    ao_loader_destroy(l);
    for (int k = 0; k < n; k++) arrays_free(&want[k]);
    free(want);
    env_close(&e);
    return bad;
}

static void test_ring_reuse_never_corrupts_a_batch_in_flight(void **state)
{
    (void)state;
    ao_loader_config c = base_config();
    c.workers = 4;
    c.depth = 2;
    /* slow copies, fast producers: host buffers wait for their copy */
    assert_int_equal(run_in_flight(c, 12, 2000, 0), 0);
    /* slow consumer: device buffers wait for the release */
    assert_int_equal(run_in_flight(c, 12, 0, 2000), 0);
    /* slow producer (one worker, a large batch), fast consumer */
    c.workers = 1;
    c.batch = 64;
    assert_int_equal(run_in_flight(c, 12, 0, 0), 0);
    /* no workers, slow both ways, and the device placement */
    c.workers = 0;
    c.batch = 3;
    assert_int_equal(run_in_flight(c, 8, 1000, 1000), 0);
    c.placement = AO_PLACEMENT_DEVICE;
    assert_int_equal(run_in_flight(c, 8, 0, 2000), 0);
}

/* Without the release a use of a batch enqueued after the next copy into
 * its buffers sees the later batch: what the in-flight test guards against
 * does happen. */
static void test_without_release_buffers_are_reused(void **state)
{
    (void)state;
    ao_loader_config c = base_config();
    c.depth = 1;
    env e;
    env_open(&e);
    ao_loader *l = ao_loader_create(e.dev, e.h2d, &c);
    arrays want;
    arrays_alloc(&want, c.batch);
    expected(&want, &c, 0);
    int bad = 0;
    ao_event *ready;
    const ao_batch *b = ao_loader_next(l, 0, 0, &ready);
    ao_stream_wait_event(e.compute, ready);
    /* same device buffers, no release: the use after the next copy sees it */
    (void)ao_loader_next(l, 1, 0, &ready);
    ao_stream_wait_event(e.compute, ready);
    use_args u = {b, &want, 0, &bad};
    ao_launch_host(e.compute, use_closure, &u, sizeof u);
    ao_stream_sync(e.compute);
    assert_int_equal(bad, 1);
    arrays_free(&want);
    ao_loader_destroy(l);
    env_close(&e);
}

static void test_requests_out_of_order(void **state)
{
    (void)state;
    ao_loader_config c = base_config();
    c.workers = 3;
    c.depth = 3;
    c.accum = 2;
    env e;
    env_open(&e);
    ao_loader *l = ao_loader_create(e.dev, e.h2d, &c);
    arrays want;
    arrays_alloc(&want, c.batch);
    const int64_t order[][2] = {{5, 1}, {0, 0}, {0, 1}, {2, 0}, {2, 0}, {1, 1}, {3, 0}, {3, 1}};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        ao_event *ready;
        const ao_batch *b = ao_loader_next(l, order[k][0], (int)order[k][1], &ready);
        ao_event_sync(ready);
        expected(&want, &c, ao_loader_first_sample(&c, order[k][0], (int)order[k][1]));
        assert_true(batch_equals(b, &want));
    }
    arrays_free(&want);
    ao_loader_destroy(l);
    env_close(&e);
}

static void test_shutdown_with_workers_blocked(void **state)
{
    (void)state;
    env e;
    env_open(&e);
    ao_loader_config c = base_config();
    c.workers = 6;
    c.depth = 2;
    /* never asked: the workers fill the ring and wait for a free buffer */
    ao_loader *l = ao_loader_create(e.dev, e.h2d, &c);
    assert_non_null(l);
    sleep_us(20000);
    ao_loader_destroy(l);
    /* with copies pending on a slow h2d stream */
    l = ao_loader_create(e.dev, e.h2d, &c);
    long delay = 10000;
    ao_launch_host(e.h2d, sleep_closure, &delay, sizeof delay);
    (void)ao_loader_next(l, 0, 0, NULL);
    (void)ao_loader_next(l, 1, 0, NULL);
    ao_loader_destroy(l);
    ao_loader_destroy(NULL);
    env_close(&e);
}

static void test_batch_bytes(void **state)
{
    (void)state;
    env e;
    env_open(&e);
    ao_loader_config c = base_config();
    ao_loader *l = ao_loader_create(e.dev, e.h2d, &c);
    /* B*T = 12 tokens of F*D = 6 floats, S = 2 ids, target, weight */
    assert_int_equal(ao_loader_batch_bytes(l), 12 * 4 * (6 + 2 + 1 + 1));
    ao_loader_destroy(l);
    c.placement = AO_PLACEMENT_DEVICE;
    l = ao_loader_create(e.dev, e.h2d, &c);
    assert_int_equal(ao_loader_batch_bytes(l), 0);
    ao_loader_destroy(l);
    env_close(&e);
}

static void test_bad_configs(void **state)
{
    (void)state;
    env e;
    env_open(&e);
    ao_loader_config c;
#define REJECTS(field, value)                                                                      \
    do {                                                                                           \
        c = base_config();                                                                         \
        c.field = value;                                                                           \
        assert_null(ao_loader_create(e.dev, e.h2d, &c));                                           \
    } while (0)
    REJECTS(batch, 0);
    REJECTS(accum, 0);
    REJECTS(world, 0);
    REJECTS(rank, 1);
    REJECTS(rank, -1);
    REJECTS(num_samples, 0);
    REJECTS(workers, -1);
    REJECTS(depth, 0);
    REJECTS(placement, 7);
    REJECTS(target_kind, 5);
    REJECTS(data.vocab, 0);
#undef REJECTS
    /* a backend with no device generator (cpu and cuda have one) */
    struct ao_device_ops ops = ao_cpu_device_ops;
    ops.name = "nogen";
    struct ao_device_base fake = {&ops};
    c = base_config();
    c.placement = AO_PLACEMENT_DEVICE;
    assert_null(ao_loader_create((ao_device *)&fake, e.h2d, &c));
    env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches_are_the_formula_samples),
        cmocka_unit_test(test_positions_wrap_around_the_dataset),
        cmocka_unit_test(test_two_ranks_concatenate_to_one_rank_of_twice_the_batch),
        cmocka_unit_test(test_ring_reuse_never_corrupts_a_batch_in_flight),
        cmocka_unit_test(test_without_release_buffers_are_reused),
        cmocka_unit_test(test_requests_out_of_order),
        cmocka_unit_test(test_shutdown_with_workers_blocked),
        cmocka_unit_test(test_batch_bytes),
        cmocka_unit_test(test_bad_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
