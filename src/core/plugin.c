/* The plugin loader (plugin.h). */
#include "core/plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

/* What each plugin holds, for the error line: the libraries it needs. */
static struct plugin {
    const char *name, *needs;
    int tried;
    void *handle;
    char why[2 * PATH_MAX + 64];
} plugins[] = {
    {"cuda", "the CUDA runtime, cuBLASLt and NCCL", 0, NULL, ""},
    {"hip", "HIP, RCCL and hipBLAS", 0, NULL, ""},
    {"mpi", "MPI", 0, NULL, ""},
    {"cairo", "cairo", 0, NULL, ""},
};
enum { NPLUGINS = sizeof plugins / sizeof plugins[0] };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *command; /* NULL: "aorta: error: WHY" */

void ao_plugin_set_command(const char *c)
{
    command = c;
}

static struct plugin *find(const char *name)
{
    for (int i = 0; i < NPLUGINS; i++)
        if (strcmp(plugins[i].name, name) == 0) return &plugins[i];
    return NULL;
}

/* The directory of the running executable, or "" when /proc says nothing. */
static void exe_dir(char *dir, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", dir, n - 1);
    dir[len > 0 ? len : 0] = '\0';
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        dir[0] = '\0';
}

char *ao_lib_find(const char *file, const char *dir, char *why, size_t n)
{
    char exe[PATH_MAX], paths[2][PATH_MAX];
    int np = 0; /* a candidate too long for a path is no candidate */
    if (dir && *dir) {
        np += snprintf(paths[np], sizeof paths[np], "%s/%s", dir, file) < PATH_MAX;
    } else {
        exe_dir(exe, sizeof exe);
        if (exe[0]) {
            np += snprintf(paths[np], sizeof paths[np], "%s/%s", exe, file) < PATH_MAX;
            np += snprintf(paths[np], sizeof paths[np], "%s/../lib/aorta/%s", exe, file) < PATH_MAX;
        }
    }
    for (int i = 0; i < np; i++)
        if (access(paths[i], F_OK) == 0) return ao_strdup(paths[i]);
    if (n == 0) return NULL;
    if (np == 2)
        snprintf(why, n, "neither %s nor %s exists", paths[0], paths[1]);
    else if (np == 1)
        snprintf(why, n, "%s does not exist", paths[0]);
    else
        snprintf(why, n, "%s: cannot find the aorta binary's directory", file);
    return NULL;
}

/* dlopen the plugin found by ao_lib_find, else by the dynamic loader's own
 * search (a build-tree test program, through its rpath). RTLD_GLOBAL because
 * OpenMPI's own components look up libmpi's symbols in the global scope. */
static void load(struct plugin *p)
{
    char file[64];
    snprintf(file, sizeof file, "libaorta_%s.so", p->name);
    char *path = ao_lib_find(file, getenv("AORTA_PLUGIN_DIR"), p->why, sizeof p->why);
    if (path) {
        p->handle = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if (!p->handle) snprintf(p->why, sizeof p->why, "%s", dlerror());
        free(path);
        return;
    }
    p->handle = dlopen(file, RTLD_NOW | RTLD_GLOBAL);
    /* found that way but not loadable: that is the reason to give */
    const char *err = p->handle ? NULL : dlerror();
    if (err && !strstr(err, "cannot open shared object file"))
        snprintf(p->why, sizeof p->why, "%s", err);
}

const void *ao_plugin_sym(const char *name, const char *symbol, int quiet)
{
    struct plugin *p = find(name);
    if (!p) {
        if (!quiet) ao_error(command, "no plugin '%s' in this build", name);
        return NULL;
    }
    pthread_mutex_lock(&lock);
    if (!p->tried) {
        p->tried = 1;
        load(p);
    }
    void *handle = p->handle;
    pthread_mutex_unlock(&lock);
    if (!handle) {
        if (!quiet)
            ao_error(command, "cannot load libaorta_%s.so (needs %s): %s", name, p->needs, p->why);
        return NULL;
    }
    const void *sym = dlsym(handle, symbol);
    if (!sym && !quiet)
        ao_error(command, "libaorta_%s.so has no %s: it is from another build of aorta", name,
                 symbol);
    return sym;
}

const char *ao_plugin_why(const char *name)
{
    struct plugin *p = find(name);
    if (!p) return NULL;
    pthread_mutex_lock(&lock);
    const char *why = p->tried && !p->handle ? p->why : NULL;
    pthread_mutex_unlock(&lock);
    return why;
}

int ao_plugin_loaded(const char *name)
{
    struct plugin *p = find(name);
    if (!p) return 0;
    pthread_mutex_lock(&lock);
    int loaded = p->handle != NULL;
    pthread_mutex_unlock(&lock);
    return loaded;
}
