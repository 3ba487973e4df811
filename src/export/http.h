/* The little HTTP/1.x the exporter speaks (DESIGN §18): one request per
 * connection, GET /metrics answered, everything else refused. Pure: the
 * server (export/server.c) feeds it the bytes a client has sent so far. */
#ifndef AORTA_EXPORT_HTTP_H
#define AORTA_EXPORT_HTTP_H

#include <stddef.h>

/* A request (line and headers) longer than this is refused (431). */
#define AO_HTTP_MAX_REQUEST 8192

typedef enum ao_http_verdict {
    AO_HTTP_MORE,        /* incomplete: wait for more bytes */
    AO_HTTP_METRICS,     /* GET /metrics (a query string is ignored): 200 */
    AO_HTTP_NOT_FOUND,   /* GET of any other path: 404 */
    AO_HTTP_BAD_METHOD,  /* another method: 405 */
    AO_HTTP_BAD_REQUEST, /* not an HTTP/1.0 or 1.1 request line: 400 */
    AO_HTTP_TOO_LARGE,   /* no end of headers within AO_HTTP_MAX_REQUEST bytes: 431 */
} ao_http_verdict;

/* The verdict on the first len bytes a client sent. A malformed request
 * line is refused as soon as it is complete; the others wait for the blank
 * line that ends the headers, so that the answer never races the request. */
ao_http_verdict ao_http_parse(const char *buf, size_t len);

/* The whole response for verdict v (not AO_HTTP_MORE): status line, headers
 * (Content-Type, Content-Length, Connection: close) and body; for
 * AO_HTTP_METRICS the body is `body` (body_len bytes) with `content_type`,
 * else a one-line text saying why. Heap string, *len bytes. */
char *ao_http_response(ao_http_verdict v, const char *content_type, const char *body,
                       size_t body_len, size_t *len);

#endif
