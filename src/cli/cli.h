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
/* The usage line alone, after an error already printed (a flag's missing
 * value, which cli_take_value reports): one error line, never two. Returns
 * AO_EXIT_USAGE. */
int cli_usage_line(const char *usage);

/* An unknown flag: "aorta: error: <cmd>: unknown option '--nprocs'; did you
 * mean '--nproc'?" when one of the flags `usage` and `help` name is close
 * (one line), else the error and the usage line. Returns AO_EXIT_USAGE. */
int cli_unknown_option(const char *cmd, const char *usage, const char *help, const char *arg);

/* The candidate closest to `word` within typo distance, or NULL. */
const char *cli_closest(const char *word, const char *const *cands, size_t n);

/* True when argv[i] is --help or -h. */
int cli_is_help(const char *arg);

/* `--override KEY=VALUE [KEY=VALUE ...]`, repeatable, as every command that
 * reads a config takes it; also `--override=KEY=VALUE`. The words point into
 * argv; hand them to ao_config_load in order (a later one wins). */
struct cli_overrides {
    char **words;
    int n;
};
/* True when arg is --override or --override=... */
int cli_is_override(const char *arg);
/* argv[*i] is an --override flag: append its own KEY=VALUE (--override=K=V)
 * and the key=value words that follow it
 * (up to the first word that starts with '-' or has no '='), leaving *i on
 * the last one taken. Returns 0, or AO_EXIT_USAGE after printing when no
 * key=value follows. */
int cli_take_overrides(const char *cmd, const char *usage, int argc, char **argv, int *i,
                       struct cli_overrides *ov);
void cli_overrides_free(struct cli_overrides *ov);

/* Version and build facts for `aorta --version`. */
void cli_print_version(FILE *out);

#endif
