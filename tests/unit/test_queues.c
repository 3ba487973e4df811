/* aorta queues without a device: the union and gap arithmetic on hand-made
 * ops and against a discretized reference, efficiency, --streams parsing and
 * the structure of every workload's plan. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "queues/internal.h"

static void test_union_two_streams(void **state)
{
    (void)state;
    ao_qop ops[] = {{0, 0, 10, 0}, {5, 5, 15, 1}};
    ao_qunion u;
    ao_qunion_compute(ops, 2, 2, &u);
    assert_true(u.busy_us == 15 && u.sum_us == 20 && u.concurrent_us == 5);
    assert_true(fabs(u.concurrency - 20.0 / 15) < 1e-12);
    assert_int_equal(u.max_streams, 2);
}

static void test_union_nested_and_touching(void **state)
{
    (void)state;
    /* A stream counts once however its ops nest; touching is not overlap. */
    ao_qop ops[] = {{0, 0, 10, 0}, {2, 2, 4, 0}, {10, 10, 20, 1}};
    ao_qunion u;
    ao_qunion_compute(ops, 3, 2, &u);
    assert_true(u.busy_us == 20 && u.sum_us == 20 && u.concurrent_us == 0);
    assert_true(u.concurrency == 1);
    assert_int_equal(u.max_streams, 1);
    ao_qunion_compute(ops, 0, 2, &u);
    assert_true(u.busy_us == 0 && isnan(u.concurrency));
}

/* Random ops on integer times against a count per unit cell. */
static void test_union_random(void **state)
{
    (void)state;
    srand(7);
    for (int round = 0; round < 300; round++) {
        enum { T = 200, MAXN = 24, S = 5 };
        ao_qop ops[MAXN];
        int n = 1 + rand() % MAXN, cover[T][S];
        memset(cover, 0, sizeof cover);
        for (int i = 0; i < n; i++) {
            int a = rand() % T, b = a + rand() % 40;
            if (b > T) b = T;
            ops[i] = (ao_qop){a, a, b, rand() % S};
            for (int t = a; t < b; t++) cover[t][ops[i].stream] = 1;
        }
        double busy = 0, sum = 0, conc = 0;
        int maxs = 0;
        for (int t = 0; t < T; t++) {
            int k = 0;
            for (int s = 0; s < S; s++) k += cover[t][s];
            busy += k > 0;
            sum += k;
            conc += k > 1;
            maxs = k > maxs ? k : maxs;
        }
        ao_qunion u;
        ao_qunion_compute(ops, (size_t)n, S, &u);
        assert_true(u.busy_us == busy && u.sum_us == sum && u.concurrent_us == conc);
        assert_int_equal(u.max_streams, maxs);
        assert_true(u.concurrent_us <= u.busy_us && u.busy_us <= u.sum_us);
        if (busy > 0) assert_true(u.concurrency >= 1 && u.concurrency <= u.max_streams);
    }
}

static void test_gaps(void **state)
{
    (void)state;
    /* op 1 follows op 0 on stream 0 (intra 2); op 2 on stream 1 starts 5
     * after op 1 ended (inter 5); op 3 starts while op 2 runs and after
     * op 1: the last op to finish before it is op 1 (inter 1). */
    ao_qop ops[] = {{0, 0, 10, 0}, {10, 12, 20, 0}, {20, 25, 30, 1}, {20, 21, 40, 2}};
    double intra[4], inter[4];
    size_t ni, nx;
    ao_qgaps(ops, 4, intra, &ni, inter, &nx);
    assert_int_equal(ni, 1);
    assert_true(intra[0] == 2);
    assert_int_equal(nx, 2);
    assert_true((inter[0] == 1 && inter[1] == 5) || (inter[0] == 5 && inter[1] == 1));
    /* Every op has at most one gap. */
    assert_true(ni + nx <= 4);
}

static void test_efficiency(void **state)
{
    (void)state;
    /* Work grows with the streams: the usual thr / (N thr1). */
    assert_true(ao_qefficiency(400, 4, 100, 1) == 1);
    assert_true(ao_qefficiency(100, 4, 100, 1) == 0.25);
    assert_true(ao_qefficiency(100, 1, 100, 1) == 1);
    /* Fixed work: the speedup. */
    assert_true(ao_qefficiency(150, 21, 100, 21) == 1.5);
    assert_true(isnan(ao_qefficiency(100, 4, NAN, 1)));
    assert_true(isnan(ao_qefficiency(0, 4, 100, 1)));
    assert_true(isnan(ao_qefficiency(100, 0, 100, 1)));
}

static void test_knee(void **state)
{
    (void)state;
    const int c[] = {1, 2, 4, 8, 16};
    const double flat[] = {1, 1.17, 1.11, 1.17, 0.67}; /* hetero, 8 connections */
    assert_int_equal(ao_qknee(c, flat, 5), 8);
    const double falls[] = {1, 0.5, 0.25, 0.12, 0.06}; /* gemm */
    assert_int_equal(ao_qknee(c, falls, 5), 1);
    const double rises[] = {1, 1.06, 1.14, 1.19, 1.2}; /* fsdp */
    assert_int_equal(ao_qknee(c, rises, 5), 16);
    const double nan_first[] = {NAN, 1, 1, 1, 1};
    assert_int_equal(ao_qknee(c, nan_first, 5), 16);
    assert_int_equal(ao_qknee(c, falls, 1), 1);
}

static void test_parse_streams(void **state)
{
    (void)state;
    ao_queues_opts o;
    ao_queues_defaults(&o);
    assert_int_equal(o.nstreams, 7);
    assert_int_equal(ao_queues_parse_streams("--streams", "8,1,4", &o), 0);
    assert_int_equal(o.nstreams, 3);
    assert_true(o.streams[0] == 1 && o.streams[1] == 4 && o.streams[2] == 8);
    const char *bad[] = {"", "0", "65", "1,1", "a", "1,,2", "2,-1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(ao_queues_parse_streams("--streams", bad[i], &o), -1);
    ao_qsync s;
    assert_int_equal(ao_qsync_parse("--sync", "end_only", &s), 0);
    assert_int_equal(s, AO_QSYNC_END_ONLY);
    assert_int_equal(ao_qsync_parse("--sync", "always", &s), -1);
}

/* Every workload's plan: ops on the streams it was given, dependencies on
 * earlier ops of other streams, names listed, and the counts each pattern
 * promises. */
static void test_plans(void **state)
{
    (void)state;
    assert_int_equal(ao_queues_workload_count(), 7);
    assert_int_equal(ao_queues_workload_check("w", "nope"), -1);
    static const int counts[] = {1, 2, 4, 64};
    for (int w = 0; w < ao_queues_workload_count(); w++) {
        const char *name = ao_queues_workload_name(w);
        assert_int_equal(ao_queues_workload_check("w", name), 0);
        for (int cpu = 0; cpu < 2; cpu++)
            for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                int S = counts[c];
                ao_qplan p;
                ao_qplan_make(name, S, cpu, &p);
                assert_true(p.nops > 0 && p.nnames > 0);
                int used[64] = {0};
                for (int j = 0; j < p.nops; j++) {
                    const ao_qplan_op *op = &p.ops[j];
                    assert_true(op->stream >= 0 && op->stream < S);
                    used[op->stream] = 1;
                    assert_true(ao_qplan_name_index(&p, op->name) >= 0);
                    if (op->kind == AO_Q_GEMM) assert_true(op->shape < p.nshapes);
                    for (int d = 0; d < op->ndeps; d++) {
                        int on = p.deps[op->dep0 + d];
                        assert_true(on >= 0 && on < j);
                        assert_true(p.ops[on].stream != op->stream);
                    }
                }
                int nused = 0;
                for (int s = 0; s < S; s++) nused += used[s];
                if (strcmp(name, "fsdp") != 0) assert_int_equal(nused, S);
                if (strcmp(name, "tiny") == 0) assert_int_equal(p.nops, (cpu ? 8 : 32) * S);
                if (strcmp(name, "gemm") == 0) assert_int_equal(p.nops, S);
                if (strcmp(name, "hetero") == 0)
                    assert_int_equal(p.nops, 1 + (cpu ? 4 : 16) * (S > 1 ? S - 1 : 1));
                if (strcmp(name, "experts") == 0) assert_int_equal(p.nops, 2 + 2 * S);
                if (strcmp(name, "pipeline") == 0) assert_int_equal(p.nops, (cpu ? 4 : 8) * S);
                if (strcmp(name, "dataload") == 0) assert_int_equal(p.nops, 4 * S);
                if (strcmp(name, "fsdp") == 0) {
                    int L = cpu ? 2 : 4; /* h2d, 2 gathers + fwd + bwd + rs per layer */
                    assert_int_equal(p.nops, 1 + 5 * L);
                    assert_non_null(p.note);
                }
                ao_qplan_free(&p);
            }
    }
}

/* The variables in effect, and which of them appeared since the user's
 * snapshot (the CUDA backend sets CUDA_DEVICE_MAX_CONNECTIONS unless set). */
static void test_env(void **state)
{
    (void)state;
    unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
    setenv("GPU_MAX_HW_QUEUES", "2", 1);
    setenv("HSA_TEST_QUEUES_VAR", "x", 1);
    unsigned mask = ao_qenv_user_mask();
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);
    ao_qenv e;
    ao_qenv_effective(mask, &e);
    int conns = -1, hw = -1, hsa = -1;
    for (int i = 0; i < e.n; i++) {
        if (strcmp(e.names[i], "CUDA_DEVICE_MAX_CONNECTIONS") == 0) conns = i;
        if (strcmp(e.names[i], "GPU_MAX_HW_QUEUES") == 0) hw = i;
        if (strcmp(e.names[i], "HSA_TEST_QUEUES_VAR") == 0) hsa = i;
    }
    assert_true(conns >= 0 && hw >= 0 && hsa >= 0);
    assert_string_equal(e.values[conns], "32");
    assert_string_equal(e.values[hw], "2");
    assert_int_equal(e.nset, 1);
    assert_string_equal(e.set_by_aorta[0], "CUDA_DEVICE_MAX_CONNECTIONS");
    ao_qenv_free(&e);
    unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
    unsetenv("GPU_MAX_HW_QUEUES");
    unsetenv("HSA_TEST_QUEUES_VAR");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_union_two_streams),
        cmocka_unit_test(test_union_nested_and_touching),
        cmocka_unit_test(test_union_random),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_efficiency),
        cmocka_unit_test(test_parse_streams),
        cmocka_unit_test(test_plans),
        cmocka_unit_test(test_env),
        cmocka_unit_test(test_knee),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
