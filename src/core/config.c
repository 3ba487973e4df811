/* Loading, setting and freeing struct ao_config through the schema, and the
 * helpers the other config files share (key lookup, "did you mean").
 *
 * Every value, whether a schema default, a file's node or an override's text,
 * becomes a libyaml node and goes through one function (set_from_node in
 * config_yaml.c), so the three sources cannot disagree about what "3e-4",
 * "yes" or "[0.9,0.95]" means. */
#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/config_internal.h"
#include "core/error.h"
#include "core/schema.h"
#include "core/text.h"

/* Enum members are read and written through int. */
static_assert(sizeof(enum ao_log_level) == sizeof(int), "enum size");
static_assert(sizeof(enum ao_precision) == sizeof(int), "enum size");
static_assert(sizeof(enum ao_sharding) == sizeof(int), "enum size");
static_assert(sizeof(enum ao_backward_prefetch) == sizeof(int), "enum size");

/* ---- small helpers ------------------------------------------------------- */

int ao_cfg_row_of(const char *key)
{
    for (int i = 0; i < ao_schema_count; i++)
        if (strcmp(ao_schema[i].key, key) == 0) return i;
    return -1;
}

/* True when `name` is a section (or sub-section) some key lives under. */
int ao_cfg_is_section(const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < ao_schema_count; i++)
        if (strncmp(ao_schema[i].key, name, n) == 0 && ao_schema[i].key[n] == '.') return 1;
    return 0;
}

/* A value as it appears in an error: printable, bounded. */
void ao_cfg_shown(char *out, size_t n, const char *s, size_t len)
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

static void range_text(char *buf, size_t n, const struct ao_key *k, int integer)
{
    char lo[32], hi[32];
    ao_format_double(lo, sizeof lo, k->min);
    ao_format_double(hi, sizeof hi, k->max);
    if (integer) /* the real bound, not "or more": the value is a C int */
        snprintf(buf, n, "%s..%s", lo, k->max >= (double)INT_MAX ? "2147483647" : hi);
    else if (k->max == HUGE_VAL)
        snprintf(buf, n, "%s %s", k->flags & AO_KEY_MIN_EXCLUSIVE ? "greater than" : "at least",
                 lo);
    else
        snprintf(buf, n, "%s%s, %s%s", k->flags & AO_KEY_MIN_EXCLUSIVE ? "(" : "[", lo, hi,
                 k->flags & AO_KEY_MAX_EXCLUSIVE ? ")" : "]");
}

/* What a key accepts, in words: for errors and for the reference. */
void ao_cfg_allowed_text(char *buf, size_t n, const struct ao_key *k)
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
    int best = ao_typo_limit(strlen(unknown));
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

int ao_cfg_unknown_key(const char *where, const char *key, int as_section)
{
    char shown_key[SHOWN_CHARS + 8], s[128];
    ao_cfg_shown(shown_key, sizeof shown_key, key, strlen(key));
    const char *what = as_section ? "section" : "key";
    if (suggest(key, s, sizeof s))
        ao_error(where, "unknown %s '%s' (did you mean '%s'?)", what, shown_key, s);
    else
        ao_error(where, "unknown %s '%s' ('aorta config doc' lists every key)", what, shown_key);
    return AO_EXIT_USAGE;
}

/* ---- public: load, set, free --------------------------------------------- */

static void init_defaults(struct ao_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->meta = ao_calloc(1, sizeof *cfg->meta);
    cfg->meta->origin = ao_calloc((size_t)ao_schema_count, sizeof(char *));
    cfg->meta->warned = ao_calloc((size_t)ao_schema_count, 1);
    for (int i = 0; i < ao_schema_count; i++)
        if (ao_cfg_set_from_text(cfg, i, ao_schema[i].def, "schema default", NULL))
            ao_fatal(AO_EXIT_FAIL, "config schema", "bad default for %s", ao_schema[i].key);
}

int ao_config_set(struct ao_config *cfg, const char *key, const char *value, const char *origin)
{
    int row = ao_cfg_row_of(key);
    if (row < 0) {
        if (ao_cfg_is_section(key)) {
            ao_error(origin, "'%s' is a section, not a key ('aorta config doc' lists its keys)",
                     key);
            return AO_EXIT_USAGE;
        }
        return ao_cfg_unknown_key(origin, key, 0);
    }
    return ao_cfg_set_from_text(cfg, row, value, origin, origin);
}

static int apply_override(struct ao_config *cfg, const char *word)
{
    const char *eq = strchr(word, '=');
    if (!eq || eq == word) {
        char v[SHOWN_CHARS + 8];
        ao_cfg_shown(v, sizeof v, word, strlen(word));
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
    int rc = path ? ao_cfg_load_file(cfg, path) : 0;
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
    int row = ao_cfg_row_of(key);
    if (row < 0 || !cfg->meta) return NULL;
    return origin_of(cfg, row);
}

int ao_config_noop_warnings(const struct ao_config *cfg)
{
    return cfg->meta ? cfg->meta->noop_warnings : 0;
}
