/* report/trace (Chrome trace from a run directory, the streaming writer's
 * rules) and the plain C half of timeline/cupti (kernel classification,
 * records -> ops, windows and lanes). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "test_files.h"

#include "core/error.h"
#include "core/json.h"
#include "core/jsonl.h"
#include "core/metrics.h"
#include "core/rundir.h"
#include "runs/kernels.h"
#include "runs/rundata.h"
#include "runs/trace.h"
#include "telemetry/telemetry.h"
#include "timeline/cupti.h"

#define ANCHOR0_NS 1700000000123456000LL
#define SKEW_US    250.0 /* rank 1's anchor is this much later than rank 0's */
#define NSTEPS     3

/* ---- a run directory written with the jsonl writer ---------------------------------- */

typedef struct extra_ctx {
    const ao_tel_agg *agg;
    const ao_op *kernels; /* NULL: the step is outside the profiling windows */
    size_t nkernels;
} extra_ctx;

/* As train_profile.c writes a record's extra: telemetry, then the kernel
 * trace through its one writer. */
static int write_extra(void *ctx, yajl_gen g)
{
    const extra_ctx *e = ctx;
    if (ao_telemetry_write_json(g, e->agg) != yajl_gen_status_ok) return -1;
    ao_overlap kov;
    ao_overlap_compute(e->kernels, e->kernels ? e->nkernels : 0, 2, &kov);
    if (ao_trace_gen_kernel_extra(g, &kov, e->kernels, e->nkernels) != yajl_gen_status_ok)
        return -1;
    return 0;
}

/* Ops of one step: compute on compute, an all-gather and a reduce-scatter,
 * issued interleaved (not in per-stream order). */
static size_t step_ops(int step, int rank, ao_op *ops)
{
    double base = 1000.0 * step + 10.0 * rank;
    ops[0] = (ao_op){
        base + 0,          base + 100, 4096, "allgather", 0, AO_STREAM_ALLGATHER, AO_CLASS_COMM,
        AO_KIND_ALLGATHER, 0,          0};
    ops[1] = (ao_op){base + 50,        base + 300,   0, "forward", 0, AO_STREAM_COMPUTE,
                     AO_CLASS_COMPUTE, AO_KIND_NONE, 0, 0};
    ops[2] = (ao_op){
        base + 120,        base + 200, 8192, "allgather", 1, AO_STREAM_ALLGATHER, AO_CLASS_COMM,
        AO_KIND_ALLGATHER, 0,          0};
    ops[3] = (ao_op){base + 300,       base + 600,   0, "backward", 1, AO_STREAM_COMPUTE,
                     AO_CLASS_COMPUTE, AO_KIND_NONE, 0, 0};
    ops[4] = (ao_op){base + 610,
                     base + 700,
                     16384 + (uint64_t)step,
                     "reducescatter",
                     1,
                     AO_STREAM_REDUCESCATTER,
                     AO_CLASS_COMM,
                     AO_KIND_REDUCESCATTER,
                     0,
                     0};
    return 5;
}

static void write_run(const char *dir, int world, int with_rank1)
{
    char *run_json = ao_asprintf("%s/%s", dir, AO_RUN_JSON);
    char *argv[] = {"aorta", "train"};
    ao_run_header h = {.run_id = "test-run",
                       .command = "train",
                       .argc = 2,
                       .argv = argv,
                       .host = "host",
                       .world_size = world};
    h.anchor_realtime.tv_sec = ANCHOR0_NS / 1000000000LL;
    h.anchor_realtime.tv_nsec = ANCHOR0_NS % 1000000000LL;
    assert_int_equal(ao_run_json_write(run_json, &h), 0);
    free(run_json);

    for (int rank = 0; rank < world; rank++) {
        if (rank == 1 && !with_rank1) continue;
        char *name = ao_rank_file_name(rank, world, AO_RANK_METRICS);
        char *path = ao_asprintf("%s/%s", dir, name);
        ao_jsonl_writer *w = ao_jsonl_open(path, 1);
        assert_non_null(w);
        double anchor_s = (double)ANCHOR0_NS * 1e-9 + rank * SKEW_US * 1e-6;
        for (int step = 0; step < NSTEPS; step++) {
            ao_op ops[5];
            size_t n = step_ops(step, rank, ops);
            ao_iter_record r;
            ao_iter_record_init(&r);
            r.rank = rank;
            r.world_size = world;
            r.step = step;
            ao_overlap_compute(ops, n, world, &r.m);
            r.wall_time = anchor_s + r.m.window_start_us * 1e-6;
            r.ops = ops;
            r.nops = n;
            ao_tel_agg agg;
            memset(&agg, 0, sizeof agg);
            agg.status = AO_TEL_OK;
            agg.source = "nvml";
            agg.samples = 2;
            for (int i = 0; i < AO_TEL_NMETRICS; i++) agg.m[i] = (ao_tel_stat){0, NAN, NAN, NAN};
            agg.m[AO_TEL_SM_CLOCK_MHZ] = (ao_tel_stat){2, 1900, 1950 + step, 1980};
            agg.m[AO_TEL_POWER_W] = (ao_tel_stat){2, 500, 600, 700};
            ao_op kern[2] = {
                {ops[1].start_us + 1, ops[1].start_us + 40, 0, "sgemm", -1, 0, AO_CLASS_COMPUTE,
                 AO_KIND_NONE, 0, 0},
                {ops[0].start_us + 2, ops[0].start_us + 90, 0, "ncclDevKernel_AllGather", -1, 1,
                 AO_CLASS_COMM, AO_KIND_ALLGATHER, 0, 0},
            };
            extra_ctx e = {&agg, step == 1 ? kern : NULL, 2};
            r.extra = write_extra;
            r.extra_ctx = &e;
            assert_int_equal(ao_jsonl_append(w, &r), 0);
        }
        assert_int_equal(ao_jsonl_close(w), 0);
        free(path);
        free(name);
    }
}

static yajl_val parse_file(const char *path)
{
    char *text = slurp(path, NULL);
    assert_non_null(text);
    char err[256];
    yajl_val v = yajl_tree_parse(text, err, sizeof err);
    if (!v) print_error("%s: %s\n", path, err);
    assert_non_null(v);
    free(text);
    return v;
}

static const char *str_of(yajl_val obj, const char *key)
{
    yajl_val v = ao_json_member(obj, key);
    return YAJL_IS_STRING(v) ? v->u.string : NULL;
}

static long long int_of(yajl_val obj, const char *key)
{
    yajl_val v = ao_json_member(obj, key);
    assert_true(YAJL_IS_INTEGER(v));
    return YAJL_GET_INTEGER(v);
}

/* ---- trace from a run directory ----------------------------------------------------- */

static void test_trace_from_run(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    write_run(dir, 2, 1);
    char *out = ao_asprintf("%s/trace.json", dir);
    assert_int_equal(ao_trace_from_run(dir, out), 0);
    yajl_val doc = parse_file(out);

    assert_string_equal(str_of(doc, "displayTimeUnit"), "ms");
    yajl_val other = ao_json_member(doc, "otherData");
    assert_int_equal(int_of(other, "time_origin_realtime_ns"), ANCHOR0_NS);
    assert_string_equal(str_of(other, "run_id"), "test-run");
    yajl_val evs = ao_json_member(doc, "traceEvents");
    assert_true(YAJL_IS_ARRAY(evs));

    /* thread names: per rank and tid, exactly one */
    int names[2][AO_TRACE_TID_KERNELS + 4] = {{0}};
    int procs[2] = {0}, ops_seen = 0, iters = 0, counters = 0, kernels = 0, flows[2] = {0};
    double flow_ts[2][2 * 2 * NSTEPS + 1];
    double last_ts[2][AO_TRACE_TID_KERNELS + 4];
    for (int p = 0; p < 2; p++)
        for (int t = 0; t < AO_TRACE_TID_KERNELS + 4; t++) last_ts[p][t] = -1;
    double first_op_ts[2] = {-1, -1};
    for (size_t i = 0; i < evs->u.array.len; i++) {
        yajl_val e = evs->u.array.values[i];
        const char *ph = str_of(e, "ph");
        assert_non_null(ph);
        int pid = (int)int_of(e, "pid");
        assert_in_range(pid, 0, 1);
        if (strcmp(ph, "M") == 0) {
            const char *what = str_of(e, "name");
            yajl_val args = ao_json_member(e, "args");
            if (strcmp(what, "process_name") == 0) {
                char want[16];
                snprintf(want, sizeof want, "rank %d", pid);
                assert_string_equal(str_of(args, "name"), want);
                procs[pid]++;
            } else if (strcmp(what, "thread_name") == 0) {
                int tid = (int)int_of(e, "tid");
                assert_in_range(tid, 0, AO_TRACE_TID_KERNELS + 3);
                names[pid][tid]++;
                const char *tn = str_of(args, "name");
                if (tid < AO_NSTREAMS)
                    assert_string_equal(tn, ao_stream_id_name((ao_stream_id)tid));
                if (tid == AO_TRACE_TID_ITERATIONS) assert_string_equal(tn, "iterations");
                if (tid == AO_TRACE_TID_KERNELS) assert_string_equal(tn, "kernels 0: compute");
                if (tid == AO_TRACE_TID_KERNELS + 1)
                    assert_string_equal(tn, "kernels 1: allgather");
            }
            continue;
        }
        yajl_val ts = ao_json_member(e, "ts");
        assert_true(YAJL_IS_NUMBER(ts));
        double t = ao_json_number(ts);
        if (strcmp(ph, "s") == 0 || strcmp(ph, "f") == 0) {
            /* collective -> the compute waiting on it: ids 1.., in pairs */
            int end = ph[0] == 'f';
            assert_string_equal(str_of(e, "cat"), "waits_on");
            long long id = int_of(e, "id");
            assert_in_range(id, 1, 2 * 2 * NSTEPS);
            assert_int_equal(int_of(e, "tid"), end ? AO_STREAM_COMPUTE : AO_STREAM_ALLGATHER);
            flow_ts[end][id] = t;
            flows[end]++;
            continue;
        }
        if (strcmp(ph, "C") == 0) {
            counters++;
            assert_true(YAJL_IS_NUMBER(ao_json_member(ao_json_member(e, "args"), "value")));
            continue;
        }
        assert_string_equal(ph, "X");
        assert_true(YAJL_IS_NUMBER(ao_json_member(e, "dur")));
        assert_non_null(str_of(e, "name"));
        assert_non_null(str_of(e, "cat"));
        int tid = (int)int_of(e, "tid");
        assert_in_range(tid, 0, AO_TRACE_TID_KERNELS + 3);
        assert_true(names[pid][tid] == 1); /* named before its first event */
        assert_true(t >= last_ts[pid][tid]);
        last_ts[pid][tid] = t;
        yajl_val args = ao_json_member(e, "args");
        if (tid == AO_TRACE_TID_ITERATIONS) {
            iters++;
            assert_string_equal(str_of(e, "cat"), "iteration");
            continue;
        }
        assert_true(YAJL_IS_INTEGER(ao_json_member(args, "bytes")));
        if (tid >= AO_TRACE_TID_KERNELS) {
            kernels++;
            continue;
        }
        ops_seen++;
        /* every op is one of its step's ops, bytes and all; anchors recovered from
         * wall_time hold to ~0.3 µs */
        long long step = int_of(args, "step");
        ao_op ops[5];
        size_t n = step_ops((int)step, pid, ops);
        int found = 0;
        for (size_t k = 0; k < n; k++) {
            double want = ops[k].start_us + pid * SKEW_US;
            if (ops[k].stream == tid && fabs(want - t) < 0.5 &&
                (uint64_t)int_of(args, "bytes") == ops[k].bytes &&
                strcmp(str_of(e, "name"), ops[k].name) == 0)
                found = 1;
        }
        assert_true(found);
        if (first_op_ts[pid] < 0 || t < first_op_ts[pid]) first_op_ts[pid] = t;
    }
    assert_int_equal(procs[0], 1);
    assert_int_equal(procs[1], 1);
    for (int p = 0; p < 2; p++) {
        assert_int_equal(names[p][AO_STREAM_COMPUTE], 1);
        assert_int_equal(names[p][AO_STREAM_ALLGATHER], 1);
        assert_int_equal(names[p][AO_STREAM_REDUCESCATTER], 1);
        assert_int_equal(names[p][AO_STREAM_ALLREDUCE], 0); /* unused streams stay unnamed */
        assert_int_equal(names[p][AO_TRACE_TID_ITERATIONS], 1);
    }
    assert_int_equal(ops_seen, 2 * NSTEPS * 5);
    assert_int_equal(iters, 2 * NSTEPS);
    assert_int_equal(kernels, 2 * 2);
    assert_int_equal(counters, 2 * NSTEPS * 2); /* sm clock and power: the reported metrics */
    /* both all-gathers of a step flow to the backward (the first compute op
     * after they end; the reduce-scatter has none after it) */
    assert_int_equal(flows[0], 2 * NSTEPS * 2);
    assert_int_equal(flows[1], 2 * NSTEPS * 2);
    for (int id = 1; id <= 2 * 2 * NSTEPS; id++) assert_true(flow_ts[1][id] > flow_ts[0][id]);
    /* rank 1's anchor is SKEW_US later, its first op 10 µs into its timeline */
    assert_true(fabs(first_op_ts[0] - 0.0) < 0.5);
    assert_true(fabs(first_op_ts[1] - (SKEW_US + 10.0)) < 0.5);
    yajl_tree_free(doc);
    free(out);
    remove_temp_dir(dir);
}

/* The report's top kernels read the kernel trace the writer wrote: only
 * step 1 carries kernels (an active window); the others only overlap_kernels. */
static void test_top_kernels_from_run(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    write_run(dir, 2, 1);
    ao_run_data run;
    assert_int_equal(ao_run_load(dir, 0, &run), 0);
    assert_int_equal(run.nranks, 2);
    for (int k = 0; k < 2; k++) {
        const ao_kernel_table *t = &run.ranks[k].kernels;
        assert_int_equal(t->steps, 1);
        assert_true(fabs(t->window_ms - run.ranks[k].rows[1 * ao_metric_count()]) < 1e-9);
        assert_int_equal(t->n, 2);
        /* by total time: the all-gather kernel (88 us) before the sgemm (39 us) */
        assert_string_equal(t->k[0].name, "ncclDevKernel_AllGather");
        assert_int_equal(t->k[0].cls, AO_CLASS_COMM);
        assert_int_equal(t->k[0].count, 1);
        assert_true(fabs(t->k[0].total_us - 88) < 1e-9 && fabs(t->k[0].max_us - 88) < 1e-9);
        assert_string_equal(t->k[1].name, "sgemm");
        assert_true(fabs(t->k[1].total_us - 39) < 1e-9);
    }
    ao_run_free(&run);
    remove_temp_dir(dir);
}

/* Many names (the table grows) and repeats (aggregated by name). */
static void test_kernel_short_name(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, "
         "at::native::func_wrapper_t<float>>>(at::native::ReduceOp<c10::BFloat16>)",
         "reduce_kernel<\u2026>"},
        {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
         "ncclDevKernel_AllGather_RING_LL"},
        {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
         "namespace)::TensorListMetadata<2>>(int)",
         "multi_tensor_apply_kernel<\u2026>"},
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n"},
        {"_Z8my_kernelPf", "_Z8my_kernelPf"},
        {"memcpy HtoD", "memcpy HtoD"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ao_kernel_short_name(cases[i][0], out, sizeof out);
        assert_string_equal(out, cases[i][1]);
    }
    ao_kernel_short_name("a_very_long_kernel_name_that_will_not_fit", out, 8);
    assert_true(strlen(out) < 8);
}

static void test_kernel_table(void **state)
{
    (void)state;
    ao_kernel_table t;
    memset(&t, 0, sizeof t);
    char names[300][16];
    ao_op ops[300];
    for (int i = 0; i < 300; i++) {
        snprintf(names[i], sizeof names[i], "k%d", i % 150);
        ops[i] = (ao_op){
            0, (double)(i % 150 + 1), 0, names[i], -1, 0, AO_CLASS_COMPUTE, AO_KIND_NONE, 0, 0};
    }
    ao_kernel_table_add(&t, ops, 300, 5);
    ao_kernel_table_add(&t, ops, 1, 3);
    ao_kernel_table_sort(&t);
    assert_int_equal(t.n, 150);
    assert_int_equal(t.steps, 2);
    assert_true(fabs(t.window_ms - 8) < 1e-12);
    assert_string_equal(t.k[0].name, "k149");
    assert_int_equal(t.k[0].count, 2);
    assert_true(fabs(t.k[0].total_us - 300) < 1e-12);
    assert_string_equal(t.k[149].name, "k0");
    assert_int_equal(t.k[149].count, 3); /* twice in the first step, once in the second */
    ao_kernel_table_free(&t);
}

static void test_trace_missing_rank_and_bad_dir(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char *out = ao_asprintf("%s/trace.json", dir);
    stderr_capture cap;
    capture_begin(&cap);
    int rc = ao_trace_from_run(dir, out);
    char *err = capture_end(&cap);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_contains(err, "run.json");
    free(err);
    assert_int_equal(access(out, F_OK), -1);

    write_run(dir, 2, 0);
    capture_begin(&cap);
    rc = ao_trace_from_run(dir, out);
    err = capture_end(&cap);
    assert_int_equal(rc, 0);
    assert_contains(err, "rank 1 is left out");
    free(err);
    yajl_val doc = parse_file(out);
    yajl_val evs = ao_json_member(doc, "traceEvents");
    for (size_t i = 0; i < evs->u.array.len; i++)
        assert_int_equal(int_of(evs->u.array.values[i], "pid"), 0);
    yajl_tree_free(doc);
    free(out);
    remove_temp_dir(dir);
}

static void test_trace_writer_rules(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char *out = ao_asprintf("%s/t.json", dir);
    ao_trace *t = ao_trace_open(out);
    assert_non_null(t);
    stderr_capture cap;
    capture_begin(&cap);
    assert_int_equal(ao_trace_add_rank(t, 0, 5000), 0);
    assert_int_equal(ao_trace_add_rank(t, 0, 5000), -1);
    assert_int_equal(ao_trace_add_rank(t, -1, 5000), -1);
    assert_int_equal(ao_trace_add_counter(t, 3, "x", 0, 1), -1); /* undeclared rank */
    assert_int_equal(ao_trace_add_counter(t, 0, "power_w", 2.5, 300), 0);
    assert_int_equal(ao_trace_add_counter(t, 0, "power_w", 3.5, NAN), 0); /* skipped */
    assert_int_equal(ao_trace_add_rank(t, 1, 4000), -1); /* after the first event */
    char *err = capture_end(&cap);
    assert_contains(err, "added twice");
    assert_contains(err, "negative");
    assert_contains(err, "rank 3 was not added");
    assert_contains(err, "after the first event");
    free(err);
    assert_int_equal(access(out, F_OK), -1); /* nothing visible before close */
    ao_json_field f[] = {{"note", ao_json_str("hi")}};
    assert_int_equal(ao_trace_close(t, &(ao_json_object){f, 1}), 0);
    yajl_val doc = parse_file(out);
    yajl_val evs = ao_json_member(doc, "traceEvents");
    int counters = 0;
    for (size_t i = 0; i < evs->u.array.len; i++) {
        yajl_val e = evs->u.array.values[i];
        if (strcmp(str_of(e, "ph"), "C") != 0) continue;
        counters++;
        assert_true(fabs(ao_json_number(ao_json_member(e, "ts")) - 2.5) < 1e-9);
    }
    assert_int_equal(counters, 1);
    assert_string_equal(str_of(ao_json_member(doc, "otherData"), "note"), "hi");
    yajl_tree_free(doc);

    /* abort leaves nothing behind */
    char *out2 = ao_asprintf("%s/aborted.json", dir);
    t = ao_trace_open(out2);
    assert_non_null(t);
    ao_trace_abort(t);
    assert_int_equal(access(out2, F_OK), -1);
    /* an unwritable place is an error, not a crash */
    capture_begin(&cap);
    assert_null(ao_trace_open("/nonexistent-dir/trace.json"));
    err = capture_end(&cap);
    assert_contains(err, "cannot create");
    free(err);
    free(out2);
    free(out);
    remove_temp_dir(dir);
}

/* ---- CUPTI, plain C half -------------------------------------------------------------- */

static void test_cupti_classify(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        ao_op_class cls;
        ao_coll_kind kind;
    } cases[] = {
        {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", AO_CLASS_COMM,
         AO_KIND_ALLGATHER},
        {"_Z39ncclDevKernel_ReduceScatter_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
         AO_CLASS_COMM, AO_KIND_REDUCESCATTER},
        {"ncclKernel_AllReduce_RING_LL_Sum_float", AO_CLASS_COMM, AO_KIND_ALLREDUCE},
        {"ncclDevKernel_Broadcast_RING_LL", AO_CLASS_COMM, AO_KIND_BROADCAST},
        {"ncclDevKernel_Generic", AO_CLASS_COMM, AO_KIND_NONE},
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", AO_CLASS_COMPUTE,
         AO_KIND_NONE},
        {"_Z15layernorm_fwdPKfPf", AO_CLASS_COMPUTE, AO_KIND_NONE},
        {"my_ncclDevKernel_AllGather", AO_CLASS_COMPUTE, AO_KIND_NONE}, /* not a prefix */
        {NULL, AO_CLASS_COMPUTE, AO_KIND_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ao_coll_kind kind = AO_KIND_ALLREDUCE;
        assert_int_equal(ao_cupti_classify(cases[i].name, &kind), cases[i].cls);
        assert_int_equal(kind, cases[i].kind);
    }
}

static void test_cupti_records_to_ops(void **state)
{
    (void)state;
    const uint64_t anchor = 5000000;
    ao_cupti_record k = {
        AO_CUPTI_KERNEL, anchor + 1500, anchor + 4000, 7, 0, "ncclDevKernel_AllReduce_RING_LL", -1};
    ao_op op;
    ao_cupti_record_to_op(&k, anchor, 3, 0, &op);
    assert_true(op.start_us == 1.5 && op.end_us == 4.0);
    assert_int_equal(op.cls, AO_CLASS_COMM);
    assert_int_equal(op.kind, AO_KIND_ALLREDUCE);
    assert_int_equal(op.stream, 3);
    assert_int_equal(op.unit, -1);
    assert_string_equal(op.name, "ncclDevKernel_AllReduce_RING_LL");

    ao_cupti_record m = {
        AO_CUPTI_MEMCPY, anchor - 2000, anchor - 3000, 9, 1 << 20, "memcpy HtoD", -1};
    ao_cupti_record_to_op(&m, anchor, 0, 0, &op);
    assert_true(op.start_us == -2.0);      /* before the anchor: negative, not wrapped */
    assert_true(op.end_us == op.start_us); /* a reversed record is clamped */
    assert_int_equal(op.cls, AO_CLASS_COPY);
    assert_int_equal(op.kind, AO_KIND_NONE);
    assert_int_equal(op.bytes, 1 << 20);

    ao_cupti_record s = {AO_CUPTI_MEMSET, anchor, anchor + 10, 9, 64, "memset", -1};
    ao_cupti_record_to_op(&s, anchor, 0, 0, &op);
    assert_int_equal(op.cls, AO_CLASS_COPY);
    /* on the compute stream, a memset or copy belongs to the compute op
     * around it; a kernel keeps the class of its name */
    ao_cupti_record_to_op(&s, anchor, 0, 1, &op);
    assert_int_equal(op.cls, AO_CLASS_COMPUTE);
    ao_cupti_record_to_op(&m, anchor, 0, 1, &op);
    assert_int_equal(op.cls, AO_CLASS_COMPUTE);
    ao_cupti_record_to_op(&k, anchor, 0, 1, &op);
    assert_int_equal(op.cls, AO_CLASS_COMM);

    /* windows by midpoint: before t0 dropped, in [t0,t1) taken in start
     * order with lanes by first appearance, at or after t1 kept in order; a
     * kernel that starts just before t1 but runs past it is the next one's */
    ao_cupti_record recs[] = {
        {AO_CUPTI_KERNEL, 100, 150, 11, 0, "old", -1},
        {AO_CUPTI_KERNEL, 1300, 1400, 22, 0, "gemm_b", -1},
        {AO_CUPTI_KERNEL, 1000, 1200, 11, 0, "gemm_a", -1},
        {AO_CUPTI_KERNEL, 1995, 2100, 33, 0, "next_1", -1},
        {AO_CUPTI_MEMSET, 1990, 2004, 22, 8, "memset", -1},
        {AO_CUPTI_KERNEL, 2500, 2600, 11, 0, "next_2", -1},
    };
    size_t n = sizeof recs / sizeof recs[0], cap = 0;
    ao_cupti_lanes lanes = {.n = 0};
    ao_op *ops = NULL;
    size_t got = ao_cupti_split(recs, &n, 1000, 2000, 1000, &lanes, &ops, &cap);
    assert_int_equal(got, 3);
    assert_string_equal(ops[0].name, "gemm_a");
    assert_string_equal(ops[1].name, "gemm_b");
    assert_string_equal(ops[2].name, "memset");
    assert_int_equal(ops[0].stream, 1); /* stream 22 was seen first */
    assert_int_equal(ops[1].stream, 0);
    assert_int_equal(ops[2].stream, 0);
    assert_true(ops[0].start_us == 0.0 && ops[0].end_us == 0.2);
    assert_int_equal(n, 2);
    assert_string_equal(recs[0].name, "next_1");
    assert_string_equal(recs[1].name, "next_2");
    got = ao_cupti_split(recs, &n, 2000, 3000, 1000, &lanes, &ops, &cap);
    assert_int_equal(got, 2);
    assert_int_equal(ops[0].stream, 2); /* stream 33: a new lane */
    assert_int_equal(ops[1].stream, 1);
    assert_int_equal(n, 0);
    free(ops);
    ops = NULL;
    cap = 0;

    /* with the compute stream known, its memset is compute */
    ao_cupti_record more[] = {
        {AO_CUPTI_MEMSET, 1100, 1110, 22, 4, "memset", -1},
        {AO_CUPTI_MEMSET, 1120, 1130, 33, 4, "memset", -1},
    };
    n = 2;
    ao_cupti_lanes known = {.n = 0, .compute_known = 1, .compute_stream = 22};
    got = ao_cupti_split(more, &n, 1000, 2000, 1000, &known, &ops, &cap);
    assert_int_equal(got, 2);
    assert_int_equal(ops[0].cls, AO_CLASS_COMPUTE);
    assert_int_equal(ops[1].cls, AO_CLASS_COPY);
    free(ops);

    ao_cupti_lanes many = {.n = 0};
    for (uint32_t i = 0; i < AO_CUPTI_MAX_LANES + 5; i++) {
        int lane = ao_cupti_lane(&many, 1000 + i);
        assert_int_equal(lane, i < AO_CUPTI_MAX_LANES ? (int)i : AO_CUPTI_MAX_LANES - 1);
    }
}

static void test_cupti_without_cuda(void **state)
{
    (void)state;
#ifdef AORTA_HAVE_CUDA
    skip();
#else
    stderr_capture cap;
    capture_begin(&cap);
    ao_cupti *c = ao_cupti_start();
    char *err = capture_end(&cap);
    assert_null(c);
    assert_contains(err, "kernel_trace needs a build with CUDA");
    free(err);
    ao_op *ops = (ao_op *)&cap;
    assert_int_equal(ao_cupti_take(NULL, 0, 10, &ops), 0);
    assert_null(ops);
    ao_cupti_stop(NULL);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_from_run),
        cmocka_unit_test(test_top_kernels_from_run),
        cmocka_unit_test(test_kernel_table),
        cmocka_unit_test(test_kernel_short_name),
        cmocka_unit_test(test_trace_missing_rank_and_bad_dir),
        cmocka_unit_test(test_trace_writer_rules),
        cmocka_unit_test(test_cupti_classify),
        cmocka_unit_test(test_cupti_records_to_ops),
        cmocka_unit_test(test_cupti_without_cuda),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
