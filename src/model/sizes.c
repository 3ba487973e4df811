/* The model backends' device buffers (sizes.h). */
#include "model/sizes.h"

#include "model/model.h"
#include "model/model_backend.h"
#include "model/ops_ref.h"

/* The largest pass's staged weights: a layer's, the input stage's two
 * matrices, or the head's (model_cuda.c's stage_layer, stage_input,
 * stage_head). */
static size_t w16_elements(const ao_model_shape *sh)
{
    const ao_encoder_shape es = ao_model_encoder_shape(sh);
    const ao_input_shape is = ao_model_input_shape(sh);
    const ao_head_shape hs = ao_model_head_shape(sh);
    return ao_model_max3(sh->layers > 0 ? ao_op16_align(ao_encoder_param_count(&es)) : 0,
                         ao_op16_align((size_t)is.dim * is.emb_dim) +
                             ao_op16_align((size_t)is.dim * is.dense_in),
                         ao_op16_align(ao_head_staged_floats(&hs)));
}

void ao_model_cuda_sizes_of(const ao_model_shape *s, ao_model_cuda_sizes *z)
{
    const int L = s->layers;
    const size_t N = (size_t)s->batch * s->seq, d = (size_t)s->dim;
    const size_t probs = (size_t)s->batch * s->heads * s->seq * s->seq;
    const ao_head_shape hs = ao_model_head_shape(s);
    const int dropout = s->dropout > 0.0f && L > 0;
    *z = (ao_model_cuda_sizes){0};
    z->attn_scratch_floats = N * 3 * d + N * d + probs;
    /* encoder backward: dr, dbranch, dx1 [N, d], da [N, ff], then the attention's */
    z->scratch_floats = ao_model_max3(3 * N * d + N * s->ff + z->attn_scratch_floats,
                                      ao_head_backward_scratch_floats(&hs), N * s->emb_dim);
    z->extra_floats = s->dropout > 0.0f ? (size_t)L * probs : 0;
    z->arena_floats = ao_model_acts_floats(s, z->extra_floats, z->scratch_floats);
    if (dropout) {
        z->hidden_mask_bytes = ao_dropout_mask_bytes(s->batch, (size_t)s->seq * s->ff);
        z->probs_mask_bytes = ao_dropout_mask_bytes(s->batch * s->heads, (size_t)s->seq * s->seq);
    }
    z->stats_bytes = L > 0 ? (size_t)L * 2 * s->batch * s->heads * s->seq * sizeof(float) : 0;
    z->sort_count = N * (size_t)(s->sparse > 0 ? s->sparse : 0);
    z->w16_elements = w16_elements(s);
    z->outside_elements = ao_op16_align(N * s->num_dense * s->dense_dim);
}

size_t ao_embedding_sort_temp_estimate(size_t count)
{
    return count ? 2 * ao_align256(count * sizeof(uint32_t)) : 0;
}

void ao_model_device_bytes(const ao_model_shape *s, int gpu, int compute16, size_t sort_temp,
                           ao_model_bytes *out)
{
    *out = (ao_model_bytes){0};
    if (!gpu) {
        out->activations =
            ao_model_acts_floats(s, 0, ao_model_ref_scratch_floats(s)) * sizeof(float);
        return;
    }
    ao_model_cuda_sizes z;
    ao_model_cuda_sizes_of(s, &z);
    out->activations = z.arena_floats * sizeof(float);
    /* 2 bytes an element whichever 16-bit type (ao_op16_alloc) */
    if (compute16) out->half = 2 * (z.arena_floats + z.w16_elements + z.outside_elements);
    if (sort_temp == SIZE_MAX) sort_temp = ao_embedding_sort_temp_estimate(z.sort_count);
    const size_t sort =
        z.sort_count ? ao_embedding_sort_arrays_bytes(z.sort_count) + ao_align256(sort_temp) : 0;
    out->other =
        (size_t)s->layers * (z.hidden_mask_bytes + z.probs_mask_bytes) + z.stats_bytes + sort;
}
