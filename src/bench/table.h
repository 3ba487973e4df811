/* One table of benchmark results, printed three ways from the same cells:
 * aligned text (streamed a row at a time, as nccl-tests prints), CSV and a JSON
 * array of objects. `aorta coll` and `aorta sdma` both use it so their columns,
 * names and number formats never drift between the screen and the files.
 *
 * A cell is a string, an integer, a real (NAN prints "N/A" and writes null) or
 * empty (null). Keys are the CSV/JSON names; `head` and `unit` are the two
 * text header lines. */
#ifndef AORTA_BENCH_TABLE_H
#define AORTA_BENCH_TABLE_H

#include <stdio.h>

#include <yajl/yajl_gen.h>

enum ao_column_flags {
    AO_COL_NO_TEXT = 1, /* in CSV/JSON only (e.g. the collective's name) */
};

typedef struct ao_column {
    const char *key;  /* CSV header and JSON key */
    const char *head; /* text header */
    const char *unit; /* text unit line, "" when none */
    int width;        /* text width */
    int precision;    /* digits after the point for reals */
    int flags;
} ao_column;

typedef struct ao_table ao_table;

/* `cols` must outlive the table. */
ao_table *ao_table_new(const ao_column *cols, int ncols);
void ao_table_free(ao_table *t);
int ao_table_rows(const ao_table *t);

/* Start a row; then set its cells by column index (unset cells are empty). */
int ao_table_add_row(ao_table *t);
void ao_table_set_str(ao_table *t, int row, int col, const char *s);
void ao_table_set_int(ao_table *t, int row, int col, long long v);
void ao_table_set_num(ao_table *t, int row, int col, double v);
/* The value of a numeric cell (NAN when empty or a string). */
double ao_table_num(const ao_table *t, int row, int col);

/* The text of a string cell, or NULL for any other cell. */
const char *ao_table_str(const ao_table *t, int row, int col);

/* Text: the two header lines start with '#', rows with ' ', as nccl-tests. */
void ao_table_print_header(const ao_table *t, FILE *out);
void ao_table_print_row(const ao_table *t, int row, FILE *out);

/* Files: 0, or -1 after printing why (the path and the system's reason). */
int ao_table_write_csv(const ao_table *t, const char *path);
int ao_table_write_json(const ao_table *t, const char *path);
/* The rows as a JSON array into an open generator (to embed in an object). */
void ao_table_gen_json(const ao_table *t, yajl_gen g);

#endif
