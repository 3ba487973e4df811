/* Reading YAML into struct ao_config: one value from one node, a whole
 * document, and a config file's mappings of sections and keys. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "core/config.h"
#include "core/config_internal.h"
#include "core/error.h"
#include "core/rundir.h"
#include "core/schema.h"

#define MAX_DEPTH     8    /* deeper than any key: the rest is reported, not walked */
#define MAX_NESTING   64   /* YAML collections inside each other, anywhere */
#define MAX_PAIRS     4096 /* keys in one mapping; the schema has ~100 */
#define MAX_MAP_CHARS 4096 /* compile.options is kept as text up to this size */

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
    return k->flags & AO_KEY_MAX_EXCLUSIVE ? v < k->max : v <= k->max;
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
    ao_cfg_allowed_text(allowed, sizeof allowed, t->k);
    if (!node)
        snprintf(v, sizeof v, "null");
    else if (node->type == YAML_SCALAR_NODE)
        ao_cfg_shown(v, sizeof v, (const char *)node->data.scalar.value, node->data.scalar.length);
    else {
        struct sbuf b = {0};
        flow_text(t->doc, (yaml_node_t *)node, &b, 0); /* bounded; a cut-off text is fine here */
        ao_cfg_shown(v, sizeof v, b.p ? b.p : "", b.len);
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
    /* Only INT and ENUM rows have a stored value that can mean null. */
    int nullable =
        (k->flags & AO_KEY_NULLABLE) && (k->type == AO_CFG_INT || k->type == AO_CFG_ENUM);
    if (null && !nullable) return bad_value(&t, NULL, "is not allowed");

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
        int v, word;
        if (!s) return AO_EXIT_USAGE;
        /* "0" and "1" are counts here; the other boolean words are flags. */
        int is_flag = strcmp(s, "0") && strcmp(s, "1") && !parse_bool(s, &word);
        if (is_flag)
            v = word ? 2 : 0; /* true = two buffers in flight, false = no limit */
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
    if (origin && (k->flags & AO_KEY_NO_EFFECT)) {
        struct ao_config_meta *m = cfg->meta;
        if (!m->warned[row]) {
            m->warned[row] = 1;
            m->noop_warnings++;
        }
        if (m->file_noop) { /* a file: named in the summary after it */
            char *list = ao_asprintf("%s%s%s", m->file_noop, m->file_nnoop ? ", " : "", k->key);
            free(m->file_noop);
            m->file_noop = list;
            m->file_nnoop++;
        } else { /* an override is deliberate: say so by name */
            ao_warn("%s: %s has no effect in aorta: %s", where, k->key, k->help);
        }
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
        ao_cfg_shown(v, sizeof v, in->text, strlen(in->text));
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
int ao_cfg_set_from_text(struct ao_config *cfg, int row, const char *text, const char *where,
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
    size_t *line_set; /* per row: 1-based line that set it in this file, 0 = not yet */
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
    int row = ao_cfg_row_of(dotted);
    if (row >= 0 && fc->line_set[row]) {
        /* The same key twice, spelled differently ("a.b:" and "a: {b:}"). */
        ao_error(where, "duplicate key '%s' (first at line %zu)", dotted, fc->line_set[row]);
        rc = AO_EXIT_USAGE;
    } else if (row >= 0) {
        fc->line_set[row] = key_node->start_mark.line + 1;
        char *vwhere = mark_text(fc->path, value->start_mark, 1);
        char *origin = mark_text(fc->path, value->start_mark, 0);
        rc = set_from_node(fc->cfg, row, fc->doc, value, vwhere, origin);
        free(vwhere);
        free(origin);
    } else if (ao_cfg_is_section(dotted)) {
        if (value->type == YAML_MAPPING_NODE) {
            rc = walk_mapping(fc, value, dotted, depth + 1);
        } else if (!is_null_node(value)) { /* an empty section ("compile:") is fine */
            ao_error(where, "'%s' is a section: it takes a mapping of keys, not a %s", dotted,
                     value->type == YAML_SEQUENCE_NODE ? "list" : "value");
            rc = AO_EXIT_USAGE;
        }
    } else {
        rc = ao_cfg_unknown_key(where, dotted, value->type == YAML_MAPPING_NODE);
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
                ao_cfg_shown(k, sizeof k, (const char *)key->data.scalar.value,
                             key->data.scalar.length);
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

int ao_cfg_load_file(struct ao_config *cfg, const char *path)
{
    FILE *f = ao_open_input_file(path, "config file");
    if (!f) return AO_EXIT_USAGE;
    const struct yaml_input in = {.where = path, .f = f};
    yaml_document_t doc;
    int rc = read_document(&in, &doc);
    fclose(f);
    if (rc) return rc;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type == YAML_MAPPING_NODE) {
        struct file_ctx fc = {cfg, &doc, path, ao_calloc((size_t)ao_schema_count, sizeof(size_t))};
        cfg->meta->file_noop = ao_strdup("");
        cfg->meta->file_nnoop = 0;
        rc = walk_mapping(&fc, root, "", 0);
        free(fc.line_set);
        if (rc == 0 && cfg->meta->file_nnoop)
            ao_warn("%s: %d key%s from the reference toolkit's format %s accepted and ignored: "
                    "%s; see docs/config.md",
                    path, cfg->meta->file_nnoop, cfg->meta->file_nnoop == 1 ? "" : "s",
                    cfg->meta->file_nnoop == 1 ? "is" : "are", cfg->meta->file_noop);
        free(cfg->meta->file_noop);
        cfg->meta->file_noop = NULL;
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
