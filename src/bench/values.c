#include "bench/values.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float f;
    if (exp == 0)
        f = ldexpf((float)man, -24);
    else if (exp == 31)
        f = man ? NAN : INFINITY;
    else
        f = ldexpf((float)(man | 0x400), (int)exp - 25);
    uint32_t bits;
    memcpy(&bits, &f, 4);
    bits |= sign;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_half(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    float a = fabsf(f);
    if (isnan(a)) return sign | 0x7e00;
    if (a >= 65520.0f) return sign | 0x7c00; /* rounds to infinity */
    if (a < ldexpf(1.0f, -14)) {             /* subnormal: units of 2^-24 */
        return sign | (uint16_t)lrintf(ldexpf(a, 24));
    }
    int e;
    float m = frexpf(a, &e);           /* a = m * 2^e, m in [0.5, 1) */
    long mant = lrintf(ldexpf(m, 11)); /* 11 significant bits, round-to-even */
    if (mant == 2048) {
        mant = 1024;
        e++;
    }
    return sign | (uint16_t)(((e + 14) << 10) | (mant & 0x3ff));
}

static float bf16_to_float(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if (isnan(f)) return (uint16_t)((bits >> 16) | 0x40);
    bits += 0x7fff + ((bits >> 16) & 1);
    return (uint16_t)(bits >> 16);
}

double ao_value_load(ao_dtype t, const void *base, size_t i)
{
    switch (t) {
    case AO_F32:
        return ((const float *)base)[i];
    case AO_F16:
        return half_to_float(((const uint16_t *)base)[i]);
    case AO_BF16:
        return bf16_to_float(((const uint16_t *)base)[i]);
    case AO_F64:
        return ((const double *)base)[i];
    case AO_I32:
        return ((const int32_t *)base)[i];
    case AO_I8:
        return ((const int8_t *)base)[i];
    case AO_U8:
        return ((const uint8_t *)base)[i];
    case AO_I64:
        return (double)((const int64_t *)base)[i];
    case AO_U32:
        return ((const uint32_t *)base)[i];
    case AO_U64:
        return (double)((const uint64_t *)base)[i];
    case AO_NDTYPES:
        break;
    }
    return NAN;
}

void ao_value_store(ao_dtype t, void *base, size_t i, double v)
{
    switch (t) {
    case AO_F32:
        ((float *)base)[i] = (float)v;
        break;
    case AO_F16:
        ((uint16_t *)base)[i] = float_to_half((float)v);
        break;
    case AO_BF16:
        ((uint16_t *)base)[i] = float_to_bf16((float)v);
        break;
    case AO_F64:
        ((double *)base)[i] = v;
        break;
    /* Narrow integers wrap, as the device's integer arithmetic does (a cast
     * of an out-of-range double straight to them would be undefined). */
    case AO_I32:
        ((int32_t *)base)[i] = (int32_t)(int64_t)v;
        break;
    case AO_I8:
        ((int8_t *)base)[i] = (int8_t)(int64_t)v;
        break;
    case AO_U8:
        ((uint8_t *)base)[i] = (uint8_t)(int64_t)v;
        break;
    case AO_I64:
        ((int64_t *)base)[i] = (int64_t)v;
        break;
    case AO_U32:
        ((uint32_t *)base)[i] = (uint32_t)(int64_t)v;
        break;
    case AO_U64:
        ((uint64_t *)base)[i] = (uint64_t)v;
        break;
    case AO_NDTYPES:
        break;
    }
}

double ao_value_round(ao_dtype t, double v)
{
    unsigned char tmp[8];
    ao_value_store(t, tmp, 0, v);
    return ao_value_load(t, tmp, 0);
}

void ao_bench_fill_random(ao_device *dev, ao_stream *s, void *dst, size_t elems, ao_dtype t,
                          unsigned seed)
{
    size_t bytes = elems * ao_dtype_size(t);
    void *host = ao_host_alloc(dev, bytes);
    for (size_t i = 0; i < elems; i++) {
        /* splitmix64's finalizer: every bit of the index reaches every bit */
        uint64_t z = ((uint64_t)seed << 40) + i + 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        ao_value_store(t, host, i, (double)(z >> 11) * 0x1p-52 - 1.0);
    }
    ao_copy_async(dev, dst, host, bytes, AO_H2D, s);
    ao_stream_sync(s);
    ao_host_free(dev, host);
}

double ao_bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double ao_bench_quantile(double *v, size_t n, double q)
{
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)floor(pos);
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
}
