#include "cli/cli_args.h"

#include <ctype.h>
#include <string.h>

#include "cli/cli.h"
#include "core/error.h"
#include "core/text.h"
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

int cli_resolve_backend(const char *cmd, const char **backend)
{
    if (strcmp(*backend, "auto") == 0) {
        *backend = ao_device_best_backend();
        if (strcmp(*backend, "cpu") != 0) return 0;
        /* GPU work never falls back to the CPU unasked: it would run for
         * minutes and measure something else. */
        char why[1024];
        ao_device_why_no_gpu(why, sizeof why);
        ao_error(cmd, "no GPU: %s; to run on the CPU instead, pass --backend cpu", why);
        return -1;
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

const char *cli_closest(const char *word, const char *const *cands, size_t n)
{
    int best = ao_typo_limit(strlen(word));
    const char *found = NULL;
    for (size_t i = 0; i < n; i++) {
        int d = ao_edit_distance(word, cands[i], best);
        if (d < best) {
            best = d;
            found = cands[i];
        }
    }
    return found;
}

/* The flags a command's usage and help text name: each "-x" or "--name"
 * that starts a word, collected into words[] (pointers into buf). */
static size_t flags_in(const char *text, char *buf, size_t bufn, const char **words, size_t max)
{
    size_t n = 0, used = 0;
    for (const char *p = text; p && *p && n < max; p++) {
        if (*p != '-' || (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '-'))) continue;
        size_t len = 1;
        while (isalnum((unsigned char)p[len]) || p[len] == '-') len++;
        int long_flag = p[1] == '-' && isalpha((unsigned char)p[2]);
        int short_flag = isalpha((unsigned char)p[1]) && len == 2;
        if ((long_flag || short_flag) && used + len + 1 <= bufn) {
            memcpy(buf + used, p, len);
            buf[used + len] = '\0';
            words[n++] = buf + used;
            used += len + 1;
        }
        p += len - 1;
    }
    return n;
}

int cli_unknown_option(const char *cmd, const char *usage, const char *help, const char *arg)
{
    char name[128], buf[4096];
    const char *words[256];
    snprintf(name, sizeof name, "%s", arg);
    name[strcspn(name, "=")] = '\0'; /* --flag=value: the flag */
    size_t n = flags_in(usage, buf, sizeof buf / 2, words, 128);
    n += flags_in(help, buf + sizeof buf / 2, sizeof buf / 2, words + n, 128);
    /* a one-letter flag is too short to guess from */
    const char *near = strlen(name) > 2 ? cli_closest(name, words, n) : NULL;
    if (!near || strcmp(near, name) == 0)
        return cli_usage_error(cmd, usage, "unknown option '%s'", arg);
    ao_error(cmd, "unknown option '%s'; did you mean '%s'?", arg, near);
    return AO_EXIT_USAGE;
}
