/* Inside telemetry/: the sample ring, the backends' interface, and a way for
 * tests to feed samples by hand. */
#ifndef AORTA_TELEMETRY_INTERNAL_H
#define AORTA_TELEMETRY_INTERNAL_H

#include <stdint.h>

#include "runtime/device.h"
#include "telemetry/telemetry.h"

typedef struct ao_tel_sample {
    int64_t t_ns; /* CLOCK_REALTIME at the middle of the read */
    double v[AO_TEL_NMETRICS];
    uint64_t throttle;
} ao_tel_sample;

/* A backend: read() fills every metric it can (NAN elsewhere) and the
 * throttle mask; it only ever calls read-only library functions. */
typedef struct ao_tel_source {
    const char *name;
    void *state;
    void (*read)(void *state, ao_tel_sample *s);
    void (*close)(void *state);
    const char *const *throttle_names;
    int nthrottle_names;
} ao_tel_source;

/* Open the library and find the device; 0, or -1 after ONE warning. */
int ao_tel_nvml_open(const ao_device_info *info, int interval_ms, ao_tel_source *out);
int ao_tel_rocmsmi_open(const ao_device_info *info, int interval_ms, ao_tel_source *out);

/* A handle with a ring of `capacity` samples and no sampler thread, as if
 * `source` were sampling every interval_ms; samples come from
 * ao_telemetry_inject. For tests. */
ao_telemetry *ao_telemetry_start_manual(const ao_tel_source *source, int capacity, int interval_ms);
void ao_telemetry_inject(ao_telemetry *tel, const ao_tel_sample *s);

/* A sample with every metric NAN and no throttle reason. */
void ao_tel_sample_clear(ao_tel_sample *s, int64_t t_ns);

#endif
