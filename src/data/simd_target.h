/* Compiling one lane loop body for several instruction sets (host only):
 * AO_INLINE bodies instantiated in functions under AO_TARGET_AVX2 /
 * AO_TARGET_AVX512 and chosen at run time (ao_rng_simd_supported). No FMA is
 * enabled and C11 mode keeps contraction off, so every variant computes the
 * same bits. */
#ifndef AORTA_DATA_SIMD_TARGET_H
#define AORTA_DATA_SIMD_TARGET_H

#if defined(__GNUC__)
#define AO_INLINE static inline __attribute__((always_inline))
#else
#define AO_INLINE static inline
#endif

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define AO_HAVE_X86_VARIANTS 1
#define AO_TARGET_AVX2       __attribute__((target("avx2")))
#define AO_TARGET_AVX512     __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#endif

#endif
