/* aorta export: flag parsing; the server is export/export.h. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_args.h"
#include "core/error.h"
#include "export/export.h"

static const char usage[] = "usage: aorta export --prometheus PORT [--listen ADDR] RUN_DIR";

static const char help[] =
    "Serve the latest per-step metrics of every rank of RUN_DIR (a run of aorta train,\n"
    "analyze or attach, finished or still being written) on http://ADDR:PORT/metrics in the\n"
    "Prometheus text format, labelled run, rank and (per collective kind) kind, in seconds\n"
    "and bytes: aorta_step_seconds, aorta_exposed_comm_seconds{kind=...}, aorta_steps_total,\n"
    "... (docs/prometheus.md lists them all, with a scrape config). Each scrape reads the\n"
    "lines the ranks added since the last one; a line counts once it is complete.\n"
    "\n"
    "  --prometheus PORT  the port to serve on; 0: any free port (the line printed at\n"
    "                     start names it)\n"
    "  --listen ADDR      the address to listen on (default 127.0.0.1, this host only;\n"
    "                     0.0.0.0 or :: for every interface)\n"
    "  RUN_DIR            the run directory (artifacts/latest: the link is resolved once)\n"
    "  -h, --help         this help\n"
    "\n"
    "Runs until SIGINT or SIGTERM (exit 0). aorta attach --prometheus PORT and aorta train\n"
    "with profiling.prometheus_port serve the same for the run they write.\n"
    "Exit codes: 0 stopped by a signal, 1 the server failed, 2 bad flags, a RUN_DIR that is\n"
    "not a directory, or a port that cannot be listened on.\n";

static ao_exporter *serving;

static void on_signal(int sig)
{
    (void)sig;
    if (serving) ao_export_request_stop(serving);
}

int cmd_export(int argc, char **argv)
{
    if (cli_help_requested(argc, argv, usage, help)) return AO_EXIT_OK;
    const char *listen = AO_EXPORT_DEFAULT_LISTEN, *dir = NULL;
    int port = -1;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (CLI_VALUE("--prometheus")) {
            if (r < 0) return cli_usage_error("export", usage, "--prometheus needs a port");
            if (ao_export_parse_port("--prometheus", v, 0, &port)) return AO_EXIT_USAGE;
        } else if (CLI_VALUE("--listen")) {
            if (r < 0) return cli_usage_error("export", usage, "--listen needs an address");
            listen = v;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("export", usage, "unknown option '%s'", argv[i]);
        } else if (dir) {
            return cli_usage_error("export", usage, "one RUN_DIR only ('%s' and '%s')", dir,
                                   argv[i]);
        } else {
            dir = argv[i];
        }
    }
    if (port < 0)
        return cli_usage_error("export", usage,
                               "--prometheus PORT is required (the only format served)");
    if (!dir) return cli_usage_error("export", usage, "give the RUN_DIR to serve");
    ao_exporter *ex = ao_export_open(listen, port, "--listen", "--prometheus");
    if (!ex) return AO_EXIT_USAGE;
    serving = ex;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int rc = ao_export_serve(ex, dir);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    serving = NULL;
    ao_export_close(ex);
    return rc;
}
