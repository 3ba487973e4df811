/* Minimal checks for the GPU tests, which run on the lent GPU machine where
 * cmocka is not installed. CHECK records a failure and goes on; the test's
 * main returns check_result(). GPU_SKIP_UNLESS exits 77 (ctest: skipped). */
#ifndef AORTA_TESTS_CHECK_H
#define AORTA_TESTS_CHECK_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

#define GPU_SKIP_UNLESS(cond, why)                                                                 \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("SKIP: %s\n", why);                                                             \
            exit(77);                                                                              \
        }                                                                                          \
    } while (0)

/* DESIGN §11's error metric: max |got - ref| / max |ref|. Equal values (an
 * infinity included) are no error; any other non-finite result is an
 * infinite one. */
static inline double check_rel_err(const float *got, const float *ref, size_t n)
{
    double max_err = 0, max_ref = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = got[i] == ref[i]                       ? 0.0
                         : isfinite(got[i]) && isfinite(ref[i]) ? fabs((double)got[i] - ref[i])
                                                                : INFINITY;
        if (e > max_err) max_err = e;
        if (isfinite(ref[i]) && fabs(ref[i]) > max_ref) max_ref = fabs(ref[i]);
    }
    return max_ref > 0 ? max_err / max_ref : max_err;
}

static inline int check_result(const char *name)
{
    printf("%s: %s (%d failed checks)\n", name, check_failures ? "FAIL" : "PASS", check_failures);
    return check_failures ? 1 : 0;
}

#endif
