/* Parsing of the numbers users type on command lines: byte sizes with binary
 * suffixes ("64K", "1M", "2G"; powers of 1024, as nccl-tests) and plain
 * integers and reals with their allowed range. Each returns 0, or -1 after
 * printing one error line that names the flag and what is allowed. */
#ifndef AORTA_CORE_UNITS_H
#define AORTA_CORE_UNITS_H

#include <stddef.h>

/* "<digits>[K|M|G|T][B]" (case-insensitive; "KiB" also accepted). `flag` names
 * the option in the error message. Rejects empty, negative, fractional and
 * overflowing values. */
int ao_parse_size(const char *flag, const char *s, size_t *out);

/* A whole decimal number in [min, max]. */
int ao_parse_long(const char *flag, const char *s, long min, long max, long *out);
int ao_parse_int(const char *flag, const char *s, int min, int max, int *out);

/* A finite real number in [min, max]. */
int ao_parse_double(const char *flag, const char *s, double min, double max, double *out);

/* Human form of a byte count for headers: "64 MiB", "1.5 KiB", "12 B". */
void ao_format_size(size_t bytes, char *buf, size_t n);

#endif
