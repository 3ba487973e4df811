/* aorta analyze's analysis on hand-built traces with hand-computed answers:
 * classification, step attribution through correlation ids, the per-step
 * §7 numbers, host wait, per-kind exposure, HTA's conventions; and the
 * Kineto reader on a small file (rank, meta, a mistyped field). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "test_files.h"

#include "assert_close.h"

#include "ingest/analyze.h"
#include "ingest/trace.h"

static ao_activity *kernel(ao_trace *t, const char *name, double s, double e, int64_t corr)
{
    ao_activity *a = ao_trace_add_activity(t);
    a->name = ao_trace_intern(t, name, (size_t)-1);
    a->start_us = s;
    a->end_us = e;
    a->correlation = corr;
    a->kind = AO_ACT_KERNEL;
    return a;
}

static void launch(ao_trace *t, double s, int64_t corr)
{
    ao_launch *l = ao_trace_add_launch(t);
    l->start_us = s;
    l->end_us = s + 1;
    l->correlation = corr;
}

static void range(ao_trace *t, const char *name, double s, double e)
{
    ao_range *r = ao_trace_add_range(t);
    r->name = ao_trace_intern(t, name, (size_t)-1);
    r->start_us = s;
    r->end_us = e;
}

static void test_classification(void **state)
{
    (void)state;
    ao_classifier c;
    assert_int_equal(ao_classifier_init(&c, NULL, "^myAllToAll"), 0);
    ao_trace t;
    ao_trace_init(&t, "x", "kineto");
    struct {
        const char *name;
        ao_op_class cls;
        ao_xkind kind;
    } cases[] = {
        {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", AO_CLASS_COMM,
         AO_X_ALLGATHER},
        {"ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", AO_CLASS_COMM, AO_X_REDUCESCATTER},
        {"ncclKernel_AllReduce_RING_LL_Sum_float", AO_CLASS_COMM, AO_X_ALLREDUCE},
        {"ncclDevKernel_Broadcast_RING_LL", AO_CLASS_COMM, AO_X_BROADCAST},
        {"ncclDevKernel_SendRecv", AO_CLASS_COMM, AO_X_SENDRECV},
        {"rcclGenericKernel", AO_CLASS_COMM, AO_X_OTHER},
        {"void foo<ncclDevKernel_Generic_1>", AO_CLASS_COMM, AO_X_OTHER},
        {"myAllToAll_kernel", AO_CLASS_COMM, AO_X_ALLTOALL},
        {"Cijk_Ailk_Bljk_BBS_BH_MT128x128x64", AO_CLASS_COMPUTE, AO_X_OTHER},
        {"void at::native::vectorized_elementwise_kernel<4>", AO_CLASS_COMPUTE, AO_X_OTHER},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ao_activity *a = kernel(&t, cases[i].name, 0, 1, -1);
        ao_xkind k;
        assert_int_equal(ao_classify(&c, a, &k), cases[i].cls);
        if (cases[i].cls == AO_CLASS_COMM) assert_int_equal(k, cases[i].kind);
    }
    ao_activity *m = ao_trace_add_activity(&t);
    m->kind = AO_ACT_MEMCPY;
    m->name = "Memcpy HtoD (Pinned -> Device)";
    ao_xkind k;
    assert_int_equal(ao_classify(&c, m, &k), AO_CLASS_COPY);
    m->kind = AO_ACT_MEMSET;
    assert_int_equal(ao_classify(&c, m, &k), AO_CLASS_COPY);
    /* a trace that states the class wins over the name */
    ao_activity *s = kernel(&t, "allgather", 0, 1, -1);
    s->cls = AO_CLASS_COMM;
    s->coll_kind = AO_KIND_ALLGATHER;
    assert_int_equal(ao_classify(&c, s, &k), AO_CLASS_COMM);
    assert_int_equal(k, AO_X_ALLGATHER);
    ao_trace_free(&t);
    ao_classifier_free(&c);
    assert_int_equal(ao_classifier_init(&c, NULL, "(unclosed"), 2);
}

/* Two steps [0,100) and [100,200) on the host. The device lags: kernel 1,
 * launched at 10 in step 1, runs at [105,130), inside step 2's host range,
 * and still belongs to step 1; kernel 4's launch (250) is in no step. */
static void build_steps(ao_trace *t)
{
    ao_trace_init(t, "steps.json", "kineto");
    range(t, "ProfilerStep#7", 0, 100);
    range(t, "ProfilerStep#8", 100, 200);
    range(t, "aten::mm", 5, 20); /* not a step */
    launch(t, 10, 1);
    launch(t, 20, 2);
    launch(t, 150, 3);
    launch(t, 250, 4);
    launch(t, 160, 5);
    kernel(t, "gemm", 105, 130, 1);                            /* step 7, compute */
    kernel(t, "ncclDevKernel_AllGather_RING_LL", 110, 150, 2); /* step 7, comm */
    kernel(t, "gemm", 200, 210, 3);                            /* step 8, compute */
    kernel(t, "gemm", 400, 410, 4);                            /* no step */
    kernel(t, "ncclDevKernel_ReduceScatter_Sum", 205, 220, 5); /* step 8, comm */
}

static void test_step_attribution(void **state)
{
    (void)state;
    ao_trace t;
    build_steps(&t);
    ao_classifier c;
    assert_int_equal(ao_classifier_init(&c, NULL, NULL), 0);
    ao_rank_result r;
    assert_int_equal(ao_analyze_trace(&t, &c, 2, &r), 0);
    assert_int_equal(r.nsteps, 2);
    assert_int_equal(r.unattributed, 1);
    assert_false(r.stepless);

    const ao_step_result *s = &r.steps[0];
    assert_int_equal(s->step, 7);
    assert_int_equal(s->nops, 2);
    /* W = [105,150): C = [105,130), M = [110,150) */
    assert_close(s->m.step_ms, 0.045, 1e-12);
    assert_close(s->m.compute_ms, 0.025, 1e-12);
    assert_close(s->m.comm_ms, 0.040, 1e-12);
    assert_close(s->m.overlap_ms, 0.020, 1e-12);
    assert_close(s->m.exposed_comm_ms, 0.020, 1e-12);
    assert_close(s->m.idle_ms, 0, 1e-12);
    assert_close(s->m.overlap_ratio, 0.5, 1e-12);
    assert_close(s->exposed_kind_ms[AO_X_ALLGATHER], 0.020, 1e-12);
    assert_close(s->comm_kind_ms[AO_X_ALLGATHER], 0.040, 1e-12);

    s = &r.steps[1];
    assert_int_equal(s->step, 8);
    /* W = [200,220): C = [200,210), M = [205,220) */
    assert_close(s->m.step_ms, 0.020, 1e-12);
    assert_close(s->m.overlap_ms, 0.005, 1e-12);
    assert_close(s->exposed_kind_ms[AO_X_REDUCESCATTER], 0.010, 1e-12);
    assert_close(s->exposed_kind_ms[AO_X_ALLGATHER], 0, 1e-12);

    /* whole trace: every activity, W = [105,410) */
    assert_close(r.total.m.step_ms, 0.305, 1e-12);
    assert_int_equal(r.nkernels, 3);
    assert_string_equal(r.kernels[0].name, "gemm");
    assert_int_equal(r.kernels[0].count, 3); /* 25 + 10 + 10 us */
    assert_close(r.kernels[0].total_us, 45, 1e-12);
    assert_string_equal(r.kernels[1].name, "ncclDevKernel_AllGather_RING_LL");
    assert_close(r.class_us[AO_CLASS_COMM], 55, 1e-12);
    ao_rank_result_free(&r);
    ao_classifier_free(&c);

    /* --step names another range; its number is its order when not digits */
    assert_int_equal(ao_classifier_init(&c, "^ProfilerStep#8$", NULL), 0);
    assert_int_equal(ao_analyze_trace(&t, &c, 2, &r), 0);
    assert_int_equal(r.nsteps, 1);
    assert_int_equal(r.steps[0].step, 0);
    assert_int_equal(r.unattributed, 3);
    ao_rank_result_free(&r);
    ao_classifier_free(&c);

    /* no step marks: one window, step 0, everything in it */
    assert_int_equal(ao_classifier_init(&c, "^nothing$", NULL), 0);
    assert_int_equal(ao_analyze_trace(&t, &c, 2, &r), 0);
    assert_true(r.stepless);
    assert_int_equal(r.nsteps, 1);
    assert_int_equal(r.steps[0].nops, 5);
    ao_rank_result_free(&r);
    ao_classifier_free(&c);
    ao_trace_free(&t);
}

/* Idle split (§7): gaps [10,30) and [40,50). The kernel after the first
 * was launched at 25-26 (in the queue at the call's end, 26), after the
 * device ran dry at 10: host wait [10,26), then queued [26,30). The one
 * after the second, at 45-46: host wait [40,46), queued [46,50). */
static void test_host_wait(void **state)
{
    (void)state;
    ao_trace t;
    ao_trace_init(&t, "idle.json", "kineto");
    range(&t, "ProfilerStep#1", 0, 100);
    launch(&t, 1, 1);
    launch(&t, 25, 2);
    launch(&t, 45, 3);
    kernel(&t, "a", 0, 10, 1);
    kernel(&t, "b", 30, 40, 2);
    kernel(&t, "c", 50, 60, 3);
    ao_classifier c;
    assert_int_equal(ao_classifier_init(&c, NULL, NULL), 0);
    ao_rank_result r;
    assert_int_equal(ao_analyze_trace(&t, &c, 1, &r), 0);
    assert_int_equal(r.nsteps, 1);
    assert_close(r.steps[0].m.idle_ms, 0.030, 1e-12);
    assert_close(r.steps[0].m.host_wait_ms, 0.022, 1e-12);
    assert_close(r.steps[0].idle_other_ms, 0.008, 1e-12);
    /* issue times in the ops: the launch call's end */
    assert_true(r.steps[0].ops[1].has_issue);
    assert_close(r.steps[0].ops[1].issue_us, 26, 1e-12);
    assert_true(isnan(r.steps[0].m.overlap_ratio)); /* no communication */
    ao_rank_result_free(&r);
    ao_classifier_free(&c);
    ao_trace_free(&t);
}

/* HTA's conventions: whole microseconds (start up, end down), work launched
 * at or after the last ProfilerStep's start dropped, memcpy neither class. */
static void test_hta_conventions(void **state)
{
    (void)state;
    ao_trace t;
    ao_trace_init(&t, "hta.json", "kineto");
    range(&t, "ProfilerStep#1", 0, 100);
    range(&t, "ProfilerStep#2", 100, 200);
    launch(&t, 10, 1);
    launch(&t, 11, 2);
    launch(&t, 12, 3);
    launch(&t, 150, 4);                                   /* in the last step: dropped */
    kernel(&t, "gemm", 10.4, 20.6, 1);                    /* -> [11,20] */
    kernel(&t, "ncclDevKernel_AllGather", 15.2, 40.9, 2); /* -> [16,40] */
    ao_activity *m = kernel(&t, "Memcpy DtoD (Device -> Device)", 50, 60, 3);
    m->kind = AO_ACT_MEMCPY;
    kernel(&t, "gemm", 300, 400, 4);
    ao_hta_values h;
    ao_hta_compute(&t, &h);
    assert_true(h.valid);
    assert_close(h.kernel_us, 49, 1e-12);         /* 11 .. 60 */
    assert_close(h.idle_us, 49 - 29 - 10, 1e-12); /* merged [11,40] and [50,60] */
    assert_close(h.compute_us, 9, 1e-12);
    assert_close(h.non_compute_us, 49 - 9 - 10, 1e-12);
    assert_close(h.overlap_pct, 100.0 * 4 / 24, 1e-9); /* [16,20] of [16,40] */
    ao_trace_free(&t);
}

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/aorta_test_kinetoXXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_kineto_reader(void **state)
{
    (void)state;
    char *p = write_tmp(
        "{\"schemaVersion\": 1, \"deviceProperties\": [{\"id\": 0, \"name\": \"GPU X\"}],\n"
        " \"distributedInfo\": {\"rank\": 3, \"world_size\": 4, \"nccl_version\": \"2.21.5\"},\n"
        " \"cuda_runtime_version\": 12040,\n"
        " \"traceEvents\": [\n"
        "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#2\", "
        "\"pid\": 1, \"tid\": 1, \"ts\": 100.5, \"dur\": 50},\n"
        "  {\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, "
        "\"tid\": 1, \"ts\": 110, \"dur\": 3, \"args\": {\"correlation\": 9, \"cbid\": 211}},\n"
        "  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"gemm\", \"pid\": 0, \"tid\": 7, "
        "\"ts\": 120, \"dur\": 10.25, \"args\": {\"correlation\": 9, \"stream\": 7, \"device\": 0, "
        "\"grid\": [1, 2, 3]}},\n"
        "  {\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy HtoD\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": 131, \"dur\": 2, \"args\": {\"bytes\": 4096, \"stream\": 7}},\n"
        "  {\"ph\": \"s\", \"cat\": \"ac2g\", \"id\": 9, \"pid\": 1, \"tid\": 1, \"ts\": 110},\n"
        "  {}\n"
        " ]}\n");
    ao_trace t;
    assert_int_equal(ao_trace_detect(p), AO_TRACE_KINETO);
    assert_int_equal(ao_read_kineto(p, &t), 0);
    assert_int_equal(t.rank, 3);
    assert_int_equal(t.world_size, 4);
    assert_string_equal(ao_trace_get_meta(&t, "device_name"), "GPU X");
    assert_string_equal(ao_trace_get_meta(&t, "nccl_version"), "2.21.5");
    assert_string_equal(ao_trace_get_meta(&t, "cuda_runtime_version"), "12040");
    assert_int_equal(t.nacts, 2);
    assert_int_equal(t.nlaunches, 1);
    assert_int_equal(t.nranges, 1);
    assert_close(t.acts[0].end_us, 130.25, 1e-12);
    assert_int_equal(t.acts[0].correlation, 9);
    assert_int_equal(t.acts[0].stream, 7);
    assert_int_equal(t.acts[1].kind, AO_ACT_MEMCPY);
    assert_int_equal(t.acts[1].bytes, 4096);
    assert_int_equal(t.acts[1].correlation, -1);
    assert_ptr_equal(ao_trace_intern(&t, "gemm", 4), t.acts[0].name);
    ao_trace_free(&t);
    unlink(p);
    free(p);

    /* a string "ts": the reader refuses, naming the event and field */
    p = write_tmp("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", "
                  "\"ts\": \"12\", \"dur\": 1}]}");
    assert_int_equal(ao_read_kineto(p, &t), 2);
    unlink(p);
    free(p);
    /* truncated */
    p = write_tmp("{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"kernel\", \"na");
    assert_int_equal(ao_read_kineto(p, &t), 2);
    unlink(p);
    free(p);
}

/* A .gz that expands far past a trace's ratio (a compression bomb of valid
 * events) is refused once it passes 64 MiB: the read stays bounded. */
static void test_kineto_gz_bomb(void **state)
{
    (void)state;
    char *p = strdup("/tmp/aorta_test_bombXXXXXX");
    int fd = mkstemp(p);
    assert_true(fd >= 0);
    gzFile g = gzdopen(fd, "wb9");
    assert_non_null(g);
    static const char ev[] = "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", "
                             "\"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 1},\n";
    gzputs(g, "{\"traceEvents\": [\n");
    for (size_t bytes = 0; bytes < ((size_t)80 << 20); bytes += sizeof ev - 1) gzputs(g, ev);
    gzputs(g, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1, \"dur\": 1}]}\n");
    assert_int_equal(gzclose(g), Z_OK);
    stderr_capture c;
    capture_begin(&c);
    ao_trace t;
    assert_int_equal(ao_read_kineto(p, &t), 2);
    char *err = capture_end(&c);
    assert_non_null(strstr(err, "(uncompressed): the .gz expands more than 100 times its"));
    free(err);
    unlink(p);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classification), cmocka_unit_test(test_step_attribution),
        cmocka_unit_test(test_host_wait),      cmocka_unit_test(test_hta_conventions),
        cmocka_unit_test(test_kineto_reader),  cmocka_unit_test(test_kineto_gz_bomb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
