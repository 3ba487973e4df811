/* The profiling side of aorta train on a CUDA device, without the engine:
 * iterations of two overlapping ops (GEMMs on the compute stream, a 64 MiB
 * host-to-device copy on the h2d stream) go through the timeline (NVTX on)
 * and ao_train_profile with profiling.kernel_trace, telemetry and a window
 * schedule (wait 1, active 1), as train.c drives them. Checks:
 * - the capture range (cudaProfilerStart/Stop) and NVTX calls succeed;
 * - every record has "overlap_kernels", and from iteration 1 on (iteration 0
 *   loads the kernels) its compute and copy time agree with the event
 *   timeline's (the kernels CUPTI saw are the work the events bracket):
 *   within 10% + 50 µs;
 * - "kernels" and "ops" appear on exactly the active iterations;
 * - telemetry's status per iteration is printed (NVML may be absent); where
 *   it is ok, the SM clock and power are > 0 and the temperature in (0, 120). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_tree.h>

#include "check.h"
#include "core/config.h"
#include "core/jsonl.h"
#include "runtime/device.h"
#include "telemetry/telemetry.h"
#include "timeline/timeline.h"
#include "train/train_profile.h"

enum { N = 4096, ITERS = 6 };
static const size_t COPY_BYTES = (size_t)64 << 20;

struct ctx {
    ao_train_profile *p;
    int64_t next;
    int tel_ok;
};

static double num_at(yajl_val v, const char *a, const char *b, const char *c)
{
    const char *path[] = {a, b, c, NULL};
    yajl_val x = yajl_tree_get(v, path, yajl_t_number);
    return x ? YAJL_GET_DOUBLE(x) : NAN;
}

static void on_iteration(void *arg, int64_t step, const char *phase, const ao_op *ops, size_t n)
{
    struct ctx *c = arg;
    int64_t k = c->next++;
    ao_iter_record r;
    ao_iter_record_init(&r);
    r.step = step;
    r.phase = phase;
    r.world_size = 1;
    ao_overlap_compute(ops, n, 1, &r.m);
    ao_train_profile_record(c->p, k, ops, n, &r);
    size_t len;
    char *line = ao_iter_record_format(&r, &len);
    CHECK(line != NULL, "iteration %lld: record not written", (long long)k);
    if (!line) return;
    char err[256];
    yajl_val v = yajl_tree_parse(line, err, sizeof err);
    CHECK(v != NULL, "iteration %lld: %s", (long long)k, err);
    if (!v) {
        free(line);
        return;
    }
    int active = k % 2 == 1;
    const char *ops_path[] = {"ops", NULL};
    const char *kern_path[] = {"extra", "kernels", NULL};
    const char *tel_path[] = {"extra", "telemetry", "status", NULL};
    CHECK((yajl_tree_get(v, ops_path, yajl_t_array) != NULL) == active,
          "iteration %lld: ops present %d, active %d", (long long)k,
          yajl_tree_get(v, ops_path, yajl_t_array) != NULL, active);
    yajl_val kern = yajl_tree_get(v, kern_path, yajl_t_array);
    CHECK((kern != NULL) == active, "iteration %lld: kernels present %d, active %d", (long long)k,
          kern != NULL, active);
    if (kern) CHECK(YAJL_GET_ARRAY(kern)->len >= 3, "only %zu kernels", YAJL_GET_ARRAY(kern)->len);
    yajl_val tel = yajl_tree_get(v, tel_path, yajl_t_string);
    const char *tel_status = tel ? YAJL_GET_STRING(tel) : NULL;
    if (tel_status && strcmp(tel_status, "ok") == 0) {
        /* Plausible values: an SM clock, a power draw and a temperature
         * (never a setting: telemetry only reads). */
        const char *sm_path[] = {"extra", "telemetry", "sm_clock_mhz", "min", NULL};
        const char *pw_path[] = {"extra", "telemetry", "power_w", "mean", NULL};
        const char *tc_path[] = {"extra", "telemetry", "temp_c", "mean", NULL};
        yajl_val smv = yajl_tree_get(v, sm_path, yajl_t_number);
        yajl_val pwv = yajl_tree_get(v, pw_path, yajl_t_number);
        yajl_val tcv = yajl_tree_get(v, tc_path, yajl_t_number);
        CHECK(smv && YAJL_GET_DOUBLE(smv) > 0, "iteration %lld: SM clock not > 0", (long long)k);
        CHECK(pwv && YAJL_GET_DOUBLE(pwv) > 0, "iteration %lld: power not > 0", (long long)k);
        CHECK(tcv && YAJL_GET_DOUBLE(tcv) > 0 && YAJL_GET_DOUBLE(tcv) < 120,
              "iteration %lld: temperature not in (0, 120) C", (long long)k);
        if (smv && pwv && tcv)
            printf("iteration %lld: telemetry SM clock >= %.0f MHz, power %.0f W, %.0f C\n",
                   (long long)k, YAJL_GET_DOUBLE(smv), YAJL_GET_DOUBLE(pwv), YAJL_GET_DOUBLE(tcv));
        c->tel_ok = 1;
    }
    double ec = r.m.compute_ms, ex = r.m.copy_ms;
    double kc = num_at(v, "extra", "overlap_kernels", "compute_ms");
    double kx = num_at(v, "extra", "overlap_kernels", "copy_ms");
    double eo = r.m.overlap_ratio, ko = num_at(v, "extra", "overlap_kernels", "overlap_ratio");
    printf("iteration %lld: events compute %.3f copy %.3f ms | kernels compute %.3f copy %.3f ms "
           "| telemetry %s | overlap_ratio %.3f vs %.3f\n",
           (long long)k, ec, ex, kc, kx, tel_status ? tel_status : "-", eo, ko);
    /* Iteration 0 loads the kernels (CUDA's lazy loading): its compute ops
     * wait on the host between their events, which the kernels do not see. */
    if (k > 0) {
        /* An event pair also spans a launch the host was late with (the
         * stream idles inside the op), which no kernel shows: the kernels
         * may fall short of the events, never exceed them. */
        CHECK(kc <= 1.02 * ec + 0.05 && kc >= 0.7 * ec,
              "iteration %lld: kernel compute %.3f vs %.3f ms", (long long)k, kc, ec);
        CHECK(fabs(kx - ex) <= 0.1 * ex + 0.05, "iteration %lld: kernel copy %.3f vs %.3f ms",
              (long long)k, kx, ex);
    }
    yajl_tree_free(v);
    free(line);
}

int main(void)
{
    GPU_SKIP_UNLESS(ao_device_count("cuda") > 0, "no CUDA device");
    char *overrides[] = {
        "profiling.enabled=true",      "profiling.skip_first=0", "profiling.wait=1",
        "profiling.warmup=0",          "profiling.active=1",     "profiling.repeat=0",
        "profiling.kernel_trace=true", "telemetry.enabled=true", "telemetry.interval_ms=5"};
    struct ao_config cfg;
    if (ao_config_load(&cfg, NULL, overrides, (int)(sizeof overrides / sizeof overrides[0])))
        return 1;
    ao_device *dev = ao_device_open("cuda", 0);
    ao_device_info info;
    ao_device_get_info(dev, &info);
    ao_stream *streams[AO_NSTREAMS] = {0};
    streams[AO_STREAM_COMPUTE] = ao_stream_create(dev, "compute", 0);
    streams[AO_STREAM_H2D] = ao_stream_create(dev, "h2d", 0);
    float *a = ao_dev_alloc(dev, (size_t)N * N * sizeof *a);
    float *b = ao_dev_alloc(dev, (size_t)N * N * sizeof *b);
    float *c = ao_dev_alloc(dev, (size_t)N * N * sizeof *c);
    void *dst = ao_dev_alloc(dev, COPY_BYTES);
    void *host = ao_host_alloc(dev, COPY_BYTES);
    memset(host, 1, COPY_BYTES);
    ao_memset_async(dev, a, 0, (size_t)N * N * sizeof *a, streams[AO_STREAM_COMPUTE]);
    ao_memset_async(dev, b, 0, (size_t)N * N * sizeof *b, streams[AO_STREAM_COMPUTE]);
    ao_device_sync(dev);
    ao_gemm_desc g = {.m = N,
                      .n = N,
                      .k = N,
                      .alpha = 1,
                      .beta = 0,
                      .a = a,
                      .lda = N,
                      .b = b,
                      .ldb = N,
                      .c = c,
                      .ldc = N,
                      .ab_type = AO_F32,
                      .c_type = AO_F32,
                      .batch_count = 1};

    ao_timeline *tl = ao_timeline_create(dev, streams, 1);
    ao_event *go = ao_event_create(dev);
    ao_timeline_set_nvtx(tl, 1);
    struct ctx cx = {0};
    cx.p = ao_train_profile_start(&cfg, dev, &info, 0, 1);
    ao_timeline_anchor(tl, streams[AO_STREAM_COMPUTE]);
    ao_train_profile_anchored(cx.p, tl, streams[AO_STREAM_COMPUTE]);
    for (int64_t k = 0; k < ITERS; k++) {
        ao_train_profile_issue(cx.p, k);
        ao_timeline_begin(tl, k, "train");
        /* The copy waits for the iteration to start on the compute stream,
         * as the engine's fetch does: iterations do not overlap in time, so
         * the kernels of a window are its own. */
        ao_event_record(go, streams[AO_STREAM_COMPUTE]);
        ao_stream_wait_event(streams[AO_STREAM_H2D], go);
        int op = ao_timeline_op_begin(tl, AO_STREAM_COMPUTE, AO_CLASS_COMPUTE, AO_KIND_NONE,
                                      "forward", -1, 0);
        for (int i = 0; i < 3; i++) ao_gemm(dev, streams[AO_STREAM_COMPUTE], &g);
        ao_timeline_op_end(tl, op);
        op = ao_timeline_op_begin(tl, AO_STREAM_H2D, AO_CLASS_COPY, AO_KIND_NONE, "h2d", -1,
                                  COPY_BYTES);
        ao_copy_async(dev, dst, host, COPY_BYTES, AO_H2D, streams[AO_STREAM_H2D]);
        ao_timeline_op_end(tl, op);
        ao_timeline_end(tl);
        ao_timeline_collect(tl, 0, on_iteration, &cx);
    }
    ao_timeline_collect(tl, 1, on_iteration, &cx);
    CHECK(cx.next == ITERS, "%lld iterations delivered", (long long)cx.next);
    printf("telemetry: %s\n", cx.tel_ok ? "ok in some iteration" : "never ok");
    ao_train_profile_stop(cx.p);
    ao_timeline_destroy(tl);
    ao_event_destroy(go);
    ao_dev_free(dev, a);
    ao_dev_free(dev, b);
    ao_dev_free(dev, c);
    ao_dev_free(dev, dst);
    ao_host_free(dev, host);
    ao_stream_destroy(streams[AO_STREAM_COMPUTE]);
    ao_stream_destroy(streams[AO_STREAM_H2D]);
    ao_device_close(dev);
    ao_config_free(&cfg);
    return check_result("test_profile_cuda");
}
