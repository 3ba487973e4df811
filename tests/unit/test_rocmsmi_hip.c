/* The rocm-smi telemetry (src/telemetry/rocmsmi.c) loads its library with
 * dlopen and so states rocm_smi.h's constants and the layouts it reads by
 * hand; here they are held against the real header, in HIP builds (make
 * rocm-check) where librocm-smi-dev is installed. A mismatch fails the
 * build (static_assert) or the test. */
#include <assert.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <rocm_smi/rocm_smi.h>

/* rocmsmi.c's enum: RSMI_CLK_SYS 0, RSMI_CLK_MEM 4, RSMI_TEMP_EDGE 0,
 * RSMI_TEMP_JUNCTION 1, and RSMI_TEMP_CURRENT 0 and success 0 in its calls */
static_assert(RSMI_CLK_TYPE_SYS == 0, "rocmsmi.c's RSMI_CLK_SYS");
static_assert(RSMI_CLK_TYPE_MEM == 4, "rocmsmi.c's RSMI_CLK_MEM");
static_assert(RSMI_TEMP_TYPE_EDGE == 0, "rocmsmi.c's RSMI_TEMP_EDGE");
static_assert(RSMI_TEMP_TYPE_JUNCTION == 1, "rocmsmi.c's RSMI_TEMP_JUNCTION");
static_assert(RSMI_TEMP_CURRENT == 0, "rocmsmi.c's temperature metric");
static_assert(RSMI_STATUS_SUCCESS == 0, "rocmsmi.c's success");
static_assert(sizeof(rsmi_status_t) == sizeof(int), "rocmsmi.c's int status");

/* freq_current_hz reads either layout of rsmi_frequencies_t: current at 4
 * and frequency[] at 8 (old), or current at 8 and frequency[] at 16 (with
 * has_deep_sleep first); and the buffer it passes holds 1 KiB. */
static void test_frequencies_layout(void **state)
{
    (void)state;
    const size_t cur = offsetof(rsmi_frequencies_t, current);
    const size_t freq = offsetof(rsmi_frequencies_t, frequency);
    assert_true((cur == 4 && freq == 8) || (cur == 8 && freq == 16));
    assert_true(sizeof(rsmi_frequencies_t) <= 128 * sizeof(uint64_t));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_frequencies_layout)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
