/* Device-memory accounting (memtrack.h). */
#include "runtime/memtrack.h"

#include <stdlib.h>

#include "core/error.h"

void ao_memtrack_init(ao_memtrack *t)
{
    pthread_mutex_init(&t->mu, NULL);
    t->ptr = NULL;
    t->bytes = NULL;
    t->n = t->cap = t->in_use = t->peak = 0;
}

void ao_memtrack_destroy(ao_memtrack *t)
{
    pthread_mutex_destroy(&t->mu);
    free(t->ptr);
    free(t->bytes);
    t->ptr = NULL;
    t->bytes = NULL;
}

void ao_memtrack_add(ao_memtrack *t, void *p, size_t bytes)
{
    pthread_mutex_lock(&t->mu);
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->ptr = ao_realloc(t->ptr, t->cap * sizeof *t->ptr);
        t->bytes = ao_realloc(t->bytes, t->cap * sizeof *t->bytes);
    }
    t->ptr[t->n] = p;
    t->bytes[t->n++] = bytes;
    t->in_use += bytes;
    if (t->in_use > t->peak) t->peak = t->in_use;
    pthread_mutex_unlock(&t->mu);
}

void ao_memtrack_remove(ao_memtrack *t, void *p)
{
    pthread_mutex_lock(&t->mu);
    /* newest first: short-lived buffers are freed soon after they are made */
    for (size_t i = t->n; i-- > 0;) {
        if (t->ptr[i] != p) continue;
        t->in_use -= t->bytes[i];
        t->ptr[i] = t->ptr[t->n - 1];
        t->bytes[i] = t->bytes[t->n - 1];
        t->n--;
        break;
    }
    pthread_mutex_unlock(&t->mu);
}

void ao_memtrack_get(ao_memtrack *t, size_t *in_use, size_t *peak)
{
    pthread_mutex_lock(&t->mu);
    *in_use = t->in_use;
    *peak = t->peak;
    pthread_mutex_unlock(&t->mu);
}
