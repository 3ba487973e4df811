/* The sizes `aorta plan` adds up, shared with the code that allocates them:
 * the cpu model allocates ao_model_device_bytes to the byte; the cuda
 * model's sizes (model/sizes.h, checked against its allocations by
 * gpu/test_model_cuda) follow the shape (dropout masks only with dropout, the
 * 16-bit copies only in 16-bit compute); the engine's gathered buffers
 * (ao_gather_bufs_of, which make_buffers calls) pool, keep or gather in place
 * as the strategy says; and a plan's parts add up to its total, with 16-bit
 * copies only where the gpu backend makes them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/config.h"
#include "engine/memory.h"
#include "engine/shard.h"
#include "model/model.h"
#include "model/model_backend.h"
#include "model/ops_ref.h"
#include "model/sizes.h"
#include "runtime/device.h"

/* B=2 T=3 F=2 D=3 S=2 V=5 E=4 d=8 h=2 L=2 ff=12 H=6 */
static const ao_model_shape TINY = {2, 3, 2, 3, 2, 5, 4, 8, 2, 2, 12, 6, 0.25f, 77, 0};

static void test_cpu_model_allocates_its_size(void **state)
{
    (void)state;
    ao_device *dev = ao_device_open("cpu", 0);
    assert_non_null(dev);
    size_t before = 0, after = 0, peak = 0;
    ao_dev_mem_usage(dev, &before, &peak);
    ao_model *m = ao_model_create(dev, &TINY);
    assert_non_null(m);
    ao_dev_mem_usage(dev, &after, &peak);
    ao_model_bytes b;
    ao_model_device_bytes(&TINY, 0, 1, 0, &b);
    assert_int_equal(after - before, b.activations);
    assert_int_equal(b.half + b.other, 0); /* no 16-bit copies, masks or workspaces on cpu */
    ao_model_destroy(m);
    ao_device_close(dev);
}

static void test_cuda_sizes_follow_the_shape(void **state)
{
    (void)state;
    ao_model_cuda_sizes z;
    ao_model_cuda_sizes_of(&TINY, &z);
    assert_int_equal(z.arena_floats, ao_model_acts_floats(&TINY, z.extra_floats, z.scratch_floats));
    assert_true(z.extra_floats > 0 && z.hidden_mask_bytes > 0 && z.probs_mask_bytes > 0);
    assert_true(z.scratch_floats >= z.attn_scratch_floats);
    const ao_encoder_shape es = ao_model_encoder_shape(&TINY);
    assert_true(z.w16_elements >= ao_encoder_param_count(&es));
    assert_int_equal(z.w16_elements % AO_OP16_ALIGN, 0);

    ao_model_shape nodrop = TINY;
    nodrop.dropout = 0.0f;
    ao_model_cuda_sizes n;
    ao_model_cuda_sizes_of(&nodrop, &n);
    assert_int_equal(n.extra_floats + n.hidden_mask_bytes + n.probs_mask_bytes, 0);
    assert_int_equal(n.arena_floats + z.extra_floats, z.arena_floats);

    ao_model_shape nolayer = TINY;
    nolayer.layers = 0;
    ao_model_cuda_sizes_of(&nolayer, &n);
    assert_int_equal(n.stats_bytes + n.hidden_mask_bytes + n.probs_mask_bytes, 0);

    /* 16-bit compute adds its copies, 2 bytes an element; CUB's storage as given */
    ao_model_bytes f32, b16, est;
    ao_model_device_bytes(&TINY, 1, 0, 512, &f32);
    ao_model_device_bytes(&TINY, 1, 1, 512, &b16);
    assert_int_equal(f32.half, 0);
    assert_int_equal(b16.half, 2 * (z.arena_floats + z.w16_elements + z.outside_elements));
    assert_int_equal(f32.activations, z.arena_floats * sizeof(float));
    assert_int_equal(b16.other, f32.other);
    ao_model_device_bytes(&TINY, 1, 0, SIZE_MAX, &est);
    assert_int_equal(est.other - f32.other,
                     ao_align256(ao_embedding_sort_temp_estimate(z.sort_count)) - 512);
}

static void layout(ao_shard_layout *lay, int nshards)
{
    const size_t numel[4] = {1000, 300, 500, 400}; /* the root, then three layers */
    const int order[4] = {3, 2, 1, 0};
    assert_int_equal(ao_shard_layout_init(lay, numel, order, 4, nshards, 0, 8), 0);
}

static void test_gather_bufs(void **state)
{
    (void)state;
    ao_shard_layout lay;
    ao_gather_bufs g;
    layout(&lay, 2);
    /* full_shard, limit 2: the root's, then two slots of the largest layer */
    ao_gather_bufs_of(&lay, 2, 1, 1, &g);
    assert_int_equal(g.nbufs, 3);
    assert_int_equal(g.pool, 2);
    assert_false(g.in_place);
    assert_int_equal(ao_gather_buf_floats(&g, &lay, 0), lay.units[0].padded);
    assert_int_equal(ao_gather_buf_floats(&g, &lay, 1), lay.units[2].padded);
    assert_int_equal(ao_gather_buf_floats(&g, &lay, 2), lay.units[2].padded);
    /* a limit above the layers: one slot a layer */
    ao_gather_bufs_of(&lay, 9, 1, 0, &g);
    assert_int_equal(g.pool, 3);
    /* shard_grad_op keeps every layer's own buffer */
    ao_gather_bufs_of(&lay, 2, 0, 1, &g);
    assert_int_equal(g.nbufs, 4);
    assert_int_equal(g.pool, 0);
    for (int b = 1; b < 4; b++)
        assert_int_equal(ao_gather_buf_floats(&g, &lay, b), lay.units[b].padded);
    ao_shard_layout_free(&lay);
    /* one shard gathering in 16 bits: in place, every layer its own */
    layout(&lay, 1);
    ao_gather_bufs_of(&lay, 1, 1, 1, &g);
    assert_true(g.in_place);
    assert_int_equal(g.nbufs, 4);
    ao_gather_bufs_of(&lay, 1, 1, 0, &g);
    assert_false(g.in_place);
    assert_int_equal(g.nbufs, 2);
    ao_shard_layout_free(&lay);
}

static size_t parts(const ao_engine_memory *m)
{
    return m->params + m->params16 + m->gathered + m->grads + m->optimizer + m->baseline +
           m->activations + m->activations16 + m->data + m->comm;
}

static void test_plan_parts(void **state)
{
    (void)state;
    static const char *const strategies[][2] = {
        {"ddp", "no_shard"}, {"fsdp", "shard_grad_op"}, {"fsdp", "full_shard"}};
    for (size_t s = 0; s < 3; s++)
        for (int bf16 = 0; bf16 < 2; bf16++) {
            char mode[64], shard[64], mp[64], pd[64];
            snprintf(mode, sizeof mode, "distributed.mode=%s", strategies[s][0]);
            snprintf(shard, sizeof shard, "fsdp.sharding_strategy=%s", strategies[s][1]);
            snprintf(mp, sizeof mp, "training.mixed_precision=%s", bf16 ? "bf16" : "none");
            snprintf(pd, sizeof pd, "fsdp.param_dtype=%s", bf16 ? "bf16" : "fp32");
            char *ov[] = {mode, shard, mp, pd, "training.batch_size=2", "model.num_layers=2"};
            struct ao_config cfg;
            assert_int_equal(ao_config_load(&cfg, NULL, ov, 6), 0);
            ao_engine_memory cpu, gpu;
            assert_int_equal(ao_engine_memory_plan(&cfg, 2, 2, 0, &cpu), 0);
            assert_int_equal(ao_engine_memory_plan(&cfg, 2, 2, 1, &gpu), 0);
            assert_int_equal(parts(&cpu), cpu.total);
            assert_int_equal(parts(&gpu), gpu.total);
            assert_int_equal(cpu.activations16 + cpu.params16, 0);
            ao_model_shape shape;
            ao_model_shape_of(&cfg, &shape);
            ao_model_bytes mb;
            ao_model_device_bytes(&shape, 1, bf16, SIZE_MAX, &mb);
            assert_int_equal(gpu.activations16, mb.half);
            assert_int_equal(gpu.activations, mb.activations + mb.other);
            /* the 16-bit shard copy exists only where the gpu engine gathers in bf16 */
            assert_int_equal(gpu.params16 > 0, bf16 && s > 0);
            ao_config_free(&cfg);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_model_allocates_its_size),
        cmocka_unit_test(test_cuda_sizes_follow_the_shape),
        cmocka_unit_test(test_gather_bufs),
        cmocka_unit_test(test_plan_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
