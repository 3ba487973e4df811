/* The §7 decomposition's source (runs/decompose.h) and the contention a
 * run's records carry (runs/contention.h), on run directories written with
 * the real writers, every number set by hand: with the kernel trace's view in
 * every baseline and kept train record the decomposition is in kernel time,
 * with one record without it in events, and summary.json says which;
 * diagnose's contention finding. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_files.h"

#include "core/error.h"
#include "core/json.h"
#include "core/jsonl.h"
#include "core/rundir.h"
#include "diagnose/diagnose.h"
#include "runs/decompose.h"
#include "runs/summary.h"
#include "timeline/contention.h"

static char *tmp;

static int setup(void **state)
{
    (void)state;
    tmp = make_temp_dir();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    remove_temp_dir(tmp);
    return 0;
}

/* step, compute, comm of one view of a record */
typedef struct view {
    double step, compute, comm;
} view;

typedef struct extra_ctx {
    ao_overlap k;
    int kernels; /* write overlap_kernels */
    const ao_contention_step *cs;
} extra_ctx;

static int gen_extra(void *vctx, yajl_gen g)
{
    const extra_ctx *x = vctx;
    if (x->kernels) {
        if (ao_json_gen_str(g, "overlap_kernels") != yajl_gen_status_ok) return -1;
        if (yajl_gen_map_open(g) != yajl_gen_status_ok) return -1;
        if (ao_overlap_gen_fields(g, &x->k, 0) != yajl_gen_status_ok) return -1;
        if (yajl_gen_map_close(g) != yajl_gen_status_ok) return -1;
    }
    if (x->cs && ao_contention_step_gen(g, x->cs) != yajl_gen_status_ok) return -1;
    return 0;
}

static ao_overlap overlap_of(view v)
{
    ao_overlap m;
    memset(&m, 0, sizeof m);
    m.step_ms = v.step;
    m.compute_ms = v.compute;
    m.comm_ms = v.comm;
    m.overlap_ms = m.exposed_comm_ms = m.idle_ms = 0;
    m.host_wait_ms = m.first_issue_us = NAN;
    m.overlap_ratio = m.compute_covered_ratio = m.overlap_efficiency = NAN;
    return m;
}

/* Events: compute-only 39 ms of compute, comm-only 11 ms of communication,
 * train steps 45 ms with 44 of compute and 11.5 of communication. Kernels:
 * 40, 8; 44, 43, 8.5. Two warm-up steps, three of each baseline, five kept
 * steps whose contention is 1, 2, 3, 4, 5 ms, "gemm" 0.5 ms of each. With
 * no_kernels_at >= 0, that record has no kernel view. */
static char *write_run(const char *name, int ranks, int no_kernels_at)
{
    char *dir = ao_asprintf("%s/%s", tmp, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    char *path = ao_asprintf("%s/%s", dir, AO_RUN_JSON);
    char *argv[] = {"aorta", "train", NULL};
    char *envp[] = {"HOME=/root", NULL};
    ao_run_header h = {.run_id = name,
                       .command = "train",
                       .argc = 2,
                       .argv = argv,
                       .host = "synthetic",
                       .world_size = ranks,
                       .envp = envp};
    assert_int_equal(ao_run_json_write(path, &h), 0);
    free(path);
    static const char *const phases[] = {
        "train",     "train",     "compute_only", "compute_only", "compute_only",
        "comm_only", "comm_only", "comm_only",    "train",        "train",
        "train",     "train",     "train"};
    const view ev[] = {{39, 39, 0}, {11, 0, 11}, {45, 44, 11.5}};
    const view kv[] = {{40, 40, 0}, {8, 0, 8}, {44, 43, 8.5}};
    for (int r = 0; r < ranks; r++) {
        char *file = ao_rank_file_name(r, ranks, AO_RANK_METRICS);
        path = ao_asprintf("%s/%s", dir, file);
        free(file);
        ao_jsonl_writer *w = ao_jsonl_open(path, 1);
        free(path);
        assert_non_null(w);
        double t = 0;
        for (int i = 0; i < 13; i++) {
            int kind = strcmp(phases[i], "compute_only") == 0 ? 0
                       : strcmp(phases[i], "comm_only") == 0  ? 1
                                                              : 2;
            ao_iter_record rec;
            ao_iter_record_init(&rec);
            rec.rank = r;
            rec.world_size = ranks;
            rec.step = i < 2 ? i : i < 8 ? 2 : i - 6;
            rec.phase = phases[i];
            rec.m = overlap_of(ev[kind]);
            rec.m.window_start_us = t;
            rec.m.window_end_us = t + 1000 * ev[kind].step;
            rec.wall_time = 1.7e9 + t * 1e-6;
            t = rec.m.window_end_us + 100;
            ao_contention_step cs;
            memset(&cs, 0, sizeof cs);
            cs.ms = i - 7; /* 1..5 on the kept steps */
            cs.beside_ms = 10;
            cs.unpriced_ms = 0.25;
            cs.beside = 20;
            cs.priced = 18;
            cs.ntop = 1;
            cs.top[0] = (ao_contention_item){.name = "gemm",
                                             .beside = 4,
                                             .priced = 4,
                                             .alone = 12,
                                             .beside_us = 250,
                                             .alone_us = 125,
                                             .excess_ms = 0.5};
            extra_ctx x = {overlap_of(kv[kind]), i != no_kernels_at, kind == 2 ? &cs : NULL};
            rec.extra = gen_extra;
            rec.extra_ctx = &x;
            assert_int_equal(ao_jsonl_append(w, &rec), 0);
        }
        assert_int_equal(ao_jsonl_close(w), 0);
    }
    return dir;
}

static void test_kernel_time_when_traced(void **state)
{
    (void)state;
    char *dir = write_run("traced", 2, -1);
    ao_run_data run;
    assert_int_equal(ao_run_load(dir, 2, &run), 0);
    ao_decomp x;
    ao_decomp_of(&run, 1, -1, &x);
    assert_true(x.have && x.kernels);
    assert_int_equal(x.ncompute_only, 6);
    assert_true(x.d.compute_isolated_ms == 40 && x.d.comm_isolated_ms == 8);
    assert_true(x.step_ms == 44 && x.compute_ms == 43 && x.comm_ms == 8.5);
    assert_true(x.d.ideal_ms == 40 && x.d.serial_ms == 48);
    assert_true(x.d.achieved == 0.5);    /* (48 - 44) / (48 - 40) */
    assert_true(x.d.contention_ms == 3); /* 43 - 40 */
    assert_true(x.d.comm_slowdown == 8.5 / 8);
    assert_true(x.gap_ms == 4);
    assert_true(x.compute_only_step_ms == 40 && x.comm_only_step_ms == 8);
    assert_null(x.flag);
    assert_true(x.events_ms[AO_DECOMP_CHECK_COMPUTE_ONLY] == 39);
    assert_true(x.kernels_ms[AO_DECOMP_CHECK_COMPUTE_ONLY] == 40);
    assert_true(x.events_ms[AO_DECOMP_CHECK_COMM_ONLY] == 11);
    assert_true(x.kernels_ms[AO_DECOMP_CHECK_COMM_ONLY] == 8);
    assert_true(x.events_ms[AO_DECOMP_CHECK_COMPUTE] == 44);
    assert_true(x.kernels_ms[AO_DECOMP_CHECK_COMM] == 8.5);
    /* one rank's own: the same numbers here */
    ao_decomp one;
    ao_decomp_of(&run, 1, 1, &one);
    assert_true(one.kernels && one.ncompute_only == 3 && one.d.achieved == 0.5);

    /* the contention each kept record carries: median 3 of 1..5 per rank,
     * the evidence summed over the five records */
    ao_summary s;
    assert_int_equal(ao_summary_build("t", &run, 1, &s), 0);
    int m = ao_metric_find("contention_ms");
    assert_true(m >= 0);
    assert_true(s.metrics[m].rank_median[0] == 3 && s.metrics[m].rank_median[1] == 3);
    const ao_contention_evidence *e = &run.ranks[0].contention;
    assert_int_equal(e->steps, 5);
    assert_true(e->beside_ms == 50 && e->unpriced_ms == 1.25);
    assert_int_equal(e->n, 1);
    assert_string_equal(e->k[0].name, "gemm");
    assert_true(e->k[0].beside == 20 && e->k[0].priced == 20 && e->k[0].alone == 12);
    assert_true(e->k[0].beside_us == 5000 && e->k[0].alone_us == 2500);
    assert_true(e->k[0].excess_ms == 2.5);

    /* summary.json says which source, and shows both */
    char *sp = ao_asprintf("%s/summary.json", dir);
    assert_int_equal(ao_summary_write(sp, &s), 0);
    char err[256];
    yajl_val doc = ao_json_read_file(sp, err, sizeof err);
    assert_non_null(doc);
    yajl_val sum = ao_json_member(doc, "summary");
    yajl_val d = ao_json_member(sum, "decomposition");
    assert_string_equal(YAJL_GET_STRING(ao_json_member(d, "source")), "kernels");
    assert_true(ao_json_number(ao_json_member(d, "achieved")) == 0.5);
    yajl_val chk = ao_json_member(ao_json_member(d, "events_vs_kernels"), "comm_only_comm_ms");
    assert_true(ao_json_number(ao_json_member(chk, "events")) == 11);
    assert_true(ao_json_number(ao_json_member(chk, "kernels")) == 8);
    yajl_val c = ao_json_member(sum, "contention");
    assert_true(YAJL_IS_ARRAY(c) && c->u.array.len == 2);
    yajl_val c1 = c->u.array.values[1];
    assert_true(ao_json_number(ao_json_member(c1, "rank")) == 1);
    assert_true(ao_json_number(ao_json_member(c1, "ms_median")) == 3);
    yajl_val ks = ao_json_member(ao_json_member(c1, "evidence"), "kernels");
    assert_true(YAJL_IS_ARRAY(ks) && ks->u.array.len == 1);
    assert_true(ao_json_number(ao_json_member(ks->u.array.values[0], "ms_per_step")) == 0.5);
    assert_true(ao_json_number(ao_json_member(ks->u.array.values[0], "beside_per_step")) == 4);
    assert_true(ao_json_number(ao_json_member(ks->u.array.values[0], "alone_us")) == 125);
    yajl_tree_free(doc);
    free(sp);

    /* the table names the source and the baselines' disagreement */
    char *tp = ao_asprintf("%s/table.txt", tmp);
    FILE *f = fopen(tp, "w");
    assert_non_null(f);
    ao_summary_print(f, &s);
    fclose(f);
    char *text = slurp(tp, NULL);
    assert_non_null(strstr(text, "decomposition (kernel time (profiling.kernel_trace))"));
    assert_non_null(strstr(text, "comm-only comm 11.000 vs 8.000 ms (+37.5 %)"));
    assert_non_null(strstr(text, "rank 0 3.000, rank 1 3.000"));
    free(text);
    free(tp);

    /* diagnose: 3 ms a step of a 45 ms step (6.7 %) is a finding */
    ao_diagnosis dg;
    ao_diagnose_run(&run, &dg);
    const ao_finding *fd = NULL;
    for (size_t i = 0; i < dg.nfindings; i++)
        if (dg.findings[i].kind == AO_FIND_CONTENTION) fd = &dg.findings[i];
    assert_non_null(fd);
    assert_string_equal(ao_finding_id(fd->kind), "contention");
    assert_true(fd->ms == 3);
    assert_non_null(strstr(fd->where, "10 ms of compute kernels a step ran beside a collective"));
    assert_non_null(strstr(fd->evidence, "gemm: 4 a step beside, 250 us against 125 us alone"));
    assert_non_null(strstr(fd->evidence, "the decomposition (kernel time)"));
    assert_non_null(strstr(fd->knobs, "distributed.nccl.max_ctas"));
    assert_non_null(strstr(fd->knobs, "bench/multigpu.sh sweep"));
    assert_int_equal(dg.bound, AO_BOUND_COMPUTE); /* under 10 %: it does not bound the step */
    ao_diagnosis_free(&dg);
    ao_summary_free(&s);
    ao_run_free(&run);
    free(dir);
}

/* One baseline record without the kernel view: the events, said so. */
static void test_events_otherwise(void **state)
{
    (void)state;
    char *dir = write_run("partial", 1, 6);
    ao_run_data run;
    assert_int_equal(ao_run_load(dir, 2, &run), 0);
    ao_decomp x;
    ao_decomp_of(&run, 1, -1, &x);
    assert_true(x.have && !x.kernels);
    assert_string_equal(ao_decomp_source(&x), "events");
    assert_true(x.d.compute_isolated_ms == 39 && x.d.comm_isolated_ms == 11);
    assert_true(x.step_ms == 45 && x.d.contention_ms == 5);
    assert_true(x.d.achieved == 5.0 / 11); /* (50 - 45) / (50 - 39) */
    ao_diagnosis dg;
    ao_diagnose_run(&run, &dg);
    int said = 0;
    for (size_t i = 0; i < dg.nlimits; i++)
        said |= strcmp(dg.limits[i].id, "decomposition_events") == 0;
    assert_true(said);
    ao_diagnosis_free(&dg);
    ao_run_free(&run);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_time_when_traced),
        cmocka_unit_test(test_events_otherwise),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
