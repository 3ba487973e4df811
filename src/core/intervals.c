#include <stdlib.h>

#include "core/intervals.h"

static int by_start(const void *pa, const void *pb)
{
    const ao_ival *a = pa, *b = pb;
    return (a->start > b->start) - (a->start < b->start);
}

/* Timeline ops arrive nearly sorted and in small groups; insertion sort wins
 * there and qsort takes the rest. */
static void sort_by_start(ao_ival *v, size_t n)
{
    if (n > 32) {
        qsort(v, n, sizeof *v, by_start);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        ao_ival x = v[i];
        size_t j = i;
        while (j > 0 && v[j - 1].start > x.start) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* Append x to the normalized prefix out[0..n), merging when it overlaps or
 * touches the last interval; x.start must be >= the last start. */
static size_t append_merge(ao_ival *out, size_t n, ao_ival x)
{
    if (n > 0 && x.start <= out[n - 1].end) {
        if (x.end > out[n - 1].end) out[n - 1].end = x.end;
        return n;
    }
    out[n] = x;
    return n + 1;
}

size_t ao_iv_normalize(ao_ival *v, size_t n)
{
    size_t m = 0;
    int sorted = 1;
    for (size_t i = 0; i < n; i++) {
        if (!(v[i].end > v[i].start)) continue;
        if (m > 0 && v[i].start < v[m - 1].start) sorted = 0;
        v[m++] = v[i];
    }
    if (!sorted) sort_by_start(v, m);
    size_t k = 0;
    for (size_t i = 0; i < m; i++) k = append_merge(v, k, v[i]);
    return k;
}

size_t ao_iv_union(const ao_ival *a, size_t na, const ao_ival *b, size_t nb, ao_ival *out)
{
    size_t i = 0, j = 0, k = 0;
    while (i < na || j < nb) {
        ao_ival x = (j >= nb || (i < na && a[i].start <= b[j].start)) ? a[i++] : b[j++];
        k = append_merge(out, k, x);
    }
    return k;
}

size_t ao_iv_intersect(const ao_ival *a, size_t na, const ao_ival *b, size_t nb, ao_ival *out)
{
    size_t i = 0, j = 0, k = 0;
    while (i < na && j < nb) {
        double lo = a[i].start > b[j].start ? a[i].start : b[j].start;
        double hi = a[i].end < b[j].end ? a[i].end : b[j].end;
        if (hi > lo) out[k++] = (ao_ival){lo, hi};
        if (a[i].end < b[j].end)
            i++;
        else
            j++;
    }
    return k;
}

double ao_iv_intersect_length(const ao_ival *a, size_t na, const ao_ival *b, size_t nb)
{
    size_t i = 0, j = 0;
    double total = 0;
    while (i < na && j < nb) {
        double lo = a[i].start > b[j].start ? a[i].start : b[j].start;
        double hi = a[i].end < b[j].end ? a[i].end : b[j].end;
        if (hi > lo) total += hi - lo;
        if (a[i].end < b[j].end)
            i++;
        else
            j++;
    }
    return total;
}

size_t ao_iv_subtract(const ao_ival *a, size_t na, const ao_ival *b, size_t nb, ao_ival *out)
{
    size_t j = 0, k = 0;
    for (size_t i = 0; i < na; i++) {
        double s = a[i].start, e = a[i].end;
        while (j < nb && b[j].end <= s) j++;
        /* b[j] may reach past e into a[i+1], so the scan below does not
         * consume the last b interval it looks at. */
        size_t q = j;
        while (q < nb && b[q].start < e) {
            if (b[q].start > s) out[k++] = (ao_ival){s, b[q].start};
            if (b[q].end >= e) {
                s = e;
                break;
            }
            s = b[q].end;
            q++;
        }
        if (e > s) out[k++] = (ao_ival){s, e};
        j = q;
    }
    return k;
}

size_t ao_iv_clip(const ao_ival *a, size_t na, double lo, double hi, ao_ival *out)
{
    if (!(hi > lo)) return 0;
    size_t k = 0;
    for (size_t i = 0; i < na; i++) {
        double s = a[i].start > lo ? a[i].start : lo;
        double e = a[i].end < hi ? a[i].end : hi;
        if (e > s) out[k++] = (ao_ival){s, e};
    }
    return k;
}

double ao_iv_length(const ao_ival *a, size_t na)
{
    double total = 0;
    for (size_t i = 0; i < na; i++) total += a[i].end - a[i].start;
    return total;
}
