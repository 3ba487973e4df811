#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/json.h"
#include "core/rundir.h"
#include "runs/trace.h"

/* Buffered JSON is written out once it grows past this. */
#define FLUSH_BYTES (1u << 20)

/* Named threads of a rank: streams, the iterations thread, kernel lanes. */
#define SLOT_ITERATIONS AO_NSTREAMS
#define SLOT_KERNELS    (AO_NSTREAMS + 1)
#define NSLOTS          (SLOT_KERNELS + AO_TRACE_MAX_LANES)

typedef struct rank_info {
    int present;
    int64_t anchor_ns;
    unsigned char named[NSLOTS];
} rank_info;

struct ao_trace {
    char *path, *tmp;
    int fd;
    ao_json_writer w; /* its st: the first failure of any generator call */
    int io_failed;
    rank_info *ranks;
    int nranks; /* size of ranks[] */
    int events_started;
    int64_t origin_ns;
    ao_op *sorted;            /* scratch for ordering one call's ops */
    unsigned long long flows; /* flow ids given out */
    size_t sorted_cap;
};

/* Write what the generator holds to the temporary file. */
static int drain(ao_trace *t, size_t threshold)
{
    const unsigned char *buf;
    size_t len;
    if (t->io_failed) return -1;
    if (yajl_gen_get_buf(t->w.g, &buf, &len) != yajl_gen_status_ok || len < threshold) return 0;
    if (ao_write_all(t->fd, buf, len) != 0) {
        ao_error(t->path, "cannot write %s: %s", t->tmp, strerror(errno));
        t->io_failed = 1;
        return -1;
    }
    yajl_gen_clear(t->w.g);
    return 0;
}

static int finish_call(ao_trace *t)
{
    if (t->w.st != yajl_gen_status_ok) {
        ao_error(t->path, "internal error: JSON generation failed (yajl status %d)", (int)t->w.st);
        return -1;
    }
    return drain(t, FLUSH_BYTES);
}

/* ---- open / close ------------------------------------------------------------------- */

ao_trace *ao_trace_open(const char *path)
{
    ao_trace *t = ao_calloc(1, sizeof *t);
    t->path = ao_strdup(path);
    t->tmp = ao_asprintf("%s.tmp.%ld", path, (long)getpid());
    t->fd = open(t->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (t->fd < 0) {
        ao_error(path, "cannot create %s: %s", t->tmp, strerror(errno));
        free(t->tmp);
        free(t->path);
        free(t);
        return NULL;
    }
    t->w.g = ao_json_gen_new(0);
    ao_jw_open(&t->w, NULL);
    ao_jw_str(&t->w, "displayTimeUnit", "ms");
    ao_jw_aopen(&t->w, "traceEvents");
    return t;
}

static void free_trace(ao_trace *t)
{
    yajl_gen_free(t->w.g);
    free(t->ranks);
    free(t->sorted);
    free(t->tmp);
    free(t->path);
    free(t);
}

void ao_trace_abort(ao_trace *t)
{
    if (!t) return;
    close(t->fd);
    unlink(t->tmp);
    free_trace(t);
}

int ao_trace_close(ao_trace *t, const ao_json_object *other)
{
    ao_jw_aclose(&t->w);
    ao_jw_open(&t->w, "otherData");
    ao_jw_str(&t->w, "generator", "aorta " AORTA_VERSION);
    ao_jw_str(&t->w, "clock", "CLOCK_REALTIME");
    ao_jw_int(&t->w, "time_origin_realtime_ns", t->origin_ns);
    for (size_t i = 0; other && i < other->n; i++) {
        ao_jw_value(&t->w, other->fields[i].key, &other->fields[i].v);
    }
    ao_jw_close(&t->w);
    ao_jw_close(&t->w);
    int rc = finish_call(t);
    if (rc == 0) rc = drain(t, 0);
    if (rc == 0 && ao_write_all(t->fd, "\n", 1) != 0) {
        ao_error(t->path, "cannot write %s: %s", t->tmp, strerror(errno));
        rc = -1;
    }
    if (close(t->fd) != 0 && rc == 0) {
        ao_error(t->path, "cannot write %s: %s", t->tmp, strerror(errno));
        rc = -1;
    }
    if (rc == 0 && rename(t->tmp, t->path) != 0) {
        ao_error(t->path, "cannot rename %s into place: %s", t->tmp, strerror(errno));
        rc = -1;
    }
    if (rc != 0) unlink(t->tmp);
    free_trace(t);
    return rc == 0 ? AO_EXIT_OK : AO_EXIT_FAIL;
}

/* ---- ranks and threads ---------------------------------------------------------------- */

static void gen_metadata(ao_trace *t, const char *what, int pid, int tid, const char *key,
                         const char *s, long long v)
{
    ao_jw_open(&t->w, NULL);
    ao_jw_str(&t->w, "ph", "M");
    ao_jw_str(&t->w, "name", what);
    ao_jw_int(&t->w, "pid", pid);
    ao_jw_int(&t->w, "tid", tid);
    ao_jw_open(&t->w, "args");
    ao_jw_key(&t->w, key);
    if (s)
        ao_jw_str(&t->w, NULL, s);
    else
        ao_jw_int(&t->w, NULL, v);
    ao_jw_close(&t->w);
    ao_jw_close(&t->w);
}

int ao_trace_add_rank(ao_trace *t, int rank, int64_t anchor_realtime_ns)
{
    if (rank < 0) {
        ao_error(t->path, "rank %d is negative", rank);
        return -1;
    }
    if (t->events_started) {
        ao_error(t->path, "rank %d added after the first event: add every rank first", rank);
        return -1;
    }
    if (rank >= t->nranks) {
        int n = rank + 1;
        t->ranks = ao_realloc(t->ranks, (size_t)n * sizeof *t->ranks);
        memset(t->ranks + t->nranks, 0, (size_t)(n - t->nranks) * sizeof *t->ranks);
        t->nranks = n;
    }
    if (t->ranks[rank].present) {
        ao_error(t->path, "rank %d added twice", rank);
        return -1;
    }
    t->ranks[rank].present = 1;
    t->ranks[rank].anchor_ns = anchor_realtime_ns;
    char name[32];
    snprintf(name, sizeof name, "rank %d", rank);
    gen_metadata(t, "process_name", rank, 0, "name", name, 0);
    gen_metadata(t, "process_sort_index", rank, 0, "sort_index", NULL, rank);
    return finish_call(t);
}

/* The rank's info, fixing the time origin at the first event. */
static rank_info *rank_for_event(ao_trace *t, int rank)
{
    if (rank < 0 || rank >= t->nranks || !t->ranks[rank].present) {
        ao_error(t->path, "rank %d was not added before its events", rank);
        return NULL;
    }
    if (!t->events_started) {
        t->events_started = 1;
        int first = 1;
        for (int r = 0; r < t->nranks; r++) {
            if (!t->ranks[r].present) continue;
            if (first || t->ranks[r].anchor_ns < t->origin_ns) t->origin_ns = t->ranks[r].anchor_ns;
            first = 0;
        }
    }
    return &t->ranks[rank];
}

static double trace_ts(const ao_trace *t, const rank_info *ri, double rel_us)
{
    return (double)(ri->anchor_ns - t->origin_ns) / 1000.0 + rel_us;
}

/* thread_name and thread_sort_index the first time a thread is used. */
static void name_thread(ao_trace *t, rank_info *ri, int pid, int slot, int tid, const char *name)
{
    if (ri->named[slot]) return;
    ri->named[slot] = 1;
    gen_metadata(t, "thread_name", pid, tid, "name", name, 0);
    gen_metadata(t, "thread_sort_index", pid, tid, "sort_index", NULL, slot);
}

/* Opens a complete ("X") event and leaves it open for its args. */
static void begin_complete(ao_trace *t, const char *name, const char *cat, int pid, int tid,
                           double ts, double dur)
{
    ao_jw_open(&t->w, NULL);
    ao_jw_str(&t->w, "ph", "X");
    ao_jw_str(&t->w, "name", name);
    ao_jw_str(&t->w, "cat", cat);
    ao_jw_int(&t->w, "pid", pid);
    ao_jw_int(&t->w, "tid", tid);
    ao_jw_double(&t->w, "ts", ts);
    ao_jw_double(&t->w, "dur", dur > 0 ? dur : 0);
}

static void gen_op_args(ao_trace *t, const ao_op *op, long long step)
{
    ao_jw_open(&t->w, "args");
    ao_jw_u64(&t->w, "bytes", op->bytes);
    ao_jw_key(&t->w, "unit");
    if (op->unit < 0)
        ao_jw_str(&t->w, NULL, NULL);
    else
        ao_jw_int(&t->w, NULL, op->unit);
    ao_jw_str(&t->w, "kind",
              op->kind == AO_KIND_NONE ? NULL : ao_coll_kind_name((ao_coll_kind)op->kind));
    if (step >= 0) {
        ao_jw_int(&t->w, "step", step);
    }
    ao_jw_close(&t->w);
}

static int by_lane_then_start(const void *a, const void *b)
{
    const ao_op *x = a, *y = b;
    if (x->stream != y->stream) return x->stream < y->stream ? -1 : 1;
    return (x->start_us > y->start_us) - (x->start_us < y->start_us);
}

/* A copy of ops ordered by thread and start, so each thread's ts never goes
 * back (ops arrive in issue order, which interleaves streams). */
static const ao_op *sorted_copy(ao_trace *t, const ao_op *ops, size_t n)
{
    if (n > t->sorted_cap) {
        t->sorted_cap = n;
        t->sorted = ao_realloc(t->sorted, n * sizeof *ops);
    }
    if (n == 0) return ops; /* t->sorted may still be NULL, which qsort must not see */
    memcpy(t->sorted, ops, n * sizeof *ops);
    qsort(t->sorted, n, sizeof *ops, by_lane_then_start);
    return t->sorted;
}

/* A flow arrow from a collective to the compute that waits on it: the first
 * compute op of the same unit to start at or after the collective's end,
 * else the first compute op to (ops sorted by start). Perfetto and HTA draw "s"/"f" pairs with one
 * id; "bp":"e" binds the end to the enclosing compute slice. */
static void add_flow(ao_trace *t, const rank_info *ri, int rank, const ao_op *ops, size_t n,
                     const ao_op *coll)
{
    const ao_op *waiter = NULL, *same_unit = NULL;
    for (size_t i = 0; i < n && !same_unit; i++) {
        if (ops[i].cls != AO_CLASS_COMPUTE || ops[i].start_us < coll->end_us) continue;
        if (!waiter) waiter = &ops[i];
        if (coll->unit >= 0 && ops[i].unit == coll->unit) same_unit = &ops[i];
    }
    if (same_unit) waiter = same_unit;
    if (!waiter) return;
    unsigned long long id = ++t->flows;
    const char *name =
        coll->kind == AO_KIND_NONE ? "comm" : ao_coll_kind_name((ao_coll_kind)coll->kind);
    for (int end = 0; end < 2; end++) {
        ao_jw_open(&t->w, NULL);
        ao_jw_str(&t->w, "ph", end ? "f" : "s");
        if (end) ao_jw_str(&t->w, "bp", "e");
        ao_jw_str(&t->w, "name", name);
        ao_jw_str(&t->w, "cat", "waits_on");
        ao_jw_u64(&t->w, "id", id);
        ao_jw_int(&t->w, "pid", rank);
        ao_jw_int(&t->w, "tid", end ? waiter->stream : coll->stream);
        /* the start inside the collective's slice, the end at the waiter's start */
        ao_jw_double(&t->w, "ts",
                     end ? trace_ts(t, ri, waiter->start_us)
                         : trace_ts(t, ri, (coll->start_us + coll->end_us) / 2));
        ao_jw_close(&t->w);
    }
}

int ao_trace_add_iteration(ao_trace *t, int rank, const ao_iter_record *r)
{
    rank_info *ri = rank_for_event(t, rank);
    if (!ri) return -1;
    const ao_overlap *m = &r->m;
    if (isfinite(m->window_start_us) && isfinite(m->window_end_us) &&
        m->window_end_us >= m->window_start_us) {
        name_thread(t, ri, rank, SLOT_ITERATIONS, AO_TRACE_TID_ITERATIONS, "iterations");
        char name[48];
        snprintf(name, sizeof name, "step %lld", r->step);
        begin_complete(t, name, "iteration", rank, AO_TRACE_TID_ITERATIONS,
                       trace_ts(t, ri, m->window_start_us), m->window_end_us - m->window_start_us);
        ao_jw_open(&t->w, "args");
        ao_jw_int(&t->w, "step", r->step);
        ao_jw_str(&t->w, "phase", r->phase);
        static const struct {
            const char *key;
            size_t off;
        } fields[] = {
            {"step_ms", offsetof(ao_overlap, step_ms)},
            {"compute_ms", offsetof(ao_overlap, compute_ms)},
            {"comm_ms", offsetof(ao_overlap, comm_ms)},
            {"overlap_ms", offsetof(ao_overlap, overlap_ms)},
            {"exposed_comm_ms", offsetof(ao_overlap, exposed_comm_ms)},
            {"idle_ms", offsetof(ao_overlap, idle_ms)},
            {"overlap_ratio", offsetof(ao_overlap, overlap_ratio)},
        };
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
            ao_jw_double(&t->w, fields[i].key, *(const double *)((const char *)m + fields[i].off));
        }
        ao_jw_close(&t->w);
        ao_jw_close(&t->w);
    }
    const ao_op *ops = sorted_copy(t, r->ops, r->ops ? r->nops : 0);
    for (size_t i = 0; r->ops && i < r->nops; i++) {
        const ao_op *op = &ops[i];
        if (op->stream >= AO_NSTREAMS) {
            ao_error(t->path, "rank %d step %lld: op \"%s\" has stream %d (there are %d)", rank,
                     r->step, op->name ? op->name : "?", op->stream, AO_NSTREAMS);
            return -1;
        }
        const char *sname = ao_stream_id_name((ao_stream_id)op->stream);
        name_thread(t, ri, rank, op->stream, op->stream, sname);
        begin_complete(t, op->name ? op->name : sname, ao_op_class_name((ao_op_class)op->cls), rank,
                       op->stream, trace_ts(t, ri, op->start_us), op->end_us - op->start_us);
        gen_op_args(t, op, r->step);
        ao_jw_close(&t->w);
    }
    for (size_t i = 0; r->ops && i < r->nops; i++)
        if (ops[i].cls == AO_CLASS_COMM) add_flow(t, ri, rank, ops, r->nops, &ops[i]);
    return finish_call(t);
}

/* What a kernel lane is called: the collective for communication kernels. */
static const char *lane_label(const ao_op *op)
{
    if (op->cls == AO_CLASS_COMM)
        return op->kind == AO_KIND_NONE ? "comm" : ao_coll_kind_name((ao_coll_kind)op->kind);
    return ao_op_class_name((ao_op_class)op->cls);
}

int ao_trace_add_kernels(ao_trace *t, int rank, const ao_op *ops, size_t n)
{
    rank_info *ri = rank_for_event(t, rank);
    if (!ri) return -1;
    const ao_op *sorted = sorted_copy(t, ops, n);
    for (size_t i = 0; i < n; i++) {
        const ao_op *op = &sorted[i];
        int tid = AO_TRACE_TID_KERNELS + op->stream;
        if (!ri->named[SLOT_KERNELS + op->stream]) {
            char name[64];
            snprintf(name, sizeof name, "kernels %d: %s", op->stream, lane_label(op));
            name_thread(t, ri, rank, SLOT_KERNELS + op->stream, tid, name);
        }
        begin_complete(t, op->name ? op->name : "kernel", ao_op_class_name((ao_op_class)op->cls),
                       rank, tid, trace_ts(t, ri, op->start_us), op->end_us - op->start_us);
        gen_op_args(t, op, -1);
        ao_jw_close(&t->w);
    }
    return finish_call(t);
}

int ao_trace_add_counter(ao_trace *t, int rank, const char *name, double rel_us, double value)
{
    rank_info *ri = rank_for_event(t, rank);
    if (!ri) return -1;
    if (!isfinite(value) || !isfinite(rel_us)) return 0;
    ao_jw_open(&t->w, NULL);
    ao_jw_str(&t->w, "ph", "C");
    ao_jw_str(&t->w, "name", name);
    ao_jw_str(&t->w, "cat", "telemetry");
    ao_jw_int(&t->w, "pid", rank);
    ao_jw_int(&t->w, "tid", 0);
    ao_jw_double(&t->w, "ts", trace_ts(t, ri, rel_us));
    ao_jw_open(&t->w, "args");
    ao_jw_double(&t->w, "value", value);
    ao_jw_close(&t->w);
    ao_jw_close(&t->w);
    return finish_call(t);
}

/* ---- kernels in a record's extra -------------------------------------------------------- */

yajl_gen_status ao_trace_gen_kernels(yajl_gen g, const ao_op *ops, size_t n)
{
    ao_json_writer w = {g, yajl_gen_status_ok};
    ao_jw_aopen(&w, "kernels");
    for (size_t i = 0; i < n; i++) {
        const ao_op *op = &ops[i];
        ao_jw_open(&w, NULL);
        ao_jw_int(&w, "lane", op->stream);
        ao_jw_str(&w, "name", op->name);
        ao_jw_str(&w, "class", ao_op_class_name((ao_op_class)op->cls));
        ao_jw_str(&w, "kind",
                  op->kind == AO_KIND_NONE ? NULL : ao_coll_kind_name((ao_coll_kind)op->kind));
        ao_jw_double(&w, "start_us", op->start_us);
        ao_jw_double(&w, "end_us", op->end_us);
        ao_jw_u64(&w, "bytes", op->bytes);
        ao_jw_close(&w);
    }
    ao_jw_aclose(&w);
    return w.st;
}

yajl_gen_status ao_trace_gen_kernel_extra(yajl_gen g, const ao_overlap *m, const ao_op *ops,
                                          size_t n)
{
    yajl_gen_status st = ao_json_gen_str(g, "overlap_kernels");
    if (st == yajl_gen_status_ok) st = yajl_gen_map_open(g);
    if (st == yajl_gen_status_ok) st = ao_overlap_gen_fields(g, m, 0);
    if (st == yajl_gen_status_ok) st = yajl_gen_map_close(g);
    if (st == yajl_gen_status_ok && ops) st = ao_trace_gen_kernels(g, ops, n);
    return st;
}

static int name_index(const char *s, const char *(*name)(int), int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, name(i)) == 0) return i;
    return -1;
}
static const char *class_name(int i)
{
    return ao_op_class_name((ao_op_class)i);
}
static const char *kind_name(int i)
{
    return ao_coll_kind_name((ao_coll_kind)i);
}

static int parse_kernels(yajl_val arr, const char *where, ao_op **ops, size_t *n)
{
    if (!YAJL_IS_ARRAY(arr)) {
        ao_error(where, "field \"extra.kernels\" must be an array");
        return AO_EXIT_USAGE;
    }
    *n = arr->u.array.len;
    *ops = ao_calloc(*n ? *n : 1, sizeof **ops);
    for (size_t i = 0; i < *n; i++) {
        yajl_val e = arr->u.array.values[i];
        yajl_val lane = ao_json_member(e, "lane"), nm = ao_json_member(e, "name");
        yajl_val cls = ao_json_member(e, "class"), kind = ao_json_member(e, "kind");
        yajl_val s = ao_json_member(e, "start_us"), en = ao_json_member(e, "end_us");
        yajl_val b = ao_json_member(e, "bytes");
        int ci =
            YAJL_IS_STRING(cls) ? name_index(cls->u.string, class_name, AO_CLASS_COPY + 1) : -1;
        int ki = YAJL_IS_STRING(kind) ? name_index(kind->u.string, kind_name, AO_NKINDS) : -1;
        if (!YAJL_IS_INTEGER(lane) || YAJL_GET_INTEGER(lane) < 0 ||
            YAJL_GET_INTEGER(lane) >= AO_TRACE_MAX_LANES || !YAJL_IS_STRING(nm) || ci < 0 ||
            (!YAJL_IS_NULL(kind) && ki < 0) || !YAJL_IS_NUMBER(s) || !YAJL_IS_NUMBER(en) ||
            !YAJL_IS_INTEGER(b) || YAJL_GET_INTEGER(b) < 0) {
            ao_error(where,
                     "\"extra.kernels[%zu]\" must have lane (0..%d), name, class, kind, "
                     "start_us, end_us and bytes",
                     i, AO_TRACE_MAX_LANES - 1);
            free(*ops);
            *ops = NULL;
            return AO_EXIT_USAGE;
        }
        ao_op *op = &(*ops)[i];
        op->stream = (uint8_t)YAJL_GET_INTEGER(lane);
        op->name = nm->u.string;
        op->cls = (uint8_t)ci;
        op->kind = (int8_t)(YAJL_IS_NULL(kind) ? AO_KIND_NONE : ki);
        op->unit = -1;
        op->start_us = ao_json_number(s);
        op->end_us = ao_json_number(en);
        op->bytes = (uint64_t)YAJL_GET_INTEGER(b);
    }
    return 0;
}

int ao_trace_record_kernels(yajl_val line, const char *path, long long step, ao_op **ops, size_t *n)
{
    *ops = NULL;
    *n = 0;
    yajl_val arr = ao_json_member(ao_json_member(line, "extra"), "kernels");
    if (!arr) return 0;
    char *where = ao_asprintf("%s: step %lld", path, step);
    int rc = parse_kernels(arr, where, ops, n);
    free(where);
    return rc;
}

/* ---- from a run directory ---------------------------------------------------------------- */

/* Pass 1 stops at the first record that tells the anchor. */
#define ANCHOR_FOUND 1000

typedef struct anchor_scan {
    int found;
    int64_t anchor_ns;
} anchor_scan;

static int scan_anchor(void *ctx, ao_iter_record *r, yajl_val line)
{
    (void)line;
    anchor_scan *a = ctx;
    if (!isfinite(r->wall_time) || !isfinite(r->m.window_start_us)) return 0;
    a->anchor_ns = llround(r->wall_time * 1e9 - r->m.window_start_us * 1e3);
    a->found = 1;
    return ANCHOR_FOUND;
}

typedef struct rank_pass {
    ao_trace *t;
    int rank;
    const char *path;
} rank_pass;

static int add_telemetry(ao_trace *t, int rank, yajl_val tel, double at_us)
{
    if (!YAJL_IS_OBJECT(tel)) return 0;
    for (size_t i = 0; i < tel->u.object.len; i++) {
        yajl_val v = tel->u.object.values[i];
        yajl_val mean = ao_json_member(v, "mean");
        if (!YAJL_IS_NUMBER(mean)) continue;
        if (ao_trace_add_counter(t, rank, tel->u.object.keys[i], at_us, ao_json_number(mean)))
            return AO_EXIT_FAIL;
    }
    return 0;
}

static int add_record(void *ctx, ao_iter_record *r, yajl_val line)
{
    rank_pass *p = ctx;
    if (ao_trace_add_iteration(p->t, p->rank, r)) return AO_EXIT_FAIL;
    ao_op *ops;
    size_t n;
    int rc = ao_trace_record_kernels(line, p->path, r->step, &ops, &n);
    if (rc == 0 && ops) rc = ao_trace_add_kernels(p->t, p->rank, ops, n) ? AO_EXIT_FAIL : 0;
    free(ops);
    if (rc) return rc;
    yajl_val extra = ao_json_member(line, "extra");
    return add_telemetry(p->t, p->rank, ao_json_member(extra, "telemetry"), r->m.window_start_us);
}

static yajl_val read_run_json(const char *path)
{
    char *text = ao_input_read(path, "run file", NULL);
    if (!text) {
        ao_hint("give the directory of one run (it holds run.json and rank_NN_metrics.jsonl)");
        return NULL;
    }
    char err[256] = "";
    yajl_val v = yajl_tree_parse(text, err, sizeof err);
    free(text);
    if (!v || !YAJL_IS_OBJECT(v)) {
        char *nl = strchr(err, '\n');
        if (nl) *nl = '\0';
        ao_error(path, "not a JSON object%s%s", err[0] ? ": " : "", err);
        yajl_tree_free(v);
        return NULL;
    }
    return v;
}

int ao_trace_from_run(const char *run_dir, const char *out_path)
{
    char *run_json = ao_asprintf("%s/%s", run_dir, AO_RUN_JSON);
    yajl_val run = read_run_json(run_json);
    if (!run) {
        free(run_json);
        return AO_EXIT_USAGE;
    }
    yajl_val ws = ao_json_member(run, "world_size");
    yajl_val anchor = ao_json_member(ao_json_member(run, "anchor"), "realtime_ns");
    if (!YAJL_IS_INTEGER(ws) || YAJL_GET_INTEGER(ws) < 1 || YAJL_GET_INTEGER(ws) > 1000000 ||
        !YAJL_IS_INTEGER(anchor)) {
        ao_error(run_json, "needs \"world_size\" (a positive integer) and "
                           "\"anchor\": {\"realtime_ns\": integer}");
        yajl_tree_free(run);
        free(run_json);
        return AO_EXIT_USAGE;
    }
    int world = (int)YAJL_GET_INTEGER(ws);
    int64_t run_anchor = YAJL_GET_INTEGER(anchor);

    ao_trace *t = ao_trace_open(out_path);
    int rc = t ? 0 : AO_EXIT_FAIL;
    char **paths = ao_calloc((size_t)world, sizeof *paths);
    for (int r = 0; r < world && rc == 0; r++) {
        char *name = ao_rank_file_name(r, world, AO_RANK_METRICS);
        paths[r] = ao_asprintf("%s/%s", run_dir, name);
        free(name);
        if (access(paths[r], F_OK) != 0) {
            ao_warn("%s: no metrics file; rank %d is left out of the trace", paths[r], r);
            free(paths[r]);
            paths[r] = NULL;
            continue;
        }
        anchor_scan a = {0, run_anchor};
        int s = ao_jsonl_read(paths[r], scan_anchor, &a, NULL);
        if (s != 0 && s != ANCHOR_FOUND) rc = s;
        if (rc == 0 && ao_trace_add_rank(t, r, a.anchor_ns)) rc = AO_EXIT_FAIL;
    }
    for (int r = 0; r < world && rc == 0; r++) {
        if (!paths[r]) continue;
        rank_pass p = {t, r, paths[r]};
        rc = ao_jsonl_read(paths[r], add_record, &p, NULL);
    }
    for (int r = 0; r < world; r++) free(paths[r]);
    free(paths);
    if (rc == 0) {
        yajl_val id = ao_json_member(run, "run_id");
        ao_json_field other[] = {
            {"run_id", ao_json_str(YAJL_IS_STRING(id) ? id->u.string : NULL)},
            {"world_size", ao_json_int(world)},
        };
        rc = ao_trace_close(t, &(ao_json_object){other, 2});
    } else {
        ao_trace_abort(t);
    }
    yajl_tree_free(run);
    free(run_json);
    return rc;
}
