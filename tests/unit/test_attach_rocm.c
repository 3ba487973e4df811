/* attach/record_rocm.h: rocprofiler-sdk buffer records, built by hand from
 * the SDK's header structs, become attach's activities, and a roctx step of
 * them comes out of attach/steps.h with the numbers a CUPTI step of the same
 * work has. Built only where the SDK's headers are. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attach/record_rocm.h"
#include "attach/steps.h"

#define MS 1000000ull

/* The fields every buffer record has. */
#define RECORD(r, k, corr, t0, t1)                                                                 \
    do {                                                                                           \
        memset(&(r), 0, sizeof(r));                                                                \
        (r).size = sizeof(r);                                                                      \
        (r).kind = (k);                                                                            \
        (r).correlation_id.internal = (corr);                                                      \
        (r).start_timestamp = (t0);                                                                \
        (r).end_timestamp = (t1);                                                                  \
    } while (0)

static rocprofiler_buffer_tracing_kernel_dispatch_record_t
dispatch(uint64_t kernel_id, uint64_t queue, uint64_t t0, uint64_t t1, uint64_t corr)
{
    rocprofiler_buffer_tracing_kernel_dispatch_record_t k;
    RECORD(k, ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH, corr, t0, t1);
    k.operation = ROCPROFILER_KERNEL_DISPATCH_COMPLETE;
    k.dispatch_info.size = sizeof k.dispatch_info;
    k.dispatch_info.kernel_id = kernel_id;
    k.dispatch_info.queue_id.handle = queue;
    return k;
}

static rocprofiler_buffer_tracing_memory_copy_record_t copy(rocprofiler_memory_copy_operation_t op,
                                                            uint64_t t0, uint64_t t1,
                                                            uint64_t bytes, uint64_t corr)
{
    rocprofiler_buffer_tracing_memory_copy_record_t c;
    RECORD(c, ROCPROFILER_BUFFER_TRACING_MEMORY_COPY, corr, t0, t1);
    c.operation = op;
    c.bytes = bytes;
    return c;
}

static rocprofiler_record_header_t header(rocprofiler_buffer_tracing_kind_t kind, void *payload)
{
    rocprofiler_record_header_t h;
    memset(&h, 0, sizeof h);
    h.category = ROCPROFILER_BUFFER_CATEGORY_TRACING;
    h.kind = kind;
    h.payload = payload;
    return h;
}

static void test_kernel_and_copy(void **state)
{
    (void)state;
    ao_rocm_kernels names = {0};
    ao_rocm_kernels_add(&names, 7, "_Z4gemmPfS_");
    ao_rocm_queues q = {0};
    ao_rocm_activity a = {.kind = ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH};
    a.u.kernel = dispatch(7, 0xdead0000, 100, 250, 42);
    ao_cupti_record r;
    assert_true(ao_rocm_decode(&a, &names, &q, &r));
    assert_int_equal(r.kind, AO_CUPTI_KERNEL);
    assert_string_equal(r.name, "_Z4gemmPfS_");
    assert_int_equal(r.start_ns, 100);
    assert_int_equal(r.end_ns, 250);
    assert_int_equal(r.correlation, 42);
    assert_int_equal(r.stream_id, 1); /* queues in order of first appearance */
    assert_int_equal(r.bytes, 0);
    a.u.kernel = dispatch(8, 0xbeef0000, 300, 400, 43); /* never registered */
    assert_true(ao_rocm_decode(&a, &names, &q, &r));
    assert_string_equal(r.name, "kernel");
    assert_int_equal(r.stream_id, 2);
    a.u.kernel = dispatch(7, 0xdead0000, 500, 600, 44);
    assert_true(ao_rocm_decode(&a, &names, &q, &r));
    assert_int_equal(r.stream_id, 1);
    a.u.kernel = dispatch(7, 0xdead0000, 600, 500, 45); /* ends before it starts */
    assert_false(ao_rocm_decode(&a, &names, &q, &r));

    static const struct {
        rocprofiler_memory_copy_operation_t op;
        const char *name;
    } dirs[] = {{ROCPROFILER_MEMORY_COPY_HOST_TO_DEVICE, "memcpy HtoD"},
                {ROCPROFILER_MEMORY_COPY_DEVICE_TO_HOST, "memcpy DtoH"},
                {ROCPROFILER_MEMORY_COPY_DEVICE_TO_DEVICE, "memcpy DtoD"},
                {ROCPROFILER_MEMORY_COPY_HOST_TO_HOST, "memcpy HtoH"},
                {ROCPROFILER_MEMORY_COPY_NONE, "memcpy"}};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        ao_rocm_activity c = {.kind = ROCPROFILER_BUFFER_TRACING_MEMORY_COPY};
        c.u.copy = copy(dirs[i].op, 1000, 3000, 1 << 20, 50 + i);
        assert_true(ao_rocm_decode(&c, &names, &q, &r));
        assert_int_equal(r.kind, AO_CUPTI_MEMCPY);
        assert_string_equal(r.name, dirs[i].name);
        assert_int_equal(r.bytes, 1 << 20);
        assert_int_equal(r.correlation, 50 + i);
        assert_int_equal(r.stream_id, AO_ROCM_COPY_STREAM + (uint32_t)dirs[i].op);
    }
    ao_rocm_activity other = {.kind = ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API};
    assert_false(ao_rocm_decode(&other, &names, &q, &r));
    ao_rocm_kernels_free(&names);
}

/* Only kernel dispatches and memory copies are kept; a record an older SDK
 * made smaller keeps its bytes and zeros after them. */
static void test_copy_from_headers(void **state)
{
    (void)state;
    rocprofiler_buffer_tracing_kernel_dispatch_record_t k = dispatch(1, 9, 10, 20, 5);
    rocprofiler_buffer_tracing_memory_copy_record_t c =
        copy(ROCPROFILER_MEMORY_COPY_HOST_TO_DEVICE, 30, 40, 64, 6);
    rocprofiler_buffer_tracing_kernel_dispatch_record_t small = dispatch(2, 9, 50, 60, 7);
    small.size = offsetof(rocprofiler_buffer_tracing_kernel_dispatch_record_t, dispatch_info);
    small.dispatch_info.kernel_id = 99; /* past the record's size: not copied */
    rocprofiler_buffer_tracing_hip_api_record_t api;
    memset(&api, 0, sizeof api);
    api.size = sizeof api;
    rocprofiler_record_header_t h[] = {
        header(ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH, &k),
        header(ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API, &api),
        header(ROCPROFILER_BUFFER_TRACING_MEMORY_COPY, &c),
        header(ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH, &small),
        header(ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH, NULL),
    };
    h[4].payload = NULL;
    rocprofiler_record_header_t counters = header(ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH, &k);
    counters.category = ROCPROFILER_BUFFER_CATEGORY_COUNTERS;
    rocprofiler_record_header_t *ptrs[] = {&h[0], &h[1], &h[2], &h[3], &h[4], &counters, NULL};
    ao_rocm_activity out[7];
    size_t n = ao_rocm_copy(ptrs, 7, out);
    assert_int_equal(n, 3);
    assert_int_equal(out[0].kind, ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH);
    assert_int_equal(out[0].u.kernel.correlation_id.internal, 5);
    assert_int_equal(out[0].u.kernel.dispatch_info.kernel_id, 1);
    assert_int_equal(out[1].kind, ROCPROFILER_BUFFER_TRACING_MEMORY_COPY);
    assert_int_equal(out[1].u.copy.bytes, 64);
    assert_int_equal(out[2].u.kernel.start_timestamp, 50);
    assert_int_equal(out[2].u.kernel.dispatch_info.kernel_id, 0);
}

static void test_names_and_queues(void **state)
{
    (void)state;
    ao_rocm_kernels t = {0};
    assert_null(ao_rocm_kernels_name(&t, 1));
    char name[32];
    for (uint64_t id = 1; id <= 2000; id++) {
        snprintf(name, sizeof name, "k%llu", (unsigned long long)id);
        ao_rocm_kernels_add(&t, id * 4096, name);
    }
    assert_int_equal(t.n, 2000);
    assert_string_equal(ao_rocm_kernels_name(&t, 4096), "k1");
    assert_string_equal(ao_rocm_kernels_name(&t, 2000 * 4096), "k2000");
    assert_null(ao_rocm_kernels_name(&t, 3));
    ao_rocm_kernels_add(&t, 4096, "again"); /* a code object loaded again */
    assert_int_equal(t.n, 2000);
    assert_string_equal(ao_rocm_kernels_name(&t, 4096), "again");
    ao_rocm_kernels_add(&t, 5, NULL);
    assert_int_equal(t.n, 2000);
    ao_rocm_kernels_free(&t);
    /* queues past the last lane share it */
    ao_rocm_queues q = {0};
    for (uint64_t h = 1; h <= AO_ROCM_MAX_QUEUES; h++)
        assert_int_equal(ao_rocm_queue_stream(&q, h * 16), h);
    assert_int_equal(ao_rocm_queue_stream(&q, 999999), AO_ROCM_MAX_QUEUES);
    assert_int_equal(ao_rocm_queue_stream(&q, 16), 1);
}

typedef struct got {
    int n;
    ao_overlap m;
    char name[32];
    size_t nops;
} got;

static void collect(void *ctx, const ao_step_out *s)
{
    got *g = ctx;
    g->n++;
    g->m = s->m;
    g->nops = s->nops;
    snprintf(g->name, sizeof g->name, "%s", s->name ? s->name : "");
}

/* A roctx step (push id 100, pop id 200) of a GEMM and an RCCL all-reduce
 * beside it and a copy: the same §7 numbers as the CUPTI test's step. */
static void test_step_from_sdk_records(void **state)
{
    (void)state;
    ao_rocm_kernels names = {0};
    ao_rocm_kernels_add(&names, 1, "Cijk_Alik_Bljk_SB_MT128x128x16");
    ao_rocm_kernels_add(&names, 2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    ao_rocm_kernels_add(&names, 3, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"); /* one name */
    ao_rocm_queues q = {0};
    ao_rocm_activity a[4] = {{.kind = ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH},
                             {.kind = ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH},
                             {.kind = ROCPROFILER_BUFFER_TRACING_MEMORY_COPY},
                             {.kind = ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH}};
    uint64_t b = 100 * MS;
    a[0].u.kernel = dispatch(1, 0x1000, b, b + 10 * MS, 101);
    a[1].u.kernel = dispatch(2, 0x2000, b + 6 * MS, b + 14 * MS, 103);
    a[2].u.copy = copy(ROCPROFILER_MEMORY_COPY_HOST_TO_DEVICE, b + 2 * MS, b + 4 * MS, 4096, 105);
    a[3].u.kernel = dispatch(1, 0x1000, b + 20 * MS, b + 21 * MS, 250); /* after the step */
    ao_steps_opts o = {.forced = AO_STEP_NVTX, .settle_ns = 10 * MS, .world_size = 2};
    ao_steps *s = ao_steps_new(&o, 0);
    assert_non_null(s);
    for (size_t i = 0; i < 4; i++) {
        ao_cupti_record r;
        assert_true(ao_rocm_decode(&a[i], &names, &q, &r));
        ao_steps_add(s, &r, 0);
    }
    ao_steps_add_mark(s, "step", 100, 200);
    got g = {0};
    ao_steps_advance(s, 100 * MS, 0, collect, &g);
    assert_int_equal(g.n, 1);
    assert_string_equal(g.name, "step");
    assert_int_equal(g.nops, 3);
    assert_true(fabs(g.m.step_ms - 14) < 1e-9);
    assert_true(fabs(g.m.compute_ms - 10) < 1e-9);
    assert_true(fabs(g.m.comm_ms - 8) < 1e-9);
    assert_true(fabs(g.m.copy_ms - 2) < 1e-9);
    assert_true(fabs(g.m.overlap_ms - 4) < 1e-9);
    assert_true(fabs(g.m.exposed_comm_ms - 4) < 1e-9);
    assert_int_equal(g.m.kinds[AO_KIND_ALLREDUCE].ops, 1);
    ao_steps_free(s);
    ao_rocm_kernels_free(&names);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_and_copy),
        cmocka_unit_test(test_copy_from_headers),
        cmocka_unit_test(test_names_and_queues),
        cmocka_unit_test(test_step_from_sdk_records),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
