/* rocm-smi telemetry, loaded with dlopen("librocm_smi64.so") so the binary has
 * no link dependency on ROCm. READ-ONLY: only rsmi_init/rsmi_shut_down and
 * rsmi_*_get queries are resolved; nothing that sets a clock, power cap,
 * performance level or anything else is ever looked up or called.
 *
 * Compiled and linked everywhere, but run only on AMD machines; none was
 * available while writing it, so it has not been run yet.
 *
 * Prototypes from the rocm_smi.h reference (all return rsmi_status_t, 0 =
 * RSMI_STATUS_SUCCESS):
 * - rsmi_dev_pci_id_get(dv, uint64 *bdfid): domain << 32 | bus << 8 |
 *   device << 3 | function (newer libraries put a partition id in bits 28-31,
 *   which is masked off) — how the device is matched to ao_device_info
 * - rsmi_dev_gpu_clk_freq_get(dv, RSMI_CLK_TYPE_SYS = 0 / RSMI_CLK_TYPE_MEM =
 *   4, rsmi_frequencies_t *): Hz of the current level. The struct gained a
 *   leading `bool has_deep_sleep` in later releases; both layouts are told
 *   apart from the returned bytes (see freq_current_hz)
 * - rsmi_dev_power_ave_get(dv, 0, uint64 *µW), else
 *   rsmi_dev_current_socket_power_get(dv, uint64 *µW) (MI300)
 * - rsmi_dev_temp_metric_get(dv, EDGE = 0 or JUNCTION = 1, RSMI_TEMP_CURRENT
 *   = 0, int64 *m°C)
 * - rsmi_dev_busy_percent_get, rsmi_dev_memory_busy_percent_get(dv, uint32 *)
 * rocm-smi reports no throttle reasons through these calls, so the mask
 * stays 0 and link throughput is not read. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "telemetry/internal.h"

typedef int rsmi_status;

enum { RSMI_CLK_SYS = 0, RSMI_CLK_MEM = 4, RSMI_TEMP_EDGE = 0, RSMI_TEMP_JUNCTION = 1 };

typedef struct rsmi {
    void *lib;
    uint32_t dv;
    int temp_sensor;
    rsmi_status (*shut_down)(void);
    rsmi_status (*clk)(uint32_t, int, void *);
    rsmi_status (*power_ave)(uint32_t, uint32_t, uint64_t *);
    rsmi_status (*socket_power)(uint32_t, uint64_t *);
    rsmi_status (*temp)(uint32_t, uint32_t, int, int64_t *);
    rsmi_status (*busy)(uint32_t, uint32_t *);
    rsmi_status (*mem_busy)(uint32_t, uint32_t *);
} rsmi;

/* The current frequency from a rsmi_frequencies_t of either layout:
 *   old: uint32 num_supported, uint32 current, uint64 frequency[] (at 8)
 *   new: bool has_deep_sleep, uint32 num_supported (at 4), uint32 current
 *        (at 8), uint64 frequency[] (at 16)
 * In the old layout word 0 (num_supported) is >= 1 and current < it; in the
 * new one word 0 holds only the bool (0 or 1) and word 1 (num_supported) is
 * >= 1. So word 0 >= 2 means old, 0 means new, and 1 is old exactly when
 * word 1 is 0. The buffer is zeroed first so padding reads as 0. */
static double freq_current_hz(const uint64_t *buf)
{
    uint32_t w[3];
    memcpy(w, buf, sizeof w);
    int old = w[0] >= 2 || (w[0] == 1 && w[1] == 0);
    uint32_t n = old ? w[0] : w[1], cur = old ? w[1] : w[2];
    const uint64_t *freq = old ? buf + 1 : buf + 2;
    if (n == 0 || n > 64 || cur >= n) return -1;
    return (double)freq[cur];
}

static void rsmi_read(void *state, ao_tel_sample *s)
{
    rsmi *r = state;
    uint64_t buf[128]; /* larger than any rsmi_frequencies_t */
    memset(buf, 0, sizeof buf);
    if (r->clk(r->dv, RSMI_CLK_SYS, buf) == 0) {
        double hz = freq_current_hz(buf);
        if (hz >= 0) s->v[AO_TEL_SM_CLOCK_MHZ] = hz / 1e6;
    }
    memset(buf, 0, sizeof buf);
    if (r->clk(r->dv, RSMI_CLK_MEM, buf) == 0) {
        double hz = freq_current_hz(buf);
        if (hz >= 0) s->v[AO_TEL_MEM_CLOCK_MHZ] = hz / 1e6;
    }
    uint64_t uw;
    if ((r->power_ave && r->power_ave(r->dv, 0, &uw) == 0) ||
        (r->socket_power && r->socket_power(r->dv, &uw) == 0))
        s->v[AO_TEL_POWER_W] = (double)uw / 1e6;
    int64_t mc;
    if (r->temp && r->temp(r->dv, (uint32_t)r->temp_sensor, 0, &mc) == 0)
        s->v[AO_TEL_TEMP_C] = (double)mc / 1000.0;
    uint32_t pct;
    if (r->busy && r->busy(r->dv, &pct) == 0) s->v[AO_TEL_GPU_UTIL_PCT] = pct;
    if (r->mem_busy && r->mem_busy(r->dv, &pct) == 0) s->v[AO_TEL_MEM_UTIL_PCT] = pct;
}

static void rsmi_close(void *state)
{
    rsmi *r = state;
    r->shut_down();
    dlclose(r->lib);
    free(r);
}

int ao_tel_rocmsmi_open(const ao_device_info *info, int interval_ms, ao_tel_source *out)
{
    (void)interval_ms;
    unsigned dom, bus, dev, fn;
    if (sscanf(info->pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) {
        ao_warn("telemetry: device PCI bus id \"%s\" is not DOMAIN:BUS:DEVICE.FUNCTION; "
                "telemetry disabled",
                info->pci_bus_id);
        return -1;
    }
    void *lib = dlopen("librocm_smi64.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("librocm_smi64.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        ao_warn("telemetry: cannot load rocm-smi (%s); telemetry disabled", dlerror());
        return -1;
    }
    rsmi_status (*init)(uint64_t) = (rsmi_status(*)(uint64_t))dlsym(lib, "rsmi_init");
    rsmi_status (*count)(uint32_t *) =
        (rsmi_status(*)(uint32_t *))dlsym(lib, "rsmi_num_monitor_devices");
    rsmi_status (*pci_id)(uint32_t, uint64_t *) =
        (rsmi_status(*)(uint32_t, uint64_t *))dlsym(lib, "rsmi_dev_pci_id_get");
    rsmi *r = ao_calloc(1, sizeof *r);
    r->lib = lib;
    r->shut_down = (rsmi_status(*)(void))dlsym(lib, "rsmi_shut_down");
    r->clk = (rsmi_status(*)(uint32_t, int, void *))dlsym(lib, "rsmi_dev_gpu_clk_freq_get");
    if (!init || !count || !pci_id || !r->shut_down || !r->clk) {
        ao_warn("telemetry: librocm_smi64.so lacks rsmi_init/rsmi_dev_pci_id_get/"
                "rsmi_dev_gpu_clk_freq_get; telemetry disabled");
        dlclose(lib);
        free(r);
        return -1;
    }
    rsmi_status rc = init(0);
    if (rc != 0) {
        ao_warn("telemetry: rsmi_init failed (rsmi status %d); telemetry disabled", rc);
        dlclose(lib);
        free(r);
        return -1;
    }
    uint32_t n = 0;
    int found = 0;
    if (count(&n) == 0) {
        for (uint32_t i = 0; i < n && !found; i++) {
            uint64_t bdf;
            if (pci_id(i, &bdf) != 0) continue;
            if ((bdf >> 32) == dom && ((bdf >> 8) & 0xff) == bus && ((bdf >> 3) & 0x1f) == dev &&
                (bdf & 0x7) == fn) {
                r->dv = i;
                found = 1;
            }
        }
    }
    if (!found) {
        ao_warn("telemetry: rocm-smi finds no device at PCI bus id \"%s\"; telemetry disabled",
                info->pci_bus_id);
        r->shut_down();
        dlclose(lib);
        free(r);
        return -1;
    }
    r->power_ave =
        (rsmi_status(*)(uint32_t, uint32_t, uint64_t *))dlsym(lib, "rsmi_dev_power_ave_get");
    r->socket_power =
        (rsmi_status(*)(uint32_t, uint64_t *))dlsym(lib, "rsmi_dev_current_socket_power_get");
    r->temp =
        (rsmi_status(*)(uint32_t, uint32_t, int, int64_t *))dlsym(lib, "rsmi_dev_temp_metric_get");
    r->busy = (rsmi_status(*)(uint32_t, uint32_t *))dlsym(lib, "rsmi_dev_busy_percent_get");
    r->mem_busy =
        (rsmi_status(*)(uint32_t, uint32_t *))dlsym(lib, "rsmi_dev_memory_busy_percent_get");
    /* MI300 reports no edge sensor: use the junction temperature there. */
    int64_t mc;
    r->temp_sensor = RSMI_TEMP_EDGE;
    if (r->temp && r->temp(r->dv, RSMI_TEMP_EDGE, 0, &mc) != 0) r->temp_sensor = RSMI_TEMP_JUNCTION;
    *out = (ao_tel_source){.name = "rocm_smi", .state = r, .read = rsmi_read, .close = rsmi_close};
    return 0;
}
