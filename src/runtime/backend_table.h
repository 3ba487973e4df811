/* How a layer above the device API (the model, the sharding engine, the
 * loader's device generator) picks its implementation for a device: one
 * table of functions per device backend, `struct ao_X_backend`, whose FIRST
 * member is `const char *device_backend` (the ao_device_backend() name it
 * serves), named `ao_X_<backend>_backend`:
 *
 *     const struct ao_X_backend *b = AO_BACKEND_FIND(ao_X, dev);
 *
 * The cpu table is linked in; the GPU backend's tables are in its plugin,
 * libaorta_<backend>.so (core/plugin.h: cuda, or hip for AMD), under their
 * CUDA names, ao_X_cuda_backend, whichever vendor they were compiled for. A layer without
 * a table for the device gets NULL and says so in its own words. */
#ifndef AORTA_RUNTIME_BACKEND_TABLE_H
#define AORTA_RUNTIME_BACKEND_TABLE_H

#include "runtime/device.h"

/* cpu_table when dev is a cpu device, else the object "<prefix>_cuda_backend"
 * of dev's backend's plugin when it serves dev's backend, or NULL. */
const void *ao_backend_find(const void *cpu_table, const char *prefix, ao_device *dev);

#define AO_BACKEND_FIND(prefix, dev)                                                               \
    ((const struct prefix##_backend *)ao_backend_find(&prefix##_cpu_backend, #prefix, (dev)))

#endif
