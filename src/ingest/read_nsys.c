/* Nsight Systems' `nsys export --type sqlite` database: kernels
 * (CUPTI_ACTIVITY_KIND_KERNEL, names through StringIds), copies and memsets
 * (CUPTI_ACTIVITY_KIND_MEMCPY / _MEMSET), the CUDA runtime calls that issued
 * them (CUPTI_ACTIVITY_KIND_RUNTIME, by correlationId), NVTX ranges
 * (NVTX_EVENTS) and the GPUs' names (TARGET_INFO_GPU). nsys creates a table
 * only when it recorded something of its kind, so only the kernel table is
 * required. Timestamps are nanoseconds on one session clock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ingest/reader_common.h"
#include "ingest/sqlite_read.h"
#include "ingest/trace.h"

#define KERNELS "CUPTI_ACTIVITY_KIND_KERNEL"
#define MEMCPY  "CUPTI_ACTIVITY_KIND_MEMCPY"
#define MEMSET  "CUPTI_ACTIVITY_KIND_MEMSET"
#define RUNTIME "CUPTI_ACTIVITY_KIND_RUNTIME"
#define NVTX    "NVTX_EVENTS"

/* ENUM_NSYS_EVENT_TYPE's NvtxPushPopRange and NvtxStartEndRange; marks (34)
 * and domain/category registrations are no ranges. */
#define NVTX_RANGE_TYPES "59, 60"

/* globalTid packs the process and thread ids; the thread id is it modulo
 * 2^24 (the export documentation's "serialized thread id"). */
#define NSYS_TID_MODULO 0x1000000

/* CUpti_ActivityMemcpyKind, the copyKind column, in Kineto's words. */
static const char *copy_name(int64_t kind)
{
    static const char *const names[] = {
        "Memcpy",      "Memcpy HtoD", "Memcpy DtoH", "Memcpy HtoA", "Memcpy AtoH", "Memcpy AtoA",
        "Memcpy AtoD", "Memcpy DtoA", "Memcpy DtoD", "Memcpy HtoH", "Memcpy PtoP",
    };
    return kind >= 0 && kind < (int64_t)(sizeof names / sizeof names[0]) ? names[kind] : "Memcpy";
}

static const char *const act_cols[] = {"start",    "end",           "deviceId",
                                       "streamId", "correlationId", NULL};
static const char *const copy_cols[] = {"bytes", "copyKind", NULL};
static const char *const memset_cols[] = {"bytes", NULL};

/* StringIds lookups, cached by id: a trace has few distinct kernel names
 * among many kernels, and a join per row would look each up again. */
typedef struct string_cache {
    sqlite3_stmt *st;
    int64_t *ids;
    const char **vals; /* NULL: empty slot; `absent`: not in StringIds */
    size_t cap, n;
} string_cache;

static const char absent[] = "";

static void cache_put(string_cache *c, int64_t id, const char *v)
{
    size_t i = (size_t)((uint64_t)id * 0x9e3779b97f4a7c15ULL) & (c->cap - 1);
    while (c->vals[i]) i = (i + 1) & (c->cap - 1);
    c->ids[i] = id;
    c->vals[i] = v;
    c->n++;
}

/* The interned text of StringIds row `id`, or NULL when there is none. */
static const char *cache_get(string_cache *c, ao_trace *t, int64_t id)
{
    size_t i = (size_t)((uint64_t)id * 0x9e3779b97f4a7c15ULL) & (c->cap - 1);
    for (; c->vals[i]; i = (i + 1) & (c->cap - 1))
        if (c->ids[i] == id) return c->vals[i] == absent ? NULL : c->vals[i];
    if (2 * (c->n + 1) > c->cap) {
        string_cache old = *c;
        c->cap *= 2;
        c->n = 0;
        c->ids = ao_malloc(c->cap * sizeof *c->ids);
        c->vals = ao_calloc(c->cap, sizeof *c->vals);
        for (size_t j = 0; j < old.cap; j++)
            if (old.vals[j]) cache_put(c, old.ids[j], old.vals[j]);
        free(old.ids);
        free(old.vals);
    }
    const char *v = absent;
    sqlite3_reset(c->st);
    sqlite3_bind_int64(c->st, 1, id);
    if (sqlite3_step(c->st) == SQLITE_ROW && sqlite3_column_type(c->st, 0) == SQLITE_TEXT)
        v = ao_trace_intern(t, (const char *)sqlite3_column_text(c->st, 0), (size_t)-1);
    cache_put(c, id, v);
    return v == absent ? NULL : v;
}

static int cache_open(string_cache *c, ao_sql *q)
{
    memset(c, 0, sizeof *c);
    if (!ao_sql_has_table(q, "StringIds")) {
        ao_error(q->path, "no StringIds table (not an nsys export?)");
        return AO_EXIT_USAGE;
    }
    if (ao_sql_prepare(q, "SELECT value FROM StringIds WHERE id = ?1", &c->st))
        return AO_EXIT_USAGE;
    c->cap = 64;
    c->ids = ao_malloc(c->cap * sizeof *c->ids);
    c->vals = ao_calloc(c->cap, sizeof *c->vals);
    return 0;
}

static void cache_close(string_cache *c)
{
    sqlite3_finalize(c->st);
    free(c->ids);
    free(c->vals);
}

/* A kernel's name: the demangled one where the export has it, else the short
 * one (columns 8 and 9, NULL when the table lacks them). */
static int kernel_name(const ao_sql_row *r, string_cache *c, ao_trace *t, const char **out)
{
    int64_t dem, shrt;
    if (ao_sql_int_or(r, 8, -1, &dem) || ao_sql_int_or(r, 9, -1, &shrt)) return AO_EXIT_USAGE;
    *out = dem >= 0 ? cache_get(c, t, dem) : NULL;
    if (!*out && shrt >= 0) *out = cache_get(c, t, shrt);
    if (*out) return 0;
    ao_error(r->q->path, "table %s, row %lld: no StringIds row for its name (%s %lld, %s %lld)",
             r->table, (long long)r->id, sqlite3_column_name(r->st, 8), (long long)dem,
             sqlite3_column_name(r->st, 9), (long long)shrt);
    return AO_EXIT_USAGE;
}

/* Kernels, copies and memsets in one stream ordered by start. */
static int read_activities(ao_sql *q, ao_trace *t, int has_memcpy, int has_memset)
{
    int dem = ao_sql_has_column(q, KERNELS, "demangledName");
    int shrt = ao_sql_has_column(q, KERNELS, "shortName");
    if (!dem && !shrt) {
        ao_error(q->path, "table %s has no column demangledName or shortName", KERNELS);
        return AO_EXIT_USAGE;
    }
    if (ao_sql_require_columns(q, KERNELS, act_cols)) return AO_EXIT_USAGE;
    if (has_memcpy && (ao_sql_require_columns(q, MEMCPY, act_cols) ||
                       ao_sql_require_columns(q, MEMCPY, copy_cols)))
        return AO_EXIT_USAGE;
    if (has_memset && (ao_sql_require_columns(q, MEMSET, act_cols) ||
                       ao_sql_require_columns(q, MEMSET, memset_cols)))
        return AO_EXIT_USAGE;
    char *sql = ao_asprintf(
        "SELECT 0 AS kind, K.rowid AS id, K.start AS start, K.end AS end, K.deviceId AS deviceId,"
        " K.streamId AS streamId, K.correlationId AS correlationId, 0 AS bytes,"
        " %s AS demangledName, %s AS shortName, NULL AS copyKind FROM " KERNELS " K%s%s ORDER BY 3",
        dem ? "K.demangledName" : "NULL", shrt ? "K.shortName" : "NULL",
        has_memcpy ? " UNION ALL SELECT 1, rowid, start, end, deviceId, streamId, correlationId,"
                     " bytes, NULL, NULL, copyKind FROM " MEMCPY
                   : "",
        has_memset ? " UNION ALL SELECT 2, rowid, start, end, deviceId, streamId, correlationId,"
                     " bytes, NULL, NULL, NULL FROM " MEMSET
                   : "");
    string_cache names;
    if (cache_open(&names, q)) {
        free(sql);
        cache_close(&names);
        return AO_EXIT_USAGE;
    }
    sqlite3_stmt *st;
    int rc = ao_sql_prepare(q, sql, &st);
    free(sql);
    if (rc) {
        cache_close(&names);
        return rc;
    }
    static const char *const tables[] = {KERNELS, MEMCPY, MEMSET};
    int r;
    while ((r = ao_sql_step(q, st)) == 1) {
        int kind = sqlite3_column_int(st, 0);
        ao_sql_row row = {q, st, tables[kind], sqlite3_column_int64(st, 1)};
        double s, e;
        int64_t dev, stream, corr, bytes, ck = 0;
        const char *nm = NULL;
        if (ao_sql_times(&row, 2, &s, &e) || ao_sql_int(&row, 4, &dev) ||
            ao_sql_int(&row, 5, &stream) || ao_sql_int_or(&row, 6, -1, &corr) ||
            ao_sql_int(&row, 7, &bytes) ||
            (kind == AO_ACT_KERNEL && kernel_name(&row, &names, t, &nm)) ||
            (kind == AO_ACT_MEMCPY && ao_sql_int(&row, 10, &ck)))
            break;
        if (kind == AO_ACT_MEMCPY) nm = copy_name(ck);
        if (kind == AO_ACT_MEMSET) nm = "Memset";
        ao_activity *a = ao_trace_add_activity(t);
        a->start_us = s;
        a->end_us = e;
        a->bytes = bytes < 0 ? 0 : (uint64_t)bytes;
        a->name = kind == AO_ACT_KERNEL ? nm : ao_trace_intern(t, nm, (size_t)-1);
        a->correlation = corr;
        a->device = (uint32_t)dev;
        a->stream = (uint32_t)stream;
        a->kind = (uint8_t)kind;
    }
    sqlite3_finalize(st);
    cache_close(&names);
    return r == 0 ? 0 : AO_EXIT_USAGE;
}

/* The runtime calls whose correlationId issued a kernel, copy or memset. */
static int read_launches(ao_sql *q, ao_trace *t)
{
    static const char *const cols[] = {"start", "end", "correlationId", NULL};
    if (ao_sql_require_columns(q, RUNTIME, cols)) return AO_EXIT_USAGE;
    int tid = ao_sql_has_column(q, RUNTIME, "globalTid");
    char *sql = ao_asprintf("SELECT rowid, start, end, correlationId, %s AS globalTid FROM " RUNTIME
                            " ORDER BY start",
                            tid ? "globalTid" : "NULL");
    sqlite3_stmt *st;
    int rc = ao_sql_prepare(q, sql, &st);
    free(sql);
    return rc ? rc : ao_sql_read_launches(q, st, RUNTIME, NSYS_TID_MODULO, t);
}

/* NVTX push/pop and start/end ranges that closed; text inline or through
 * textId (registered strings). */
static int read_ranges(ao_sql *q, ao_trace *t)
{
    static const char *const cols[] = {"start", "end", "eventType", "text", NULL};
    if (ao_sql_require_columns(q, NVTX, cols)) return AO_EXIT_USAGE;
    int text_id = ao_sql_has_column(q, NVTX, "textId") && ao_sql_has_table(q, "StringIds");
    int tid = ao_sql_has_column(q, NVTX, "globalTid");
    char *sql =
        ao_asprintf("SELECT N.rowid, N.start AS start, N.end AS end, %s AS text,"
                    " %s AS globalTid FROM " NVTX " N%s WHERE N.eventType IN (" NVTX_RANGE_TYPES
                    ") AND N.end IS NOT NULL ORDER BY N.start",
                    text_id ? "COALESCE(N.text, S.value)" : "N.text", tid ? "N.globalTid" : "NULL",
                    text_id ? " LEFT JOIN StringIds S ON S.id = N.textId" : "");
    sqlite3_stmt *st;
    int rc = ao_sql_prepare(q, sql, &st);
    free(sql);
    return rc ? rc : ao_sql_read_ranges(q, st, NVTX, NSYS_TID_MODULO, t);
}

/* Optional facts: the GPUs' names and the export's schema version. */
static void read_meta(ao_sql *q, ao_trace *t)
{
    sqlite3_stmt *st;
    if (ao_sql_has_column(q, "TARGET_INFO_GPU", "name") &&
        sqlite3_prepare_v2(q->db, "SELECT name FROM TARGET_INFO_GPU ORDER BY id", -1, &st, NULL) ==
            SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW)
            if (sqlite3_column_type(st, 0) == SQLITE_TEXT)
                ao_ingest_add_device_name(t, (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    if (ao_sql_has_column(q, "META_DATA_EXPORT", "value") &&
        sqlite3_prepare_v2(
            q->db, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'", -1,
            &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_TEXT)
            ao_trace_set_meta(t, "nsys_export_schema", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
}

int ao_read_nsys(const char *path, ao_trace *out)
{
    ao_sql q;
    if (ao_sql_open(&q, path)) return AO_EXIT_USAGE;
    if (!ao_sql_has_table(&q, KERNELS)) {
        ao_error(path, "no %s table (not an nsys export, or recorded without --trace=cuda)",
                 KERNELS);
        ao_sql_close(&q);
        return AO_EXIT_USAGE;
    }
    ao_trace_init(out, path, "nsys");
    int has_memcpy = ao_sql_has_table(&q, MEMCPY), has_memset = ao_sql_has_table(&q, MEMSET);
    int rc = read_activities(&q, out, has_memcpy, has_memset);
    if (rc == 0 && ao_sql_has_table(&q, RUNTIME)) rc = read_launches(&q, out);
    if (rc == 0 && ao_sql_has_table(&q, NVTX)) rc = read_ranges(&q, out);
    if (rc == 0 && !ao_ingest_has_kernels(out)) {
        ao_error(path, "table %s is empty: no kernels", KERNELS);
        rc = AO_EXIT_USAGE;
    }
    if (rc == 0) read_meta(&q, out);
    ao_sql_close(&q);
    if (rc != 0) {
        ao_trace_free(out);
        return rc;
    }
    out->rank = ao_ingest_rank_from_path(path);
    return 0;
}
