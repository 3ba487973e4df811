/* The Prometheus text exposition format, version 0.0.4 (DESIGN §18): the
 * latest record of every rank of a followed run directory as gauges and
 * counters labelled run, rank and (per collective kind) kind, in base units
 * (seconds, bytes). docs/prometheus.md lists every series. */
#ifndef AORTA_EXPORT_PROM_H
#define AORTA_EXPORT_PROM_H

#include <stddef.h>
#include <stdio.h>

#include "export/follow.h"

#define AO_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* A label value as the format quotes it: \ " and newline escaped. */
void ao_prom_label_value(FILE *out, const char *s);
/* A HELP docstring: \ and newline escaped. */
void ao_prom_help_text(FILE *out, const char *s);

/* The exposition of f as it stands (call ao_follow_refresh first): a heap
 * string of *len bytes, every line ending in '\n'. Each family has its HELP
 * and TYPE lines; a value the latest record does not have (NAN: no
 * communication, so no overlap_ratio; a kind the step did not run) leaves
 * its sample out. */
char *ao_prom_render(const ao_follow *f, size_t *len);

/* The families, for documentation and tests: name, type ("gauge",
 * "counter") and help of family i < ao_prom_family_count(). */
size_t ao_prom_family_count(void);
void ao_prom_family(size_t i, const char **name, const char **type, const char **help);

#endif
