/* The lookup of a layer's backend table (backend_table.h). */
#include "runtime/backend_table.h"

#include <stdio.h>
#include <string.h>

#include "core/plugin.h"

const void *ao_backend_find(const void *cpu_table, const char *prefix, ao_device *dev)
{
    const char *name = ao_device_backend(dev);
    /* a pointer to a table is a pointer to its first member */
    if (strcmp(*(const char *const *)cpu_table, name) == 0) return cpu_table;
    char symbol[128];
    snprintf(symbol, sizeof symbol, "%s_cuda_backend", prefix); /* the GPU plugin's names */
    const char *const *table = ao_plugin_sym(name, symbol, 1);
    return table && strcmp(*table, name) == 0 ? table : NULL;
}
