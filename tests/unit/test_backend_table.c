/* runtime/backend_table.h: a layer's table is found by its device's backend
 * name: the model's, engine's, loader's and queues' cpu tables are linked in. */
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
#include "queues/internal.h"
#include "runtime/backend_table.h"
#include "runtime/device.h"

struct fake_backend {
    const char *device_backend;
    int id;
};

static void test_cpu_tables(void **state)
{
    (void)state;
    ao_device *dev = ao_device_open("cpu", 0);
    assert_non_null(dev);
    assert_ptr_equal(AO_BACKEND_FIND(ao_model, dev), &ao_model_cpu_backend);
    assert_ptr_equal(AO_BACKEND_FIND(ao_engine, dev), &ao_engine_cpu_backend);
    assert_ptr_equal(AO_BACKEND_FIND(ao_loader, dev), &ao_loader_cpu_backend);
    assert_ptr_equal(AO_BACKEND_FIND(ao_qspin, dev), &ao_qspin_cpu_backend);
    ao_device_close(dev);
}

/* A linked-in table that does not serve the device's backend: the lookup
 * goes to the backend's plugin, which has no such table, and says nothing. */
static void test_no_table(void **state)
{
    (void)state;
    ao_device *dev = ao_device_open("cpu", 0);
    assert_non_null(dev);
    static const struct fake_backend other = {"no-such-device", 1};
    assert_null(ao_backend_find(&other, "ao_fake", dev));
    ao_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_tables),
        cmocka_unit_test(test_no_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
