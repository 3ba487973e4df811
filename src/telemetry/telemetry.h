/* GPU telemetry of one rank (DESIGN §3 telemetry/): a sampler thread reads the
 * device's clocks, power, temperature, utilization, clock-event (throttle)
 * reasons and link throughput every telemetry.interval_ms through NVML (CUDA)
 * or rocm-smi (HIP), both loaded at run time with dlopen, and keeps the
 * samples in a ring. Per iteration the engine asks for the window of that
 * iteration and writes the aggregate into the record's "extra":
 *
 *     ao_telemetry *tel = ao_telemetry_start(&info, cfg.enabled, cfg.interval_ms);
 *     ...  // one iteration later, when its window is known:
 *     ao_tel_agg agg;
 *     ao_telemetry_window(tel, t0_ns, t1_ns, &agg);   // CLOCK_REALTIME ns
 *     rec.extra = ao_telemetry_extra; rec.extra_ctx = &agg;
 *     ...
 *     ao_telemetry_stop(tel);
 *
 * Only read functions are ever called: telemetry never changes a GPU setting
 * (clocks, power limits, persistence, anything).
 *
 * A missing library, a device the library cannot find, or the cpu backend
 * disable telemetry with one warning; the run continues and every window
 * reports AO_TEL_ABSENT. ao_telemetry_start always returns a handle. */
#ifndef AORTA_TELEMETRY_TELEMETRY_H
#define AORTA_TELEMETRY_TELEMETRY_H

#include <stdint.h>

#include <yajl/yajl_gen.h>

#include "runtime/device.h"

/* Metric order is the JSON order. NAN in a sample: not reported. */
typedef enum ao_tel_metric {
    AO_TEL_SM_CLOCK_MHZ,
    AO_TEL_MEM_CLOCK_MHZ,
    AO_TEL_POWER_W,
    AO_TEL_TEMP_C,
    AO_TEL_GPU_UTIL_PCT,
    AO_TEL_MEM_UTIL_PCT,
    AO_TEL_PCIE_TX_MBPS, /* MB/s, 1 MB = 1e6 bytes */
    AO_TEL_PCIE_RX_MBPS,
    AO_TEL_LINK_TX_MBPS, /* NVLink data throughput */
    AO_TEL_LINK_RX_MBPS,
    AO_TEL_NMETRICS
} ao_tel_metric;
/* "sm_clock_mhz", "mem_clock_mhz", "power_w", ... */
const char *ao_tel_metric_name(ao_tel_metric m);

typedef enum ao_tel_status {
    AO_TEL_ABSENT, /* telemetry disabled or unavailable */
    AO_TEL_EMPTY,  /* sampling, but no sample covers the window */
    AO_TEL_OK
} ao_tel_status;
/* "absent", "no_samples", "ok" */
const char *ao_tel_status_name(ao_tel_status s);

typedef struct ao_tel_stat {
    int n; /* samples that reported this metric; 0: min/mean/max are NAN */
    double min, mean, max;
} ao_tel_stat;

typedef struct ao_tel_agg {
    ao_tel_status status;
    const char *source; /* "nvml", "rocm_smi"; NULL when absent */
    int samples;
    ao_tel_stat m[AO_TEL_NMETRICS];
    uint64_t throttle; /* OR of the clock-event reasons seen in the window */
    /* bit i of throttle is called throttle_names[i] (NULL or past the end:
     * "bit_<i>"). */
    const char *const *throttle_names;
    int nthrottle_names;
} ao_tel_agg;

typedef struct ao_telemetry ao_telemetry;

/* enabled == 0: a disabled handle, silently. Otherwise open the backend's
 * library for the device `info` names (matched by PCI bus id) and start the
 * sampler thread; on failure one warning and a disabled handle. */
ao_telemetry *ao_telemetry_start(const ao_device_info *info, int enabled, int interval_ms);
/* 1 while a sampler runs. */
int ao_telemetry_active(const ao_telemetry *tel);
/* Aggregate the samples of [t0_ns, t1_ns] (CLOCK_REALTIME), plus the sample
 * in effect at t0 (the latest one before it, unless older than two
 * intervals): the readings are levels held between samples, so a window
 * shorter than the interval still gets the level it ran at. */
ao_tel_status ao_telemetry_window(ao_telemetry *tel, int64_t t0_ns, int64_t t1_ns, ao_tel_agg *out);
/* Stop the sampler, release the library; NULL is a no-op. */
void ao_telemetry_stop(ao_telemetry *tel);

/* Writes the key "telemetry" and the aggregate: {"status", "source",
 * "samples", "<metric>": {"min","mean","max"} or null, "throttle_mask",
 * "throttle_reasons": [names]}; an absent or empty window writes only status
 * and source. Returns the yajl status. */
yajl_gen_status ao_telemetry_write_json(yajl_gen g, const ao_tel_agg *agg);
/* ao_jsonl_extra_fn: ctx is a const ao_tel_agg *. */
int ao_telemetry_extra(void *ctx, yajl_gen g);

#endif
