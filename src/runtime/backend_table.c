/* The lookup of a layer's backend table (backend_table.h). */
#include "runtime/backend_table.h"

#include <string.h>

const void *ao_backend_find(const void *const *tables, size_t n, ao_device *dev)
{
    const char *name = ao_device_backend(dev);
    for (size_t i = 0; i < n; i++) {
        /* a pointer to a table is a pointer to its first member */
        const char *const *served = tables[i];
        if (strcmp(*served, name) == 0) return tables[i];
    }
    return NULL;
}
