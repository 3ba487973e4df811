/* telemetry: a missing library or the cpu backend disable it with one warning;
 * the window aggregate (held sample, min/mean/max, throttle OR, stale and
 * overwritten samples) over a hand-fed ring; the JSON of the aggregate. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_files.h"

#include "core/json.h"
#include "telemetry/internal.h"
#include "telemetry/telemetry.h"

#define MS 1000000LL

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void test_library_absent(void **state)
{
    (void)state;
    /* No NVML here; where there is one, no device has this bus id: either
     * way one warning and a disabled handle. */
    ao_device_info info;
    memset(&info, 0, sizeof info);
    strcpy(info.backend, "cuda");
    strcpy(info.pci_bus_id, "00000000:FF:1F.7");
    stderr_capture cap;
    capture_begin(&cap);
    ao_telemetry *tel = ao_telemetry_start(&info, 1, 50);
    ao_tel_agg agg;
    for (int i = 0; i < 3; i++)
        assert_int_equal(ao_telemetry_window(tel, 0, 1000 * MS, &agg), AO_TEL_ABSENT);
    char *err = capture_end(&cap);
    assert_int_equal(count_of(err, "warning"), 1);
    assert_contains(err, "telemetry disabled");
    free(err);
    assert_false(ao_telemetry_active(tel));
    assert_int_equal(agg.status, AO_TEL_ABSENT);
    assert_null(agg.source);
    assert_true(isnan(agg.m[AO_TEL_POWER_W].mean));
    ao_telemetry_stop(tel);

    /* rocm-smi: the same */
    strcpy(info.backend, "hip");
    strcpy(info.pci_bus_id, "0000:ff:1f.7");
    capture_begin(&cap);
    tel = ao_telemetry_start(&info, 1, 50);
    err = capture_end(&cap);
    assert_int_equal(count_of(err, "warning"), 1);
    assert_false(ao_telemetry_active(tel));
    free(err);
    ao_telemetry_stop(tel);
    ao_telemetry_stop(NULL);
}

static void test_cpu_and_disabled(void **state)
{
    (void)state;
    ao_device_info info;
    memset(&info, 0, sizeof info);
    strcpy(info.backend, "cpu");
    stderr_capture cap;
    capture_begin(&cap);
    ao_telemetry *off = ao_telemetry_start(&info, 0, 100);
    char *err = capture_end(&cap);
    assert_string_equal(err, ""); /* disabled: silent */
    free(err);
    capture_begin(&cap);
    ao_telemetry *cpu = ao_telemetry_start(&info, 1, 100);
    err = capture_end(&cap);
    assert_int_equal(count_of(err, "warning"), 1);
    assert_contains(err, "cpu backend has no GPU telemetry");
    free(err);
    capture_begin(&cap);
    strcpy(info.backend, "cuda");
    ao_telemetry *bad = ao_telemetry_start(&info, 1, 0);
    err = capture_end(&cap);
    assert_contains(err, "telemetry.interval_ms");
    free(err);
    ao_tel_agg agg;
    assert_int_equal(ao_telemetry_window(off, 0, 1, &agg), AO_TEL_ABSENT);
    assert_int_equal(ao_telemetry_window(cpu, 0, 1, &agg), AO_TEL_ABSENT);
    assert_int_equal(ao_telemetry_window(bad, 0, 1, &agg), AO_TEL_ABSENT);
    ao_telemetry_stop(off);
    ao_telemetry_stop(cpu);
    ao_telemetry_stop(bad);
}

static const char *const reasons[] = {"gpu_idle", "applications_clocks_setting", "sw_power_cap",
                                      "hw_slowdown"};
static const ao_tel_source fake = {.name = "fake", .throttle_names = reasons, .nthrottle_names = 4};

/* Samples every 10 ms from t = 0: sm clock 1000 + 10 i, power = i, temp
 * only on even i, throttle bit (i % 5) on i = 0, 4, 6 plus bit 40 on i = 5. */
static ao_telemetry *fed_ring(int capacity, int nsamples)
{
    ao_telemetry *tel = ao_telemetry_start_manual(&fake, capacity, 10);
    for (int i = 0; i < nsamples; i++) {
        ao_tel_sample s;
        ao_tel_sample_clear(&s, i * 10 * MS);
        s.v[AO_TEL_SM_CLOCK_MHZ] = 1000 + 10 * i;
        s.v[AO_TEL_POWER_W] = i;
        if (i % 2 == 0) s.v[AO_TEL_TEMP_C] = 50 + i;
        if (i == 0 || i == 4 || i == 6) s.throttle = 1ULL << (i % 5);
        if (i == 5) s.throttle = 1ULL << 40;
        ao_telemetry_inject(tel, &s);
    }
    return tel;
}

static void test_window_aggregate(void **state)
{
    (void)state;
    ao_telemetry *tel = fed_ring(64, 10);
    assert_true(ao_telemetry_active(tel));
    ao_tel_agg a;
    /* [25, 55] ms: samples 3, 4, 5 plus sample 2 in effect at 25 ms */
    assert_int_equal(ao_telemetry_window(tel, 25 * MS, 55 * MS, &a), AO_TEL_OK);
    assert_string_equal(a.source, "fake");
    assert_int_equal(a.samples, 4);
    const ao_tel_stat *sm = &a.m[AO_TEL_SM_CLOCK_MHZ];
    assert_int_equal(sm->n, 4);
    assert_true(sm->min == 1020 && sm->max == 1050 && sm->mean == 1035);
    const ao_tel_stat *tc = &a.m[AO_TEL_TEMP_C];
    assert_int_equal(tc->n, 2); /* samples 2 and 4 */
    assert_true(tc->min == 52 && tc->max == 54 && tc->mean == 53);
    assert_int_equal(a.m[AO_TEL_LINK_TX_MBPS].n, 0);
    assert_true(isnan(a.m[AO_TEL_LINK_TX_MBPS].mean));
    assert_true(a.throttle == ((1ULL << 4) | (1ULL << 40))); /* i = 4 and 5 only */

    /* a window on a sample's timestamp includes it; ends are inclusive */
    assert_int_equal(ao_telemetry_window(tel, 30 * MS, 30 * MS, &a), AO_TEL_OK);
    assert_int_equal(a.samples, 2); /* 3 and 2 held */
    /* a window shorter than the interval gets the held level */
    assert_int_equal(ao_telemetry_window(tel, 61 * MS, 62 * MS, &a), AO_TEL_OK);
    assert_int_equal(a.samples, 1);
    assert_true(a.m[AO_TEL_POWER_W].mean == 6);
    assert_true(a.throttle == (1ULL << 1));
    /* past the last sample by more than two intervals: nothing */
    assert_int_equal(ao_telemetry_window(tel, 200 * MS, 210 * MS, &a), AO_TEL_EMPTY);
    assert_int_equal(a.samples, 0);
    assert_true(isnan(a.m[AO_TEL_SM_CLOCK_MHZ].min));
    /* before the first sample */
    assert_int_equal(ao_telemetry_window(tel, -50 * MS, -40 * MS, &a), AO_TEL_EMPTY);
    ao_telemetry_stop(tel);

    /* a full ring keeps the newest samples */
    tel = fed_ring(4, 10); /* keeps 6..9 */
    assert_int_equal(ao_telemetry_window(tel, 0, 1000 * MS, &a), AO_TEL_OK);
    assert_int_equal(a.samples, 4);
    assert_true(a.m[AO_TEL_SM_CLOCK_MHZ].min == 1060 && a.m[AO_TEL_SM_CLOCK_MHZ].max == 1090);
    ao_telemetry_stop(tel);
}

static yajl_val json_of(const ao_tel_agg *a)
{
    yajl_gen g = ao_json_gen_new(0);
    assert_int_equal(yajl_gen_map_open(g), yajl_gen_status_ok);
    assert_int_equal(ao_telemetry_extra((void *)a, g), 0);
    assert_int_equal(yajl_gen_map_close(g), yajl_gen_status_ok);
    const unsigned char *buf;
    size_t len;
    yajl_gen_get_buf(g, &buf, &len);
    char *text = strndup((const char *)buf, len);
    yajl_gen_free(g);
    char err[128];
    yajl_val v = yajl_tree_parse(text, err, sizeof err);
    free(text);
    assert_non_null(v);
    yajl_val t = ao_json_member(v, "telemetry");
    assert_true(YAJL_IS_OBJECT(t));
    return v;
}

static void test_json(void **state)
{
    (void)state;
    ao_telemetry *tel = fed_ring(64, 10);
    ao_tel_agg a;
    ao_telemetry_window(tel, 25 * MS, 55 * MS, &a);
    yajl_val doc = json_of(&a);
    yajl_val t = ao_json_member(doc, "telemetry");
    assert_string_equal(ao_json_member(t, "status")->u.string, "ok");
    assert_string_equal(ao_json_member(t, "source")->u.string, "fake");
    assert_int_equal(YAJL_GET_INTEGER(ao_json_member(t, "samples")), 4);
    yajl_val sm = ao_json_member(t, "sm_clock_mhz");
    assert_true(ao_json_number(ao_json_member(sm, "min")) == 1020);
    assert_true(ao_json_number(ao_json_member(sm, "mean")) == 1035);
    assert_true(ao_json_number(ao_json_member(sm, "max")) == 1050);
    assert_true(YAJL_IS_NULL(ao_json_member(t, "link_rx_mbps")));
    assert_true(ao_json_number(ao_json_member(t, "throttle_mask")) ==
                (double)((1ULL << 4) | (1ULL << 40)));
    yajl_val rs = ao_json_member(t, "throttle_reasons");
    assert_true(YAJL_IS_ARRAY(rs));
    assert_int_equal(rs->u.array.len, 2);
    assert_string_equal(rs->u.array.values[0]->u.string, "bit_4"); /* past the names */
    assert_string_equal(rs->u.array.values[1]->u.string, "bit_40");
    yajl_tree_free(doc);

    ao_telemetry_window(tel, 61 * MS, 62 * MS, &a);
    doc = json_of(&a);
    rs = ao_json_member(ao_json_member(doc, "telemetry"), "throttle_reasons");
    assert_int_equal(rs->u.array.len, 1);
    assert_string_equal(rs->u.array.values[0]->u.string, "applications_clocks_setting");
    yajl_tree_free(doc);

    ao_telemetry_window(tel, 500 * MS, 600 * MS, &a);
    doc = json_of(&a);
    t = ao_json_member(doc, "telemetry");
    assert_string_equal(ao_json_member(t, "status")->u.string, "no_samples");
    assert_null(ao_json_member(t, "samples"));
    yajl_tree_free(doc);
    ao_telemetry_stop(tel);

    ao_telemetry_window(NULL, 0, 1, &a);
    doc = json_of(&a);
    t = ao_json_member(doc, "telemetry");
    assert_string_equal(ao_json_member(t, "status")->u.string, "absent");
    assert_true(YAJL_IS_NULL(ao_json_member(t, "source")));
    yajl_tree_free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library_absent),
        cmocka_unit_test(test_cpu_and_disabled),
        cmocka_unit_test(test_window_aggregate),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
