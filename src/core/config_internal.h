/* Inside core/: what config.c (load, set, free), config_yaml.c (reading
 * YAML), config_check.c (derived values, cross-key checks), config_print.c
 * (printing) and config_doc.c (the key reference) share. Not for use
 * outside core/config*.c. */
#ifndef AORTA_CORE_CONFIG_INTERNAL_H
#define AORTA_CORE_CONFIG_INTERNAL_H

#include <stddef.h>
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/schema.h"

#define SHOWN_CHARS 60 /* a bad value is quoted in errors up to this length */

struct ao_config_meta {
    char **origin;         /* per row; NULL = default */
    unsigned char *warned; /* per row: a no-effect key was set */
    int noop_warnings;     /* rows set that have no effect */
    /* While a file loads: its no-effect keys, named in one summary line at
     * the end instead of one warning each (the seed's file sets 15). */
    char *file_noop;
    int file_nnoop;
};

/* A growing NUL-terminated string. */
struct sbuf {
    char *p;
    size_t len, cap;
};

static inline void sb_putn(struct sbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = ao_realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static inline void sb_puts(struct sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

static inline void *field(const struct ao_config *cfg, const struct ao_key *k)
{
    return (char *)cfg + k->offset;
}

static inline const char *origin_of(const struct ao_config *cfg, int row)
{
    return cfg->meta->origin[row] ? cfg->meta->origin[row] : "default";
}

/* The schema row of `key`, or -1. */
int ao_cfg_row_of(const char *key);
/* True when `name` is a section (or sub-section) some key lives under. */
int ao_cfg_is_section(const char *name);
/* A value as it appears in an error: printable, bounded. */
void ao_cfg_shown(char *out, size_t n, const char *s, size_t len);
/* What a key accepts, in words: for errors and for the reference. */
void ao_cfg_allowed_text(char *buf, size_t n, const struct ao_key *k);
/* "unknown key 'x' (did you mean 'y'?)" at `where`; returns AO_EXIT_USAGE. */
int ao_cfg_unknown_key(const char *where, const char *key, int as_section);

/* Parse `text` as a YAML value and store it in row `row` (config_yaml.c). */
int ao_cfg_set_from_text(struct ao_config *cfg, int row, const char *text, const char *where,
                         const char *origin);
/* Read the config file at `path` into `cfg` (config_yaml.c). */
int ao_cfg_load_file(struct ao_config *cfg, const char *path);

/* Row `row`'s value as text (unquoted), heap-allocated (config_print.c). */
char *ao_cfg_value_text(const struct ao_config *cfg, int row, int *is_null);

#endif
