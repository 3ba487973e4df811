/* A rank's contention evidence, summed over its records (runs/contention.h). */
#include "runs/contention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static double num(yajl_val o, const char *key)
{
    yajl_val v = ao_json_member(o, key);
    return YAJL_IS_NUMBER(v) ? ao_json_number(v) : NAN;
}

void ao_contention_evidence_add(ao_contention_evidence *ev, yajl_val c)
{
    if (!YAJL_IS_OBJECT(c)) return;
    ev->steps++;
    double bms = num(c, "beside_ms"), ums = num(c, "unpriced_ms");
    if (isfinite(bms)) ev->beside_ms += bms;
    if (isfinite(ums)) ev->unpriced_ms += ums;
    yajl_val top = ao_json_member(c, "top");
    if (!YAJL_IS_ARRAY(top)) return;
    for (size_t i = 0; i < top->u.array.len; i++) {
        yajl_val it = top->u.array.values[i];
        yajl_val name = ao_json_member(it, "name");
        if (!YAJL_IS_STRING(name)) continue;
        double bytes = num(it, "bytes"), beside = num(it, "beside"), priced = num(it, "priced");
        double alone = num(it, "alone"), bus = num(it, "beside_us"), aus = num(it, "alone_us");
        double excess = num(it, "excess_ms");
        uint64_t b = bytes > 0 ? (uint64_t)bytes : 0;
        size_t j = 0;
        while (j < ev->n && !(ev->k[j].bytes == b && strcmp(ev->k[j].name, name->u.string) == 0))
            j++;
        if (j == ev->n) {
            if (ev->n == ev->cap) {
                ev->cap = ev->cap ? 2 * ev->cap : 16;
                ev->k = ao_realloc(ev->k, ev->cap * sizeof *ev->k);
            }
            ev->k[ev->n++] = (ao_contention_kernel){.name = ao_strdup(name->u.string), .bytes = b};
        }
        ao_contention_kernel *k = &ev->k[j];
        if (beside > 0) k->beside += (long long)beside;
        if (alone >= 0) k->alone = (size_t)alone;
        if (priced > 0 && isfinite(bus) && isfinite(aus)) {
            k->priced += (long long)priced;
            k->beside_us += priced * bus;
            k->alone_us += priced * aus;
        }
        if (isfinite(excess)) k->excess_ms += excess;
    }
}

static int by_excess(const void *a, const void *b)
{
    const ao_contention_kernel *x = a, *y = b;
    if (x->excess_ms != y->excess_ms) return x->excess_ms < y->excess_ms ? 1 : -1;
    return strcmp(x->name, y->name);
}

void ao_contention_evidence_sort(ao_contention_evidence *ev)
{
    if (ev->n) qsort(ev->k, ev->n, sizeof *ev->k, by_excess);
}

void ao_contention_evidence_free(ao_contention_evidence *ev)
{
    for (size_t i = 0; i < ev->n; i++) free(ev->k[i].name);
    free(ev->k);
    memset(ev, 0, sizeof *ev);
}

void ao_contention_evidence_gen(ao_json_writer *w, const char *key,
                                const ao_contention_evidence *ev, size_t top)
{
    double steps = ev->steps ? (double)ev->steps : NAN;
    ao_jw_open(w, key);
    ao_jw_int(w, "steps", (long long)ev->steps);
    ao_jw_double(w, "beside_ms_per_step", ev->beside_ms / steps);
    ao_jw_double(w, "unpriced_ms_per_step", ev->unpriced_ms / steps);
    ao_jw_aopen(w, "kernels");
    for (size_t i = 0; i < ev->n && i < top; i++) {
        const ao_contention_kernel *k = &ev->k[i];
        ao_jw_open(w, NULL);
        ao_jw_str(w, "name", k->name);
        ao_jw_u64(w, "bytes", k->bytes);
        ao_jw_double(w, "beside_per_step", (double)k->beside / steps);
        ao_jw_double(w, "priced_per_step", (double)k->priced / steps);
        ao_jw_u64(w, "alone", k->alone);
        ao_jw_double(w, "beside_us", k->priced ? k->beside_us / (double)k->priced : NAN);
        ao_jw_double(w, "alone_us", k->priced ? k->alone_us / (double)k->priced : NAN);
        ao_jw_double(w, "ms_per_step", k->excess_ms / steps);
        ao_jw_close(w);
    }
    ao_jw_aclose(w);
    ao_jw_close(w);
}
