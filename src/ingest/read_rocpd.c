/* rocprofv3's rocpd SQLite database (`--output-format rocpd`, schema 3.x).
 * Each table carries a per-session suffix; the database also defines views
 * without it (rocpd_kernel_dispatch, rocpd_region, ...), which is what this
 * reads: kernel dispatches (names from rocpd_info_kernel_symbol), memory
 * copies (direction from rocpd_string, bytes from size), roctx ranges
 * (rocpd_region rows of category MARKER_CORE_RANGE_API, the message in the
 * event's extdata) and the HIP API calls that issued the activity
 * (rocpd_region of a HIP_* category, tied through rocpd_event.correlation_id).
 * Rows of several processes (a merged database) are read as one trace. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ingest/reader_common.h"
#include "ingest/sqlite_read.h"
#include "ingest/trace.h"

#define DISPATCH "rocpd_kernel_dispatch"
#define COPY     "rocpd_memory_copy"
#define REGION   "rocpd_region"

/* An activity's correlation id: its event's (the issuing API call's). */
#define EVENT_JOIN(t)      " LEFT JOIN rocpd_event E ON E.id = " t ".event_id AND E.guid = " t ".guid"
#define AGENT_INDEX(a, id) "COALESCE(" a ".type_index, " id ")"

static int read_activities(ao_sql *q, ao_trace *t, int has_copy)
{
    static const char *const kcols[] = {"id",        "guid",  "agent_id", "kernel_id", "queue_id",
                                        "stream_id", "start", "end",      "event_id",  NULL};
    static const char *const ccols[] = {"id",        "guid",         "start",        "end",
                                        "name_id",   "src_agent_id", "dst_agent_id", "size",
                                        "stream_id", "queue_id",     "event_id",     NULL};
    if (ao_sql_require_columns(q, DISPATCH, kcols)) return AO_EXIT_USAGE;
    if (has_copy && ao_sql_require_columns(q, COPY, ccols)) return AO_EXIT_USAGE;
    char *sql = ao_asprintf(
        "SELECT 0 AS kind, K.id AS id, K.start AS start, K.end AS end,"
        " " AGENT_INDEX("A", "K.agent_id") " AS agent, NULL AS dst_agent,"
                                           " COALESCE(K.stream_id, K.queue_id) AS stream_id, "
                                           "E.correlation_id AS correlation_id,"
                                           " 0 AS size, COALESCE(S.display_name, S.kernel_name) AS "
                                           "name FROM " DISPATCH " K"
                                           " LEFT JOIN rocpd_info_kernel_symbol S ON S.id = "
                                           "K.kernel_id AND S.guid = K.guid"
                                           " LEFT JOIN rocpd_info_agent A ON A.id = K.agent_id AND "
                                           "A.guid = K.guid" EVENT_JOIN("K") "%s ORDER BY 3",
        has_copy
            ? " UNION ALL SELECT 1, M.id, M.start, M.end, " AGENT_INDEX(
                  "SA",
                  "M.src_agent_id") ", " AGENT_INDEX("DA",
                                                     "M.dst_agent_id") ", COALESCE(M.stream_id, "
                                                                       "M.queue_id),"
                                                                       " E.correlation_id, M.size, "
                                                                       "N.string FROM " COPY " M"
                                                                       " LEFT JOIN rocpd_string N "
                                                                       "ON N.id = M.name_id AND "
                                                                       "N.guid = M.guid"
                                                                       " LEFT JOIN "
                                                                       "rocpd_info_agent SA ON "
                                                                       "SA.id = M.src_agent_id AND "
                                                                       "SA.guid = M.guid"
                                                                       " LEFT JOIN "
                                                                       "rocpd_info_agent DA ON "
                                                                       "DA.id = M.dst_agent_id AND "
                                                                       "DA.guid = "
                                                                       "M.guid" EVENT_JOIN("M")
            : "");
    sqlite3_stmt *st;
    int rc = ao_sql_prepare(q, sql, &st);
    free(sql);
    if (rc) return rc;
    int r;
    while ((r = ao_sql_step(q, st)) == 1) {
        int kind = sqlite3_column_int(st, 0);
        ao_sql_row row = {q, st, kind ? COPY : DISPATCH, sqlite3_column_int64(st, 1)};
        double s, e;
        int64_t src, dst, stream, corr, size;
        const char *name;
        if (ao_sql_times(&row, 2, &s, &e) || ao_sql_int(&row, 4, &src) ||
            ao_sql_int_or(&row, 5, 0, &dst) || ao_sql_int_or(&row, 6, 0, &stream) ||
            ao_sql_int_or(&row, 7, -1, &corr) || ao_sql_int(&row, 8, &size) ||
            ao_sql_text(&row, 9, 0, &name))
            break;
        ao_activity *a = ao_trace_add_activity(t);
        a->start_us = s;
        a->end_us = e;
        a->correlation = corr;
        a->stream = (uint32_t)stream;
        if (kind == 0) {
            a->name = ao_trace_intern(t, name, (size_t)-1);
            a->device = (uint32_t)src;
            a->kind = AO_ACT_KERNEL;
        } else {
            a->name = ao_trace_intern(t, ao_rocprof_copy_name(name), (size_t)-1);
            a->device = (uint32_t)(ao_rocprof_copy_on_source(name) ? src : dst);
            a->bytes = size < 0 ? 0 : (uint64_t)size;
            a->kind = AO_ACT_MEMCPY;
        }
    }
    sqlite3_finalize(st);
    return r == 0 ? 0 : AO_EXIT_USAGE;
}

/* Regions of one kind of category, with their thread's OS id. */
#define REGION_FROM                                                                                \
    " FROM " REGION " R JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid"               \
    " JOIN rocpd_string C ON C.id = E.category_id AND C.guid = E.guid"                             \
    " LEFT JOIN rocpd_info_thread T ON T.id = R.tid AND T.guid = R.guid"

/* roctx ranges; the range's message is in its event's extdata, the region's
 * own name being the API function (roctxThreadRangeA). */
static int read_ranges(ao_sql *q, ao_trace *t)
{
    sqlite3_stmt *st;
    if (ao_sql_prepare(q,
                       "SELECT R.id, R.start AS start, R.end AS end,"
                       " COALESCE(CASE WHEN json_valid(E.extdata) THEN"
                       " json_extract(E.extdata, '$.message') END, N.string) AS name,"
                       " COALESCE(T.tid, R.tid) AS tid" REGION_FROM
                       " LEFT JOIN rocpd_string N ON N.id = R.name_id AND N.guid = R.guid"
                       " WHERE C.string = 'MARKER_CORE_RANGE_API' ORDER BY R.start",
                       &st))
        return AO_EXIT_USAGE;
    return ao_sql_read_ranges(q, st, REGION, 0, t);
}

/* HIP API calls whose correlation id issued a kernel or copy. */
static int read_launches(ao_sql *q, ao_trace *t)
{
    sqlite3_stmt *st;
    if (ao_sql_prepare(
            q,
            "SELECT R.id, R.start AS start, R.end AS end,"
            " E.correlation_id AS correlation_id, COALESCE(T.tid, R.tid) AS tid" REGION_FROM
            " WHERE substr(C.string, 1, 4) = 'HIP_' ORDER BY R.start",
            &st))
        return AO_EXIT_USAGE;
    return ao_sql_read_launches(q, st, REGION, 0, t);
}

/* Optional facts: GPU product names, and the rank and world size where the
 * recorded process environment (a JSON object) holds RANK / WORLD_SIZE. */
static void read_meta(ao_sql *q, ao_trace *t)
{
    sqlite3_stmt *st;
    if (ao_sql_has_column(q, "rocpd_info_agent", "product_name") &&
        sqlite3_prepare_v2(q->db,
                           "SELECT product_name FROM rocpd_info_agent WHERE type = 'GPU'"
                           " ORDER BY type_index",
                           -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW)
            if (sqlite3_column_type(st, 0) == SQLITE_TEXT)
                ao_ingest_add_device_name(t, (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    if (ao_sql_has_column(q, "rocpd_info_process", "environment") &&
        sqlite3_prepare_v2(q->db,
                           "SELECT CAST(json_extract(environment, '$.RANK') AS INTEGER),"
                           " CAST(json_extract(environment, '$.WORLD_SIZE') AS INTEGER)"
                           " FROM rocpd_info_process WHERE json_valid(environment)",
                           -1, &st, NULL) == SQLITE_OK) {
        /* Only a one-process database is one rank. */
        int rows = 0, rank = -1, world = -1;
        while (sqlite3_step(st) == SQLITE_ROW && ++rows == 1) {
            if (sqlite3_column_type(st, 0) == SQLITE_INTEGER) rank = sqlite3_column_int(st, 0);
            if (sqlite3_column_type(st, 1) == SQLITE_INTEGER) world = sqlite3_column_int(st, 1);
        }
        sqlite3_finalize(st);
        if (rows == 1 && rank >= 0) t->rank = rank;
        if (rows == 1 && world > 0) t->world_size = world;
    }
}

int ao_read_rocpd(const char *path, ao_trace *out)
{
    ao_sql q;
    if (ao_sql_open(&q, path)) return AO_EXIT_USAGE;
    static const char *const needed[] = {
        DISPATCH,           "rocpd_event", "rocpd_string",     "rocpd_info_kernel_symbol",
        "rocpd_info_agent", REGION,        "rocpd_info_thread"};
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (!ao_sql_has_table(&q, needed[i])) {
            ao_error(path, "no %s table or view (not a rocpd database?)", needed[i]);
            ao_sql_close(&q);
            return AO_EXIT_USAGE;
        }
    ao_trace_init(out, path, "rocpd");
    int has_copy = ao_sql_has_table(&q, COPY);
    int rc = read_activities(&q, out, has_copy);
    if (rc == 0) rc = read_ranges(&q, out);
    if (rc == 0) rc = read_launches(&q, out);
    if (rc == 0 && !ao_ingest_has_kernels(out)) {
        ao_error(path, "%s is empty: no kernel dispatches (recorded without --kernel-trace?)",
                 DISPATCH);
        rc = AO_EXIT_USAGE;
    }
    if (rc == 0) {
        out->rank = ao_ingest_rank_from_path(path);
        read_meta(&q, out);
    }
    ao_sql_close(&q);
    if (rc != 0) ao_trace_free(out);
    return rc;
}
