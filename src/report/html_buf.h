/* The growing string index.html is built in; shared inside src/report. */
#ifndef AORTA_REPORT_HTML_BUF_H
#define AORTA_REPORT_HTML_BUF_H

#include <stddef.h>

#include "core/error.h"
#include "report/html.h"

typedef struct ao_hbuf {
    char *s;
    size_t len, cap;
} ao_hbuf;

void ao_hput(ao_hbuf *b, const char *s, size_t n);
void ao_hputs(ao_hbuf *b, const char *s);
void ao_hprintf(ao_hbuf *b, const char *fmt, ...) AO_PRINTF(2, 3);
/* Text content and attribute values, escaped. */
void ao_hesc(ao_hbuf *b, const char *s);
/* A number with as many decimals as its size needs; NAN as a dash. */
void ao_hnum(ao_hbuf *b, double v);

/* <td>v</td> for each of v[0..n), numbers as ao_hnum writes them. */
void ao_hcells(ao_hbuf *b, const double *v, size_t n);

/* html_tables.c: the sections after the timeline. */
void ao_html_tables(ao_hbuf *b, const ao_html_page *p);
void ao_html_settings(ao_hbuf *b, const ao_html_page *p);
void ao_html_glossary(ao_hbuf *b);
/* The SVG of chart `name` inlined, its ids prefixed (several charts on a page). */
void ao_html_figure(ao_hbuf *b, const ao_html_page *p, const char *name, const char *caption);

#endif
