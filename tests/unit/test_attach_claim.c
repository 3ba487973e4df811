/* attach/claim.h: which files each attached process writes, whatever the
 * launcher. Processes are played in one test process (each with its own
 * pid in ao_attach_who), in the order a launcher would run them; the info
 * files are attach/info.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "attach/claim.h"
#include "attach/gather.h"
#include "attach/info.h"
#include "core/error.h"
#include "core/json.h"
#include "test_files.h"

/* One simulated process: who it is, its info, its claim and writer. */
typedef struct proc {
    ao_attach_info info;
    ao_jsonl_writer *w;
    char *warned; /* what the claim printed */
} proc;

static ao_attach_who ranked(int pid, int rank, int world)
{
    return (ao_attach_who){pid, 1, rank, world, "torchrun"};
}

static ao_attach_who unranked(int pid)
{
    return (ao_attach_who){pid, 0, 0, 1, "none"};
}

static void claim(proc *p, const char *dir, ao_attach_who who)
{
    ao_attach_info_init(&p->info, dir, &who);
    stderr_capture c;
    capture_begin(&c);
    p->w = ao_attach_claim_files(dir, &who, &p->info.claim, ao_attach_info_write, &p->info);
    p->warned = capture_end(&c);
    assert_non_null(p->w);
}

static void finish(proc *p)
{
    static const ao_steps_stats ended = {0};
    p->info.stats = &ended; /* "finished": true */
    assert_int_equal(
        ao_attach_claim_finish(p->info.dir, &p->info.claim, ao_attach_info_write, &p->info), 0);
    ao_jsonl_close(p->w);
    p->w = NULL;
    free(p->warned);
}

static void append_step(proc *p, long long step)
{
    ao_iter_record r;
    ao_iter_record_init(&r);
    r.rank = p->info.claim.rank;
    r.world_size = p->info.claim.world_size;
    r.step = step;
    assert_int_equal(ao_jsonl_append(p->w, &r), 0);
}

static int file_exists(const char *dir, const char *name)
{
    char *p = ao_asprintf("%s/%s", dir, name);
    struct stat st;
    int yes = stat(p, &st) == 0;
    free(p);
    return yes;
}

static long long lines_of(const char *dir, const char *name)
{
    char *p = ao_asprintf("%s/%s", dir, name);
    char *t = slurp(p, NULL);
    free(p);
    if (!t) return -1;
    long long n = 0;
    for (const char *c = t; *c; c++) n += *c == '\n';
    free(t);
    return n;
}

/* The info file's integer member (INT64_MIN: null; fails when absent). */
static long long info_int(const char *dir, const char *stem, const char *key)
{
    char *p = ao_asprintf("%s/%s_attach.json", dir, stem);
    char err[256];
    yajl_val v = ao_json_read_file(p, err, sizeof err);
    free(p);
    if (!v) fail_msg("%s", err);
    yajl_val m = ao_json_member(v, key);
    if (!m) fail_msg("%s_attach.json has no %s", stem, key);
    long long out = YAJL_IS_INTEGER(m) ? YAJL_GET_INTEGER(m) : YAJL_IS_TRUE(m) ? 1 : INT64_MIN;
    if (YAJL_IS_FALSE(m)) out = 0;
    yajl_tree_free(v);
    return out;
}

/* torchrun, aorta train, mpirun, srun: each rank its own rank file. */
static void test_launcher_ranks(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    proc a, b;
    claim(&a, dir, ranked(101, 0, 2));
    claim(&b, dir, ranked(102, 1, 2));
    assert_string_equal(a.info.claim.stem, "rank_00");
    assert_string_equal(b.info.claim.stem, "rank_01");
    assert_string_equal(a.warned, "");
    assert_int_equal(a.info.claim.provisional, 0);
    assert_int_equal(info_int(dir, "rank_00", "pid"), 101);
    assert_int_equal(info_int(dir, "rank_01", "rank"), 1);
    assert_int_equal(info_int(dir, "rank_01", "finished"), 0);
    finish(&a);
    finish(&b);
    assert_string_equal(a.info.claim.stem, "rank_00");
    remove_temp_dir(dir);
}

/* The launcher's own process did GPU work first (no launcher variables):
 * it holds rank 0 of 1 until the real rank 0 comes, which moves its files
 * to pid_N_*; its lines written after that follow the file. */
static void test_parent_then_rank0(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    proc parent, r0, r1;
    claim(&parent, dir, unranked(200));
    assert_string_equal(parent.info.claim.stem, "rank_00");
    assert_int_equal(parent.info.claim.provisional, 1);
    append_step(&parent, 0);
    claim(&r0, dir, ranked(201, 0, 2));
    claim(&r1, dir, ranked(202, 1, 2));
    assert_string_equal(r0.info.claim.stem, "rank_00");
    assert_string_equal(r1.info.claim.stem, "rank_01");
    assert_contains(r0.warned, "pid 200 did GPU work without launcher variables");
    assert_contains(r0.warned, "pid_200_*");
    assert_true(file_exists(dir, "pid_200_metrics.jsonl"));
    assert_int_equal(info_int(dir, "pid_200", "pid"), 200);
    assert_int_equal(info_int(dir, "rank_00", "pid"), 201);
    append_step(&parent, 1);
    append_step(&r0, 0);
    finish(&parent);
    assert_string_equal(parent.info.claim.stem, "pid_200");
    assert_string_equal(parent.info.claim.note, AO_ATTACH_NOTE_MOVED);
    assert_int_equal(info_int(dir, "pid_200", "rank"), INT64_MIN);
    assert_int_equal(lines_of(dir, "pid_200_metrics.jsonl"), 2);
    assert_int_equal(lines_of(dir, "rank_00_metrics.jsonl"), 1);
    finish(&r0);
    finish(&r1);
    assert_int_equal(info_int(dir, "rank_00", "pid"), 201);
    remove_temp_dir(dir);
}

/* The parent's GPU work came after rank 0 claimed: pid-named at once. */
static void test_rank0_then_parent(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    proc r0, parent;
    claim(&r0, dir, ranked(301, 0, 2));
    claim(&parent, dir, unranked(300));
    assert_string_equal(parent.info.claim.stem, "pid_300");
    assert_contains(parent.info.claim.note, "rank 0's files are pid 301's");
    assert_contains(parent.warned, "pid_300_metrics.jsonl");
    finish(&parent);
    finish(&r0);
    assert_string_equal(parent.info.claim.stem, "pid_300");
    assert_int_equal(info_int(dir, "rank_00", "pid"), 301);
    remove_temp_dir(dir);
}

/* A plain multi-process program (no launcher variables): the first holds
 * rank 0 of 1 until the second comes; then every one is pid-named. */
static void test_plain_processes(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    proc a, b, c;
    claim(&a, dir, unranked(401));
    claim(&b, dir, unranked(402));
    claim(&c, dir, unranked(403));
    assert_string_equal(b.info.claim.stem, "pid_402");
    assert_string_equal(c.info.claim.stem, "pid_403");
    assert_contains(b.info.claim.note, "pid 401 did GPU work without them too");
    assert_false(file_exists(dir, "rank_00_metrics.jsonl"));
    assert_true(file_exists(dir, "pid_401_metrics.jsonl"));
    finish(&a);
    finish(&b);
    finish(&c);
    assert_string_equal(a.info.claim.stem, "pid_401");
    assert_false(file_exists(dir, "rank_00_attach.json"));
    remove_temp_dir(dir);
}

/* One process without a launcher: rank 0 of 1, as before. */
static void test_single_process(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    proc a;
    claim(&a, dir, unranked(501));
    append_step(&a, 0);
    finish(&a);
    assert_string_equal(a.info.claim.stem, "rank_00");
    assert_string_equal(a.info.claim.note, "");
    assert_int_equal(info_int(dir, "rank_00", "rank"), 0);
    assert_int_equal(info_int(dir, "rank_00", "provisional"), 1);
    assert_int_equal(lines_of(dir, "rank_00_metrics.jsonl"), 1);
    remove_temp_dir(dir);
}

/* A second process of one rank (a restarted worker): pid-named, with a note. */
static void test_duplicate_rank(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    proc a, b;
    claim(&a, dir, ranked(601, 1, 4));
    claim(&b, dir, ranked(602, 1, 4));
    assert_string_equal(b.info.claim.stem, "pid_602");
    assert_contains(b.info.claim.note, "a second process of rank 1");
    assert_contains(b.warned, "pid 602");
    finish(&b);
    finish(&a);
    assert_int_equal(info_int(dir, "pid_602", "rank"), 1); /* its rank stays known */
    assert_int_equal(info_int(dir, "rank_01", "pid"), 601);
    remove_temp_dir(dir);
}

/* Inconsistent launcher variables: rank unknown, pid-named. */
static void test_inconsistent(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    proc a;
    claim(&a, dir, (ao_attach_who){701, -1, 0, 1, "inconsistent"});
    assert_string_equal(a.info.claim.stem, "pid_701");
    assert_contains(a.info.claim.note, "inconsistent");
    finish(&a);
    assert_int_equal(info_int(dir, "pid_701", "rank"), INT64_MIN);
    remove_temp_dir(dir);
}

/* Rank 0 of a world past 100 has rank_000: a provisional rank_00 still
 * makes way for it. */
static void test_wide_world(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    proc parent, r0;
    claim(&parent, dir, unranked(800));
    claim(&r0, dir, ranked(801, 0, 128));
    assert_string_equal(r0.info.claim.stem, "rank_000");
    assert_false(file_exists(dir, "rank_00_metrics.jsonl"));
    finish(&parent);
    finish(&r0);
    assert_string_equal(parent.info.claim.stem, "pid_800");
    remove_temp_dir(dir);
}

/* The parent's gathering: every process by rank then pid, the pid-named
 * one's rank unknown with its note, and notes for what is missing. */
static void test_gather(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    proc parent, r0, r2, late;
    claim(&parent, dir, unranked(900));
    append_step(&parent, 0);
    claim(&r2, dir, ranked(902, 2, 3));
    claim(&r0, dir, ranked(901, 0, 3));
    claim(&late, dir, ranked(903, 2, 3)); /* dies: never finishes */
    append_step(&r0, 0);
    append_step(&r0, 1);
    append_step(&late, 0);
    finish(&parent);
    finish(&r0);
    finish(&r2);
    ao_jsonl_close(late.w);
    free(late.warned);
    ao_attach_gathered g;
    stderr_capture c;
    capture_begin(&c);
    ao_attach_gather(dir, &g);
    char *text = capture_end(&c);
    assert_int_equal(g.nranks, 2);
    assert_int_equal(g.npids, 2);
    assert_int_equal(g.world_size, 3);
    assert_int_equal(g.min_lines, 0);
    assert_string_equal(g.used, "none"); /* no steps were cut: the info files say so */
    assert_contains(text, "pid 900 wrote pid_900_metrics.jsonl (1 step): no launcher variables");
    assert_contains(text, "pid 903 wrote pid_903_metrics.jsonl (1 step): rank 2's files");
    assert_contains(text, "pid 903 (pid_903) did not finish");
    assert_contains(text, "1 of 3 ranks have no rank files (1)");
    free(text);
    char err[256];
    yajl_val v = yajl_tree_parse(g.processes, err, sizeof err);
    assert_non_null(v);
    assert_true(YAJL_IS_ARRAY(v) && v->u.array.len == 4);
    const int pids[] = {901, 902, 900, 903}, ranks_[] = {0, 2, -1, 2}, steps[] = {2, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        yajl_val e = v->u.array.values[i];
        assert_int_equal(YAJL_GET_INTEGER(ao_json_member(e, "pid")), pids[i]);
        yajl_val r = ao_json_member(e, "rank");
        if (ranks_[i] < 0)
            assert_true(YAJL_IS_NULL(r));
        else
            assert_int_equal(YAJL_GET_INTEGER(r), ranks_[i]);
        assert_int_equal(YAJL_GET_INTEGER(ao_json_member(e, "steps")), steps[i]);
        assert_int_equal(YAJL_IS_TRUE(ao_json_member(e, "finished")), i != 3);
        assert_true(YAJL_IS_OBJECT(ao_json_member(e, "info")));
    }
    assert_string_equal(YAJL_GET_STRING(ao_json_member(v->u.array.values[2], "note")),
                        AO_ATTACH_NOTE_MOVED);
    yajl_tree_free(v);
    ao_attach_gathered_free(&g);
    remove_temp_dir(dir);
}

/* A run directory that cannot be written: NULL and a warning, no crash. */
static void test_unwritable(void **state)
{
    (void)state;
    ao_attach_who who = ranked(901, 0, 1);
    ao_attach_info info;
    ao_attach_info_init(&info, "/nonexistent/aorta/run", &who);
    stderr_capture c;
    capture_begin(&c);
    ao_jsonl_writer *w = ao_attach_claim_files("/nonexistent/aorta/run", &who, &info.claim,
                                               ao_attach_info_write, &info);
    char *text = capture_end(&c);
    assert_null(w);
    assert_string_equal(info.claim.stem, "");
    assert_contains(text, ".attach.lock");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launcher_ranks),
        cmocka_unit_test(test_parent_then_rank0),
        cmocka_unit_test(test_rank0_then_parent),
        cmocka_unit_test(test_plain_processes),
        cmocka_unit_test(test_single_process),
        cmocka_unit_test(test_duplicate_rank),
        cmocka_unit_test(test_inconsistent),
        cmocka_unit_test(test_wide_world),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_unwritable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
