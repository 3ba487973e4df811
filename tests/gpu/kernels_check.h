/* What the kernel tests share (test_kernels_cuda.c: each kernel against the
 * C reference; test_fused_cuda.c: each fused chain against the plain
 * launchers it replaces): fresh random data, device buffers, and one
 * PASS/FAIL line a check. The seed is printed and AORTA_TEST_SEED replays it. */
#ifndef AORTA_TESTS_GPU_KERNELS_CHECK_H
#define AORTA_TESTS_GPU_KERNELS_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "runtime/device.h"
#include "runtime/device_cuda.h"

static unsigned long long rng_state;

static inline float uniform(float lo, float hi)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (double)(rng_state >> 11) / 9007199254740992.0;
    return (float)(lo + (hi - lo) * u);
}

static inline float *random_floats(size_t n, float lo, float hi)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = uniform(lo, hi);
    return p;
}

static ao_device *dev;
static ao_stream *stream;

static inline cudaStream_t cs(void)
{
    return ao_cuda_stream(stream);
}

static inline void *upload(const void *host, size_t bytes)
{
    void *d = ao_dev_alloc(dev, bytes ? bytes : 4);
    if (bytes) ao_copy_async(dev, d, host, bytes, AO_H2D, stream);
    return d;
}

static inline void download(void *host, const void *d, size_t bytes)
{
    ao_copy_async(dev, host, d, bytes, AO_D2H, stream);
    ao_stream_sync(stream);
}

static inline float *download_floats(const float *d, size_t n)
{
    float *h = malloc(sizeof(float) * (n ? n : 1));
    download(h, d, sizeof(float) * n);
    return h;
}

static inline void *download_bytes(const void *d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    download(h, d, bytes);
    return h;
}

static inline void report_bits(const char *kernel, const char *shape, const void *d_got,
                               const void *d_want, size_t bytes)
{
    unsigned char *got = download_bytes(d_got, bytes), *want = download_bytes(d_want, bytes);
    size_t diff = 0;
    for (size_t i = 0; i < bytes; i++) diff += got[i] != want[i];
    printf("%s %-28s %-34s %zu of %zu bytes differ from the unfused chain (want 0)\n",
           diff ? "FAIL" : "PASS", kernel, shape, diff, bytes);
    CHECK(diff == 0, "%s %s: %zu bytes differ from the unfused chain", kernel, shape, diff);
    free(got), free(want);
}

static inline void report(const char *kernel, const char *shape, double err, double bound)
{
    const int ok = err <= bound;
    printf("%s %-28s %-26s rel err %.3g (bound %.0e)\n", ok ? "PASS" : "FAIL", kernel, shape, err,
           bound);
    CHECK(ok, "%s %s: rel err %.3g > %.0e", kernel, shape, err, bound);
}

static inline void report_same(const char *kernel, const void *a, const void *b, size_t bytes)
{
    const int same = memcmp(a, b, bytes) == 0;
    printf("%s %-28s repeat run gives the same bits: %s\n", same ? "PASS" : "FAIL", kernel,
           same ? "yes" : "no");
    CHECK(same, "%s: two runs on the same input differ", kernel);
}

#define K(call) AO_CUDA_CHECK(call)

/* The seed, cuda:0 and a stream; returns 0 when the device did not open. */
static inline int kernels_check_open(const char *test)
{
    const char *seed_env = getenv("AORTA_TEST_SEED");
    rng_state = seed_env ? strtoull(seed_env, NULL, 10)
                         : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32);
    printf("%s: seed %llu (AORTA_TEST_SEED=%llu replays it)\n", test, rng_state, rng_state);
    dev = ao_device_open("cuda", 0);
    CHECK(dev != NULL, "cannot open cuda:0");
    if (dev) stream = ao_stream_create(dev, "compute", 0);
    return dev != NULL;
}

static inline void kernels_check_close(void)
{
    ao_stream_destroy(stream);
    ao_device_close(dev);
}

#endif
