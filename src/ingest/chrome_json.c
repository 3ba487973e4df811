/* Streaming Chrome-trace JSON: yajl callbacks over gzread chunks. */
#include "ingest/chrome_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "core/error.h"
#include "core/json.h"

#define CHUNK ((size_t)1 << 20)
/* Bounds on what a file can make the reader hold or do: a name longer than
 * any kernel's (C++ templates run to a few KiB), a single JSON token without
 * an end (yajl buffers it whole: a 512 MiB name in a 522 KB .gz took 3.3 GB),
 * and a .gz that expands far beyond a trace's ratio (JSON traces compress
 * about 10:1; deflate reaches 1032:1) once it is past a size worth checking. */
#define NAME_MAX_BYTES  ((size_t)64 << 10)
#define TOKEN_MAX_BYTES ((size_t)4 << 20)
#define GZ_MAX_RATIO    100
#define GZ_RATIO_FLOOR  ((size_t)64 << 20)
#define MAX_DEPTH       4 /* meta keys kept for depths 1..3 */
#define KEY_MAX         64

typedef enum key_id {
    K_OTHER,
    K_PH,
    K_CAT,
    K_NAME,
    K_TS,
    K_DUR,
    K_PID,
    K_TID,
    K_ARGS,
    A_CORRELATION,
    A_STREAM,
    A_DEVICE,
    A_STEP,
    A_BYTES,
    A_KIND,
    A_COLL_NAME, /* strings of a collective kernel: A_COLL_NAME .. A_DTYPE */
    A_PG_NAME,
    A_PG_DESC,
    A_PG_RANKS,
    A_DTYPE,
    A_IN_NELEMS, /* its numbers: A_IN_NELEMS .. A_SEQ */
    A_OUT_NELEMS,
    A_GROUP_SIZE,
    A_SEQ,
} key_id;

#define NCOLL_TEXT (A_DTYPE - A_COLL_NAME + 1)

typedef struct text {
    char *s;
    size_t n, cap;
} text;

typedef struct parser {
    const ao_cj_callbacks *cb;
    void *ctx;
    int depth;
    int events_next; /* the next value is traceEvents */
    int in_events, saw_events, in_event, in_args;
    key_id key;
    char keys[MAX_DEPTH][KEY_MAX]; /* meta: the key open at each depth ("" in arrays) */
    int is_map[MAX_DEPTH + 1];
    ao_cj_event ev;
    size_t tokens; /* callbacks so far: a chunk that adds none is inside one token */
    text cat, name;
    text coll[NCOLL_TEXT]; /* A_COLL_NAME .. A_DTYPE */
    int has_coll[NCOLL_TEXT];
    char kind[32];
    int has_kind;
    char err[512];
} parser;

static void text_set(text *t, const unsigned char *s, size_t n)
{
    if (n + 1 > t->cap) {
        t->cap = n + 1 > 2 * t->cap ? n + 1 : 2 * t->cap;
        t->s = ao_realloc(t->s, t->cap);
    }
    memcpy(t->s, s, n);
    t->s[n] = '\0';
    t->n = n;
}

static key_id event_key(const unsigned char *k, size_t n)
{
#define IS(lit) (n == sizeof lit - 1 && memcmp(k, lit, n) == 0)
    if (IS("ph")) return K_PH;
    if (IS("cat")) return K_CAT;
    if (IS("name")) return K_NAME;
    if (IS("ts")) return K_TS;
    if (IS("dur")) return K_DUR;
    if (IS("pid")) return K_PID;
    if (IS("tid")) return K_TID;
    if (IS("args")) return K_ARGS;
    return K_OTHER;
}

static key_id args_key(const unsigned char *k, size_t n)
{
    if (IS("correlation")) return A_CORRELATION;
    if (IS("stream")) return A_STREAM;
    if (IS("device")) return A_DEVICE;
    if (IS("step")) return A_STEP;
    if (IS("bytes")) return A_BYTES;
    if (IS("kind")) return A_KIND;
    if (IS("Collective name")) return A_COLL_NAME;
    if (IS("Process Group Name")) return A_PG_NAME;
    if (IS("Process Group Description")) return A_PG_DESC;
    if (IS("Process Group Ranks")) return A_PG_RANKS;
    if (IS("dtype")) return A_DTYPE;
    if (IS("In msg nelems")) return A_IN_NELEMS;
    if (IS("Out msg nelems")) return A_OUT_NELEMS;
    if (IS("Group size")) return A_GROUP_SIZE;
    if (IS("Seq")) return A_SEQ;
    return K_OTHER;
#undef IS
}

static const char *key_text(key_id k)
{
    static const char *const names[] = {"",
                                        "ph",
                                        "cat",
                                        "name",
                                        "ts",
                                        "dur",
                                        "pid",
                                        "tid",
                                        "args",
                                        "correlation",
                                        "stream",
                                        "device",
                                        "step",
                                        "bytes",
                                        "kind",
                                        "Collective name",
                                        "Process Group Name",
                                        "Process Group Description",
                                        "Process Group Ranks",
                                        "dtype",
                                        "In msg nelems",
                                        "Out msg nelems",
                                        "Group size",
                                        "Seq"};
    return names[k];
}

static int at_event(const parser *p)
{
    return p->in_event && p->depth == 3;
}
static int at_args(const parser *p)
{
    return p->in_args && p->depth == 4;
}

static void reset_event(parser *p)
{
    size_t idx = p->ev.index;
    memset(&p->ev, 0, sizeof p->ev);
    p->ev.index = idx;
    p->ev.pid = p->ev.tid = -1;
    p->ev.correlation = p->ev.stream = p->ev.device = p->ev.step = p->ev.bytes = -1;
    p->ev.in_nelems = p->ev.out_nelems = p->ev.group_size = p->ev.seq = -1;
    memset(p->has_coll, 0, sizeof p->has_coll);
    p->ev.cat = p->ev.name = "";
    p->cat.n = p->name.n = 0;
    p->has_kind = 0;
}

static int wrong_type(parser *p, const char *what)
{
    snprintf(p->err, sizeof p->err, "traceEvents[%zu]%s%s is %s", p->ev.index,
             p->in_args ? ".args." : ".", key_text(p->key), what);
    return 0;
}

/* Whether the open key of args holds a count (correlation, bytes, step): a
 * whole number >= 0, else the read stops. */
static int count_key(const parser *p)
{
    return at_args(p) && (p->key == A_CORRELATION || p->key == A_BYTES || p->key == A_STEP);
}

/* The number text s[0..n) as a whole number in *out; 0 when it is none
 * (a fraction, an exponent, out of 64 bits). */
static int whole_number(const char *s, size_t n, int64_t *out)
{
    char buf[32];
    if (n == 0 || n >= sizeof buf || memchr(s, '.', n) || memchr(s, 'e', n) || memchr(s, 'E', n))
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno) return 0;
    *out = v;
    return 1;
}

/* A scalar outside traceEvents, for meta. Returns the callback's verdict. */
static int meta_scalar(parser *p, const char *value)
{
    if (!p->cb->meta || p->in_events || p->depth < 1 || p->depth >= MAX_DEPTH) return 1;
    char path[KEY_MAX * MAX_DEPTH];
    size_t n = 0;
    path[0] = '\0';
    for (int d = 1; d <= p->depth; d++) {
        if (!p->is_map[d] || !p->keys[d][0]) continue;
        n += (size_t)snprintf(path + n, sizeof path - n, "%s%s", n ? "." : "", p->keys[d]);
    }
    return !n || p->cb->meta(p->ctx, path, value, p->err, sizeof p->err) == 0;
}

static int cb_null(void *ctx)
{
    parser *p = ctx;
    p->tokens++;
    if (at_event(p) && (p->key == K_TS || p->key == K_DUR)) return wrong_type(p, "null");
    if (count_key(p)) return wrong_type(p, "null, not a number");
    return meta_scalar(p, "null");
}

static int cb_boolean(void *ctx, int b)
{
    parser *p = ctx;
    p->tokens++;
    if (at_event(p) && p->key != K_OTHER) return wrong_type(p, "a boolean");
    if (at_args(p) && p->key != K_OTHER) return wrong_type(p, "a boolean");
    return meta_scalar(p, b ? "true" : "false");
}

static int cb_number(void *ctx, const char *s, size_t n)
{
    parser *p = ctx;
    p->tokens++;
    char buf[64];
    if (!at_event(p) && !at_args(p)) {
        if (n >= sizeof buf) return 1;
        memcpy(buf, s, n);
        buf[n] = '\0';
        return meta_scalar(p, buf);
    }
    if (p->key == K_OTHER) return 1;
    if (n >= sizeof buf) return wrong_type(p, "a number too long to read");
    memcpy(buf, s, n);
    buf[n] = '\0';
    double v = strtod(buf, NULL);
    /* ids and counts as whole numbers (a cast of 1e30 is undefined); a
     * count that is none stops the read, an id that is none reads as unknown */
    int64_t w = -1;
    int whole = whole_number(s, n, &w);
    if (count_key(p) && (!whole || w < 0)) {
        char what[96];
        snprintf(what, sizeof what, "%s, not a whole number >= 0", buf);
        return wrong_type(p, what);
    }
    if (!whole) w = -1;
    if (at_args(p)) {
        switch (p->key) {
        case A_CORRELATION:
            p->ev.correlation = w;
            break;
        case A_STREAM:
            p->ev.stream = w;
            break;
        case A_DEVICE:
            p->ev.device = w;
            break;
        case A_STEP:
            p->ev.step = w;
            break;
        case A_BYTES:
            p->ev.bytes = w;
            break;
        case A_KIND:
            return wrong_type(p, "a number, not a string");
        case A_IN_NELEMS:
            p->ev.in_nelems = (int64_t)v;
            break;
        case A_OUT_NELEMS:
            p->ev.out_nelems = (int64_t)v;
            break;
        case A_GROUP_SIZE:
            p->ev.group_size = (int64_t)v;
            break;
        case A_SEQ:
            p->ev.seq = (int64_t)v;
            break;
        default:
            break;
        }
        return 1;
    }
    switch (p->key) {
    case K_TS:
        p->ev.ts = v;
        p->ev.has_ts = 1;
        break;
    case K_DUR:
        p->ev.dur = v;
        p->ev.has_dur = 1;
        break;
    case K_PID:
        p->ev.pid = w;
        break;
    case K_TID:
        p->ev.tid = w;
        break;
    case K_PH:
    case K_CAT:
    case K_NAME:
        return wrong_type(p, "a number, not a string");
    case K_ARGS:
        return wrong_type(p, "a number, not an object");
    default:
        break;
    }
    return 1;
}

static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
    parser *p = ctx;
    p->tokens++;
    if (at_args(p)) {
        if (p->key == A_KIND) {
            size_t m = n < sizeof p->kind - 1 ? n : sizeof p->kind - 1;
            memcpy(p->kind, s, m);
            p->kind[m] = '\0';
            p->has_kind = 1;
        } else if (p->key >= A_COLL_NAME && p->key <= A_DTYPE) {
            text_set(&p->coll[p->key - A_COLL_NAME], s, n);
            p->has_coll[p->key - A_COLL_NAME] = 1;
        } else if (p->key == A_CORRELATION || p->key == A_BYTES || p->key == A_STEP ||
                   (p->key >= A_IN_NELEMS && p->key <= A_SEQ)) {
            return wrong_type(p, "a string, not a number");
        }
        /* a string stream or device (some tools name them) reads as unknown */
        return 1;
    }
    if (!at_event(p)) {
        if (!p->in_events && n < 512) {
            char buf[512];
            memcpy(buf, s, n);
            buf[n] = '\0';
            return meta_scalar(p, buf);
        }
        return 1;
    }
    if ((p->key == K_CAT || p->key == K_NAME) && n > NAME_MAX_BYTES) {
        char what[96];
        snprintf(what, sizeof what, "%zu bytes long; names of more than %zu KiB are refused", n,
                 NAME_MAX_BYTES >> 10);
        return wrong_type(p, what);
    }
    switch (p->key) {
    case K_PH:
        p->ev.ph = n ? (char)s[0] : '\0';
        break;
    case K_CAT:
        text_set(&p->cat, s, n);
        break;
    case K_NAME:
        text_set(&p->name, s, n);
        break;
    case K_TS:
    case K_DUR:
        return wrong_type(p, "a string, not a number");
    case K_ARGS:
        return wrong_type(p, "a string, not an object");
    default:
        break; /* string pid/tid ("Spans"): unknown */
    }
    return 1;
}

static int cb_map_key(void *ctx, const unsigned char *k, size_t n)
{
    parser *p = ctx;
    p->tokens++;
    if (at_event(p))
        p->key = event_key(k, n);
    else if (at_args(p))
        p->key = args_key(k, n);
    else
        p->key = K_OTHER;
    if (p->depth == 1) p->events_next = n == 11 && memcmp(k, "traceEvents", 11) == 0;
    if (p->depth >= 1 && p->depth < MAX_DEPTH && !p->in_events) {
        size_t m = n < KEY_MAX - 1 ? n : KEY_MAX - 1;
        memcpy(p->keys[p->depth], k, m);
        p->keys[p->depth][m] = '\0';
    }
    return 1;
}

static int open_container(parser *p, int map)
{
    p->depth++;
    if (p->depth <= MAX_DEPTH) {
        p->is_map[p->depth] = map;
        if (p->depth < MAX_DEPTH) p->keys[p->depth][0] = '\0';
    }
    return 1;
}

static int cb_start_map(void *ctx)
{
    parser *p = ctx;
    p->tokens++;
    if (p->depth == 1 && p->events_next) {
        snprintf(p->err, sizeof p->err, "\"traceEvents\" is an object, not an array");
        return 0;
    }
    if (p->in_events && p->depth == 2) {
        p->in_event = 1;
        reset_event(p);
    } else if (at_event(p) && p->key == K_ARGS) {
        p->in_args = 1;
    } else if (count_key(p)) {
        return wrong_type(p, "an object, not a number");
    }
    return open_container(p, 1);
}

static int cb_end_map(void *ctx)
{
    parser *p = ctx;
    p->tokens++;
    if (at_args(p)) {
        p->in_args = 0;
    } else if (at_event(p)) {
        p->in_event = 0;
        p->ev.cat = p->cat.n ? p->cat.s : "";
        p->ev.cat_len = p->cat.n;
        p->ev.name = p->name.n ? p->name.s : "";
        p->ev.name_len = p->name.n;
        p->ev.kind = p->has_kind ? p->kind : NULL;
        const char **coll[NCOLL_TEXT] = {&p->ev.coll_name, &p->ev.pg_name, &p->ev.pg_desc,
                                         &p->ev.pg_ranks, &p->ev.dtype};
        for (int i = 0; i < NCOLL_TEXT; i++) *coll[i] = p->has_coll[i] ? p->coll[i].s : NULL;
        if (p->cb->event && p->cb->event(p->ctx, &p->ev, p->err, sizeof p->err)) return 0;
        p->ev.index++;
    }
    p->depth--;
    p->key = K_OTHER;
    return 1;
}

static int cb_start_array(void *ctx)
{
    parser *p = ctx;
    p->tokens++;
    if (p->depth == 1 && p->events_next) {
        p->in_events = p->saw_events = 1;
        p->events_next = 0;
    }
    if (at_event(p) && p->key == K_ARGS) return wrong_type(p, "an array, not an object");
    if (count_key(p)) return wrong_type(p, "an array, not a number");
    return open_container(p, 0);
}

static int cb_end_array(void *ctx)
{
    parser *p = ctx;
    p->tokens++;
    if (p->in_events && p->depth == 2) p->in_events = 0;
    p->depth--;
    p->key = K_OTHER;
    return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_boolean,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_map_key,
    .yajl_end_map = cb_end_map,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end_array,
};

/* yajl's short message without its trailing newline. */
static void parse_error(const char *path, size_t offset, const char *unit, yajl_handle h)
{
    unsigned char *m = yajl_get_error(h, 0, NULL, 0);
    size_t n = strlen((char *)m);
    while (n && (m[n - 1] == '\n' || m[n - 1] == ' ')) m[--n] = '\0';
    ao_error(path, "byte %zu%s: not valid JSON (%s)", offset, unit, (char *)m);
    yajl_free_error(h, m);
}

int ao_cj_read(const char *path, const ao_cj_callbacks *cb, void *ctx)
{
    int fd = ao_open_input(path, "trace");
    if (fd < 0) return AO_EXIT_USAGE;
    struct stat fst;
    size_t file_bytes = fstat(fd, &fst) == 0 && fst.st_size > 0 ? (size_t)fst.st_size : 0;
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        ao_error(path, "cannot open: %s", strerror(errno ? errno : ENOMEM));
        close(fd);
        return AO_EXIT_USAGE;
    }
    gzbuffer(f, 1u << 18);
    parser p = {.cb = cb, .ctx = ctx};
    reset_event(&p);
    yajl_handle h = yajl_alloc(&callbacks, NULL, &p);
    unsigned char *buf = ao_malloc(CHUNK);
    size_t base = 0, quiet = 0; /* quiet: bytes fed since a chunk with a token's end */
    int rc = 0;
    /* Offsets count the JSON text: a .gz file's uncompressed bytes. */
    const char *unit = gzdirect(f) ? "" : " (uncompressed)";
    for (;;) {
        int n = gzread(f, buf, (unsigned)CHUNK);
        if (n < 0) {
            int zerr;
            const char *m = gzerror(f, &zerr);
            ao_error(path, "byte %zu%s: cannot read: %s", base, unit,
                     zerr == Z_ERRNO ? strerror(errno) : m);
            rc = AO_EXIT_USAGE;
            break;
        }
        if (n == 0) break;
        size_t tokens = p.tokens;
        yajl_status st = yajl_parse(h, buf, (size_t)n);
        if (st != yajl_status_ok) {
            size_t off = base + yajl_get_bytes_consumed(h);
            if (st == yajl_status_client_canceled)
                ao_error(path, "byte %zu%s: %s", off, unit, p.err);
            else
                parse_error(path, off, unit, h);
            rc = AO_EXIT_USAGE;
            break;
        }
        base += (size_t)n;
        quiet = p.tokens == tokens ? quiet + (size_t)n : 0;
        if (quiet > TOKEN_MAX_BYTES) {
            ao_error(path,
                     "byte %zu%s: one JSON value runs on for more than %zu MiB; no field of a "
                     "trace is that long (a name of that size is not a kernel's)",
                     base, unit, TOKEN_MAX_BYTES >> 20);
            rc = AO_EXIT_USAGE;
            break;
        }
        if (!gzdirect(f) && base > GZ_RATIO_FLOOR && base / GZ_MAX_RATIO > file_bytes) {
            ao_error(path,
                     "byte %zu%s: the .gz expands more than %d times its %zu bytes; not a "
                     "profiler's trace (they compress about 10:1)",
                     base, unit, GZ_MAX_RATIO, file_bytes);
            rc = AO_EXIT_USAGE;
            break;
        }
    }
    if (rc == 0) {
        yajl_status st = yajl_complete_parse(h);
        if (st != yajl_status_ok) {
            if (st == yajl_status_client_canceled)
                ao_error(path, "byte %zu%s: %s", base, unit, p.err);
            else
                ao_error(path, "byte %zu%s: truncated: the JSON ends inside %s", base, unit,
                         p.in_events ? "traceEvents" : "the document");
            rc = AO_EXIT_USAGE;
        } else if (!p.saw_events) {
            ao_error(path, "byte %zu%s: no \"traceEvents\" array: not a Chrome/Kineto trace", base,
                     unit);
            rc = AO_EXIT_USAGE;
        }
    }
    yajl_free(h);
    gzclose(f);
    free(buf);
    free(p.cat.s);
    free(p.name.s);
    for (int i = 0; i < NCOLL_TEXT; i++) free(p.coll[i].s);
    return rc;
}
