/* Printing struct ao_config: values as text, the YAML `config show` writes
 * (it loads back as the same config), and the walk over every key. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/config_internal.h"
#include "core/error.h"
#include "core/schema.h"
#include "core/text.h"

/* ---- printing -------------------------------------------------------------- */

static void append_double(struct sbuf *b, double v)
{
    char t[40];
    ao_format_double(t, sizeof t, v);
    sb_puts(b, t);
}

/* Row `row`'s value as text (unquoted), heap-allocated. */
char *ao_cfg_value_text(const struct ao_config *cfg, int row, int *is_null)
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
        char *value = ao_cfg_value_text(cfg, i, &is_null);
        struct sbuf line = {0};
        char indent[64];
        /* A no-effect key nobody set is shown, but commented out, so that the
         * output loads back without warnings. */
        int muted = (k->flags & AO_KEY_NO_EFFECT) && !cfg->meta->origin[i];
        snprintf(indent, sizeof indent, "%*s%s%s: ", depth * 2, "", muted ? "# " : "", part);
        sb_puts(&line, indent);
        if (k->type == AO_CFG_STRING && !is_null)
            yaml_string(&line, value);
        else
            sb_puts(&line, value);
        if (with_origins) {
            while (line.len < 44) sb_puts(&line, " ");
            sb_puts(&line, "  # ");
            sb_puts(&line, origin_of(cfg, i));
            if (muted) sb_puts(&line, ", no effect in aorta");
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
        char *value = ao_cfg_value_text(cfg, i, &item.is_null);
        item.value = value;
        item.origin = origin_of(cfg, i);
        item.no_effect = (k->flags & AO_KEY_NO_EFFECT) != 0;
        visit(ctx, &item);
        free(value);
    }
}
