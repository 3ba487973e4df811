#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/units.h"
#include "queues/internal.h"

static const char *const sync_names[] = {"per_iteration", "end_only", "none"};

int ao_qsync_parse(const char *flag, const char *s, ao_qsync *out)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(s, sync_names[i]) == 0) {
            *out = (ao_qsync)i;
            return 0;
        }
    ao_error(flag, "'%s' is not a sync mode; allowed: per_iteration, end_only, none", s);
    return -1;
}

const char *ao_qsync_name(ao_qsync s)
{
    return (unsigned)s < 3 ? sync_names[s] : "?";
}

/* Axes: not --streams (a sweep's `streams` axis sets it) nor the output
 * files. */
const ao_bench_flag ao_queues_flags[AO_QUEUES_NFLAGS] = {
    [AO_QUEUES_F_STREAMS] = {{"--streams"}, 0}, [AO_QUEUES_F_ITERATIONS] = {{"--iterations"}, 1},
    [AO_QUEUES_F_WARMUP] = {{"--warmup"}, 1},   [AO_QUEUES_F_SYNC] = {{"--sync"}, 1},
    [AO_QUEUES_F_JSON] = {{"--json"}, 0},       [AO_QUEUES_F_CSV] = {{"--csv"}, 0},
    [AO_QUEUES_F_DEVICE] = {{"--device"}, 1},   [AO_QUEUES_F_BACKEND] = {{"--backend"}, 1},
};

void ao_queues_defaults(ao_queues_opts *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "auto";
    o->device = -1;
    static const int counts[] = {1, 2, 4, 8, 16, 32, 64};
    o->nstreams = 7;
    memcpy(o->streams, counts, sizeof counts);
    o->iterations = 20;
    o->warmup = 3;
    o->sync = AO_QSYNC_PER_ITERATION;
    o->hold = 1;
    o->env_user_mask = ao_qenv_user_mask();
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

int ao_queues_parse_streams(const char *flag, const char *s, ao_queues_opts *o)
{
    char *copy = ao_strdup(s), *p = copy, *tok;
    int n = 0, rc = 0;
    if (!*s) {
        ao_error(flag, "an empty list; give stream counts such as 1,2,4,8");
        rc = -1;
    }
    while (rc == 0 && (tok = strsep(&p, ",")) != NULL) {
        int v;
        if (n == AO_QUEUES_MAX_COUNTS) {
            ao_error(flag, "more than %d stream counts in '%s'", AO_QUEUES_MAX_COUNTS, s);
            rc = -1;
        } else if (ao_parse_int(flag, tok, 1, AO_QUEUES_MAX_STREAMS, &v)) {
            rc = -1;
        } else {
            for (int i = 0; i < n && rc == 0; i++)
                if (o->streams[i] == v) {
                    ao_error(flag, "stream count %d given twice in '%s'", v, s);
                    rc = -1;
                }
            o->streams[n++] = v;
        }
    }
    free(copy);
    if (rc) return -1;
    /* Ascending, so that one stream, the efficiency's reference, runs first. */
    qsort(o->streams, (size_t)n, sizeof *o->streams, cmp_int);
    o->nstreams = n;
    return 0;
}
