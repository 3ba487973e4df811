/* Host-side access to device-typed elements (fp16/bf16 included), for filling
 * benchmark inputs and checking their outputs, and the small statistics the
 * benchmarks report. */
#ifndef AORTA_BENCH_VALUES_H
#define AORTA_BENCH_VALUES_H

#include <stddef.h>

#include "runtime/device.h"

/* Element i of an array of type t, as a double (and back, rounded to nearest
 * even for the narrow float types; integers are truncated toward zero). */
double ao_value_load(ao_dtype t, const void *base, size_t i);
void ao_value_store(ao_dtype t, void *base, size_t i, double v);
/* v rounded through type t: what a correct device result reads back as. */
double ao_value_round(ao_dtype t, double v);

/* Fill `elems` elements of device memory with uniform values in [-1, 1) whose
 * mantissas are random (a hash of seed and index): GEMM inputs with the bit
 * patterns of real operands. A GEMM's rate depends on its data, because the
 * chip's power, and so its clock, does: on values with few distinct bit
 * patterns it runs faster than any training GEMM can (docs/DESIGN.md §7).
 * Synchronizes `s`. */
void ao_bench_fill_random(ao_device *dev, ao_stream *s, void *dst, size_t elems, ao_dtype t,
                          unsigned seed);

/* A benchmark command's flag that takes a value: every spelling, and whether
 * a sweep may vary it. The command parses exactly these; `aorta sweep`
 * checks its axes against the same table, so the two cannot drift. */
typedef struct ao_bench_flag {
    const char *names[4]; /* NULL-terminated */
    int axis;
} ao_bench_flag;

/* Monotonic host clock in microseconds. */
double ao_bench_now_us(void);

/* The q-quantile (0..1) of n values by linear interpolation; sorts v. NAN when
 * n is 0. */
double ao_bench_quantile(double *v, size_t n, double q);

#endif
