/* A run directory followed as it is written (export/follow.h). */
#include "export/follow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/rundir.h"

void ao_follow_init(ao_follow *f, const char *dir, const char *run)
{
    memset(f, 0, sizeof *f);
    f->dir = ao_strdup(dir);
    f->run = ao_strdup(run);
    f->max_line = AO_FOLLOW_MAX_LINE;
}

void ao_follow_free(ao_follow *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->ranks[i].file);
        free(f->ranks[i].label);
        free(f->ranks[i].part);
    }
    free(f->ranks);
    free(f->dir);
    free(f->run);
    memset(f, 0, sizeof *f);
}

/* The part of "rank_<middle>_metrics.jsonl" between the prefix and the
 * suffix, or NULL when name is no rank file. */
static char *rank_middle(const char *name)
{
    size_t n = strlen(name), pre = strlen("rank_"), suf = strlen(AO_RANK_METRICS);
    if (n <= pre + suf || strncmp(name, "rank_", pre) != 0 ||
        strcmp(name + n - suf, AO_RANK_METRICS) != 0)
        return NULL;
    char *mid = ao_malloc(n - pre - suf + 1);
    memcpy(mid, name + pre, n - pre - suf);
    mid[n - pre - suf] = '\0';
    return mid;
}

static int has_label(const ao_follow *f, const char *label)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->ranks[i].label, label) == 0) return 1;
    return 0;
}

static int known(const ao_follow *f, const char *file)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->ranks[i].file, file) == 0) return 1;
    return 0;
}

/* rank_00_... is rank "0"; any other middle (a file a process named by its
 * pid, say) is its own label, so two files never share one series. */
static void add_rank(ao_follow *f, const char *file, char *mid)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 8;
        f->ranks = ao_realloc(f->ranks, f->cap * sizeof *f->ranks);
    }
    ao_follow_rank *r = &f->ranks[f->n];
    memset(r, 0, sizeof *r);
    r->file = ao_strdup(file);
    r->order = LONG_MAX;
    size_t digits = strspn(mid, "0123456789");
    if (digits > 0 && digits <= 9 && mid[digits] == '\0') {
        r->order = strtol(mid, NULL, 10);
        r->label = ao_asprintf("%ld", r->order);
        if (has_label(f, r->label)) {
            free(r->label);
            r->label = NULL;
        }
    }
    if (!r->label) r->label = ao_strdup(mid);
    ao_iter_record_init(&r->last);
    f->n++;
}

static int by_rank(const void *a, const void *b)
{
    const ao_follow_rank *x = a, *y = b;
    if (x->order != y->order) return x->order < y->order ? -1 : 1;
    return strcmp(x->label, y->label);
}

static void scan(ao_follow *f)
{
    DIR *d = opendir(f->dir);
    if (!d) return;
    size_t before = f->n;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *mid = rank_middle(e->d_name);
        if (mid && !known(f, e->d_name)) add_rank(f, e->d_name, mid);
        free(mid);
    }
    closedir(d);
    if (f->n != before) qsort(f->ranks, f->n, sizeof *f->ranks, by_rank);
}

static void reset(ao_follow_rank *r, const struct stat *st)
{
    r->dev = st->st_dev;
    r->ino = st->st_ino;
    r->offset = 0;
    r->plen = 0;
    r->skipping = 0;
    r->lines = r->steps = r->bad_lines = 0;
    r->warned = 0;
    r->have_last = 0;
    ao_iter_record_init(&r->last);
}

static void bad_line(const ao_follow *f, ao_follow_rank *r, long long line, const char *why)
{
    r->bad_lines++;
    if (r->warned) return;
    r->warned = 1;
    ao_warn("export: %s/%s:%lld: %s; skipped (bad lines are counted in "
            "aorta_export_bad_lines_total)",
            f->dir, r->file, line, why);
}

/* One complete line, NUL-terminated at len. Lines of another schema or no
 * JSON at all are counted quietly after the first; ao_iter_record_parse
 * (which prints its own error) sees only schema-1 objects. */
static void take_line(const ao_follow *f, ao_follow_rank *r, char *line, size_t len)
{
    r->lines++;
    if (strspn(line, " \t\r") == len) return;
    if (strlen(line) != len) {
        bad_line(f, r, r->lines, "the line holds a NUL byte");
        return;
    }
    char err[128];
    yajl_val v = yajl_tree_parse(line, err, sizeof err);
    yajl_val schema = v ? ao_json_member(v, "schema") : NULL;
    if (!v || !YAJL_IS_OBJECT(v)) {
        bad_line(f, r, r->lines, "not a JSON object");
    } else if (!YAJL_IS_INTEGER(schema) || YAJL_GET_INTEGER(schema) != AO_JSONL_SCHEMA) {
        bad_line(f, r, r->lines, "not a metrics record of schema 1");
    } else {
        char *where = ao_asprintf("%s/%s:%lld", f->dir, r->file, r->lines);
        ao_iter_record rec;
        if (ao_iter_record_parse(v, where, &rec) != 0) {
            r->bad_lines++;
            r->warned = 1;
        } else {
            ao_iter_record_free(&rec); /* the ops; the numbers stay */
            if (strcmp(rec.phase, "train") == 0) {
                r->steps++;
                r->last = rec;
                r->have_last = 1;
            }
        }
        free(where);
    }
    yajl_tree_free(v);
}

/* Bytes just read: complete lines are taken, the rest waits in r->part. */
static void feed(const ao_follow *f, ao_follow_rank *r, const char *buf, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(buf, '\n', n);
        size_t take = nl ? (size_t)(nl - buf) : n;
        if (r->skipping) {
            if (nl) {
                r->skipping = 0;
                r->lines++;
            }
        } else if (r->plen + take > f->max_line) {
            r->plen = 0;
            r->skipping = 1; /* to its '\n', which this loop meets next */
            bad_line(f, r, r->lines + 1, "a line longer than the longest record allowed");
            continue;
        } else {
            if (r->plen + take + 1 > r->pcap) {
                r->pcap = 2 * (r->plen + take + 1);
                r->part = ao_realloc(r->part, r->pcap);
            }
            memcpy(r->part + r->plen, buf, take);
            r->plen += take;
            if (nl) {
                r->part[r->plen] = '\0';
                take_line(f, r, r->part, r->plen);
                r->plen = 0;
            }
        }
        if (!nl) break;
        buf = nl + 1;
        n -= take + 1;
    }
}

static void follow_file(const ao_follow *f, ao_follow_rank *r)
{
    char *path = ao_asprintf("%s/%s", f->dir, r->file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    free(path);
    if (fd < 0) return; /* removed: its last state stays */
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return;
    }
    if (st.st_ino != r->ino || st.st_dev != r->dev || st.st_size < r->offset) reset(r, &st);
    char buf[1 << 16];
    /* Up to the size seen now: a file that grows while read waits for the next refresh. */
    while (r->offset < st.st_size) {
        size_t want = (size_t)(st.st_size - r->offset);
        ssize_t got = pread(fd, buf, want < sizeof buf ? want : sizeof buf, r->offset);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        r->offset += got;
        feed(f, r, buf, (size_t)got);
    }
    close(fd);
}

void ao_follow_refresh(ao_follow *f)
{
    scan(f);
    for (size_t i = 0; i < f->n; i++) follow_file(f, &f->ranks[i]);
}
