/* aorta: git-style dispatch. `aorta <command> [args]`; everything a command
 * does lives in libaorta, the files here only parse flags. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "core/plugin.h"

struct command {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv);
};

static const struct command commands[] = {
#define AO_COMMAND(name, summary) {#name, summary, cmd_##name},
#include "cli/commands.h"
#undef AO_COMMAND
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const char usage[] = "usage: aorta [--version] [--help] <command> [<args>]";

static void print_usage(FILE *out)
{
    fprintf(out, "%s\n\ncommands:\n", usage);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-8s  %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-8s  %s\n", "help", "help on a command: aorta help <command>");
    fprintf(out, "\nexit codes: 0 ok, 1 run failed, 2 bad usage or input\n");
}

static const struct command *find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

/* One line: the word is no command, and the nearest one when it looks like
 * a typo of it. */
static int not_a_command(const char *word)
{
    const char *names[NCOMMANDS + 2];
    for (size_t i = 0; i < NCOMMANDS; i++) names[i] = commands[i].name;
    names[NCOMMANDS] = "help";
    names[NCOMMANDS + 1] = "version";
    const char *near = cli_closest(word, names, NCOMMANDS + 2);
    if (near)
        ao_error(NULL, "'%s' is not an aorta command; did you mean '%s'?", word, near);
    else
        ao_error(NULL, "'%s' is not an aorta command; 'aorta help' lists them", word);
    return AO_EXIT_USAGE;
}

void cli_print_help(FILE *out, const char *usage_line, const char *body)
{
    fprintf(out, "%s\n", usage_line);
    if (body && *body) fprintf(out, "\n%s", body);
}

int cli_is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

int cli_usage_error(const char *cmd, const char *usage_line, const char *fmt, ...)
{
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    ao_error(cmd, "%s", why);
    fprintf(stderr, "%s\n", usage_line);
    return AO_EXIT_USAGE;
}

int cli_usage_line(const char *usage_line)
{
    fprintf(stderr, "%s\n", usage_line);
    return AO_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return AO_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (cli_is_help(name)) {
        print_usage(stdout);
        return AO_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        cli_print_version(stdout);
        return AO_EXIT_OK;
    }
    if (strcmp(name, "help") == 0) {
        if (argc < 3) {
            print_usage(stdout);
            return AO_EXIT_OK;
        }
        const struct command *c = find(argv[2]);
        if (!c) return not_a_command(argv[2]);
        char *help_argv[] = {argv[2], "--help", NULL};
        return c->fn(2, help_argv);
    }
    if (name[0] == '-') return cli_unknown_option(NULL, usage, "--help --version", name);
    const struct command *c = find(name);
    if (!c) return not_a_command(name);
    ao_plugin_set_command(c->name);
    return c->fn(argc - 1, argv + 1);
}
