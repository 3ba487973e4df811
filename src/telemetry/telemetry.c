/* The sampler thread, the sample ring and the per-iteration aggregate. The
 * backends (nvml.c, rocmsmi.c) only read; nothing here changes a GPU
 * setting. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/json.h"
#include "telemetry/internal.h"

/* The ring keeps about this much history (the engine asks one iteration
 * late), within these bounds. */
#define HISTORY_MS   60000
#define MIN_CAPACITY 256
#define MAX_CAPACITY 65536

struct ao_telemetry {
    int active;
    ao_tel_source src;
    int64_t interval_ns;
    /* ring: samples[(first + i) % cap] for i < count, oldest first */
    pthread_mutex_t mu;
    ao_tel_sample *samples;
    size_t cap, first, count;
    /* sampler */
    int has_thread, stop;
    pthread_t thread;
    pthread_cond_t wake;
};

static const char *const metric_names[AO_TEL_NMETRICS] = {
    "sm_clock_mhz", "mem_clock_mhz", "power_w",      "temp_c",       "gpu_util_pct",
    "mem_util_pct", "pcie_tx_mbps",  "pcie_rx_mbps", "link_tx_mbps", "link_rx_mbps",
};

const char *ao_tel_metric_name(ao_tel_metric m)
{
    return m >= 0 && m < AO_TEL_NMETRICS ? metric_names[m] : "?";
}

const char *ao_tel_status_name(ao_tel_status s)
{
    switch (s) {
    case AO_TEL_ABSENT:
        return "absent";
    case AO_TEL_EMPTY:
        return "no_samples";
    case AO_TEL_OK:
        return "ok";
    }
    return "?";
}

void ao_tel_sample_clear(ao_tel_sample *s, int64_t t_ns)
{
    s->t_ns = t_ns;
    for (int i = 0; i < AO_TEL_NMETRICS; i++) s->v[i] = NAN;
    s->throttle = 0;
}

static int64_t now_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- handle ---------------------------------------------------------------------- */

static ao_telemetry *new_handle(void)
{
    ao_telemetry *tel = ao_calloc(1, sizeof *tel);
    pthread_mutex_init(&tel->mu, NULL);
    return tel;
}

static void make_ring(ao_telemetry *tel, const ao_tel_source *src, int capacity, int interval_ms)
{
    tel->active = 1;
    tel->src = *src;
    tel->interval_ns = (int64_t)interval_ms * 1000000LL;
    tel->cap = (size_t)capacity;
    tel->samples = ao_calloc(tel->cap, sizeof *tel->samples);
}

void ao_telemetry_inject(ao_telemetry *tel, const ao_tel_sample *s)
{
    if (!tel->active) return;
    pthread_mutex_lock(&tel->mu);
    if (tel->count == tel->cap) {
        tel->samples[tel->first] = *s;
        tel->first = (tel->first + 1) % tel->cap;
    } else {
        tel->samples[(tel->first + tel->count) % tel->cap] = *s;
        tel->count++;
    }
    pthread_mutex_unlock(&tel->mu);
}

ao_telemetry *ao_telemetry_start_manual(const ao_tel_source *source, int capacity, int interval_ms)
{
    ao_telemetry *tel = new_handle();
    make_ring(tel, source, capacity > 0 ? capacity : 1, interval_ms);
    return tel;
}

static void *sampler_main(void *arg)
{
    ao_telemetry *tel = arg;
    int64_t next = now_ns(CLOCK_MONOTONIC);
    pthread_mutex_lock(&tel->mu);
    while (!tel->stop) {
        pthread_mutex_unlock(&tel->mu);
        ao_tel_sample s;
        int64_t t0 = now_ns(CLOCK_REALTIME);
        ao_tel_sample_clear(&s, t0);
        tel->src.read(tel->src.state, &s);
        s.t_ns = t0 + (now_ns(CLOCK_REALTIME) - t0) / 2;
        ao_telemetry_inject(tel, &s);

        int64_t now = now_ns(CLOCK_MONOTONIC);
        next += tel->interval_ns;
        if (next < now) next = now + tel->interval_ns; /* fell behind: no burst */
        struct timespec dl = {.tv_sec = (time_t)(next / 1000000000LL),
                              .tv_nsec = (long)(next % 1000000000LL)};
        pthread_mutex_lock(&tel->mu);
        while (!tel->stop && pthread_cond_timedwait(&tel->wake, &tel->mu, &dl) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&tel->mu);
    return NULL;
}

ao_telemetry *ao_telemetry_start(const ao_device_info *info, int enabled, int interval_ms)
{
    ao_telemetry *tel = new_handle();
    if (!enabled) return tel;
    if (interval_ms < 1) {
        ao_warn("telemetry.interval_ms is %d (must be >= 1); telemetry disabled", interval_ms);
        return tel;
    }
    ao_tel_source src;
    int rc;
    if (strcmp(info->backend, "cuda") == 0) {
        rc = ao_tel_nvml_open(info, interval_ms, &src);
    } else if (strcmp(info->backend, "hip") == 0) {
        rc = ao_tel_rocmsmi_open(info, interval_ms, &src);
    } else {
        ao_warn("telemetry.enabled is true, but the %s backend has no GPU telemetry; "
                "telemetry disabled",
                info->backend);
        return tel;
    }
    if (rc != 0) return tel;
    long long cap = HISTORY_MS / interval_ms;
    if (cap < MIN_CAPACITY) cap = MIN_CAPACITY;
    if (cap > MAX_CAPACITY) cap = MAX_CAPACITY;
    make_ring(tel, &src, (int)cap, interval_ms);

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&tel->wake, &ca);
    pthread_condattr_destroy(&ca);
    int err = pthread_create(&tel->thread, NULL, sampler_main, tel);
    if (err != 0) {
        ao_warn("telemetry: cannot start the sampler thread (%s); telemetry disabled",
                strerror(err));
        pthread_cond_destroy(&tel->wake);
        tel->src.close(tel->src.state);
        free(tel->samples);
        tel->samples = NULL;
        tel->active = 0;
        return tel;
    }
    tel->has_thread = 1;
    return tel;
}

int ao_telemetry_active(const ao_telemetry *tel)
{
    return tel && tel->active;
}

void ao_telemetry_stop(ao_telemetry *tel)
{
    if (!tel) return;
    if (tel->has_thread) {
        pthread_mutex_lock(&tel->mu);
        tel->stop = 1;
        pthread_cond_signal(&tel->wake);
        pthread_mutex_unlock(&tel->mu);
        pthread_join(tel->thread, NULL);
        pthread_cond_destroy(&tel->wake);
    }
    if (tel->active && tel->src.close) tel->src.close(tel->src.state);
    pthread_mutex_destroy(&tel->mu);
    free(tel->samples);
    free(tel);
}

/* ---- aggregation ------------------------------------------------------------------- */

static void add_sample(ao_tel_agg *a, const ao_tel_sample *s)
{
    a->samples++;
    a->throttle |= s->throttle;
    for (int i = 0; i < AO_TEL_NMETRICS; i++) {
        double v = s->v[i];
        if (!isfinite(v)) continue;
        ao_tel_stat *st = &a->m[i];
        if (st->n == 0 || v < st->min) st->min = v;
        if (st->n == 0 || v > st->max) st->max = v;
        st->mean += v; /* a sum until the end */
        st->n++;
    }
}

ao_tel_status ao_telemetry_window(ao_telemetry *tel, int64_t t0_ns, int64_t t1_ns, ao_tel_agg *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < AO_TEL_NMETRICS; i++) out->m[i] = (ao_tel_stat){0, NAN, NAN, NAN};
    if (!tel || !tel->active) return out->status = AO_TEL_ABSENT;
    out->source = tel->src.name;
    out->throttle_names = tel->src.throttle_names;
    out->nthrottle_names = tel->src.nthrottle_names;
    for (int i = 0; i < AO_TEL_NMETRICS; i++) out->m[i].mean = 0;

    pthread_mutex_lock(&tel->mu);
    /* the sample in effect at t0: the latest before it, if fresh enough */
    const ao_tel_sample *held = NULL;
    for (size_t i = 0; i < tel->count; i++) {
        const ao_tel_sample *s = &tel->samples[(tel->first + i) % tel->cap];
        if (s->t_ns < t0_ns) {
            held = s;
        } else if (s->t_ns <= t1_ns) {
            add_sample(out, s);
        }
    }
    if (held && t0_ns - held->t_ns <= 2 * tel->interval_ns) add_sample(out, held);
    pthread_mutex_unlock(&tel->mu);

    for (int i = 0; i < AO_TEL_NMETRICS; i++) {
        ao_tel_stat *st = &out->m[i];
        if (st->n)
            st->mean /= st->n;
        else
            *st = (ao_tel_stat){0, NAN, NAN, NAN};
    }
    return out->status = out->samples ? AO_TEL_OK : AO_TEL_EMPTY;
}

/* ---- JSON ------------------------------------------------------------------------------ */

#define GEN(call)                                                                                  \
    do {                                                                                           \
        yajl_gen_status st_ = (call);                                                              \
        if (st_ != yajl_gen_status_ok) return st_;                                                 \
    } while (0)

yajl_gen_status ao_telemetry_write_json(yajl_gen g, const ao_tel_agg *a)
{
    GEN(ao_json_gen_str(g, "telemetry"));
    GEN(yajl_gen_map_open(g));
    GEN(ao_json_gen_str(g, "status"));
    GEN(ao_json_gen_str(g, ao_tel_status_name(a->status)));
    GEN(ao_json_gen_str(g, "source"));
    GEN(ao_json_gen_str(g, a->source));
    if (a->status == AO_TEL_OK) {
        GEN(ao_json_gen_str(g, "samples"));
        GEN(yajl_gen_integer(g, a->samples));
        for (int i = 0; i < AO_TEL_NMETRICS; i++) {
            const ao_tel_stat *st = &a->m[i];
            GEN(ao_json_gen_str(g, metric_names[i]));
            if (st->n == 0) {
                GEN(yajl_gen_null(g));
                continue;
            }
            GEN(yajl_gen_map_open(g));
            GEN(ao_json_gen_str(g, "min"));
            GEN(ao_json_gen_double(g, st->min));
            GEN(ao_json_gen_str(g, "mean"));
            GEN(ao_json_gen_double(g, st->mean));
            GEN(ao_json_gen_str(g, "max"));
            GEN(ao_json_gen_double(g, st->max));
            GEN(yajl_gen_map_close(g));
        }
        GEN(ao_json_gen_str(g, "throttle_mask"));
        GEN(ao_json_gen_u64(g, a->throttle));
        GEN(ao_json_gen_str(g, "throttle_reasons"));
        GEN(yajl_gen_array_open(g));
        for (int bit = 0; bit < 64; bit++) {
            if (!(a->throttle & (1ULL << bit))) continue;
            const char *name = bit < a->nthrottle_names ? a->throttle_names[bit] : NULL;
            char buf[16];
            if (!name) {
                snprintf(buf, sizeof buf, "bit_%d", bit);
                name = buf;
            }
            GEN(ao_json_gen_str(g, name));
        }
        GEN(yajl_gen_array_close(g));
    }
    return yajl_gen_map_close(g);
}

int ao_telemetry_extra(void *ctx, yajl_gen g)
{
    return ao_telemetry_write_json(g, ctx) == yajl_gen_status_ok ? 0 : -1;
}
