/* The synthetic samples drawn on the device, the same values as data.h's
 * host generator (the same Philox streams, keyed alike). */
#include "model/kernels/common.cuh"

namespace
{

/* grid.y walks the batch's samples; the block derives sample b's stream of
 * `purpose` once. Each thread then draws one Philox block (4 words: 4 ids,
 * weights or targets, or 2 normals). */
struct data_fill_args {
    uint64_t seed, first;
    int batch, vocab;
    size_t dense_per_sample, ids_per_sample, tokens;
    float *dense, *target, *weight;
    int32_t *ids;
};

__global__ void data_field_kernel(data_fill_args a, uint32_t purpose)
{
    pdl_wait();
    __shared__ ao_rng_stream sample_stream;
    const size_t per_sample = purpose == AO_RNG_DATA_DENSE ? a.dense_per_sample
                              : purpose == AO_RNG_DATA_IDS ? a.ids_per_sample
                                                           : a.tokens;
    const size_t per_block = purpose == AO_RNG_DATA_DENSE ? 2 : 4; /* values per Philox block */
    const size_t groups = (per_sample + per_block - 1) / per_block;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t b = blockIdx.y; b < (size_t)a.batch; b += gridDim.y) {
        if (threadIdx.x == 0) sample_stream = ao_data_stream(a.seed, purpose, a.first + b);
        __syncthreads();
        const ao_rng_stream s = sample_stream;
        for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
            const ao_u32x4 w = ao_rng_block(s, g);
            for (size_t l = 0; l < per_block; l++) {
                const size_t e = g * per_block + l;
                if (e >= per_sample) break;
                const size_t at = b * per_sample + e;
                switch (purpose) {
                case AO_RNG_DATA_DENSE: /* ao_rng_normal: lanes 2l, 2l+1 of block e/2 */
                    a.dense[at] = ao_rng_box_muller(w.v[2 * l], w.v[2 * l + 1]);
                    break;
                case AO_RNG_DATA_IDS:
                    a.ids[at] = ao_data_id_from_word(w.v[l], a.vocab);
                    break;
                case AO_RNG_DATA_WEIGHT:
                    a.weight[at] = ao_data_weight_from_uniform(ao_rng_u32_to_uniform(w.v[l]));
                    break;
                default: /* AO_RNG_DATA_TARGET */
                    a.target[at] = ao_rng_u32_to_uniform(w.v[l]);
                    break;
                }
            }
        }
        __syncthreads();
    }
}

/* The teacher's target, a warp a token: lane i forms m_i (its F values
 * added in order) and the term u_i (m_i / F) for i = lane, lane + 32, ...;
 * every lane then adds the terms in index order through shuffles, so the
 * sums are data.h's serial ones while the loads are coalesced (a thread a
 * token read its own rows, strided by a token's size; bench/RESULTS.md). u
 * (dense_dim normals, the same for every token) is drawn once a block into
 * shared memory when it fits. */
__global__ void teacher_target_kernel(data_fill_args a, int num_dense, int dense_dim,
                                      int num_sparse, bool u_shared)
{
    extern __shared__ float u[];
    pdl_wait();
    const ao_rng_stream us = ao_rng_root(a.seed, AO_RNG_TEACHER_DENSE);
    const ao_rng_stream cs = ao_rng_root(a.seed, AO_RNG_TEACHER_ID);
    if (u_shared) {
        for (int i = (int)threadIdx.x; i < dense_dim; i += (int)blockDim.x)
            u[i] = ao_rng_normal(us, (uint64_t)i);
        __syncthreads();
    }
    const int lane = (int)(threadIdx.x & 31);
    const size_t total = (size_t)a.batch * a.tokens;
    const size_t warps = (size_t)gridDim.x * (blockDim.x / 32);
    for (size_t tok = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; tok < total;
         tok += warps) {
        const float *dense = a.dense + tok * num_dense * dense_dim;
        const int32_t *ids = a.ids + tok * num_sparse;
        double lin = 0.0, emb = 0.0;
        for (int i0 = 0; i0 < dense_dim; i0 += 32) {
            const int i = i0 + lane;
            double term = 0.0;
            if (i < dense_dim) {
                double m = 0.0;
                for (int f = 0; f < num_dense; f++) m += dense[(int64_t)f * dense_dim + i];
                const float ui = u_shared ? u[i] : ao_rng_normal(us, (uint64_t)i);
                term = __dmul_rn((double)ui, m / num_dense);
            }
            const int n = min(32, dense_dim - i0);
            for (int j = 0; j < n; j++) lin += AO_SHFL(term, j);
        }
        for (int s0 = 0; s0 < num_sparse; s0 += 32) {
            const int s = s0 + lane;
            const double c = s < num_sparse ? ao_rng_normal(cs, (uint64_t)ids[s]) : 0.0;
            const int n = min(32, num_sparse - s0);
            for (int j = 0; j < n; j++) emb += AO_SHFL(c, j);
        }
        if (lane == 0)
            a.target[tok] = ao_data_teacher_finish(lin, emb, num_dense, dense_dim, num_sparse);
    }
}

} // namespace

/* ---- launchers ------------------------------------------------------------- */

extern "C" cudaError_t ao_cuda_data_fill(const ao_data_shape *shape, uint64_t seed, int target_kind,
                                         uint64_t first_global_index, int batch, float *dense,
                                         int32_t *ids, float *target, float *weight,
                                         cudaStream_t stream)
{
    if (batch <= 0) return cudaSuccess;
    data_fill_args a;
    a.seed = seed;
    a.first = first_global_index;
    a.batch = batch;
    a.vocab = shape->vocab;
    a.tokens = (size_t)shape->seq_len;
    a.dense_per_sample = a.tokens * shape->num_dense * shape->dense_dim;
    a.ids_per_sample = a.tokens * shape->num_sparse;
    a.dense = dense;
    a.ids = ids;
    a.target = target;
    a.weight = weight;

    const uint32_t fields[] = {AO_RNG_DATA_DENSE, AO_RNG_DATA_IDS, AO_RNG_DATA_WEIGHT,
                               AO_RNG_DATA_TARGET};
    const size_t values[] = {a.dense_per_sample, a.ids_per_sample, a.tokens, a.tokens};
    const size_t per_block[] = {2, 4, 4, 4};
    const int nfields = target_kind == AO_TARGET_RANDOM ? 4 : 3;
    for (int f = 0; f < nfields; f++) {
        const size_t groups = (values[f] + per_block[f] - 1) / per_block[f];
        const dim3 grid(elem_blocks(groups), grid_y((size_t)batch));
        launch(data_field_kernel, grid, kThreads, 0, stream, a, fields[f]);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) return err;
    }
    if (target_kind == AO_TARGET_TEACHER) {
        const bool u_shared = shape->dense_dim <= 8192; /* 32 KiB */
        launch(teacher_target_kernel, elem_blocks((size_t)batch * a.tokens * 32), kThreads,
               u_shared ? (size_t)shape->dense_dim * sizeof(float) : 0, stream, a, shape->num_dense,
               shape->dense_dim, shape->num_sparse, u_shared);
        return cudaGetLastError();
    }
    return cudaSuccess;
}
