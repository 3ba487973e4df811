/* attach/gather.h */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach/attach.h"
#include "attach/claim.h"
#include "attach/gather.h"
#include "core/error.h"
#include "core/json.h"
#include "core/rundir.h"

typedef struct proc {
    char stem[64];
    char *text; /* the info file */
    yajl_val v;
    const char *note;      /* why its files are pid-named, or NULL */
    int pid, rank, ranked; /* rank: -1 when unknown */
    int by_rank;           /* its files are rank_NN_* */
    long long lines;
} proc;

static long long count_lines(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    long long n = 0;
    int c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

static int int_member(yajl_val v, const char *key, int dflt)
{
    yajl_val m = ao_json_member(v, key);
    return YAJL_IS_INTEGER(m) ? (int)YAJL_GET_INTEGER(m) : dflt;
}

static const char *str_member(yajl_val v, const char *key)
{
    yajl_val m = ao_json_member(v, key);
    return YAJL_IS_STRING(m) ? YAJL_GET_STRING(m) : NULL;
}

/* STEM of "rank_NN_attach.json" or "pid_N_attach.json" into stem; 0 if not one. */
static int info_stem(const char *name, char *stem, size_t n)
{
    size_t len = strlen(name), suf = strlen(AO_ATTACH_RANK_INFO);
    if (len <= suf || strcmp(name + len - suf, AO_ATTACH_RANK_INFO) != 0) return 0;
    if (strncmp(name, "rank_", 5) != 0 && strncmp(name, "pid_", 4) != 0) return 0;
    if (len - suf >= n) return 0;
    memcpy(stem, name, len - suf);
    stem[len - suf] = '\0';
    return 1;
}

static int cmp_proc(const void *a, const void *b)
{
    const proc *x = a, *y = b;
    if (x->by_rank != y->by_rank) return y->by_rank - x->by_rank;
    if (x->by_rank && x->rank != y->rank) return (x->rank > y->rank) - (x->rank < y->rank);
    return (x->pid > y->pid) - (x->pid < y->pid);
}

static proc *read_procs(const char *dir, size_t *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return NULL;
    proc *p = NULL;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char stem[64];
        if (!info_stem(e->d_name, stem, sizeof stem)) continue;
        char *path = ao_asprintf("%s/%s", dir, e->d_name);
        char *text = ao_file_read(path, NULL);
        free(path);
        yajl_val v = text ? yajl_tree_parse(text, NULL, 0) : NULL;
        if (!v || !YAJL_IS_OBJECT(v)) {
            ao_warn("attach: %s/%s is not a JSON object; that process is left out of run.json", dir,
                    e->d_name);
            yajl_tree_free(v);
            free(text);
            continue;
        }
        if (*n == cap) p = ao_realloc(p, (cap = cap ? 2 * cap : 8) * sizeof *p);
        proc *q = &p[(*n)++];
        memset(q, 0, sizeof *q);
        snprintf(q->stem, sizeof q->stem, "%s", stem);
        q->text = text;
        q->v = v;
        q->pid = int_member(v, "pid", -1);
        q->rank = int_member(v, "rank", -1);
        q->by_rank = strncmp(stem, "rank_", 5) == 0;
        q->note = str_member(v, "note");
        /* moved aside after it ended: its file still says rank 0 of 1 */
        if (!q->by_rank && !q->note && YAJL_IS_TRUE(ao_json_member(v, "provisional"))) {
            q->note = AO_ATTACH_NOTE_MOVED;
            q->rank = -1;
        }
        char *m = ao_asprintf("%s/%s%s", dir, stem, AO_RANK_METRICS);
        q->lines = count_lines(m);
        free(m);
    }
    closedir(d);
    if (*n) qsort(p, *n, sizeof *p, cmp_proc);
    return p;
}

/* One source for every rank: just its name. */
static void simplify_used(char *used, size_t n)
{
    const char *first = strstr(used, ": ");
    if (!first) return;
    char name[32];
    snprintf(name, sizeof name, "%s", first + 2);
    char *comma = strchr(name, ',');
    if (comma) *comma = '\0';
    for (const char *p = used; (p = strstr(p, ": ")); p += 2)
        if (strncmp(p + 2, name, strlen(name)) != 0) return;
    snprintf(used, n, "%s", name);
}

static void gen_proc(yajl_gen g, const proc *p)
{
    yajl_val dev = ao_json_member(p->v, "device");
    int finished = YAJL_IS_TRUE(ao_json_member(p->v, "finished"));
    yajl_gen_map_open(g);
    ao_json_gen_str(g, "pid");
    yajl_gen_integer(g, p->pid);
    ao_json_gen_str(g, "rank");
    if (p->rank >= 0)
        yajl_gen_integer(g, p->rank);
    else
        yajl_gen_null(g);
    ao_json_gen_str(g, "world_size");
    yajl_gen_integer(g, int_member(p->v, "world_size", 1));
    ao_json_gen_str(g, "launcher");
    ao_json_gen_str(g, str_member(p->v, "launcher"));
    ao_json_gen_str(g, "device");
    if (YAJL_IS_INTEGER(dev))
        yajl_gen_integer(g, YAJL_GET_INTEGER(dev));
    else
        yajl_gen_null(g);
    ao_json_gen_str(g, "steps"); /* its lines: a process that died wrote no final count */
    yajl_gen_integer(g, p->lines);
    ao_json_gen_str(g, "files");
    ao_json_gen_str(g, p->stem);
    ao_json_gen_str(g, "finished");
    yajl_gen_bool(g, finished);
    ao_json_gen_str(g, "note");
    ao_json_gen_str(g, p->note);
    ao_json_gen_str(g, "info");
    ao_json_gen_raw(g, p->text);
    yajl_gen_map_close(g);
}

/* The notes: pid-named and unfinished processes, ranks without files. */
static void notes(const char *dir, const proc *p, size_t n, int world)
{
    for (size_t i = 0; i < n; i++) {
        if (!p[i].by_rank)
            fprintf(stderr,
                    "aorta: note: attach: pid %d wrote %s_metrics.jsonl (%lld step%s): %s\n",
                    p[i].pid, p[i].stem, p[i].lines, p[i].lines == 1 ? "" : "s",
                    p[i].note ? p[i].note : "why is not recorded");
        if (!YAJL_IS_TRUE(ao_json_member(p[i].v, "finished")))
            fprintf(stderr,
                    "aorta: note: attach: pid %d (%s) did not finish (killed?): %s/%s%s is the "
                    "one written when it claimed its files\n",
                    p[i].pid, p[i].stem, dir, p[i].stem, AO_ATTACH_RANK_INFO);
    }
    char missing[256] = "";
    int nmissing = 0;
    for (int r = 0; r < world; r++) {
        int seen = 0;
        for (size_t i = 0; i < n && !seen; i++) seen = p[i].by_rank && p[i].rank == r;
        if (seen) continue;
        size_t len = strlen(missing);
        if (nmissing++ < 16)
            snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", r);
    }
    if (nmissing)
        fprintf(stderr,
                "aorta: note: attach: %d of %d ranks have no rank files (%s%s): no GPU work was "
                "seen in them here (idle ranks, or another node's), or their files are "
                "pid-named (above)\n",
                nmissing, world, missing, nmissing > 16 ? ", ..." : "");
}

void ao_attach_gather(const char *dir, ao_attach_gathered *g)
{
    memset(g, 0, sizeof *g);
    g->min_lines = -1;
    size_t n;
    proc *p = read_procs(dir, &n);
    yajl_gen gen = ao_json_gen_new(0);
    yajl_gen_array_open(gen);
    for (size_t i = 0; i < n; i++) {
        gen_proc(gen, &p[i]);
        if (!p[i].by_rank) {
            g->npids++;
            continue;
        }
        g->nranks++;
        int ws = int_member(p[i].v, "world_size", 1);
        if (ws > g->world_size) g->world_size = ws;
        if (g->min_lines < 0 || p[i].lines < g->min_lines) g->min_lines = p[i].lines;
        const char *src = str_member(p[i].v, "step_source");
        size_t ul = strlen(g->used);
        snprintf(g->used + ul, sizeof g->used - ul, "%srank %d: %s", ul ? ", " : "", p[i].rank,
                 src ? src : "");
    }
    yajl_gen_array_close(gen);
    const unsigned char *buf;
    size_t len;
    yajl_gen_get_buf(gen, &buf, &len);
    g->processes = ao_malloc(len + 1);
    memcpy(g->processes, buf, len);
    g->processes[len] = '\0';
    yajl_gen_free(gen);
    simplify_used(g->used, sizeof g->used);
    notes(dir, p, n, g->world_size);
    for (size_t i = 0; i < n; i++) {
        yajl_tree_free(p[i].v);
        free(p[i].text);
    }
    free(p);
}

void ao_attach_gathered_free(ao_attach_gathered *g)
{
    free(g->processes);
    g->processes = NULL;
}
