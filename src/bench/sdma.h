/* `aorta sdma`: a GEMM on a low-priority stream against a copy on a
 * high-priority stream (the seed's SDMA prototype), in four modes — each
 * alone, serialized on one stream, overlapped on two — timed with events on
 * the stream that runs each op. Reports how much of the serial time the
 * overlap saves and whether the copy really ran during the GEMM. */
#ifndef AORTA_BENCH_SDMA_H
#define AORTA_BENCH_SDMA_H

#include <stddef.h>

#include "bench/values.h"
#include "runtime/device.h"

typedef enum ao_sdma_direction {
    AO_SDMA_H2D,
    AO_SDMA_D2H,
    AO_SDMA_D2D,
    AO_SDMA_P2P
} ao_sdma_direction;
typedef enum ao_sdma_engine { AO_SDMA_DMA, AO_SDMA_KERNEL } ao_sdma_engine;

int ao_sdma_direction_parse(const char *flag, const char *s, ao_sdma_direction *out);
const char *ao_sdma_direction_name(ao_sdma_direction d);
int ao_sdma_engine_parse(const char *flag, const char *s, ao_sdma_engine *out);
const char *ao_sdma_engine_name(ao_sdma_engine e);

typedef struct ao_sdma_opts {
    const char *backend; /* resolved: "cpu", "cuda", ... */
    int device;          /* -1: the launcher's local rank, else 0 */
    int matrix;          /* N of the N x N x N GEMM */
    ao_dtype dtype;
    int dtype_set; /* else bf16 on GPUs, float on cpu */
    size_t copy_bytes;
    int iterations, warmup;
    ao_sdma_direction direction;
    ao_sdma_engine engine;
    const char *json_path;
} ao_sdma_opts;

void ao_sdma_defaults(ao_sdma_opts *o);

/* sdma's flags with a value, indexed by ao_sdma_flag (see ao_bench_flag). */
typedef enum ao_sdma_flag {
    AO_SDMA_F_DEVICE,
    AO_SDMA_F_MATRIX_SIZE,
    AO_SDMA_F_DTYPE,
    AO_SDMA_F_COPY_MB,
    AO_SDMA_F_ITERATIONS,
    AO_SDMA_F_WARMUP,
    AO_SDMA_F_DIRECTION,
    AO_SDMA_F_ENGINE,
    AO_SDMA_F_JSON,
    AO_SDMA_F_BACKEND,
    AO_SDMA_NFLAGS
} ao_sdma_flag;
extern const ao_bench_flag ao_sdma_flags[AO_SDMA_NFLAGS];

/* (serial - overlapped) / serial, in percent; NAN when serial is not positive. */
double ao_sdma_savings_pct(double serial, double overlapped);
/* (serial - overlapped) / (serial - max(gemm_alone, copy_alone)): 1 = the
 * shorter op is fully hidden, 0 = no overlap at all. NAN when the denominator
 * is not positive (nothing to hide, or the serial run beat an op alone). */
double ao_sdma_achieved(double serial, double overlapped, double gemm_alone, double copy_alone);
/* Length of [a0, a1] ∩ [b0, b1]; 0 when they do not meet. */
double ao_interval_overlap(double a0, double a1, double b0, double b1);

/* Run as one process, or as one rank of an external launcher's job on its
 * local rank's device (unless --device says which), where rank 0 prints and
 * writes the files. Returns the exit code (1 when the copied data does not
 * match its source, 2 for a configuration the device cannot run). */
int ao_sdma_run(const ao_sdma_opts *o);

#endif
