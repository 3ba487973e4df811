/* A streaming CSV reader for the profilers' CSV output (rocprofv3): one record
 * at a time, RFC 4180 quoting (quoted fields may hold commas, doubled quotes
 * and line breaks, as C++ kernel names do), the header's column names looked
 * up by name so a tool's added or reordered columns do not matter. */
#ifndef AORTA_INGEST_CSV_H
#define AORTA_INGEST_CSV_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ao_csv {
    FILE *f;
    const char *path;
    char *line; /* getline's buffer */
    size_t line_cap;
    char *rec; /* the current record's text, unquoted in place */
    size_t rec_len, rec_cap;
    char **fields; /* the current record's fields (point into rec) */
    size_t nfields, cap_fields;
    char **header; /* the first record's fields, owned */
    size_t nheader;
    long line_no;  /* lines read so far */
    long rec_line; /* the line the current record starts on */
} ao_csv;

/* Opens `path` and reads its header. Returns 0, or AO_EXIT_USAGE after one
 * error line (cannot open, empty file, bad quoting). */
int ao_csv_open(ao_csv *c, const char *path);
void ao_csv_close(ao_csv *c);

/* The next record: 1, 0 at the end, or -1 after one error line (bad quoting,
 * a record with another field count than the header: a truncated row). */
int ao_csv_next(ao_csv *c);

/* The header column named `name`, or -1. */
int ao_csv_column(const ao_csv *c, const char *name);
/* ao_csv_column, or -1 after an error naming the file and the missing column. */
int ao_csv_require(const ao_csv *c, const char *name);

/* Field `col` of the current record as a decimal integer. Returns 0, or
 * AO_EXIT_USAGE after an error naming the file, line and column. */
int ao_csv_i64(const ao_csv *c, int col, int64_t *out);

#endif
