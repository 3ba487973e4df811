#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/json.h"
#include "core/rundir.h"
#include "core/text.h"

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

int ao_rundir_make_id(char *buf, size_t n)
{
    char host[256] = "host";
    if (gethostname(host, sizeof host) != 0 || host[0] == '\0') strcpy(host, "host");
    host[sizeof host - 1] = '\0';
    /* The short name: the domain adds length, not identity, on a cluster. */
    char *dot = strchr(host, '.');
    if (dot && dot != host) *dot = '\0';
    host[48] = '\0';
    for (char *p = host; *p; p++)
        if (!is_name_char(*p)) *p = '-';

    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    int len = snprintf(buf, n, "%s-%s-%ld", stamp, host, (long)getpid());
    return (len < 0 || (size_t)len >= n) ? -1 : 0;
}

int ao_rundir_validate_name(const char *name, const char *what)
{
    int rc = ao_check_plain_name(name, AO_RUN_NAME_MAX, what, "run name");
    if (rc == 0 && strcmp(name, AO_RUN_LATEST) == 0) {
        ao_error(what, "\"latest\" is reserved for the link to the newest run");
        rc = AO_EXIT_USAGE;
    }
    if (rc)
        ao_hint("a run name is a plain file name: letters, digits, '.', '-', '_' (at most %d "
                "characters)",
                AO_RUN_NAME_MAX);
    return rc;
}

FILE *ao_open_input_file(const char *path, const char *kind)
{
    int fd = ao_open_input(path, kind);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (fd >= 0 && !f) {
        ao_error(path, "cannot read the %s: %s", kind, strerror(errno));
        close(fd);
    }
    return f;
}

int ao_path_within(const char *dir, const char *path)
{
    char *d = realpath(dir, NULL), *p = realpath(path, NULL);
    size_t n = d ? strlen(d) : 0;
    /* "/" resolves to "/": every other path is inside it */
    int in =
        d && p && strncmp(p, d, n) == 0 && (p[n] == '/' || (n == 1 && p[1])) && strcmp(p, d) != 0;
    free(d);
    free(p);
    return in;
}

static int check_output(const char *flag, const char *path, int mkdirs)
{
    struct stat st;
    if (!*path) {
        ao_error(flag, "an empty file name");
        return AO_EXIT_USAGE;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        ao_error(flag, "%s is a directory; give a file name", path);
        return AO_EXIT_USAGE;
    }
    const char *slash = strrchr(path, '/');
    char *dir =
        slash ? ao_asprintf("%.*s", (int)(slash - path) + (slash == path), path) : ao_strdup(".");
    /* A command that makes the directories: the nearest one there is. */
    while (mkdirs && stat(dir, &st) != 0 && errno == ENOENT && strchr(dir, '/')) {
        char *up = strrchr(dir, '/');
        if (up == dir)
            up[1] = '\0';
        else
            *up = '\0';
    }
    if (mkdirs && stat(dir, &st) != 0 && errno == ENOENT) strcpy(dir, ".");
    int rc = 0;
    if (stat(dir, &st) != 0) {
        ao_error(flag, "%s: the directory %s does not exist", path, dir);
        rc = AO_EXIT_USAGE;
    } else if (!S_ISDIR(st.st_mode)) {
        ao_error(flag, "%s: %s is not a directory", path, dir);
        rc = AO_EXIT_USAGE;
    } else if (access(dir, W_OK | X_OK) != 0) {
        ao_error(flag, "%s: cannot write in %s: %s", path, dir, strerror(errno));
        rc = AO_EXIT_USAGE;
    }
    free(dir);
    return rc;
}

int ao_check_output_file(const char *flag, const char *path)
{
    return check_output(flag, path, 0);
}

int ao_check_output_path(const char *flag, const char *path)
{
    return check_output(flag, path, 1);
}

/* mkdir -p: every missing component of `dir`. */
static int make_dirs(const char *dir)
{
    char *p = ao_strdup(dir);
    int rc = 0;
    for (char *s = p + 1; *s && rc == 0; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) rc = -1;
        *s = '/';
    }
    if (rc == 0 && mkdir(p, 0777) != 0 && errno != EEXIST) rc = -1;
    int err = errno;
    free(p);
    errno = err;
    return rc;
}

static void fill(ao_rundir *out, const char *output_dir, const char *run_id)
{
    out->output_dir = ao_strdup(output_dir);
    out->run_id = ao_strdup(run_id);
    out->path = ao_asprintf("%s/%s", output_dir, run_id);
}

int ao_rundir_create(const char *output_dir, const char *run_id, ao_rundir *out)
{
    memset(out, 0, sizeof *out);
    if (ao_rundir_validate_name(run_id, "run id")) return AO_EXIT_USAGE;
    if (make_dirs(output_dir) != 0) {
        ao_error(output_dir, "cannot create the output directory: %s", strerror(errno));
        return errno == ENOTDIR || errno == EEXIST ? AO_EXIT_USAGE : AO_EXIT_FAIL;
    }
    struct stat st;
    if (stat(output_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        ao_error(output_dir, "the output directory is not a directory");
        return AO_EXIT_USAGE;
    }
    char *path = ao_asprintf("%s/%s", output_dir, run_id);
    if (mkdir(path, 0777) != 0) {
        int err = errno;
        if (err == EEXIST) {
            ao_error(path, "the run directory already exists; aorta never adds to an older run");
            ao_hint("give another --run-name, or remove the old run");
        } else {
            ao_error(path, "cannot create the run directory: %s", strerror(err));
        }
        free(path);
        return err == EEXIST ? AO_EXIT_USAGE : AO_EXIT_FAIL;
    }
    free(path);
    fill(out, output_dir, run_id);
    ao_rundir_update_latest(output_dir, run_id);
    return 0;
}

int ao_rundir_join(const char *output_dir, const char *run_id, double timeout_s, ao_rundir *out)
{
    memset(out, 0, sizeof *out);
    if (ao_rundir_validate_name(run_id, AO_RUN_ID_ENV)) return AO_EXIT_USAGE;
    char *path = ao_asprintf("%s/%s", output_dir, run_id);
    struct timespec t0, now, nap = {0, 20 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double waited =
            (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
        if (waited >= timeout_s) {
            ao_error(path, "the run directory did not appear within %.1f s", timeout_s);
            ao_hint("rank 0 creates it; check rank 0's output and that every rank sees the "
                    "same output_dir");
            free(path);
            return AO_EXIT_FAIL;
        }
        nanosleep(&nap, NULL);
    }
    free(path);
    fill(out, output_dir, run_id);
    return 0;
}

int ao_rundir_open(const char *output_dir, const char *run_id, int rank, double timeout_s,
                   ao_rundir *out)
{
    if (rank == 0) return ao_rundir_create(output_dir, run_id, out);
    return ao_rundir_join(output_dir, run_id, timeout_s, out);
}

void ao_rundir_free(ao_rundir *d)
{
    free(d->output_dir);
    free(d->run_id);
    free(d->path);
    memset(d, 0, sizeof *d);
}

int ao_rundir_update_latest(const char *output_dir, const char *run_id)
{
    char *tmp = ao_asprintf("%s/.%s.tmp.%ld", output_dir, AO_RUN_LATEST, (long)getpid());
    char *latest = ao_asprintf("%s/%s", output_dir, AO_RUN_LATEST);
    unlink(tmp);
    int rc = 0;
    /* Relative, so the output directory can be moved or mounted elsewhere. */
    if (symlink(run_id, tmp) != 0 || rename(tmp, latest) != 0) {
        ao_warn("%s: cannot point it at %s: %s", latest, run_id, strerror(errno));
        unlink(tmp);
        rc = -1;
    }
    free(tmp);
    free(latest);
    return rc;
}

char *ao_rundir_file(const ao_rundir *d, const char *name)
{
    return ao_asprintf("%s/%s", d->path, name);
}

char *ao_rank_file_name(int rank, int world_size, const char *suffix)
{
    int width = 1;
    for (int top = world_size - 1; top >= 10; top /= 10) width++;
    if (width < 2) width = 2;
    return ao_asprintf("rank_%0*d%s", width, rank, suffix);
}

char *ao_rundir_rank_path(const ao_rundir *d, int rank, int world_size, const char *suffix)
{
    char *name = ao_rank_file_name(rank, world_size, suffix);
    char *path = ao_rundir_file(d, name);
    free(name);
    return path;
}

/* Its files, then the directory (a staging directory holds no subdirectory). */
static void remove_stage(const char *path)
{
    DIR *dir = opendir(path);
    if (dir) {
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char *f = ao_asprintf("%s/%s", path, e->d_name);
            unlink(f);
            free(f);
        }
        closedir(dir);
    }
    rmdir(path);
}

/* The staging directory not yet committed or abandoned: an exit on the way
 * (ao_fatal: out of memory) removes it too. One a process (analyze stages
 * one run); process-wide because exit() is. */
static char *pending_stage;

static void remove_pending_stage(void)
{
    if (!pending_stage) return;
    remove_stage(pending_stage);
    free(pending_stage);
    pending_stage = NULL;
}

static void set_pending_stage(const char *path)
{
    static int registered;
    if (!registered) registered = atexit(remove_pending_stage) == 0;
    free(pending_stage);
    pending_stage = path ? ao_strdup(path) : NULL;
}

int ao_rundir_create_staged(const char *output_dir, const char *run_id, ao_rundir *out)
{
    memset(out, 0, sizeof *out);
    if (ao_rundir_validate_name(run_id, "run id")) return AO_EXIT_USAGE;
    if (make_dirs(output_dir) != 0) {
        ao_error(output_dir, "cannot create the output directory: %s", strerror(errno));
        return errno == ENOTDIR || errno == EEXIST ? AO_EXIT_USAGE : AO_EXIT_FAIL;
    }
    char *final = ao_asprintf("%s/%s", output_dir, run_id);
    struct stat st;
    int exists = lstat(final, &st) == 0;
    free(final);
    if (exists) {
        ao_error(output_dir,
                 "the run directory %s already exists; aorta never adds to an older run", run_id);
        ao_hint("give another --run-name, or remove the old run");
        return AO_EXIT_USAGE;
    }
    char *tmp = ao_asprintf(".%s.partial-%ld", run_id, (long)getpid());
    char *path = ao_asprintf("%s/%s", output_dir, tmp);
    free(tmp);
    if (mkdir(path, 0777) != 0) {
        ao_error(path, "cannot create the staging directory: %s", strerror(errno));
        free(path);
        return AO_EXIT_FAIL;
    }
    out->output_dir = ao_strdup(output_dir);
    out->run_id = ao_strdup(run_id);
    out->path = path;
    set_pending_stage(path);
    return 0;
}

int ao_rundir_commit(ao_rundir *d)
{
    char *final = ao_asprintf("%s/%s", d->output_dir, d->run_id);
    /* RENAME_NOREPLACE: a directory made meanwhile is never replaced or merged. */
    if (renameat2(AT_FDCWD, d->path, AT_FDCWD, final, RENAME_NOREPLACE) != 0) {
        int err = errno;
        ao_error(final, "cannot move the finished run into place: %s", strerror(err));
        free(final);
        ao_rundir_abandon(d);
        return err == EEXIST ? AO_EXIT_USAGE : AO_EXIT_FAIL;
    }
    set_pending_stage(NULL);
    free(d->path);
    d->path = final;
    ao_rundir_update_latest(d->output_dir, d->run_id);
    return 0;
}

void ao_rundir_abandon(ao_rundir *d)
{
    if (!d->path) return;
    remove_stage(d->path);
    set_pending_stage(NULL);
}
