/* attach/claim.h */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach/attach.h"
#include "attach/claim.h"
#include "core/error.h"
#include "core/json.h"
#include "core/rundir.h"
#include "launch/launch.h"

void ao_attach_who_detect(ao_attach_who *w)
{
    ao_rank_info ri;
    const char *launcher = "none";
    int r = ao_launch_detect(&ri, &launcher);
    *w = (ao_attach_who){.pid = (int)getpid(),
                         .ranked = r,
                         .rank = 0,
                         .world_size = 1,
                         .launcher = r < 0 ? "inconsistent" : launcher};
    if (r == 1) {
        w->rank = ri.rank;
        w->world_size = ri.world_size;
    }
}

static char *stem_path(const char *dir, const char *stem, const char *suffix)
{
    return ao_asprintf("%s/%s%s", dir, stem, suffix);
}

static int exists(const char *dir, const char *stem)
{
    char *p = stem_path(dir, stem, AO_RANK_METRICS);
    int yes = access(p, F_OK) == 0;
    free(p);
    return yes;
}

/* The holder of stem's files, from its info file: pid (-1 when it cannot
 * be read) and whether its claim is provisional. */
static int holder(const char *dir, const char *stem, int *provisional)
{
    char *p = stem_path(dir, stem, AO_ATTACH_RANK_INFO);
    char err[256];
    yajl_val v = ao_json_read_file(p, err, sizeof err);
    free(p);
    yajl_val pid = ao_json_member(v, "pid");
    *provisional = YAJL_IS_TRUE(ao_json_member(v, "provisional"));
    int out = YAJL_IS_INTEGER(pid) ? (int)YAJL_GET_INTEGER(pid) : -1;
    yajl_tree_free(v);
    return out;
}

static void move(const char *dir, const char *from, const char *to, const char *suffix)
{
    char *a = stem_path(dir, from, suffix), *b = stem_path(dir, to, suffix);
    if (rename(a, b) != 0 && errno != ENOENT)
        ao_warn("attach: cannot move %s to %s: %s", a, b, strerror(errno));
    free(a);
    free(b);
}

/* A provisional holder of rank 0 of 1's files makes way: its files become
 * pid_N_* (its open descriptor follows the rename). */
static void move_provisional(const char *dir, int me)
{
    char *stem = ao_rank_file_name(0, 1, "");
    int prov = 0, pid = exists(dir, stem) ? holder(dir, stem, &prov) : -1;
    if (prov && pid > 0 && pid != me) {
        char to[48];
        snprintf(to, sizeof to, "pid_%d", pid);
        move(dir, stem, to, AO_RANK_METRICS);
        move(dir, stem, to, AO_ATTACH_RANK_INFO);
        ao_warn("attach: pid %d did GPU work without launcher variables and held %s's files; "
                "they are %s_* now (pid %d came)",
                pid, stem, to, me);
    }
    free(stem);
}

/* The lock file holds the pid of the first process that claimed without
 * launcher variables (0: none yet). */
static int first_unranked(int fd, int me)
{
    char buf[32] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    int first = n > 0 ? atoi(buf) : 0;
    if (first > 0) return first;
    int len = snprintf(buf, sizeof buf, "%d\n", me);
    if (pwrite(fd, buf, (size_t)len, 0) != len)
        ao_warn("attach: cannot write %s: %s", AO_ATTACH_LOCK, strerror(errno));
    return me;
}

/* Decide c's stem, rank and note (lock held). */
static void decide(const char *dir, int lock_fd, const ao_attach_who *w, ao_attach_claim *c)
{
    char *own = w->ranked == 1 ? ao_rank_file_name(w->rank, w->world_size, "")
                               : ao_rank_file_name(0, 1, "");
    c->rank = w->rank;
    c->world_size = w->world_size;
    int prov = 0;
    if (w->ranked == 1) {
        if (w->rank == 0) move_provisional(dir, w->pid);
        int pid = exists(dir, own) ? holder(dir, own, &prov) : 0;
        if (pid == 0)
            snprintf(c->stem, sizeof c->stem, "%s", own);
        else
            snprintf(c->note, sizeof c->note,
                     "rank %d's files are pid %d's (a second process of rank %d: a restarted "
                     "worker, or a child of one that used the GPU)",
                     w->rank, pid, w->rank);
    } else if (w->ranked == 0) {
        int first = first_unranked(lock_fd, w->pid);
        if (first != w->pid) {
            move_provisional(dir, w->pid);
            snprintf(c->note, sizeof c->note,
                     "no launcher variables, and pid %d did GPU work without them too: their "
                     "ranks are unknown",
                     first);
        } else {
            int pid = exists(dir, own) ? holder(dir, own, &prov) : 0;
            if (pid == 0) {
                snprintf(c->stem, sizeof c->stem, "%s", own);
                c->provisional = 1;
            } else {
                snprintf(c->note, sizeof c->note,
                         "no launcher variables, and rank 0's files are pid %d's", pid);
            }
        }
    } else {
        snprintf(c->note, sizeof c->note,
                 "its launcher variables are inconsistent (the error above): rank unknown");
    }
    if (!c->stem[0]) snprintf(c->stem, sizeof c->stem, "pid_%d", w->pid);
    free(own);
}

static int lock_dir(const char *dir)
{
    char *p = ao_asprintf("%s/%s", dir, AO_ATTACH_LOCK);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        ao_warn("attach: cannot open %s: %s", p, strerror(errno));
        free(p);
        return -1;
    }
    free(p);
    int r;
    while ((r = flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
    }
    if (r != 0) {
        ao_warn("attach: cannot lock %s/%s: %s", dir, AO_ATTACH_LOCK, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static void unlock_dir(int fd)
{
    flock(fd, LOCK_UN);
    close(fd);
}

ao_jsonl_writer *ao_attach_claim_files(const char *dir, const ao_attach_who *w, ao_attach_claim *c,
                                       ao_attach_info_fn info, void *ctx)
{
    memset(c, 0, sizeof *c);
    c->pid = w->pid;
    int fd = lock_dir(dir);
    if (fd < 0) return NULL;
    decide(dir, fd, w, c);
    char *path = stem_path(dir, c->stem, AO_RANK_METRICS);
    ao_jsonl_writer *jw = ao_jsonl_open(path, 1); /* a line per step, whole: tail -f, crashes */
    struct stat st;
    if (jw && stat(path, &st) == 0) {
        c->dev = st.st_dev;
        c->ino = st.st_ino;
    }
    free(path);
    if (jw) {
        info(ctx, c);
        if (c->note[0])
            ao_warn("attach: pid %d: %s; its metrics are in %s%s", w->pid, c->note, c->stem,
                    AO_RANK_METRICS);
    } else {
        c->stem[0] = '\0';
    }
    unlock_dir(fd);
    return jw;
}

int ao_attach_claim_finish(const char *dir, ao_attach_claim *c, ao_attach_info_fn info, void *ctx)
{
    int fd = lock_dir(dir);
    if (fd < 0) return -1;
    if (c->provisional) {
        char *path = stem_path(dir, c->stem, AO_RANK_METRICS);
        struct stat st;
        if (stat(path, &st) != 0 || st.st_dev != c->dev || st.st_ino != c->ino) {
            snprintf(c->stem, sizeof c->stem, "pid_%d", c->pid);
            snprintf(c->note, sizeof c->note, "%s", AO_ATTACH_NOTE_MOVED);
        }
        free(path);
    }
    int rc = info(ctx, c);
    unlock_dir(fd);
    return rc;
}
