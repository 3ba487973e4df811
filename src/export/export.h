/* Live export of a run directory for dashboards (DESIGN §18): an HTTP server
 * on one thread, poll()-based, that answers GET /metrics with the latest
 * record of every rank in the Prometheus text format (export/prom.h), read
 * from the directory's rank files as they grow (export/follow.h).
 *
 * `aorta export` serves on its own thread until SIGINT or SIGTERM; `aorta
 * attach --prometheus` and `aorta train` (profiling.prometheus_port) run the
 * same server on a thread of the process that made the run directory:
 *
 *     ao_exporter *ex = ao_export_open(addr, port, "--listen", "--prometheus");
 *     if (!ex) return AO_EXIT_USAGE;           // bad address, port taken
 *     ... make the run directory ...
 *     if (ao_export_start(ex, dir)) ...        // a thread serves it
 *     ... the job runs ...
 *     ao_export_close(ex);                     // stops and joins the thread
 *
 * Bounded work per client: a request of at most AO_HTTP_MAX_REQUEST bytes,
 * AO_EXPORT_CLIENT_TIMEOUT_MS from accept to the last byte answered, at
 * most AO_EXPORT_MAX_CLIENTS at once (the oldest is dropped for a new one),
 * one request per connection. */
#ifndef AORTA_EXPORT_EXPORT_H
#define AORTA_EXPORT_EXPORT_H

#define AO_EXPORT_DEFAULT_LISTEN    "127.0.0.1"
#define AO_EXPORT_MAX_CLIENTS       64
#define AO_EXPORT_CLIENT_TIMEOUT_MS 10000

typedef struct ao_exporter ao_exporter;

/* A port as a flag or key gives it: an integer in [min, 65535]. 0, or
 * AO_EXIT_USAGE after one error naming `what`. */
int ao_export_parse_port(const char *what, const char *text, int min, int *port);

/* Listen on addr (a numeric IPv4 or IPv6 address; NULL: 127.0.0.1) and
 * port (0: any free port, which the "serving" line names). NULL after one
 * error naming listen_what (a bad address) or port_what (the port is taken,
 * not allowed). The socket is close-on-exec: children never hold it. */
ao_exporter *ao_export_open(const char *addr, int port, const char *listen_what,
                            const char *port_what);

/* "http://127.0.0.1:PORT/metrics": where it listens (the port chosen when 0). */
const char *ao_export_url(const ao_exporter *ex);

/* Serve run_dir (an existing directory; a symlink such as `latest` is
 * resolved now) on a thread of its own that blocks every signal, so the
 * process's handlers run where they always did. Prints one line, "aorta:
 * export: serving RUN on http://ADDR:PORT/metrics". 0, or AO_EXIT_USAGE
 * (not a directory) or AO_EXIT_FAIL (no thread) after printing why. */
int ao_export_start(ao_exporter *ex, const char *run_dir);

/* The same on this thread, until ao_export_request_stop. 0, AO_EXIT_USAGE
 * (not a directory) or AO_EXIT_FAIL (poll failed). */
int ao_export_serve(ao_exporter *ex, const char *run_dir);

/* Ask the server to return: async-signal-safe, for a signal handler. */
void ao_export_request_stop(ao_exporter *ex);

/* Stop the thread if one serves, close every socket, free. NULL is a no-op. */
void ao_export_close(ao_exporter *ex);

#endif
