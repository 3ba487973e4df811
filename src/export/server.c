/* The exporter's HTTP server (export/export.h): one thread, one poll() over
 * the listening socket, a wake-up pipe and the clients. */
#include "export/export.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "export/follow.h"
#include "export/http.h"
#include "export/prom.h"

typedef struct client {
    int fd; /* -1: a free slot */
    char req[AO_HTTP_MAX_REQUEST];
    size_t rlen;
    char *resp; /* NULL while the request is read */
    size_t resp_len, sent;
    int64_t deadline_ms;
} client;

struct ao_exporter {
    int lfd;
    int wake[2]; /* a byte in wake[0]: look at `stop` */
    char url[96];
    atomic_int stop;                /* lock-free: set from a signal handler or another thread */
    int64_t accept_paused_until_ms; /* out of descriptors: retry later */
    ao_follow follow;
    int following;
    pthread_t thread;
    int threaded;
    client clients[AO_EXPORT_MAX_CLIENTS];
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ao_export_parse_port(const char *what, const char *text, int min, int *port)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || *text < '0' || *text > '9' || *end || v < min || v > 65535) {
        ao_error(what, "'%s' is not a port: give an integer from %d to 65535", text, min);
        return AO_EXIT_USAGE;
    }
    *port = (int)v;
    return 0;
}

static void set_url(ao_exporter *ex, const struct sockaddr_storage *ss)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0, v6 = ss->ss_family == AF_INET6;
    if (v6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
    }
    snprintf(ex->url, sizeof ex->url, "http://%s%s%s:%d/metrics", v6 ? "[" : "", host,
             v6 ? "]" : "", port);
}

ao_exporter *ao_export_open(const char *addr, int port, const char *listen_what,
                            const char *port_what)
{
    if (!addr) addr = AO_EXPORT_DEFAULT_LISTEN;
    /* inet_pton, not getaddrinfo: it takes dotted quads only ("1.2.3" is
     * no address here, as it is to a reader) */
    struct sockaddr_storage sa;
    socklen_t salen;
    memset(&sa, 0, sizeof sa);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&sa;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&sa;
    if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        salen = sizeof *v4;
    } else if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        salen = sizeof *v6;
    } else {
        ao_error(listen_what,
                 "'%s' is not a numeric IPv4 or IPv6 address (such as 127.0.0.1, 0.0.0.0, "
                 "::1 or ::)",
                 addr);
        return NULL;
    }
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, salen) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        ao_error(port_what, "cannot listen on %s port %d: %s", addr, port, strerror(e));
        if (e == EADDRINUSE) ao_hint("another process serves that port: choose another one");
        if (fd >= 0) close(fd);
        return NULL;
    }
    ao_exporter *ex = ao_calloc(1, sizeof *ex);
    ex->lfd = fd;
    for (int i = 0; i < AO_EXPORT_MAX_CLIENTS; i++) ex->clients[i].fd = -1;
    if (pipe2(ex->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        ao_error("export", "pipe: %s", strerror(errno));
        close(fd);
        free(ex);
        return NULL;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    memset(&ss, 0, sizeof ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    set_url(ex, &ss);
    return ex;
}

const char *ao_export_url(const ao_exporter *ex)
{
    return ex->url;
}

/* The run directory, resolved once; its name labels every series. */
static int follow_dir(ao_exporter *ex, const char *run_dir)
{
    char abs[PATH_MAX];
    struct stat st;
    if (!realpath(run_dir, abs)) {
        ao_error(run_dir, "not a run directory: %s", strerror(errno));
        return AO_EXIT_USAGE;
    }
    if (stat(abs, &st) != 0 || !S_ISDIR(st.st_mode)) {
        ao_error(run_dir, "not a run directory: not a directory");
        return AO_EXIT_USAGE;
    }
    char base[PATH_MAX];
    snprintf(base, sizeof base, "%s", abs);
    ao_follow_init(&ex->follow, abs, basename(base));
    ex->following = 1;
    fprintf(stderr, "aorta: export: serving run %s (%s) on %s\n", ex->follow.run, abs, ex->url);
    return 0;
}

/* ---- clients ------------------------------------------------------------------ */

static void drop(client *c)
{
    close(c->fd);
    free(c->resp);
    c->fd = -1;
    c->resp = NULL;
    c->rlen = c->resp_len = c->sent = 0;
}

static void accept_clients(ao_exporter *ex)
{
    for (;;) {
        int fd = accept4(ex->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                ex->accept_paused_until_ms = now_ms() + 100;
            return; /* EAGAIN, or a connection that died in the backlog */
        }
        /* A free slot, else the oldest client gives its slot up: idle
         * connections cannot lock a scraper out. */
        client *slot = NULL;
        for (int i = 0; i < AO_EXPORT_MAX_CLIENTS; i++) {
            client *c = &ex->clients[i];
            if (c->fd < 0) {
                slot = c;
                break;
            }
            if (!slot || c->deadline_ms < slot->deadline_ms) slot = c;
        }
        if (slot->fd >= 0) drop(slot);
        slot->fd = fd;
        slot->deadline_ms = now_ms() + AO_EXPORT_CLIENT_TIMEOUT_MS;
    }
}

static void answer(ao_exporter *ex, client *c, ao_http_verdict v)
{
    char *body = NULL;
    size_t body_len = 0;
    if (v == AO_HTTP_METRICS) {
        ao_follow_refresh(&ex->follow);
        body = ao_prom_render(&ex->follow, &body_len);
    }
    c->resp = ao_http_response(v, AO_PROM_CONTENT_TYPE, body, body_len, &c->resp_len);
    c->sent = 0;
    free(body);
}

static void on_readable(ao_exporter *ex, client *c)
{
    ssize_t n = recv(c->fd, c->req + c->rlen, sizeof c->req - c->rlen, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) { /* gone before a whole request */
        drop(c);
        return;
    }
    c->rlen += (size_t)n;
    ao_http_verdict v = ao_http_parse(c->req, c->rlen);
    if (v != AO_HTTP_MORE) answer(ex, c, v);
}

static void on_writable(client *c)
{
    ssize_t n = send(c->fd, c->resp + c->sent, c->resp_len - c->sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n < 0) {
        drop(c);
        return;
    }
    c->sent += (size_t)n;
    if (c->sent == c->resp_len) {
        shutdown(c->fd, SHUT_WR);
        drop(c);
    }
}

/* ---- the loop ----------------------------------------------------------------- */

static int serve_loop(ao_exporter *ex)
{
    struct pollfd pfd[2 + AO_EXPORT_MAX_CLIENTS];
    int who[2 + AO_EXPORT_MAX_CLIENTS];
    while (!ex->stop) {
        int64_t now = now_ms(), next = -1;
        nfds_t n = 0;
        pfd[n++] = (struct pollfd){.fd = ex->wake[0], .events = POLLIN};
        if (now >= ex->accept_paused_until_ms) {
            pfd[n] = (struct pollfd){.fd = ex->lfd, .events = POLLIN};
            who[n++] = -1;
        } else {
            next = ex->accept_paused_until_ms;
        }
        for (int i = 0; i < AO_EXPORT_MAX_CLIENTS; i++) {
            client *c = &ex->clients[i];
            if (c->fd < 0) continue;
            if (c->deadline_ms <= now) { /* too slow to send or to read: dropped */
                drop(c);
                continue;
            }
            if (next < 0 || c->deadline_ms < next) next = c->deadline_ms;
            pfd[n] = (struct pollfd){.fd = c->fd, .events = c->resp ? POLLOUT : POLLIN};
            who[n++] = i;
        }
        int timeout = next < 0 ? -1 : (int)(next - now + 1);
        int ready = poll(pfd, n, timeout);
        if (ready < 0) {
            if (errno == EINTR) continue;
            ao_error("export", "poll: %s", strerror(errno));
            return AO_EXIT_FAIL;
        }
        if (pfd[0].revents) {
            char drain[64];
            while (read(ex->wake[0], drain, sizeof drain) > 0) {
            }
        }
        for (nfds_t k = 1; k < n; k++) {
            if (!pfd[k].revents) continue;
            if (who[k] < 0) {
                accept_clients(ex);
                continue;
            }
            client *c = &ex->clients[who[k]];
            if (c->fd < 0) continue; /* its slot went to a newer client */
            if (c->resp)
                on_writable(c);
            else
                on_readable(ex, c);
        }
    }
    return 0;
}

int ao_export_serve(ao_exporter *ex, const char *run_dir)
{
    int rc = follow_dir(ex, run_dir);
    return rc ? rc : serve_loop(ex);
}

static void *thread_main(void *arg)
{
    serve_loop(arg);
    return NULL;
}

int ao_export_start(ao_exporter *ex, const char *run_dir)
{
    int rc = follow_dir(ex, run_dir);
    if (rc) return rc;
    /* Every signal blocked in the new thread (it inherits this mask): the
     * process's handlers and signalfds (the launcher's supervisor) keep
     * getting them on the threads they were meant for. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int e = pthread_create(&ex->thread, NULL, thread_main, ex);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e != 0) {
        ao_error("export", "cannot start the server thread: %s", strerror(e));
        return AO_EXIT_FAIL;
    }
    ex->threaded = 1;
    return 0;
}

void ao_export_request_stop(ao_exporter *ex)
{
    ex->stop = 1;
    ssize_t w = write(ex->wake[1], "", 1);
    (void)w; /* a full pipe already holds a wake-up */
}

void ao_export_close(ao_exporter *ex)
{
    if (!ex) return;
    if (ex->threaded) {
        ao_export_request_stop(ex);
        pthread_join(ex->thread, NULL);
    }
    for (int i = 0; i < AO_EXPORT_MAX_CLIENTS; i++)
        if (ex->clients[i].fd >= 0) drop(&ex->clients[i]);
    close(ex->lfd);
    close(ex->wake[0]);
    close(ex->wake[1]);
    if (ex->following) ao_follow_free(&ex->follow);
    free(ex);
}
