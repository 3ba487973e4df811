/* The exporter's HTTP request parser and responses (export/http.h). */
#include "export/http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* The request line "METHOD SP TARGET SP HTTP/1.x" (CR stripped): 1 when
 * well formed, with the method and the target's path located. */
static int request_line(const char *s, size_t n, size_t *method_len, const char **path,
                        size_t *path_len)
{
    size_t m = 0;
    while (m < n && m < 16 && s[m] >= 'A' && s[m] <= 'Z') m++;
    if (m == 0 || m >= n || s[m] != ' ') return 0;
    const char *t = s + m + 1, *end = s + n;
    const char *sp = memchr(t, ' ', (size_t)(end - t));
    if (!sp || sp == t || *t != '/') return 0;
    for (const char *p = t; p < sp; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) return 0;
    size_t vlen = (size_t)(end - sp - 1);
    if (vlen != 8 || (memcmp(sp + 1, "HTTP/1.1", 8) != 0 && memcmp(sp + 1, "HTTP/1.0", 8) != 0))
        return 0;
    const char *q = memchr(t, '?', (size_t)(sp - t));
    *method_len = m;
    *path = t;
    *path_len = (size_t)((q ? q : sp) - t);
    return 1;
}

/* Offset just past the blank line ending the headers, or 0. */
static size_t headers_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] != '\n') continue;
        if (buf[i + 1] == '\n') return i + 2;
        if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
    }
    return 0;
}

ao_http_verdict ao_http_parse(const char *buf, size_t len)
{
    const char *nl = memchr(buf, '\n', len);
    if (!nl) return len >= AO_HTTP_MAX_REQUEST ? AO_HTTP_TOO_LARGE : AO_HTTP_MORE;
    size_t n = (size_t)(nl - buf), method_len, path_len;
    if (n > 0 && buf[n - 1] == '\r') n--;
    const char *path;
    if (!request_line(buf, n, &method_len, &path, &path_len)) return AO_HTTP_BAD_REQUEST;
    if (!headers_end(buf, len))
        return len >= AO_HTTP_MAX_REQUEST ? AO_HTTP_TOO_LARGE : AO_HTTP_MORE;
    if (method_len != 3 || memcmp(buf, "GET", 3) != 0) return AO_HTTP_BAD_METHOD;
    if (path_len != 8 || memcmp(path, "/metrics", 8) != 0) return AO_HTTP_NOT_FOUND;
    return AO_HTTP_METRICS;
}

char *ao_http_response(ao_http_verdict v, const char *content_type, const char *body,
                       size_t body_len, size_t *len)
{
    const char *status = "200 OK", *extra = "", *why = NULL;
    switch (v) {
    case AO_HTTP_METRICS:
        break;
    case AO_HTTP_NOT_FOUND:
        status = "404 Not Found";
        why = "not found: aorta serves /metrics only\n";
        break;
    case AO_HTTP_BAD_METHOD:
        status = "405 Method Not Allowed";
        extra = "Allow: GET\r\n";
        why = "method not allowed: GET /metrics only\n";
        break;
    case AO_HTTP_TOO_LARGE:
        status = "431 Request Header Fields Too Large";
        why = "request too large\n";
        break;
    default:
        status = "400 Bad Request";
        why = "bad request\n";
        break;
    }
    if (why) {
        content_type = "text/plain; charset=utf-8";
        body = why;
        body_len = strlen(why);
    }
    char *head = ao_asprintf("HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                             "Connection: close\r\n\r\n",
                             status, content_type, body_len, extra);
    size_t hl = strlen(head);
    char *out = ao_malloc(hl + body_len + 1);
    memcpy(out, head, hl);
    memcpy(out + hl, body, body_len);
    out[hl + body_len] = '\0';
    free(head);
    *len = hl + body_len;
    return out;
}
