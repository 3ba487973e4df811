#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static int log_level = AO_LEVEL_INFO;
static const char error_prefix[] = "aorta: error: ";

/* Process-wide, as the log level is: the last error's text, and the last
 * words' recorder (error.h). The text is written under no lock: ranks are
 * processes, and within one the error that ends it is the last printed. */
static char last_error[1024];
static ao_last_words_fn last_words_fn;
static void *last_words_ctx;
static atomic_int last_words_said;

/* s[0..n) with control characters written as escapes (\n, \x1b, ...): a
 * message quotes file names, keys and values from input, and a newline in
 * one would split the line, a terminal escape would act on the terminal.
 * UTF-8 text passes, its C1 controls (U+0080..U+009F) escaped too. Returns
 * the length written into out (at most 4n + 1 bytes with the NUL). */
static size_t sanitize(const char *s, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
            (unsigned char)s[i + 1] <= 0x9f) {
            k += (size_t)sprintf(out + k, "\\u%04x", (unsigned char)s[++i]);
        } else if (c == '\n' || c == '\r' || c == '\t') {
            out[k++] = '\\';
            out[k++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else if (c < 0x20 || c == 0x7f) {
            k += (size_t)sprintf(out + k, "\\x%02x", c);
        } else {
            out[k++] = (char)c;
        }
    }
    out[k] = '\0';
    return k;
}

static void vprint(const char *prefix, const char *what, const char *fmt, va_list ap)
{
    /* Build the whole line first: ranks share a terminal, and one write keeps
     * lines from interleaving mid-line. */
    char buf[4096], line[4 * sizeof buf + 2];
    int n = 0;
    if (what) n = snprintf(buf, sizeof buf, "%s: ", what);
    if (n < (int)sizeof buf) n += vsnprintf(buf + n, sizeof buf - n, fmt, ap);
    if (n >= (int)sizeof buf) n = (int)sizeof buf - 1;
    size_t len = strlen(prefix);
    memcpy(line, prefix, len);
    size_t text = len;
    len += sanitize(buf, (size_t)n, line + len);
    if (prefix == error_prefix) snprintf(last_error, sizeof last_error, "%s", line + text);
    line[len++] = '\n';
    fflush(stdout);
    fwrite(line, 1, len, stderr);
    fflush(stderr);
}

void ao_error(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint(error_prefix, what, fmt, ap);
    va_end(ap);
}

const char *ao_last_error(void)
{
    return last_error;
}

void ao_set_last_words(ao_last_words_fn fn, void *ctx)
{
    last_words_ctx = ctx;
    last_words_fn = fn;
}

void ao_last_words(ao_end_kind kind, const char *text)
{
    if (!last_words_fn || atomic_exchange(&last_words_said, 1)) return;
    last_words_fn(last_words_ctx, kind, text);
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
    vprint(error_prefix, what, fmt, ap);
    va_end(ap);
    ao_last_words(AO_END_FAILED, last_error);
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
