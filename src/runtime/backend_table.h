/* How a layer above the device API (the model, the sharding engine, the
 * loader's device generator) picks its implementation for a device: one
 * table of functions per device backend, `struct ao_X_backend`, whose FIRST
 * member is `const char *device_backend` (the ao_device_backend() name it
 * serves), named `ao_X_<backend>_backend`:
 *
 *     const struct ao_X_backend *b = AO_BACKEND_FIND(ao_X, dev);
 *
 * The cpu table is linked in; a GPU backend's tables are in its plugin,
 * libaorta_<backend>.so (core/plugin.h), found by the same name, so a new
 * device backend is a plugin that defines the tables once. A layer without
 * a table for the device gets NULL and says so in its own words. */
#ifndef AORTA_RUNTIME_BACKEND_TABLE_H
#define AORTA_RUNTIME_BACKEND_TABLE_H

#include "runtime/device.h"

/* cpu_table when dev is a cpu device, else the object
 * "<prefix>_<backend>_backend" of dev's backend's plugin, or NULL. */
const void *ao_backend_find(const void *cpu_table, const char *prefix, ao_device *dev);

#define AO_BACKEND_FIND(prefix, dev)                                                               \
    ((const struct prefix##_backend *)ao_backend_find(&prefix##_cpu_backend, #prefix, (dev)))

#endif
