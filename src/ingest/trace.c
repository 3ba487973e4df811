/* ao_trace storage (string pool, appenders, metadata), format detection and
 * the dispatch to the readers. */
#include "ingest/trace.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/error.h"
#include "core/json.h"

/* ---- string pool: open addressing over an arena ------------------------------ */

#define POOL_CHUNK ((size_t)1 << 20)

typedef struct pool_chunk {
    struct pool_chunk *next;
    size_t used, cap;
    char data[];
} pool_chunk;

typedef struct ao_trace_pool {
    const char **slots; /* hash table of interned strings; NULL = empty */
    uint32_t *hashes;
    size_t nslots, count;
    pool_chunk *chunks;
} ao_trace_pool;

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static char *pool_alloc(ao_trace_pool *p, size_t n)
{
    if (!p->chunks || p->chunks->cap - p->chunks->used < n) {
        size_t cap = n > POOL_CHUNK ? n : POOL_CHUNK;
        pool_chunk *c = ao_malloc(sizeof *c + cap);
        c->next = p->chunks;
        c->used = 0;
        c->cap = cap;
        p->chunks = c;
    }
    char *r = p->chunks->data + p->chunks->used;
    p->chunks->used += n;
    return r;
}

static void pool_grow(ao_trace_pool *p)
{
    size_t n = p->nslots ? p->nslots * 2 : 1024;
    const char **slots = ao_calloc(n, sizeof *slots);
    uint32_t *hashes = ao_calloc(n, sizeof *hashes);
    for (size_t i = 0; i < p->nslots; i++) {
        if (!p->slots[i]) continue;
        size_t j = p->hashes[i] & (n - 1);
        while (slots[j]) j = (j + 1) & (n - 1);
        slots[j] = p->slots[i];
        hashes[j] = p->hashes[i];
    }
    free(p->slots);
    free(p->hashes);
    p->slots = slots;
    p->hashes = hashes;
    p->nslots = n;
}

const char *ao_trace_intern(ao_trace *t, const char *s, size_t len)
{
    if (!s) return NULL;
    if (len == (size_t)-1) len = strlen(s);
    ao_trace_pool *p = t->pool;
    if ((p->count + 1) * 2 > p->nslots) pool_grow(p);
    uint32_t h = hash_bytes(s, len);
    size_t j = h & (p->nslots - 1);
    while (p->slots[j]) {
        if (p->hashes[j] == h && strncmp(p->slots[j], s, len) == 0 && p->slots[j][len] == '\0')
            return p->slots[j];
        j = (j + 1) & (p->nslots - 1);
    }
    char *c = pool_alloc(p, len + 1);
    memcpy(c, s, len);
    c[len] = '\0';
    p->slots[j] = c;
    p->hashes[j] = h;
    p->count++;
    return c;
}

void ao_trace_init(ao_trace *t, const char *path, const char *format)
{
    memset(t, 0, sizeof *t);
    t->pool = ao_calloc(1, sizeof *t->pool);
    t->path = ao_trace_intern(t, path, (size_t)-1);
    t->format = format;
    t->rank = -1;
    t->world_size = -1;
}

void ao_trace_free(ao_trace *t)
{
    if (!t) return;
    free(t->acts);
    free(t->ranges);
    free(t->launches);
    free(t->meta);
    free(t->coll_args);
    if (t->pool) {
        for (pool_chunk *c = t->pool->chunks, *next; c; c = next) {
            next = c->next;
            free(c);
        }
        free(t->pool->slots);
        free(t->pool->hashes);
        free(t->pool);
    }
    memset(t, 0, sizeof *t);
    t->rank = t->world_size = -1;
}

/* Room for one more element of an array of elem-sized items. */
static void *grow(void *arr, size_t n, size_t *cap, size_t elem)
{
    if (n < *cap) return arr;
    *cap = *cap ? *cap * 2 : 256;
    return ao_realloc(arr, *cap * elem);
}

ao_activity *ao_trace_add_activity(ao_trace *t)
{
    t->acts = grow(t->acts, t->nacts, &t->cap_acts, sizeof *t->acts);
    ao_activity *a = &t->acts[t->nacts++];
    memset(a, 0, sizeof *a);
    a->correlation = -1;
    a->cls = -1;
    a->coll_kind = -1;
    a->coll = -1;
    a->step = -1;
    return a;
}

ao_range *ao_trace_add_range(ao_trace *t)
{
    t->ranges = grow(t->ranges, t->nranges, &t->cap_ranges, sizeof *t->ranges);
    ao_range *r = &t->ranges[t->nranges++];
    memset(r, 0, sizeof *r);
    r->tid = -1;
    return r;
}

ao_launch *ao_trace_add_launch(ao_trace *t)
{
    t->launches = grow(t->launches, t->nlaunches, &t->cap_launches, sizeof *t->launches);
    ao_launch *l = &t->launches[t->nlaunches++];
    memset(l, 0, sizeof *l);
    l->tid = -1;
    return l;
}

ao_coll_args *ao_trace_add_coll_args(ao_trace *t, ao_activity *a)
{
    t->coll_args = grow(t->coll_args, t->ncoll_args, &t->cap_coll_args, sizeof *t->coll_args);
    a->coll = (int32_t)t->ncoll_args;
    ao_coll_args *c = &t->coll_args[t->ncoll_args++];
    *c = (ao_coll_args){.in_nelems = -1, .out_nelems = -1, .group_size = -1, .seq = -1};
    return c;
}

size_t ao_trace_bytes(const ao_trace *t)
{
    size_t n = t->cap_acts * sizeof *t->acts + t->cap_ranges * sizeof *t->ranges +
               t->cap_launches * sizeof *t->launches + t->cap_meta * sizeof *t->meta +
               t->cap_coll_args * sizeof *t->coll_args;
    if (t->pool) {
        n += t->pool->nslots * (sizeof *t->pool->slots + sizeof *t->pool->hashes);
        for (const pool_chunk *c = t->pool->chunks; c; c = c->next) n += sizeof *c + c->cap;
    }
    return n;
}

void ao_trace_set_meta(ao_trace *t, const char *key, const char *value)
{
    key = ao_trace_intern(t, key, (size_t)-1);
    value = ao_trace_intern(t, value, (size_t)-1);
    for (size_t i = 0; i < t->nmeta; i++) {
        if (t->meta[i].key == key) {
            t->meta[i].value = value;
            return;
        }
    }
    t->meta = grow(t->meta, t->nmeta, &t->cap_meta, sizeof *t->meta);
    t->meta[t->nmeta++] = (ao_trace_meta){key, value};
}

const char *ao_trace_get_meta(const ao_trace *t, const char *key)
{
    for (size_t i = 0; i < t->nmeta; i++)
        if (strcmp(t->meta[i].key, key) == 0) return t->meta[i].value;
    return NULL;
}

/* ---- formats ------------------------------------------------------------------- */

static const char *const format_names[] = {"auto", "kineto", "rocprof", "rocpd", "nsys", "aorta"};

const char *ao_trace_format_name(ao_trace_format f)
{
    return (unsigned)f < sizeof format_names / sizeof *format_names ? format_names[f] : "?";
}

int ao_trace_format_parse(const char *s)
{
    for (size_t i = 0; i < sizeof format_names / sizeof *format_names; i++)
        if (strcasecmp(s, format_names[i]) == 0) return (int)i;
    return -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

ao_trace_format ao_trace_detect(const char *path)
{
    const char *what;
    int fd = ao_open_regular(path, &what);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        if (fd >= 0) close(fd);
        return AO_TRACE_AUTO;
    }
    /* The first 64 KiB: enough for a Kineto header, aorta's first metadata
     * events, a CSV header, and an SQLite file's schema page. */
    static const size_t cap = 65536;
    char *head = ao_malloc(cap + 1);
    size_t n = fread(head, 1, cap, f);
    fclose(f);
    head[n] = '\0';
    ao_trace_format r = AO_TRACE_AUTO;
    if (n >= 2 && (unsigned char)head[0] == 0x1f && (unsigned char)head[1] == 0x8b) {
        r = AO_TRACE_KINETO; /* aorta never compresses its trace.json */
    } else if (n >= 16 && memcmp(head, "SQLite format 3", 16) == 0) {
        /* The schema's CREATE statements are plain text in the first pages. */
        if (memmem(head, n, "rocpd_", 6))
            r = AO_TRACE_ROCPD;
        else if (memmem(head, n, "CUPTI_ACTIVITY_KIND", 19) || memmem(head, n, "NVTX_EVENTS", 11))
            r = AO_TRACE_NSYS;
    } else {
        size_t i = 0;
        while (i < n && isspace((unsigned char)head[i])) i++;
        if (i < n && head[i] == '{') {
            int aorta = strstr(head, "\"process_name\"") && strstr(head, "\"rank ") &&
                        !strstr(head, "\"schemaVersion\"") && !strstr(head, "\"cat\": \"kernel\"");
            r = aorta ? AO_TRACE_AORTA : AO_TRACE_KINETO;
        } else if (ends_with(path, ".csv") &&
                   (strstr(head, "Kernel_Name") || strstr(head, "Correlation_Id"))) {
            r = AO_TRACE_ROCPROF_CSV;
        }
    }
    free(head);
    return r;
}

int ao_trace_read(const char *path, ao_trace_format fmt, ao_trace *out)
{
    if (fmt == AO_TRACE_AUTO) {
        fmt = ao_trace_detect(path);
        if (fmt == AO_TRACE_AUTO) {
            ao_error(path, "not a trace aorta can read (Kineto JSON, rocprofv3 CSV or rocpd, "
                           "nsys SQLite export, aorta trace.json), or unreadable");
            ao_hint("name the format with --format");
            return AO_EXIT_USAGE;
        }
    }
    switch (fmt) {
    case AO_TRACE_KINETO:
        return ao_read_kineto(path, out);
    case AO_TRACE_ROCPROF_CSV:
        return ao_read_rocprof_csv(path, out);
    case AO_TRACE_ROCPD:
        return ao_read_rocpd(path, out);
    case AO_TRACE_NSYS:
        return ao_read_nsys(path, out);
    case AO_TRACE_AORTA:
        return ao_read_aorta_trace(path, 0, out);
    case AO_TRACE_AUTO:
        break;
    }
    return AO_EXIT_USAGE;
}
