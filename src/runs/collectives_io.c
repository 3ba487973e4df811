/* collectives.jsonl: one line per collective instance (collectives.h; the
 * schema is DESIGN §14's "collectives.jsonl"). Written line by line into a
 * temporary file renamed into place; read back line by line. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/json.h"
#include "runs/collectives.h"

/* ---- writing -------------------------------------------------------------------- */

static void member_array(ao_json_writer *o, const char *key, const ao_coll_set *s,
                         const ao_coll_instance *in, size_t field)
{
    ao_jw_aopen(o, key);
    for (size_t i = 0; i < in->n; i++) {
        const ao_coll_member *m = &s->members[in->first + i];
        switch (field) {
        case 0:
            ao_jw_int(o, NULL, m->rank);
            break;
        case 1:
            if (m->op_index < 0)
                ao_jw_null(o, NULL);
            else
                ao_jw_int(o, NULL, m->op_index);
            break;
        case 2:
            ao_jw_double(o, NULL, m->issue_us);
            break;
        case 3:
            ao_jw_double(o, NULL, m->start_us);
            break;
        default:
            ao_jw_double(o, NULL, m->end_us);
        }
    }
    ao_jw_aclose(o);
}

static void gen_instance(ao_json_writer *o, const ao_coll_set *s, const ao_coll_instance *in)
{
    ao_jw_open(o, NULL);
    ao_jw_int(o, "schema", AO_COLLECTIVES_SCHEMA);
    ao_jw_key(o, "step");
    if (in->step < 0)
        ao_jw_null(o, NULL);
    else
        ao_jw_int(o, NULL, in->step);
    ao_jw_str(o, "group", in->group);
    ao_jw_int(o, "seq", in->seq);
    ao_jw_str(o, "kind", in->kind);
    ao_jw_str(o, "op", in->op);
    ao_jw_str(o, "dtype", in->dtype);
    ao_jw_key(o, "count");
    if (in->count < 0)
        ao_jw_null(o, NULL);
    else
        ao_jw_int(o, NULL, in->count);
    ao_jw_key(o, "bytes");
    if (in->bytes == 0)
        ao_jw_null(o, NULL);
    else
        ao_jw_u64(o, NULL, in->bytes);
    ao_jw_key(o, "group_size");
    if (in->group_size < 0)
        ao_jw_null(o, NULL);
    else
        ao_jw_int(o, NULL, in->group_size);
    ao_jw_str(o, "phase", ao_pass_name((ao_pass)in->pass));
    ao_jw_str(o, "unit", in->unit ? in->unit : "unknown");
    member_array(o, "ranks", s, in, 0);
    member_array(o, "op_index", s, in, 1);
    member_array(o, "issue_us", s, in, 2);
    member_array(o, "start_us", s, in, 3);
    member_array(o, "end_us", s, in, 4);
    ao_jw_double(o, "first_start_us", in->first_start_us);
    ao_jw_double(o, "last_start_us", in->last_start_us);
    ao_jw_double(o, "last_end_us", in->last_end_us);
    ao_jw_key(o, "late_rank");
    if (in->late_rank < 0)
        ao_jw_null(o, NULL);
    else
        ao_jw_int(o, NULL, in->late_rank);
    ao_jw_double(o, "skew_us", in->skew_us);
    ao_jw_double(o, "transfer_us", in->transfer_us);
    ao_jw_double(o, "algbw_gbps", in->algbw_gbps);
    ao_jw_double(o, "busbw_gbps", in->busbw_gbps);
    ao_jw_key(o, "consistent");
    yajl_gen_bool(o->g, in->consistent);
    ao_jw_key(o, "complete");
    yajl_gen_bool(o->g, in->complete);
    ao_jw_key(o, "aligned");
    yajl_gen_bool(o->g, in->aligned);
    int known = !isnan(in->cause_us[0]);
    ao_jw_str(o, "late_cause",
              known && in->late_rank >= 0 ? ao_late_cause_name(ao_late_cause_top(in->cause_us))
                                          : NULL);
    ao_jw_key(o, "late_window_us");
    if (!known || in->late_rank < 0) {
        ao_jw_null(o, NULL);
    } else {
        ao_jw_open(o, NULL);
        for (int c = 0; c < AO_NCAUSES; c++)
            ao_jw_double(o, ao_late_cause_name((ao_late_cause)c), in->cause_us[c]);
        ao_jw_close(o);
    }
    ao_jw_close(o);
}

int ao_coll_write(const char *path, const ao_coll_set *s)
{
    char *tmp = ao_asprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "wx");
    if (!f) {
        ao_error(path, "cannot create: %s", strerror(errno));
        free(tmp);
        return AO_EXIT_FAIL;
    }
    yajl_gen g = ao_json_gen_new(0);
    int rc = 0;
    for (size_t i = 0; i < s->ninst && rc == 0; i++) {
        ao_json_writer o = {g, yajl_gen_status_ok};
        gen_instance(&o, s, &s->inst[i]);
        const unsigned char *buf;
        size_t len;
        yajl_gen_get_buf(g, &buf, &len);
        if (o.st != yajl_gen_status_ok) {
            ao_error(path, "JSON generation failed at collective %zu", i);
            rc = AO_EXIT_FAIL;
        } else if (fwrite(buf, 1, len, f) != len || fputc('\n', f) == EOF) {
            ao_error(path, "cannot write: %s", strerror(errno));
            rc = AO_EXIT_FAIL;
        }
        yajl_gen_clear(g);
        yajl_gen_reset(g, NULL);
    }
    yajl_gen_free(g);
    if (fclose(f) != 0 && rc == 0) {
        ao_error(path, "cannot write: %s", strerror(errno));
        rc = AO_EXIT_FAIL;
    }
    /* link(2) refuses an existing path: never over an older file */
    if (rc == 0 && link(tmp, path) != 0) {
        ao_error(path, "cannot put %s into place: %s", tmp, strerror(errno));
        rc = AO_EXIT_FAIL;
    }
    remove(tmp);
    free(tmp);
    return rc;
}

/* ---- reading -------------------------------------------------------------------- */

typedef struct line_ctx {
    const char *path;
    size_t line;
} line_ctx;

static int bad(const line_ctx *c, const char *key, const char *what)
{
    ao_error(c->path, "line %zu: \"%s\" %s", c->line, key, what);
    return AO_EXIT_USAGE;
}

/* A number or null (NAN); anything else is an error. */
static int num(const line_ctx *c, yajl_val o, const char *key, int required, double *out)
{
    yajl_val v = ao_json_member(o, key);
    if (!v) {
        if (!required) {
            *out = NAN;
            return 0;
        }
        return bad(c, key, "is missing");
    }
    if (YAJL_IS_NULL(v)) {
        *out = NAN;
        return 0;
    }
    if (!YAJL_IS_NUMBER(v)) return bad(c, key, "is not a number");
    *out = ao_json_number(v);
    return 0;
}

static int integer(const line_ctx *c, yajl_val o, const char *key, long long lo, long long *out)
{
    yajl_val v = ao_json_member(o, key);
    if (!v) return bad(c, key, "is missing");
    if (YAJL_IS_NULL(v)) {
        *out = -1;
        return 0;
    }
    if (!YAJL_IS_INTEGER(v) || YAJL_GET_INTEGER(v) < lo) return bad(c, key, "is not an integer");
    *out = YAJL_GET_INTEGER(v);
    return 0;
}

/* A string or null; NULL for null. */
static int text(const line_ctx *c, yajl_val o, const char *key, ao_coll_set *s, const char **out)
{
    yajl_val v = ao_json_member(o, key);
    if (!v) return bad(c, key, "is missing");
    if (YAJL_IS_NULL(v)) {
        *out = NULL;
        return 0;
    }
    if (!YAJL_IS_STRING(v)) return bad(c, key, "is not a string");
    *out = ao_coll_set_str(s, YAJL_GET_STRING(v));
    return 0;
}

static int flag(const line_ctx *c, yajl_val o, const char *key, uint8_t *out)
{
    yajl_val v = ao_json_member(o, key);
    if (!v || !(YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v))) return bad(c, key, "is not true or false");
    *out = YAJL_IS_TRUE(v);
    return 0;
}

/* The per-rank arrays: n members each. */
static int members(const line_ctx *c, yajl_val o, ao_coll_set *s, ao_coll_instance *in, size_t *cap)
{
    static const char *const keys[] = {"ranks", "op_index", "issue_us", "start_us", "end_us"};
    yajl_val a[5];
    for (int k = 0; k < 5; k++) {
        a[k] = ao_json_member(o, keys[k]);
        if (!a[k] || !YAJL_IS_ARRAY(a[k])) return bad(c, keys[k], "is not an array");
        if (a[k]->u.array.len != a[0]->u.array.len)
            return bad(c, keys[k], "has not as many elements as \"ranks\"");
    }
    size_t n = a[0]->u.array.len;
    if (n == 0) return bad(c, "ranks", "is empty");
    if (s->nmembers + n > *cap) {
        while (s->nmembers + n > *cap) *cap = *cap ? 2 * *cap : 256;
        s->members = ao_realloc(s->members, *cap * sizeof *s->members);
    }
    in->first = s->nmembers;
    in->n = n;
    for (size_t i = 0; i < n; i++) {
        ao_coll_member *m = &s->members[s->nmembers + i];
        yajl_val r = a[0]->u.array.values[i], x = a[1]->u.array.values[i];
        if (!YAJL_IS_INTEGER(r) || YAJL_GET_INTEGER(r) < 0 || YAJL_GET_INTEGER(r) > 1 << 24)
            return bad(c, "ranks", "holds a value that is not a rank");
        if (!YAJL_IS_NULL(x) &&
            (!YAJL_IS_INTEGER(x) || YAJL_GET_INTEGER(x) < 0 || YAJL_GET_INTEGER(x) > INT32_MAX))
            return bad(c, "op_index", "holds a value that is not an index or null");
        m->rank = (int)YAJL_GET_INTEGER(r);
        m->op_index = YAJL_IS_NULL(x) ? -1 : (int32_t)YAJL_GET_INTEGER(x);
        double *f[3] = {&m->issue_us, &m->start_us, &m->end_us};
        for (int k = 0; k < 3; k++) {
            yajl_val v = a[2 + k]->u.array.values[i];
            if (YAJL_IS_NULL(v) && k == 0)
                *f[k] = NAN;
            else if (YAJL_IS_NUMBER(v))
                *f[k] = ao_json_number(v);
            else
                return bad(c, keys[2 + k], "holds a value that is not a number");
        }
        if (i && m->rank <= m[-1].rank) return bad(c, "ranks", "is not in increasing order");
    }
    s->nmembers += n;
    return 0;
}

static int parse_line(const line_ctx *c, yajl_val o, ao_coll_set *s, ao_coll_instance *in,
                      size_t *cap)
{
    memset(in, 0, sizeof *in);
    if (!YAJL_IS_OBJECT(o)) {
        ao_error(c->path, "line %zu: not a JSON object", c->line);
        return AO_EXIT_USAGE;
    }
    long long schema, bytes, count, late, gs;
    if (integer(c, o, "schema", 0, &schema)) return AO_EXIT_USAGE;
    if (schema != AO_COLLECTIVES_SCHEMA) return bad(c, "schema", "is not 1");
    const char *phase, *unit, *cause;
    if (integer(c, o, "step", -1, &in->step) || text(c, o, "group", s, &in->group) ||
        integer(c, o, "seq", 0, &in->seq) || text(c, o, "kind", s, &in->kind) ||
        text(c, o, "op", s, &in->op) || text(c, o, "dtype", s, &in->dtype) ||
        integer(c, o, "count", 0, &count) || integer(c, o, "bytes", 0, &bytes) ||
        text(c, o, "phase", s, &phase) || text(c, o, "unit", s, &unit) ||
        integer(c, o, "late_rank", 0, &late) || text(c, o, "late_cause", s, &cause) ||
        integer(c, o, "group_size", 0, &gs))
        return AO_EXIT_USAGE;
    if (!in->kind) return bad(c, "kind", "is null");
    if (gs > 1 << 24) return bad(c, "group_size", "is not a number of ranks");
    in->bytes = bytes > 0 ? (uint64_t)bytes : 0;
    in->count = count;
    in->late_rank = late > 1 << 24 ? -1 : (int)late;
    in->group_size = (int)gs;
    in->unit = unit && strcmp(unit, "unknown") != 0 ? unit : NULL;
    in->pass = AO_NPASSES;
    for (int p = 0; p < AO_NPASSES; p++)
        if (phase && strcmp(phase, ao_pass_name((ao_pass)p)) == 0) in->pass = (uint8_t)p;
    if (in->pass == AO_NPASSES)
        return bad(c, "phase", "is not unknown, forward, backward or optimizer");
    if (members(c, o, s, in, cap) || num(c, o, "first_start_us", 1, &in->first_start_us) ||
        num(c, o, "last_start_us", 1, &in->last_start_us) ||
        num(c, o, "last_end_us", 1, &in->last_end_us) || num(c, o, "skew_us", 1, &in->skew_us) ||
        num(c, o, "transfer_us", 1, &in->transfer_us) ||
        num(c, o, "algbw_gbps", 1, &in->algbw_gbps) ||
        num(c, o, "busbw_gbps", 1, &in->busbw_gbps) || flag(c, o, "consistent", &in->consistent) ||
        flag(c, o, "complete", &in->complete) || flag(c, o, "aligned", &in->aligned))
        return AO_EXIT_USAGE;
    int found = 0;
    for (size_t i = 0; i < in->n; i++) found |= s->members[in->first + i].rank == in->late_rank;
    if (in->late_rank >= 0 && !found) return bad(c, "late_rank", "is not one of \"ranks\"");
    yajl_val w = ao_json_member(o, "late_window_us");
    for (int k = 0; k < AO_NCAUSES; k++) in->cause_us[k] = NAN;
    if (w && !YAJL_IS_NULL(w)) {
        if (!YAJL_IS_OBJECT(w)) return bad(c, "late_window_us", "is not an object or null");
        for (int k = 0; k < AO_NCAUSES; k++)
            if (num(c, w, ao_late_cause_name((ao_late_cause)k), 1, &in->cause_us[k]))
                return AO_EXIT_USAGE;
    }
    s->inconsistent += !in->consistent;
    s->partial += !in->complete;
    s->misaligned += !in->aligned;
    s->single += in->n < 2;
    return 0;
}

int ao_coll_read(const char *path, ao_coll_set *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        ao_error(path, "cannot open: %s", strerror(errno));
        return AO_EXIT_USAGE;
    }
    char *line = NULL, err[256];
    size_t lcap = 0, icap = 0, mcap = 0;
    ssize_t len;
    line_ctx c = {path, 0};
    int rc = 0, maxrank = -1;
    while (rc == 0 && (len = getline(&line, &lcap, f)) != -1) {
        c.line++;
        if (len <= 1 && (len == 0 || line[0] == '\n')) continue;
        yajl_val v = yajl_tree_parse(line, err, sizeof err);
        if (!v) {
            err[strcspn(err, "\n")] = '\0';
            ao_error(path, "line %zu: not JSON (%s)", c.line, err);
            rc = AO_EXIT_USAGE;
            break;
        }
        if (out->ninst == icap) {
            icap = icap ? 2 * icap : 256;
            out->inst = ao_realloc(out->inst, icap * sizeof *out->inst);
        }
        rc = parse_line(&c, v, out, &out->inst[out->ninst], &mcap);
        if (rc == 0) {
            const ao_coll_instance *in = &out->inst[out->ninst++];
            for (size_t i = 0; i < in->n; i++)
                if (out->members[in->first + i].rank > maxrank)
                    maxrank = out->members[in->first + i].rank;
        }
        yajl_tree_free(v);
    }
    free(line);
    fclose(f);
    out->nranks = maxrank + 1;
    if (rc) ao_coll_set_free(out);
    return rc;
}
