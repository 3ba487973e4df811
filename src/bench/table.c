#include "bench/table.h"
#include "core/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/text.h"

enum cell_kind { CELL_EMPTY, CELL_STR, CELL_INT, CELL_NUM };

typedef struct cell {
    enum cell_kind kind;
    long long i;
    double d;
    char *s;
} cell;

struct ao_table {
    const ao_column *cols;
    int ncols;
    int nrows, cap;
    cell *cells; /* nrows x ncols */
};

ao_table *ao_table_new(const ao_column *cols, int ncols)
{
    ao_table *t = ao_calloc(1, sizeof *t);
    t->cols = cols;
    t->ncols = ncols;
    return t;
}

void ao_table_free(ao_table *t)
{
    if (!t) return;
    for (int i = 0; i < t->nrows * t->ncols; i++) free(t->cells[i].s);
    free(t->cells);
    free(t);
}

int ao_table_rows(const ao_table *t)
{
    return t->nrows;
}

int ao_table_add_row(ao_table *t)
{
    if (t->nrows == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->cells = ao_realloc(t->cells, (size_t)t->cap * (size_t)t->ncols * sizeof(cell));
    }
    memset(&t->cells[t->nrows * t->ncols], 0, (size_t)t->ncols * sizeof(cell));
    return t->nrows++;
}

static cell *at(const ao_table *t, int row, int col)
{
    return &t->cells[row * t->ncols + col];
}

static cell *reset(ao_table *t, int row, int col)
{
    cell *c = at(t, row, col);
    free(c->s);
    memset(c, 0, sizeof *c);
    return c;
}

void ao_table_set_str(ao_table *t, int row, int col, const char *s)
{
    cell *c = reset(t, row, col);
    c->kind = CELL_STR;
    c->s = ao_strdup(s);
}

void ao_table_set_int(ao_table *t, int row, int col, long long v)
{
    cell *c = reset(t, row, col);
    c->kind = CELL_INT;
    c->i = v;
}

void ao_table_set_num(ao_table *t, int row, int col, double v)
{
    cell *c = reset(t, row, col);
    c->kind = CELL_NUM;
    c->d = v;
}

double ao_table_num(const ao_table *t, int row, int col)
{
    const cell *c = at(t, row, col);
    if (c->kind == CELL_INT) return (double)c->i;
    if (c->kind == CELL_NUM) return c->d;
    return NAN;
}

const char *ao_table_str(const ao_table *t, int row, int col)
{
    const cell *c = at(t, row, col);
    return c->kind == CELL_STR ? c->s : NULL;
}

/* One formatting rule for text and CSV, so both show the same digits. */
static void format_cell(const ao_column *col, const cell *c, char *buf, size_t n)
{
    switch (c->kind) {
    case CELL_STR:
        snprintf(buf, n, "%s", c->s);
        break;
    case CELL_INT:
        snprintf(buf, n, "%lld", c->i);
        break;
    case CELL_NUM:
        if (isfinite(c->d))
            snprintf(buf, n, "%.*f", col->precision, c->d);
        else
            snprintf(buf, n, "N/A");
        break;
    case CELL_EMPTY:
        snprintf(buf, n, "N/A");
        break;
    }
}

static void print_line(const ao_table *t, FILE *out, char lead, int use_unit)
{
    fputc(lead, out);
    for (int j = 0; j < t->ncols; j++) {
        const ao_column *col = &t->cols[j];
        if (col->flags & AO_COL_NO_TEXT) continue;
        fprintf(out, " %*s", col->width, use_unit ? col->unit : col->head);
    }
    fputc('\n', out);
}

void ao_table_print_header(const ao_table *t, FILE *out)
{
    print_line(t, out, '#', 0);
    print_line(t, out, '#', 1);
}

void ao_table_print_row(const ao_table *t, int row, FILE *out)
{
    char buf[128];
    fputc(' ', out);
    for (int j = 0; j < t->ncols; j++) {
        const ao_column *col = &t->cols[j];
        if (col->flags & AO_COL_NO_TEXT) continue;
        format_cell(col, at(t, row, j), buf, sizeof buf);
        fprintf(out, " %*s", col->width, buf);
    }
    fputc('\n', out);
    fflush(out);
}

/* RFC 4180: quote a field holding a comma, quote or line break. */
static void write_csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int ao_table_write_csv(const ao_table *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        ao_error(path, "cannot write CSV: %s", strerror(errno));
        return -1;
    }
    for (int j = 0; j < t->ncols; j++) {
        if (j) fputc(',', f);
        write_csv_field(f, t->cols[j].key);
    }
    fputc('\n', f);
    char buf[128];
    for (int i = 0; i < t->nrows; i++) {
        for (int j = 0; j < t->ncols; j++) {
            const cell *c = at(t, i, j);
            /* CSV readers want an empty field, not "N/A", for a missing value. */
            if (c->kind == CELL_EMPTY || (c->kind == CELL_NUM && !isfinite(c->d)))
                buf[0] = 0;
            else if (c->kind == CELL_NUM)
                snprintf(buf, sizeof buf, "%.6g", c->d);
            else
                format_cell(&t->cols[j], c, buf, sizeof buf);
            if (j) fputc(',', f);
            write_csv_field(f, buf);
        }
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        ao_error(path, "cannot write CSV: %s", strerror(errno));
        return -1;
    }
    return 0;
}

void ao_table_gen_json(const ao_table *t, yajl_gen g)
{
    yajl_gen_array_open(g);
    for (int i = 0; i < t->nrows; i++) {
        yajl_gen_map_open(g);
        for (int j = 0; j < t->ncols; j++) {
            const cell *c = at(t, i, j);
            ao_json_gen_str(g, t->cols[j].key);
            switch (c->kind) {
            case CELL_STR:
                ao_json_gen_str(g, c->s);
                break;
            case CELL_INT:
                yajl_gen_integer(g, c->i);
                break;
            case CELL_NUM:
                ao_json_gen_double(g, c->d);
                break;
            case CELL_EMPTY:
                yajl_gen_null(g);
                break;
            }
        }
        yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
}

int ao_table_write_json(const ao_table *t, const char *path)
{
    yajl_gen g = yajl_gen_alloc(NULL);
    yajl_gen_config(g, yajl_gen_beautify, 1);
    ao_table_gen_json(t, g);
    int rc = ao_json_write_atomic(path, g);
    yajl_gen_free(g);
    return rc;
}
