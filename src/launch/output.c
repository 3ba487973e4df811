/* Line prefixing of rank output, and undoing mpirun's --tag-output. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/error.h"
#include "launch/internal.h"

/* A line longer than this is written in pieces (prefixed once). */
#define LINE_MAX_BYTES (64 * 1024)

/* Write everything, retrying short writes. A closed terminal or pipe is not
 * an error worth stopping the ranks for: output is dropped. */
static void write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
}

int ao_output_shown(int rank, int is_stderr, int all_ranks_output)
{
    return is_stderr || all_ranks_output || rank == 0;
}

void ao_prefixer_init(ao_prefixer *p, int fd, int show, const char *prefix)
{
    memset(p, 0, sizeof *p);
    p->fd = fd;
    p->show = show;
    snprintf(p->prefix, sizeof p->prefix, "%s", prefix);
    p->at_line_start = 1;
}

/* Write buf[0..n) as (part of) a line, with the prefix if a line starts here
 * and a newline added when `newline`. */
static void emit(ao_prefixer *p, const char *data, size_t n, int newline)
{
    struct iovec iov[3];
    int k = 0;
    if (p->at_line_start) iov[k++] = (struct iovec){p->prefix, strlen(p->prefix)};
    if (n) iov[k++] = (struct iovec){(void *)data, n};
    if (newline) iov[k++] = (struct iovec){"\n", 1};
    write_all(p->fd, iov, k);
    p->at_line_start = newline || (n && data[n - 1] == '\n');
}

void ao_prefixer_feed(ao_prefixer *p, const char *data, size_t n)
{
    if (!p->show || n == 0) return;
    if (!p->buf) p->buf = ao_malloc(LINE_MAX_BYTES);
    while (n > 0) {
        size_t take = LINE_MAX_BYTES - p->len < n ? LINE_MAX_BYTES - p->len : n;
        memcpy(p->buf + p->len, data, take);
        p->len += take;
        data += take;
        n -= take;
        /* Write every complete line in the buffer, keep the rest. */
        size_t start = 0;
        const char *nl;
        while ((nl = memchr(p->buf + start, '\n', p->len - start))) {
            size_t end = (size_t)(nl - p->buf) + 1;
            if (p->tap) p->tap(p->tap_ctx, p->buf + start, end - start - 1);
            emit(p, p->buf + start, end - start, 0);
            start = end;
        }
        if (start == 0 && p->len == LINE_MAX_BYTES) {
            emit(p, p->buf, p->len, 0); /* an overlong line: write a piece */
            start = p->len;
        }
        memmove(p->buf, p->buf + start, p->len - start);
        p->len -= start;
    }
}

void ao_prefixer_finish(ao_prefixer *p)
{
    if (p->show && (p->len || !p->at_line_start)) emit(p, p->buf, p->len, 1);
    p->len = 0;
    p->at_line_start = 1;
}

void ao_prefixer_free(ao_prefixer *p)
{
    free(p->buf);
    p->buf = NULL;
    p->len = 0;
}

/* ---- mpirun --tag-output --------------------------------------------------- */

void ao_mpirun_demux_init(ao_mpirun_demux *d, ao_prefixer *ranks, int nranks, ao_prefixer *untagged)
{
    memset(d, 0, sizeof *d);
    d->ranks = ranks;
    d->nranks = nranks;
    d->untagged = untagged;
}

enum { TAG_NONE, TAG_PARTIAL, TAG_FULL };

/* Match "[JOB,RANK]<stdout>:" or "<stderr>:" at s. TAG_PARTIAL when s[0..n)
 * is a proper prefix of one (it may continue in the next read). */
static int match_tag(const char *s, size_t n, int *rank, int *is_stderr, size_t *len)
{
    size_t i = 0;
    if (i == n) return TAG_PARTIAL;
    if (s[i++] != '[') return TAG_NONE;
    for (int field = 0; field < 2; field++) {
        size_t digits = 0;
        long v = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (v < 100000000) v = v * 10 + (s[i] - '0');
            i++;
            digits++;
        }
        if (i == n) return TAG_PARTIAL;
        if (!digits || s[i++] != (field == 0 ? ',' : ']')) return TAG_NONE;
        if (field == 1) *rank = (int)v;
    }
    static const char out[] = "<stdout>:", err[] = "<stderr>:";
    size_t k = 0;
    int could_out = 1, could_err = 1;
    for (; k < sizeof out - 1; k++) {
        if (i + k == n) return TAG_PARTIAL;
        could_out = could_out && s[i + k] == out[k];
        could_err = could_err && s[i + k] == err[k];
        if (!could_out && !could_err) return TAG_NONE;
    }
    *is_stderr = could_err;
    *len = i + k;
    return TAG_FULL;
}

/* Bytes of one piece go to the current rank's prefixer, or are mpirun's own. */
static void route(ao_mpirun_demux *d, const char *data, size_t n)
{
    if (n) ao_prefixer_feed(d->cur ? d->cur : d->untagged, data, n);
}

static void demux(ao_mpirun_demux *d, const char *s, size_t n, int final)
{
    size_t piece = 0, i = 0;
    while (i < n) {
        if (s[i] == '\n') {
            route(d, s + piece, i + 1 - piece);
            piece = ++i;
            d->cur = NULL;
            continue;
        }
        if (s[i] != '[') {
            i++;
            continue;
        }
        int rank = 0, is_stderr = 0;
        size_t len = 0;
        int m = match_tag(s + i, n - i, &rank, &is_stderr, &len);
        if (m == TAG_PARTIAL && !final && n - i < sizeof d->carry) {
            route(d, s + piece, i - piece);
            memcpy(d->carry, s + i, n - i);
            d->ncarry = n - i;
            return;
        }
        if (m == TAG_FULL && rank < d->nranks) {
            route(d, s + piece, i - piece);
            d->cur = &d->ranks[2 * rank + is_stderr];
            i += len;
            piece = i;
            continue;
        }
        i++;
    }
    route(d, s + piece, n - piece);
}

void ao_mpirun_demux_feed(ao_mpirun_demux *d, const char *data, size_t n)
{
    if (!d->ncarry) {
        demux(d, data, n, 0);
        return;
    }
    /* Rejoin a tag cut by the previous read with what follows. */
    size_t total = d->ncarry + n;
    char *joined = ao_malloc(total);
    memcpy(joined, d->carry, d->ncarry);
    memcpy(joined + d->ncarry, data, n);
    d->ncarry = 0;
    demux(d, joined, total, 0);
    free(joined);
}

void ao_mpirun_demux_finish(ao_mpirun_demux *d)
{
    if (d->ncarry) {
        char rest[sizeof d->carry];
        size_t n = d->ncarry;
        memcpy(rest, d->carry, n);
        d->ncarry = 0;
        demux(d, rest, n, 1);
    }
    d->cur = NULL;
}
