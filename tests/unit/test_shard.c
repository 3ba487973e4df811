/* Shard layout: padding, alignment, offsets in placement order, extraction,
 * and the errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "engine/shard.h"

static void test_padding_and_offsets(void **state)
{
    (void)state;
    size_t numel[3] = {1000, 130, 1};
    int order[3] = {2, 1, 0}; /* backward-completion order: layers, then the root */
    ao_shard_layout l;
    assert_int_equal(ao_shard_layout_init(&l, numel, order, 3, 4, 1, 64), 0);
    for (int u = 0; u < 3; u++) {
        const ao_unit_span *s = &l.units[u];
        assert_true(s->padded >= s->numel);
        assert_int_equal(s->padded % (4 * 64), 0);
        assert_int_equal(s->shard * 4, s->padded);
        assert_int_equal(s->shard % 64, 0);
    }
    assert_int_equal(l.units[0].padded, 1024);
    assert_int_equal(l.units[1].padded, 256);
    assert_int_equal(l.units[2].padded, 256);
    /* placed 2, 1, 0 */
    assert_int_equal(l.units[2].full_offset, 0);
    assert_int_equal(l.units[1].full_offset, 256);
    assert_int_equal(l.units[0].full_offset, 512);
    assert_int_equal(l.units[0].shard_offset, 128);
    assert_int_equal(l.full_total, 1536);
    assert_int_equal(l.shard_total, 384);
    ao_shard_layout_free(&l);
}

static void test_extract_covers_every_element_once(void **state)
{
    (void)state;
    size_t numel[1] = {300};
    int order[1] = {0};
    float full[300];
    for (int i = 0; i < 300; i++) full[i] = (float)(i + 1);
    float sum = 0;
    int nonzero = 0;
    for (int r = 0; r < 3; r++) {
        ao_shard_layout l;
        assert_int_equal(ao_shard_layout_init(&l, numel, order, 1, 3, r, 64), 0);
        assert_int_equal(l.units[0].shard, 128); /* 300 -> 384 = 3 x 128 */
        float shard[128];
        memset(shard, 0xff, sizeof shard);
        ao_shard_extract(&l, 0, full, shard);
        for (int i = 0; i < 128; i++) {
            size_t g = (size_t)r * 128 + (size_t)i;
            assert_true(shard[i] == (g < 300 ? full[g] : 0.0f)); /* padding is zero */
            sum += shard[i];
            nonzero += shard[i] != 0;
        }
        ao_shard_layout_free(&l);
    }
    assert_int_equal(nonzero, 300);
    assert_true(sum == 300.0f * 301.0f / 2.0f);
}

static void test_errors(void **state)
{
    (void)state;
    size_t numel[2] = {10, 10};
    int dup[2] = {0, 0}, ok[2] = {0, 1};
    ao_shard_layout l;
    assert_int_equal(ao_shard_layout_init(&l, numel, dup, 2, 2, 0, 64), AO_EXIT_USAGE);
    assert_int_equal(ao_shard_layout_init(&l, numel, ok, 2, 0, 0, 64), AO_EXIT_USAGE);
    assert_int_equal(ao_shard_layout_init(&l, numel, ok, 2, 2, 2, 64), AO_EXIT_USAGE);
    assert_int_equal(ao_shard_layout_init(&l, numel, ok, 2, 2, 0, 0), AO_EXIT_USAGE);
    assert_null(l.units);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_padding_and_offsets),
        cmocka_unit_test(test_extract_covers_every_element_once),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
