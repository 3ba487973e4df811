/* Inside sweep/: the array helpers that spec.c (reading and checking a sweep
 * file) and plan.c (the plan and its argv) share. Not for use outside
 * src/sweep/. */
#ifndef AORTA_SWEEP_STRS_H
#define AORTA_SWEEP_STRS_H

#include <stddef.h>
#include <stdlib.h>

#include "core/error.h"

/* Room for element n of an array grown by doubling (at n = 0, 1, 2, 4, ...),
 * so planning N points costs O(N), not N reallocations. */
static inline void *grow(void *a, int n, size_t elem)
{
    if (n & (n - 1)) return a;
    return ao_realloc(a, (size_t)(n ? 2 * n : 1) * elem);
}

/* Append to a NULL-terminated array that push alone has grown. */
static inline void push(char ***vals, int *n, char *v)
{
    *vals = grow(*vals, *n + 1, sizeof **vals);
    (*vals)[(*n)++] = v;
    (*vals)[*n] = NULL;
}

static inline void free_strs(char **v, int n)
{
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

#endif
