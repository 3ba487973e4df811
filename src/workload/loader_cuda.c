/* dataset.placement: device on the cuda device: the model backend's data
 * generator (ao_cuda_data_fill, the same samples as the host's), enqueued on
 * the loader's h2d stream. */
#include "runtime/gpu_compat.h"
#include "workload/loader_backend.h"
#include "workload/model_cuda.h"

const struct ao_loader_backend ao_loader_cuda_backend = {
    .device_backend = AO_GPU_BACKEND,
    .fill = ao_model_cuda_data_fill,
};
