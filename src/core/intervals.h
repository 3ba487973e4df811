/* Interval sets on the real line (aorta uses microseconds), for §7's overlap
 * arithmetic.
 *
 * A set is a plain array of ao_ival plus a count; the caller owns the storage,
 * so the hot path (one call per iteration per rank, and the report redoing it
 * for every rank and iteration) never allocates. Intervals are half-open
 * [start, end). An interval with !(end > start) (zero length, reversed, NAN)
 * is empty and contributes nothing.
 *
 * "Normalized" means: sorted by start, every interval non-empty, and any two
 * separated by a gap of positive length (touching intervals are merged). The
 * set operations require normalized inputs and produce normalized outputs;
 * ao_iv_normalize turns any list into one. Outputs must not alias inputs,
 * except for ao_iv_clip, which may work in place. */
#ifndef AORTA_CORE_INTERVALS_H
#define AORTA_CORE_INTERVALS_H

#include <stddef.h>

typedef struct ao_ival {
    double start, end;
} ao_ival;

/* Sort and merge v[0..n) in place (any order, nested, touching, identical,
 * empty); returns the new count. O(n) when v is already sorted by start,
 * O(n log n) otherwise. */
size_t ao_iv_normalize(ao_ival *v, size_t n);

/* Set operations on normalized inputs; each writes a normalized result to out
 * and returns its count. Room needed in out: union and intersect na + nb,
 * subtract na + nb, clip na. */
size_t ao_iv_union(const ao_ival *a, size_t na, const ao_ival *b, size_t nb, ao_ival *out);
size_t ao_iv_intersect(const ao_ival *a, size_t na, const ao_ival *b, size_t nb, ao_ival *out);
size_t ao_iv_subtract(const ao_ival *a, size_t na, const ao_ival *b, size_t nb, ao_ival *out);
size_t ao_iv_clip(const ao_ival *a, size_t na, double lo, double hi, ao_ival *out);

/* Total length of a normalized set. */
double ao_iv_length(const ao_ival *a, size_t na);
/* |a ∩ b| of normalized sets without materializing the intersection. */
double ao_iv_intersect_length(const ao_ival *a, size_t na, const ao_ival *b, size_t nb);

#endif
