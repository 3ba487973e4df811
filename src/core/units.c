#include "core/units.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "core/error.h"

static int suffix_shift(const char *p, int *shift)
{
    static const struct {
        const char *text;
        int shift;
    } suffixes[] = {
        {"", 0},     {"b", 0},  {"k", 10},  {"kb", 10},  {"kib", 10}, {"m", 20},  {"mb", 20},
        {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40},   {"tb", 40}, {"tib", 40},
    };
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        if (strcasecmp(p, suffixes[i].text) == 0) {
            *shift = suffixes[i].shift;
            return 0;
        }
    }
    return -1;
}

int ao_parse_size(const char *flag, const char *s, size_t *out)
{
    if (!s || !isdigit((unsigned char)s[0])) {
        ao_error(flag,
                 "'%s' is not a size; expected a whole number of bytes with an optional "
                 "K, M, G or T suffix (powers of 1024), e.g. 64K",
                 s ? s : "");
        return -1;
    }
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    int shift;
    if (errno == ERANGE || suffix_shift(end, &shift) != 0) {
        ao_error(flag,
                 "'%s' is not a size; expected a whole number of bytes with an optional "
                 "K, M, G or T suffix (powers of 1024), e.g. 64K",
                 s);
        return -1;
    }
    if (shift && v > (SIZE_MAX >> shift)) {
        ao_error(flag, "'%s' is too large", s);
        return -1;
    }
    *out = (size_t)v << shift;
    return 0;
}

int ao_parse_long(const char *flag, const char *s, long min, long max, long *out)
{
    errno = 0;
    char *end = NULL;
    long v = s && *s && !isspace((unsigned char)*s) ? strtol(s, &end, 10) : 0;
    if (!end || *end || errno == ERANGE) {
        ao_error(flag, "'%s' is not a whole number", s ? s : "");
        return -1;
    }
    if (v < min || v > max) {
        ao_error(flag, "%ld is out of range; allowed %ld..%ld", v, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int ao_parse_int(const char *flag, const char *s, int min, int max, int *out)
{
    long v;
    if (ao_parse_long(flag, s, min, max, &v) != 0) return -1;
    *out = (int)v;
    return 0;
}

int ao_parse_double(const char *flag, const char *s, double min, double max, double *out)
{
    errno = 0;
    char *end = NULL;
    double v = s && *s && !isspace((unsigned char)*s) ? strtod(s, &end) : 0;
    if (!end || *end || errno == ERANGE || !isfinite(v)) {
        ao_error(flag, "'%s' is not a number", s ? s : "");
        return -1;
    }
    if (v < min || v > max) {
        ao_error(flag, "%g is out of range; allowed %g..%g", v, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

void ao_format_size(size_t bytes, char *buf, size_t n)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0 || v == floor(v))
        snprintf(buf, n, "%.0f %s", v, units[u]);
    else
        snprintf(buf, n, "%.3g %s", v, units[u]);
}
