#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rundir.h"
#include "ingest/csv.h"

static void rec_append(ao_csv *c, const char *s, size_t n)
{
    if (c->rec_len + n + 1 > c->rec_cap) {
        c->rec_cap = (c->rec_len + n + 1) * 2;
        c->rec = ao_realloc(c->rec, c->rec_cap);
    }
    memcpy(c->rec + c->rec_len, s, n);
    c->rec_len += n;
    c->rec[c->rec_len] = '\0';
}

static void push_field(ao_csv *c, char *f)
{
    if (c->nfields == c->cap_fields) {
        c->cap_fields = c->cap_fields ? c->cap_fields * 2 : 32;
        c->fields = ao_realloc(c->fields, c->cap_fields * sizeof *c->fields);
    }
    c->fields[c->nfields++] = f;
}

/* Reads one record's raw text into c->rec: lines are joined while a quoted
 * field is open (an odd number of quotes so far). 1, 0 at the end, -1. */
static int read_record(ao_csv *c)
{
    c->rec_len = 0;
    if (c->rec) c->rec[0] = '\0';
    size_t quotes = 0;
    for (;;) {
        errno = 0;
        ssize_t n = getline(&c->line, &c->line_cap, c->f);
        if (n < 0) {
            if (ferror(c->f)) {
                ao_error(c->path, "read failed after line %ld: %s", c->line_no, strerror(errno));
                return -1;
            }
            if (c->rec_len == 0) return 0;
            ao_error(c->path, "line %ld: a quoted field is not closed before the end of the file",
                     c->rec_line);
            return -1;
        }
        c->line_no++;
        if (c->rec_len == 0) c->rec_line = c->line_no;
        for (ssize_t i = 0; i < n; i++) quotes += c->line[i] == '"';
        rec_append(c, c->line, (size_t)n);
        if (quotes % 2 == 0) break;
    }
    /* Drop the line end; a blank line is no record. */
    while (c->rec_len && (c->rec[c->rec_len - 1] == '\n' || c->rec[c->rec_len - 1] == '\r'))
        c->rec[--c->rec_len] = '\0';
    return 1;
}

/* Splits c->rec into fields in place, undoing the quoting. */
static int split(ao_csv *c)
{
    c->nfields = 0;
    char *in = c->rec, *out = c->rec;
    for (;;) {
        char *field = out;
        if (*in == '"') {
            in++;
            for (;;) {
                if (*in == '\0') {
                    ao_error(c->path, "line %ld: a quoted field is not closed", c->rec_line);
                    return -1;
                }
                if (*in == '"') {
                    if (in[1] == '"') {
                        *out++ = '"';
                        in += 2;
                        continue;
                    }
                    in++;
                    break;
                }
                *out++ = *in++;
            }
            if (*in != ',' && *in != '\0') {
                ao_error(c->path, "line %ld, field %zu: text after a quoted field's closing quote",
                         c->rec_line, c->nfields + 1);
                return -1;
            }
        } else {
            while (*in != ',' && *in != '\0') *out++ = *in++;
        }
        int last = *in == '\0';
        *out++ = '\0';
        push_field(c, field);
        if (last) return 0;
        in++;
    }
}

int ao_csv_next(ao_csv *c)
{
    for (;;) {
        int r = read_record(c);
        if (r <= 0) return r;
        if (c->rec_len == 0) continue;
        if (split(c) != 0) return -1;
        if (c->header && c->nfields != c->nheader) {
            ao_error(c->path, "line %ld: %zu fields where the header has %zu (a truncated row?)",
                     c->rec_line, c->nfields, c->nheader);
            return -1;
        }
        return 1;
    }
}

int ao_csv_open(ao_csv *c, const char *path)
{
    memset(c, 0, sizeof *c);
    c->path = path;
    c->f = ao_open_input_file(path, "CSV file");
    if (!c->f) return AO_EXIT_USAGE;
    int r = ao_csv_next(c);
    if (r == 0) ao_error(path, "empty file: no CSV header");
    if (r <= 0) {
        ao_csv_close(c);
        return AO_EXIT_USAGE;
    }
    c->nheader = c->nfields;
    c->header = ao_malloc(c->nheader * sizeof *c->header);
    for (size_t i = 0; i < c->nheader; i++) c->header[i] = ao_strdup(c->fields[i]);
    return 0;
}

void ao_csv_close(ao_csv *c)
{
    if (c->f) fclose(c->f);
    for (size_t i = 0; i < c->nheader; i++) free(c->header[i]);
    free(c->header);
    free(c->line);
    free(c->rec);
    free(c->fields);
    memset(c, 0, sizeof *c);
}

int ao_csv_column(const ao_csv *c, const char *name)
{
    for (size_t i = 0; i < c->nheader; i++)
        if (strcmp(c->header[i], name) == 0) return (int)i;
    return -1;
}

int ao_csv_require(const ao_csv *c, const char *name)
{
    int i = ao_csv_column(c, name);
    if (i < 0) ao_error(c->path, "line 1: the header has no column \"%s\"", name);
    return i;
}

int ao_csv_i64(const ao_csv *c, int col, int64_t *out)
{
    const char *s = c->fields[col];
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno == ERANGE) {
        ao_error(c->path, "line %ld, column %s: \"%s\" is not an integer", c->rec_line,
                 c->header[col], s);
        return AO_EXIT_USAGE;
    }
    *out = v;
    return 0;
}
