/* What the device API costs the host thread that calls it: the price of
 * timing an op (two event records, two elapsed-time reads, a hold and a
 * release for a collective) beside the price of the work it times (a small
 * memset, a small GEMM). On a host-bound step these add up directly.
 *
 *     build/bench/api_cost [--backend cuda|cpu] [--calls N] [--json FILE]
 *
 * Each call is timed in batches of 100 on CLOCK_MONOTONIC; the table gives the
 * median and the 90th percentile of the per-call mean over the batches, in ns.
 * The stream is drained between batches, so records and launches queue behind
 * at most a batch of work (the host is never blocked by a full launch queue).
 *
 * A second table gives what the same calls cost the device: the time a stream
 * takes per step of a small SM kernel followed by event records and waits,
 * the shape of an op boundary (an op's end event, the engine's cross-stream
 * events, the next op's start event). The stream is kept busy with large
 * memsets while the host queues a batch, so the device runs it from a full
 * queue and the host's pace is out of it. The step of the kernel alone is the
 * device's latency between two kernels; what each record or wait adds to it
 * is what an op boundary pays for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/stats.h"
#include "runtime/device.h"

enum { BATCH = 100 };

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e9 * (double)t.tv_sec + (double)t.tv_nsec;
}

typedef struct ctx {
    ao_device *dev;
    ao_stream *s;
    ao_event *ev[2 * BATCH];
    void *buf;
    float *a, *b, *c;
    ao_stream *other; /* where `done` was recorded, long complete */
    ao_event *done;
    void *big; /* BUSY_BYTES, memset while the host queues a device batch */
} ctx;

typedef void (*call_fn)(ctx *x, int i);

static void call_record(ctx *x, int i)
{
    ao_event_record(x->ev[i], x->s);
}
static void call_wait(ctx *x, int i)
{
    ao_stream_wait_event(x->s, x->ev[i]);
}
static void call_query(ctx *x, int i)
{
    (void)ao_event_query(x->ev[i]);
}
static void call_elapsed(ctx *x, int i)
{
    (void)ao_event_elapsed_us(x->ev[i], x->ev[i + BATCH]);
}
static void call_hold_release(ctx *x, int i)
{
    (void)i;
    ao_stream_hold(x->s);
    ao_stream_release(x->s);
}
static void call_memset(ctx *x, int i)
{
    (void)i;
    ao_memset_async(x->dev, x->buf, 0, 4, x->s);
}
static void call_gemm(ctx *x, int i)
{
    (void)i;
    ao_gemm_desc d = {.m = 64,
                      .n = 64,
                      .k = 64,
                      .alpha = 1,
                      .a = x->a,
                      .lda = 64,
                      .b = x->b,
                      .ldb = 64,
                      .c = x->c,
                      .ldc = 64,
                      .ab_type = AO_F32,
                      .c_type = AO_F32,
                      .batch_count = 1};
    ao_gemm(x->dev, x->s, &d);
}

static const struct {
    const char *name, *what;
    call_fn fn;
    int needs_done; /* the batch's events recorded and complete first */
} calls[] = {
    {"event_record", "ao_event_record (cudaEventRecord)", call_record, 0},
    {"stream_wait_event", "ao_stream_wait_event", call_wait, 1},
    {"event_query", "ao_event_query, event complete", call_query, 1},
    {"event_elapsed", "ao_event_elapsed_us, pair complete", call_elapsed, 1},
    {"hold_release", "ao_stream_hold + ao_stream_release", call_hold_release, 0},
    {"memset_4b", "ao_memset_async, 4 bytes", call_memset, 0},
    {"gemm_64", "ao_gemm 64x64x64 fp32", call_gemm, 0},
};

/* ---- device side: a step = an SM kernel, then `records` event records and
 * `waits` waits on a complete event of another stream ---- */

enum { DEV_STEPS = 50, DEV_BATCHES = 40, BUSY_MEMSETS = 4 };
#define BUSY_BYTES ((size_t)1 << 30) /* 4 memsets: ~1 ms of an H200, a batch's queueing */

static const struct {
    const char *name;
    int records, waits;
} dev_steps[] = {
    {"kernel", 0, 0},           {"kernel+record", 1, 0}, {"kernel+2_records", 2, 0},
    {"kernel+4_records", 4, 0}, {"kernel+wait", 0, 1},   {"kernel+2_records+wait", 2, 1},
};

/* Median device µs per step over DEV_BATCHES batches. */
static double device_step_us(ctx *x, int records, int waits)
{
    double per[DEV_BATCHES];
    for (int b = 0; b < DEV_BATCHES; b++) {
        for (int m = 0; m < BUSY_MEMSETS; m++) ao_memset_async(x->dev, x->big, 0, BUSY_BYTES, x->s);
        ao_event_record(x->ev[0], x->s);
        for (int i = 0; i < DEV_STEPS; i++) {
            ao_copy_sm_async(x->dev, (char *)x->buf + 128, x->buf, 128, x->s);
            for (int r = 0; r < records; r++) ao_event_record(x->ev[2 + r], x->s);
            for (int w = 0; w < waits; w++) ao_stream_wait_event(x->s, x->done);
        }
        ao_event_record(x->ev[1], x->s);
        ao_stream_sync(x->s);
        per[b] = ao_event_elapsed_us(x->ev[0], x->ev[1]) / DEV_STEPS;
    }
    ao_stats_summary sm;
    ao_stats_summarize(per, DEV_BATCHES, &sm);
    return sm.p50;
}

static void device_table(ctx *x, FILE *jf)
{
    const int n = (int)(sizeof dev_steps / sizeof dev_steps[0]);
    printf("\n# device time per step of a stream running from a full queue (%d steps a batch, "
           "median of %d)\n",
           DEV_STEPS, DEV_BATCHES);
    printf("%-22s %10s %12s\n", "step", "step_us", "vs_kernel_us");
    double base = 0;
    if (jf) fprintf(jf, ",\"device\":{");
    for (int i = 0; i < n; i++) {
        device_step_us(x, dev_steps[i].records, dev_steps[i].waits); /* warm */
        double us = device_step_us(x, dev_steps[i].records, dev_steps[i].waits);
        if (i == 0) base = us;
        printf("%-22s %10.2f %12.2f\n", dev_steps[i].name, us, us - base);
        if (jf)
            fprintf(jf, "%s\"%s\":{\"step_us\":%.3f,\"vs_kernel_us\":%.3f}", i ? "," : "",
                    dev_steps[i].name, us, us - base);
    }
    if (jf) fprintf(jf, "}");
}

int main(int argc, char **argv)
{
    const char *backend = NULL, *json = NULL;
    long n = 20000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            backend = argv[++i];
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            n = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--backend cuda|cpu] [--calls N] [--json FILE]\n", argv[0]);
            return AO_EXIT_USAGE;
        }
    }
    if (n < BATCH) n = BATCH;
    if (!backend) backend = ao_device_best_backend();
    ctx x;
    memset(&x, 0, sizeof x);
    x.dev = ao_device_open(backend, 0);
    x.s = ao_stream_create(x.dev, "bench", 0);
    for (int i = 0; i < 2 * BATCH; i++) x.ev[i] = ao_event_create(x.dev);
    x.buf = ao_dev_alloc(x.dev, 256);
    x.a = ao_dev_alloc(x.dev, 3 * 64 * 64 * sizeof(float));
    x.b = x.a + 64 * 64;
    x.c = x.b + 64 * 64;
    ao_memset_async(x.dev, x.a, 0, 3 * 64 * 64 * sizeof(float), x.s);
    const int nb = (int)(n / BATCH), ncalls = (int)(sizeof calls / sizeof calls[0]);
    double *per = ao_malloc((size_t)nb * sizeof *per);
    FILE *jf = json ? fopen(json, "w") : NULL;
    if (json && !jf) ao_fatal(AO_EXIT_USAGE, json, "cannot write");
    printf("# aorta api_cost: backend %s, %d batches of %d calls\n", backend, nb, BATCH);
    printf("%-18s %10s %10s  %s\n", "call", "median_ns", "p90_ns", "what");
    if (jf) fprintf(jf, "{\"backend\":\"%s\",\"calls\":{", backend);
    for (int c = 0; c < ncalls; c++) {
        calls[c].fn(&x, 0); /* first use: plans, lazy loading */
        ao_stream_sync(x.s);
        for (int b = 0; b < nb; b++) {
            if (calls[c].needs_done) {
                for (int i = 0; i < 2 * BATCH; i++) ao_event_record(x.ev[i], x.s);
                ao_stream_sync(x.s);
            }
            double t0 = now_ns();
            for (int i = 0; i < BATCH; i++) calls[c].fn(&x, i);
            per[b] = (now_ns() - t0) / BATCH;
            ao_stream_sync(x.s);
        }
        ao_stats_summary sm;
        ao_stats_summarize(per, (size_t)nb, &sm);
        printf("%-18s %10.0f %10.0f  %s\n", calls[c].name, sm.p50, sm.p90, calls[c].what);
        if (jf)
            fprintf(jf, "%s\"%s\":{\"median_ns\":%.1f,\"p90_ns\":%.1f}", c ? "," : "",
                    calls[c].name, sm.p50, sm.p90);
    }
    if (jf) fprintf(jf, "}");
    if (!strcmp(backend, "cuda")) {
        x.other = ao_stream_create(x.dev, "other", 0);
        x.done = ao_event_create(x.dev);
        ao_event_record(x.done, x.other);
        ao_stream_sync(x.other);
        x.big = ao_dev_alloc(x.dev, BUSY_BYTES);
        device_table(&x, jf);
        ao_dev_free(x.dev, x.big);
        ao_event_destroy(x.done);
        ao_stream_destroy(x.other);
    }
    if (jf) {
        fprintf(jf, "}\n");
        fclose(jf);
    }
    free(per);
    ao_dev_free(x.dev, x.a);
    ao_dev_free(x.dev, x.buf);
    for (int i = 0; i < 2 * BATCH; i++) ao_event_destroy(x.ev[i]);
    ao_stream_destroy(x.s);
    ao_device_close(x.dev);
    return 0;
}
