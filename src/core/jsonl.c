#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/jsonl.h"
#include "core/rundir.h"

/* ---- the record's fields, shared by writer and reader ------------------------ */

typedef struct dfield {
    const char *key;
    size_t off;
} dfield;

#define OV(f)                                                                                      \
    {                                                                                              \
#f, offsetof(ao_overlap, f)                                                                \
    }
static const dfield overlap_fields[] = {
    OV(window_start_us),
    OV(window_end_us),
    OV(step_ms),
    OV(compute_ms),
    OV(comm_ms),
    OV(copy_ms),
    OV(overlap_ms),
    OV(exposed_comm_ms),
    OV(idle_ms),
    OV(overlap_ratio),
    OV(compute_covered_ratio),
    OV(overlap_efficiency),
};
/* Fields newer files have and older ones lack: written always, read as NAN
 * when absent (schema 1 files from before them stay readable). */
static const dfield optional_overlap_fields[] = {
    OV(host_wait_ms),
};
#define RF(f)                                                                                      \
    {                                                                                              \
#f, offsetof(ao_iter_record, f)                                                            \
    }
static const dfield train_fields[] = {
    RF(loss), RF(loss_local), RF(grad_norm), RF(lr), RF(loss_scale), RF(tokens_per_s),
};
static const dfield optional_record_fields[] = {
    RF(data_wait_ms),
    RF(mem_peak_mb),
    RF(host_gap_ms),
};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const char *const phases[] = {"train", "compute_only", "comm_only"};

static double *dptr(void *base, const dfield *f)
{
    return (double *)((char *)base + f->off);
}
static double dget(const void *base, const dfield *f)
{
    return *(const double *)((const char *)base + f->off);
}

void ao_iter_record_init(ao_iter_record *r)
{
    memset(r, 0, sizeof *r);
    r->phase = phases[0];
    r->world_size = 1;
    for (size_t i = 0; i < NELEM(train_fields); i++) *dptr(r, &train_fields[i]) = NAN;
    for (size_t i = 0; i < NELEM(optional_record_fields); i++)
        *dptr(r, &optional_record_fields[i]) = NAN;
    r->samples = -1;
    r->m.overlap_ratio = r->m.compute_covered_ratio = r->m.overlap_efficiency = NAN;
    r->m.host_wait_ms = NAN;
    for (int k = 0; k < AO_NKINDS; k++) r->m.exposed_kind_ms[k] = NAN;
}

void ao_iter_record_free(ao_iter_record *r)
{
    free(r->ops_storage);
    free(r->names_storage);
    r->ops_storage = NULL;
    r->names_storage = NULL;
    r->ops = NULL;
    r->nops = 0;
}

void ao_iter_record_move(ao_iter_record *dst, ao_iter_record *src)
{
    *dst = *src;
    src->ops_storage = NULL;
    src->names_storage = NULL;
    src->ops = NULL;
    src->nops = 0;
}

/* Returns 0, or -1 after printing why. */
static int gen_ops(ao_json_writer *o, const ao_op *ops, size_t n)
{
    ao_jw_aopen(o, NULL);
    for (size_t i = 0; i < n; i++) {
        const ao_op *op = &ops[i];
        if (op->stream >= AO_NSTREAMS || op->cls > AO_CLASS_COPY || op->kind < AO_KIND_NONE ||
            op->kind >= AO_NKINDS) {
            ao_error("metrics record", "op %zu (%s) has stream %d, class %d, kind %d: out of range",
                     i, op->name ? op->name : "?", op->stream, op->cls, op->kind);
            return -1;
        }
        ao_jw_open(o, NULL);
        ao_jw_str(o, "stream", ao_stream_id_name((ao_stream_id)op->stream));
        ao_jw_str(o, "name", op->name);
        ao_jw_str(o, "class", ao_op_class_name((ao_op_class)op->cls));
        ao_jw_key(o, "kind");
        if (op->kind == AO_KIND_NONE)
            ao_jw_null(o, NULL);
        else
            ao_jw_str(o, NULL, ao_coll_kind_name((ao_coll_kind)op->kind));
        ao_jw_key(o, "unit");
        if (op->unit < 0)
            ao_jw_null(o, NULL);
        else
            ao_jw_int(o, NULL, op->unit);
        ao_jw_double(o, "start_us", op->start_us);
        ao_jw_double(o, "end_us", op->end_us);
        if (op->has_issue) ao_jw_double(o, "issue_us", op->issue_us);
        ao_jw_u64(o, "bytes", op->bytes);
        ao_jw_close(o);
    }
    ao_jw_aclose(o);
    return 0;
}

/* The §7 fields of m as key/value pairs of the open map. */
static void gen_overlap(ao_json_writer *o, const ao_overlap *m, int with_streams)
{
    for (size_t i = 0; i < NELEM(overlap_fields); i++) {
        ao_jw_double(o, overlap_fields[i].key, dget(m, &overlap_fields[i]));
    }
    for (size_t i = 0; i < NELEM(optional_overlap_fields); i++)
        ao_jw_double(o, optional_overlap_fields[i].key, dget(m, &optional_overlap_fields[i]));
    char key[64];
    for (int k = 0; k < AO_NKINDS; k++) {
        snprintf(key, sizeof key, "compute_%s_ms", ao_coll_kind_name((ao_coll_kind)k));
        ao_jw_double(o, key, m->compute_kind_ms[k]);
        snprintf(key, sizeof key, "exposed_%s_ms", ao_coll_kind_name((ao_coll_kind)k));
        ao_jw_double(o, key, m->exposed_kind_ms[k]);
    }
    if (with_streams) {
        ao_jw_open(o, "streams");
        for (int s = 0; s < AO_NSTREAMS; s++) {
            ao_jw_open(o, ao_stream_id_name((ao_stream_id)s));
            ao_jw_int(o, "ops", m->streams[s].ops);
            ao_jw_double(o, "busy_ms", m->streams[s].busy_ms);
            ao_jw_close(o);
        }
        ao_jw_close(o);
    }
    ao_jw_open(o, "collectives");
    for (int k = 0; k < AO_NKINDS; k++) {
        const ao_kind_stats *ks = &m->kinds[k];
        ao_jw_open(o, ao_coll_kind_name((ao_coll_kind)k));
        ao_jw_int(o, "ops", ks->ops);
        ao_jw_u64(o, "bytes", ks->bytes);
        ao_jw_double(o, "busy_ms", ks->busy_ms);
        ao_jw_double(o, "algbw_gbps", ks->algbw_gbps);
        ao_jw_double(o, "busbw_gbps", ks->busbw_gbps);
        ao_jw_close(o);
    }
    ao_jw_close(o);
}

yajl_gen_status ao_overlap_gen_fields(yajl_gen g, const ao_overlap *m, int with_streams)
{
    ao_json_writer o = {g, yajl_gen_status_ok};
    gen_overlap(&o, m, with_streams);
    return o.st;
}

/* The whole record into g (one line, no newline). 0 or -1 after printing. */
static int gen_record(yajl_gen g, const ao_iter_record *r)
{
    if (!r->phase) {
        ao_error("metrics record", "step %lld has no phase", r->step);
        return -1;
    }
    ao_json_writer o = {g, yajl_gen_status_ok};
    const ao_overlap *m = &r->m;
    ao_jw_open(&o, NULL);
    ao_jw_int(&o, "schema", AO_JSONL_SCHEMA);
    ao_jw_int(&o, "rank", r->rank);
    ao_jw_int(&o, "world_size", r->world_size);
    ao_jw_int(&o, "step", r->step);
    ao_jw_str(&o, "phase", r->phase);
    ao_jw_double(&o, "wall_time", r->wall_time);
    gen_overlap(&o, m, 1);
    for (size_t i = 0; i < NELEM(train_fields); i++) {
        ao_jw_double(&o, train_fields[i].key, dget(r, &train_fields[i]));
    }
    for (size_t i = 0; i < NELEM(optional_record_fields); i++)
        ao_jw_double(&o, optional_record_fields[i].key, dget(r, &optional_record_fields[i]));
    ao_jw_key(&o, "samples");
    if (r->samples < 0)
        ao_jw_null(&o, NULL);
    else
        ao_jw_int(&o, NULL, r->samples);
    if (r->ops) {
        ao_jw_key(&o, "ops");
        if (gen_ops(&o, r->ops, r->nops) != 0) return -1;
    }
    if (r->extra) {
        ao_jw_open(&o, "extra");
        if (o.st == yajl_gen_status_ok && r->extra(r->extra_ctx, g) != 0) {
            ao_error("metrics record", "step %lld: the \"extra\" writer failed", r->step);
            return -1;
        }
        ao_jw_close(&o);
    }
    ao_jw_close(&o);
    if (o.st != yajl_gen_status_ok) {
        ao_error("metrics record", "step %lld: JSON generation failed (yajl status %d)", r->step,
                 (int)o.st);
        return -1;
    }
    return 0;
}

char *ao_iter_record_format(const ao_iter_record *r, size_t *len)
{
    yajl_gen g = ao_json_gen_new(0);
    char *line = NULL;
    if (gen_record(g, r) == 0) {
        const unsigned char *buf;
        size_t n;
        yajl_gen_get_buf(g, &buf, &n);
        line = ao_malloc(n + 2);
        memcpy(line, buf, n);
        line[n++] = '\n';
        line[n] = '\0';
        if (len) *len = n;
    }
    yajl_gen_free(g);
    return line;
}

/* ---- writer ------------------------------------------------------------------ */

struct ao_jsonl_writer {
    int fd;
    char *path;
    yajl_gen g;
    char *buf; /* complete lines not yet written */
    size_t len, cap;
    int pending, flush_every;
    off_t written; /* the file's length: whole lines only */
    int err;       /* errno of the write that failed (sticky), 0 while none did */
};

ao_jsonl_writer *ao_jsonl_open(const char *path, int flush_every)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno == EEXIST) {
            ao_error(path, "the metrics file already exists; aorta never appends to an older "
                           "run's file");
            ao_hint("start a new run (another --run-name or run directory)");
        } else {
            ao_error(path, "cannot create the metrics file: %s", strerror(errno));
        }
        return NULL;
    }
    ao_jsonl_writer *w = ao_calloc(1, sizeof *w);
    w->fd = fd;
    w->path = ao_strdup(path);
    w->g = ao_json_gen_new(0);
    w->flush_every = flush_every < 1 ? 1 : flush_every;
    return w;
}

int ao_jsonl_append(ao_jsonl_writer *w, const ao_iter_record *r)
{
    if (w->err) return -1;
    yajl_gen_reset(w->g, NULL);
    yajl_gen_clear(w->g);
    if (gen_record(w->g, r) != 0) return -1;
    const unsigned char *line;
    size_t n;
    yajl_gen_get_buf(w->g, &line, &n);
    if (w->len + n + 1 > w->cap) {
        w->cap = (w->len + n + 1) * 2;
        w->buf = ao_realloc(w->buf, w->cap);
    }
    memcpy(w->buf + w->len, line, n);
    w->len += n;
    w->buf[w->len++] = '\n';
    if (++w->pending >= w->flush_every) return ao_jsonl_flush(w);
    return 0;
}

int ao_jsonl_flush(ao_jsonl_writer *w)
{
    if (w->err) return -1;
    /* Whole lines in one write(2): a killed run leaves only complete lines
     * (ao_write_all finishes a short write). One that fails (a full disk)
     * is cut back to the last whole line, and said once. */
    if (w->len > 0 && ao_write_all(w->fd, w->buf, w->len) != 0) {
        w->err = errno;
        if (ftruncate(w->fd, w->written) != 0)
            ao_warn("%s: cannot cut the partial line off: %s", w->path, strerror(errno));
        ao_error(w->path, "cannot write metrics: %s", strerror(w->err));
        return -1;
    }
    w->written += (off_t)w->len;
    w->len = 0;
    w->pending = 0;
    return 0;
}

int ao_jsonl_error(const ao_jsonl_writer *w)
{
    return w ? w->err : 0;
}

int ao_jsonl_close(ao_jsonl_writer *w)
{
    if (!w) return 0;
    int rc = ao_jsonl_flush(w);
    if (close(w->fd) != 0 && rc == 0) {
        w->err = errno;
        ao_error(w->path, "cannot close the metrics file: %s", strerror(errno));
        rc = -1;
    }
    yajl_gen_free(w->g);
    free(w->buf);
    free(w->path);
    free(w);
    return rc;
}

/* ---- reader ------------------------------------------------------------------ */

/* A field lookup that names "file:line" and the field's dotted path. */
typedef struct in {
    const char *where;
    const char *prefix; /* "", "streams.compute.", "ops[3]." */
} in;

static yajl_val need(const in *c, yajl_val obj, const char *key)
{
    yajl_val v = ao_json_member(obj, key);
    if (!v) ao_error(c->where, "field \"%s%s\" is missing", c->prefix, key);
    return v;
}

static int wrong_type(const in *c, const char *key, const char *what)
{
    ao_error(c->where, "field \"%s%s\" must be %s", c->prefix, key, what);
    return -1;
}

static int get_ll(const in *c, yajl_val obj, const char *key, long long lo, long long hi,
                  long long *out)
{
    yajl_val v = need(c, obj, key);
    if (!v) return -1;
    if (!YAJL_IS_INTEGER(v)) return wrong_type(c, key, "an integer");
    long long x = YAJL_GET_INTEGER(v);
    if (x < lo || x > hi) {
        ao_error(c->where, "field \"%s%s\" is %lld; allowed: %lld to %lld", c->prefix, key, x, lo,
                 hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int get_int(const in *c, yajl_val obj, const char *key, long long lo, long long hi, int *out)
{
    long long x;
    if (get_ll(c, obj, key, lo, hi, &x)) return -1;
    *out = (int)x;
    return 0;
}

static int get_u64(const in *c, yajl_val obj, const char *key, uint64_t *out)
{
    yajl_val v = need(c, obj, key);
    if (!v) return -1;
    /* Beyond LLONG_MAX yajl has no integer: take the text, digits only. */
    if (!YAJL_IS_NUMBER(v) || strspn(v->u.number.r, "0123456789") != strlen(v->u.number.r))
        return wrong_type(c, key, "a non-negative integer");
    errno = 0;
    *out = strtoull(v->u.number.r, NULL, 10);
    if (errno) return wrong_type(c, key, "an integer below 2^64");
    return 0;
}

/* A number, or null for NAN. */
static int get_dbl(const in *c, yajl_val obj, const char *key, int null_ok, double *out)
{
    yajl_val v = need(c, obj, key);
    if (!v) return -1;
    if (null_ok && YAJL_IS_NULL(v)) {
        *out = NAN;
        return 0;
    }
    if (!YAJL_IS_NUMBER(v)) return wrong_type(c, key, null_ok ? "a number or null" : "a number");
    *out = ao_json_number(v);
    /* 1e999 parses as inf: as wrong as NaN, which JSON cannot even spell. */
    if (!isfinite(*out))
        return wrong_type(c, key, null_ok ? "a finite number or null" : "a finite number");
    size_t n = strlen(key);
    if (*out < 0 && n > 3 && strcmp(key + n - 3, "_ms") == 0) /* every *_ms is a duration */
        ao_warn("%s: field \"%s%s\" is a negative duration (%g)", c->where, c->prefix, key, *out);
    return 0;
}

/* A number or null when present, NAN when absent (a field older files lack). */
static int get_dbl_opt(const in *c, yajl_val obj, const char *key, double *out)
{
    *out = NAN;
    return ao_json_member(obj, key) ? get_dbl(c, obj, key, 1, out) : 0;
}

static yajl_val get_obj(const in *c, yajl_val obj, const char *key)
{
    yajl_val v = need(c, obj, key);
    if (v && !YAJL_IS_OBJECT(v)) {
        wrong_type(c, key, "an object");
        return NULL;
    }
    return v;
}

/* The string member `key`, matched against names(i) for i in [0, n). */
static int get_enum(const in *c, yajl_val obj, const char *key, const char *(*names)(int), int n,
                    int *out)
{
    yajl_val v = need(c, obj, key);
    if (!v) return -1;
    if (!YAJL_IS_STRING(v)) return wrong_type(c, key, "a string");
    for (int i = 0; i < n; i++) {
        if (strcmp(v->u.string, names(i)) == 0) {
            *out = i;
            return 0;
        }
    }
    ao_error(c->where, "field \"%s%s\" is \"%s\", which is not a known name", c->prefix, key,
             v->u.string);
    return -1;
}

static const char *stream_name(int i)
{
    return ao_stream_id_name((ao_stream_id)i);
}
static const char *class_name(int i)
{
    return ao_op_class_name((ao_op_class)i);
}
static const char *kind_name(int i)
{
    return ao_coll_kind_name((ao_coll_kind)i);
}
static const char *phase_name(int i)
{
    return phases[i];
}

static int parse_ops(const in *top, yajl_val arr, ao_iter_record *out)
{
    if (!YAJL_IS_ARRAY(arr)) return wrong_type(top, "ops", "an array");
    size_t n = arr->u.array.len, names_len = 0;
    for (size_t i = 0; i < n; i++) {
        yajl_val nm = ao_json_member(arr->u.array.values[i], "name");
        if (YAJL_IS_STRING(nm)) names_len += strlen(nm->u.string) + 1;
    }
    out->ops_storage = ao_calloc(n ? n : 1, sizeof(ao_op));
    out->names_storage = ao_malloc(names_len + 1);
    char *names = out->names_storage;
    char prefix[48];
    in c = {top->where, prefix};
    for (size_t i = 0; i < n; i++) {
        yajl_val e = arr->u.array.values[i];
        ao_op *op = &out->ops_storage[i];
        snprintf(prefix, sizeof prefix, "ops[%zu].", i);
        if (!YAJL_IS_OBJECT(e)) {
            ao_error(top->where, "field \"ops[%zu]\" must be an object", i);
            return -1;
        }
        int stream, cls, kind = AO_KIND_NONE;
        if (get_enum(&c, e, "stream", stream_name, AO_NSTREAMS, &stream)) return -1;
        if (get_enum(&c, e, "class", class_name, AO_CLASS_COPY + 1, &cls)) return -1;
        yajl_val k = need(&c, e, "kind");
        if (!k) return -1;
        if (!YAJL_IS_NULL(k) && get_enum(&c, e, "kind", kind_name, AO_NKINDS, &kind)) return -1;
        yajl_val nm = need(&c, e, "name");
        if (!nm) return -1;
        if (!YAJL_IS_STRING(nm)) return wrong_type(&c, "name", "a string");
        size_t len = strlen(nm->u.string);
        memcpy(names, nm->u.string, len + 1);
        op->name = names;
        names += len + 1;
        yajl_val u = need(&c, e, "unit");
        if (!u) return -1;
        int unit = -1;
        if (!YAJL_IS_NULL(u) && get_int(&c, e, "unit", 0, INT16_MAX, &unit)) return -1;
        if (get_dbl(&c, e, "start_us", 0, &op->start_us) ||
            get_dbl(&c, e, "end_us", 0, &op->end_us) || get_u64(&c, e, "bytes", &op->bytes) ||
            get_dbl_opt(&c, e, "issue_us", &op->issue_us))
            return -1;
        op->has_issue = isfinite(op->issue_us);
        op->stream = (uint8_t)stream;
        op->cls = (uint8_t)cls;
        op->kind = (int8_t)kind;
        op->unit = (int16_t)unit;
    }
    out->ops = out->ops_storage;
    out->nops = n;
    return 0;
}

static int parse_record(yajl_val obj, const char *where, ao_iter_record *r)
{
    in c = {where, ""};
    long long schema;
    yajl_val sv = need(&c, obj, "schema");
    if (!sv) return -1;
    if (!YAJL_IS_INTEGER(sv)) return wrong_type(&c, "schema", "an integer");
    schema = YAJL_GET_INTEGER(sv);
    if (schema != AO_JSONL_SCHEMA) {
        ao_error(where, "the record has schema %lld; this aorta reads schema %d", schema,
                 AO_JSONL_SCHEMA);
        ao_hint("read it with the aorta version that wrote it");
        return -1;
    }
    int phase;
    if (get_int(&c, obj, "world_size", 1, 1 << 24, &r->world_size) ||
        get_int(&c, obj, "rank", 0, r->world_size - 1, &r->rank) ||
        get_ll(&c, obj, "step", 0, INT64_MAX, &r->step) ||
        get_enum(&c, obj, "phase", phase_name, (int)NELEM(phases), &phase) ||
        get_dbl(&c, obj, "wall_time", 1, &r->wall_time))
        return -1;
    r->phase = phases[phase];
    ao_overlap *m = &r->m;
    for (size_t i = 0; i < NELEM(overlap_fields); i++)
        if (get_dbl(&c, obj, overlap_fields[i].key, 1, dptr(m, &overlap_fields[i]))) return -1;
    for (size_t i = 0; i < NELEM(optional_overlap_fields); i++)
        if (get_dbl_opt(&c, obj, optional_overlap_fields[i].key,
                        dptr(m, &optional_overlap_fields[i])))
            return -1;
    /* Overlap lies inside compute and communication, both inside the step: a
     * record that says otherwise is warned about, as a negative duration is
     * (rounding aside: the tolerance). */
    if (m->overlap_ms > m->step_ms * (1 + 1e-9) + 1e-9)
        ao_warn("%s: field \"overlap_ms\" (%g) is larger than \"step_ms\" (%g)", where,
                m->overlap_ms, m->step_ms);
    char key[64];
    for (int k = 0; k < AO_NKINDS; k++) {
        snprintf(key, sizeof key, "compute_%s_ms", kind_name(k));
        if (get_dbl(&c, obj, key, 1, &m->compute_kind_ms[k])) return -1;
        snprintf(key, sizeof key, "exposed_%s_ms", kind_name(k));
        if (get_dbl_opt(&c, obj, key, &m->exposed_kind_ms[k])) return -1;
    }
    char prefix[64];
    in sub = {where, prefix};
    yajl_val streams = get_obj(&c, obj, "streams");
    if (!streams) return -1;
    for (int s = 0; s < AO_NSTREAMS; s++) {
        snprintf(prefix, sizeof prefix, "streams.");
        yajl_val so = get_obj(&sub, streams, stream_name(s));
        if (!so) return -1;
        snprintf(prefix, sizeof prefix, "streams.%s.", stream_name(s));
        if (get_int(&sub, so, "ops", 0, INT32_MAX, &m->streams[s].ops) ||
            get_dbl(&sub, so, "busy_ms", 1, &m->streams[s].busy_ms))
            return -1;
    }
    yajl_val colls = get_obj(&c, obj, "collectives");
    if (!colls) return -1;
    for (int k = 0; k < AO_NKINDS; k++) {
        ao_kind_stats *ks = &m->kinds[k];
        snprintf(prefix, sizeof prefix, "collectives.");
        yajl_val ko = get_obj(&sub, colls, kind_name(k));
        if (!ko) return -1;
        snprintf(prefix, sizeof prefix, "collectives.%s.", kind_name(k));
        if (get_int(&sub, ko, "ops", 0, INT32_MAX, &ks->ops) ||
            get_u64(&sub, ko, "bytes", &ks->bytes) ||
            get_dbl(&sub, ko, "busy_ms", 1, &ks->busy_ms) ||
            get_dbl(&sub, ko, "algbw_gbps", 1, &ks->algbw_gbps) ||
            get_dbl(&sub, ko, "busbw_gbps", 1, &ks->busbw_gbps))
            return -1;
    }
    for (size_t i = 0; i < NELEM(train_fields); i++)
        if (get_dbl(&c, obj, train_fields[i].key, 1, dptr(r, &train_fields[i]))) return -1;
    for (size_t i = 0; i < NELEM(optional_record_fields); i++)
        if (get_dbl_opt(&c, obj, optional_record_fields[i].key,
                        dptr(r, &optional_record_fields[i])))
            return -1;
    yajl_val sm = need(&c, obj, "samples");
    if (!sm) return -1;
    r->samples = -1;
    if (!YAJL_IS_NULL(sm) && get_ll(&c, obj, "samples", 0, INT64_MAX, &r->samples)) return -1;
    yajl_val ops = ao_json_member(obj, "ops");
    if (ops && parse_ops(&c, ops, r)) return -1;
    return 0;
}

int ao_iter_record_parse(yajl_val obj, const char *where, ao_iter_record *out)
{
    ao_iter_record_init(out);
    if (!YAJL_IS_OBJECT(obj)) {
        ao_error(where, "a metrics record must be a JSON object");
        return AO_EXIT_USAGE;
    }
    if (parse_record(obj, where, out) != 0) {
        ao_iter_record_free(out);
        return AO_EXIT_USAGE;
    }
    return 0;
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

int ao_jsonl_read(const char *path, ao_jsonl_record_fn fn, void *ctx, ao_jsonl_stats *stats)
{
    ao_jsonl_stats st = {0};
    FILE *f = ao_open_input_file(path, "metrics file");
    if (!f) {
        if (stats) *stats = st;
        return AO_EXIT_USAGE;
    }
    char *line = NULL, err[256], where[4096];
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) != -1) {
        st.lines++;
        int terminated = len > 0 && line[len - 1] == '\n';
        if (terminated) line[--len] = '\0';
        if (is_blank(line, (size_t)len)) {
            st.blank++;
            continue;
        }
        snprintf(where, sizeof where, "%s:%zu", path, st.lines);
        yajl_val v = NULL;
        if (strlen(line) == (size_t)len)
            v = yajl_tree_parse(line, err, sizeof err);
        else
            snprintf(err, sizeof err, "the line contains a NUL byte");
        if (!v) {
            if (!terminated) {
                st.truncated++;
                ao_warn("%s: the last line is incomplete (the run was stopped while writing "
                        "it); skipped",
                        where);
                break;
            }
            err[strcspn(err, "\n")] = '\0';
            ao_error(where, "not a valid JSON line: %s", err);
            rc = AO_EXIT_USAGE;
            break;
        }
        ao_iter_record r;
        rc = ao_iter_record_parse(v, where, &r);
        if (rc == 0) {
            r.line = st.lines;
            st.records++;
            rc = fn ? fn(ctx, &r, v) : 0;
            ao_iter_record_free(&r);
        }
        yajl_tree_free(v);
    }
    if (rc == 0 && ferror(f)) {
        ao_error(path, "cannot read the metrics file: %s", strerror(errno));
        rc = AO_EXIT_USAGE;
    }
    free(line);
    fclose(f);
    if (stats) *stats = st;
    return rc;
}

typedef struct collect {
    ao_iter_record *recs;
    size_t n, cap;
} collect;

static int collect_one(void *ctx, ao_iter_record *r, yajl_val line)
{
    collect *c = ctx;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->recs = ao_realloc(c->recs, c->cap * sizeof *c->recs);
    }
    ao_iter_record_move(&c->recs[c->n++], r);
    return 0;
}

int ao_jsonl_read_all(const char *path, ao_iter_record **recs, size_t *n, ao_jsonl_stats *stats)
{
    collect c = {0};
    int rc = ao_jsonl_read(path, collect_one, &c, stats);
    if (rc != 0) {
        ao_iter_records_free(c.recs, c.n);
        c.recs = NULL;
        c.n = 0;
    }
    *recs = c.recs;
    *n = c.n;
    return rc;
}

void ao_iter_records_free(ao_iter_record *recs, size_t n)
{
    for (size_t i = 0; i < n; i++) ao_iter_record_free(&recs[i]);
    free(recs);
}
