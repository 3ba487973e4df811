#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/text.h"

int ao_typo_limit(size_t len)
{
    return len <= 4 ? 2 : len <= 8 ? 3 : 4;
}

int ao_edit_distance(const char *a, const char *b, int cap)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t diff = la > lb ? la - lb : lb - la;
    if (diff >= (size_t)cap) return cap;
    /* One row of the dynamic-programming table at a time. */
    int *row = malloc((lb + 1) * sizeof *row);
    if (!row) return cap;
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        int best = row[0];
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int v = diag + cost;
            if (up + 1 < v) v = up + 1;
            if (row[j - 1] + 1 < v) v = row[j - 1] + 1;
            row[j] = v;
            diag = up;
            if (v < best) best = v;
        }
        if (best >= cap) {
            free(row);
            return cap;
        }
    }
    int d = row[lb];
    free(row);
    return d < cap ? d : cap;
}

void ao_format_double(char *buf, size_t n, double v)
{
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* Whole numbers up to 1e15 in full ("300", not "3e+02"). */
    double mag = fabs(v);
    if (mag >= 1 && mag < 1e15) {
        int digits = (int)floor(log10(mag)) + 1;
        if (digits > prec) prec = digits;
    }
    snprintf(buf, n, "%.*g", prec, v);
    /* "1e-08" -> "1e-8", "1e+20" -> "1e20" */
    char *e = strchr(buf, 'e');
    if (e) {
        char *d = e + 1, *src = e + 1;
        if (*src == '-')
            d++, src++;
        else if (*src == '+')
            src++;
        while (*src == '0' && src[1]) src++;
        memmove(d, src, strlen(src) + 1);
    }
}

int ao_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

const char *ao_plain_name_problem(const char *name, size_t max, const char *kind, char *buf,
                                  size_t n)
{
    size_t len = strlen(name);
    if (len == 0) {
        snprintf(buf, n, "the %s is empty", kind);
    } else if (len > max) {
        snprintf(buf, n, "the %s has %zu characters; at most %zu are allowed", kind, len, max);
    } else if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        snprintf(buf, n, "\".\" and \"..\" are not %ss", kind);
    } else if (strchr(name, '/')) {
        snprintf(buf, n, "\"%.200s\" contains '/'; a %s cannot name a subdirectory", name, kind);
    } else if (name[0] == '-') {
        snprintf(buf, n, "\"%.200s\" starts with '-'; a %s cannot look like a flag", name, kind);
    } else {
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)name[i];
            if (c < 0x20 || c > 0x7e) {
                /* Do not echo the name: it holds a control or non-ASCII byte. */
                snprintf(buf, n, "the %s has a non-printable byte 0x%02x at position %zu", kind, c,
                         i + 1);
                return buf;
            }
        }
        return NULL;
    }
    return buf;
}

int ao_check_plain_name(const char *name, size_t max, const char *what, const char *kind)
{
    char why[512];
    if (!ao_plain_name_problem(name, max, kind, why, sizeof why)) return 0;
    ao_error(what, "%s", why);
    return AO_EXIT_USAGE;
}

void ao_vappendf(char *buf, size_t n, const char *fmt, va_list ap)
{
    size_t at = strlen(buf);
    if (at + 1 < n) vsnprintf(buf + at, n - at, fmt, ap);
}

void ao_appendf(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ao_vappendf(buf, n, fmt, ap);
    va_end(ap);
}
