/* rocprofv3's CSV output (`rocprofv3 --kernel-trace --memory-copy-trace
 * --marker-trace [--hip-trace] --output-format csv`): one file per kind,
 * sharing a prefix ("<pid>_"). The kernel trace is required; the memory-copy,
 * marker (roctx), HIP API (launches) and agent-info files are read when they
 * are there. Columns are found by header name, so the columns that rocprofv3
 * versions add (Stream_Id, register counts) do not matter. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/rundir.h"
#include "ingest/csv.h"
#include "ingest/reader_common.h"
#include "ingest/trace.h"

#define KERNEL_SUFFIX "kernel_trace.csv"

/* A regular file; a sibling that is a symbolic link counts only when it
 * stays inside its directory (a reader never follows one out of it). */
static int is_file(const char *p)
{
    struct stat st;
    if (lstat(p, &st) != 0) return 0;
    if (S_ISLNK(st.st_mode)) {
        const char *slash = strrchr(p, '/');
        char *dir =
            slash ? ao_asprintf("%.*s", (int)(slash - p) + (slash == p), p) : ao_strdup(".");
        int in = ao_path_within(dir, p);
        free(dir);
        if (!in || stat(p, &st) != 0) return 0;
    }
    return S_ISREG(st.st_mode);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The siblings' common prefix (heap): PATH minus "kernel_trace.csv" for the
 * kernel trace itself, the one *kernel_trace.csv in a directory, or PATH as a
 * prefix ("out/1234" or "out/1234_"). NULL after an error. */
static char *find_prefix(const char *path)
{
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) {
            ao_error(path, "cannot open directory: %s", strerror(errno));
            return NULL;
        }
        char *found = NULL;
        int n = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!ends_with(e->d_name, KERNEL_SUFFIX)) continue;
            if (n++ == 0) found = ao_asprintf("%s/%s", path, e->d_name);
        }
        closedir(d);
        if (n != 1) {
            free(found);
            ao_error(path, "%s *%s files in the directory; name one (one process's trace)",
                     n ? "several" : "no", KERNEL_SUFFIX);
            return NULL;
        }
        found[strlen(found) - strlen(KERNEL_SUFFIX)] = '\0';
        return found;
    }
    if (exists && S_ISREG(st.st_mode) && ends_with(path, KERNEL_SUFFIX)) {
        char *p = ao_strdup(path);
        p[strlen(p) - strlen(KERNEL_SUFFIX)] = '\0';
        return p;
    }
    for (int underscore = 0; underscore < 2; underscore++) {
        char *k = ao_asprintf("%s%s%s", path, underscore ? "_" : "", KERNEL_SUFFIX);
        int ok = is_file(k);
        free(k);
        if (ok) return ao_asprintf("%s%s", path, underscore ? "_" : "");
    }
    ao_error(path, "not a rocprofv3 kernel trace, its directory or its prefix (no %s)",
             KERNEL_SUFFIX);
    return NULL;
}

static int times(ao_csv *c, int cs, int ce, double *s, double *e)
{
    int64_t a, b;
    if (ao_csv_i64(c, cs, &a) || ao_csv_i64(c, ce, &b)) return AO_EXIT_USAGE;
    if (b < a) {
        ao_error(c->path, "line %ld: End_Timestamp %lld is before Start_Timestamp %lld",
                 c->rec_line, (long long)b, (long long)a);
        return AO_EXIT_USAGE;
    }
    *s = ao_ingest_ns_to_us(a);
    *e = ao_ingest_ns_to_us(b);
    return 0;
}

/* An optional integer column: `dflt` when absent. */
static int opt_i64(ao_csv *c, int col, int64_t dflt, int64_t *out)
{
    *out = dflt;
    return col < 0 ? 0 : ao_csv_i64(c, col, out);
}

static int agent(ao_csv *c, int col, int64_t *out)
{
    *out = 0;
    if (col < 0) return 0;
    if (ao_rocprof_agent(c->fields[col], out) == 0) return 0;
    ao_error(c->path, "line %ld, column %s: \"%s\" is not an agent id", c->rec_line, c->header[col],
             c->fields[col]);
    return AO_EXIT_USAGE;
}

static int read_kernels(const char *file, ao_trace *t)
{
    ao_csv c;
    if (ao_csv_open(&c, file)) return AO_EXIT_USAGE;
    int rc = AO_EXIT_USAGE;
    int cn = ao_csv_require(&c, "Kernel_Name");
    int cs = cn < 0 ? -1 : ao_csv_require(&c, "Start_Timestamp");
    int ce = cs < 0 ? -1 : ao_csv_require(&c, "End_Timestamp");
    if (ce < 0) goto out;
    int cc = ao_csv_column(&c, "Correlation_Id"), ca = ao_csv_column(&c, "Agent_Id");
    int cq = ao_csv_column(&c, "Stream_Id");
    if (cq < 0) cq = ao_csv_column(&c, "Queue_Id");
    int r;
    while ((r = ao_csv_next(&c)) == 1) {
        double s, e;
        int64_t corr, dev, stream;
        if (times(&c, cs, ce, &s, &e) || opt_i64(&c, cc, -1, &corr) || agent(&c, ca, &dev) ||
            opt_i64(&c, cq, 0, &stream))
            goto out;
        ao_activity *a = ao_trace_add_activity(t);
        a->start_us = s;
        a->end_us = e;
        a->name = ao_trace_intern(t, c.fields[cn], (size_t)-1);
        a->correlation = corr;
        a->device = (uint32_t)dev;
        a->stream = (uint32_t)stream;
        a->kind = AO_ACT_KERNEL;
    }
    rc = r < 0 ? AO_EXIT_USAGE : 0;
out:
    ao_csv_close(&c);
    return rc;
}

static int read_copies(const char *file, ao_trace *t)
{
    ao_csv c;
    if (ao_csv_open(&c, file)) return AO_EXIT_USAGE;
    int rc = AO_EXIT_USAGE;
    int cd = ao_csv_require(&c, "Direction");
    int cs = cd < 0 ? -1 : ao_csv_require(&c, "Start_Timestamp");
    int ce = cs < 0 ? -1 : ao_csv_require(&c, "End_Timestamp");
    if (ce < 0) goto out;
    int cc = ao_csv_column(&c, "Correlation_Id"), cq = ao_csv_column(&c, "Stream_Id");
    int csrc = ao_csv_column(&c, "Source_Agent_Id"),
        cdst = ao_csv_column(&c, "Destination_Agent_Id");
    int r;
    while ((r = ao_csv_next(&c)) == 1) {
        double s, e;
        int64_t corr, src, dst, stream;
        if (times(&c, cs, ce, &s, &e) || opt_i64(&c, cc, -1, &corr) || agent(&c, csrc, &src) ||
            agent(&c, cdst, &dst) || opt_i64(&c, cq, 0, &stream))
            goto out;
        const char *dir = c.fields[cd];
        ao_activity *a = ao_trace_add_activity(t);
        a->start_us = s;
        a->end_us = e;
        a->name = ao_trace_intern(t, ao_rocprof_copy_name(dir), (size_t)-1);
        a->correlation = corr;
        a->device = (uint32_t)(ao_rocprof_copy_on_source(dir) ? src : dst);
        a->stream = (uint32_t)stream;
        a->kind = AO_ACT_MEMCPY;
    }
    rc = r < 0 ? AO_EXIT_USAGE : 0;
out:
    ao_csv_close(&c);
    return rc;
}

/* roctx ranges: rows of the core marker domains with a duration (instant
 * roctxMark rows and the control/naming domains are no ranges). */
static int read_markers(const char *file, ao_trace *t)
{
    ao_csv c;
    if (ao_csv_open(&c, file)) return AO_EXIT_USAGE;
    int rc = AO_EXIT_USAGE;
    int cf = ao_csv_require(&c, "Function");
    int cs = cf < 0 ? -1 : ao_csv_require(&c, "Start_Timestamp");
    int ce = cs < 0 ? -1 : ao_csv_require(&c, "End_Timestamp");
    if (ce < 0) goto out;
    int cdom = ao_csv_column(&c, "Domain"), ct = ao_csv_column(&c, "Thread_Id");
    int r;
    while ((r = ao_csv_next(&c)) == 1) {
        double s, e;
        int64_t tid;
        if (times(&c, cs, ce, &s, &e) || opt_i64(&c, ct, -1, &tid)) goto out;
        if (cdom >= 0 && strcmp(c.fields[cdom], "MARKER_CORE_API") != 0 &&
            strcmp(c.fields[cdom], "MARKER_CORE_RANGE_API") != 0)
            continue;
        if (e <= s) continue;
        ao_range *g = ao_trace_add_range(t);
        g->start_us = s;
        g->end_us = e;
        g->name = ao_trace_intern(t, c.fields[cf], (size_t)-1);
        g->tid = tid;
    }
    rc = r < 0 ? AO_EXIT_USAGE : 0;
out:
    ao_csv_close(&c);
    return rc;
}

/* HIP API calls that issued a kernel or copy read above (the others, such as
 * hipMalloc or hipStreamSynchronize, launched nothing). */
static int read_launches(const char *file, ao_trace *t)
{
    ao_csv c;
    int rc = AO_EXIT_USAGE;
    if (ao_csv_open(&c, file)) return rc;
    ao_corr_set ids;
    ao_corr_set_build(&ids, t);
    int cc = ao_csv_require(&c, "Correlation_Id");
    int cs = cc < 0 ? -1 : ao_csv_require(&c, "Start_Timestamp");
    int ce = cs < 0 ? -1 : ao_csv_require(&c, "End_Timestamp");
    if (ce < 0) goto out;
    int ct = ao_csv_column(&c, "Thread_Id");
    int r;
    while ((r = ao_csv_next(&c)) == 1) {
        double s, e;
        int64_t corr, tid;
        if (ao_csv_i64(&c, cc, &corr) || times(&c, cs, ce, &s, &e) || opt_i64(&c, ct, -1, &tid))
            goto out;
        if (!ao_corr_set_has(&ids, corr)) continue;
        ao_launch *l = ao_trace_add_launch(t);
        l->start_us = s;
        l->end_us = e;
        l->correlation = corr;
        l->tid = tid;
    }
    rc = r < 0 ? AO_EXIT_USAGE : 0;
out:
    ao_csv_close(&c);
    ao_corr_set_free(&ids);
    return rc;
}

/* Device names from agent_info.csv: the GPU agents' product names. */
static int read_agents(const char *file, ao_trace *t)
{
    ao_csv c;
    if (ao_csv_open(&c, file)) return AO_EXIT_USAGE;
    int ctype = ao_csv_column(&c, "Agent_Type"), cname = ao_csv_column(&c, "Product_Name");
    if (cname < 0) cname = ao_csv_column(&c, "Name");
    int r = 1;
    while (ctype >= 0 && cname >= 0 && (r = ao_csv_next(&c)) == 1)
        if (strcmp(c.fields[ctype], "GPU") == 0) ao_ingest_add_device_name(t, c.fields[cname]);
    ao_csv_close(&c);
    return r < 0 ? AO_EXIT_USAGE : 0;
}

int ao_read_rocprof_csv(const char *path, ao_trace *out)
{
    char *prefix = find_prefix(path);
    if (!prefix) return AO_EXIT_USAGE;
    static const struct {
        const char *suffix;
        int (*read)(const char *, ao_trace *);
        int required;
    } files[] = {
        {KERNEL_SUFFIX, read_kernels, 1},
        {"memory_copy_trace.csv", read_copies, 0},
        {"marker_api_trace.csv", read_markers, 0},
        {"hip_api_trace.csv", read_launches, 0}, /* after the activities: it keeps their ids */
        {"agent_info.csv", read_agents, 0},
    };
    char *kernel = ao_asprintf("%s%s", prefix, KERNEL_SUFFIX);
    ao_trace_init(out, kernel, "rocprof-csv");
    free(kernel);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof files / sizeof files[0]; i++) {
        char *f = ao_asprintf("%s%s", prefix, files[i].suffix);
        if (files[i].required || is_file(f)) rc = files[i].read(f, out);
        free(f);
    }
    if (rc == 0 && !ao_ingest_has_kernels(out)) {
        ao_error(out->path, "no kernel dispatches (recorded without --kernel-trace?)");
        rc = AO_EXIT_USAGE;
    }
    free(prefix);
    if (rc != 0) {
        ao_trace_free(out);
        return rc;
    }
    out->rank = ao_ingest_rank_from_path(out->path);
    return 0;
}
