#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yajl/yajl_parse.h>

#include "core/error.h"
#include "core/json.h"

yajl_gen ao_json_gen_new(int pretty)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    if (!g) ao_fatal(AO_EXIT_FAIL, "out of memory", "could not allocate a JSON generator");
    if (pretty) {
        yajl_gen_config(g, yajl_gen_beautify, 1);
        yajl_gen_config(g, yajl_gen_indent_string, "  ");
    }
    return g;
}

yajl_gen_status ao_json_gen_double(yajl_gen g, double d)
{
    if (!isfinite(d)) return yajl_gen_null(g);
    char buf[40];
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, sizeof buf, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    return yajl_gen_number(g, buf, (size_t)n);
}

yajl_gen_status ao_json_gen_u64(yajl_gen g, uint64_t v)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return yajl_gen_number(g, buf, (size_t)n);
}

yajl_gen_status ao_json_gen_str(yajl_gen g, const char *s)
{
    if (!s) return yajl_gen_null(g);
    return yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

/* yajl_parse callbacks that replay every token into a generator. */
static int re_null(void *g)
{
    return yajl_gen_null(g) == yajl_gen_status_ok;
}
static int re_bool(void *g, int b)
{
    return yajl_gen_bool(g, b) == yajl_gen_status_ok;
}
static int re_number(void *g, const char *s, size_t n)
{
    return yajl_gen_number(g, s, n) == yajl_gen_status_ok;
}
static int re_string(void *g, const unsigned char *s, size_t n)
{
    return yajl_gen_string(g, s, n) == yajl_gen_status_ok;
}
static int re_map_open(void *g)
{
    return yajl_gen_map_open(g) == yajl_gen_status_ok;
}
static int re_map_close(void *g)
{
    return yajl_gen_map_close(g) == yajl_gen_status_ok;
}
static int re_array_open(void *g)
{
    return yajl_gen_array_open(g) == yajl_gen_status_ok;
}
static int re_array_close(void *g)
{
    return yajl_gen_array_close(g) == yajl_gen_status_ok;
}

static const yajl_callbacks replay_callbacks = {
    .yajl_null = re_null,
    .yajl_boolean = re_bool,
    .yajl_number = re_number,
    .yajl_string = re_string,
    .yajl_start_map = re_map_open,
    .yajl_map_key = re_string,
    .yajl_end_map = re_map_close,
    .yajl_start_array = re_array_open,
    .yajl_end_array = re_array_close,
};

yajl_gen_status ao_json_gen_raw(yajl_gen g, const char *text)
{
    if (!text) return yajl_gen_null(g);
    /* Validate first, so a malformed text leaves nothing half-written in g. */
    char err[128];
    yajl_val v = yajl_tree_parse(text, err, sizeof err);
    if (!v) return yajl_gen_invalid_string;
    yajl_tree_free(v);
    yajl_handle h = yajl_alloc(&replay_callbacks, NULL, g);
    if (!h) ao_fatal(AO_EXIT_FAIL, "out of memory", "could not allocate a JSON parser");
    yajl_status s = yajl_parse(h, (const unsigned char *)text, strlen(text));
    if (s == yajl_status_ok) s = yajl_complete_parse(h);
    yajl_free(h);
    return s == yajl_status_ok ? yajl_gen_status_ok : yajl_gen_generation_complete;
}

yajl_gen_status ao_json_gen_value(yajl_gen g, const ao_json_value *v)
{
    switch (v->type) {
    case AO_JSON_STRING:
        return ao_json_gen_str(g, v->s);
    case AO_JSON_INT:
        return yajl_gen_integer(g, v->i);
    case AO_JSON_DOUBLE:
        return ao_json_gen_double(g, v->d);
    case AO_JSON_BOOL:
        return yajl_gen_bool(g, v->i != 0);
    case AO_JSON_NULL:
        return yajl_gen_null(g);
    case AO_JSON_RAW:
        return ao_json_gen_raw(g, v->s);
    }
    return yajl_gen_invalid_string;
}

yajl_gen_status ao_json_gen_object(yajl_gen g, const ao_json_object *o)
{
    yajl_gen_status s = yajl_gen_map_open(g);
    for (size_t i = 0; s == yajl_gen_status_ok && i < o->n; i++) {
        s = ao_json_gen_str(g, o->fields[i].key);
        if (s == yajl_gen_status_ok) s = ao_json_gen_value(g, &o->fields[i].v);
    }
    if (s == yajl_gen_status_ok) s = yajl_gen_map_close(g);
    return s;
}

int ao_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int ao_file_write_atomic(const char *path, const void *buf, size_t n)
{
    char *tmp = ao_asprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        ao_error(path, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    int rc = ao_write_all(fd, buf, n);
    int err = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        err = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1;
        err = errno;
    }
    if (rc != 0) {
        ao_error(path, "cannot write: %s", strerror(err));
        unlink(tmp);
    }
    free(tmp);
    return rc;
}

int ao_json_write_atomic(const char *path, yajl_gen g)
{
    const unsigned char *buf;
    size_t len;
    if (yajl_gen_get_buf(g, &buf, &len) != yajl_gen_status_ok) {
        ao_error(path, "internal error: the JSON document is incomplete");
        return -1;
    }
    /* One trailing newline: friendlier to cat and diff. */
    char *text = ao_malloc(len + 1);
    memcpy(text, buf, len);
    size_t n = len;
    if (n == 0 || text[n - 1] != '\n') text[n++] = '\n';
    int rc = ao_file_write_atomic(path, text, n);
    free(text);
    return rc;
}

yajl_val ao_json_member(yajl_val obj, const char *key)
{
    if (!YAJL_IS_OBJECT(obj)) return NULL;
    for (size_t i = 0; i < obj->u.object.len; i++)
        if (strcmp(obj->u.object.keys[i], key) == 0) return obj->u.object.values[i];
    return NULL;
}

double ao_json_number(yajl_val v)
{
    if (!YAJL_IS_NUMBER(v)) return NAN;
    /* yajl_tree drops the double on ERANGE (subnormals); the text is exact. */
    return strtod(v->u.number.r, NULL);
}
