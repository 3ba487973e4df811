/* The config schema: one row per key (core/schema.c). Internal to
 * core/config*.c; everything else reads struct ao_config. */
#ifndef AORTA_CORE_SCHEMA_H
#define AORTA_CORE_SCHEMA_H

#include <stddef.h>

#include "core/config.h"

/* Row flags. */
enum {
    AO_KEY_NULLABLE = 1 << 0,      /* `null` is a value (stored as the row's null_value) */
    AO_KEY_NO_EFFECT = 1 << 1,     /* a seed key aorta accepts, warns about once, ignores */
    AO_KEY_MIN_EXCLUSIVE = 1 << 2, /* value must be > min rather than >= min */
    AO_KEY_MAX_EXCLUSIVE = 1 << 3, /* value must be < max rather than <= max */
};

struct ao_enum_name {
    const char *name; /* matched case-insensitively; the first name of a value prints */
    int value;
};

struct ao_key {
    const char *key; /* dotted: "fsdp.limit_all_gathers" */
    enum ao_config_type type;
    unsigned flags;
    size_t offset;   /* into struct ao_config */
    const char *def; /* default, as YAML text, parsed like a file's value */
    double min, max; /* INT, FLOAT, FLOAT_LIST, INT_OR_BOOL; max = HUGE_VAL: none */
    const struct ao_enum_name *names; /* ENUM: NULL-terminated */
    int len;                          /* FLOAT_LIST: exact length */
    int null_value;                   /* nullable INT/ENUM: the stored value that means null */
    const char *help;                 /* one line; for AO_KEY_NO_EFFECT, why it has none */
};

extern const struct ao_key ao_schema[];
extern const int ao_schema_count;

#endif
