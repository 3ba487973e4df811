/* Philox blocks and normals of a stream, many counters at once, with the
 * instruction set chosen at run time (host only; rng_simd.c). The values are
 * bit for bit those of ao_rng_block and ao_rng_normal in rng.h. */
#ifndef AORTA_DATA_RNG_SIMD_H
#define AORTA_DATA_RNG_SIMD_H

#include <stddef.h>
#include <stdint.h>

#include "data/rng.h"

enum ao_rng_simd {
    AO_RNG_SIMD_GENERIC = 0, /* the baseline ISA (what the compiler vectorises to by default) */
    AO_RNG_SIMD_AVX2 = 1,
    AO_RNG_SIMD_AVX512 = 2,
    AO_RNG_SIMD_COUNT
};

/* "generic", "avx2", "avx512". */
const char *ao_rng_simd_name(enum ao_rng_simd v);
/* 1 when this build has variant v and the CPU runs it. */
int ao_rng_simd_supported(enum ao_rng_simd v);
/* The widest supported variant (what ao_rng_normals uses). */
enum ao_rng_simd ao_rng_simd_best(void);

/* out[i] = ao_rng_block(s, first + i), i < n. Returns -1 (nothing written)
 * when v is not supported, else 0. */
int ao_rng_blocks_simd(enum ao_rng_simd v, ao_u32x4 *out, size_t n, ao_rng_stream s,
                       uint64_t first);
/* out[i] = ao_rng_normal(s, 2 first + i), i < 2 nblocks. Returns -1 when v is
 * not supported, else 0. */
int ao_rng_normal_pairs_simd(enum ao_rng_simd v, float *out, size_t nblocks, ao_rng_stream s,
                             uint64_t first);
/* out[i] = ao_rng_normal(s, element[i]), i < n, for elements in any order
 * (e.g. a table's rows picked by ids). Returns -1 when v is not supported,
 * else 0. */
int ao_rng_normals_at_simd(enum ao_rng_simd v, float *out, const uint32_t *element, size_t n,
                           ao_rng_stream s);

#endif
