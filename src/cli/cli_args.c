#include "cli/cli_args.h"

#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "runtime/device.h"

int cli_take_value(int argc, char **argv, int *i, const char *const *names, const char **val)
{
    const char *arg = argv[*i];
    for (const char *const *n = names; *n; n++) {
        size_t len = strlen(*n);
        if (strncmp(arg, *n, len) != 0) continue;
        if (arg[len] == '=' && arg[1] == '-') { /* --name=VALUE (long options only) */
            *val = arg + len + 1;
            return 1;
        }
        if (arg[len] != 0) continue;
        if (*i + 1 >= argc) {
            ao_error(arg, "needs a value");
            return -1;
        }
        *val = argv[++*i];
        return 1;
    }
    return 0;
}

int cli_is_flag(const char *arg, const char *const *names)
{
    for (const char *const *n = names; *n; n++)
        if (strcmp(arg, *n) == 0) return 1;
    return 0;
}

int cli_resolve_backend(const char **backend)
{
    if (strcmp(*backend, "auto") == 0) {
        *backend = ao_device_best_backend();
        return 0;
    }
    for (int i = 0; i < ao_device_backend_count(); i++)
        if (strcmp(*backend, ao_device_backend_name(i)) == 0) return 0;
    char list[128] = "auto";
    for (int i = 0; i < ao_device_backend_count(); i++) {
        strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, ao_device_backend_name(i), sizeof list - strlen(list) - 1);
    }
    ao_error("--backend", "'%s' is not a backend of this build; allowed: %s", *backend, list);
    return -1;
}

int cli_help_requested(int argc, char **argv, const char *usage, const char *help)
{
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            cli_print_help(stdout, usage, help);
            return 1;
        }
    }
    return 0;
}
