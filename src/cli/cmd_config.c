/* aorta config show|validate|doc */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/config.h"
#include "core/error.h"

static const char usage[] =
    "usage: aorta config show|validate|doc [--config FILE] [--override KEY=VALUE ...]";

static const char help_body[] =
    "Resolve, check or document the configuration: schema defaults, then the YAML file\n"
    "given with --config, then each --override in order (a later one wins).\n"
    "\n"
    "subcommands:\n"
    "  show      print the resolved configuration as YAML, each value's origin as a comment\n"
    "  validate  check every key and the cross-key rules; print \"ok: FILE\"\n"
    "  doc       print the markdown reference of every key (docs/config.md)\n"
    "\n"
    "'aorta config SUBCOMMAND --help' describes each one.\n"
    "exit codes: 0 ok, 2 bad flag, file, key or value\n";

static const char show_usage[] =
    "usage: aorta config show [--config FILE] [--override KEY=VALUE ...] [--no-origins]";
static const char show_body[] =
    "Print the resolved configuration as YAML that `--config` accepts back. Each value is\n"
    "followed by its origin: default, FILE:LINE or --override.\n"
    "Every key is type- and range-checked; the cross-key rules (model_dim divisible by\n"
    "num_heads, ...) are left to `aorta config validate`, so a partial setup can be shown.\n"
    "\n"
    "  --config FILE            YAML config (default: schema defaults only)\n"
    "  --override KEY=VALUE ... set keys; repeatable; e.g. --override training.max_steps=50\n"
    "                           optimizer.betas=[0.9,0.95] fsdp.backward_prefetch=none\n"
    "  --no-origins             leave out the origin comments\n";

static const char validate_usage[] =
    "usage: aorta config validate [--config FILE] [--override KEY=VALUE ...]";
static const char validate_body[] =
    "Load the configuration exactly as `aorta train` would, run every check, and print\n"
    "\"ok: FILE\" (exit 0), or the first problem (exit 2).\n"
    "\n"
    "  --config FILE            YAML config (default: schema defaults only)\n"
    "  --override KEY=VALUE ... set keys; repeatable\n";

static const char doc_usage[] = "usage: aorta config doc";
static const char doc_body[] =
    "Print the reference of every configuration key (type, default, allowed values, meaning)\n"
    "as markdown. docs/config.md is this output.\n";

/* The flags a subcommand accepts. */
enum { ACCEPT_CONFIG = 1, ACCEPT_OVERRIDE = 2, ACCEPT_NO_ORIGINS = 4 };

struct config_args {
    const char *path;
    struct cli_overrides overrides;
    int with_origins;
};

/* Parse the flags after the subcommand. Returns -1 to go on, or an exit code. */
static int parse_flags(const char *cmd, const char *cmd_usage, const char *cmd_body, int accepts,
                       int argc, char **argv, struct config_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (cli_is_help(arg)) {
            cli_print_help(stdout, cmd_usage, cmd_body);
            return AO_EXIT_OK;
        } else if ((accepts & ACCEPT_CONFIG) && strcmp(arg, "--config") == 0) {
            if (i + 1 >= argc) return cli_usage_error(cmd, cmd_usage, "--config needs a FILE");
            a->path = argv[++i];
        } else if ((accepts & ACCEPT_CONFIG) && strncmp(arg, "--config=", 9) == 0) {
            a->path = arg + 9;
        } else if ((accepts & ACCEPT_OVERRIDE) && cli_is_override(arg)) {
            if (cli_take_overrides(cmd, cmd_usage, argc, argv, &i, &a->overrides))
                return AO_EXIT_USAGE;
        } else if ((accepts & ACCEPT_NO_ORIGINS) && strcmp(arg, "--no-origins") == 0) {
            a->with_origins = 0;
        } else if (arg[0] == '-') {
            return cli_unknown_option(cmd, cmd_usage, cmd_body, arg);
        } else {
            return cli_usage_error(cmd, cmd_usage, "unexpected argument '%s'", arg);
        }
    }
    return -1;
}

int cmd_config(int argc, char **argv)
{
    if (argc < 2) return cli_usage_error("config", usage, "a subcommand is needed");
    const char *sub = argv[1];
    if (cli_is_help(sub)) {
        cli_print_help(stdout, usage, help_body);
        return AO_EXIT_OK;
    }
    struct config_args a = {.with_origins = 1};
    int rc;
    if (strcmp(sub, "show") == 0) {
        rc = parse_flags("config show", show_usage, show_body,
                         ACCEPT_CONFIG | ACCEPT_OVERRIDE | ACCEPT_NO_ORIGINS, argc - 1, argv + 1,
                         &a);
        if (rc < 0) {
            struct ao_config cfg;
            rc = ao_config_resolve(&cfg, a.path, a.overrides.words, a.overrides.n);
            if (!rc) {
                ao_config_print_yaml(stdout, &cfg, a.with_origins);
                ao_config_free(&cfg);
            }
        }
    } else if (strcmp(sub, "validate") == 0) {
        rc = parse_flags("config validate", validate_usage, validate_body,
                         ACCEPT_CONFIG | ACCEPT_OVERRIDE, argc - 1, argv + 1, &a);
        if (rc < 0) {
            struct ao_config cfg;
            rc = ao_config_load(&cfg, a.path, a.overrides.words, a.overrides.n);
            if (!rc) {
                printf("ok: %s\n", a.path ? a.path : "(defaults)");
                ao_config_free(&cfg);
            }
        }
    } else if (strcmp(sub, "doc") == 0) {
        rc = parse_flags("config doc", doc_usage, doc_body, 0, argc - 1, argv + 1, &a);
        if (rc < 0) {
            ao_config_print_doc(stdout);
            rc = AO_EXIT_OK;
        }
    } else {
        rc = cli_usage_error("config", usage, "unknown subcommand '%s' (show, validate, doc)", sub);
    }
    cli_overrides_free(&a.overrides);
    return rc;
}
