/* aorta queues on a GPU (issue 29): hetero on 8 streams runs more than one
 * stream at once (events: concurrency > 1, some time with two or more
 * streams busy), the tiny kernels' latency is recorded per op, and with
 * --kernel-trace CUPTI's kernels show the concurrency too. Concurrency > 1
 * is an order of events, not a timing threshold: the tiny kernels of seven
 * streams either overlap the GEMM on their own queues or they do not. */
#include <stdio.h>
#include <string.h>

#include "core/json.h"
#include "gpu/aorta_runs.h"
#include "runtime/device.h"

static yajl_val result_for(yajl_val doc, long long streams)
{
    yajl_val res = ao_json_member(doc, "results");
    for (size_t i = 0; YAJL_IS_ARRAY(res) && i < res->u.array.len; i++) {
        yajl_val s = ao_json_member(res->u.array.values[i], "streams");
        if (YAJL_IS_INTEGER(s) && YAJL_GET_INTEGER(s) == streams) return res->u.array.values[i];
    }
    return NULL;
}

static double num_at(yajl_val v, const char *a, const char *b)
{
    yajl_val x = ao_json_member(v, a);
    if (b) x = ao_json_member(x, b);
    return YAJL_IS_NUMBER(x) ? ao_json_number(x) : -1;
}

int main(void)
{
    GPU_SKIP_UNLESS(ao_device_count("cuda") > 0, "no CUDA device visible");
    if (runs_begin("queues")) return 1;
    char args[1024], path[512], why[512];
    double secs;
    snprintf(path, sizeof path, "%s/hetero.json", tmp);
    snprintf(args, sizeof args,
             "queues hetero --streams 1,8 --iterations 5 --warmup 2 --kernel-trace --json '%s'",
             path);
    int rc = run_aorta("hetero", args, &secs);
    CHECK(rc == 0, "aorta queues hetero exited %d", rc);
    yajl_val doc = rc == 0 ? ao_json_read_file(path, why, sizeof why) : NULL;
    CHECK(rc != 0 || doc, "%s", why);
    if (doc) {
        yajl_val r1 = result_for(doc, 1), r8 = result_for(doc, 8);
        CHECK(r1 && r8, "no 1- or 8-stream result");
        if (r1 && r8) {
            double c8 = num_at(r8, "union", "concurrency");
            double both = num_at(r8, "union", "concurrent_ms");
            printf("hetero: concurrency 1 stream %.3f, 8 streams %.3f (%.3f ms with >1 "
                   "stream)\n",
                   num_at(r1, "union", "concurrency"), c8, both);
            CHECK(c8 > 1, "hetero on 8 streams: concurrency %.3f, want > 1", c8);
            CHECK(both > 0, "hetero on 8 streams: no time with two streams busy");
            CHECK(num_at(r1, "union", "concurrency") == 1, "one stream: concurrency not 1");
            yajl_val k = ao_json_member(r8, "kernels");
            if (YAJL_IS_OBJECT(k)) {
                double kc = num_at(k, "union", "concurrency");
                printf("hetero, 8 streams, CUPTI kernels: concurrency %.3f (%+.2f %% from the "
                       "events)\n",
                       kc, num_at(k, "concurrency_diff_pct", NULL));
                CHECK(kc > 1, "kernels: concurrency %.3f, want > 1", kc);
            } else {
                printf("no CUPTI on this machine: the kernel check is skipped\n");
            }
        }
        yajl_tree_free(doc);
    }
    runs_end();
    return check_result("test_queues_cuda");
}
