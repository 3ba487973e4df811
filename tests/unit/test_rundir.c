/* core/rundir: run ids and names, creating a run directory that is never
 * reused, the `latest` link, joining ranks, and the paths of a run's files. */
#include <ctype.h>
#include <errno.h>
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_files.h"

#include "core/error.h"
#include "core/rundir.h"

static void test_make_id_format(void **state)
{
    char id[AO_RUN_ID_MAX];
    time_t before = time(NULL);
    assert_int_equal(ao_rundir_make_id(id, sizeof id), 0);
    /* YYYYMMDDTHHMMSSZ-host-pid */
    assert_true(strlen(id) > 18);
    for (int i = 0; i < 15; i++) {
        if (i == 8)
            assert_int_equal(id[i], 'T');
        else
            assert_true(isdigit((unsigned char)id[i]));
    }
    assert_int_equal(id[15], 'Z');
    assert_int_equal(id[16], '-');
    struct tm tm;
    gmtime_r(&before, &tm);
    char year[16];
    snprintf(year, sizeof year, "%04d", tm.tm_year + 1900);
    assert_memory_equal(id, year, 4);

    char pid[32];
    snprintf(pid, sizeof pid, "-%ld", (long)getpid());
    size_t n = strlen(id), p = strlen(pid);
    assert_string_equal(id + n - p, pid);
    /* The host in between: a nonempty run of file-name characters. */
    assert_true(n - p > 17);
    for (size_t i = 17; i < n - p; i++)
        assert_true(isalnum((unsigned char)id[i]) || strchr("._-", id[i]));
    assert_int_equal(ao_rundir_validate_name(id, "id"), 0);

    char small[10];
    assert_int_equal(ao_rundir_make_id(small, sizeof small), -1);
}

static void test_validate_good_names(void **state)
{
    char longest[AO_RUN_NAME_MAX + 1];
    memset(longest, 'a', AO_RUN_NAME_MAX);
    longest[AO_RUN_NAME_MAX] = '\0';
    const char *good[] = {"exp1", "a.b-c_d", "...", ".hidden", "run 2", "latest2", longest};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_int_equal(ao_rundir_validate_name(good[i], "--run-name"), 0);
}

static void expect_bad(const char *name, const char *why)
{
    stderr_capture c;
    capture_begin(&c);
    int rc = ao_rundir_validate_name(name, "--run-name");
    char *err = capture_end(&c);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_contains(err, "aorta: error: --run-name: ");
    assert_contains(err, why);
    assert_contains(err, "hint: ");
    free(err);
}

static void test_validate_bad_names(void **state)
{
    char too_long[AO_RUN_NAME_MAX + 2];
    memset(too_long, 'a', AO_RUN_NAME_MAX + 1);
    too_long[AO_RUN_NAME_MAX + 1] = '\0';
    expect_bad("", "empty");
    expect_bad(".", "not run names");
    expect_bad("..", "not run names");
    expect_bad("latest", "reserved");
    expect_bad("-x", "starts with '-'");
    expect_bad("a/b", "contains '/'");
    expect_bad("/abs", "contains '/'");
    expect_bad("x/", "contains '/'");
    expect_bad(too_long, "101 characters");
    expect_bad("a\nb", "byte 0x0a at position 2");
    expect_bad("tab\t", "byte 0x09 at position 4");
    expect_bad("del\x7f", "byte 0x7f");
    expect_bad("caf\xc3\xa9", "byte 0xc3 at position 4");
}

static char *read_link(const char *path)
{
    char buf[512];
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    if (n < 0) return NULL;
    buf[n] = '\0';
    return strdup(buf);
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void test_create_with_parents_and_latest(void **state)
{
    char *tmp = make_temp_dir();
    char *out = ao_asprintf("%s/a/b/c", tmp);
    ao_rundir d1, d2;
    assert_int_equal(ao_rundir_create(out, "run1", &d1), 0);
    assert_true(is_dir(d1.path));
    char *want = ao_asprintf("%s/run1", out);
    assert_string_equal(d1.path, want);
    assert_string_equal(d1.run_id, "run1");
    free(want);

    char *latest = ao_asprintf("%s/latest", out);
    char *target = read_link(latest);
    assert_non_null(target);
    assert_string_equal(target, "run1"); /* relative */
    free(target);

    assert_int_equal(ao_rundir_create(out, "run2", &d2), 0);
    target = read_link(latest);
    assert_string_equal(target, "run2");
    free(target);
    /* Through the link we reach the newest run. */
    char *via = ao_asprintf("%s/latest/marker", out);
    char *marker = ao_rundir_file(&d2, "marker");
    FILE *f = fopen(marker, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(access(via, F_OK), 0);
    free(via);
    free(marker);

    /* No temporary link left behind: the directory holds exactly these. */
    DIR *dir = opendir(out);
    assert_non_null(dir);
    int entries = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        entries++;
        assert_true(strcmp(e->d_name, "run1") == 0 || strcmp(e->d_name, "run2") == 0 ||
                    strcmp(e->d_name, "latest") == 0);
    }
    closedir(dir);
    assert_int_equal(entries, 3);

    free(latest);
    ao_rundir_free(&d1);
    ao_rundir_free(&d2);
    free(out);
    remove_temp_dir(tmp);
}

static void test_never_reuses_a_run(void **state)
{
    char *tmp = make_temp_dir();
    ao_rundir d;
    assert_int_equal(ao_rundir_create(tmp, "exp", &d), 0);
    char *old = ao_rundir_file(&d, "run.json");
    FILE *f = fopen(old, "w");
    fputs("old", f);
    fclose(f);

    ao_rundir again;
    stderr_capture c;
    capture_begin(&c);
    int rc = ao_rundir_create(tmp, "exp", &again);
    char *err = capture_end(&c);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_contains(err, "/exp: the run directory already exists");
    assert_contains(err, "--run-name");
    assert_null(again.path);
    free(err);
    /* The older run is untouched. */
    char *text = slurp(old, NULL);
    assert_string_equal(text, "old");
    free(text);

    free(old);
    ao_rundir_free(&d);
    remove_temp_dir(tmp);
}

static void test_bad_output_dir_and_id(void **state)
{
    char *tmp = make_temp_dir();
    char *file = ao_asprintf("%s/plain", tmp);
    FILE *f = fopen(file, "w");
    fclose(f);
    ao_rundir d;
    stderr_capture c;
    capture_begin(&c);
    int rc = ao_rundir_create(file, "r", &d);
    char *err = capture_end(&c);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_contains(err, "plain: ");
    free(err);

    char *under = ao_asprintf("%s/plain/sub", tmp);
    capture_begin(&c);
    rc = ao_rundir_create(under, "r", &d);
    err = capture_end(&c);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_contains(err, "cannot create the output directory");
    free(err);

    capture_begin(&c);
    rc = ao_rundir_create(tmp, "../escape", &d);
    err = capture_end(&c);
    assert_int_equal(rc, AO_EXIT_USAGE);
    assert_contains(err, "contains '/'");
    free(err);

    free(under);
    free(file);
    remove_temp_dir(tmp);
}

typedef struct late_creator {
    const char *out;
    int rc;
    ao_rundir d;
} late_creator;

static void *create_later(void *arg)
{
    late_creator *lc = arg;
    struct timespec nap = {0, 150 * 1000 * 1000};
    nanosleep(&nap, NULL);
    lc->rc = ao_rundir_open(lc->out, "shared", 0, 0, &lc->d);
    return NULL;
}

static void test_ranks_join_the_creator(void **state)
{
    char *tmp = make_temp_dir();
    late_creator lc = {tmp, -1, {0}};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, create_later, &lc), 0);
    ao_rundir d;
    /* Rank 1 starts first and waits for rank 0's directory. */
    assert_int_equal(ao_rundir_open(tmp, "shared", 1, 10.0, &d), 0);
    pthread_join(t, NULL);
    assert_int_equal(lc.rc, 0);
    assert_string_equal(d.path, lc.d.path);
    ao_rundir_free(&d);
    ao_rundir_free(&lc.d);

    /* Nobody creates it: a clear failure after the timeout. */
    stderr_capture c;
    capture_begin(&c);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = ao_rundir_join(tmp, "never", 0.2, &d);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    char *err = capture_end(&c);
    assert_int_equal(rc, AO_EXIT_FAIL);
    assert_contains(err, "/never: the run directory did not appear within 0.2 s");
    double waited = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    assert_true(waited >= 0.2 && waited < 60.0); /* gave up, with a margin for load */
    free(err);
    remove_temp_dir(tmp);
}

static void test_file_paths(void **state)
{
    ao_rundir d = {.output_dir = "out", .run_id = "r", .path = "out/r"};
    struct {
        int rank, world;
        const char *suffix, *want;
    } cases[] = {
        {0, 1, AO_RANK_METRICS, "out/r/rank_00_metrics.jsonl"},
        {3, 8, AO_RANK_LOG, "out/r/rank_03.log"},
        {99, 100, AO_RANK_METRICS, "out/r/rank_99_metrics.jsonl"},
        {5, 101, AO_RANK_METRICS, "out/r/rank_005_metrics.jsonl"},
        {100, 128, AO_RANK_LOG, "out/r/rank_100.log"},
        {7, 1001, AO_RANK_LOG, "out/r/rank_0007.log"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *p = ao_rundir_rank_path(&d, cases[i].rank, cases[i].world, cases[i].suffix);
        assert_string_equal(p, cases[i].want);
        free(p);
    }
    char *p = ao_rundir_file(&d, AO_RUN_JSON);
    assert_string_equal(p, "out/r/run.json");
    free(p);
    p = ao_rundir_file(&d, AO_RUN_SUMMARY);
    assert_string_equal(p, "out/r/summary.json");
    free(p);
    p = ao_rundir_file(&d, AO_RUN_TRACE);
    assert_string_equal(p, "out/r/trace.json");
    free(p);
}

/* A staging directory neither committed nor abandoned goes with the process
 * when it exits on the way (ao_fatal, e.g. out of memory), files and all. */
static void test_staged_removed_at_exit(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ao_rundir d;
        if (ao_rundir_create_staged(dir, "r", &d) != 0) _exit(3);
        char *f = ao_rundir_file(&d, AO_RUN_JSON);
        FILE *fp = fopen(f, "w");
        if (fp) fclose(fp);
        free(f);
        ao_fatal(1, "test", "an exit with the run staged");
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            fail_msg("left behind: %s", e->d_name);
    closedir(d);
    remove_temp_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_make_id_format),
        cmocka_unit_test(test_validate_good_names),
        cmocka_unit_test(test_validate_bad_names),
        cmocka_unit_test(test_create_with_parents_and_latest),
        cmocka_unit_test(test_never_reuses_a_run),
        cmocka_unit_test(test_bad_output_dir_and_id),
        cmocka_unit_test(test_ranks_join_the_creator),
        cmocka_unit_test(test_file_paths),
        cmocka_unit_test(test_staged_removed_at_exit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
