/* Loading, setting, checking and printing struct ao_config through the schema.
 *
 * Every value, whether a schema default, a file's node or an override's text,
 * becomes a libyaml node and goes through one function (set_from_node), so
 * the three sources cannot disagree about what "3e-4", "yes" or "[0.9,0.95]"
 * means. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "core/config.h"
#include "core/error.h"
#include "core/schema.h"
#include "core/text.h"

/* Enum members are read and written through int. */
static_assert(sizeof(enum ao_log_level) == sizeof(int), "enum size");
static_assert(sizeof(enum ao_precision) == sizeof(int), "enum size");
static_assert(sizeof(enum ao_sharding) == sizeof(int), "enum size");
static_assert(sizeof(enum ao_backward_prefetch) == sizeof(int), "enum size");

#define MAX_DEPTH     8    /* deeper than any key: the rest is reported, not walked */
#define MAX_NESTING   64   /* YAML collections inside each other, anywhere */
#define MAX_PAIRS     4096 /* keys in one mapping; the schema has ~100 */
#define MAX_MAP_CHARS 4096 /* compile.options is kept as text up to this size */
#define SHOWN_CHARS   60   /* a bad value is quoted in errors up to this length */

static char *value_text(const struct ao_config *cfg, int row, int *is_null);

struct ao_config_meta {
    char **origin;         /* per row; NULL = default */
    unsigned char *warned; /* per row: the no-effect warning was printed */
    int noop_warnings;
};

/* ---- small helpers ------------------------------------------------------- */

struct sbuf {
    char *p;
    size_t len, cap;
};

static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = ao_realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

static void *field(const struct ao_config *cfg, const struct ao_key *k)
{
    return (char *)cfg + k->offset;
}

static int row_of(const char *key)
{
    for (int i = 0; i < ao_schema_count; i++)
        if (strcmp(ao_schema[i].key, key) == 0) return i;
    return -1;
}

/* True when `name` is a section (or sub-section) some key lives under. */
static int is_section(const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < ao_schema_count; i++)
        if (strncmp(ao_schema[i].key, name, n) == 0 && ao_schema[i].key[n] == '.') return 1;
    return 0;
}

/* A value as it appears in an error: printable, bounded. */
static void shown(char *out, size_t n, const char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < n; i++) {
        if (i == SHOWN_CHARS) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        out[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    out[o] = '\0';
}

static const char *type_name(const struct ao_key *k)
{
    switch (k->type) {
    case AO_CFG_INT:
        return "int";
    case AO_CFG_FLOAT:
        return "float";
    case AO_CFG_BOOL:
        return "bool";
    case AO_CFG_STRING:
        return "string";
    case AO_CFG_ENUM:
        return "enum";
    case AO_CFG_FLOAT_LIST:
        return "float list";
    case AO_CFG_INT_OR_BOOL:
        return "int or bool";
    case AO_CFG_MAP:
        return "map";
    }
    return "?";
}

static void range_text(char *buf, size_t n, const struct ao_key *k, int integer)
{
    char lo[32], hi[32];
    ao_format_double(lo, sizeof lo, k->min);
    ao_format_double(hi, sizeof hi, k->max);
    if (integer)
        snprintf(buf, n, k->max == HUGE_VAL || k->max >= (double)INT_MAX ? "%s or more" : "%s..%s",
                 lo, hi);
    else if (k->max == HUGE_VAL)
        snprintf(buf, n, "%s %s", k->flags & AO_KEY_MIN_EXCLUSIVE ? "greater than" : "at least",
                 lo);
    else
        snprintf(buf, n, "%s%s, %s]", k->flags & AO_KEY_MIN_EXCLUSIVE ? "(" : "[", lo, hi);
}

/* What a key accepts, in words: for errors and for the reference. */
static void allowed_text(char *buf, size_t n, const struct ao_key *k)
{
    char r[96];
    size_t o = 0;
    switch (k->type) {
    case AO_CFG_INT:
        range_text(r, sizeof r, k, 1);
        o = (size_t)snprintf(buf, n, "integer %s", r);
        break;
    case AO_CFG_FLOAT:
        range_text(r, sizeof r, k, 0);
        o = (size_t)snprintf(buf, n, "number %s", r);
        break;
    case AO_CFG_BOOL:
        o = (size_t)snprintf(buf, n, "true or false");
        break;
    case AO_CFG_STRING:
        o = (size_t)snprintf(buf, n, "string");
        break;
    case AO_CFG_ENUM:
        buf[0] = '\0';
        for (const struct ao_enum_name *e = k->names; e->name && o < n; e++)
            o += (size_t)snprintf(buf + o, n - o, "%s%s", e == k->names ? "" : ", ", e->name);
        break;
    case AO_CFG_FLOAT_LIST:
        range_text(r, sizeof r, k, 0);
        o = (size_t)snprintf(buf, n, "list of %d numbers, each %s", k->len, r);
        break;
    case AO_CFG_INT_OR_BOOL:
        range_text(r, sizeof r, k, 1);
        o = (size_t)snprintf(buf, n, "true, false or integer %s", r);
        break;
    case AO_CFG_MAP:
        o = (size_t)snprintf(buf, n, "mapping");
        break;
    }
    if ((k->flags & AO_KEY_NULLABLE) && o < n) snprintf(buf + o, n - o, ", or null");
}

/* ---- did you mean -------------------------------------------------------- */

/* The closest key or section name to `unknown`, or NULL. */
static const char *suggest(const char *unknown, char *buf, size_t n)
{
    size_t len = strlen(unknown);
    int limit = len <= 4 ? 2 : len <= 8 ? 3 : 4; /* distances below this count as typos */
    int best = limit;
    buf[0] = '\0';
    for (int i = 0; i < ao_schema_count; i++) {
        const char *key = ao_schema[i].key;
        /* The key itself and each of its sections ("distributed", "distributed.nccl"). */
        for (const char *dot = key;; dot++) {
            if (*dot != '.' && *dot != '\0') continue;
            char cand[128];
            size_t cl = (size_t)(dot - key);
            if (cl >= sizeof cand) break;
            memcpy(cand, key, cl);
            cand[cl] = '\0';
            int d = ao_edit_distance(unknown, cand, best);
            if (d < best) {
                best = d;
                snprintf(buf, n, "%s", cand);
            }
            if (*dot == '\0') break;
        }
    }
    if (buf[0]) return buf;
    /* A right name in the wrong section: "fsdp.batch_size" -> "training.batch_size". */
    const char *leaf = strrchr(unknown, '.');
    leaf = leaf ? leaf + 1 : unknown;
    for (int i = 0; i < ao_schema_count; i++) {
        const char *kl = strrchr(ao_schema[i].key, '.');
        if (kl && strcmp(kl + 1, leaf) == 0) {
            snprintf(buf, n, "%s", ao_schema[i].key);
            return buf;
        }
    }
    return NULL;
}

static int unknown_key(const char *where, const char *key, int as_section)
{
    char shown_key[SHOWN_CHARS + 8], s[128];
    shown(shown_key, sizeof shown_key, key, strlen(key));
    const char *what = as_section ? "section" : "key";
    if (suggest(key, s, sizeof s))
        ao_error(where, "unknown %s '%s' (did you mean '%s'?)", what, shown_key, s);
    else
        ao_error(where, "unknown %s '%s' ('aorta config doc' lists every key)", what, shown_key);
    return AO_EXIT_USAGE;
}

/* ---- one value from one node --------------------------------------------- */

static int is_null_node(const yaml_node_t *node)
{
    if (!node) return 1;
    if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *v = (const char *)node->data.scalar.value;
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

static int parse_bool(const char *s, int *out)
{
    static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i])) return *out = 1, 0;
        if (!strcasecmp(s, no[i])) return *out = 0, 0;
    }
    return -1;
}

static int in_range(const struct ao_key *k, double v)
{
    if (k->flags & AO_KEY_MIN_EXCLUSIVE ? !(v > k->min) : !(v >= k->min)) return 0;
    return v <= k->max;
}

/* The context of one assignment, for messages. */
struct target {
    const struct ao_key *k;
    yaml_document_t *doc;
    const char *where; /* "file:line:col", "--override" */
};

static int flow_text(yaml_document_t *doc, yaml_node_t *node, struct sbuf *b, int depth);

static int bad_value(const struct target *t, const yaml_node_t *node, const char *why)
{
    char allowed[512], v[SHOWN_CHARS + 8];
    allowed_text(allowed, sizeof allowed, t->k);
    if (!node)
        snprintf(v, sizeof v, "null");
    else if (node->type == YAML_SCALAR_NODE)
        shown(v, sizeof v, (const char *)node->data.scalar.value, node->data.scalar.length);
    else {
        struct sbuf b = {0};
        flow_text(t->doc, (yaml_node_t *)node, &b, 0); /* bounded; a cut-off text is fine here */
        shown(v, sizeof v, b.p ? b.p : "", b.len);
        free(b.p);
    }
    ao_error(t->where, "%s: '%s' %s; allowed: %s", t->k->key, v, why, allowed);
    return AO_EXIT_USAGE;
}

/* A scalar that must be a YAML number or boolean: quoting makes it a string. */
static const char *plain_scalar(const struct target *t, const yaml_node_t *node, const char *what)
{
    if (!node || node->type != YAML_SCALAR_NODE) {
        bad_value(t, node, what);
        return NULL;
    }
    if (node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        bad_value(t, node, "is a quoted string");
        return NULL;
    }
    return (const char *)node->data.scalar.value;
}

static int parse_int_node(const struct target *t, const yaml_node_t *node, int *out)
{
    const char *s = plain_scalar(t, node, "is not an integer");
    if (!s) return AO_EXIT_USAGE;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno) return bad_value(t, node, "is not an integer");
    if (v < INT_MIN || v > INT_MAX || !in_range(t->k, (double)v))
        return bad_value(t, node, "is out of range");
    *out = (int)v;
    return 0;
}

static int parse_float_node(const struct target *t, const yaml_node_t *node, double *out)
{
    const char *s = plain_scalar(t, node, "is not a number");
    if (!s) return AO_EXIT_USAGE;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || isspace((unsigned char)*s) || (errno && fabs(v) > 1))
        return bad_value(t, node, "is not a number");
    if (!in_range(t->k, v)) return bad_value(t, node, "is out of range");
    *out = v;
    return 0;
}

/* A mapping kept as JSON-style flow text (it is only ever printed). Aliases
 * can make the tree exponentially large, so size and depth are capped. */
static int flow_text(yaml_document_t *doc, yaml_node_t *node, struct sbuf *b, int depth)
{
    if (depth > MAX_DEPTH || b->len > MAX_MAP_CHARS || !node) return -1;
    if (node->type == YAML_SCALAR_NODE) {
        sb_putn(b, "\"", 1);
        for (size_t i = 0; i < node->data.scalar.length; i++) {
            unsigned char c = node->data.scalar.value[i];
            char esc[8];
            if (c == '"' || c == '\\' || c < 0x20) {
                snprintf(esc, sizeof esc, "\\x%02x", c);
                sb_puts(b, esc);
            } else {
                sb_putn(b, (const char *)&c, 1);
            }
        }
        sb_putn(b, "\"", 1);
    } else if (node->type == YAML_SEQUENCE_NODE) {
        sb_puts(b, "[");
        for (yaml_node_item_t *it = node->data.sequence.items.start;
             it < node->data.sequence.items.top; it++) {
            if (it != node->data.sequence.items.start) sb_puts(b, ", ");
            if (flow_text(doc, yaml_document_get_node(doc, *it), b, depth + 1)) return -1;
        }
        sb_puts(b, "]");
    } else if (node->type == YAML_MAPPING_NODE) {
        sb_puts(b, "{");
        for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
             p++) {
            if (p != node->data.mapping.pairs.start) sb_puts(b, ", ");
            if (flow_text(doc, yaml_document_get_node(doc, p->key), b, depth + 1)) return -1;
            sb_puts(b, ": ");
            if (flow_text(doc, yaml_document_get_node(doc, p->value), b, depth + 1)) return -1;
        }
        sb_puts(b, "}");
    } else {
        return -1;
    }
    return b->len > MAX_MAP_CHARS ? -1 : 0;
}

static void set_origin(struct ao_config *cfg, int row, const char *origin)
{
    free(cfg->meta->origin[row]);
    cfg->meta->origin[row] = origin ? ao_strdup(origin) : NULL;
}

/* Type-check `node` against row `row`, then store it. `origin` NULL = the
 * default. Nothing is stored when the value is rejected. */
static int set_from_node(struct ao_config *cfg, int row, yaml_document_t *doc, yaml_node_t *node,
                         const char *where, const char *origin)
{
    const struct ao_key *k = &ao_schema[row];
    const struct target t = {k, doc, where};
    void *dst = field(cfg, k);
    int null = is_null_node(node);
    if (null && !(k->flags & AO_KEY_NULLABLE)) return bad_value(&t, NULL, "is not allowed");
    if (null && k->type != AO_CFG_INT && k->type != AO_CFG_ENUM)
        return bad_value(&t, NULL, "is not allowed");

    switch (k->type) {
    case AO_CFG_INT: {
        int v = k->null_value;
        if (!null && parse_int_node(&t, node, &v)) return AO_EXIT_USAGE;
        memcpy(dst, &v, sizeof v);
        break;
    }
    case AO_CFG_FLOAT: {
        double v;
        if (parse_float_node(&t, node, &v)) return AO_EXIT_USAGE;
        memcpy(dst, &v, sizeof v);
        break;
    }
    case AO_CFG_BOOL: {
        const char *s = plain_scalar(&t, node, "is not a boolean");
        int v;
        if (!s) return AO_EXIT_USAGE;
        if (parse_bool(s, &v)) return bad_value(&t, node, "is not a boolean");
        memcpy(dst, &v, sizeof v);
        break;
    }
    case AO_CFG_INT_OR_BOOL: {
        const char *s = plain_scalar(&t, node, "is neither a boolean nor an integer");
        int v;
        if (!s) return AO_EXIT_USAGE;
        if (!parse_bool(s, &v) && strcmp(s, "0") && strcmp(s, "1"))
            v = v ? 2 : 0; /* true = two buffers in flight, false = no limit */
        else if (parse_int_node(&t, node, &v))
            return AO_EXIT_USAGE;
        memcpy(dst, &v, sizeof v);
        break;
    }
    case AO_CFG_STRING: {
        if (node->type != YAML_SCALAR_NODE) return bad_value(&t, node, "is not a string");
        const char *s = (const char *)node->data.scalar.value;
        if (strlen(s) != node->data.scalar.length)
            return bad_value(&t, node, "contains a NUL character");
        char **slot = dst;
        free(*slot);
        *slot = ao_strdup(s);
        break;
    }
    case AO_CFG_ENUM: {
        int v = k->null_value;
        if (!null) {
            if (node->type != YAML_SCALAR_NODE) return bad_value(&t, node, "is not a name");
            const char *s = (const char *)node->data.scalar.value;
            const struct ao_enum_name *e = k->names;
            while (e->name && strcasecmp(e->name, s)) e++;
            if (!e->name) return bad_value(&t, node, "is not one of the choices");
            v = e->value;
        }
        memcpy(dst, &v, sizeof v);
        break;
    }
    case AO_CFG_FLOAT_LIST: {
        if (node->type != YAML_SEQUENCE_NODE) return bad_value(&t, node, "is not a list");
        int n = (int)(node->data.sequence.items.top - node->data.sequence.items.start);
        if (n != k->len) {
            char why[64];
            snprintf(why, sizeof why, "has %d element%s", n, n == 1 ? "" : "s");
            return bad_value(&t, node, why);
        }
        double v[8];
        assert(k->len <= 8);
        for (int i = 0; i < n; i++) {
            yaml_node_t *item = yaml_document_get_node(doc, node->data.sequence.items.start[i]);
            if (parse_float_node(&t, item, &v[i])) return AO_EXIT_USAGE;
        }
        memcpy(dst, v, sizeof v[0] * (size_t)n);
        break;
    }
    case AO_CFG_MAP: {
        if (node->type != YAML_MAPPING_NODE) return bad_value(&t, node, "is not a mapping");
        struct sbuf b = {0};
        if (flow_text(doc, node, &b, 0)) {
            free(b.p);
            return bad_value(&t, node, "is too large or too deeply nested");
        }
        char **slot = dst;
        free(*slot);
        *slot = b.p;
        break;
    }
    }
    set_origin(cfg, row, origin);
    if (origin && (k->flags & AO_KEY_NO_EFFECT) && !cfg->meta->warned[row]) {
        cfg->meta->warned[row] = 1;
        cfg->meta->noop_warnings++;
        ao_warn("%s: %s has no effect in aorta: %s", where, k->key, k->help);
    }
    return 0;
}

/* ---- reading YAML ---------------------------------------------------------- */

/* A config file, or one value given as text (a default, an override). */
struct yaml_input {
    const char *where; /* the file's path, or the text's origin ("--override") */
    FILE *f;           /* the file, or NULL for text */
    const char *text;
    const char *key; /* text only: the key it is for, named in messages */
};

static void start_parser(yaml_parser_t *p, const struct yaml_input *in)
{
    if (!yaml_parser_initialize(p)) ao_fatal(AO_EXIT_FAIL, "libyaml", "out of memory");
    if (in->f) {
        rewind(in->f);
        yaml_parser_set_input_file(p, in->f);
    } else {
        yaml_parser_set_input_string(p, (const unsigned char *)in->text, strlen(in->text));
    }
}

static char *mark_text(const char *path, yaml_mark_t m, int with_column)
{
    if (with_column) return ao_asprintf("%s:%zu:%zu", path, m.line + 1, m.column + 1);
    return ao_asprintf("%s:%zu", path, m.line + 1);
}

static int input_error(const struct yaml_input *in, yaml_mark_t m, const char *what)
{
    if (in->f) {
        char *where = mark_text(in->where, m, 1);
        ao_error(where, "%s", what);
        free(where);
    } else {
        char v[SHOWN_CHARS + 8];
        shown(v, sizeof v, in->text, strlen(in->text));
        ao_error(in->where, "%s: cannot read '%s' as a value: %s", in->key, v, what);
    }
    return AO_EXIT_USAGE;
}

static int syntax_error(const struct yaml_input *in, const yaml_parser_t *p)
{
    yaml_mark_t m = p->problem_mark;
    if (p->error == YAML_READER_ERROR && in->f) {
        /* Encoding errors carry a byte offset, not a line. */
        memset(&m, 0, sizeof m);
        rewind(in->f);
        for (size_t i = 0; i < p->problem_offset; i++) {
            int c = fgetc(in->f);
            if (c == EOF) break;
            if (c == '\n') {
                m.line++;
                m.column = 0;
            } else {
                m.column++;
            }
        }
    }
    char *what = ao_asprintf("YAML syntax error: %s%s%s", p->problem ? p->problem : "unreadable",
                             p->context ? " " : "", p->context ? p->context : "");
    input_error(in, m, what);
    free(what);
    return AO_EXIT_USAGE;
}

/* Load the one document of `in`. A first pass over the events refuses deep
 * nesting (libyaml's parser takes time quadratic in depth, so a hostile file
 * could hang us) and a second document (which would be silently ignored). */
static int read_document(const struct yaml_input *in, yaml_document_t *doc)
{
    yaml_parser_t p;
    yaml_event_t e;
    int depth = 0, docs = 0, rc = 0;
    start_parser(&p, in);
    for (int done = 0; !done && !rc;) {
        if (!yaml_parser_parse(&p, &e)) {
            rc = syntax_error(in, &p);
            break;
        }
        switch (e.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > MAX_NESTING) {
                char what[64];
                snprintf(what, sizeof what, "lists or mappings nested deeper than %d levels",
                         MAX_NESTING);
                rc = input_error(in, e.start_mark, what);
            }
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                rc = input_error(in, e.start_mark,
                                 "a config holds one YAML document; found a second");
            break;
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        default:
            break;
        }
        yaml_event_delete(&e);
    }
    yaml_parser_delete(&p);
    if (rc) return rc;
    start_parser(&p, in);
    if (!yaml_parser_load(&p, doc)) rc = syntax_error(in, &p);
    yaml_parser_delete(&p);
    return rc;
}

/* Parse `text` as a YAML value and store it in row `row`. */
static int set_from_text(struct ao_config *cfg, int row, const char *text, const char *where,
                         const char *origin)
{
    const struct yaml_input in = {.where = where, .text = text, .key = ao_schema[row].key};
    yaml_document_t doc;
    int rc = read_document(&in, &doc);
    if (rc) return rc;
    rc = set_from_node(cfg, row, &doc, yaml_document_get_root_node(&doc), where, origin);
    yaml_document_delete(&doc);
    return rc;
}

/* ---- files ----------------------------------------------------------------- */

struct file_ctx {
    struct ao_config *cfg;
    yaml_document_t *doc;
    const char *path;
};

static int walk_mapping(struct file_ctx *fc, yaml_node_t *map, const char *prefix, int depth);

static int walk_pair(struct file_ctx *fc, yaml_node_t *key_node, yaml_node_t *value,
                     const char *prefix, int depth)
{
    char *where = mark_text(fc->path, key_node->start_mark, 1);
    int rc = 0;
    if (key_node->type != YAML_SCALAR_NODE) {
        ao_error(where, "a key must be a name, not a %s",
                 key_node->type == YAML_SEQUENCE_NODE ? "list" : "mapping");
        free(where);
        return AO_EXIT_USAGE;
    }
    char *dotted = *prefix ? ao_asprintf("%s.%s", prefix, key_node->data.scalar.value)
                           : ao_strdup((const char *)key_node->data.scalar.value);
    int row = row_of(dotted);
    if (row >= 0) {
        char *vwhere = mark_text(fc->path, value->start_mark, 1);
        char *origin = mark_text(fc->path, value->start_mark, 0);
        rc = set_from_node(fc->cfg, row, fc->doc, value, vwhere, origin);
        free(vwhere);
        free(origin);
    } else if (is_section(dotted)) {
        if (value->type == YAML_MAPPING_NODE) {
            rc = walk_mapping(fc, value, dotted, depth + 1);
        } else if (!is_null_node(value)) { /* an empty section ("compile:") is fine */
            ao_error(where, "'%s' is a section: it takes a mapping of keys, not a %s", dotted,
                     value->type == YAML_SEQUENCE_NODE ? "list" : "value");
            rc = AO_EXIT_USAGE;
        }
    } else {
        rc = unknown_key(where, dotted, value->type == YAML_MAPPING_NODE);
    }
    free(dotted);
    free(where);
    return rc;
}

static int walk_mapping(struct file_ctx *fc, yaml_node_t *map, const char *prefix, int depth)
{
    yaml_node_pair_t *start = map->data.mapping.pairs.start, *top = map->data.mapping.pairs.top;
    if (depth > MAX_DEPTH || top - start > MAX_PAIRS) {
        char *where = mark_text(fc->path, map->start_mark, 1);
        ao_error(where, "mapping too large or too deeply nested for a config");
        free(where);
        return AO_EXIT_USAGE;
    }
    for (yaml_node_pair_t *p = start; p < top; p++) {
        yaml_node_t *key = yaml_document_get_node(fc->doc, p->key);
        yaml_node_t *value = yaml_document_get_node(fc->doc, p->value);
        if (!key || !value) continue;
        /* Duplicates: YAML forbids them and libyaml does not check. */
        for (yaml_node_pair_t *q = start; q < p && key->type == YAML_SCALAR_NODE; q++) {
            yaml_node_t *other = yaml_document_get_node(fc->doc, q->key);
            if (other && other->type == YAML_SCALAR_NODE &&
                !strcmp((const char *)other->data.scalar.value,
                        (const char *)key->data.scalar.value)) {
                char *where = mark_text(fc->path, key->start_mark, 1);
                char k[SHOWN_CHARS + 8];
                shown(k, sizeof k, (const char *)key->data.scalar.value, key->data.scalar.length);
                ao_error(where, "duplicate key '%s%s%s' (first at line %zu)", prefix,
                         *prefix ? "." : "", k, other->start_mark.line + 1);
                free(where);
                return AO_EXIT_USAGE;
            }
        }
        int rc = walk_pair(fc, key, value, prefix, depth);
        if (rc) return rc;
    }
    return 0;
}

static int load_file(struct ao_config *cfg, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        ao_error(path, "cannot read the config file: %s", strerror(errno));
        return AO_EXIT_USAGE;
    }
    const struct yaml_input in = {.where = path, .f = f};
    yaml_document_t doc;
    int rc = read_document(&in, &doc);
    fclose(f);
    if (rc) return rc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type == YAML_MAPPING_NODE) {
        struct file_ctx fc = {cfg, &doc, path};
        rc = walk_mapping(&fc, root, "", 0);
    } else if (root && !is_null_node(root)) {
        char *where = mark_text(path, root->start_mark, 1);
        ao_error(where,
                 "the top level must be a mapping of sections (training:, model:, ...), "
                 "not a %s",
                 root->type == YAML_SEQUENCE_NODE ? "list" : "single value");
        free(where);
        rc = AO_EXIT_USAGE;
    }
    yaml_document_delete(&doc);
    return rc;
}

/* ---- public: load, set, free --------------------------------------------- */

static void init_defaults(struct ao_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->meta = ao_calloc(1, sizeof *cfg->meta);
    cfg->meta->origin = ao_calloc((size_t)ao_schema_count, sizeof(char *));
    cfg->meta->warned = ao_calloc((size_t)ao_schema_count, 1);
    for (int i = 0; i < ao_schema_count; i++)
        if (set_from_text(cfg, i, ao_schema[i].def, "schema default", NULL))
            ao_fatal(AO_EXIT_FAIL, "config schema", "bad default for %s", ao_schema[i].key);
}

int ao_config_set(struct ao_config *cfg, const char *key, const char *value, const char *origin)
{
    int row = row_of(key);
    if (row < 0) {
        if (is_section(key)) {
            ao_error(origin, "'%s' is a section, not a key ('aorta config doc' lists its keys)",
                     key);
            return AO_EXIT_USAGE;
        }
        return unknown_key(origin, key, 0);
    }
    return set_from_text(cfg, row, value, origin, origin);
}

static int apply_override(struct ao_config *cfg, const char *word)
{
    const char *eq = strchr(word, '=');
    if (!eq || eq == word) {
        char v[SHOWN_CHARS + 8];
        shown(v, sizeof v, word, strlen(word));
        ao_error("--override", "'%s' is not key=value (e.g. training.max_steps=100)", v);
        return AO_EXIT_USAGE;
    }
    char *key = ao_asprintf("%.*s", (int)(eq - word), word);
    int rc = ao_config_set(cfg, key, eq + 1, "--override");
    free(key);
    return rc;
}

int ao_config_resolve(struct ao_config *cfg, const char *path, char *const *overrides,
                      int n_overrides)
{
    init_defaults(cfg);
    int rc = path ? load_file(cfg, path) : 0;
    for (int i = 0; !rc && i < n_overrides; i++) rc = apply_override(cfg, overrides[i]);
    if (rc) ao_config_free(cfg);
    return rc;
}

int ao_config_load(struct ao_config *cfg, const char *path, char *const *overrides, int n_overrides)
{
    int rc = ao_config_resolve(cfg, path, overrides, n_overrides);
    if (!rc && (rc = ao_config_validate(cfg))) ao_config_free(cfg);
    return rc;
}

void ao_config_free(struct ao_config *cfg)
{
    if (!cfg->meta) return;
    for (int i = 0; i < ao_schema_count; i++) {
        const struct ao_key *k = &ao_schema[i];
        if (k->type == AO_CFG_STRING || k->type == AO_CFG_MAP) {
            char **slot = field(cfg, k);
            free(*slot);
            *slot = NULL;
        }
        free(cfg->meta->origin[i]);
    }
    free(cfg->meta->origin);
    free(cfg->meta->warned);
    free(cfg->meta);
    cfg->meta = NULL;
}

const char *ao_config_origin(const struct ao_config *cfg, const char *key)
{
    int row = row_of(key);
    if (row < 0 || !cfg->meta) return NULL;
    return cfg->meta->origin[row] ? cfg->meta->origin[row] : "default";
}

int ao_config_noop_warnings(const struct ao_config *cfg)
{
    return cfg->meta ? cfg->meta->noop_warnings : 0;
}

/* ---- derived values and cross-key checks ------------------------------- */

int ao_config_ff_dim(const struct ao_config *cfg)
{
    return cfg->model.ff_dim ? cfg->model.ff_dim : cfg->model.mlp_hidden_dim;
}

enum ao_precision ao_config_param_dtype(const struct ao_config *cfg)
{
    return cfg->fsdp.param_dtype == AO_PRECISION_AUTO ? cfg->training.mixed_precision
                                                      : cfg->fsdp.param_dtype;
}

int ao_config_total_steps(const struct ao_config *cfg, int world_size)
{
    double global =
        (double)world_size * cfg->training.batch_size * cfg->training.gradient_accumulation;
    double per_epoch = ceil(cfg->dataset.num_samples / global);
    double steps = per_epoch * cfg->training.epochs;
    return steps < cfg->training.max_steps ? (int)steps : cfg->training.max_steps;
}

const char *ao_precision_name(enum ao_precision p)
{
    switch (p) {
    case AO_PRECISION_FP16:
        return "fp16";
    case AO_PRECISION_BF16:
        return "bf16";
    case AO_PRECISION_FP32:
        return "fp32";
    case AO_PRECISION_AUTO:
        break;
    }
    return "auto";
}

/* "model.num_heads = 7 (--override)" */
static char *describe(const struct ao_config *cfg, const char *key)
{
    int row = row_of(key);
    assert(row >= 0);
    int is_null;
    char *value = value_text(cfg, row, &is_null); /* as `config show` prints it */
    char *s = ao_asprintf("%s = %s (%s)", key, value, ao_config_origin(cfg, key));
    free(value);
    return s;
}

static int cross_error(const struct ao_config *cfg, const char *key_a, const char *key_b,
                       const char *why)
{
    char *a = describe(cfg, key_a);
    char *b = key_b ? describe(cfg, key_b) : NULL;
    if (b)
        ao_error("config", "%s and %s: %s", a, b, why);
    else
        ao_error("config", "%s: %s", a, why);
    free(a);
    free(b);
    return AO_EXIT_USAGE;
}

int ao_config_validate(const struct ao_config *cfg)
{
    const struct {
        const char *model_key, *data_key;
        int model_value, data_value;
    } same[] = {
        {"model.vocab_size", "dataset.vocab_size", cfg->model.vocab_size, cfg->dataset.vocab_size},
        {"model.dense_dim", "dataset.dense_dim", cfg->model.dense_dim, cfg->dataset.dense_dim},
        {"model.num_dense_features", "dataset.num_dense_features", cfg->model.num_dense_features,
         cfg->dataset.num_dense_features},
    };
    if (cfg->model.model_dim % cfg->model.num_heads)
        return cross_error(cfg, "model.model_dim", "model.num_heads",
                           "model_dim must be divisible by num_heads");
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (same[i].model_value != same[i].data_value)
            return cross_error(cfg, same[i].model_key, same[i].data_key,
                               "the model and the dataset must agree");

    /* Steps: warm-up, then the baselines (compute-only and comm-only), then at
     * least one step to measure. */
    long long need =
        (long long)cfg->training.summary_skip_steps + 2LL * cfg->training.baseline_steps + 1;
    if (cfg->training.baseline_steps > 0 && cfg->training.max_steps < need) {
        char why[160];
        snprintf(why, sizeof why,
                 "warm-up plus 2 x baseline_steps leaves no step to measure; "
                 "training.max_steps must be at least %lld",
                 need);
        return cross_error(cfg, "training.baseline_steps", "training.summary_skip_steps", why);
    }
    if (cfg->training.max_steps < need)
        return cross_error(cfg, "training.max_steps", "training.summary_skip_steps",
                           "max_steps must exceed summary_skip_steps, or no step is measured");
    if (ao_config_total_steps(cfg, 1) < need) {
        char why[200];
        snprintf(why, sizeof why,
                 "epochs x ceil(num_samples / (batch_size x gradient_accumulation)) = %d steps "
                 "even on one rank, fewer than the %lld needed after warm-up",
                 ao_config_total_steps(cfg, 1), need);
        return cross_error(cfg, "training.epochs", "dataset.num_samples", why);
    }
    if (cfg->scheduler.warmup_steps > cfg->scheduler.total_steps)
        return cross_error(cfg, "scheduler.warmup_steps", "scheduler.total_steps",
                           "warm-up cannot be longer than the schedule");
    if (cfg->fsdp.shard_group_size && cfg->fsdp.sharding_strategy != AO_SHARD_HYBRID)
        return cross_error(cfg, "fsdp.shard_group_size", "fsdp.sharding_strategy",
                           "a shard group size applies only to hybrid_shard (use 0 otherwise)");
    if (cfg->distributed.nccl.min_ctas && cfg->distributed.nccl.max_ctas &&
        cfg->distributed.nccl.min_ctas > cfg->distributed.nccl.max_ctas)
        return cross_error(cfg, "distributed.nccl.min_ctas", "distributed.nccl.max_ctas",
                           "min_ctas cannot exceed max_ctas");
    if (!cfg->training.output_dir[0])
        return cross_error(cfg, "training.output_dir", NULL, "must not be empty");
    const char *trace = cfg->profiling.trace_filename;
    if (!trace[0] || strchr(trace, '/') || !strcmp(trace, ".") || !strcmp(trace, ".."))
        return cross_error(cfg, "profiling.trace_filename", NULL,
                           "must be a plain file name (written inside the run directory)");
    return 0;
}

/* ---- printing -------------------------------------------------------------- */

static void append_double(struct sbuf *b, double v)
{
    char t[40];
    ao_format_double(t, sizeof t, v);
    sb_puts(b, t);
}

/* Row `row`'s value as text (unquoted), heap-allocated. */
static char *value_text(const struct ao_config *cfg, int row, int *is_null)
{
    const struct ao_key *k = &ao_schema[row];
    const void *src = field(cfg, k);
    struct sbuf b = {0};
    int iv;
    *is_null = 0;
    switch (k->type) {
    case AO_CFG_INT:
    case AO_CFG_INT_OR_BOOL:
        memcpy(&iv, src, sizeof iv);
        if ((k->flags & AO_KEY_NULLABLE) && iv == k->null_value) {
            *is_null = 1;
            return ao_strdup("null");
        }
        return ao_asprintf("%d", iv);
    case AO_CFG_BOOL:
        memcpy(&iv, src, sizeof iv);
        return ao_strdup(iv ? "true" : "false");
    case AO_CFG_FLOAT:
        append_double(&b, *(const double *)src);
        return b.p;
    case AO_CFG_FLOAT_LIST:
        sb_puts(&b, "[");
        for (int i = 0; i < k->len; i++) {
            if (i) sb_puts(&b, ", ");
            append_double(&b, ((const double *)src)[i]);
        }
        sb_puts(&b, "]");
        return b.p;
    case AO_CFG_STRING:
    case AO_CFG_MAP:
        return ao_strdup(*(char *const *)src ? *(char *const *)src : "");
    case AO_CFG_ENUM:
        memcpy(&iv, src, sizeof iv);
        if ((k->flags & AO_KEY_NULLABLE) && iv == k->null_value) {
            *is_null = 1;
            return ao_strdup("null");
        }
        for (const struct ao_enum_name *e = k->names; e->name; e++)
            if (e->value == iv) return ao_strdup(e->name);
        return ao_asprintf("%d", iv);
    }
    return ao_strdup("?");
}

/* A string as a YAML scalar that reads back as the same string. */
static void yaml_string(struct sbuf *b, const char *s)
{
    int plain = *s && !strchr("-?:,[]{}#&*!|>'\"%@`~ ", *s);
    for (const char *p = s; plain && *p; p++)
        plain = isalnum((unsigned char)*p) || strchr("_./+-", *p);
    static const char *reserved[] = {"null", "Null", "NULL", "true", "false", "yes",
                                     "no",   "on",   "off",  "True", "False"};
    for (size_t i = 0; plain && i < sizeof reserved / sizeof reserved[0]; i++)
        plain = strcmp(s, reserved[i]) != 0;
    if (plain) {
        sb_puts(b, s);
        return;
    }
    sb_puts(b, "\"");
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        char esc[8];
        if (c == '"' || c == '\\' || c < 0x20) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            sb_puts(b, esc);
        } else {
            sb_putn(b, p, 1);
        }
    }
    sb_puts(b, "\"");
}

void ao_config_print_yaml(FILE *out, const struct ao_config *cfg, int with_origins)
{
    const char *prev = "";
    for (int i = 0; i < ao_schema_count; i++) {
        const struct ao_key *k = &ao_schema[i];
        /* Open every section this key is in that the previous key was not. */
        size_t common = 0;
        for (size_t j = 0; k->key[j] && k->key[j] == prev[j]; j++)
            if (k->key[j] == '.') common = j + 1;
        int depth = 0;
        for (size_t j = 0; j < common; j++) depth += k->key[j] == '.';
        if (common == 0 && i > 0) fputc('\n', out);
        const char *part = k->key + common;
        const char *dot;
        while ((dot = strchr(part, '.'))) {
            fprintf(out, "%*s%.*s:\n", depth * 2, "", (int)(dot - part), part);
            depth++;
            part = dot + 1;
        }
        int is_null;
        char *value = value_text(cfg, i, &is_null);
        struct sbuf line = {0};
        char indent[64];
        snprintf(indent, sizeof indent, "%*s%s: ", depth * 2, "", part);
        sb_puts(&line, indent);
        if (k->type == AO_CFG_STRING && !is_null)
            yaml_string(&line, value);
        else
            sb_puts(&line, value);
        if (with_origins) {
            while (line.len < 44) sb_puts(&line, " ");
            sb_puts(&line, "  # ");
            sb_puts(&line, cfg->meta->origin[i] ? cfg->meta->origin[i] : "default");
        }
        fprintf(out, "%s\n", line.p);
        free(line.p);
        free(value);
        prev = k->key;
    }
}

void ao_config_foreach(const struct ao_config *cfg,
                       void (*visit)(void *ctx, const struct ao_config_item *item), void *ctx)
{
    for (int i = 0; i < ao_schema_count; i++) {
        const struct ao_key *k = &ao_schema[i];
        struct ao_config_item item = {.key = k->key, .type = k->type};
        char *value = value_text(cfg, i, &item.is_null);
        item.value = value;
        item.origin = cfg->meta->origin[i] ? cfg->meta->origin[i] : "default";
        item.no_effect = (k->flags & AO_KEY_NO_EFFECT) != 0;
        visit(ctx, &item);
        free(value);
    }
}

/* Markdown table cells must not contain a bare '|'. */
static void md_cell(FILE *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", out);
        else
            fputc(*s, out);
    }
}

void ao_config_print_doc(FILE *out)
{
    fputs("# aorta configuration reference\n\n"
          "Generated by `aorta config doc` from the schema in `src/core/schema.c`; do not edit.\n\n"
          "A run's configuration is, in order: these defaults, then the YAML file given with\n"
          "`--config` (sections as below; `training.batch_size` is `batch_size` under\n"
          "`training:`), then each `--override key=value` (a later one wins). Values are typed:\n"
          "booleans accept true/false/yes/no/on/off/1/0, enums are case-insensitive, lists are\n"
          "written `[0.9, 0.95]`, and `null` is accepted only where listed. Unknown keys, wrong\n"
          "types and out-of-range values are errors (exit code 2).\n\n"
          "| key | type | default | allowed | description |\n"
          "|---|---|---|---|---|\n",
          out);
    for (int i = 0; i < ao_schema_count; i++) {
        const struct ao_key *k = &ao_schema[i];
        char allowed[512];
        allowed_text(allowed, sizeof allowed, k);
        fprintf(out, "| `%s` | %s%s | `", k->key, type_name(k),
                k->flags & AO_KEY_NULLABLE ? " or null" : "");
        md_cell(out, k->def);
        fputs("` | ", out);
        md_cell(out, allowed);
        fputs(" | ", out);
        if (k->flags & AO_KEY_NO_EFFECT) fputs("**No effect in aorta.** ", out);
        md_cell(out, k->help);
        fputs(" |\n", out);
    }
    fputs("\n## Seed keys with no effect\n\n"
          "These keys of the original toolkit's config are accepted so that its files load\n"
          "unchanged; setting one (in a file or an override) prints one warning naming it.\n\n",
          out);
    for (int i = 0; i < ao_schema_count; i++)
        if (ao_schema[i].flags & AO_KEY_NO_EFFECT)
            fprintf(out, "- `%s`: %s\n", ao_schema[i].key, ao_schema[i].help);
}
