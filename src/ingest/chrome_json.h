/* A streaming reader of Chrome-trace JSON (the Trace Event Format's object
 * form, as PyTorch's profiler and aorta's trace.json write it), plain or
 * gzip-compressed, through yajl's callback parser: memory stays at one event
 * however large the file.
 *
 * Each element of "traceEvents" reaches `event` with the fields analysis
 * needs; every other scalar outside traceEvents (up to three levels deep:
 * "distributedInfo.rank", "deviceProperties.name") reaches `meta` as text.
 * A wrong type of a field it decodes (a string "ts", an "args" that is no
 * object, a correlation, byte count or step that is no whole number >= 0)
 * stops the read, and so do a name over 64 KiB, one JSON token running past
 * 4 MiB, and a .gz expanding more than 100 times its size (past 64 MiB):
 * memory stays bounded whatever the file holds. */
#ifndef AORTA_INGEST_CHROME_JSON_H
#define AORTA_INGEST_CHROME_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct ao_cj_event {
    size_t index;           /* position in traceEvents */
    char ph;                /* '\0' when absent */
    const char *cat, *name; /* NUL-terminated; "" when absent */
    size_t cat_len, name_len;
    double ts, dur;
    int64_t pid, tid; /* -1 when absent or a string */
    /* From "args"; -1 when absent. */
    int64_t correlation, stream, device, step;
    int64_t bytes;
    const char *kind; /* args.kind (aorta's trace); NULL when absent or null */
    /* A collective kernel's args (Kineto's NCCL kernels): NULL / -1 when
     * absent. */
    const char *coll_name, *pg_name, *pg_desc, *pg_ranks, *dtype;
    int64_t in_nelems, out_nelems, group_size, seq;
    unsigned has_ts : 1, has_dur : 1;
} ao_cj_event;

typedef struct ao_cj_callbacks {
    /* Return 0 to go on; nonzero stops the read after writing one line of
     * why into err (the reader adds file and byte offset). */
    int (*event)(void *ctx, const ao_cj_event *e, char *err, size_t errlen);
    /* The same contract: nonzero (a rank that is no rank) stops the read. */
    int (*meta)(void *ctx, const char *path, const char *value, char *err, size_t errlen);
} ao_cj_callbacks;

/* Read `path`. Returns 0, or AO_EXIT_USAGE after one error line naming the
 * file and the byte offset (unreadable, not JSON, truncated, a mistyped
 * field, or what the event callback refused). A file without a
 * "traceEvents" array is an error. */
int ao_cj_read(const char *path, const ao_cj_callbacks *cb, void *ctx);

#endif
