/* What a device backend implements for dataset.placement: device: the
 * generation of samples straight into device memory (loader.c). The loader
 * finds the table of its device's backend as runtime/backend_table.h says; a
 * new backend adds its table (ao_loader_<name>_backend) here. */
#ifndef AORTA_DATA_LOADER_BACKEND_H
#define AORTA_DATA_LOADER_BACKEND_H

#include <stdint.h>

#include "data/data.h"
#include "runtime/device.h"

struct ao_loader_backend {
    const char *device_backend; /* ao_device_backend() of the devices it serves */
    /* Enqueues on `s` ao_data_fill(shape, seed, target_kind,
     * first_global_index, batch, ...) into device buffers. The shape and kind
     * passed ao_data_shape_check and the loader's checks. */
    void (*fill)(ao_stream *s, const ao_data_shape *shape, uint64_t seed, int target_kind,
                 uint64_t first_global_index, int batch, float *dense, int32_t *ids, float *target,
                 float *weight);
};

extern const struct ao_loader_backend ao_loader_cpu_backend; /* loader.c */
#ifdef AORTA_HAVE_CUDA
/* model/data_fill_cuda.c: the model's CUDA kernels draw the samples, so data/
 * never includes model/ (DESIGN §3) */
extern const struct ao_loader_backend ao_loader_cuda_backend;
#endif

#endif
