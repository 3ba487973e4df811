/* CUDA-only extras of the model, for callers that know they run on the cuda
 * device (the engine, under AORTA_HAVE_CUDA). Defined in model_cuda.c, which
 * only CUDA builds compile; this header itself needs no CUDA header. */
#ifndef AORTA_MODEL_MODEL_CUDA_H
#define AORTA_MODEL_MODEL_CUDA_H

#include <stdint.h>

#include "data/data.h"
#include "model/model.h"
#include "runtime/device.h"

/* The GEMMs' compute mode for m (a model on the cuda device): the default is
 * plain fp32 (AO_COMPUTE_DEFAULT); AO_COMPUTE_TF32 runs fp32 GEMM inputs
 * through TF32 tensor cores. AO_COMPUTE_BF16 / _F16 (training.mixed_precision)
 * multiply 16-bit operands: each is cast from its fp32 storage once per use
 * (a buffer several GEMMs read, once for all of them; a unit's weights once
 * per pass), and the GEMMs accumulate and write in fp32. Storage stays fp32
 * in every mode; the first 16-bit mode set allocates the 16-bit copies (half
 * the activations' size, plus the largest unit's matrices). On a device
 * without the 16-bit type the GEMMs take fp32 operands and round inside. Set
 * between passes, not while any is in flight. */
void ao_model_cuda_set_compute(ao_model *m, ao_compute_mode mode);

/* Registers the engine's 16-bit copy of a parameter buffer: `half` holds
 * the n floats at `fp32` rounded to `type`, in the same layout, whenever a
 * pass reads them (a gathered buffer and the all-gather's wire buffer it is
 * cast from). A pass whose weight matrices lie inside [fp32, fp32 + n) then
 * multiplies `half` where they are, instead of casting them into a copy of
 * its own, when the GEMMs' 16-bit type is `type` (the same values: rounding
 * a value that came from `type` gives it back). At most 16 buffers; the
 * registration lasts as long as the model. */
void ao_model_cuda_share_params16(ao_model *m, const float *fp32, const void *half, ao_dtype type,
                                  size_t n);

/* The parts of unit `unit`'s flat parameters at `params` that the model
 * reads in fp32: all of them, unless its GEMMs are 16-bit and `params` lies
 * in a shared 16-bit copy of their type, whose weight matrices it then reads
 * from that copy only. Writes (offset, count) pairs in floats from params, in
 * order, at most `max`; returns how many (-1: more than max). The engine
 * casts only these parts of a gathered unit back to fp32. */
int ao_model_cuda_fp32_parts(const ao_model *m, int unit, const float *params, size_t (*parts)[2],
                             int max);

/* ao_data_fill on the device (dataset.placement: device), enqueued on `s`
 * (a cuda stream). The shape must have passed ao_data_shape_check and the
 * buffers hold `batch` samples in ao_data_fill's layout. */
void ao_model_cuda_data_fill(ao_stream *s, const ao_data_shape *shape, uint64_t seed,
                             int target_kind, uint64_t first_global_index, int batch, float *dense,
                             int32_t *ids, float *target, float *weight);

#endif
