#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "ingest/reader_common.h"

int ao_ingest_rank_from_path(const char *path)
{
    int rank = -1;
    for (const char *p = path; *p; p++) {
        if (strncasecmp(p, "rank", 4) != 0) continue;
        if (p > path && isalnum((unsigned char)p[-1])) continue; /* "frank_2" */
        const char *d = p + 4;
        if (*d == '_' || *d == '-' || *d == '.') d++;
        if (!isdigit((unsigned char)*d)) continue;
        errno = 0;
        long v = strtol(d, NULL, 10);
        if (errno == 0 && v <= INT_MAX) rank = (int)v;
    }
    return rank;
}

static const struct {
    const char *suffix, *name;
} copy_names[] = {
    {"HOST_TO_DEVICE", "Memcpy HtoD"},
    {"DEVICE_TO_HOST", "Memcpy DtoH"},
    {"DEVICE_TO_DEVICE", "Memcpy DtoD"},
    {"HOST_TO_HOST", "Memcpy HtoH"},
};

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

const char *ao_rocprof_copy_name(const char *direction)
{
    for (size_t i = 0; i < sizeof copy_names / sizeof copy_names[0]; i++)
        if (ends_with(direction, copy_names[i].suffix)) return copy_names[i].name;
    return "Memcpy";
}

int ao_rocprof_copy_on_source(const char *direction)
{
    return strstr(direction, "DEVICE_TO_") != NULL;
}

int ao_rocprof_agent(const char *text, int64_t *out)
{
    if (strncmp(text, "Agent ", 6) == 0) text += 6;
    if (!isdigit((unsigned char)*text)) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (*end != '\0' || errno == ERANGE) return -1;
    *out = v;
    return 0;
}

void ao_ingest_add_device_name(ao_trace *t, const char *name)
{
    if (!name || !*name) return;
    const char *have = ao_trace_get_meta(t, "device_name");
    if (!have) {
        ao_trace_set_meta(t, "device_name", name);
        return;
    }
    size_t n = strlen(name);
    for (const char *p = have; (p = strstr(p, name)) != NULL; p++)
        if ((p == have || (p - have >= 2 && p[-2] == ',' && p[-1] == ' ')) &&
            (p[n] == '\0' || p[n] == ','))
            return;
    char *joined = ao_asprintf("%s, %s", have, name);
    ao_trace_set_meta(t, "device_name", joined);
    free(joined);
}

int ao_ingest_has_kernels(const ao_trace *t)
{
    for (size_t i = 0; i < t->nacts; i++)
        if (t->acts[i].kind == AO_ACT_KERNEL) return 1;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void ao_corr_set_build(ao_corr_set *s, const ao_trace *t)
{
    s->n = 0;
    s->ids = ao_malloc((t->nacts + 1) * sizeof *s->ids);
    for (size_t i = 0; i < t->nacts; i++)
        if (t->acts[i].correlation >= 0) s->ids[s->n++] = t->acts[i].correlation;
    qsort(s->ids, s->n, sizeof *s->ids, cmp_i64);
}

int ao_corr_set_has(const ao_corr_set *s, int64_t id)
{
    return bsearch(&id, s->ids, s->n, sizeof *s->ids, cmp_i64) != NULL;
}

void ao_corr_set_free(ao_corr_set *s)
{
    free(s->ids);
    s->ids = NULL;
    s->n = 0;
}
