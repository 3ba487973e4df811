/* The 16-bit copies of the GEMM operands (operand16_cuda.h). */
#include "model/operand16_cuda.h"

#include <stdint.h>

#include "core/error.h"
#include "model/kernels_cuda.h"
#include "runtime/device_cuda.h"

static void *half_at(void *base, size_t elements)
{
    return (unsigned char *)base + 2 * elements;
}

/* [p, p + n) inside [base, base + cap) (element counts; floats). */
static int inside(const float *p, size_t n, uintptr_t base, size_t cap)
{
    const uintptr_t a = (uintptr_t)p;
    return a >= base && (a - base) / sizeof(float) <= cap && n <= cap - (a - base) / sizeof(float);
}

int ao_op16_in_arena(const ao_operand16 *o, const float *p, size_t n)
{
    return inside(p, n, (uintptr_t)o->arena, o->arena_floats);
}

const void *ao_op16_shared_copy(const ao_operand16 *o, const float *p, size_t n)
{
    for (int i = 0; i < o->nshared; i++) {
        const shared_range *r = &o->shared[i];
        if (r->type == o->half && inside(p, n, r->src, r->n))
            return half_at((void *)r->half, ((uintptr_t)p - r->src) / sizeof(float));
    }
    return NULL;
}

void ao_op16_stage_weights(ao_operand16 *o, ao_stream *s, const ao_op16_range *r, int count)
{
    o->nstaged = 0;
    o->nprepared = 0;
    if (o->half == AO_F32) return;
    size_t used = 0;
    for (int i = 0; i < count; i++) {
        const void *dst = ao_op16_shared_copy(o, r[i].p, r[i].n);
        if (!dst) {
            if (used + r[i].n > o->w16_cap)
                ao_fatal(AO_EXIT_FAIL, "model", "16-bit weight copy: %zu floats exceed its %zu",
                         used + r[i].n, o->w16_cap);
            dst = half_at(o->w16, used);
            AO_CUDA_CHECK(
                ao_cuda_cast((void *)dst, o->half, r[i].p, AO_F32, r[i].n, ao_cuda_stream(s)));
            used += ao_op16_align(r[i].n);
        }
        o->staged[o->nstaged++] = (staged_range){(uintptr_t)r[i].p, r[i].n, dst};
    }
}

/* Whether arena floats [off, off + n) are current in the twin. */
static int is_prepared(const ao_operand16 *o, size_t off, size_t n)
{
    for (int i = 0; i < o->nprepared; i++)
        if (off >= o->prepared[i].off && off - o->prepared[i].off <= o->prepared[i].n &&
            n <= o->prepared[i].n - (off - o->prepared[i].off))
            return 1;
    return 0;
}

void ao_op16_mark_current(ao_operand16 *o, ao_stream *s, const float *p, size_t n, int cast)
{
    if (o->half == AO_F32 || !ao_op16_in_arena(o, p, n)) return;
    const size_t off = (size_t)(p - o->arena);
    if (is_prepared(o, off, n)) return;
    if (o->nprepared == MAX_PREPARED)
        ao_fatal(AO_EXIT_FAIL, "model", "more than %d prepared 16-bit operands", MAX_PREPARED);
    if (cast)
        AO_CUDA_CHECK(
            ao_cuda_cast(half_at(o->twin, off), o->half, p, AO_F32, n, ao_cuda_stream(s)));
    o->prepared[o->nprepared++] = (prepared_range){off, n};
}

void ao_op16_prepare(ao_operand16 *o, ao_stream *s, const float *p, size_t n)
{
    ao_op16_mark_current(o, s, p, n, 1);
}

void *ao_op16_twin_of(const ao_operand16 *o, const float *p)
{
    return half_at(o->twin, (size_t)(p - o->arena));
}

void *ao_op16_twin_or_null(const ao_operand16 *o, const float *p)
{
    return o->half != AO_F32 ? ao_op16_twin_of(o, p) : NULL;
}

const void *ao_op16_input_of(const ao_operand16 *o, const float *p, int in16, ao_dtype *type)
{
    *type = in16 ? o->half : AO_F32;
    return in16 ? ao_op16_twin_of(o, p) : (const void *)p;
}

float *ao_op16_fp32_or_null(const ao_operand16 *o, float *p)
{
    return o->half != AO_F32 ? NULL : p;
}

const void *ao_op16_staged_copy(const ao_operand16 *o, const float *p, size_t span)
{
    for (int i = 0; i < o->nstaged; i++) {
        const staged_range *r = &o->staged[i];
        if (inside(p, span, r->src, r->n))
            return half_at((void *)r->dst, ((uintptr_t)p - r->src) / sizeof(float));
    }
    return NULL;
}

const void *ao_op16_operand(const ao_operand16 *o, ao_stream *s, const float *p, size_t span,
                            size_t *outside_used)
{
    cudaStream_t cs = ao_cuda_stream(s);
    if (ao_op16_in_arena(o, p, span)) {
        const size_t off = (size_t)(p - o->arena);
        void *t = half_at(o->twin, off);
        if (!is_prepared(o, off, span))
            AO_CUDA_CHECK(ao_cuda_cast(t, o->half, p, AO_F32, span, cs));
        return t;
    }
    const void *w = ao_op16_staged_copy(o, p, span);
    if (w) return w;
    if (ao_op16_align(span) > o->outside_cap - *outside_used)
        ao_fatal(AO_EXIT_FAIL, "model",
                 "16-bit GEMM operand of %zu floats outside the activations and the staged "
                 "weights exceeds the %zu-float copy buffer",
                 span, o->outside_cap - *outside_used);
    void *t = half_at(o->outside, *outside_used);
    *outside_used += ao_op16_align(span);
    AO_CUDA_CHECK(ao_cuda_cast(t, o->half, p, AO_F32, span, cs));
    return t;
}

void ao_op16_alloc(ao_operand16 *o, ao_device *dev, size_t w16_cap, size_t outside_cap)
{
    o->twin = ao_dev_alloc(dev, 2 * o->arena_floats);
    o->w16_cap = w16_cap;
    o->w16 = ao_dev_alloc(dev, 2 * o->w16_cap);
    o->outside_cap = outside_cap;
    o->outside = ao_dev_alloc(dev, 2 * o->outside_cap);
}

void ao_op16_free(ao_operand16 *o, ao_device *dev)
{
    if (o->twin) ao_dev_free(dev, o->twin);
    if (o->w16) ao_dev_free(dev, o->w16);
    if (o->outside) ao_dev_free(dev, o->outside);
}

void ao_op16_share(ao_operand16 *o, const float *fp32, const void *half, ao_dtype type, size_t n)
{
    if (o->nshared == MAX_SHARED)
        ao_fatal(AO_EXIT_FAIL, "model", "more than %d shared 16-bit parameter buffers", MAX_SHARED);
    o->shared[o->nshared++] = (shared_range){(uintptr_t)fp32, n, half, type};
}
