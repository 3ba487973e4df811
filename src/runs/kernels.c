/* Top kernels of a rank (runs/kernels.h). */
#include "runs/kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Slot of `name`: its entry, or the empty slot where it goes. */
static size_t find_slot(const ao_kernel_table *t, const char *name)
{
    size_t i = (size_t)(name_hash(name) & (t->nslots - 1));
    while (t->slots[i] && strcmp(t->k[t->slots[i] - 1].name, name) != 0)
        i = (i + 1) & (t->nslots - 1);
    return i;
}

/* Keep the table at most half full (a power of two). */
static void rehash(ao_kernel_table *t)
{
    if (2 * (t->n + 1) <= t->nslots) return;
    free(t->slots);
    t->nslots = t->nslots ? 2 * t->nslots : 64;
    t->slots = ao_calloc(t->nslots, sizeof *t->slots);
    for (size_t k = 0; k < t->n; k++) t->slots[find_slot(t, t->k[k].name)] = k + 1;
}

void ao_kernel_table_add(ao_kernel_table *t, const ao_op *ops, size_t n, double step_ms)
{
    for (size_t i = 0; i < n; i++) {
        const char *name = ops[i].name ? ops[i].name : "?";
        rehash(t);
        size_t s = find_slot(t, name);
        if (!t->slots[s]) {
            if (t->n == t->cap) {
                t->cap = t->cap ? 2 * t->cap : 64;
                t->k = ao_realloc(t->k, t->cap * sizeof *t->k);
            }
            t->k[t->n] = (ao_top_kernel){ao_strdup(name), ops[i].cls, 0, 0, 0};
            t->slots[s] = ++t->n;
        }
        ao_top_kernel *k = &t->k[t->slots[s] - 1];
        double d = ops[i].end_us > ops[i].start_us ? ops[i].end_us - ops[i].start_us : 0;
        k->count++;
        k->total_us += d;
        if (d > k->max_us) k->max_us = d;
    }
    if (isfinite(step_ms)) t->window_ms += step_ms;
    t->steps++;
}

static int by_total_desc(const void *a, const void *b)
{
    const ao_top_kernel *x = a, *y = b;
    if (x->total_us != y->total_us) return x->total_us < y->total_us ? 1 : -1;
    return strcmp(x->name, y->name);
}

void ao_kernel_table_sort(ao_kernel_table *t)
{
    if (t->n) qsort(t->k, t->n, sizeof *t->k, by_total_desc);
    /* the slots index the old order; the table is only read from here on */
    free(t->slots);
    t->slots = NULL;
    t->nslots = 0;
}

void ao_kernel_table_free(ao_kernel_table *t)
{
    for (size_t i = 0; i < t->n; i++) free((void *)t->k[i].name);
    free(t->k);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

void ao_kernel_table_gen(ao_json_writer *w, const char *key, int rank, const ao_kernel_table *t)
{
    ao_jw_open(w, key);
    ao_jw_int(w, "rank", rank);
    ao_jw_int(w, "steps", (long long)t->steps);
    ao_jw_double(w, "window_ms", t->window_ms);
    ao_jw_aopen(w, "kernels");
    for (size_t i = 0; i < t->n && i < AO_TOP_KERNELS; i++) {
        const ao_top_kernel *k = &t->k[i];
        ao_jw_open(w, NULL);
        ao_jw_str(w, "name", k->name);
        ao_jw_str(w, "class", ao_op_class_name((ao_op_class)k->cls));
        ao_jw_int(w, "count", (long long)k->count);
        ao_jw_double(w, "total_ms", k->total_us / 1000);
        ao_jw_double(w, "share", t->window_ms > 0 ? k->total_us / 1000 / t->window_ms : NAN);
        ao_jw_double(w, "mean_us", k->count ? k->total_us / (double)k->count : NAN);
        ao_jw_double(w, "max_us", k->max_us);
        ao_jw_close(w);
    }
    ao_jw_aclose(w);
    ao_jw_close(w);
}

/* The index of the '(' that opens the parameter list: the first at template
 * depth 0 that is not "(anonymous namespace)"; len when there is none. */
static size_t params_at(const char *s, size_t len)
{
    static const char anon[] = "(anonymous namespace)";
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '<')
            depth++;
        else if (s[i] == '>' && depth > 0)
            depth--;
        else if (s[i] == '(' && depth == 0) {
            if (strncmp(s + i, anon, sizeof anon - 1) == 0)
                i += sizeof anon - 2;
            else
                return i;
        }
    }
    return len;
}

void ao_kernel_short_name(const char *full, char *out, size_t n)
{
    if (n == 0) return;
    size_t len = strlen(full), end = params_at(full, len), start = 0;
    if (end == len) { /* no signature ("memcpy HtoD", a plain or mangled name) */
        snprintf(out, n, "%s", full);
        return;
    }
    /* the name is what follows the last space and "::" at depth 0 */
    int depth = 0;
    for (size_t i = 0; i < end; i++) {
        if (full[i] == '<')
            depth++;
        else if (full[i] == '>' && depth > 0)
            depth--;
        else if (depth == 0 && full[i] == ' ')
            start = i + 1;
        else if (depth == 0 && full[i] == ':' && full[i + 1] == ':')
            start = i + 2;
        else if (depth == 0 && full[i] == ')')
            start = i + 1; /* after (anonymous namespace) */
    }
    if (start >= end) start = 0; /* nothing left: from the start */
    size_t o = 0;
    depth = 0;
    for (size_t i = start; i < end && o + 6 <= n; i++) { /* room for "<…>" and the NUL */
        if (full[i] == '<') {
            if (depth++ == 0) {
                memcpy(out + o, "<\u2026>", 5); /* <…> */
                o += 5;
            }
        } else if (full[i] == '>' && depth > 0) {
            depth--;
        } else if (depth == 0) {
            out[o++] = full[i];
        }
    }
    out[o] = '\0';
}
