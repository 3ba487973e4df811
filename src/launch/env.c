/* ao_env_merge and ao_self_exe (launch/env.h). */
#include "launch/env.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

static size_t name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq ? (size_t)(eq - entry) : strlen(entry);
}

char **ao_env_merge(char *const *base, char *const *set)
{
    size_t nbase = 0, nset = 0;
    while (base && base[nbase]) nbase++;
    while (set && set[nset]) nset++;
    char **env = ao_calloc(nbase + nset + 1, sizeof *env);
    size_t n = 0;
    for (size_t i = 0; i < nbase; i++) {
        size_t len = name_len(base[i]);
        int overridden = 0;
        for (size_t j = 0; j < nset && !overridden; j++)
            overridden = name_len(set[j]) == len && strncmp(base[i], set[j], len) == 0;
        if (!overridden) env[n++] = base[i];
    }
    for (size_t j = 0; j < nset; j++) env[n++] = set[j];
    env[n] = NULL;
    return env;
}

char *ao_self_exe(void)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n < 0) {
        ao_error("launch", "cannot find this program (/proc/self/exe): %s", strerror(errno));
        return NULL;
    }
    path[n] = '\0';
    return ao_strdup(path);
}
