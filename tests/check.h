/* Minimal checks for the GPU tests, which run on the lent GPU machine where
 * cmocka is not installed. CHECK records a failure and goes on; the test's
 * main returns check_result(). GPU_SKIP_UNLESS exits 77 (ctest: skipped). */
#ifndef AORTA_TESTS_CHECK_H
#define AORTA_TESTS_CHECK_H

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

static inline int check_result(const char *name)
{
    printf("%s: %s (%d failed checks)\n", name, check_failures ? "FAIL" : "PASS", check_failures);
    return check_failures ? 1 : 0;
}

#endif
