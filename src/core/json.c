#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* The shortest of "%.15g", "%.16g", "%.17g" that reads back as d: the text
 * the printf search below gives, without printf or strtod for numbers from
 * 1e-6 to 1e14 (every time, ratio and rate a record holds). Records are written
 * on the training loop's thread, and the search costs ~1 us a number (~100 us
 * a record, 2% of a host-bound step); this ~50 ns.
 *
 * Exact integer arithmetic: d = m / 2^k (m the 53-bit significand), so its
 * p-digit decimal q / 10^s is round(m * 10^s / 2^k), half to even as printf
 * rounds, and it reads back as d when it lies within d's rounding interval:
 * |q * 2^k - m * 10^s| <= 10^s / 2 (the ulp below a power of two is half as
 * wide; a tie goes to the even significand, as strtod breaks it). With
 * s <= 22 and m < 2^53 every product fits in 128 bits. */
typedef unsigned __int128 u128;

static u128 pow10_u128(int s)
{
    u128 p = 1;
    while (s-- > 0) p *= 10;
    return p;
}

/* The p-digit decimal of a (1e-6 <= a < 1e14) if it reads back as a: its
 * digits in *q, the exponent of its first digit in *e10. */
static int decimal_digits(double a, int p, unsigned long long *q, int *e10)
{
    int exp2;
    const double fr = frexp(a, &exp2); /* a = fr * 2^exp2, fr in [0.5, 1) */
    const unsigned long long m = (unsigned long long)ldexp(fr, 53);
    const int k = 53 - exp2; /* a = m / 2^k, k >= 7 in this range */
    const u128 lo = pow10_u128(p - 1), hi = lo * 10;
    int e = (int)floor(log10(a));
    for (int tries = 0; tries < 3; tries++) { /* log10 may be one off */
        const int s = p - 1 - e;
        if (s < 0 || s > 22) return 0;
        const u128 ps = pow10_u128(s), n = (u128)m * ps;
        u128 r = n >> k;
        const u128 rem = n - (r << k), half = (u128)1 << (k - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        if (r >= hi) {
            e++;
            continue;
        }
        if (r < lo) {
            e--;
            continue;
        }
        const u128 back = r << k, diff = back > n ? back - n : n - back;
        const int below = back < n && m == 1ULL << 52; /* the narrower gap */
        const u128 twice = below ? 4 * diff : 2 * diff;
        if (twice > ps || (twice == ps && (m & 1))) return 0;
        *q = (unsigned long long)r;
        *e10 = e;
        return 1;
    }
    return 0;
}

/* printf's "%.{p}g" text of the decimal q (p digits) * 10^(e10 - p + 1). */
static int format_g(int negative, unsigned long long q, int p, int e10, char *buf)
{
    char digits[20];
    int nd = p;
    for (int i = p - 1; i >= 0; i--, q /= 10) digits[i] = (char)('0' + q % 10);
    while (nd > 1 && digits[nd - 1] == '0') nd--; /* %g drops trailing zeros */
    char *o = buf;
    if (negative) *o++ = '-';
    if (e10 < -4 || e10 >= p) { /* d.ddde+XX */
        *o++ = digits[0];
        if (nd > 1) *o++ = '.';
        for (int i = 1; i < nd; i++) *o++ = digits[i];
        o += sprintf(o, "e%c%02d", e10 < 0 ? '-' : '+', e10 < 0 ? -e10 : e10);
    } else if (e10 < 0) { /* 0.000ddd */
        *o++ = '0';
        *o++ = '.';
        for (int i = -1; i > e10; i--) *o++ = '0';
        for (int i = 0; i < nd; i++) *o++ = digits[i];
    } else {
        for (int i = 0; i < nd || i <= e10; i++) {
            if (i == e10 + 1) *o++ = '.';
            *o++ = i < nd ? digits[i] : '0';
        }
    }
    *o = '\0';
    return (int)(o - buf);
}

int ao_json_format_double(double d, char buf[AO_JSON_DOUBLE_MAX])
{
    const double a = fabs(d);
    if (a >= 1e-6 && a < 1e14) {
        unsigned long long q;
        int e10;
        for (int p = 15; p <= 17; p++)
            if (decimal_digits(a, p, &q, &e10)) return format_g(d < 0, q, p, e10, buf);
    }
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, AO_JSON_DOUBLE_MAX, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    return n;
}

yajl_gen_status ao_json_gen_double(yajl_gen g, double d)
{
    if (!isfinite(d)) return yajl_gen_null(g);
    char buf[AO_JSON_DOUBLE_MAX];
    int n = ao_json_format_double(d, buf);
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

/* AORTA_TEST_ENOSPC_AFTER=BYTES (tests only, read once): a full disk after
 * BYTES written through ao_write_all by this process: the write that
 * crosses it is cut short there, the next fails with ENOSPC, as write(2)
 * does on a full disk. Process-wide, as the disk is. */
static long long disk_left = -2; /* -2: not read yet; -1: no limit */

static ssize_t write_some(int fd, const void *p, size_t n)
{
    if (disk_left == -2) {
        const char *v = getenv("AORTA_TEST_ENOSPC_AFTER");
        disk_left = v && *v ? strtoll(v, NULL, 10) : -1;
        if (disk_left < -1) disk_left = -1;
    }
    if (disk_left < 0) return write(fd, p, n);
    if (disk_left == 0) {
        errno = ENOSPC;
        return -1;
    }
    if ((long long)n > disk_left) n = (size_t)disk_left;
    ssize_t w = write(fd, p, n);
    if (w > 0) disk_left -= w;
    return w;
}

int ao_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write_some(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int ao_file_write_atomic_quiet(const char *path, const void *buf, size_t n)
{
    char *tmp = ao_asprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int err = errno;
        free(tmp);
        return err;
    }
    int err = ao_write_all(fd, buf, n) == 0 ? 0 : errno;
    if (close(fd) != 0 && err == 0) err = errno;
    if (err == 0 && rename(tmp, path) != 0) err = errno;
    if (err) unlink(tmp);
    free(tmp);
    return err;
}

int ao_file_write_atomic(const char *path, const void *buf, size_t n)
{
    int err = ao_file_write_atomic_quiet(path, buf, n);
    if (err) ao_error(path, "cannot write: %s", strerror(err));
    return err ? -1 : 0;
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

int ao_open_regular(const char *path, const char **what)
{
    *what = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        *what = S_ISDIR(st.st_mode)    ? "a directory"
                : S_ISFIFO(st.st_mode) ? "a FIFO"
                : S_ISSOCK(st.st_mode) ? "a socket"
                : S_ISCHR(st.st_mode)  ? "a character device"
                : S_ISBLK(st.st_mode)  ? "a block device"
                                       : "no regular file";
        close(fd);
        errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int ao_open_input(const char *path, const char *kind)
{
    const char *what;
    int fd = ao_open_regular(path, &what);
    if (fd >= 0) return fd;
    if (what)
        ao_error(path, "is %s, not a %s", what, kind);
    else
        ao_error(path, "cannot read the %s: %s", kind, strerror(errno));
    return -1;
}

/* All of fd (closed) as a NUL-terminated heap string, or NULL with errno. */
static char *read_all(int fd, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = ao_malloc(cap);
    for (;;) {
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int err = errno;
            free(buf);
            close(fd);
            errno = err;
            return NULL;
        }
        if (got == 0) break;
        n += (size_t)got;
        if (n + 1 == cap) buf = ao_realloc(buf, cap *= 2);
    }
    close(fd);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

char *ao_file_read(const char *path, size_t *len)
{
    const char *what;
    int fd = ao_open_regular(path, &what);
    return fd < 0 ? NULL : read_all(fd, len);
}

char *ao_input_read(const char *path, const char *kind, size_t *len)
{
    int fd = ao_open_input(path, kind);
    char *buf = fd < 0 ? NULL : read_all(fd, len);
    if (fd >= 0 && !buf) ao_error(path, "cannot read the %s: %s", kind, strerror(errno));
    return buf;
}

yajl_val ao_json_read_file(const char *path, char *err, size_t nerr)
{
    const char *what;
    int fd = ao_open_regular(path, &what);
    char *buf = fd < 0 ? NULL : read_all(fd, NULL);
    if (!buf) {
        if (what)
            snprintf(err, nerr, "cannot read %s: it is %s, not a file", path, what);
        else
            snprintf(err, nerr, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    char why[256] = "";
    yajl_val v = yajl_tree_parse(buf, why, sizeof why);
    free(buf);
    if (!v) snprintf(err, nerr, "%s is not JSON: %s", path, why);
    return v;
}

yajl_gen_status ao_json_gen_tree(yajl_gen g, yajl_val v)
{
    yajl_gen_status st = yajl_gen_status_ok;
    if (YAJL_IS_STRING(v)) {
        st = ao_json_gen_str(g, v->u.string);
    } else if (YAJL_IS_NUMBER(v)) {
        st = yajl_gen_number(g, v->u.number.r, strlen(v->u.number.r));
    } else if (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v)) {
        st = yajl_gen_bool(g, YAJL_IS_TRUE(v));
    } else if (YAJL_IS_ARRAY(v)) {
        st = yajl_gen_array_open(g);
        for (size_t i = 0; i < v->u.array.len && st == yajl_gen_status_ok; i++)
            st = ao_json_gen_tree(g, v->u.array.values[i]);
        if (st == yajl_gen_status_ok) st = yajl_gen_array_close(g);
    } else if (YAJL_IS_OBJECT(v)) {
        st = yajl_gen_map_open(g);
        for (size_t i = 0; i < v->u.object.len && st == yajl_gen_status_ok; i++) {
            st = ao_json_gen_str(g, v->u.object.keys[i]);
            if (st == yajl_gen_status_ok) st = ao_json_gen_tree(g, v->u.object.values[i]);
        }
        if (st == yajl_gen_status_ok) st = yajl_gen_map_close(g);
    } else {
        st = yajl_gen_null(g);
    }
    return st;
}

/* ---- writing with one sticky status ------------------------------------------ */

void ao_jw_key(ao_json_writer *w, const char *key)
{
    if (key && w->st == yajl_gen_status_ok) w->st = ao_json_gen_str(w->g, key);
}

void ao_jw_str(ao_json_writer *w, const char *key, const char *s)
{
    ao_jw_key(w, key);
    if (w->st == yajl_gen_status_ok) w->st = ao_json_gen_str(w->g, s);
}

void ao_jw_int(ao_json_writer *w, const char *key, long long v)
{
    ao_jw_key(w, key);
    if (w->st == yajl_gen_status_ok) w->st = yajl_gen_integer(w->g, v);
}

void ao_jw_u64(ao_json_writer *w, const char *key, uint64_t v)
{
    ao_jw_key(w, key);
    if (w->st == yajl_gen_status_ok) w->st = ao_json_gen_u64(w->g, v);
}

void ao_jw_double(ao_json_writer *w, const char *key, double v)
{
    ao_jw_key(w, key);
    if (w->st == yajl_gen_status_ok) w->st = ao_json_gen_double(w->g, v);
}

void ao_jw_null(ao_json_writer *w, const char *key)
{
    ao_jw_key(w, key);
    if (w->st == yajl_gen_status_ok) w->st = yajl_gen_null(w->g);
}

void ao_jw_value(ao_json_writer *w, const char *key, const ao_json_value *v)
{
    ao_jw_key(w, key);
    if (w->st == yajl_gen_status_ok) w->st = ao_json_gen_value(w->g, v);
}

void ao_jw_open(ao_json_writer *w, const char *key)
{
    ao_jw_key(w, key);
    if (w->st == yajl_gen_status_ok) w->st = yajl_gen_map_open(w->g);
}

void ao_jw_close(ao_json_writer *w)
{
    if (w->st == yajl_gen_status_ok) w->st = yajl_gen_map_close(w->g);
}

void ao_jw_aopen(ao_json_writer *w, const char *key)
{
    ao_jw_key(w, key);
    if (w->st == yajl_gen_status_ok) w->st = yajl_gen_array_open(w->g);
}

void ao_jw_aclose(ao_json_writer *w)
{
    if (w->st == yajl_gen_status_ok) w->st = yajl_gen_array_close(w->g);
}
