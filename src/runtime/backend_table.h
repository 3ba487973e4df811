/* How a layer above the device API (the model, the sharding engine, the
 * loader's device generator) picks its implementation for a device: one
 * table of functions per device backend, `struct ao_X_backend`, whose FIRST
 * member is `const char *device_backend` (the ao_device_backend() name it
 * serves), and one list of the tables in a build:
 *
 *     static const struct ao_X_backend *const X_backends[] = AO_BACKEND_LIST(ao_X);
 *     const struct ao_X_backend *b = AO_BACKEND_FIND(X_backends, dev);
 *
 * AO_BACKEND_LIST names the tables ao_X_cpu_backend and, in CUDA builds,
 * ao_X_cuda_backend, so a new device backend is added here once and gives
 * each layer a table named the same way. A layer without a table for the
 * device gets NULL and says so in its own words. */
#ifndef AORTA_RUNTIME_BACKEND_TABLE_H
#define AORTA_RUNTIME_BACKEND_TABLE_H

#include <stddef.h>

#include "runtime/device.h"

/* clang-format off */
#ifdef AORTA_HAVE_CUDA
#define AO_BACKEND_LIST(prefix) {&prefix##_cpu_backend, &prefix##_cuda_backend}
#else
#define AO_BACKEND_LIST(prefix) {&prefix##_cpu_backend}
#endif
/* clang-format on */

/* The table in tables[0..n) whose device_backend is dev's backend, or NULL. */
const void *ao_backend_find(const void *const *tables, size_t n, ao_device *dev);

#define AO_BACKEND_FIND(tables, dev)                                                               \
    ao_backend_find((const void *const *)(tables), sizeof(tables) / sizeof((tables)[0]), (dev))

#endif
