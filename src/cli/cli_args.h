/* Option matching shared by the commands' flag loops: "--name VALUE",
 * "--name=VALUE" and "-x VALUE", with one error for a missing value. */
#ifndef AORTA_CLI_CLI_ARGS_H
#define AORTA_CLI_CLI_ARGS_H

#include <stddef.h>

/* The spellings of one option: CLI_NAMES("-n", "--iters"). */
#define CLI_NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* In a flag loop over argc/argv with locals `int i` (the index), `const char
 * *v` (the value) and `int r` (cli_take_value's result): true when argv[i] is
 * one of the spellings, with r < 0 when its value is missing. */
#define CLI_VALUE(...) ((r = cli_take_value(argc, argv, &i, CLI_NAMES(__VA_ARGS__), &v)) != 0)

/* Any -h/--help among argv[1..]: print the command's help to stdout and
 * return 1 (the command then exits 0), else 0. Checked before parsing, so
 * help works whatever else is wrong on the line. */
int cli_help_requested(int argc, char **argv, const char *usage, const char *help);

/* Whether argv[*i] is one of `names` (a NULL-terminated list of spellings)
 * taking a value. Returns 1 with *val set and *i moved past the value, 0 when
 * argv[*i] is not this option, -1 after printing an error for a missing
 * value (the caller prints its usage line). */
int cli_take_value(int argc, char **argv, int *i, const char *const *names, const char **val);

/* Whether argv[i] is one of `names` (a flag without a value). */
int cli_is_flag(const char *arg, const char *const *names);

/* --backend: "auto" becomes the GPU backend that sees a device, and is an
 * error naming why there is none otherwise (the cpu backend only when asked
 * for); any other name must be compiled in. 0, or -1 after one error line. */
int cli_resolve_backend(const char *cmd, const char **backend);

#endif
