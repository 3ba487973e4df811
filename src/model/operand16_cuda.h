/* The 16-bit copies of the GEMM operands in the model's 16-bit modes
 * (bf16 / fp16, ao_model_cuda_set_compute): where each copy lives, and which
 * are current, so that each is cast from its fp32 storage at most once per
 * use. Inside model/: model_cuda.c is its only user.
 *
 * Where the 16-bit copies live:
 *   - activations and scratch (the model's arena): at the same offset of a
 *     16-bit twin of the arena, so a view into the arena maps to one address;
 *   - a unit's weights: the engine's gathered 16-bit copy where it shared
 *     one (ao_op16_share), else each pass casts the weight matrices it
 *     multiplies into `w16` once, before its first GEMM;
 *   - anything else (the batch's dense features): into `outside`.
 * A buffer read by several GEMMs (attention's q, k, v, the output
 * gradient of a linear backward) is cast whole once and marked prepared
 * while those GEMMs run, so they do not cast it again; a layer's backward
 * reuses the copies its forward made of the GEMM inputs it saved. Passes
 * share these copies, as they share the arena: they run in order on one
 * stream. */
#ifndef AORTA_MODEL_OPERAND16_CUDA_H
#define AORTA_MODEL_OPERAND16_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "model/sizes.h" /* ao_op16_align */
#include "runtime/device.h"

#define MAX_STAGED   2  /* weight ranges staged by one pass */
#define MAX_PREPARED 8  /* arena ranges current in the twin for a run of GEMMs */
#define MAX_SHARED   16 /* the engine's registered 16-bit parameter copies */

typedef struct {
    uintptr_t src; /* fp32 weights [src, src + n floats) */
    size_t n;
    const void *dst; /* their 16-bit copy: n elements of `half` */
} staged_range;

typedef struct {
    uintptr_t src; /* fp32 [src, src + n floats), kept equal to ... */
    size_t n;
    const void *half; /* ... these n elements of `type`, by the engine */
    ao_dtype type;
} shared_range;

typedef struct {
    size_t off, n; /* arena elements whose twin is current */
} prepared_range;

/* A range of fp32 weights a pass multiplies. */
typedef struct {
    const float *p;
    size_t n;
} ao_op16_range;

typedef struct {
    /* AO_BF16 / AO_F16 when the GEMMs read 16-bit operands, AO_F32 otherwise
     * (the buffers below then unused, NULL until ao_op16_alloc) */
    ao_dtype half;
    const float *arena; /* the model's activations and scratch */
    size_t arena_floats;
    void *twin;    /* arena_floats elements */
    void *w16;     /* w16_cap elements */
    void *outside; /* outside_cap elements */
    size_t w16_cap, outside_cap;
    staged_range staged[MAX_STAGED];
    int nstaged;
    shared_range shared[MAX_SHARED];
    int nshared;
    /* A caller saves nprepared before marking ranges for a run of GEMMs and
     * restores it once they are enqueued, before anything rewrites them. */
    prepared_range prepared[MAX_PREPARED];
    int nprepared;
} ao_operand16;

/* Allocates the copies on dev (2 bytes an element whichever 16-bit type):
 * the twin of the arena, w16_cap elements of staged weights and outside_cap
 * of other operands. ao_op16_free frees them (NULL ones are skipped). */
void ao_op16_alloc(ao_operand16 *o, ao_device *dev, size_t w16_cap, size_t outside_cap);
void ao_op16_free(ao_operand16 *o, ao_device *dev);

/* Registers the engine's 16-bit copy `half` (of `type`) of the n floats at
 * fp32 (ao_model_cuda_share_params16). */
void ao_op16_share(ao_operand16 *o, const float *fp32, const void *half, ao_dtype type, size_t n);
/* The engine's 16-bit copy of fp32 [p, p + n) in the GEMMs' type, or NULL. */
const void *ao_op16_shared_copy(const ao_operand16 *o, const float *p, size_t n);

/* Whether [p, p + n) lies in the arena. */
int ao_op16_in_arena(const ao_operand16 *o, const float *p, size_t n);

/* Finds or makes a 16-bit copy of a unit's weight matrices (the ones its pass
 * multiplies): the engine's gathered copy where it registered one, else a
 * cast into w16. Called at the start of each pass (no-op in fp32 modes). */
void ao_op16_stage_weights(ao_operand16 *o, ao_stream *s, const ao_op16_range *r, int count);

/* Marks arena floats [p, p + n) current in the twin, casting them first when
 * `cast` (already current: nothing to do), until o->nprepared drops back
 * below this mark (the caller restores it once the GEMMs that share them are
 * enqueued, before anything rewrites them). */
void ao_op16_mark_current(ao_operand16 *o, ao_stream *s, const float *p, size_t n, int cast);
/* ao_op16_mark_current with a cast. */
void ao_op16_prepare(ao_operand16 *o, ao_stream *s, const float *p, size_t n);

/* Where the 16-bit copy of arena floats at p lives (a fused kernel writes it
 * directly; the caller then marks it current without a cast). */
void *ao_op16_twin_of(const ao_operand16 *o, const float *p);
/* ao_op16_twin_of in 16-bit modes, NULL in fp32 modes: the second output of
 * a kernel that can also write the next GEMM's operand. */
void *ao_op16_twin_or_null(const ao_operand16 *o, const float *p);
/* What a kernel reads of arena floats p: their 16-bit copy when `in16` (a
 * GEMM wrote only that), else p itself; *type says which. */
const void *ao_op16_input_of(const ao_operand16 *o, const float *p, int in16, ao_dtype *type);
/* p in fp32 modes, NULL in 16-bit modes: the fp32 output of a kernel whose
 * readers take only the 16-bit copy there. */
float *ao_op16_fp32_or_null(const ao_operand16 *o, float *p);

/* The staged 16-bit copy of weights [p, p + span floats), or NULL. */
const void *ao_op16_staged_copy(const ao_operand16 *o, const float *p, size_t span);
/* The 16-bit copy of an fp32 GEMM operand of `span` elements at p, cast now
 * unless already current. *outside_used counts the `outside` elements taken
 * by this GEMM's operands. */
const void *ao_op16_operand(const ao_operand16 *o, ao_stream *s, const float *p, size_t span,
                            size_t *outside_used);

#endif
