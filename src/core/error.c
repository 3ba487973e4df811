#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static int log_level = AO_LEVEL_INFO;

static void vprint(const char *prefix, const char *what, const char *fmt, va_list ap)
{
    /* Build the whole line first: ranks share a terminal, and one write keeps
     * lines from interleaving mid-line. */
    char buf[4096];
    int n = snprintf(buf, sizeof buf, "%s", prefix);
    if (what && n < (int)sizeof buf) n += snprintf(buf + n, sizeof buf - n, "%s: ", what);
    if (n < (int)sizeof buf) n += vsnprintf(buf + n, sizeof buf - n, fmt, ap);
    if (n >= (int)sizeof buf - 1) n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    fflush(stdout);
    fwrite(buf, 1, (size_t)n, stderr);
    fflush(stderr);
}

void ao_error(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint("aorta: error: ", what, fmt, ap);
    va_end(ap);
}

void ao_hint(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint("hint: ", NULL, fmt, ap);
    va_end(ap);
}

void ao_warn(const char *fmt, ...)
{
    if (log_level > AO_LEVEL_WARNING) return;
    va_list ap;
    va_start(ap, fmt);
    vprint("aorta: warning: ", NULL, fmt, ap);
    va_end(ap);
}

void ao_set_log_level(int level)
{
    log_level = level;
}

int ao_log_level(void)
{
    return log_level;
}

void ao_debug(const char *fmt, ...)
{
    if (log_level > AO_LEVEL_DEBUG) return;
    va_list ap;
    va_start(ap, fmt);
    vprint("aorta: debug: ", NULL, fmt, ap);
    va_end(ap);
}

void ao_fatal(int code, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint("aorta: error: ", what, fmt, ap);
    va_end(ap);
    exit(code);
}

static void *check(void *p, size_t n)
{
    if (!p && n) ao_fatal(AO_EXIT_FAIL, "out of memory", "could not allocate %zu bytes", n);
    return p;
}

void *ao_malloc(size_t n)
{
    return check(malloc(n ? n : 1), n);
}

void *ao_calloc(size_t n, size_t size)
{
    return check(calloc(n ? n : 1, size ? size : 1), n * size);
}

void *ao_realloc(void *p, size_t n)
{
    return check(realloc(p, n ? n : 1), n);
}

char *ao_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(ao_malloc(n), s, n);
}

char *ao_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = ao_malloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}
