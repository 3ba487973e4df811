/* dataset.placement: device on the cuda device: the model backend's data
 * generator (ao_cuda_data_fill, the same samples as the host's), enqueued on
 * the loader's h2d stream. */
#include "data/loader_backend.h"
#include "model/model_cuda.h"
#include "runtime/gpu_compat.h"

const struct ao_loader_backend ao_loader_cuda_backend = {
    .device_backend = AO_GPU_BACKEND,
    .fill = ao_model_cuda_data_fill,
};
