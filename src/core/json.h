/* A thin layer over yajl for the JSON files aorta writes and reads.
 *
 * Why not yajl alone: yajl_gen_double prints "%.20g" (0.1 becomes
 * 0.10000000000000000555) and rejects NAN, and yajl_tree's double is not
 * filled for subnormals. Here doubles are written in the shortest form that
 * reads back bit-exact, NAN/inf become null, and reading takes the number's
 * own text through strtod so every finite double round-trips. */
#ifndef AORTA_CORE_JSON_H
#define AORTA_CORE_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

/* A value a caller hands to a writer without writing JSON itself. RAW is JSON
 * text (a list such as "[0.9,0.95]", "null"); it is validated and embedded. */
typedef enum ao_json_type {
    AO_JSON_STRING,
    AO_JSON_INT,
    AO_JSON_DOUBLE,
    AO_JSON_BOOL,
    AO_JSON_NULL,
    AO_JSON_RAW
} ao_json_type;

typedef struct ao_json_value {
    ao_json_type type;
    const char *s; /* STRING, RAW */
    long long i;   /* INT, BOOL (0/1) */
    double d;      /* DOUBLE */
} ao_json_value;

typedef struct ao_json_field {
    const char *key;
    ao_json_value v;
} ao_json_field;

/* A flat JSON object given as fields, in order. */
typedef struct ao_json_object {
    const ao_json_field *fields;
    size_t n;
} ao_json_object;

static inline ao_json_value ao_json_str(const char *s)
{
    return (ao_json_value){.type = s ? AO_JSON_STRING : AO_JSON_NULL, .s = s};
}
static inline ao_json_value ao_json_int(long long i)
{
    return (ao_json_value){.type = AO_JSON_INT, .i = i};
}
static inline ao_json_value ao_json_double(double d)
{
    return (ao_json_value){.type = AO_JSON_DOUBLE, .d = d};
}
static inline ao_json_value ao_json_bool(int b)
{
    return (ao_json_value){.type = AO_JSON_BOOL, .i = b != 0};
}
static inline ao_json_value ao_json_raw(const char *text)
{
    return (ao_json_value){.type = AO_JSON_RAW, .s = text};
}

/* ---- writing: each returns the yajl status (yajl_gen_status_ok = 0) ------- */

/* A fresh generator: compact (one line) or indented with two spaces. */
yajl_gen ao_json_gen_new(int pretty);
/* The shortest "%.{15,16,17}g" that strtod reads back bit-exact; null for
 * NAN and ±inf (JSON has no such numbers). */
yajl_gen_status ao_json_gen_double(yajl_gen g, double d);
/* That text for a finite d, into buf; returns its length. */
enum { AO_JSON_DOUBLE_MAX = 32 };
int ao_json_format_double(double d, char buf[AO_JSON_DOUBLE_MAX]);
yajl_gen_status ao_json_gen_u64(yajl_gen g, uint64_t v);
/* A C string (NULL writes null). */
yajl_gen_status ao_json_gen_str(yajl_gen g, const char *s);
/* JSON text, parsed (so malformed text is refused, status
 * yajl_gen_invalid_string) and re-emitted token by token. */
yajl_gen_status ao_json_gen_raw(yajl_gen g, const char *text);
yajl_gen_status ao_json_gen_value(yajl_gen g, const ao_json_value *v);
/* {"k": v, ...} */
yajl_gen_status ao_json_gen_object(yajl_gen g, const ao_json_object *o);

/* ---- writing with one sticky status ----------------------------------------
 * Every call is a no-op once one failed, so a document is built without
 * checking each token and the first failure is reported once (st). A non-NULL
 * key writes "key": before the value; NULL inside arrays or after
 * ao_jw_key. */
typedef struct ao_json_writer {
    yajl_gen g;
    yajl_gen_status st; /* first failure of any call, else yajl_gen_status_ok */
} ao_json_writer;

void ao_jw_key(ao_json_writer *w, const char *key);
void ao_jw_str(ao_json_writer *w, const char *key, const char *s);
void ao_jw_int(ao_json_writer *w, const char *key, long long v);
void ao_jw_u64(ao_json_writer *w, const char *key, uint64_t v);
void ao_jw_double(ao_json_writer *w, const char *key, double v);
void ao_jw_null(ao_json_writer *w, const char *key);
void ao_jw_value(ao_json_writer *w, const char *key, const ao_json_value *v);
/* { and [ (after the key, when given), and their ends. */
void ao_jw_open(ao_json_writer *w, const char *key);
void ao_jw_close(ao_json_writer *w);
void ao_jw_aopen(ao_json_writer *w, const char *key);
void ao_jw_aclose(ao_json_writer *w);

/* Write the generator's buffer to `path` through a temporary file in the
 * same directory and rename(2), so a reader never sees half a file. Returns
 * 0, or -1 after printing why. */
int ao_json_write_atomic(const char *path, yajl_gen g);
/* The same for any bytes. */
int ao_file_write_atomic(const char *path, const void *buf, size_t n);
/* The same without a message: 0, or the errno of what failed. */
int ao_file_write_atomic_quiet(const char *path, const void *buf, size_t n);
/* Open path read-only only when it is a regular file: with O_NONBLOCK, so
 * that opening a FIFO or a device never blocks, then fstat. Returns the
 * descriptor (blocking again, close-on-exec), or -1 with errno set and *what
 * saying what the path is instead ("a directory", "a FIFO", ...; NULL when
 * it could not be opened at all). Every reader of a user-given file opens it
 * here: a reader blocks on nothing but a regular file. */
int ao_open_regular(const char *path, const char **what);
/* The same, printing the one error: "PATH: cannot read the KIND: why" or
 * "PATH: is a FIFO, not a KIND". */
int ao_open_input(const char *path, const char *kind);
/* The whole (regular) file as a NUL-terminated heap string (its length in
 * *len when len is not NULL), or NULL with errno set (EISDIR, EINVAL: not a
 * regular file). */
char *ao_file_read(const char *path, size_t *len);
/* The same, printing the one error as ao_open_input does. */
char *ao_input_read(const char *path, const char *kind, size_t *len);
/* write(2) all n bytes, retrying short writes and EINTR. 0 or -1 (errno). */
int ao_write_all(int fd, const void *buf, size_t n);

/* A parsed tree (yajl_tree) back into g, in its order: for rewriting a
 * document read with ao_json_read_file. Returns the yajl status. */
yajl_gen_status ao_json_gen_tree(yajl_gen g, yajl_val v);

/* ---- reading --------------------------------------------------------------- */

/* The whole file at `path` as a tree (free with yajl_tree_free), or NULL with
 * "cannot read PATH: why" or "PATH is not JSON: why" in err. */
yajl_val ao_json_read_file(const char *path, char *err, size_t nerr);

/* The member `key` of object `obj`, or NULL (no path walking, no type check). */
yajl_val ao_json_member(yajl_val obj, const char *key);
/* A number as the double its text denotes (bit-exact with what
 * ao_json_gen_double wrote, subnormals included). */
double ao_json_number(yajl_val v);

#endif
