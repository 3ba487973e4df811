/* runtime/backend_table.h: a layer's table is found by its device's backend
 * name, and the model, engine and loader lists hold the cpu table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "data/loader_backend.h"
#include "engine/engine_backend.h"
#include "model/model_backend.h"
#include "runtime/backend_table.h"
#include "runtime/device.h"

struct fake_backend {
    const char *device_backend;
    int id;
};

static const struct fake_backend fake_gpu = {"no-such-device", 1};
static const struct fake_backend fake_cpu = {"cpu", 2};

static void test_find_by_device_name(void **state)
{
    (void)state;
    ao_device *dev = ao_device_open("cpu", 0);
    assert_non_null(dev);
    static const struct fake_backend *const both[] = {&fake_gpu, &fake_cpu};
    static const struct fake_backend *const gpu_only[] = {&fake_gpu};
    const struct fake_backend *b = AO_BACKEND_FIND(both, dev);
    assert_ptr_equal(b, &fake_cpu);
    assert_int_equal(b->id, 2);
    assert_null(AO_BACKEND_FIND(gpu_only, dev));
    ao_device_close(dev);
}

static void test_layer_lists_hold_cpu(void **state)
{
    (void)state;
    ao_device *dev = ao_device_open("cpu", 0);
    assert_non_null(dev);
    static const struct ao_model_backend *const models[] = AO_BACKEND_LIST(ao_model);
    static const struct ao_engine_backend *const engines[] = AO_BACKEND_LIST(ao_engine);
    static const struct ao_loader_backend *const loaders[] = AO_BACKEND_LIST(ao_loader);
    assert_ptr_equal(AO_BACKEND_FIND(models, dev), &ao_model_cpu_backend);
    assert_ptr_equal(AO_BACKEND_FIND(engines, dev), &ao_engine_cpu_backend);
    assert_ptr_equal(AO_BACKEND_FIND(loaders, dev), &ao_loader_cpu_backend);
    ao_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_by_device_name),
        cmocka_unit_test(test_layer_lists_hold_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
