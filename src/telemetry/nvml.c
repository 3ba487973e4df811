/* NVML telemetry, loaded with dlopen("libnvidia-ml.so.1") so the binary has no
 * link dependency on the driver. READ-ONLY: only nvmlInit/nvmlShutdown, the
 * handle lookup and nvmlDeviceGet* queries are resolved; nothing that sets a
 * clock, power limit, mode or anything else is ever looked up or called.
 *
 * The few types and prototypes used are declared here from the NVML API
 * reference (docs.nvidia.com/deploy/nvml-api), so no NVML header is needed:
 * - nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM = 1 / NVML_CLOCK_MEM = 2, MHz)
 * - nvmlDeviceGetPowerUsage(dev, mW)
 * - nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU = 0, °C)
 * - nvmlDeviceGetUtilizationRates(dev, {gpu %, memory %})
 * - nvmlDeviceGetCurrentClocksEventReasons (R535+), else the older
 *   nvmlDeviceGetCurrentClocksThrottleReasons (same bits)
 * - nvmlDeviceGetPcieThroughput(dev, TX = 0 / RX = 1, KB/s): NVML samples it
 *   over 20 ms inside the call, so it is read only when the interval is at
 *   least 100 ms (it would otherwise dominate the sampler)
 * - nvmlDeviceGetFieldValues with NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX
 *   (138/139): cumulative KiB counters, turned into a rate between two
 *   samples; a device that answers "not supported" has no link metrics. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "telemetry/internal.h"

typedef int nvml_return; /* nvmlReturn_t: 0 = NVML_SUCCESS */
typedef struct nvml_device_st *nvml_device;

typedef struct nvml_utilization {
    unsigned int gpu, memory;
} nvml_utilization;

/* nvmlFieldValue_t */
typedef struct nvml_field_value {
    unsigned int field_id, scope_id;
    long long timestamp_us, latency_us;
    int value_type; /* nvmlValueType_t */
    nvml_return ret;
    union {
        double d;
        unsigned int ui;
        unsigned long ul;
        unsigned long long ull;
        long long sll;
        int si;
        unsigned short us;
    } value;
} nvml_field_value;

enum {
    NVML_SUCCESS = 0,
    NVML_CLOCK_SM = 1,
    NVML_CLOCK_MEM = 2,
    NVML_TEMPERATURE_GPU = 0,
    NVML_PCIE_UTIL_TX_BYTES = 0,
    NVML_PCIE_UTIL_RX_BYTES = 1,
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138,
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139,
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
};

/* nvmlClocksEventReason* bits, in bit order. */
static const char *const nvml_reasons[] = {
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
};

typedef struct nvml {
    void *lib;
    nvml_device dev;
    int read_pcie, read_links;
    double last_tx_kib, last_rx_kib;
    int64_t last_link_ns;
    nvml_return (*shutdown)(void);
    nvml_return (*clock_info)(nvml_device, int, unsigned int *);
    nvml_return (*power_usage)(nvml_device, unsigned int *);
    nvml_return (*temperature)(nvml_device, int, unsigned int *);
    nvml_return (*utilization)(nvml_device, nvml_utilization *);
    nvml_return (*reasons)(nvml_device, unsigned long long *);
    nvml_return (*pcie)(nvml_device, int, unsigned int *);
    nvml_return (*fields)(nvml_device, int, nvml_field_value *);
} nvml;

static void *sym(void *lib, const char *name)
{
    return dlsym(lib, name);
}

static double field_number(const nvml_field_value *f)
{
    switch (f->value_type) {
    case NVML_VALUE_TYPE_DOUBLE:
        return f->value.d;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        return f->value.ui;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        return (double)f->value.ul;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        return (double)f->value.ull;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        return (double)f->value.sll;
    default:
        return NAN;
    }
}

static void read_links(nvml *n, ao_tel_sample *s)
{
    nvml_field_value f[2];
    memset(f, 0, sizeof f);
    f[0].field_id = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    f[1].field_id = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
    if (n->fields(n->dev, 2, f) != NVML_SUCCESS || f[0].ret != NVML_SUCCESS ||
        f[1].ret != NVML_SUCCESS) {
        n->read_links = 0; /* not supported here: stop asking */
        return;
    }
    double tx = field_number(&f[0]), rx = field_number(&f[1]);
    if (n->last_link_ns > 0 && s->t_ns > n->last_link_ns && tx >= n->last_tx_kib &&
        rx >= n->last_rx_kib) {
        double dt_s = (double)(s->t_ns - n->last_link_ns) * 1e-9;
        s->v[AO_TEL_LINK_TX_MBPS] = (tx - n->last_tx_kib) * 1024.0 / 1e6 / dt_s;
        s->v[AO_TEL_LINK_RX_MBPS] = (rx - n->last_rx_kib) * 1024.0 / 1e6 / dt_s;
    }
    n->last_tx_kib = tx;
    n->last_rx_kib = rx;
    n->last_link_ns = s->t_ns;
}

static void nvml_read(void *state, ao_tel_sample *s)
{
    nvml *n = state;
    unsigned int u;
    if (n->clock_info(n->dev, NVML_CLOCK_SM, &u) == NVML_SUCCESS) s->v[AO_TEL_SM_CLOCK_MHZ] = u;
    if (n->clock_info(n->dev, NVML_CLOCK_MEM, &u) == NVML_SUCCESS) s->v[AO_TEL_MEM_CLOCK_MHZ] = u;
    if (n->power_usage && n->power_usage(n->dev, &u) == NVML_SUCCESS)
        s->v[AO_TEL_POWER_W] = u / 1000.0;
    if (n->temperature && n->temperature(n->dev, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS)
        s->v[AO_TEL_TEMP_C] = u;
    nvml_utilization ut;
    if (n->utilization && n->utilization(n->dev, &ut) == NVML_SUCCESS) {
        s->v[AO_TEL_GPU_UTIL_PCT] = ut.gpu;
        s->v[AO_TEL_MEM_UTIL_PCT] = ut.memory;
    }
    unsigned long long reasons;
    if (n->reasons && n->reasons(n->dev, &reasons) == NVML_SUCCESS) s->throttle = reasons;
    if (n->read_pcie) {
        if (n->pcie(n->dev, NVML_PCIE_UTIL_TX_BYTES, &u) == NVML_SUCCESS)
            s->v[AO_TEL_PCIE_TX_MBPS] = u * 1024.0 / 1e6;
        if (n->pcie(n->dev, NVML_PCIE_UTIL_RX_BYTES, &u) == NVML_SUCCESS)
            s->v[AO_TEL_PCIE_RX_MBPS] = u * 1024.0 / 1e6;
    }
    if (n->read_links) read_links(n, s);
}

static void nvml_close(void *state)
{
    nvml *n = state;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}

int ao_tel_nvml_open(const ao_device_info *info, int interval_ms, ao_tel_source *out)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        ao_warn("telemetry: cannot load NVML (%s); telemetry disabled", dlerror());
        return -1;
    }
    nvml_return (*init)(void) = (nvml_return(*)(void))sym(lib, "nvmlInit_v2");
    if (!init) init = (nvml_return(*)(void))sym(lib, "nvmlInit");
    nvml_return (*by_bus)(const char *, nvml_device *) =
        (nvml_return(*)(const char *, nvml_device *))sym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    if (!by_bus)
        by_bus =
            (nvml_return(*)(const char *, nvml_device *))sym(lib, "nvmlDeviceGetHandleByPciBusId");
    nvml *n = ao_calloc(1, sizeof *n);
    n->lib = lib;
    n->shutdown = (nvml_return(*)(void))sym(lib, "nvmlShutdown");
    n->clock_info =
        (nvml_return(*)(nvml_device, int, unsigned int *))sym(lib, "nvmlDeviceGetClockInfo");
    if (!init || !by_bus || !n->shutdown || !n->clock_info) {
        ao_warn(
            "telemetry: %s lacks nvmlInit/nvmlDeviceGetHandleByPciBusId/nvmlDeviceGetClockInfo; "
            "telemetry disabled",
            "libnvidia-ml.so.1");
        dlclose(lib);
        free(n);
        return -1;
    }
    nvml_return rc = init();
    if (rc != NVML_SUCCESS) {
        ao_warn("telemetry: nvmlInit failed (NVML error %d); telemetry disabled", rc);
        dlclose(lib);
        free(n);
        return -1;
    }
    rc = by_bus(info->pci_bus_id, &n->dev);
    if (rc != NVML_SUCCESS) {
        ao_warn("telemetry: NVML finds no device at PCI bus id \"%s\" (NVML error %d); "
                "telemetry disabled",
                info->pci_bus_id, rc);
        n->shutdown();
        dlclose(lib);
        free(n);
        return -1;
    }
    n->power_usage =
        (nvml_return(*)(nvml_device, unsigned int *))sym(lib, "nvmlDeviceGetPowerUsage");
    n->temperature =
        (nvml_return(*)(nvml_device, int, unsigned int *))sym(lib, "nvmlDeviceGetTemperature");
    n->utilization =
        (nvml_return(*)(nvml_device, nvml_utilization *))sym(lib, "nvmlDeviceGetUtilizationRates");
    n->reasons = (nvml_return(*)(nvml_device, unsigned long long *))sym(
        lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!n->reasons)
        n->reasons = (nvml_return(*)(nvml_device, unsigned long long *))sym(
            lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    n->pcie =
        (nvml_return(*)(nvml_device, int, unsigned int *))sym(lib, "nvmlDeviceGetPcieThroughput");
    n->fields =
        (nvml_return(*)(nvml_device, int, nvml_field_value *))sym(lib, "nvmlDeviceGetFieldValues");
    n->read_pcie = n->pcie && interval_ms >= 100;
    n->read_links = n->fields != NULL;
    *out = (ao_tel_source){
        .name = "nvml",
        .state = n,
        .read = nvml_read,
        .close = nvml_close,
        .throttle_names = nvml_reasons,
        .nthrottle_names = (int)(sizeof nvml_reasons / sizeof nvml_reasons[0]),
    };
    return 0;
}
