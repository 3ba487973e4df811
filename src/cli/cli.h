/* What every command shares: the table, version text and small flag helpers. */
#ifndef AORTA_CLI_CLI_H
#define AORTA_CLI_CLI_H

#include <stdio.h>

#define AO_COMMAND(name, summary) int cmd_##name(int argc, char **argv);
#include "cli/commands.h"
#undef AO_COMMAND

/* Print "aorta <cmd>" help: the usage line, then the body. */
void cli_print_help(FILE *out, const char *usage, const char *body);

/* Report an unknown flag or a missing value the same way everywhere:
 * "aorta: error: <cmd>: ..." plus the usage line; returns AO_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when argv[i] is --help or -h. */
int cli_is_help(const char *arg);

/* Version and build facts for `aorta --version`. */
void cli_print_version(FILE *out);

#endif
