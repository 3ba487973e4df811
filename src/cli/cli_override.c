/* The shared --override flag (train, sweep, config, ...). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"

static const char flag[] = "--override";

int cli_is_override(const char *arg)
{
    size_t n = sizeof flag - 1;
    return strncmp(arg, flag, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

static void push(struct cli_overrides *ov, char *word)
{
    ov->words = ao_realloc(ov->words, sizeof *ov->words * (size_t)(ov->n + 1));
    ov->words[ov->n++] = word;
}

static int is_assignment(const char *word)
{
    return word[0] != '-' && strchr(word, '=') != NULL;
}

int cli_take_overrides(const char *cmd, const char *usage, int argc, char **argv, int *i,
                       struct cli_overrides *ov)
{
    char *arg = argv[*i];
    if (arg[sizeof flag - 1] == '=') {
        push(ov, arg + sizeof flag);
        return 0;
    }
    if (*i + 1 >= argc || !is_assignment(argv[*i + 1]))
        return cli_usage_error(cmd, usage, "--override needs KEY=VALUE (e.g. %s)",
                               "--override training.max_steps=50");
    while (*i + 1 < argc && is_assignment(argv[*i + 1])) push(ov, argv[++*i]);
    return 0;
}

void cli_overrides_free(struct cli_overrides *ov)
{
    free(ov->words);
    ov->words = NULL;
    ov->n = 0;
}
