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

/* globalTid packs the process and thread ids; the thread id is its low 24
 * bits (the export documentation's "serialized thread id"). */
static int64_t nsys_tid(int64_t global_tid)
{
    return global_tid < 0 ? -1 : global_tid % 0x1000000;
}

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

/* The kernel name's SQL: the demangled name where the export has it, else
 * the short one. NULL after an error. */
static const char *kernel_name_sql(ao_sql *q, const char **joins)
{
    int dem = ao_sql_has_column(q, KERNELS, "demangledName");
    int shrt = ao_sql_has_column(q, KERNELS, "shortName");
    if (!ao_sql_has_table(q, "StringIds")) {
        ao_error(q->path, "no StringIds table (not an nsys export?)");
        return NULL;
    }
    if (dem && shrt) {
        *joins = " LEFT JOIN StringIds D ON D.id = K.demangledName"
                 " LEFT JOIN StringIds S ON S.id = K.shortName";
        return "COALESCE(D.value, S.value)";
    }
    if (dem || shrt) {
        *joins = dem ? " LEFT JOIN StringIds D ON D.id = K.demangledName"
                     : " LEFT JOIN StringIds D ON D.id = K.shortName";
        return "D.value";
    }
    ao_error(q->path, "table %s has no column demangledName or shortName", KERNELS);
    return NULL;
}

/* Kernels, copies and memsets in one stream ordered by start. */
static int read_activities(ao_sql *q, ao_trace *t, int has_memcpy, int has_memset)
{
    const char *joins = "", *name = kernel_name_sql(q, &joins);
    if (!name || ao_sql_require_columns(q, KERNELS, act_cols)) return AO_EXIT_USAGE;
    if (has_memcpy && (ao_sql_require_columns(q, MEMCPY, act_cols) ||
                       ao_sql_require_columns(q, MEMCPY, copy_cols)))
        return AO_EXIT_USAGE;
    if (has_memset && (ao_sql_require_columns(q, MEMSET, act_cols) ||
                       ao_sql_require_columns(q, MEMSET, memset_cols)))
        return AO_EXIT_USAGE;
    char *sql = ao_asprintf(
        "SELECT 0 AS kind, K.rowid AS id, K.start AS start, K.end AS end, K.deviceId AS deviceId,"
        " K.streamId AS streamId, K.correlationId AS correlationId, 0 AS bytes, %s AS name,"
        " NULL AS copyKind FROM " KERNELS " K%s%s%s ORDER BY 3",
        name, joins,
        has_memcpy ? " UNION ALL SELECT 1, rowid, start, end, deviceId, streamId, correlationId,"
                     " bytes, NULL, copyKind FROM " MEMCPY
                   : "",
        has_memset ? " UNION ALL SELECT 2, rowid, start, end, deviceId, streamId, correlationId,"
                     " bytes, NULL, NULL FROM " MEMSET
                   : "");
    sqlite3_stmt *st;
    int rc = ao_sql_prepare(q, sql, &st);
    free(sql);
    if (rc) return rc;
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
            (kind == AO_ACT_KERNEL && ao_sql_text(&row, 8, 0, &nm)) ||
            (kind == AO_ACT_MEMCPY && ao_sql_int(&row, 9, &ck)))
            break;
        if (kind == AO_ACT_MEMCPY) nm = copy_name(ck);
        if (kind == AO_ACT_MEMSET) nm = "Memset";
        ao_activity *a = ao_trace_add_activity(t);
        a->start_us = s;
        a->end_us = e;
        a->bytes = bytes < 0 ? 0 : (uint64_t)bytes;
        a->name = ao_trace_intern(t, nm, (size_t)-1);
        a->correlation = corr;
        a->device = (uint32_t)dev;
        a->stream = (uint32_t)stream;
        a->kind = (uint8_t)kind;
    }
    sqlite3_finalize(st);
    return r == 0 ? 0 : AO_EXIT_USAGE;
}

/* The runtime calls whose correlationId issued a kernel, copy or memset. */
static int read_launches(ao_sql *q, ao_trace *t, int has_memcpy, int has_memset)
{
    static const char *const cols[] = {"start", "end", "correlationId", NULL};
    if (ao_sql_require_columns(q, RUNTIME, cols)) return AO_EXIT_USAGE;
    int tid = ao_sql_has_column(q, RUNTIME, "globalTid");
    char *sql = ao_asprintf("SELECT rowid, start, end, correlationId, %s AS globalTid FROM " RUNTIME
                            " WHERE correlationId IN (SELECT correlationId FROM " KERNELS
                            "%s%s) ORDER BY start",
                            tid ? "globalTid" : "NULL",
                            has_memcpy ? " UNION ALL SELECT correlationId FROM " MEMCPY : "",
                            has_memset ? " UNION ALL SELECT correlationId FROM " MEMSET : "");
    sqlite3_stmt *st;
    int rc = ao_sql_prepare(q, sql, &st);
    free(sql);
    if (rc) return rc;
    int r;
    while ((r = ao_sql_step(q, st)) == 1) {
        ao_sql_row row = {q, st, RUNTIME, sqlite3_column_int64(st, 0)};
        double s, e;
        int64_t corr, gtid;
        if (ao_sql_times(&row, 1, &s, &e) || ao_sql_int(&row, 3, &corr) ||
            ao_sql_int_or(&row, 4, -1, &gtid))
            break;
        ao_launch *l = ao_trace_add_launch(t);
        l->start_us = s;
        l->end_us = e;
        l->correlation = corr;
        l->tid = nsys_tid(gtid);
    }
    sqlite3_finalize(st);
    return r == 0 ? 0 : AO_EXIT_USAGE;
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
    if (rc) return rc;
    int r;
    while ((r = ao_sql_step(q, st)) == 1) {
        ao_sql_row row = {q, st, NVTX, sqlite3_column_int64(st, 0)};
        double s, e;
        int64_t gtid;
        const char *text;
        if (ao_sql_times(&row, 1, &s, &e) || ao_sql_text(&row, 3, 1, &text) ||
            ao_sql_int_or(&row, 4, -1, &gtid))
            break;
        if (!text || e <= s) continue; /* unnamed or empty: no step */
        ao_range *g = ao_trace_add_range(t);
        g->start_us = s;
        g->end_us = e;
        g->name = ao_trace_intern(t, text, (size_t)-1);
        g->tid = nsys_tid(gtid);
    }
    sqlite3_finalize(st);
    return r == 0 ? 0 : AO_EXIT_USAGE;
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
    if (rc == 0 && ao_sql_has_table(&q, RUNTIME))
        rc = read_launches(&q, out, has_memcpy, has_memset);
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
