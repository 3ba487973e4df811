/* Whether a call waits for a held stream (DESIGN §4, issue 52): a stream is
 * held (ao_stream_hold, a wait on host memory) with work queued behind the
 * hold, and a thread releases it after --release-ms; meanwhile the probing
 * thread makes one call and times it. A call that returns only once the
 * stream is released waits for the device, held streams included: made while
 * the host itself holds a stream, it never returns. The calls are what NCCL's
 * network transport does on its first use of a communicator (pinned host
 * memory, from its proxy thread) and what its NVLink path does not.
 *
 *     build-device/bench/hold_probe [--backend cuda] [--release-ms 2000] [--json FILE]
 *
 * Prints one row per call: how long it took, and "waits for the held stream"
 * when that is within 10 % of the release time or more. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/json.h"
#include "runtime/device.h"

typedef struct probe {
    ao_device *dev;
    ao_stream *held;
    int release_ms;
} probe;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void *release_later(void *arg)
{
    probe *p = arg;
    sleep_ms(p->release_ms);
    ao_stream_release(p->held);
    return NULL;
}

typedef enum { PINNED, PINNED_OTHER_THREAD, DEVICE_MEM, NCALLS } call_kind;
static const char *const call_names[NCALLS] = {
    "pinned host alloc (this thread)", "pinned host alloc (another thread)", "device alloc"};

static void *pinned_alloc(void *arg)
{
    probe *p = arg;
    ao_host_free(p->dev, ao_host_alloc(p->dev, 1 << 20));
    return NULL;
}

/* ms the call took while the stream was held. */
static double run(probe *p, call_kind k, void *scratch)
{
    ao_stream_hold(p->held);
    ao_memset_async(p->dev, scratch, 0, 1 << 20, p->held); /* work behind the hold */
    pthread_t releaser;
    if (pthread_create(&releaser, NULL, release_later, p) != 0)
        ao_fatal(AO_EXIT_FAIL, "hold_probe", "cannot start a thread");
    double t0 = now_ms();
    if (k == PINNED) {
        pinned_alloc(p);
    } else if (k == PINNED_OTHER_THREAD) {
        pthread_t other;
        if (pthread_create(&other, NULL, pinned_alloc, p) != 0)
            ao_fatal(AO_EXIT_FAIL, "hold_probe", "cannot start a thread");
        pthread_join(other, NULL);
    } else {
        ao_dev_free(p->dev, ao_dev_alloc(p->dev, 64 << 20));
    }
    double ms = now_ms() - t0;
    pthread_join(releaser, NULL);
    ao_stream_sync(p->held);
    return ms;
}

int main(int argc, char **argv)
{
    const char *backend = "cuda", *json = NULL;
    int release_ms = 2000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
            backend = argv[++i];
        else if (strcmp(argv[i], "--release-ms") == 0 && i + 1 < argc)
            release_ms = atoi(argv[++i]);
        else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
            json = argv[++i];
        else {
            fprintf(stderr,
                    "usage: hold_probe [--backend cuda|cpu] [--release-ms MS] [--json FILE]\n");
            return 2;
        }
    }
    if (release_ms < 100 || release_ms > 60000) {
        ao_error("--release-ms", "%d: between 100 and 60000", release_ms);
        return 2;
    }
    probe p = {.dev = ao_device_open(backend, 0), .release_ms = release_ms};
    if (!p.dev) return 2;
    p.held = ao_stream_create(p.dev, "held", 0);
    void *scratch = ao_dev_alloc(p.dev, 1 << 20);
    double ms[NCALLS];
    printf("# %s device, stream held for %d ms (holds do nothing on cpu)\n", backend, release_ms);
    printf("%-36s %10s  %s\n", "call", "ms", "verdict");
    for (int k = 0; k < NCALLS; k++) {
        ms[k] = run(&p, (call_kind)k, scratch);
        printf("%-36s %10.1f  %s\n", call_names[k], ms[k],
               ms[k] >= 0.9 * release_ms ? "waits for the held stream" : "does not wait");
    }
    int rc = 0;
    if (json) {
        ao_json_writer w = {yajl_gen_alloc(NULL), yajl_gen_status_ok};
        ao_jw_open(&w, NULL);
        ao_jw_str(&w, "backend", backend);
        ao_jw_int(&w, "release_ms", release_ms);
        ao_jw_aopen(&w, "calls");
        for (int k = 0; k < NCALLS; k++) {
            ao_jw_open(&w, NULL);
            ao_jw_str(&w, "call", call_names[k]);
            ao_jw_double(&w, "ms", ms[k]);
            ao_jw_int(&w, "waits", ms[k] >= 0.9 * release_ms);
            ao_jw_close(&w);
        }
        ao_jw_aclose(&w);
        ao_jw_close(&w);
        rc = w.st != yajl_gen_status_ok || ao_json_write_atomic(json, w.g) != 0;
        yajl_gen_free(w.g);
    }
    ao_dev_free(p.dev, scratch);
    ao_stream_destroy(p.held);
    ao_device_close(p.dev);
    return rc ? AO_EXIT_FAIL : 0;
}
